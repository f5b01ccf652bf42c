"""Issue 14's on-VM speed target, per machine, from the saved accuracy records and the
estimator as it is now.

    python bench/vm_target.py [--markdown] [PATH ...]   (files or folders; default bench/results/accuracy/)

The target: after `rooflight probe` only, decode within 10% and prefill within 15% of llama.cpp
for at least 6 of the 7 generated shapes and for the Gemma-3-270M package model at both 512
and 4096 positions, with the printed range holding at least 80% of the measurements.

For each machine (probe_band_check.machine_keys: a record's CPU id and last-level cache) the
records of the newest probe method it has run (FIRST_METHOD or later) are priced again
(reprice_accuracy.reprice: the run's own probe and hardware profile, the estimator as it is
now), and each row's error, predicted / measured - 1, is taken as the median over those runs.
A machine meets the target by that median; the runs that met it on their own are counted
beside it. A machine's runs on an older method are left out where it has newer ones: a change
of method changes what a figure is per. The table names each machine's method; one older
than PROBE_METHOD is what the machine showed before the probe's last change. Measures
nothing; README's "This machine after a probe" table is this script's --markdown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rooflight.estimate.probe import PROBE_METHOD

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_probe import (  # noqa: E402
    COVERAGE_TARGET,
    DECODE_TARGET,
    GEMMA,
    PREFILL_TARGET,
    RESULTS_DIR,
    SHAPES,
    record_files,
)
from probe_band_check import machine_keys  # noqa: E402
from reprice_accuracy import KINDS, priced_records  # noqa: E402

FIRST_METHOD = 5  # the first method whose attention units follow llama.cpp's split of the cache
SHAPES_NEEDED = len(SHAPES) - 1  # "at least 6 of the 7 generated shapes"
GEMMA_POSITIONS = (512, 4096)
LIMITS = {"decode_tok_s": DECODE_TARGET, "prefill_tok_s": PREFILL_TARGET}
LABELS = dict(KINDS)


@dataclass(frozen=True)
class Verdict:
    """One set of rows against the target: per kind, the shapes within it, Gemma's rows within
    it by position, and the rows that missed (name @position: error)."""
    shapes_within: dict[str, int]
    gemma_within: dict[str, dict[int, bool]]
    misses: dict[str, list[str]]
    inside: int
    of: int

    def met(self, kind: str) -> bool:
        return self.shapes_within[kind] >= SHAPES_NEEDED and all(self.gemma_within[kind].values())

    @property
    def covered(self) -> bool:
        return self.of > 0 and self.inside / self.of >= COVERAGE_TARGET

    @property
    def met_all(self) -> bool:
        return self.met("decode_tok_s") and self.met("prefill_tok_s") and self.covered


def verdict(errors: dict[tuple[str, int], dict[str, float]], inside: int, of: int) -> Verdict:
    """errors: (row name, prompt positions) -> {kind: predicted / measured - 1}."""
    shapes, gemma, misses = {}, {}, {}
    for kind, limit in LIMITS.items():
        within = {row: abs(e[kind]) <= limit for row, e in errors.items()}
        shapes[kind] = sum(ok for (name, _), ok in within.items() if name != GEMMA)
        gemma[kind] = {pos: within.get((GEMMA, pos), False) for pos in GEMMA_POSITIONS}
        misses[kind] = [f"{name} @{pos}: {errors[(name, pos)][kind]:+.1%}"
                        for (name, pos), ok in sorted(within.items()) if not ok]
        misses[kind] += [f"{GEMMA} @{pos}: not run" for pos in GEMMA_POSITIONS if (GEMMA, pos) not in errors]
    return Verdict(shapes, gemma, misses, inside, of)


def run_errors(rows: Sequence[dict]) -> tuple[dict[tuple[str, int], dict[str, float]], int, int]:
    """One repriced record's rows as (errors, rows inside their new range, rows priced)."""
    errors = {(r["name"], r["prompt"]): {k: r[k][1] / r[k][2] - 1 for k in LIMITS} for r in rows}
    inside = sum(r[k][4] for r in rows for k in LIMITS)
    return errors, inside, len(LIMITS) * len(rows)


def median_errors(runs: Sequence[dict[tuple[str, int], dict[str, float]]]) -> dict[tuple[str, int], dict[str, float]]:
    """Per row, the median over the runs that priced it of each kind's error."""
    rows = {row for run in runs for row in run}
    return {row: {k: statistics.median(run[row][k] for run in runs if row in run) for k in LIMITS}
            for row in sorted(rows)}


