"""Shared pieces of the GUI tests: machine profiles and a window over real core objects.

Profiles go through profile_from_dict exactly like `--hardware FILE` (GPU figures from the
bundled table); the CPU is given in full so no bandwidth is measured.
"""

from __future__ import annotations

import gc
import time

GiB = 1 << 30

CPU = {"name": "Test CPU 8-core", "cores": 8, "threads": 16, "isa": ["avx2", "fma"],
       "ram_total_bytes": 32 * GiB, "ram_available_bytes": 28 * GiB, "ram_bandwidth_gbs": 50.0}


def profile(gpus: list[dict] | None = None, **extra):
    from rooflight.hardware import profile_from_dict

    return profile_from_dict({"cpu": dict(CPU), "gpus": gpus or [], **extra},
                             detect_cpu_if_missing=False, measure_bandwidth=False)


def cpu_box():
    """A CPU-only machine: 8 cores, 32 GiB, 50 GB/s."""
    return profile()


def rtx3060():
    """The same CPU with an RTX 3060 (12 GB) from the GPU table."""
    return profile([{"name": "RTX 3060"}])


def make_window(qtbot, hardware=None, settings=None):
    """A MainWindow over a fresh AppContext; with `hardware`, that machine is set as the
    detected one (otherwise nothing is detected until the test asks)."""
    from rooflight.store.settings import Settings
    from rooflight.ui.context import AppContext
    from rooflight.ui.window import MainWindow

    ctx = AppContext(settings or Settings())
    window = MainWindow(ctx)
    qtbot.addWidget(window)
    window.resize(1280, 800)
    window.show()
    qtbot.waitExposed(window)
    if hardware is not None:
        ctx.machine.set_detected(hardware)
    return window


def wait_ranked(qtbot, window, timeout=30000):
    page = window.page("models")
    qtbot.waitUntil(lambda: bool(page.model.rows) and page._rank_task is None, timeout=timeout)
    return page


def wait_idle(qtbot, window, timeout=30000):
    qtbot.waitUntil(lambda: window.ctx.runner.active == 0, timeout=timeout)


class LoopLatency:
    """Measures how late a 10 ms QTimer fires on the GUI thread: a stall of the event loop
    shows as lateness."""

    def __init__(self, interval_ms: int = 10) -> None:
        from PySide6.QtCore import QTimer

        self.interval = interval_ms / 1000
        self.worst = 0.0
        self.ticks = 0
        self._last = None
        self._timer = QTimer()
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.worst = max(self.worst, now - self._last - self.interval)
        self._last = now
        self.ticks += 1

    def start(self) -> LoopLatency:
        """Start timing. What the earlier tests of this process left in memory is frozen out of
        the cyclic collector first, as the app freezes what it has built (ui/tasks.full_gc_paused):
        a full collection holds the GIL for as long as the heap takes to walk (60-200 ms for the
        app's own specs, measured there), and a whole suite's leftovers are the harness's heap,
        not the code under test. Seen once: the download test's GUI thread stalled 133 ms in a
        full CI run (2026-12-06), against 5-15 ms in five runs of the test alone."""
        gc.collect()
        gc.freeze()
        self._last = None
        self._timer.start()
        return self

    def stop(self) -> float:
        self._timer.stop()
        gc.unfreeze()
        if self._last is not None:  # a stall just before stop() has no tick after it
            self.worst = max(self.worst, time.perf_counter() - self._last - self.interval)
        return self.worst
