"""Live hardware monitor: RAM, CPU load and NVIDIA GPUs sampled once or twice a second,
plus the running model's token rates as the caller reports them.

SystemSampler.sample() reads one Sample (psutil for RAM and CPU, NVML for each NVIDIA
GPU's memory, utilisation, power and temperature; any figure NVML will not give is None).
Monitor runs a sampler in its own daemon thread into a fixed-size ring buffer and calls
subscribers with each new sample, from that thread: a GUI adapts the callback into a
queued signal (ui/monitor_panel.py), the terminal command into a queue.

No Qt here. A sample costs about 0.1 ms of CPU (three /proc reads and a few NVML calls);
Monitor.cpu_seconds counts what its thread really spent, so the cost is measured, not
assumed (tests/test_monitor.py, bench/monitor_cost.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

import psutil

from .limits import memory_now
from .nvidia import _import_pynvml

log = logging.getLogger(__name__)

SPEED_KINDS = ("decode", "prompt")

# A reported rate counts as current this long (at least one and a half sampling
# intervals, so a rate reported once between two samples is not missed); after that the
# model is idle and the sample says None rather than repeating a stale figure.
SPEED_HOLD_S = 1.0


@dataclass(frozen=True)
class GPUSample:
    index: int
    name: str
    vram_used_bytes: int | None
    vram_total_bytes: int | None
    util_percent: float | None  # share of the last sample period a kernel ran (NVML)
    power_watts: float | None
    temperature_c: float | None


@dataclass(frozen=True)
class Sample:
    time: float  # seconds since the epoch
    ram_used_bytes: int  # total minus available: what programs hold, not the file cache
    ram_total_bytes: int
    cpu_percent: float  # all cores, 0-100, since the previous sample
    process_rss_bytes: int  # this process (the loaded model's mapped weights show up here)
    gpus: tuple[GPUSample, ...] = ()
    decode_tok_s: float | None = None
    prompt_tok_s: float | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["gpus"] = [asdict(g) for g in self.gpus]
        return d


class _CpuLoad:
    """CPU load between two calls, from psutil.cpu_times() deltas.

    psutil.cpu_percent(interval=None) does the same but keeps ONE module-wide previous
    reading, so any other caller in the process (a hardware page, a test) would shorten
    our interval; our own previous reading keeps the monitor's figure its own."""

    def __init__(self) -> None:
        self._last = psutil.cpu_times()

    @staticmethod
    def _busy_total(t: Any) -> tuple[float, float]:
        total = sum(t)
        idle = t.idle + getattr(t, "iowait", 0.0)
        return total - idle, total

    def percent(self) -> float:
        now = psutil.cpu_times()
        b0, t0 = self._busy_total(self._last)
        b1, t1 = self._busy_total(now)
        self._last = now
        if t1 <= t0:
            return 0.0
        return max(0.0, min(100.0, 100.0 * (b1 - b0) / (t1 - t0)))


class _NvmlGpus:
    """NVML opened once for the monitor's lifetime, one handle per GPU.

    A figure the board does not support (NVMLError "Not Supported" on consumer cards for
    power, MIG slices for utilisation...) is asked once and then left out of later samples,
    so an unsupported call does not cost a failed round trip twice a second."""

    def __init__(self, nvml: ModuleType | None) -> None:
        self._nvml = nvml
        self._handles: list[tuple[int, Any, str]] = []
        self._unsupported: set[tuple[int, str]] = set()
        self.open = False
        if nvml is None:
            return
        try:
            nvml.nvmlInit()
        except Exception:  # no driver or no library: no NVIDIA GPU to watch
            return
        self.open = True
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:
            log.warning("NVML could not count the GPUs (%s); no GPU figures", exc)
            count = 0
        for i in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
            except Exception as exc:
                log.warning("NVIDIA GPU %d could not be opened (%s); left out of the monitor", i, exc)
                continue
            try:
                raw = nvml.nvmlDeviceGetName(handle)
                name = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
            except Exception:
                name = f"NVIDIA GPU {i}"
            self._handles.append((i, handle, name))

    def _call(self, index: int, handle: Any, fn: str, *args: Any) -> Any:
        if (index, fn) in self._unsupported:
            return None
        f = getattr(self._nvml, fn, None)
        try:
            if f is None:
                raise AttributeError(fn)
            return f(handle, *args)
        except Exception as exc:
            self._unsupported.add((index, fn))
            log.debug("NVIDIA GPU %d: %s unavailable (%s); not asked again", index, fn, exc)
            return None

    def sample(self) -> tuple[GPUSample, ...]:
        out = []
        for i, handle, name in self._handles:
            mem = self._call(i, handle, "nvmlDeviceGetMemoryInfo")
            util = self._call(i, handle, "nvmlDeviceGetUtilizationRates")
            power_mw = self._call(i, handle, "nvmlDeviceGetPowerUsage")
            temp = self._call(i, handle, "nvmlDeviceGetTemperature", getattr(self._nvml, "NVML_TEMPERATURE_GPU", 0))
            out.append(GPUSample(
                index=i,
                name=name,
                vram_used_bytes=int(mem.used) if mem is not None else None,
                vram_total_bytes=int(mem.total) if mem is not None else None,
                util_percent=float(util.gpu) if util is not None else None,
                power_watts=power_mw / 1000.0 if power_mw is not None else None,  # NVML: milliwatts
                temperature_c=float(temp) if temp is not None else None,
            ))
        return tuple(out)

    def close(self) -> None:
        if self.open:
            self.open = False
            try:
                if self._nvml is not None:
                    self._nvml.nvmlShutdown()
            except Exception:
                pass


