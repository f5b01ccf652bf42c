"""Top three picks per reference machine (tests/profiles/*.json), as README "Top picks" shows them.

    python bench/picks.py [--use-case chat] [--markdown]

Runs the same ranking as `rooflight rank --hardware tests/profiles/NAME.json` and prints each
machine's first three rows with the reason for each: quant, fit, decode speed against the use
case's threshold, memory against what the machine leaves free, quality and what it stands on.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rooflight.catalog import picks
from rooflight.catalog.models import quant_order
from rooflight.catalog.quality import quality_basis
from rooflight.catalog.rank import rank_models
from rooflight.hardware.profile_io import load_profile

PROFILES = Path(__file__).resolve().parent.parent / "tests" / "profiles"
ORDER = ("laptop-16gb-cpu", "rtx4060-8gb", "rtx3060-12gb", "rtx4060ti-16gb", "rtx3090-24gb", "rtx4090-24gb",
         "rtx5090-32gb", "m2-16gb", "m4max-64gb", "strix-halo-128gb")
FIT = {"full_gpu": "all on the GPU", "partial_gpu": "split GPU/CPU", "cpu_only": "CPU only"}


def _why_not(o, best, threshold: float) -> str:
    e, b = o.estimate, best.estimate
    if e.fit == "too_large":
        return f"{o.quant} does not fit"
    if b.fit == "full_gpu" and e.fit != "full_gpu":
        return f"{o.quant} would spill to the CPU"
    if not o.headroom:
        return f"{o.quant} would leave under 10% free"
    if e.performance.decode_tok_s < threshold:
        return f"{o.quant} falls under {threshold:.0f} tok/s"
    drop = 1 - e.performance.decode_tok_s / b.performance.decode_tok_s
    return f"{o.quant} costs {drop:.0%} of the speed"


def reason(r, use_case: str) -> str:
    e = r.best.estimate
    q = r.model.quality
    threshold = picks.usable_tok_s(use_case)
    basis = ("leaderboard figure" if q is not None and q.score is not None
             else f"mapped from its arena score {q.index.score:g}"
             + (", floored at the model it succeeds" if "raised to" in quality_basis(r.model)["quality_note"] else "")
             if q is not None and q.index is not None
             else f"prior: successor of {q.prior.removeprefix('successor:')}" if q and q.prior.startswith("successor:")
             else "prior: size line")
    if r.best.quant == r.model.native_quant:
        why_quant = f"{r.best.quant}, its native format"
    else:
        higher = sorted((o for o in r.options if quant_order(o.quant) > quant_order(r.best.quant)),
                        key=lambda o: quant_order(o.quant))
        why_quant = r.best.quant + (f" ({_why_not(higher[0], r.best, threshold)})" if higher else "")
    return (f"{why_quant}; {FIT.get(e.fit, e.fit)}, {e.performance.decode_tok_s:.0f} tok/s, "
            f"{e.memory.total_bytes / 1e9:.1f} GB; quality {r.best.quality:.0f} ({basis})")


def top_three(rows):
    """The first three rows, siblings folded: a model of the same family, size and quality
    as one already listed (Qwen3 30B-A3B Instruct/Thinking 2507) is the same pick."""
    out = []
    for r in rows:
        if any(o.model.family == r.model.family and o.model.params_total == r.model.params_total
               and abs(o.best.quality - r.best.quality) < 0.5 for o in out):
            continue
        out.append(r)
        if len(out) == 3:
            break
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--use-case", default="chat")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    if args.markdown:
        print(f"| machine ({args.use_case}, usable at {picks.usable_tok_s(args.use_case):.0f} tok/s) | # | model | "
              "quant and why; fit, decode, memory; quality |\n|---|---|---|---|")
    for name in ORDER:
        hw = load_profile(PROFILES / f"{name}.json", measure_bandwidth=False)
        top = top_three(rank_models(hw, use_case=args.use_case))
        for i, r in enumerate(top, 1):
            if args.markdown:
                print(f"| {name if i == 1 else ''} | {i} | {r.model.name} | {reason(r, args.use_case)} |")
            else:
                print(f"{name:18s} {i}  {r.model.name:32s} {reason(r, args.use_case)}")


if __name__ == "__main__":
    main()
