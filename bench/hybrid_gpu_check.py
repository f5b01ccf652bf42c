"""Hybrid Qwen models on GPUs: published llama-bench rows against the table estimate.

    python bench/hybrid_gpu_check.py

bench/data/hybrid_gpu_rows.json holds published rows of Qwen3.5, Qwen3.6 and Qwen3-Next
(gated delta-net layers) on one GPU each, with the dense or plain-MoE models some of their
sources ran on the same GPU and build. Each is priced as bench/fit_constants.py prices its
own rows, with the constants it fits on all of them (none on these rows), and printed as
measured / predicted tokens/s. Where a source ran a companion in the same run, the
hybrid's ratio over the companion's says what the hybrid's layers cost that the estimate
leaves out (estimate/recurrent_work.py prices their scans on a CPU only). Nothing here is
fitted to the constants; it says where the GPU estimate of these models stands, and derives
the range a hybrid on a GPU is given (backend_constants.HYBRID_GPU_*_BAND): percentiles of
the hybrid rows' ratios, joined with the backend's own band, the narrowest that holds 8 of 10
rows of each GPU held out of the percentiles (the rule of the backends' own bands).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

import numpy as np

from rooflight.estimate import backend_constants as bc
from rooflight.gguf.recurrent import RECURRENT_RULES

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fit_constants  # noqa: E402 - the fitting set's pricing, beside this file

DATA = HERE / "data" / "hybrid_gpu_rows.json"


def is_hybrid(row: dict) -> bool:
    return fit_constants.model_spec(row["model"], row["quant"]).architecture in RECURRENT_RULES


def run_key(row: dict) -> tuple:
    """Rows of one run: the same GPU, backend and build (its commit hash where the build names
    one: sources print "b8038 (05a6f0e89)" and "05a6f0e89 (8038)" for the same build)."""
    build = row.get("build") or ""
    commit = re.search(r"\b[0-9a-f]{7,9}\b", build)
    return row["device"], row["backend"], commit.group(0) if commit else build


def ratios(rows: list[dict], constants: dict | None = None) -> dict[int, float]:
    """{id(row): measured / predicted tokens/s} with the constants fit_constants.py fits
    (given, or fitted here)."""
    constants = constants or fit_constants.run()["fitted"]
    out = {}
    for r in rows:
        r.setdefault("n_depth", 0)
        out[id(r)] = r["t_s"] / fit_constants.predict(r, fit_constants.coefficients(r), constants[r["backend"]])
    return out


def band(rows: list[dict], ratio: dict[int, float]) -> dict:
    """{"tail": percent, "decode": (low, high), "prefill": ..., "decode_held_out": (inside,
    rows), ...}: the hybrid rows' percentile band, at the largest tail of
    fit_constants.BAND_TAILS (the narrowest band) that holds fit_constants.BAND_PROMISE of each
    GPU's rows when derived without that GPU (joined with the row's backend band, as the
    estimate joins them), and how many it holds so."""
    hybrids = [(r, ratio[id(r)], "decode" if r["n_gen"] else "prefill") for r in rows if is_hybrid(r)]
    out: dict = {}
    for tail in fit_constants.BAND_TAILS:
        for kind in ("decode", "prefill"):
            inside = total = 0
            for gpu in sorted({r["device"] for r, _, _ in hybrids}):
                others = [x for r, x, k in hybrids if k == kind and r["device"] != gpu]
                lo, hi = np.percentile(others, [tail, 100 - tail])
                for r, x, k in hybrids:
                    if k == kind and r["device"] == gpu:
                        own = getattr(bc.BACKENDS[r["backend"]], f"{kind}_band")
                        inside += min(lo, own[0]) <= x <= max(hi, own[1])
                        total += 1
            lo, hi = np.percentile([x for _, x, k in hybrids if k == kind], [tail, 100 - tail])
            out[kind] = (round(float(lo), 2), round(float(hi), 2))
            out[kind + "_held_out"] = (inside, total)
        out["tail"] = tail
        if all(out[k + "_held_out"][0] >= fit_constants.BAND_PROMISE * out[k + "_held_out"][1]
               for k in ("decode", "prefill")):
            break
    return out


def main() -> int:
    rows = json.loads(DATA.read_text(encoding="utf-8"))["rows"]
    constants = fit_constants.run()["fitted"]
    ratio = ratios(rows, constants)
    print("| GPU | backend | model | test | measured t/s | measured / predicted | size printed / planned |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        planned = fit_constants.model_spec(r["model"], r["quant"]).file_bytes / 2**30
        size = f"x{r['size_gib'] / planned:.2f}" if r.get("size_gib") else "not printed"
        name = r["model"] + ("" if is_hybrid(r) else " (companion)")
        print(f"| {r['device']} | {r['backend']} | {name} {r['quant']} | {r['test']} | {r['t_s']:.1f} | "
              f"x{ratio[id(r)]:.2f} | {size} |")
    for kind in ("tg", "pp"):
        hyb = [ratio[id(r)] for r in rows if is_hybrid(r) and r["test"].startswith(kind)]
        print(f"\nhybrid {'decode' if kind == 'tg' else 'prompt'} rows: {len(hyb)}, measured / predicted "
              f"x{min(hyb):.2f}-{max(hyb):.2f}, median x{statistics.median(hyb):.2f}")
    # companions also from the fitting set: its rows of the same GPU, backend and build
    fitting = [r for r in fit_constants.load()["rows"] if r["backend"] != "cpu" and r.get("build")
               and run_key(r) in {run_key(h) for h in rows}]
    ratio.update(ratios(fitting, constants))
    found = band(rows, ratio)
    print(f"\nthe band for hybrids on GPUs (p{found['tail']:g}-p{100 - found['tail']:g} of their ratios, joined with "
          "the backend's band): each GPU held out of the percentiles, its rows inside:")
    for kind in ("decode", "prefill"):
        inside, total = found[kind + "_held_out"]
        print(f"  {kind}: {inside} of {total} inside; from every row: {found[kind]}"
              f" (in backend_constants.py: {getattr(bc, 'HYBRID_GPU_' + kind.upper() + '_BAND')})")
    print("\nsame run (GPU, backend, build), hybrid over companion: the hybrids' median ratio over the "
          "companions' (this file's and the fitting set's rows), by test kind:")
    for key in sorted({run_key(r) for r in rows}, key=str):
        run = [r for r in rows + fitting if run_key(r) == key]
        for kind in ("tg", "pp"):
            hyb = [ratio[id(r)] for r in run if is_hybrid(r) and r["test"].startswith(kind)]
            dense = [ratio[id(r)] for r in run if not is_hybrid(r) and r["test"].startswith(kind)]
            if hyb and dense:
                print(f"  {key[0]} {key[1]} {key[2]}: {'decode' if kind == 'tg' else 'prompt'} "
                      f"x{statistics.median(hyb) / statistics.median(dense):.2f} ({len(hyb)} hybrid, "
                      f"{len(dense)} companion rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
