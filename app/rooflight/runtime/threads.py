"""Pick the thread count that runs a model fastest on this machine, by measuring.

Physical cores is where llama.cpp's own default starts, and often right, but not always:
small models are bound by per-token synchronisation between threads, memory-bound ones
saturate the memory bus before every core is busy, SMT siblings rarely help, and on a
busy machine (other programs, a VM sharing its host) a thread that waits for a
descheduled sibling stalls the whole token. So candidates around the core count are each
measured with runtime/measure.py, interleaved in rotating order so a burst of outside
load does not land on one candidate only, and the median of the repeats decides.

The winner is kept per machine and model-size band (store/calibration.py); plans for this
machine use it through Calibration.preferred_threads (estimate/plan.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rooflight.errors import BadInputError
from rooflight.estimate.config import RunConfig
from rooflight.hardware.limits import cpu_counts

# Decode rates within this fraction of the best count as a tie, broken by prefill speed
# (threads matter far more there: prefill is compute-bound) and then by fewer threads.
TIE = 0.03


@dataclass(frozen=True)
class ThreadRun:
    n_threads: int
    decode_tok_s: float  # median of the repeats
    prefill_tok_s: float
    decode_runs: tuple[float, ...]
    prefill_runs: tuple[float, ...]

    def to_dict(self) -> dict:
        return {
            "n_threads": self.n_threads,
            "decode_tok_s": round(self.decode_tok_s, 3),
            "prefill_tok_s": round(self.prefill_tok_s, 3),
            "decode_runs": [round(x, 3) for x in self.decode_runs],
            "prefill_runs": [round(x, 3) for x in self.prefill_runs],
        }


@dataclass(frozen=True)
class ThreadSweep:
    runs: tuple[ThreadRun, ...]  # by thread count
    best: int
    start: int  # physical cores: the default before any sweep
    prompt_tokens: int
    gen_tokens: int

    def run(self, n_threads: int) -> ThreadRun:
        return next(r for r in self.runs if r.n_threads == n_threads)

    def to_dict(self) -> dict:
        return {
            "best": self.best,
            "start": self.start,
            "prompt_tokens": self.prompt_tokens,
            "gen_tokens": self.gen_tokens,
            "runs": [r.to_dict() for r in self.runs],
        }


def physical_cores() -> int:
    """The physical cores this process may use (hardware/limits.py)."""
    return cpu_counts()[0]


def candidate_threads(physical: int | None = None, logical: int | None = None) -> list[int]:
    """Counts worth measuring: 1, half, all-but-one and all physical cores, and all
    logical CPUs (SMT). Each is a separate model load and run, so keep the list short."""
    if not (physical and logical):
        cores, cpus = cpu_counts()  # one read of the affinity and the cgroup for both
        physical, logical = physical or cores, logical or cpus
    logical = max(logical, physical)
    counts = {1, max(1, physical // 2), max(1, physical - 1), physical, logical}
    return sorted(counts)


def pick_best(runs: Sequence[ThreadRun]) -> int:
    top = max(r.decode_tok_s for r in runs)
    close = [r for r in runs if r.decode_tok_s >= top * (1 - TIE)]
    return max(close, key=lambda r: (r.prefill_tok_s, -r.n_threads)).n_threads


def sweep_threads(
    model_path: str | Path,
    config: RunConfig,
    candidates: Sequence[int] | None = None,
    *,
    prompt_tokens: int = 128,
    gen_tokens: int = 64,
    repeats: int = 2,
    progress: Callable[[int, float, float], None] | None = None,
    measure_fn: Callable | None = None,
) -> ThreadSweep:
    """Measure `config` at each candidate thread count; the best is ThreadSweep.best.

    progress(n_threads, decode_tok_s, prefill_tok_s) is called after every run.
    """
    if measure_fn is None:
        from rooflight.runtime.measure import measure as measure_fn
    counts = sorted(set(candidates or candidate_threads()))
    if not counts or counts[0] < 1:
        raise BadInputError("Thread counts to sweep must be whole numbers of at least 1.")
    if repeats < 1:
        raise BadInputError("A thread sweep needs at least one run per thread count.")
    decode: dict[int, list[float]] = {n: [] for n in counts}
    prefill: dict[int, list[float]] = {n: [] for n in counts}
    for rep in range(repeats):
        # rotate the order so no count always runs first (cold caches) or last
        shift = rep % len(counts)
        for n in counts[shift:] + counts[:shift]:
            got = measure_fn(model_path, replace(config, n_threads=n),  # type: ignore[misc]  # set when None
                             prompt_tokens=prompt_tokens, gen_tokens=gen_tokens)
            decode[n].append(got.decode_tok_s)
            prefill[n].append(got.prefill_tok_s)
            if progress:
                progress(n, got.decode_tok_s, got.prefill_tok_s)
    runs = tuple(
        ThreadRun(n, statistics.median(decode[n]), statistics.median(prefill[n]),
                  tuple(decode[n]), tuple(prefill[n]))
        for n in counts
    )
    return ThreadSweep(runs, pick_best(runs), physical_cores(), prompt_tokens, gen_tokens)


def store_sweep(profile, model_name: str, model_bytes: int, sweep: ThreadSweep, store=None) -> None:
    """Keep the sweep's winner for this machine and the model's size band."""
    from rooflight.store.calibration import CalibrationStore, ThreadChoice, machine_key

    own = store is None
    store = store or CalibrationStore()
    try:
        best = sweep.run(sweep.best)
        store.set_thread_choice(ThreadChoice(
            machine=machine_key(profile), backend=profile.backend, model=model_name,
            model_bytes=model_bytes, n_threads=sweep.best,
            decode_tok_s=best.decode_tok_s, prefill_tok_s=best.prefill_tok_s,
        ))
    finally:
        if own:
            store.close()


def preferred_threads(profile, model_bytes: int | None = None, store=None) -> int | None:
    """The thread count a sweep found fastest on this machine for a model of about this
    size (within 8x); None when nothing applies (then plans use physical cores).
    Without model_bytes: the choice for the largest model swept."""
    from rooflight.store.calibration import CalibrationStore, machine_key

    own = store is None
    store = store or CalibrationStore()
    try:
        cal = store.calibration(machine_key(profile), profile.backend)
    finally:
        if own:
            store.close()
    if model_bytes is None:
        return cal.threads[-1][1] if cal.threads else None
    return cal.preferred_threads(model_bytes)
