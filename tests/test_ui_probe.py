"""This machine's "Measure this machine" action: offered once, runs the real probe in a
worker with progress and time left, and Cancel stops it with nothing stored."""

from __future__ import annotations

import pytest

from rooflight.store.probes import probe_status
from rooflight.store.settings import Settings
from test_ui_support import make_window


@pytest.fixture(scope="module")
def llama_cpp():
    return pytest.importorskip("llama_cpp")


def _detected():
    from rooflight.hardware import detect

    return detect()


def test_the_probe_is_offered_once(qtbot):
    hw = _detected()
    window = make_window(qtbot, hw)
    panel = window.page("machine").probe_panel
    qtbot.waitUntil(lambda: panel.status is not None, timeout=10000)
    assert panel.status.state == "none"
    assert panel.offer.isVisibleTo(panel) and panel.not_now.isVisibleTo(panel)
    assert window.ctx.settings.probe_offered is True  # saved: the next start does not ask
    qtbot.mouseClick(panel.not_now, pytest.importorskip("PySide6.QtCore").Qt.MouseButton.LeftButton)
    assert not panel.offer.isVisibleTo(panel)

    again = make_window(qtbot, hw, settings=Settings(probe_offered=True))
    panel2 = again.page("machine").probe_panel
    qtbot.waitUntil(lambda: panel2.status is not None, timeout=10000)
    assert not panel2.offer.isVisibleTo(panel2)
    assert panel2.measure_button.isEnabled() and "8 of 10" in panel2.measure_button.toolTip()


def test_probe_runs_in_a_worker_with_progress_and_cancel(qtbot, llama_cpp):
    from PySide6.QtCore import QThread

    hw = _detected()
    window = make_window(qtbot, hw, settings=Settings(probe_offered=True))
    panel = window.page("machine").probe_panel
    qtbot.waitUntil(lambda: panel.status is not None, timeout=10000)
    panel.probe_options = {"weight_types": ("Q4_0",), "repeats": 2}
    seen = []
    panel.progress.valueChanged.connect(seen.append)
    gui_thread = QThread.currentThread()
    threads = []
    import rooflight.runtime.probe as probe_mod

    real = probe_mod.probe_machine

    def spy(*a, **k):
        threads.append(QThread.currentThread())
        return real(*a, **k)

    probe_mod.probe_machine = spy
    try:
        panel.measure_button.click()
        assert panel.task is not None and not panel.measure_button.isEnabled()
        assert panel.cancel_button.isVisibleTo(panel) and panel.progress.isVisibleTo(panel)
        # the GUI stays live while the probe runs, and shows progress and time left
        qtbot.waitUntil(lambda: any(v > 0 for v in seen), timeout=90000)
        assert "left" in panel.time_left.text()
        assert panel.progress.format()  # the step being measured
        qtbot.mouseClick(panel.cancel_button, pytest.importorskip("PySide6.QtCore").Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: panel.task is None, timeout=90000)
    finally:
        probe_mod.probe_machine = real
    assert threads and threads[0] is not gui_thread  # never on the GUI thread
    assert "Cancelled" in panel.state.text()
    assert not panel.cancel_button.isVisibleTo(panel) and panel.measure_button.isEnabled()
    assert panel.last_run is None  # nothing delivered
    assert probe_status(hw).state == "none"  # nothing stored


def test_a_stored_probe_reaches_every_estimate(qtbot, llama_cpp):
    """A reduced probe run to the end (kept even if this shared machine disturbed it): the
    panel shows the figures and the app's calibration now carries the probe."""
    hw = _detected()
    window = make_window(qtbot, hw, settings=Settings(probe_offered=True))
    panel = window.page("machine").probe_panel
    qtbot.waitUntil(lambda: panel.status is not None, timeout=10000)
    panel.probe_options = {"weight_types": ("Q4_0",), "repeats": 2, "keep_disturbed": True, "budget_s": 60.0}
    panel.measure_button.click()
    qtbot.waitUntil(lambda: panel.task is None, timeout=120000)
    assert panel.last_run is not None
    if not panel.last_run.stored:
        # only when the budget ran out before the one weight type: the panel says why
        assert panel.state.text() == panel.last_run.refused
        assert "no weight type" in panel.last_run.refused or "budget ran out" in panel.last_run.refused
        pytest.skip(f"this machine was too busy to measure one weight type in 60 s: {panel.last_run.refused}")
    assert window.ctx.machine.calibration.probe is not None
    qtbot.waitUntil(lambda: panel.status is not None and panel.status.state == "current", timeout=10000)
    assert "Q4_0" in panel.figures.text() and panel.measure_button.text() == "Measure again"
    lines = panel.figures.text().splitlines()
    # the MoE experts and the image encode, measured or why not, then the probe's notes
    assert any(line.startswith("MoE experts in prompts: ") for line in lines)
    assert any(line.startswith("Image encode") for line in lines)
    assert lines[len(lines) - len(panel.status.probe.notes):] == list(panel.status.probe.notes)
    # a reduced probe says what it left to the table
    missing = next(line for line in lines if line.startswith("Not measured (the table prices them): "))
    assert "F16" in missing and "Q4_K" in missing and "Q4_0" not in missing.split(": ", 1)[1].split(", ")


