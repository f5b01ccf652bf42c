"""Does the probe's prompt figure depend on how many layers its prompt model has? Side by side,
reduced probes whose prompt models have 3 layers (the default) and 2 (what a slow machine
gets: runtime/probe.prefill_layers), alternating in one run, so the machine's drift between
minutes falls on both alike.

    python bench/probe_prompt_layers.py [--types F16,Q4_K,Q8_0,Q6_K] [--rounds 3]

Prints per weight type the median prompt and decode figure (ns per weight) of each arm and
the 2-layer / 3-layer ratio (decode is the same model in both arms: its ratio is the noise),
and how long each arm's prompt runs took. Nothing is stored.
"""

from __future__ import annotations

import argparse
import math
import statistics

from rooflight.hardware import detect
from rooflight.runtime import probe as probe_module
from rooflight.runtime.probe_defaults import ALL_TYPES


def _probe(hw, types: tuple[str, ...], layers: int):
    old = probe_module.PREFILL_LAYERS, probe_module.PREFILL_SLOW_S
    # every type at `layers`: the first type's too, and no switch after it
    probe_module.PREFILL_LAYERS, probe_module.PREFILL_SLOW_S = layers, math.inf
    try:
        return probe_module.probe_machine(hw, weight_types=types, store=False, image=False, keep_disturbed=True,
                                          budget_s=120.0)
    finally:
        probe_module.PREFILL_LAYERS, probe_module.PREFILL_SLOW_S = old


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--types", default="F16,Q4_K,Q8_0,Q6_K")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    types = tuple(t.strip().upper() for t in args.types.split(","))
    unknown = [t for t in types if t not in ALL_TYPES]
    if unknown or args.rounds < 1:
        ap.error(f"--types takes {', '.join(ALL_TYPES)} (not {', '.join(unknown)})" if unknown
                 else "--rounds must be 1 or more")
    hw = detect()
    arms = (3, 2)
    figures: dict[tuple[int, str], dict[str, list[float]]] = {}
    prompt_s: dict[int, list[float]] = {a: [] for a in arms}
    for r in range(args.rounds):
        for layers in arms if r % 2 == 0 else arms[::-1]:
            run = _probe(hw, types, layers)
            for k in run.probe.kernels:
                f = figures.setdefault((layers, k.weight_type), {"prompt": [], "decode": []})
                f["prompt"].append(k.prefill_s_per_weight * 1e9)
                f["decode"].append(k.decode_s_per_weight * 1e9)
            prompt_s[layers] += [s for name, v in run.runs.items() if name.startswith("kernel/") and "prefill" in name
                                 for s in v["seconds"]]
            print(f"round {r + 1}, {layers} layers: {run.probe.duration_s:.1f} s", flush=True)
    print(f"machine: {hw.cpu.name}; {args.rounds} rounds; median ns per weight")
    print(f"{'type':6s} | {'prompt 3L':>9s} {'2L':>8s} {'2L/3L':>6s} | {'decode 3L':>9s} {'2L':>8s} {'2L/3L':>6s}")
    ratios: list[float] = []
    for t in types:
        if (3, t) not in figures or (2, t) not in figures:
            print(f"{t:6s} | not measured in both arms")
            continue
        p3, p2 = (statistics.median(figures[(a, t)]["prompt"]) for a in arms)
        d3, d2 = (statistics.median(figures[(a, t)]["decode"]) for a in arms)
        ratios.append(p2 / p3)
        print(f"{t:6s} | {p3:9.4f} {p2:8.4f} {p2 / p3:6.2f} | {d3:9.4f} {d2:8.4f} {d2 / d3:6.2f}")
    if ratios:
        print(f"prompt 2L/3L: median x{statistics.median(ratios):.2f} (range x{min(ratios):.2f}-{max(ratios):.2f})")
    for a in arms:
        if prompt_s[a]:
            print(f"{a} layers: a prompt run took {statistics.median(prompt_s[a]):.2f} s (median), "
                  f"{sum(prompt_s[a]) / args.rounds:.1f} s per probe")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
