"""Fit and check the CPU price of hybrid models' recurrent state scans (estimate/recurrent_work.py).

    python bench/recurrent_cost.py [--repeats N] [--keep DIR] [--real] [--save]
    python bench/recurrent_cost.py --pool [PATH ...]

Generated hybrid models (gated delta-net: qwen35, qwen35moe, qwen3next; Mamba-2: granitehybrid,
nemotron_h; Mamba-1: jamba; LFM2's short convolutions) and dense llama models of the same widths
run with llama.cpp on this CPU, at the plans' configs, interleaved, `--repeats` times each
(median). Each hybrid is compared with its dense reference (same width, weight type and
threads): the reference's measured / predicted ratio is what the probe-based estimate misses
on any model here, so the hybrid's own miss beyond it is what its recurrent layers cost and
the estimate leaves out.

1. Fit: with recurrent_work's constants at zero, the time each run's prediction lacks to miss
   by no more than its reference does solves, relative to that time, for the cycles per state
   element and walk in prompts and the same in decode (least squares over all runs; numpy).
   The estimator's time is linear in the two (checked against a re-plan for every run).
2. Check, leave-one-run-out: each run predicted with the constants fitted on the others, and
   without them, beside its reference's own miss.
--real instead checks two real models' shapes (Qwen3.5-2B, Granite 4.0 H Micro; 2-3.4 GB) with
the constants as they are, each beside its dense reference, and fits nothing.
Prints the constants to write into estimate/recurrent_work.py. Needs a stored probe
(`rooflight probe`); measure on an idle machine (the load is printed).
--save keeps the run as a JSON record in bench/results/recurrent/ (each run's measured and
predicted seconds, and the seconds a cycle per element adds: all the fit needs).
--pool measures nothing: it fits the constants on the saved records of every machine but one
and checks them on that one (leave-one-machine-out), beside the shipped constants and none:
what one machine's runs cannot say about the next (the prompt constant refitted per VM has
ranged 0.14-0.58).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from rooflight.estimate import Calibration, Wishes, perf, plan, recurrent_work
from rooflight.gguf import load_model_spec
from rooflight.gguf.arch_recipe import HybridShape
from rooflight.gguf.synthetic import write_model
from rooflight.gguf.synthetic_hybrid import write_hybrid_model
from rooflight.hardware import detect
from rooflight.runtime.measure import measure
from rooflight.store.probes import probe_status

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_probe import machine_fields, machine_key, record_files, write_record  # noqa: E402 - beside this file

RESULTS_DIR = Path(__file__).resolve().parent / "results" / "recurrent"
L = 8
PROMPT, GEN = 512, 64
ATT = tuple(i in (3, 7) for i in range(L))  # attention layers of the kv0-rule hybrids
COMMON = dict(n_embd=1024, n_head=8, head_dim=128, n_vocab=8000)


def _kv0(heads: int) -> tuple[int, ...]:
    return tuple(heads if a else 0 for a in ATT)


# the hybrids, each run at Q8_0 with the plan's threads (RUNS adds two variations)
HYBRIDS = {
    "qwen35-v8s128": HybridShape("qwen35", **COMMON, n_head_kv=(2,) * L, n_ff=(3072,) * L, ssm_d_inner=1024,
                                  ssm_d_state=128, ssm_dt_rank=8, ssm_n_group=4),
    "qwen35-v16s64": HybridShape("qwen35", **COMMON, n_head_kv=(2,) * L, n_ff=(3072,) * L, ssm_d_inner=1024,
                                  ssm_d_state=64, ssm_dt_rank=16, ssm_n_group=8),
    "granite-s128": HybridShape("granitehybrid", **COMMON, n_head_kv=_kv0(2), n_ff=(3072,) * L,
                                 ssm_d_inner=2048, ssm_d_state=128, ssm_dt_rank=32, ssm_n_group=1),
    "qwen35-v16s128": HybridShape("qwen35", **COMMON, n_head_kv=(2,) * L, n_ff=(3072,) * L, ssm_d_inner=2048,
                                   ssm_d_state=128, ssm_dt_rank=16, ssm_n_group=8),
    "qwen35moe": HybridShape("qwen35moe", **COMMON, n_head_kv=(2,) * L, n_ff=(1024,) * L, ssm_d_inner=1024,
                              ssm_d_state=128, ssm_dt_rank=8, ssm_n_group=2, n_expert=8, n_expert_used=2,
                              n_ff_exp=768, n_ff_shexp=1024),
    "qwen3next": HybridShape("qwen3next", **COMMON, n_head_kv=(2,) * L, n_ff=(1024,) * L, ssm_d_inner=2048,
                              ssm_d_state=128, ssm_dt_rank=16, ssm_n_group=4, n_expert=8, n_expert_used=2,
                              n_ff_exp=768, n_ff_shexp=1024),
    "granite-s64": HybridShape("granitehybrid", **COMMON, n_head_kv=_kv0(2), n_ff=(3072,) * L,
                                ssm_d_inner=2048, ssm_d_state=64, ssm_dt_rank=32, ssm_n_group=1),
    "nemotron_h": HybridShape("nemotron_h", **COMMON, n_head_kv=(0, 0, 0, 2, 0, 0, 0, 0),
                               n_ff=(0, 4096, 0, 0, 4096, 0, 4096, 0), ssm_d_inner=2048, ssm_d_state=128,
                               ssm_dt_rank=32, ssm_n_group=2),
    "jamba": HybridShape("jamba", **COMMON, n_head_kv=tuple(2 if i == 4 else 0 for i in range(L)),
                          n_ff=(2048,) * L, ssm_d_inner=2048, ssm_d_state=16, ssm_dt_rank=64, n_expert=4,
                          n_expert_used=2),
    "lfm2": HybridShape("lfm2", **COMMON, n_head_kv=_kv0(2), n_ff=(3072,) * L),
    # Qwen3.5-0.8B's own shape (the catalog's hyper-parameters: 24 layers, 248,320 tokens)
    "qwen3.5-0.8b shape": HybridShape("qwen35", n_embd=1024, n_head=8, head_dim=256, n_head_kv=(2,) * 24,
                                       n_ff=(3584,) * 24, n_vocab=248320, ssm_d_inner=2048, ssm_d_state=128,
                                       ssm_dt_rank=16, ssm_n_group=16),
}
# dense references: the hybrids' widths with attention in every layer (write_model arguments)
REFERENCES = {
    "llama": dict(n_layer=L, n_embd=1024, n_head=8, n_head_kv=2, n_ff=3072, n_vocab=8000),
    "llama 0.8b-wide": dict(n_layer=24, n_embd=1024, n_head=8, n_head_kv=2, head_dim=256, n_ff=3584,
                            n_vocab=248320),
}
REFERENCE_OF = {"qwen3.5-0.8b shape": "llama 0.8b-wide", "qwen3.5-2b shape": "llama 2b-wide",
                "granite-4.0-h-micro shape": "llama micro-wide"}
# --real: two more real models' shapes (the catalog's hyper-parameters), 2-3.4 GB at Q8_0, each
# beside its dense reference, checked with the constants as they are (nothing fitted on them)
REAL = {
    "qwen3.5-2b shape": HybridShape("qwen35", n_embd=2048, n_head=8, head_dim=256, n_head_kv=(2,) * 24,
                                    n_ff=(6144,) * 24, n_vocab=248320, ssm_d_inner=2048, ssm_d_state=128,
                                    ssm_dt_rank=16, ssm_n_group=16),
    "granite-4.0-h-micro shape": HybridShape("granitehybrid", n_embd=2048, n_head=32, head_dim=64,
                                             n_head_kv=tuple(8 if i in (5, 15, 25, 35) else 0 for i in range(40)),
                                             n_ff=(8192,) * 40, n_vocab=100352, ssm_d_inner=4096, ssm_d_state=128,
                                             ssm_dt_rank=64, ssm_n_group=1),
}
REFERENCES.update({
    "llama 2b-wide": dict(n_layer=24, n_embd=2048, n_head=8, n_head_kv=2, head_dim=256, n_ff=6144, n_vocab=248320),
    "llama micro-wide": dict(n_layer=40, n_embd=2048, n_head=32, n_head_kv=8, n_ff=8192, n_vocab=100352),
})
# (name, hybrid, weight type, threads): the runs; a reference runs per (weight type, threads)
RUNS = [(name, name, "Q8_0", None) for name in HYBRIDS] + [
    ("qwen35-v8s128 Q4_0", "qwen35-v8s128", "Q4_0", None),
    ("qwen35-v8s128 1 thread", "qwen35-v8s128", "Q8_0", 1),
]


def reference_run(hybrid: str, ftype: str, threads: int | None) -> tuple[str, str]:
    """(run name, REFERENCES key) of the dense run a hybrid's run is compared with."""
    ref = REFERENCE_OF.get(hybrid, "llama")
    return f"{ref} {ftype}" + (f" {threads} thread" if threads else ""), ref


