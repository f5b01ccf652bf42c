"""This VM after `rooflight probe` only: probe-based estimates vs llama.cpp, side by side
with the table-based ones, on shapes the probe never ran (issue 14's targets).

    python bench/accuracy_probe.py [--quick] [--keep-disturbed] [--repeats N] [--fresh-probe]
                                   [--probe-budget SECONDS] [--bench-with SHAPE] [--save]
    (also: python bench/accuracy.py --probe)

1. Uses the stored probe of this machine and llama.cpp build, or runs one (30 s; always
   with --fresh-probe).
2. Generates random-weight llama models of 25M-1.5B parameters (F16, Q8_0, Q4_0, Q4_K_M,
   Q6_K; with and without GQA; none of the probe's shapes) and takes the Gemma-3-270M
   package model, and measures each with llama.cpp at the planned config: decode right
   after a 512-token prompt (and 4096 for Gemma) and prefill of that prompt; the median of
   --repeats runs per figure (the probe's figures are medians too, and a chat is one run,
   not the best of several: the best of the runs, as before 2026-12-02, is printed after),
   runs interleaved model by model, each run's load watched (runtime/busy.py) and reported.
3. Prints predicted / measured for the probe-based and table-based estimate, whether the
   measured value falls inside the printed range, and the targets: decode within 10%,
   prefill within 15%, measured inside the range in at least 80% of cases.
4. --bench-with SHAPE: what one bench of that shape would then do to the others'
   estimates, its ratio applied per kernel (estimate/kernel_calibration.py) and per file
   type, on the same measurements.
5. --save: writes the run as one JSON record under bench/results/accuracy/ (the machine's
   hardware profile, the probe as stored, every row's predictions, ranges and measured runs),
   so a figure README quotes can be checked, and rules that need probes of several machines
   (bench/probe_type_transfer.py --results) can be tried on them. Commit the records a README
   figure comes from.
Exit 1 when a target is missed. Nothing here is stored for calibration.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from rooflight.errors import RooflightError
from rooflight.estimate import Calibration, Wishes, matmul_shape, plan
from rooflight.estimate.probe import MachineProbe
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import HardwareProfile, detect, profile_from_dict
from rooflight.runtime.busy import Watch
from rooflight.runtime.measure import measure
from rooflight.runtime.probe import last_level_cache_bytes
from rooflight.runtime.rpc import llama_cpp_version

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from gemma_model import gemma_270m_path  # noqa: E402 - the test suite's Gemma-3-270M

# name, write_model arguments: none uses the probe's widths (64, 256, 1024, 2048 with its layer counts)
SHAPES = [
    ("llama-25M-F16-mha", dict(n_layer=4, n_embd=512, n_head=8, n_head_kv=8, n_ff=1408, n_vocab=8000, ftype="F16")),
    ("llama-100M-Q8_0-gqa", dict(n_layer=8, n_embd=768, n_head=12, n_head_kv=4, n_ff=2048, n_vocab=32000,
                                 ftype="Q8_0")),
    ("llama-300M-Q4_K_M-gqa", dict(n_layer=12, n_embd=1280, n_head=10, n_head_kv=2, n_ff=3584, n_vocab=32000,
                                   ftype="Q4_K_M")),
    ("llama-450M-Q6_K-mha", dict(n_layer=12, n_embd=1536, n_head=12, n_head_kv=12, n_ff=4096, n_vocab=32000,
                                 ftype="Q6_K")),
    ("llama-350M-F16-gqa", dict(n_layer=10, n_embd=1536, n_head=12, n_head_kv=4, n_ff=4096, n_vocab=32000,
                                ftype="F16")),
    ("llama-1B-Q4_0-gqa", dict(n_layer=16, n_embd=2304, n_head=18, n_head_kv=6, n_ff=6144, n_vocab=32000,
                                 ftype="Q4_0")),
    ("llama-1.5B-Q4_K_M-gqa", dict(n_layer=20, n_embd=2560, n_head=20, n_head_kv=4, n_ff=6912, n_vocab=32000,
                                   ftype="Q4_K_M")),
]
GEN_TOKENS = 64
DECODE_TARGET, PREFILL_TARGET, COVERAGE_TARGET = 0.10, 0.15, 0.80
RESULTS_DIR = Path(__file__).resolve().parent / "results" / "accuracy"
GEMMA = "gemma-3-270m-Q4_K_M"


def wishes(prompt: int, gen_tokens: int = GEN_TOKENS) -> Wishes:
    """How every row is planned: on the CPU, a context for the prompt and the tokens after it."""
    return Wishes(n_ctx=max(2048, 2 * prompt), n_gpu_layers=0, prompt_tokens=prompt, gen_tokens=gen_tokens)


def write_shape(folder: Path, name: str) -> Path:
    """One of SHAPES written as a GGUF file in folder (random weights, tiled)."""
    return write_model(folder / f"{name}.gguf", context_length=8192, tiled=True, **dict(SHAPES)[name])


@contextlib.contextmanager
def no_shape_term():
    """matmul_shape's edge term off: the probe's per-weight prompt figures at every width."""
    saved, matmul_shape.EDGE_ELEMENTS = matmul_shape.EDGE_ELEMENTS, 0.0
    try:
        yield
    finally:
        matmul_shape.EDGE_ELEMENTS = saved


def pct(pred: float, real: float) -> str:
    return f"{(pred / real - 1) * 100:+6.1f}%"


def the_probe(hw, keep_disturbed: bool, fresh: bool = False, budget_s: float | None = None):
    from rooflight.runtime.probe import BUDGET_S, probe_machine
    from rooflight.store.probes import probe_status

    status = probe_status(hw)
    if status.probe is not None and not fresh:
        print(f"probe: stored one ({status.message})")
        print_figures(status.probe)
        return status.probe
    print(f"probe: {'a fresh one asked for.' if fresh else status.message} Running `rooflight probe`...")
    run = probe_machine(hw, keep_disturbed=keep_disturbed, budget_s=budget_s or BUDGET_S,
                        progress=lambda f, m, s: print(f"  {f:4.0%} {m}", flush=True))
    if not run.stored:
        print(f"probe: {run.refused}")
        return None
    print(f"probe: stored, {run.probe.duration_s:.1f} s, spread {run.probe.spread:.0%}"
          f"{', DISTURBED (busy machine)' if run.probe.disturbed else ''}; not measured: {run.skipped or 'none'}")
    print_figures(run.probe)
    return run.probe


def print_figures(probe) -> None:
    """The probe's decode GB/s and prompt ps per weight by type: a figure measured in a slow
    spell of the machine stands out against its neighbours (and explains the rows it prices)."""
    print("probe figures (decode GB/s, prompt ps/weight): " + ", ".join(
        f"{k.weight_type} {k.decode_gbs:.0f}/{k.prefill_s_per_weight * 1e12:.1f}" for k in probe.kernels))
    if probe.expert_costs:
        print("probe MoE expert costs: " + ", ".join(f"{t} x{c:.2f}" for t, c in probe.expert_costs))


def run(models, hw, probe, repeats: int) -> tuple[list[dict], list[str]]:
    rows, failures = [], []
    cal = Calibration(probe=probe)
    got_runs: dict[tuple[str, int], list] = {}  # (decode, prefill) tok/s of each run
    shares: dict[tuple[str, int], list[float]] = {}
    plans = {}
    for _ in range(repeats):
        for name, path, positions in models:
            spec = load_model_spec(str(path))
            for prompt in positions:
                w = wishes(prompt)
                est = plan(spec, hw, w, calibration=cal)
                tab = plan(spec, hw, w)
                with no_shape_term():
                    flat = plan(spec, hw, w, calibration=cal)
                plans[(name, prompt)] = (est, tab, flat, spec, w)
                with Watch() as watch:
                    got = measure(path, est.config, prompt_tokens=prompt, gen_tokens=GEN_TOKENS)
                got_runs.setdefault((name, prompt), []).append((got.decode_tok_s, got.prefill_tok_s))
                shares.setdefault((name, prompt), []).append(watch.window.others_share)
    for (name, prompt), runs in got_runs.items():
        d, p = (statistics.median(x[i] for x in runs) for i in (0, 1))
        best = (max(x[0] for x in runs), max(x[1] for x in runs))
        # how far this row's own runs moved (max - min over median): the machine's drift
        # while it was measured, beside which a prediction's error can be read
        moved = tuple((max(x[i] for x in runs) - min(x[i] for x in runs)) / m for i, m in ((0, d), (1, p)))
        est, tab, flat, spec, w = plans[(name, prompt)]
        e, t = est.performance, tab.performance
        d_in = e.decode_tok_s_range[0] <= d <= e.decode_tok_s_range[1]
        p_in = e.prefill_tok_s_range[0] <= p <= e.prefill_tok_s_range[1]
        row = dict(name=name, prompt=prompt, basis=e.basis, decode=(e.decode_tok_s, t.decode_tok_s, d),
                   prefill=(e.prefill_tok_s, t.prefill_tok_s, p), d_in=d_in, p_in=p_in,
                   flat=flat.performance.prefill_tok_s, spec=spec, wishes=w, kernels=e.kernels,
                   threads=est.config.n_threads, best=best, moved=moved,
                   busy=statistics.median(shares[(name, prompt)]), runs=runs,
                   ranges=(e.decode_tok_s_range, e.prefill_tok_s_range))
        rows.append(row)
        if abs(e.decode_tok_s / d - 1) > DECODE_TARGET:
            failures.append(f"decode {name} @{prompt}: {pct(e.decode_tok_s, d)}")
        if abs(e.prefill_tok_s / p - 1) > PREFILL_TARGET:
            failures.append(f"prefill {name} @{prompt}: {pct(e.prefill_tok_s, p)}")
    return rows, failures


def one_bench(rows: list[dict], hw, probe, bench_name: str) -> None:
    """What one `rooflight bench` of one of the shapes would do to the others: its measured /
    probe-predicted ratio stored as calibration, applied per kernel (kernel_calibration.py)
    and, as before, per file type; the same measurements, the benched model left out."""
    from rooflight.estimate.calibration import Ratio

    bench = next((r for r in rows if r["name"] == bench_name and r["prompt"] == 512), None)
    if bench is None:
        print(f"\n--bench-with {bench_name}: no such shape (choose one of {sorted({r['name'] for r in rows})})")
        return
    ratio = dict(weight_type=bench["spec"].file_type.upper(), n_threads=bench["threads"],
                 model_bytes=bench["spec"].file_bytes, decode=bench["decode"][2] / bench["decode"][0],
                 prefill=bench["prefill"][2] / bench["prefill"][0], basis="probe")
    per_kernel = Calibration(samples=1, ratios=(Ratio(**ratio, kernels=bench["kernels"]),), probe=probe)
    per_file = Calibration(samples=1, ratios=(Ratio(**ratio),), probe=probe)
    print(f"\nafter one bench of {bench_name} (measured / probe-predicted: decode x{ratio['decode']:.3f}, "
          f"prefill x{ratio['prefill']:.3f}), predicted / measured - 1 for the others:")
    print(f"{'model':24}{'pos':>6} | {'decode: probe / per file / per kernel':>40} | "
          f"{'prefill: probe / per file / per kernel':>40}")
    errs: dict[str, list[float]] = {"probe": [], "file": [], "kernel": []}
    for r in rows:
        if r is bench:
            continue
        by_file = plan(r["spec"], hw, r["wishes"], calibration=per_file).performance
        by_kernel = plan(r["spec"], hw, r["wishes"], calibration=per_kernel).performance
        (dp, _, dm), (pp, _, pm) = r["decode"], r["prefill"]
        print(f"{r['name']:24}{r['prompt']:6} | {pct(dp, dm)} {pct(by_file.decode_tok_s, dm)} "
              f"{pct(by_kernel.decode_tok_s, dm)}{'':13} | {pct(pp, pm)} {pct(by_file.prefill_tok_s, pm)} "
              f"{pct(by_kernel.prefill_tok_s, pm)}")
        for key, d, p in (("probe", dp, pp), ("file", by_file.decode_tok_s, by_file.prefill_tok_s),
                          ("kernel", by_kernel.decode_tok_s, by_kernel.prefill_tok_s)):
            errs[key] += [abs(d / dm - 1), abs(p / pm - 1)]
    for key, label in (("probe", "probe only"), ("file", "per file type"), ("kernel", "per kernel")):
        e = errs[key]
        print(f"  {label:14} median error (decode and prefill together) {statistics.median(e):.1%}, "
              f"max {max(e):.1%}")


def report(rows: list[dict], failures: list[str]) -> list[str]:
    print(f"\n{'model':24}{'pos':>6} | {'decode probe / table / measured':>34} {'in':>3} |"
          f" {'prefill probe / table / measured':>36} {'in':>3} | others' CPU | runs moved (decode, prefill)")
    for r in rows:
        (dp, dt, dm), (pp, pt, pm) = r["decode"], r["prefill"]
        print(f"{r['name']:24}{r['prompt']:6} | {dp:7.1f} {pct(dp, dm)} {dt:7.1f} {pct(dt, dm)} {dm:7.1f}"
              f" {'yes' if r['d_in'] else 'no':>3} | {pp:7.0f} {pct(pp, pm)} {pt:7.0f} {pct(pt, pm)} {pm:7.0f}"
              f" {'yes' if r['p_in'] else 'no':>3} | {r['busy']:11.0%} | {r['moved'][0]:.0%}, {r['moved'][1]:.0%}")
    n = 2 * len(rows)
    inside = sum(r["d_in"] for r in rows) + sum(r["p_in"] for r in rows)
    cov = inside / n if n else 0.0
    errs_d = [abs(r["decode"][0] / r["decode"][2] - 1) for r in rows]
    errs_p = [abs(r["prefill"][0] / r["prefill"][2] - 1) for r in rows]
    print("\nthe same prompts priced by the probe without matmul_shape's term (every weight of a type"
          " alike at every width):")
    for r in rows:
        print(f"{r['name']:24}{r['prompt']:6} | prefill {pct(r['flat'], r['prefill'][2])}")
    if rows:
        flat_p = [abs(r["flat"] / r["prefill"][2] - 1) for r in rows]
        print(f"without it: prefill median error {statistics.median(flat_p):.1%}")
        print(f"\nprobe-based: decode median error {statistics.median(errs_d):.1%}, max {max(errs_d):.1%}; "
              f"prefill median {statistics.median(errs_p):.1%}, max {max(errs_p):.1%}; "
              f"measured inside the printed range: {inside} of {n} ({cov:.0%}, target >= {COVERAGE_TARGET:.0%})")
        best_d = [abs(r["decode"][0] / r["best"][0] - 1) for r in rows]
        best_p = [abs(r["prefill"][0] / r["best"][1] - 1) for r in rows]
        print(f"against the best of the runs instead of their median: decode median error "
              f"{statistics.median(best_d):.1%}, prefill {statistics.median(best_p):.1%}; within target: decode "
              f"{sum(e <= DECODE_TARGET for e in best_d)} of {len(rows)}, prefill "
              f"{sum(e <= PREFILL_TARGET for e in best_p)} of {len(rows)}")
        ratios_d = sorted(r["decode"][2] / r["decode"][0] for r in rows)
        ratios_p = sorted(r["prefill"][2] / r["prefill"][0] for r in rows)
        print(f"measured / probe-predicted ratios: decode {[round(x, 3) for x in ratios_d]}; "
              f"prefill {[round(x, 3) for x in ratios_p]}")
    if cov < COVERAGE_TARGET:
        failures.append(f"coverage {cov:.0%} < {COVERAGE_TARGET:.0%}")
    return failures


def record(hw, probe, rows: list[dict], *, repeats: int, load_before: float, when: datetime) -> dict:
    """One run as JSON: enough to recompute every figure the report printed, and to price the
    same shapes again with other rules (the hardware profile and the probe reload:
    profile_from_dict, MachineProbe.from_dict)."""
    def kind(r: dict, i: int) -> dict:
        probe_s, table_s, measured = r["decode" if i == 0 else "prefill"]
        return {"probe": round(probe_s, 3), "table": round(table_s, 3), "measured": round(measured, 3),
                "runs": [round(x[i], 3) for x in r["runs"]], "range": [round(x, 3) for x in r["ranges"][i]],
                "inside": r["d_in" if i == 0 else "p_in"]}

    errs = {k: [abs(r[k][0] / r[k][2] - 1) for r in rows] for k in ("decode", "prefill")}
    return {
        "script": "bench/accuracy_probe.py",
        "utc": when.isoformat(timespec="seconds"),
        "repeats": repeats,
        "load_1min_before": round(load_before, 2),
        "hardware": hw.to_dict(),
        **machine_fields(),
        "probe": probe.to_dict(),
        "rows": [{"name": r["name"], "prompt_tokens": r["prompt"], "gen_tokens": GEN_TOKENS, "basis": r["basis"],
                  "n_threads": r["threads"], "others_cpu_share": round(r["busy"], 4),
                  "decode_tok_s": kind(r, 0), "prefill_tok_s": kind(r, 1)} for r in rows],
        "summary": {"decode_median_error": round(statistics.median(errs["decode"]), 4) if rows else None,
                    "prefill_median_error": round(statistics.median(errs["prefill"]), 4) if rows else None,
                    "inside": sum(r["d_in"] + r["p_in"] for r in rows), "of": 2 * len(rows)},
    }


def cpu_id() -> str | None:
    """'family F model M stepping S' from /proc/cpuinfo: a VM's CPU name is often generic
    ("Intel(R) Xeon(R) Processor"), its family and model are not. None where there is none."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = dict(re.findall(r"^(cpu family|model|stepping)\s*:\s*(\S+)", text, re.M)[:3])
    return " ".join(f"{k.split()[-1]} {fields[k]}" for k in ("cpu family", "model", "stepping") if k in fields) or None