class SpeedBoard:
    """The latest decode / prompt rates the running model reported; thread-safe."""

    def __init__(self, hold_s: float = SPEED_HOLD_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._rates: dict[str, tuple[float, float]] = {}
        self._hold_s = hold_s
        self._clock = clock

    def record(self, kind: str, tok_s: float) -> None:
        if kind not in SPEED_KINDS:
            raise ValueError(f"speed kind must be one of {', '.join(SPEED_KINDS)}, not {kind!r}")
        with self._lock:
            self._rates[kind] = (float(tok_s), self._clock())

    def current(self, kind: str) -> float | None:
        with self._lock:
            got = self._rates.get(kind)
        if got is None or self._clock() - got[1] > self._hold_s:
            return None
        return got[0]


class SystemSampler:
    """Reads one Sample of this machine. nvml: a pynvml-like module (tests pass a fake);
    default: the installed pynvml, if any. Close it to release NVML."""

    def __init__(self, nvml: ModuleType | None = None, speeds: SpeedBoard | None = None) -> None:
        self.speeds = speeds or SpeedBoard()
        self._cpu = _CpuLoad()
        self._process = psutil.Process(os.getpid())
        self._gpus = _NvmlGpus(nvml if nvml is not None else _import_pynvml())

    def sample(self) -> Sample:
        total, available = memory_now()  # within a container's memory limit
        return Sample(
            time=time.time(),
            ram_used_bytes=total - available,
            ram_total_bytes=total,
            cpu_percent=round(self._cpu.percent(), 1),
            process_rss_bytes=int(self._process.memory_info().rss),
            gpus=self._gpus.sample(),
            decode_tok_s=self.speeds.current("decode"),
            prompt_tok_s=self.speeds.current("prompt"),
        )

    def close(self) -> None:
        self._gpus.close()


Subscriber = Callable[[Sample], None]


class Monitor:
    """Samples every interval_s in a daemon thread into a ring of `capacity` samples.

    monitor = Monitor(interval_s=0.5); unsubscribe = monitor.subscribe(callback)
    monitor.start(); ...; monitor.record_speed("decode", 42.0); ...; monitor.stop()

    Subscribers run on the monitor thread and must not block (a GUI emits a queued
    signal; see ui/monitor_panel.py). A subscriber that raises is logged and kept.
    """

    def __init__(
        self,
        interval_s: float = 0.5,
        capacity: int = 600,
        *,
        sampler: SystemSampler | None = None,
        nvml: ModuleType | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.interval_s = interval_s
        self._own_sampler = sampler is None
        self._sampler = sampler
        self._nvml = nvml
        self._ring: deque[Sample] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._subscribers: list[Subscriber] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu_s = 0.0
        self._run_s = 0.0
        self.speeds = sampler.speeds if sampler is not None else SpeedBoard(max(SPEED_HOLD_S, 1.5 * interval_s))

    # -- the model's rates ---------------------------------------------------------------
    def record_speed(self, kind: str, tok_s: float) -> None:
        """The running model's current rate, kind "decode" or "prompt" (any thread)."""
        self.speeds.record(kind, tok_s)

    # -- subscribers ------------------------------------------------------------------------
    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(sample)` on the monitor thread for every new sample; returns a
        function that unsubscribes."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    @property
    def subscriber_count(self) -> int:
        with self._lock:
            return len(self._subscribers)

    # -- samples ----------------------------------------------------------------------------
    def samples(self) -> list[Sample]:
        """The ring's samples, oldest first (a copy)."""
        with self._lock:
            return list(self._ring)

    def latest(self) -> Sample | None:
        with self._lock:
            return self._ring[-1] if self._ring else None

    @property
    def capacity(self) -> int:
        return self._ring.maxlen or 0

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Monitor:
        if self.running:
            return self
        if self._sampler is None:
            self._sampler = SystemSampler(self._nvml, self.speeds)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="rooflight-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop sampling and wait for the thread (at most `timeout` seconds)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if self._own_sampler and self._sampler is not None:
            self._sampler.close()
            self._sampler = None

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- cost ---------------------------------------------------------------------------------
    @property
    def cpu_seconds(self) -> float:
        """CPU time the sampling thread has used (time.thread_time, measured in the thread)."""
        with self._lock:
            return self._cpu_s

    @property
    def run_seconds(self) -> float:
        """Wall time the sampling thread has run."""
        with self._lock:
            return self._run_s

    @property
    def cpu_fraction(self) -> float:
        """CPU time over wall time of the sampling thread (0.01 = 1% of one core)."""
        with self._lock:
            return self._cpu_s / self._run_s if self._run_s > 0 else 0.0

    def _run(self) -> None:
        sampler = self._sampler
        assert sampler is not None
        cpu0, wall0 = time.thread_time(), time.monotonic()
        # the first sample comes one interval after start: CPU load is a difference of
        # two readings, and the sampler took its first when it was made
        next_at = wall0 + self.interval_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            try:
                sample = sampler.sample()
            except Exception:  # a failing read must not end the monitor
                log.exception("monitor sample failed")
                sample = None
            if sample is not None:
                with self._lock:
                    self._ring.append(sample)
                    subscribers = list(self._subscribers)
                for callback in subscribers:
                    try:
                        callback(sample)
                    except Exception:
                        log.exception("monitor subscriber failed")
            with self._lock:
                self._cpu_s = time.thread_time() - cpu0
                self._run_s = time.monotonic() - wall0
            # a fixed schedule, not sleep(interval) after the work: no drift; after a
            # stall (suspend, a slow NVML call) skip the missed ticks rather than burst
            next_at += self.interval_s
            now = time.monotonic()
            if next_at < now:
                next_at = now + self.interval_s
        with self._lock:
            self._cpu_s = time.thread_time() - cpu0
            self._run_s = time.monotonic() - wall0