@contextlib.contextmanager
def constants(prefill: float, decode: float):
    saved = recurrent_work.PREFILL_CYCLES_PER_ELEMENT, recurrent_work.DECODE_CYCLES_PER_ELEMENT
    recurrent_work.PREFILL_CYCLES_PER_ELEMENT, recurrent_work.DECODE_CYCLES_PER_ELEMENT = prefill, decode
    try:
        yield
    finally:
        recurrent_work.PREFILL_CYCLES_PER_ELEMENT, recurrent_work.DECODE_CYCLES_PER_ELEMENT = saved


def write(folder: Path, model: str, ftype: str) -> Path:
    """The GGUF of a hybrid or a dense reference at this weight type (written once per folder)."""
    path = folder / f"{model}-{ftype}.gguf".replace(" ", "_")
    if not path.exists():
        if model in REFERENCES:
            write_model(path, **REFERENCES[model], ftype=ftype)
        else:
            write_hybrid_model(path, {**HYBRIDS, **REAL}[model], ftype=ftype)
    return path


# ---- the fit, on plain per-run figures (a live run's or saved records'): each run is
# {"reference": name, "measured": [decode s per token, prompt s], "bare": the same predicted
# with the constants at zero, "unit": [prompt s, decode s per token] one cycle per element
# adds}; a reference has "measured" and "bare" only. Index 0 is decode, 1 the prompt.