def machine_fields() -> dict:
    """What every bench record names its machine and llama.cpp by (this one's)."""
    return {"cpu_id": cpu_id(), "last_level_cache_bytes": last_level_cache_bytes(),
            "llama_cpp_python": llama_cpp_version()}


def machine_key(rec: dict) -> str | None:
    """A record's machine as 'cpu id, L3 MiB'; None for a record without both."""
    if rec.get("cpu_id") and rec.get("last_level_cache_bytes"):
        return f"{rec['cpu_id']}, L3 {rec['last_level_cache_bytes'] >> 20} MiB"
    return None


def write_record(rec: dict, folder: Path, script: str, machine: str) -> Path:
    """Write a record as <script>-<machine>-<UTC time of rec["utc"]>.json in folder; its path."""
    slug = re.sub(r"[^a-z0-9]+", "-", machine.lower()).strip("-") or "cpu"
    stamp = datetime.fromisoformat(rec["utc"]).strftime("%Y%m%dT%H%M%SZ")  # two runs begun in one minute keep both
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{script}-{slug}-{stamp}.json"
    path.write_text(json.dumps(rec, indent=1) + "\n", encoding="utf-8")
    return path


def record_files(paths: list[str] | None = None, folder: Path = RESULTS_DIR,
                 script: str = "accuracy_probe") -> list[Path]:
    """The saved records in these files and folders (default: folder), sorted: in a folder,
    the files a script's --save wrote there."""
    return sorted(f for p in (paths or [str(folder)]) for f in
                  (Path(p).glob(f"{script}-*.json") if Path(p).is_dir() else [Path(p)]) if f.is_file())


