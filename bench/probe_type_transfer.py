"""A weight type the probe did not measure: the table's price as it stands, or anchored on
the types it did measure on this machine? Leave-one-type-out on this machine's probe. (The
estimator keeps the table's price unless the measured types run past the table's band, then
anchors: probe_roofline.table_level; docs/DECISIONS.md, "Unmeasured weight types".)

    python bench/probe_type_transfer.py [--fresh-probe] [--threads N]

For each weight type the stored probe of this machine measured (or a fresh probe's), its
decode and prompt seconds per weight are predicted two ways from what the table knows, as if
the probe had not reached it: the table's own price (estimate/perf.py cpu_table_matvec_s /
cpu_table_matmul_s), and that price times the median measured / table ratio of the *other*
measured types (probe_roofline.table_anchor), and the estimator's rule (the anchor only past
the table's band, table_level). The probe's figure for the type is
the measurement each is compared with; no figure is fitted on the type it predicts.
Prints predicted / measured - 1 per type and the median errors side by side.

    python bench/probe_type_transfer.py --results [PATH ...]

does the same for the probe of every record bench/accuracy_probe.py --save wrote (default:
all of bench/results/accuracy/), each priced with its own machine's hardware profile, and
then pools the types of all of them: the check a rule for unmeasured types needs before it
is adopted (docs/DECISIONS.md: "probes of more machines where it helps every time").
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from rooflight.estimate import RunConfig
from rooflight.estimate.backend_constants import CPU
from rooflight.estimate.perf import cpu_table_matmul_s, cpu_table_matvec_s
from rooflight.estimate.probe import MachineProbe
from rooflight.estimate.probe_roofline import table_anchor, table_level
from rooflight.hardware import detect
from rooflight.store.probes import current_probe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_probe import RESULTS_DIR, load_record, record_files  # noqa: E402 - the records' own module

KEYS = ("dt", "da", "dr", "pt", "pa", "pr")


def transfer(hw, probe) -> dict[str, list[float]]:
    """Print each measured type's errors priced three ways from the others; {key: |errors|}."""
    cfg = RunConfig(n_ctx=4096, n_gpu_layers=0, n_threads=probe.n_threads, n_ubatch=probe.n_ubatch)
    decode_table = lambda kind, n: cpu_table_matvec_s(hw, cfg, kind, n)  # noqa: E731
    prompt_table = lambda kind, n: cpu_table_matmul_s(hw, cfg, kind, n)  # noqa: E731
    print(f"machine: {hw.cpu.name}, {probe.n_threads} threads; probe of {len(probe.kernels)} types "
          f"({', '.join(k.weight_type for k in probe.kernels)})")
    print(f"{'type':7s} | {'decode: table':>14s} {'anchored':>9s} {'rule':>9s} | "
          f"{'prompt: table':>14s} {'anchored':>9s} {'rule':>9s}")
    errors: dict[str, list[float]] = {k: [] for k in KEYS}
    for k in probe.kernels:
        others = tuple(o for o in probe.kernels if o.weight_type != k.weight_type)
        row = []
        for prompt, table, measured, keys, band in (
                (False, decode_table, k.decode_s_per_weight, KEYS[:3], CPU.decode_band),
                (True, prompt_table, k.prefill_s_per_weight, KEYS[3:], CPU.prefill_band)):
            own = table(k.weight_type, 1.0)
            anchor = table_anchor(others, table, prompt=prompt)
            rule = table_level(others, table, band, prompt=prompt)
            for key, predicted in zip(keys, (own, own * anchor, own * rule), strict=True):
                err = predicted / measured - 1
                errors[key].append(abs(err))
                row.append(f"{err:+9.1%}")
        print(f"{k.weight_type:7s} | {row[0]:>14s} {row[1]:>9s} {row[2]:>9s} | {row[3]:>14s} {row[4]:>9s} {row[5]:>9s}")
    medians(errors)
    return errors


def medians(errors: dict[str, list[float]]) -> None:
    med = {key: statistics.median(v) for key, v in errors.items()}
    print(f"{'median':7s} | {med['dt']:14.1%} {med['da']:9.1%} {med['dr']:9.1%} | "
          f"{med['pt']:14.1%} {med['pa']:9.1%} {med['pr']:9.1%}")
    print(f"anchored / table median error: decode {med['da'] / med['dt']:.2f}, prompt {med['pa'] / med['pt']:.2f}; "
          f"the rule / table: decode {med['dr'] / med['dt']:.2f}, prompt {med['pr'] / med['pt']:.2f}")


def saved_probes(paths: list[str]) -> list[tuple[str, object, MachineProbe]]:
    """(record file, hardware profile, probe) of each bench/accuracy_probe.py --save record; a
    file that is not one is named on stderr and left out."""
    out = []
    for f in record_files(paths):
        try:
            out.append((f.name, *load_record(f)[1:]))
        except ValueError as exc:
            print(exc, file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fresh-probe", action="store_true", help="run `rooflight probe` first (30 s)")
    ap.add_argument("--threads", type=int, help="a fresh probe at this thread count, not stored")
    ap.add_argument("--results", nargs="*", metavar="PATH",
                    help=f"the probes of saved accuracy records (files or folders; default {RESULTS_DIR})")
    args = ap.parse_args(argv)
    if args.results is not None:
        probes = [(name, hw, p) for name, hw, p in saved_probes(args.results) if len(p.kernels) >= 3]
        if not probes:
            print("no saved record with a probe of 3 or more weight types: run bench/accuracy_probe.py --save")
            return 1
        pooled: dict[str, list[float]] = {k: [] for k in KEYS}
        for name, hw, probe in probes:
            print(f"\n{name}")
            for key, errs in transfer(hw, probe).items():
                pooled[key] += errs
        print(f"\nall {len(probes)} probes, {len(pooled['dt'])} types:")
        medians(pooled)
        return 0
    hw = detect()
    if args.fresh_probe or args.threads:
        from rooflight.runtime.probe import probe_machine

        probe = probe_machine(hw, n_threads=args.threads, store=False if args.threads else None).probe
    else:
        probe = current_probe(hw)
    if probe is None or len(probe.kernels) < 3:
        print("no stored probe with 3 or more weight types for this machine: run with --fresh-probe")
        return 1
    transfer(hw, probe)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