def _goal(runs: dict, refs: dict, n: str) -> tuple[float, float]:
    """The seconds run n's prediction would need to miss by just its reference's ratio."""
    r, ref = runs[n], refs[runs[n]["reference"]]
    return tuple(r["measured"][i] * ref["bare"][i] / ref["measured"][i] for i in (0, 1))


def fit(runs: dict, refs: dict, names: list[str]) -> tuple[float, float]:
    """(prompt, decode) cycles per element: least squares of the relative shortfalls (relative
    rows: every run weighs alike)."""
    out = []
    for i, j in ((1, 0), (0, 1)):  # goal/bare index, unit index
        goals = {n: _goal(runs, refs, n)[i] for n in names}
        a = np.array([[runs[n]["unit"][j] / goals[n]] for n in names])
        b = np.array([(goals[n] - runs[n]["bare"][i]) / goals[n] for n in names])
        (c,), *_ = np.linalg.lstsq(a, b, rcond=None)
        out.append(max(0.0, float(c)))
    return out[0], out[1]


def with_constants(run: dict, c: tuple[float, float]) -> tuple[float, float]:
    """(decode s per token, prompt s) predicted with constants c = (prompt, decode)."""
    return run["bare"][0] + run["unit"][1] * c[1], run["bare"][1] + run["unit"][0] * c[0]


def miss(runs: dict, refs: dict, n: str, i: int, c: tuple[float, float] | None) -> float:
    """|run n's measured / predicted (with c; None: without the term) over its reference's - 1|."""
    r, ref = runs[n], refs[runs[n]["reference"]]
    predicted = with_constants(r, c)[i] if c is not None else r["bare"][i]
    return abs(r["measured"][i] / predicted / (ref["measured"][i] / ref["bare"][i]) - 1)


