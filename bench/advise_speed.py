"""How long the optimization advisor takes to search one model's whole settings space.

    python bench/advise_speed.py [--repeats N]

For several catalog models (dense, sliding-window, MoE; 6 quantization files each) on
three machines (an RTX 3060 12 GB, an Apple M2, a CPU-only box) it prints:
- specs: building the ModelSpec of every quantization from the catalog's hyper-parameters
  (input preparation, not the search; done once per process and cached);
- cold: the first advise() on those fresh specs (the estimator's per-spec layer and KV
  tables are built during it);
- warm: the median of N further advise() calls on the same specs;
- searched: how many candidate settings the estimator evaluated.
Target (issue 9): the search of one model in under 200 ms. The script exits 1 if a cold
or warm search misses it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from rooflight.catalog import find_model
from rooflight.estimate import Wishes
from rooflight.estimate.advise import Variant, advise, default_quant
from rooflight.hardware import profile_from_dict

GIB = 2**30
TARGET_S = 0.2

MODELS = ("llama-3.1-8b", "gemma-3-27b", "qwen3-30b-a3b", "gpt-oss-20b", "qwen2.5-72b")


def _profile(gpus, ram_gib, backend=None):
    d = {"gpus": gpus, "cpu": {"name": "bench cpu", "cores": 8, "threads": 16, "isa": ["avx2", "fma"],
                               "ram_total_bytes": ram_gib * GIB, "ram_available_bytes": int(0.9 * ram_gib * GIB),
                               "ram_bandwidth_gbs": 60.0, "max_freq_mhz": 4500.0}}
    if backend:
        d["backend"] = backend
    return profile_from_dict(d, measure_bandwidth=False)


MACHINES = {
    "RTX 3060 12 GB": _profile([{"name": "RTX 3060"}], 32),
    "Apple M2 16 GB": _profile([{"name": "Apple M2", "vendor": "apple", "unified_memory": True,
                                 "vram_total_bytes": 11 * GIB}], 16),
    "CPU only 32 GB": _profile([], 32, backend="cpu"),
}

# settings a user might start from: 32k context, flash attention off, 4 threads, a
# full-size SWA cache, so that every lever has something to say
WISHES = Wishes(n_ctx=32768, flash_attn="off", n_threads=4, swa_full=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"{'model':<16}{'machine':<17}{'specs':>9}{'cold':>9}{'warm':>9}{'searched':>10}  cards")
    worst = 0.0
    for machine, hw in MACHINES.items():
        for mid in MODELS:
            model = find_model(mid)
            t0 = time.perf_counter()
            # fresh specs for every machine: nothing cached from the previous row
            variants = [Variant(q, model.spec(q), None) for q in model.quants]
            t_specs = time.perf_counter() - t0
            current = default_quant(model.quants)
            t0 = time.perf_counter()
            a = advise(variants, hw, WISHES, current=current)
            cold = time.perf_counter() - t0
            warm_runs = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                advise(variants, hw, WISHES, current=current)
                warm_runs.append(time.perf_counter() - t0)
            warm = statistics.median(warm_runs)
            worst = max(worst, cold, warm)
            kinds = ",".join(c.kind for c in a.cards)
            print(f"{mid:<16}{machine:<17}{t_specs * 1e3:7.0f}ms{cold * 1e3:7.1f}ms{warm * 1e3:7.1f}ms"
                  f"{a.searched:>10}  {kinds}")
    print(f"\nslowest search: {worst * 1e3:.1f} ms (target < {TARGET_S * 1e3:.0f} ms, specs excluded)")
    return 0 if worst < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