def test_the_panel_says_what_measurements_taught_the_probe(qtbot):
    """A stored probe and one bench against it (stored as rooflight bench stores it): the
    This machine page names the kernels it corrected, above the image encode line."""
    from rooflight.estimate.kernel_calibration import KernelShares
    from rooflight.runtime.build import llama_build
    from rooflight.store.calibration import CalibrationStore, Measurement, machine_key
    from rooflight.store.probes import ProbeStore
    from test_probe import _probe

    hw = _detected()
    store = ProbeStore()
    try:
        store.put(_probe(machine_key(hw), llama_build()))
    finally:
        store.close()
    db = CalibrationStore()
    try:
        db.add(Measurement(machine=machine_key(hw), backend=hw.backend, model="x", quant="Q8_0", n_ctx=2048,
                           n_gpu_layers=0, prompt_tokens=512, gen_tokens=64, predicted_decode=100.0,
                           measured_decode=90.0, predicted_prefill=1000.0, measured_prefill=1100.0, n_threads=2,
                           model_bytes=10**8, basis="probe",
                           kernels=KernelShares(decode=(("Q8_0", 1.0),), prefill=(("Q8_0", 1.0),))))
    finally:
        db.close()
    from rooflight.store.calibration import machine_calibration

    window = make_window(qtbot, hw, settings=Settings(probe_offered=True))
    panel = window.page("machine").probe_panel
    window.ctx.machine.set_calibration(machine_calibration(hw))  # as a bench or chat does: the page follows
    qtbot.waitUntil(lambda: "Corrected by" in panel.figures.text(), timeout=10000)
    lines = panel.figures.text().splitlines()
    assert "Q8_0 decode x0.90, prompt x1.10" in lines[1] and lines[-1].startswith("Image encode: ")
    assert lines[2] == "MoE experts in prompts: not measured (MoE prompts use the table's MUL_MAT_ID cost)"


def test_on_a_gpu_machine_the_card_says_the_probe_prices_cpu_plans_only():
    from rooflight.hardware import profile_from_dict
    from rooflight.ui.probe_panel import scope_line

    cpu = {"name": "Test CPU", "cores": 8, "threads": 16, "isa": ["avx2"], "ram_total_bytes": 32 * 10**9,
           "ram_available_bytes": 24 * 10**9, "ram_bandwidth_gbs": 60.0}
    gpu = {"name": "NVIDIA GeForce RTX 4090", "memory_bytes": 24 * 2**30, "free_bytes": 23 * 2**30}
    assert scope_line(profile_from_dict({"cpu": cpu, "gpus": [], "backend": "cpu"})) == ""
    line = scope_line(profile_from_dict({"cpu": cpu, "gpus": [gpu], "backend": "cuda"}))
    assert "CPU's kernels and each GPU's roofline constants" in line and "CPU's share of every plan" in line


def test_an_older_probe_status_arriving_last_is_not_shown(qtbot):
    """Two refreshes in flight (the window's first, then new measurements'): on a busy machine
    the first may finish last, and only the latest request's answer is shown."""
    window = make_window(qtbot, _detected(), settings=Settings(probe_offered=True))
    panel = window.page("machine").probe_panel
    qtbot.waitUntil(lambda: panel.status is not None, timeout=10000)
    panel.refresh()
    older = panel._status_reads.task
    panel.refresh()
    assert older.cancelled  # ui/latest.LatestTask: the runner delivers it nothing but its cancel
    qtbot.waitUntil(lambda: not panel._status_reads.running, timeout=10000)
    assert panel.status is not None and panel.state.text().startswith(panel.status.message)


