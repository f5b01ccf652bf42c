"""RAM bandwidth, measured: a short multi-threaded copy, cached per machine.

CPU decode speed follows memory bandwidth (REFERENCE.md section 4), and no spec sheet knows
what this machine's DIMMs, channels and VM host really give, so it is measured. numpy's
copyto releases the GIL for plain arrays, so Python threads copy in parallel.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs

from rooflight.atomic import write_text_atomic
from rooflight.hardware.limits import cpu_counts, memory_now

CACHE_FILE = "ram_bandwidth.json"
# 128 MiB source + 128 MiB destination in all: several times a desktop or VM L3 cache (smaller
# buffers partly stayed in a 32 MiB L3 here and read 20% high), small enough that
# allocating, first-touching and copying stay well under half a second.
DEFAULT_TOTAL_BYTES = 256 << 20
_ROUNDS = 5


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The directory for machine caches: parameter, else $ROOFLIGHT_CACHE_DIR, else the
    platform's user cache dir."""
    if override is not None:
        return Path(override)
    env = os.environ.get("ROOFLIGHT_CACHE_DIR")
    if env:
        return Path(env)
    return Path(platformdirs.user_cache_dir("rooflight"))


@contextmanager
def _small_pages() -> Iterator[None]:
    """Allocate with ordinary pages. numpy asks Linux for transparent huge pages on large
    arrays; with the common "defrag=madvise" setting the kernel then compacts memory inside
    the page fault, which stalled a 256 MiB allocation for up to a second here. 4 KiB pages
    fault in a steady ~0.1 s and the copy runs at the same speed."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined]
    except ImportError:
        try:
            from numpy.core.multiarray import _set_madvise_hugepage  # type: ignore
        except ImportError:
            yield
            return
    previous = _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(previous)


def measure_ram_bandwidth(
    threads: int | None = None, total_bytes: int = DEFAULT_TOTAL_BYTES
) -> float:
    """Copy bandwidth in GB/s (1e9 B/s), counting bytes read plus bytes written (STREAM's
    "Copy" convention; the bytes copied per second are half of this).

    Each thread allocates and first-touches its own slice (in parallel, and local to its
    NUMA node), copies it once untimed, then all threads copy together between barriers
    for a few rounds; the median round counts.
    """
    import numpy as np  # here: detecting a machine whose bandwidth is cached never needs it

    n = max(1, threads or cpu_counts()[0])
    try:  # never take more than a quarter of what is free on a small machine (or container)
        total_bytes = min(total_bytes, memory_now()[1] // 4)
    except Exception:
        pass
    per_thread = max(1 << 20, total_bytes // (2 * n)) // 8  # float64 elements per buffer
    barrier = threading.Barrier(n + 1)
    spans: list[list[tuple[float, float]]] = [[] for _ in range(n)]
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            src = np.ones(per_thread)  # np.ones writes, so every page is faulted in here
            dst = np.empty(per_thread)
            np.copyto(dst, src)  # warm-up: fault the destination pages in
        except BaseException as exc:  # keep the barrier protocol so nobody hangs
            errors.append(exc)
            src = dst = np.zeros(1)
        for _ in range(_ROUNDS):
            barrier.wait()
            t0 = time.perf_counter()
            np.copyto(dst, src)
            spans[k].append((t0, time.perf_counter()))
            barrier.wait()

    with _small_pages():
        pool = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(n)]
        for t in pool:
            t.start()
        for _ in range(_ROUNDS * 2):
            barrier.wait()
        for t in pool:
            t.join()
    if errors:
        raise errors[0]
    # A round lasts from the first thread's start to the last thread's end: timing each
    # thread alone would over-count when the scheduler runs them one after another.
    # The median round, not the best: on shared VMs a single round sometimes reads 40%
    # high (seen here: 37-40 GB/s typically, one round at 52), and the estimator's
    # efficiency constants are relative to the typical figure.
    rounds = sorted(
        max(sp[r][1] for sp in spans) - min(sp[r][0] for sp in spans) for r in range(_ROUNDS)
    )
    typical = rounds[len(rounds) // 2]
    moved = 2 * n * per_thread * 8  # read + write
    return moved / max(typical, 1e-9) / 1e9


def _cache_key(cpu_name: str, ram_total_bytes: int, cores: int) -> str:
    return f"{cpu_name}|{ram_total_bytes}|{cores}"


def _read_cache(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or corrupt: measure again and rewrite it
    return data if isinstance(data, dict) else {}


def _write_atomic(path: Path, data: dict) -> None:
    write_text_atomic(path, json.dumps(data, indent=1), make_parent=True)


def ram_bandwidth(
    cpu_name: str,
    ram_total_bytes: int,
    cores: int,
    *,
    cache_dir_override: str | os.PathLike[str] | None = None,
) -> tuple[float, str, list[str]]:
    """(GB/s, "measured" | "cached", warnings). Reads the cache first; measures and stores
    when this machine has no valid entry. A cache that cannot be written only warns."""
    path = cache_dir(cache_dir_override) / CACHE_FILE
    key = _cache_key(cpu_name, ram_total_bytes, cores)
    data = _read_cache(path)
    entry = data.get(key)
    if isinstance(entry, dict):
        gbs = entry.get("gbs")
        if isinstance(gbs, (int, float)) and not isinstance(gbs, bool) and gbs > 0:
            return float(gbs), "cached", []
    gbs = round(measure_ram_bandwidth(threads=cores), 2)
    data[key] = {"gbs": gbs, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    warnings: list[str] = []
    try:
        _write_atomic(path, data)
    except OSError as exc:
        warnings.append(f"could not cache the RAM bandwidth in {path}: {exc}")
    return gbs, "measured", warnings
