"""This machine's 'Get the GPU build' action: shown where the installed build cannot use the
detected GPU, with the exact command; run in a worker with the command runner faked at its
boundary (tests/test_gpu_build.py's FakePip: no real pip runs)."""

from __future__ import annotations

import time

from rooflight.hardware.gpu_build import gpu_build_for
from rooflight.runtime import gpu_build_run
from rooflight.ui.gpu_build_panel import GPUBuildPanel
from test_gpu_build import FakePip, FakeProcess
from test_ui_support import cpu_box, make_window, profile

CPU_BUILD_ON_GPU_MACHINE = [{"name": "RTX 4090", "compute_capability": "8.9"}]


def _open(qtbot, window):
    page = window.page("machine")
    qtbot.waitUntil(lambda: page._build is not None, timeout=30000)
    assert page.gpu_build_button.isVisibleTo(page)
    page.gpu_build_button.click()
    dialog = page._gpu_build_panel
    assert dialog.isVisibleTo(page)
    assert dialog.parent() is page
    return dialog


def test_the_action_shows_the_exact_command_for_this_gpu(qtbot):
    window = make_window(qtbot, profile(CPU_BUILD_ON_GPU_MACHINE, backend="cpu"))
    dialog = _open(qtbot, window)
    assert "CMAKE_ARGS='-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=89' " in dialog.command.text()
    assert "-m pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python==" in dialog.command.text()
    assert dialog.needs.text().startswith("Needs CUDA toolkit 11.8 or newer (nvcc)")
    dialog.close_button.click()
    assert dialog.isHidden()


def test_build_runs_in_a_worker_and_asks_for_a_restart(qtbot, monkeypatch):
    pip = FakePip()
    monkeypatch.setattr(gpu_build_run, "RUNNER", pip)
    window = make_window(qtbot, profile(CPU_BUILD_ON_GPU_MACHINE, backend="cpu"))
    dialog = _open(qtbot, window)
    dialog.build = gpu_build_for(dialog.gpu, which=lambda name: "/usr/local/cuda/bin/nvcc")
    dialog.run_button.click()
    qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=10000)
    assert dialog.outcome.ok and "restart Rooflight" in dialog.result.text.text()
    assert dialog.restart_button.isVisibleTo(dialog) and dialog.progress.value() == 100
    assert "[ 50%] Building CUDA object mmq.cu.o" in dialog.output.toPlainText()
    assert pip.calls[0][1]["CMAKE_ARGS"] == "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=89"
    dialog.close_button.click()
    assert dialog.isHidden()


def test_a_failure_keeps_the_cpu_build_and_says_why(qtbot, monkeypatch):
    monkeypatch.setattr(gpu_build_run, "RUNNER", FakePip(wheel_rc=1))
    window = make_window(qtbot, profile(CPU_BUILD_ON_GPU_MACHINE, backend="cpu"))
    dialog = _open(qtbot, window)
    dialog.build = gpu_build_for(dialog.gpu, which=lambda name: "/usr/local/cuda/bin/nvcc")
    dialog.run_button.click()
    qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=10000)
    assert not dialog.outcome.ok and not dialog.restart_button.isVisibleTo(dialog)
    assert dialog.result.text.text() == ("The build failed (nvcc fatal   : Unsupported gpu architecture "
                                         "'compute_120'); the CPU build stays installed.")
    assert dialog.run_button.isEnabled() and dialog.run_button.text() == "Try again"
    dialog.close_button.click()
    assert dialog.isHidden()


def test_cancel_stops_a_running_build(qtbot, monkeypatch):
    def slow_build(argv, env):
        def lines():
            for i in range(1000):
                time.sleep(0.02)
                yield f"[ {i % 100:2d}%] Building CUDA object part{i}.cu.o\n"

        proc = FakeProcess([], 0)
        proc.stdout = lines()
        slow_build.proc = proc
        return proc

    monkeypatch.setattr(gpu_build_run, "RUNNER", slow_build)
    window = make_window(qtbot, profile(CPU_BUILD_ON_GPU_MACHINE, backend="cpu"))
    dialog = _open(qtbot, window)
    dialog.build = gpu_build_for(dialog.gpu, which=lambda name: "/usr/local/cuda/bin/nvcc")
    dialog.run_button.click()
    qtbot.waitUntil(lambda: "part2.cu.o" in dialog.output.toPlainText(), timeout=10000)
    dialog.cancel_button.click()
    qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=10000)
    assert dialog.outcome.cancelled and "cancelled; the CPU build stays installed" in dialog.result.text.text()
    qtbot.waitUntil(lambda: window.ctx.runner.active == 0, timeout=10000)
    assert slow_build.proc.terminated
    dialog.close_button.click()
    assert dialog.isHidden()


def test_no_action_without_a_gpu(qtbot):
    window = make_window(qtbot, cpu_box())
    page = window.page("machine")
    qtbot.waitUntil(lambda: page._build is not None, timeout=30000)
    assert not hasattr(page, "gpu_build_button")
    assert GPUBuildPanel  # the dialog exists for GPU machines only