def load_record(path: Path) -> tuple[dict, HardwareProfile, MachineProbe]:
    """A saved record, its machine's hardware profile and the probe its run stood on (as it
    was, whatever PROBE_METHOD derived it: its `method` says which); ValueError (one sentence
    naming the file) for a file that is not one."""
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
        hw = profile_from_dict(rec["hardware"], detect_cpu_if_missing=False, measure_bandwidth=False,
                               origin=str(path))
        return rec, hw, MachineProbe.from_dict(rec["probe"], any_method=True)
    except (OSError, ValueError, KeyError, TypeError, RooflightError) as exc:
        raise ValueError(f"{path} is not a saved accuracy record ({type(exc).__name__}: {exc}); "
                         "bench/accuracy_probe.py --save writes them.") from exc


def save(rec: dict, folder: Path = RESULTS_DIR) -> Path:
    """Write a record as accuracy_probe-<cpu>-<UTC time>.json in folder; its path."""
    return write_record(rec, folder, "accuracy_probe", rec["hardware"]["cpu"]["name"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three shapes and Gemma at 512 only, one repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep-disturbed", action="store_true", help="use a probe taken on a busy machine")
    ap.add_argument("--fresh-probe", action="store_true",
                    help="probe now even if a stored probe is current (this VM drifts within the hour)")
    ap.add_argument("--bench-with", metavar="SHAPE",
                    help="also show what one bench of this shape (at 512 positions) does to the others' estimates")
    ap.add_argument("--save", action="store_true", help=f"write the run as JSON under {RESULTS_DIR}")
    ap.add_argument("--probe-budget", type=float, metavar="SECONDS",
                    help="the fresh probe's budget (default rooflight probe's 30 s): a longer one measures every "
                         "weight type, which tells the budget's misses from the estimate's")
    args = ap.parse_args(argv)
    load_before, started = os.getloadavg()[0], datetime.now(UTC)
    hw = detect()
    print(f"machine: {hw.cpu.name}, {hw.cpu.cores} cores, RAM bandwidth {hw.cpu.ram_bandwidth_gbs:.1f} GB/s")
    if args.probe_budget is not None and args.probe_budget <= 0:
        ap.error("--probe-budget must be more than 0 seconds")
    probe = the_probe(hw, args.keep_disturbed, args.fresh_probe or args.probe_budget is not None, args.probe_budget)
    if probe is None:
        print("no probe: nothing to check (it was not stored: the reason is above)")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        shapes = SHAPES[:3] if args.quick else SHAPES
        models = [(n, write_shape(Path(tmp), n), (512,)) for n, _ in shapes]
        models.append((GEMMA, gemma_270m_path(), (512,) if args.quick else (512, 4096)))
        repeats = 1 if args.quick else args.repeats
        rows, failures = run(models, hw, probe, repeats)
    failures = report(rows, failures)
    if args.save:
        path = save(record(hw, probe, rows, repeats=repeats, load_before=load_before, when=started))
        print(f"\nsaved: {path}")
    if args.bench_with:
        one_bench(rows, hw, probe, args.bench_with)
    print()
    if failures:
        print(f"{len(failures)} target(s) missed:")
        for f in failures:
            print("  " + f)
        return 1
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