@dataclass(frozen=True)
class MachineResult:
    machine: str
    cpu_name: str
    method: int  # the probe method of its runs here
    runs: list[str]  # the records' UTC times
    by_median: Verdict
    met_alone: int


def _method(rec: dict) -> int:
    return rec["probe"].get("method", 1)


def per_machine(files: list[Path]) -> tuple[list[MachineResult], int, int]:
    """Each machine's result, the records read and those left out for their probe's method."""
    records, priced = priced_records(files)
    keys = machine_keys(records)
    newest = {}
    for name, rec in records.items():
        newest[keys[name]] = max(newest.get(keys[name], 0), _method(rec))
    kept = [n for n in records if _method(records[n]) >= FIRST_METHOD and _method(records[n]) == newest[keys[n]]]
    results = []
    for machine in sorted({keys[n] for n in kept}):
        names = sorted((n for n in kept if keys[n] == machine), key=lambda n: records[n]["utc"])
        runs = [run_errors(priced[n]) for n in names]
        alone = sum(verdict(*r).met_all for r in runs)
        results.append(MachineResult(
            machine=machine, cpu_name=records[names[0]]["hardware"]["cpu"]["name"], method=newest[machine],
            runs=[records[n]["utc"] for n in names],
            by_median=verdict(median_errors([r[0] for r in runs]), sum(r[1] for r in runs), sum(r[2] for r in runs)),
            met_alone=alone))
    return results, len(records), len(records) - len(kept)


def _gemma_cell(v: Verdict, kind: str) -> str:
    return ", ".join(f"@{p} {'yes' if ok else 'no'}" for p, ok in v.gemma_within[kind].items())


def markdown(results: list[MachineResult]) -> str:
    lines = ["| machine | probe method | runs | decode within 10%: shapes, Gemma | prefill within 15%: shapes, Gemma "
             "| inside the range | target met (by the median) | runs that met it alone | misses by the median |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        v = r.by_median
        days = sorted({t[:10] for t in r.runs})
        misses = "; ".join(f"{LABELS[k]} {m}" for k in LIMITS for m in v.misses[k]) or "none"
        lines.append(
            f"| {r.cpu_name} ({r.machine}) | {r.method} | {len(r.runs)} ({', '.join(days)}) "
            f"| {v.shapes_within['decode_tok_s']} of {len(SHAPES)}; {_gemma_cell(v, 'decode_tok_s')} "
            f"| {v.shapes_within['prefill_tok_s']} of {len(SHAPES)}; {_gemma_cell(v, 'prefill_tok_s')} "
            f"| {v.inside / v.of:.0%} | {'yes' if v.met_all else 'no'} | {r.met_alone} of {len(r.runs)} | {misses} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", metavar="PATH")
    ap.add_argument("--markdown", action="store_true", help="the table README shows")
    args = ap.parse_args(argv)
    files = record_files(args.paths)
    if not files:
        print(f"no saved record: run bench/accuracy_probe.py --save (they go to {RESULTS_DIR})")
        return 1
    results, read, older = per_machine(files)
    if not results:
        print(f"none of the {read} records stands on a probe of method {FIRST_METHOD} or later: "
              "run bench/accuracy_probe.py --fresh-probe --save")
        return 1
    if args.markdown:
        print(markdown(results))
        return 0
    print(f"{read} records; {older} left out (a probe method older than the machine's newest or than "
          f"{FIRST_METHOD}); the current method is {PROBE_METHOD}")
    for r in results:
        v = r.by_median
        print(f"\n{r.cpu_name} ({r.machine}): {len(r.runs)} runs on method-{r.method} probes, "
              f"{r.runs[0]} .. {r.runs[-1]}")
        for kind in LIMITS:
            print(f"  {LABELS[kind]:8} shapes within {LIMITS[kind]:.0%}: {v.shapes_within[kind]} of {len(SHAPES)};"
                  f" Gemma {_gemma_cell(v, kind)}; {'met' if v.met(kind) else 'missed'}"
                  + (f" ({'; '.join(v.misses[kind])})" if v.misses[kind] else ""))
        print(f"  inside the printed range: {v.inside} of {v.of} ({v.inside / v.of:.0%});"
              f" the target {'met' if v.met_all else 'missed'} by the median;"
              f" runs that met it alone: {r.met_alone} of {len(r.runs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