def summary(pairs: list[tuple[float, str]]) -> str:
    worst = max(pairs)
    return f"median {statistics.median(x for x, _ in pairs):.1%} (max {worst[0]:.1%}, {worst[1]})"


def record(runs: dict, refs: dict, repeats: int, load: tuple[float, float], when: datetime.datetime) -> dict:
    """One run of this script as JSON: every figure the fit and the check need."""
    def rounded(d: dict) -> dict:
        return {k: ([float(f"{x:.6g}") for x in v] if isinstance(v, (list, tuple)) else v) for k, v in d.items()}

    return {"script": "bench/recurrent_cost.py", "utc": when.isoformat(timespec="seconds"), "repeats": repeats,
            "load_1min_before": round(load[0], 2), "load_1min_after": round(load[1], 2), **machine_fields(),
            "shipped": [recurrent_work.PREFILL_CYCLES_PER_ELEMENT, recurrent_work.DECODE_CYCLES_PER_ELEMENT],
            "runs": {n: rounded(r) for n, r in runs.items()}, "references": {n: rounded(r) for n, r in refs.items()}}


def load_records(paths: list[str]) -> list[tuple[str, dict]]:
    """(machine key, record) for each saved record in these files and folders (default
    RESULTS_DIR); a file that is not one is named on stderr and left out."""
    out = []
    for f in record_files(paths, RESULTS_DIR, "recurrent_cost"):
        try:
            rec = json.loads(f.read_text(encoding="utf-8"))
            key = machine_key(rec)
            if key is None or not isinstance(rec["runs"], dict) or not isinstance(rec["references"], dict):
                raise ValueError("no machine or no runs")
        except (OSError, ValueError, KeyError, TypeError):
            print(f"{f} is not a record of bench/recurrent_cost.py --save; left out.", file=sys.stderr)
            continue
        out.append((key, rec))
    return out


def pool(records: list[tuple[str, dict]]) -> dict[str, dict]:
    """Leave one machine out: {machine: {"fitted": constants from the other machines' runs,
    "runs": n, kind: {"held out", "shipped", "none"}: median miss beyond the reference's}},
    plus "all": {"fitted": the constants from every run}. Runs are named per record so two
    records' runs stay apart."""
    runs, refs, machine_of = {}, {}, {}
    for k, (key, rec) in enumerate(records):
        for n, r in rec["runs"].items():
            runs[f"{k}:{n}"] = dict(r, reference=f"{k}:{r['reference']}")
            machine_of[f"{k}:{n}"] = key
        refs.update({f"{k}:{n}": r for n, r in rec["references"].items()})
    out: dict[str, dict] = {}
    for key in sorted(set(machine_of.values())):
        held = [n for n in runs if machine_of[n] == key]
        others = [n for n in runs if machine_of[n] != key]
        c = fit(runs, refs, others) if others else None
        shipped = tuple(records[int(held[0].split(":")[0])][1]["shipped"])
        entry: dict = {"fitted": c, "runs": len(held)}
        for i, kind in ((0, "decode"), (1, "prefill")):
            entry[kind] = {"held out": statistics.median(miss(runs, refs, n, i, c) for n in held) if c else None,
                           "shipped": statistics.median(miss(runs, refs, n, i, shipped) for n in held),
                           "none": statistics.median(miss(runs, refs, n, i, None) for n in held)}
        out[key] = entry
    out["all"] = {"fitted": fit(runs, refs, list(runs)) if runs else None}
    return out


