"""How the datasheet CPU model prices CPUs it has never seen: the shares fitted, as
bench/fit_cpu.py fits them, on the CPU rows of an earlier revision of the fitting set, then
used on the rows of the CPUs added since. A true held-out check, beside fit_constants.py's
leave-one-CPU-out over today's set.

    python bench/cpu_heldout.py --base 55c934d   # any git revision of bench/data/llama_bench_rows.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit_constants as fc  # noqa: E402
import fit_cpu  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = "bench/data/llama_bench_rows.json"


def _rows_at(revision: str) -> dict:
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{DATA}"], capture_output=True, text=True,
                          check=True).stdout
    return json.loads(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the git revision whose CPUs the shares are fitted on")
    args = ap.parse_args()
    now = fc.load()
    before = {r["device"] for r in _rows_at(args.base)["rows"] if r["backend"] == "cpu"}
    cpus = now["cpus"]
    rows = [r for r in now["rows"] if r["backend"] == "cpu"]
    old = [r for r in rows if r["device"] in before]
    new = [r for r in rows if r["device"] not in before]
    if not new:
        print(f"no CPU added since {args.base}")
        return 0
    coef = {id(r): fit_cpu.coefficients(r, fc._seconds) for r in rows}
    shares = {}
    for fam in sorted({fit_cpu.family(r, cpus) for r in rows}):
        shares[fam] = fit_cpu.fit([r for r in old if fit_cpu.family(r, cpus) == fam], coef, fc.measured_seconds)
        s = shares[fam]
        print(f"{fam}: shares fitted on {len({r['device'] for r in old if fit_cpu.family(r, cpus) == fam})} CPUs of "
              f"{args.base}: read {s['peak_read_share']:.2f}, clock {s['clock_share']:.3f}, "
              f"matmul clock {s['matmul_clock_share']:.3f}")
    errors: dict[str, list[float]] = {"decode": [], "prefill": []}
    print("\nmeasured / predicted tokens/s, CPUs added since (never in the fit):")
    for r in new:
        s = shares[fit_cpu.family(r, cpus)]
        ratio = fit_cpu.predict_s(coef[id(r)], *fit_cpu.row_share(r, s)) / fc.measured_seconds(r)
        errors["decode" if r["n_gen"] else "prefill"].append(abs(ratio - 1))
        print(f"  {r['device'][:44]:44} {r['model'][:18]:18} {r['quant']:7} {r['test']:6} t{r.get('n_threads')!s:>3}"
              f"  x{ratio:.2f}")
    print(f"\n{len({r['device'] for r in new})} CPUs, {len(new)} rows:")
    for kind, errs in errors.items():
        if errs:
            print(f"  {kind}: {len(errs)} rows, median {np.median(errs):.0%}, p90 {np.percentile(errs, 90):.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
