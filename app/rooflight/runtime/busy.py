"""Did anything else use the CPU while we measured?

On few cores llama.cpp's threads wait for each other at every barrier, so one other busy
process slows a measurement several-fold (one here once ran 11x slow). The honest check is
the CPU time the rest of the system spent during the measurement: the machine's busy time
(user, system, interrupts and, in a VM, time the hypervisor gave to others: steal) minus
our own process's, as a share of all cores over the wall-clock interval; of the CPUs our
threads may run on where that is fewer (hardware/limits.py). A container's CPU quota alone
does not narrow it: /proc/stat inside a container is the host's, and our threads may run
on any of its CPUs.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from rooflight.hardware.limits import allowed_cpus
from rooflight.runtime.probe_defaults import DEFAULT_BUSY_THRESHOLD

__all__ = ["DEFAULT_BUSY_THRESHOLD"]  # re-exported: callers import it from here


def _tick_s() -> float:
    """The resolution of the kernel's CPU-time counters (USER_HZ: 100 Hz on Linux)."""
    try:
        return 1.0 / os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):  # not POSIX: psutil's own clock, no finer
        return 0.01


_TICK_S = _tick_s()


def _busy(t) -> float:
    busy = t.user + t.system + getattr(t, "nice", 0.0) + getattr(t, "irq", 0.0)
    return busy + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)


def _watched_cpus() -> tuple[int, ...] | None:
    """The CPUs our threads may run on, where that is fewer than the machine's (taskset,
    numactl, a cpuset): what other programs do on the rest does not stall our barriers.
    None: watch them all (psutil numbers per-CPU figures by CPU number only when every CPU
    is online, so a gap in the numbering falls back to all)."""
    allowed = allowed_cpus()
    n = psutil.cpu_count() or 1
    if not allowed or len(allowed) >= n or max(allowed) >= n:
        return None
    return allowed


def _busy_seconds(cpus: tuple[int, ...] | None = None) -> float:
    if cpus is None:
        return _busy(psutil.cpu_times())
    per_cpu = psutil.cpu_times(percpu=True)
    return sum(_busy(per_cpu[i]) for i in cpus)


def _own_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


@dataclass(frozen=True)
class Window:
    wall_s: float
    others_share: float  # share of all cores' time used by other processes (0..1)

    def clean(self, threshold: float) -> bool:
        return self.others_share <= threshold


class Watch:
    """with Watch() as w: ...; then w.window says how busy the rest of the machine was."""

    def __init__(self) -> None:
        self._proc = psutil.Process(os.getpid())
        self._cpus = _watched_cpus()
        self._n_cpu = len(self._cpus) if self._cpus else psutil.cpu_count() or 1
        self.window: Window | None = None

    def __enter__(self) -> Watch:
        self._busy0, self._own0 = _busy_seconds(self._cpus), _own_seconds(self._proc)
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._t0
        others = (_busy_seconds(self._cpus) - self._busy0) - (_own_seconds(self._proc) - self._own0)
        # the kernel's counters tick at 100 Hz: each core's busy time and this process's own
        # round by up to a tick, so that much "other" time is no evidence of another program
        # (a 50 ms run on an idle 2-core VM read 20% others once in 40 without this)
        others -= (self._n_cpu + 1) * _TICK_S
        share = max(0.0, others) / max(wall * self._n_cpu, 1e-6)
        self.window = Window(wall, min(1.0, share))


def load_now() -> tuple[float, int]:
    """(1-minute load average, logical CPUs): what the machine looked like before we began."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # not on every platform
        load = 0.0
    return load, psutil.cpu_count() or 1
