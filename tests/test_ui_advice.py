"""The model detail's Advice and Plots tabs over the real advisor, planner and plots: cards
for a catalog model on an RTX 3060, "Use these settings" changing the plan, a card the
runtime cannot load disabled with its reason, the three plots drawn (measured points from
the calibration store included) and exported as PNG and SVG."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtSvg import QSvgRenderer

from rooflight.estimate import Wishes, plan
from rooflight.estimate.advise import Variant, advise
from test_ui_support import cpu_box, make_window, rtx3060, wait_idle, wait_ranked

ADVICE, PLOTS = 1, 2


def open_detail(qtbot, hw, model_id: str, n_ctx: int, quant: str):
    window = make_window(qtbot, hw)
    page = wait_ranked(qtbot, window)
    assert page.select_model(model_id)
    detail = page.detail
    qtbot.waitUntil(lambda: detail.estimate is not None)
    if detail.n_ctx != n_ctx:
        with qtbot.waitSignal(detail.replanned, timeout=10000):
            detail.set_context(n_ctx)
    detail.select_quant(quant)
    qtbot.waitUntil(lambda: detail.estimate is not None and detail.current.quant == quant
                    and detail.estimate.config.n_ctx == n_ctx)
    wait_idle(qtbot, window)
    return window, detail


def show_advice(qtbot, detail):
    with qtbot.waitSignal(detail.advice.advised, timeout=10000):
        detail.tabs.setCurrentIndex(ADVICE)
    return detail.advice


def test_advice_cards_on_an_rtx_3060_and_use_these_settings(qtbot):
    hw = rtx3060()
    window, detail = open_detail(qtbot, hw, "qwen3-14b", 32768, "Q4_K_M")
    assert detail.estimate.fit == "partial_gpu"
    panel = show_advice(qtbot, detail)

    # the cards are the advisor's own, for the plan on screen
    variants = tuple(Variant(o.quant, o.estimate.spec) for o in detail.options)
    expected = advise(variants, hw, Wishes(n_ctx=32768), current="Q4_K_M")
    assert [v.card.title for v in panel.cards] == [c.title for c in expected.cards]
    assert panel.pareto.rowCount() == len(expected.pareto) > 0
    assert "for Q4_K_M at 32K context on this machine" in panel.summary.text()
    kv = next(v for v in panel.cards if v.card.kind == "kv_type")
    assert "fit entirely on the GPU" in kv.title.text()
    assert "PR #7412" in kv.quality.text()  # the quality effect names its source
    assert kv.button.isEnabled() and "KV cache q8_0" in kv.button.toolTip()

    qtbot.mouseClick(kv.button, Qt.MouseButton.LeftButton)
    assert detail.tabs.currentIndex() == 0  # back to the plan, which now uses the card's settings
    qtbot.waitUntil(lambda: detail.estimate is not None and detail.estimate.config.kv_type == "q8_0",
                    timeout=10000)
    e = detail.estimate
    assert e.config.flash_attn and e.fit == "full_gpu" and e.config.n_ctx == 32768
    assert e.performance.decode_tok_s == pytest.approx(kv.card.after["decode_tok_s"], rel=1e-3)
    assert e.memory.total_bytes == kv.card.after["memory_bytes"]
    assert detail.current.quant == "Q4_K_M"
    assert "KV cache q8_0" in detail.config.text()
    assert not detail.tuning_note.isHidden() and "KV cache q8_0" in detail.tuning_note.text()
    # every quant in the table is planned with it too
    assert {o.estimate.config.kv_type for o in detail.options} == {"q8_0"}

    # the advice now starts from the new plan: no KV-cache card any more
    panel = show_advice(qtbot, detail)
    assert all(v.card.kind != "kv_type" for v in panel.cards)
    assert not panel.applied.isHidden()

    # a card that changes the file and the context moves the table and the slider
    detail.tabs.setCurrentIndex(0)
    detail.reset_tuning()
    qtbot.waitUntil(lambda: detail.estimate is not None and detail.estimate.config.kv_type == "f16", timeout=10000)
    assert detail.tuning_note.isHidden()
    panel = show_advice(qtbot, detail)
    ctx_card = next(v for v in panel.cards if v.card.kind == "context")
    qtbot.mouseClick(ctx_card.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: detail.estimate is not None and detail.estimate.config.n_ctx == 16384, timeout=10000)
    assert detail.n_ctx == 16384 and detail.ctx_value.text() == "16K tokens"
    assert detail.estimate.fit == ctx_card.card.after["fit"] == "full_gpu"


def test_experts_in_ram_card_is_enabled_and_applies_its_settings(qtbot):
    # an MoE model that does not fit a 12 GB GPU beside DDR4 at 30 GB/s: keeping the experts
    # of the first layers in RAM is faster than a layer split, and the runtime can load it
    from test_ui_support import profile

    hw = profile([{"name": "RTX 3060"}])
    hw = replace(hw, cpu=replace(hw.cpu, ram_bandwidth_gbs=30.0))
    _window, detail = open_detail(qtbot, hw, "qwen3-30b-a3b", 8192, "Q4_K_M")
    panel = show_advice(qtbot, detail)
    experts = next(v for v in panel.cards if v.card.kind == "experts")
    assert experts.card.runtime_supported and experts.button.isEnabled()
    n = experts.card.settings["n_cpu_moe"]
    assert n > 0
    qtbot.mouseClick(experts.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: detail.estimate is not None and detail.estimate.config.n_cpu_moe == n, timeout=10000)
    assert detail.estimate.config == experts.card.candidate.estimate.config


def test_plots_tab_draws_the_plan_and_exports(qtbot, tmp_path):
    from rooflight.store.calibration import CalibrationStore, Measurement, machine_key

    hw = cpu_box()
    window, detail = open_detail(qtbot, hw, "qwen3-0.6b", 8192, "Q8_0")
    spec = detail.current.estimate.spec
    # a run of this file on this machine, as a chat or a stress test stores it
    store = CalibrationStore()
    store.add(Measurement(machine_key(hw), hw.backend, spec.name, spec.file_type, 4096, 0, 4000, 96,
                          40.0, 31.5, 250.0, 198.0, 8))
    store.close()
    plots = detail.plots
    with qtbot.waitSignal(plots.plotted, timeout=20000):
        detail.tabs.setCurrentIndex(PLOTS)
    memory, speed, quants = (plots.panels[k] for k in ("memory", "speed", "quants"))
    assert len(memory.charts()) == 1 and memory.charts()[0].title() == "RAM (CPU)"  # one chart per device
    assert memory.points[0].n_ctx == 256 and memory.points[-1].n_ctx == spec.context_length
    assert memory.title().startswith("Qwen3 0.6B Q8_0: memory by context on CPU only")
    assert len(speed.charts()) == 2
    assert [(m.n_ctx, m.decode_tok_s) for m in speed.measured] == [(4096, 31.5)]
    assert "1 measured point(s)" in plots.status.text()
    assert [q.quant for q in quants.points] and len(quants.charts()) == 3
    assert {q.quant for q in quants.points} == {o.quant for o in detail.options}
    # the predicted line is the planner's at that context
    p = speed.points[len(speed.points) // 2]
    direct = plan(spec, hw, Wishes(n_ctx=p.n_ctx, prompt_tokens=p.prompt_tokens, gen_tokens=p.gen_tokens))
    assert p.decode_tok_s == pytest.approx(direct.performance.decode_tok_s)

    plots.kind_buttons["speed"].click()
    assert plots.current_panel() is speed and plots.stack.currentWidget().isVisible()
    png = plots.export(tmp_path / "speed.png")
    svg = plots.export(tmp_path / "memory.svg", "memory")
    image = QImage(str(png))
    assert image.width() > 400 and image.height() > 200
    assert QSvgRenderer(str(svg)).isValid()
    text = svg.read_text()
    assert text.count("<path") + text.count("<polyline") > 10  # areas, lines, grid
    window.close()
