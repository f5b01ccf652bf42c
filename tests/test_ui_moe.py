"""The "Experts in RAM" control: in the model detail (MoE models only, memory bars and speeds
follow it, Auto says which placement it took) and in the Chat load panel (the load keeps
exactly those experts on the CPU, as llama.cpp's log says)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from rooflight.gguf.synthetic import write_model
from rooflight.ui.pages.model_detail import device_uses
from test_ui_advice import open_detail
from test_ui_support import cpu_box, make_window, rtx3060

pytest.importorskip("llama_cpp")


def _choose(qtbot, detail, value):
    box = detail.experts
    with qtbot.waitSignal(detail.replanned, timeout=10000):
        box.setCurrentIndex(box.findData(value))
    qtbot.waitUntil(lambda: detail.estimate is not None and detail.wishes.n_cpu_moe == value, timeout=10000)


def test_detail_experts_in_ram_moves_the_bars_and_speeds(qtbot):
    _window, detail = open_detail(qtbot, rtx3060(), "qwen3-30b-a3b", 8192, "Q4_K_M")
    assert detail.experts_row.isVisibleTo(detail) and detail.experts.value() == 0
    before = detail.estimate
    assert before.config.n_cpu_moe == 0
    _choose(qtbot, detail, 20)
    qtbot.waitUntil(lambda: detail.estimate.config.n_cpu_moe == 20, timeout=10000)
    after = detail.estimate
    # experts leave the GPU: more layers fit there, the bars and the speed line follow
    assert after.config.n_gpu_layers > before.config.n_gpu_layers
    assert after.memory.device("cpu").weights_bytes != before.memory.device("cpu").weights_bytes
    assert "MoE experts of 20 layers in RAM" in detail.config.text()
    assert detail.speed.text() and after.performance.decode_tok_s != before.performance.decode_tok_s
    profile = detail.ctx.machine.profile
    assert device_uses(after, profile) != device_uses(before, profile)  # what the memory bar draws
    # Auto: the planner's choice, said in words under the plan
    _choose(qtbot, detail, "auto")
    est = detail.estimate
    assert est.moe_choice is not None and est.moe_choice.reason in detail.config.text()
    # every quant in the table was planned with the same setting
    assert all(o.estimate.moe_choice is not None for o in detail.options)
    # Reset puts it back
    detail.reset_tuning()
    qtbot.waitUntil(lambda: detail.experts.value() == 0 and detail.estimate.config.n_cpu_moe == 0, timeout=10000)


def test_detail_hides_the_control_for_a_dense_model(qtbot):
    _window, detail = open_detail(qtbot, rtx3060(), "qwen3-14b", 8192, "Q4_K_M")
    assert not detail.experts_row.isVisibleTo(detail)


def test_chat_load_panel_loads_with_the_experts_chosen(qtbot, tmp_path):
    path = write_model(tmp_path / "tiny-moe.gguf", arch="qwen3moe", n_layer=4, n_embd=128, n_head=4, n_head_kv=2,
                       n_ff=128, n_vocab=800, n_expert=8, n_expert_used=2, context_length=2048)
    window = make_window(qtbot, cpu_box())
    page = window.page("chat")
    panel = page.load_panel
    page.chat_with(str(path))
    qtbot.waitUntil(lambda: panel.lp is not None and panel._task is None, timeout=30000)
    assert panel.experts.isVisibleTo(panel) and panel.experts.value() == 0
    panel.experts.setCurrentIndex(panel.experts.findData(2))
    qtbot.waitUntil(lambda: panel.lp is not None and panel.lp.config.n_cpu_moe == 2 and panel._task is None,
                    timeout=10000)
    assert "MoE experts of 2 layers in RAM" in panel.estimate.text()
    qtbot.mouseClick(panel.load_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.session is not None, timeout=60000)
    engine = page.session.engine
    assert engine.config.n_cpu_moe == 2
    assert {t.split(".")[1] for t in engine.buffers.overridden} == {"0", "1"}
    assert all(b.startswith("CPU") for b in engine.buffers.overridden.values())