def test_the_card_names_what_the_probe_left_to_the_table():
    """Every part of the probe without a stored figure is named: the weight types (ALL_TYPES)
    and an attention setting; a probe with all of them has no such line."""
    from dataclasses import replace

    from rooflight.runtime.probe_defaults import ALL_TYPES
    from rooflight.store.calibration import machine_key
    from rooflight.ui.probe_panel import unmeasured_line
    from test_probe import _probe

    probe = _probe(machine_key(_detected()), "b")
    on_only = replace(probe, attention=tuple(a for a in probe.attention if a.flash_attn))
    line = unmeasured_line(on_only)
    named = line.split(": ", 1)[1].split(", ")
    assert named[-1] == "attention with flash attention off"
    assert set(named[:-1]) == set(ALL_TYPES) - {k.weight_type for k in probe.kernels}
    full = replace(probe, kernels=tuple(replace(probe.kernels[0], weight_type=t) for t in ALL_TYPES))
    assert unmeasured_line(full) == ""


def test_on_a_gpu_machine_the_offer_says_each_gpu_is_measured_too(qtbot):
    """A machine whose llama.cpp offloads to a GPU (a profile with a table GPU on CUDA: this
    machine has none) is offered the probe with the GPU half's time."""
    from dataclasses import replace

    from rooflight.hardware import profile_from_dict

    gpu = profile_from_dict({"gpus": [{"name": "NVIDIA GeForce RTX 4090"}], "backend": "cuda"},
                            detect_cpu_if_missing=True, measure_bandwidth=False)
    hw = replace(_detected(), gpus=gpu.gpus, backend="cuda")
    window = make_window(qtbot, hw)
    panel = window.page("machine").probe_panel
    qtbot.waitUntil(lambda: panel.status is not None, timeout=10000)
    assert panel.offer.isVisibleTo(panel)
    assert "up to 30 more for each GPU" in panel.offer.text.text()


def test_a_probe_the_budget_cut_short_offers_to_measure_with_more_time(qtbot, monkeypatch):
    """After a stored probe whose budget left parts to the table (MachineProbe.out_of_time),
    "Measure with more time" runs the probe again with the longer budget, in this start and
    in a later one (it is stored); after one that measured everything it goes."""
    import time
    from dataclasses import replace

    import rooflight.ui.probe_panel as panel_mod
    from rooflight.runtime.build import llama_build
    from rooflight.runtime.probe import ProbeRun
    from rooflight.runtime.probe_defaults import LONGER_BUDGET_S
    from rooflight.store.calibration import machine_calibration, machine_key
    from rooflight.store.probes import ProbeStore
    from test_probe import _probe

    hw = _detected()
    window = make_window(qtbot, hw, settings=Settings(probe_offered=True))
    panel = window.page("machine").probe_panel
    qtbot.waitUntil(lambda: panel.status is not None, timeout=10000)
    assert not panel.longer_button.isVisibleTo(panel)
    asked: list[dict] = []

    def measured(task, profile, options):  # the worker's side, stored as a probe stores it, without the measuring
        while options.get("until_cancelled"):  # a probe the test cancels
            task.raise_if_cancelled()
            time.sleep(0.01)
        asked.append(options)
        probe = replace(_probe(machine_key(profile), llama_build()),
                        out_of_time=() if "budget_s" in options else ("NVFP4", "attention (flash attention off)"))
        store = ProbeStore()
        try:
            store.put(probe)
        finally:
            store.close()
        return ProbeRun(probe, stored=True), machine_calibration(profile)

    monkeypatch.setattr(panel_mod, "run_probe", measured)
    panel.measure_button.click()
    qtbot.waitUntil(lambda: panel.task is None and panel.longer_button.isVisibleTo(panel), timeout=10000)
    assert "budget_s" not in asked[0] and f"{LONGER_BUDGET_S:.0f} s" in panel.longer_button.toolTip()
    later = make_window(qtbot, hw, settings=Settings(probe_offered=True)).page("machine").probe_panel
    qtbot.waitUntil(lambda: later.longer_button.isVisibleTo(later), timeout=10000)  # a later start: from the store
    later.probe_options = {"until_cancelled": True}
    later.start()
    assert not later.longer_button.isVisibleTo(later)
    later.cancel()  # a cancelled probe stores nothing: the stored one's parts are still offered more time
    qtbot.waitUntil(lambda: later.task is None, timeout=10000)
    assert "Cancelled" in later.state.text() and later.longer_button.isVisibleTo(later)
    panel.longer_button.click()
    assert not panel.longer_button.isVisibleTo(panel)  # hidden while it measures
    qtbot.waitUntil(lambda: panel.task is None and len(asked) == 2 and panel.status.probe.out_of_time == (),
                    timeout=10000)
    assert asked[1]["budget_s"] == LONGER_BUDGET_S
    assert not panel.longer_button.isVisibleTo(panel)
