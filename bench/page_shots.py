"""What bench/screenshots.py takes of each page, keyed by page key.

A page without an entry is taken as it is (`<key>.png`), so a new page in ui/pages/PAGES gets
its picture with no screenshot code; an entry here stages real states through the pages'
public methods: the machine and an RTX 4090 "what if", the ranked models and a model's
detail tabs, a chat with the real Gemma-3-270M (tests/gemma_model.py) and its live monitor,
real downloads from the test suite's Hub stand-in (bench/downloads_shot.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QAbstractItemView

from shot import Shot, Wait

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from downloads_shot import downloads_shot  # noqa: E402
from gemma_model import gemma_270m_path  # noqa: E402 - the test suite's Gemma-3-270M

CHAT_QUESTIONS = ("What is the capital of France?", "And what is the capital of Germany?")
# the Stress tab: a real run of the catalog's Gemma 3 270M at four contexts
STRESS_MODEL, STRESS_QUANT = "gemma-3-270m", "Q4_K_M"
STRESS_CONTEXTS = (512, 1024, 2048, 4096)
# what_if.png's GPU (README's shot); another table name shows another planned machine
WHAT_IF_GPU = os.environ.get("ROOFLIGHT_SHOT_WHAT_IF_GPU", "NVIDIA GeForce RTX 4090")


def machine_shots(page) -> list[Shot]:
    from rooflight.ui.whatif import WhatIf

    def detected(wait: Wait) -> None:
        wait(lambda: page.ctx.machine.profile is not None)

    def what_if(wait: Wait) -> None:
        detected(wait)
        page.set_what_if(WhatIf(gpu=WHAT_IF_GPU))

    return [Shot("machine.png", detected),
            Shot("what_if.png", what_if, lambda wait: page.reset_what_if())]


def models_shots(page) -> list[Shot]:
    def ranked(wait: Wait) -> None:
        wait(lambda: bool(page.model.rows))
        page.table.clearSelection()

    def detail(wait: Wait) -> None:
        wait(lambda: bool(page.model.rows))
        pick = page.top_pick or page.model.rows[0]
        page.select_model(pick.model.id)
        wait(lambda: page.detail.estimate is not None)

    return [Shot("models.png", ranked), Shot("model_detail.png", detail), *model_detail_shots(page)]


def _detail_on_top(page) -> None:
    """The detail takes the page, the model's own row in the little table left above it."""
    page.splitter.setSizes([110, 2000])
    rows = page.table.selectionModel().selectedRows()
    if rows:
        page.table.scrollTo(rows[0], QAbstractItemView.ScrollHint.PositionAtTop)


