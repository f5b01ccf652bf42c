"""The model detail's Stress test tab over real llama.cpp on a generated model: each point
(measured beside the plan, llama.cpp's memory beside the plan's) in the table and as a
measured dot on the speed plot, Stop, the clean stop where the plan runs out of memory,
and the button disabled (with the reason) for a what-if machine or a file not on disk."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from rooflight.catalog import find_model
from rooflight.estimate import Wishes
from rooflight.estimate.memory import cpu_margin
from rooflight.estimate.sweep import plan_at
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.ui.stress_panel import NOT_INSTALLED_TIP, WHAT_IF_TIP
from rooflight.ui.whatif import WhatIf
from test_ui_support import CPU, GiB, cpu_box, make_window, profile, wait_idle, wait_ranked

pytest.importorskip("llama_cpp")

MODEL_ID = "qwen3-0.6b"
QUANT = "Q8_0"
STRESS = 3  # the detail's tab
PLOTS = 2
ONE = Wishes(n_threads=1)  # one thread: two cores are shared with the rest of the run
BIG_CTX = 32768


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("stress") / "tiny-stress.gguf", n_vocab=512,
                       context_length=BIG_CTX)


def open_stress(qtbot, hw, path):
    """The detail of the catalog model whose Q8_0 file is `path`, one thread, Stress tab."""
    window = make_window(qtbot, hw)
    models = wait_ranked(qtbot, window)
    repo, file = find_model(MODEL_ID).file_for(QUANT)
    window.ctx.installed.add(repo, file, str(path))
    assert models.select_model(MODEL_ID)
    detail = models.detail
    qtbot.waitUntil(lambda: detail.estimate is not None)
    with qtbot.waitSignal(detail.replanned, timeout=10000):
        detail.apply_settings(QUANT, 2048, ONE)
    qtbot.waitUntil(lambda: detail.current is not None and detail.current.quant == QUANT)
    wait_idle(qtbot, window)
    detail.tabs.setCurrentIndex(STRESS)
    return window, detail, detail.stress


def run(qtbot, panel, contexts):
    panel.contexts = contexts
    assert panel.run_button.isEnabled()
    with qtbot.waitSignal(panel.finished, timeout=60000) as done:
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
        assert panel.running and panel.stop_button.isVisible() and not panel.run_button.isEnabled()
    return done.args[0]


def test_points_fill_the_table_and_the_speed_plot_and_stop_works(qtbot, tiny):
    window, detail, panel = open_stress(qtbot, cpu_box(), tiny)
    result = run(qtbot, panel, [256, 512])
    assert result is not None and result.stopped is None
    assert [p.n_ctx for p in result.points] == [256, 512] and panel.points == list(result.points)
    assert panel.table.rowCount() == 2
    for row, point in enumerate(result.points):
        assert point.planned.estimate.config.n_threads == 1  # the Plan tab's settings
        assert point.measured.decode_tok_s > 0 and point.measured.prefill_tok_s > 0
        assert point.memory.total_bytes > 0  # llama.cpp's own buffer report
        cells = [panel.table.item(row, c).text() for c in range(panel.table.columnCount())]
        assert cells[0] == str(point.n_ctx)
        assert "(plan " in cells[2] and "(plan " in cells[3] and "(plan " in cells[4]
        assert cells[4].endswith(" MB)")
    # a --hardware-like profile is not this machine: nothing goes into its calibration
    assert not result.stored and "Not stored" in panel.status.text()
    assert panel.stop_note.isHidden() and not panel.stop_button.isVisible()

    # the speed plot shows them as measured dots
    plots = detail.plots
    with qtbot.waitSignal(plots.plotted, timeout=20000):
        detail.tabs.setCurrentIndex(PLOTS)
    speed = plots.panels["speed"]
    assert [(m.n_ctx, m.decode_tok_s) for m in speed.measured] == [
        (p.prompt_tokens + p.gen_tokens, p.measured.decode_tok_s) for p in result.points]
    assert "2 measured point(s)" in plots.status.text()

    # Stop, pressed when the first point lands: the context being measured then (if any)
    # completes, and the run ends before the next one, saying so. (The worker may be a
    # point or two further than the GUI has shown when the suite loads the machine: many
    # short contexts leave it room.)
    detail.tabs.setCurrentIndex(STRESS)
    contexts = [256 * k for k in range(1, 11)]

    def press_stop(_point) -> None:
        if panel.stop_button.isEnabled():
            qtbot.mouseClick(panel.stop_button, Qt.MouseButton.LeftButton)
            assert "stopping" in panel.status.text() and not panel.stop_button.isEnabled()

    panel.point_measured.connect(press_stop)
    result = run(qtbot, panel, contexts)
    panel.point_measured.disconnect(press_stop)
    measured = [p.n_ctx for p in result.points]
    assert 1 <= len(measured) < len(contexts) and measured == contexts[:len(measured)]
    assert result.stopped.reason == "cancelled" and result.stopped.n_ctx == contexts[len(measured)]
    assert panel.stop_note.isVisible() and panel.stop_note.text.text() == result.stopped.message
    assert panel.table.rowCount() == len(measured) and panel.run_button.isEnabled()

    # not for a what-if machine, nor for a quant that is not on disk
    window.ctx.machine.set_what_if(WhatIf(gpu="NVIDIA GeForce RTX 3060"))
    qtbot.waitUntil(lambda: not panel.run_button.isEnabled(), timeout=20000)
    assert panel.run_button.toolTip() == WHAT_IF_TIP
    window.ctx.machine.clear_what_if()
    qtbot.waitUntil(lambda: panel.run_button.isEnabled(), timeout=20000)
    other = next(o.quant for o in detail.options if o.quant != QUANT)
    detail.select_quant(other)
    qtbot.waitUntil(lambda: not panel.run_button.isEnabled())
    assert panel.run_button.toolTip() == NOT_INSTALLED_TIP
    wait_idle(qtbot, window)


def test_the_run_stops_where_the_plan_runs_out_of_memory(qtbot, tiny):
    spec = load_model_spec(str(tiny))
    roomy = cpu_box()

    def need(n_ctx: int) -> int:
        return plan_at(spec, roomy, n_ctx, ONE).estimate.memory.device("cpu").total_bytes

    small, big = need(512), need(BIG_CTX)
    assert big > small + (1 << 20)
    total = 4 * GiB
    tight = profile(cpu={**CPU, "ram_total_bytes": total,
                         "ram_available_bytes": cpu_margin(total) + (small + big) // 2})
    _window, _detail, panel = open_stress(qtbot, tight, tiny)
    result = run(qtbot, panel, [256, 512, BIG_CTX])
    assert [p.n_ctx for p in result.points] == [256, 512]  # measured up to where it fits
    stop = result.stopped
    assert stop.reason == "too_large" and stop.n_ctx == BIG_CTX
    assert stop.message.startswith(f"At {BIG_CTX} tokens the plan does not fit")
    assert panel.stop_note.isVisible() and panel.stop_note.text.text() == stop.message
    assert panel.table.rowCount() == 2


def test_closing_the_window_mid_run_ends_it_cleanly(qtbot, tiny):
    window, _detail, panel = open_stress(qtbot, cpu_box(), tiny)
    panel.contexts = [256, 512, 1024, 2048]
    with qtbot.waitSignal(panel.point_measured, timeout=30000):
        panel.start()
    task = panel._latest.task
    assert task is not None
    window.close()  # the point being measured completes, the run ends before the next
    assert task.finished
