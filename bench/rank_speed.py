"""How long ranking the whole catalog takes: every model, every quant, three contexts.

    python bench/rank_speed.py [--hardware FILE] [--repeats N] [--profile]

One full ranking = rank_models() at 4096, 8192 and 32768 tokens of context for one
machine (an RTX 4090 with 64 GB of RAM unless --hardware names another), i.e. every
quant of every catalog model planned three times. Prints the first ranking in this
process (cold: catalog specs are built from hyper-parameters on the way) and the median
of --repeats later ones (warm: specs built, as in the GUI re-ranking after a change of
context or use case). Target (issue 3): warm under 100 ms. Exits 1 when it is missed.
--profile prints where a warm ranking spends its time (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time

from rooflight.catalog import load_catalog
from rooflight.catalog.rank import rank_models
from rooflight.hardware import load_profile, profile_from_dict

CONTEXTS = (4096, 8192, 32768)
TARGET_MS = 100.0
DEFAULT_MACHINE = {"gpus": [{"name": "RTX 4090"}],
                   "cpu": {"ram_total_bytes": 64 * 2**30, "cores": 8, "threads": 16, "ram_bandwidth_gbs": 60.0}}


def full_ranking(hardware) -> int:
    """Rank at every context; returns how many (model, quant) plans were made."""
    plans = 0
    for ctx in CONTEXTS:
        plans += sum(len(r.options) for r in rank_models(hardware, ctx=ctx))
    return plans


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hardware", metavar="FILE", help="a hardware profile (default: RTX 4090, 64 GB)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--profile", action="store_true", help="cProfile one warm ranking")
    args = ap.parse_args()
    hw = load_profile(args.hardware) if args.hardware else profile_from_dict(DEFAULT_MACHINE, measure_bandwidth=False)
    catalog = load_catalog()

    t0, c0 = time.perf_counter(), time.process_time()
    plans = full_ranking(hw)
    cold_ms, cold_cpu = (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3
    warm, warm_cpu = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        full_ranking(hw)
        warm.append((time.perf_counter() - t0) * 1e3)
        warm_cpu.append((time.process_time() - c0) * 1e3)
    warm_ms = statistics.median(warm)

    gpus = ", ".join(g.name for g in hw.gpus) or "no GPU"
    print(f"machine: {gpus}, {hw.cpu.ram_total_bytes / 2**30:.0f} GiB RAM, backend {hw.backend}")
    print(f"catalog: {len(catalog)} models, {plans // len(CONTEXTS)} quants, contexts {CONTEXTS}: "
          f"{plans} plans per full ranking")
    # CPU time beside wall time: on a busy machine the wall clock also counts other processes
    print(f"cold (first ranking, specs built): {cold_ms:8.1f} ms wall, {cold_cpu:8.1f} ms CPU")
    print(f"warm (median of {args.repeats}):          {warm_ms:8.1f} ms wall, "
          f"{statistics.median(warm_cpu):8.1f} ms CPU  (wall min {min(warm):.1f}, max {max(warm):.1f}; "
          f"{warm_ms * 1e3 / plans:.0f} us per plan)")
    print(f"target: warm < {TARGET_MS:.0f} ms -> {'met' if warm_ms < TARGET_MS else 'MISSED'}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        full_ranking(hw)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    return 0 if warm_ms < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