def model_detail_shots(page) -> list[Shot]:
    """The Advice and Plots tabs of the Models page's detail (a 14B model at 32K context on an
    RTX 3060, a what-if machine where the advisor has GPU levers to show), and the Stress tab
    (a real run on this machine)."""
    from rooflight.ui.whatif import WhatIf

    detail, ctx = page.detail, page.ctx
    state: dict = {}

    def open_tab(tab: int, wait: Wait) -> None:
        wait(lambda: bool(page.model.rows) and ctx.machine.profile is not None)
        if "sizes" not in state:
            state["sizes"] = page.splitter.sizes()
            state["what_if"] = ctx.machine.what_if
            ctx.machine.set_what_if(WhatIf(gpu="NVIDIA GeForce RTX 3060"))
            wait(lambda: not page.ranking and bool(page.model.rows))
            page.select_model("qwen3-14b")
            wait(lambda: detail.estimate is not None)
            detail.set_context(32768)
            wait(lambda: detail.n_ctx == 32768 and detail.estimate is not None
                 and detail.estimate.config.n_ctx == 32768 and ctx.runner.active == 0)
            detail.select_quant("Q4_K_M")  # the file most people download
            wait(lambda: detail.current is not None and detail.current.quant == "Q4_K_M")
        _detail_on_top(page)
        if tab == 2:  # two charts side by side: the whole plot on screen
            detail.plots.kind_buttons["speed"].setChecked(True)
        detail.tabs.setCurrentIndex(tab)
        panel = detail.advice if tab == 1 else detail.plots
        wait(lambda: not panel.busy and ctx.runner.active == 0)

    def done(wait: Wait) -> None:
        detail.plots.kind_buttons["memory"].setChecked(True)
        detail.tabs.setCurrentIndex(0)
        page.splitter.setSizes(state.pop("sizes"))
        ctx.machine.set_what_if(state.pop("what_if"))
        wait(lambda: not page.ranking)

    def stress(wait: Wait) -> None:
        # the Gemma 3 270M file the tests use (the base model) stands in for the catalog's
        # instruction-tuned file of the same size, and the picture says so
        from rooflight.catalog import find_model
        from rooflight.estimate import Wishes

        wait(lambda: bool(page.model.rows) and ctx.machine.detected is not None and not page.ranking)
        repo, file = find_model(STRESS_MODEL).file_for(STRESS_QUANT)
        state["installed"] = (repo, file, ctx.installed.path_for(repo, file))
        state["sizes"] = page.splitter.sizes()
        state["intro"] = detail.stress.intro.text()
        ctx.installed.add(repo, file, str(gemma_270m_path()))
        page.select_model(STRESS_MODEL)
        wait(lambda: detail.estimate is not None)
        detail.select_quant(STRESS_QUANT)
        wait(lambda: detail.current is not None and detail.current.quant == STRESS_QUANT
             and ctx.runner.active == 0)
        # one thread: this 2-vCPU machine's second core is shared (two threads measured
        # anywhere from 0.6 to 84 tok/s decode in a row; one thread, a steady ~75)
        detail.apply_settings(STRESS_QUANT, detail.n_ctx, Wishes(n_threads=1))
        wait(lambda: detail.estimate is not None and ctx.runner.active == 0)
        _detail_on_top(page)
        detail.tabs.setCurrentIndex(3)
        detail.stress.intro.setText(f"Screenshot: {gemma_270m_path().name} (Gemma 3 270M base, bundled for "
                                    "the tests) stands in for the instruction-tuned file of the same size, "
                                    "measured on this machine at four contexts with one thread.")
        detail.stress.contexts = list(STRESS_CONTEXTS)
        detail.stress.start()
        wait(lambda: not detail.stress.running, 900)

    def stress_done(wait: Wait) -> None:
        detail.reset_tuning()
        detail.stress.contexts = None
        detail.stress.intro.setText(state.pop("intro"))
        detail.tabs.setCurrentIndex(0)
        page.splitter.setSizes(state.pop("sizes"))
        repo, file, before = state.pop("installed")
        if before is None:
            ctx.installed.remove(repo, file)
        else:
            ctx.installed.add(repo, file, before)

    return [Shot("model_detail_advice.png", lambda wait: open_tab(1, wait)),
            Shot("model_detail_plots.png", lambda wait: open_tab(2, wait), done),
            Shot("model_detail_stress.png", stress, stress_done)]


def chat_shots(page) -> list[Shot]:
    def conversation(wait: Wait) -> None:
        wait(lambda: page.ctx.machine.detected is not None, 120)
        page.load_panel.select_path(str(gemma_270m_path()))
        wait(lambda: page.load_panel.lp is not None and not page.load_panel.planning, 60)
        page.load(page.load_panel.lp)
        wait(lambda: page.session is not None or not page.loading, 120)
        if page.session is None:
            raise RuntimeError("the Gemma-3-270M model did not load")
        # greedy (shown in the settings): a 270M base model answers best that way,
        # and the screenshot shows the same replies every run
        page.sampling.temperature.setValue(0.0)
        for question in CHAT_QUESTIONS:
            page.composer.setPlainText(question)
            page.send()
            wait(lambda: not page.generating, 120)

    def monitor(wait: Wait) -> None:
        if page.engine is None:
            conversation(wait)
        page.tabs.setCurrentWidget(page.monitor_tab)
        wait(lambda: len(page.monitor.samples()) >= 10, 30)  # a few seconds of history

    def back(_wait: Wait) -> None:
        page.tabs.setCurrentIndex(0)

    return [Shot("chat.png", conversation), Shot("chat_monitor.png", monitor, back)]


SHOTS: dict[str, Callable[..., list[Shot]]] = {
    "machine": machine_shots,
    "models": models_shots,
    "downloads": lambda page: [downloads_shot(page)],
    "chat": chat_shots,
}


def shots_for(page) -> list[Shot]:
    """The shots of one page: its entry in SHOTS, else the page as it is."""
    special = SHOTS.get(page.key)
    return special(page) if special is not None else [Shot(f"{page.key}.png")]