def print_pool(result: dict[str, dict]) -> None:
    print("| machine held out | runs | constants from the others (prompt, decode) | decode: held out / shipped / none "
          "| prompts: held out / shipped / none |")
    print("|---|---|---|---|---|")
    for key, e in result.items():
        if key == "all":
            continue
        c = "none: no other machine" if e["fitted"] is None else f"{e['fitted'][0]:.2f}, {e['fitted'][1]:.2f}"
        cells = [" / ".join("-" if e[k][w] is None else f"{e[k][w]:.1%}" for w in ("held out", "shipped", "none"))
                 for k in ("decode", "prefill")]
        print(f"| {key} | {e['runs']} | {c} | {cells[0]} | {cells[1]} |")
    if result["all"]["fitted"] is not None:
        print(f"\nfitted on every machine's runs: PREFILL_CYCLES_PER_ELEMENT = {result['all']['fitted'][0]:.2f}, "
              f"DECODE_CYCLES_PER_ELEMENT = {result['all']['fitted'][1]:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="write the models here (kept for another run)")
    ap.add_argument("--real", action="store_true",
                    help="check two real models' shapes with the constants as they are (no fit)")
    ap.add_argument("--save", action="store_true", help=f"keep the run as a JSON record under {RESULTS_DIR}")
    ap.add_argument("--pool", nargs="*", metavar="PATH",
                    help="measure nothing: leave-one-machine-out over saved records (default: all of them)")
    args = ap.parse_args()
    if args.pool is not None:
        records = load_records(args.pool)
        if not records:
            print(f"no saved record: run bench/recurrent_cost.py --save (they go to {RESULTS_DIR})")
            return 1
        print_pool(pool(records))
        return 0
    run_list = [(name, name, "Q8_0", None) for name in REAL] if args.real else RUNS
    hw = detect()
    probe = probe_status(hw).probe
    if probe is None:
        print("No probe of this machine and llama.cpp build: run `rooflight probe` first.")
        return 1
    cal = Calibration(probe=probe)
    load_before = os.getloadavg()[0]
    print(f"load average before: {load_before:.2f} (this run's own threads count in the one after)")
    folder = args.keep or Path(tempfile.mkdtemp(prefix="recurrent-cost-"))
    folder.mkdir(parents=True, exist_ok=True)
    # (run name, model, weight type, threads, is a reference)
    runs = [(name, hybrid, ftype, threads, False) for name, hybrid, ftype, threads in run_list]
    ref_of = {name: reference_run(hybrid, ftype, threads)[0] for name, hybrid, ftype, threads in run_list}
    for _, hybrid, ftype, threads in run_list:
        name, ref = reference_run(hybrid, ftype, threads)
        if all(r[0] != name for r in runs):
            runs.append((name, ref, ftype, threads, True))
    plans, got = {}, {name: [] for name, *_ in runs}
    for name, hybrid, ftype, threads, _ref in runs:
        spec = load_model_spec(str(write(folder, hybrid, ftype)))
        wishes = Wishes(n_ctx=2048, n_gpu_layers=0, n_threads=threads)
        plans[name] = (spec, wishes)
    for _ in range(args.repeats):
        for name, hybrid, ftype, _threads, _ref in runs:
            spec, wishes = plans[name]
            est = plan(spec, hw, wishes, calibration=cal)
            got[name].append(measure(write(folder, hybrid, ftype), est.config, prompt_tokens=PROMPT, gen_tokens=GEN))
    load_after = os.getloadavg()[0]
    print(f"load average after: {load_after:.2f}")
    meas = {n: (statistics.median(1 / g.decode_tok_s for g in v), statistics.median(PROMPT / g.prefill_tok_s for g in v))
            for n, v in got.items()}

    def predicted(name: str) -> tuple[float, float]:
        spec, wishes = plans[name]
        p = plan(spec, hw, wishes, calibration=cal).performance
        return 1 / p.decode_tok_s, PROMPT / p.prefill_tok_s

    def terms(name: str) -> tuple[float, float]:
        """(prompt seconds, decode seconds per token) each cycle per element adds to this run."""
        spec, wishes = plans[name]
        cfg = plan(spec, hw, wishes, calibration=cal).config
        n = recurrent_work.recurrent_layers(spec, 0, spec.n_layer)
        walked = n * recurrent_work.element_walks(spec) / perf.cpu_matvec_hz(hw, cfg)
        return PROMPT * walked, walked

    with constants(0.0, 0.0):
        bare = {n: predicted(n) for n in meas}
    if args.real:
        now = {n: predicted(n) for n in meas}
        print("\n| run | decode: measured tok/s | predicted / measured (without) | reference | "
              "prompt: measured tok/s | predicted / measured (without) | reference |")
        print("|---|---|---|---|---|---|---|")
        for n, *_ in run_list:
            cells = []
            for i, per in ((0, 1.0), (1, PROMPT)):
                cells += [f"{per / meas[n][i]:.1f}", f"x{meas[n][i] / now[n][i]:.2f} (x{meas[n][i] / bare[n][i]:.2f})",
                          f"x{meas[ref_of[n]][i] / now[ref_of[n]][i]:.2f}"]
            print(f"| {n} | " + " | ".join(cells) + " |")
        return 0
    rows = [name for name, *_ in RUNS]
    runs = {n: {"reference": ref_of[n], "measured": list(meas[n]), "bare": list(bare[n]), "unit": list(terms(n))}
            for n in rows}
    refs = {ref_of[n]: {"measured": list(meas[ref_of[n]]), "bare": list(bare[ref_of[n]])} for n in rows}
    if args.save:
        rec = record(runs, refs, args.repeats, (load_before, load_after), datetime.datetime.now(datetime.UTC))
        print(f"saved: {write_record(rec, RESULTS_DIR, 'recurrent_cost', rec['cpu_id'] or 'cpu')}")

    final = tuple(round(x, 2) for x in fit(runs, refs, rows))
    print(f"\nfitted on all {len(rows)} runs: PREFILL_CYCLES_PER_ELEMENT = {final[0]}, "
          f"DECODE_CYCLES_PER_ELEMENT = {final[1]}")
    print(f"(in estimate/recurrent_work.py now: {recurrent_work.PREFILL_CYCLES_PER_ELEMENT}, "
          f"{recurrent_work.DECODE_CYCLES_PER_ELEMENT})")
    with constants(*final):  # the linear form is the estimator's own: checked on every run
        for n in rows:
            replanned, linear = predicted(n), with_constants(runs[n], final)
            assert all(abs(replanned[i] / linear[i] - 1) < 1e-6 for i in (0, 1)), n
    print("\nEach run predicted with the constants fitted on the other runs (leave-one-run-out); in "
          "brackets, without recurrent_work. Predicted / measured tok/s; the reference is the dense "
          "model of the same widths, weight type and threads.\n")
    print("| run | decode: measured tok/s | predicted / measured (without) | reference | "
          "prompt: measured tok/s | predicted / measured (without) | reference |")
    print("|---|---|---|---|---|---|---|")
    misses: dict[str, list[tuple[float, str]]] = {"decode": [], "prefill": [], "decode_bare": [], "prefill_bare": []}
    for n in rows:
        c = fit(runs, refs, [m for m in rows if m != n])
        held = with_constants(runs[n], c)
        cells = []
        for i, kind, per in ((0, "decode", 1.0), (1, "prefill", PROMPT)):
            r, r0 = meas[n][i] / held[i], meas[n][i] / bare[n][i]
            rr = meas[ref_of[n]][i] / bare[ref_of[n]][i]
            cells += [f"{per / meas[n][i]:.1f}", f"x{r:.2f} (x{r0:.2f})", f"x{rr:.2f}"]
            # beyond the reference's: what this term answers for
            misses[kind].append((miss(runs, refs, n, i, c), n))
            misses[kind + "_bare"].append((miss(runs, refs, n, i, None), n))
        print(f"| {n} | " + " | ".join(cells) + " |")
    print()
    for kind in ("decode", "prefill"):
        print(f"leave-one-run-out, {kind}: miss beyond the reference's, {summary(misses[kind])}; "
              f"without recurrent_work {summary(misses[kind + '_bare'])}")
    # the shipped constants, fitted on another machine's runs: out of sample on this one
    shipped = (recurrent_work.PREFILL_CYCLES_PER_ELEMENT, recurrent_work.DECODE_CYCLES_PER_ELEMENT)
    for i, kind in ((0, "decode"), (1, "prefill")):
        pairs = [(miss(runs, refs, n, i, shipped), n) for n in rows]
        print(f"with the constants in recurrent_work.py ({shipped[0]}, {shipped[1]}), {kind}: miss beyond "
              f"the reference's, {summary(pairs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
