"""Does the probe's printed range hold 8 of 10 measurements on each machine, and would a band
derived from the other machines' runs do better?

    python bench/probe_band_check.py [PATH ...]   (files or folders; default bench/results/accuracy/)

Every saved accuracy record (bench/accuracy_probe.py --save) is priced again with the
estimator as it is now (reprice_accuracy.reprice), and each row gives r = measured / predicted
and its printed range as factors of the prediction. A probe estimate's range is the probe's
base band (ranges.PROBE_DECODE_BAND / PROBE_PREFILL_BAND) divided and multiplied by a widening
w from the spread of the probe figures it stands on (ranges.probe_band), so a row is inside
when base_low / w <= r <= base_high * w: at the low end it asks base_low <= r * w, at the high
end base_high >= r / w. (A row partly priced by the table has a mixed range; its w is taken
from the range as printed, each end on its own.)

Rows are grouped by machine: a record's CPU id and last-level cache, or, for an early record
without them, the record whose CPU profile is the same. For each machine it prints how many of
its rows the shipped band holds, then, with that machine left out, the band the other machines'
rows give (the 10th-90th and the 3rd-97th percentile of r * w and r / w, each widened to hold
1.0; fit_constants' BAND_TAIL is 3) and how many of the held-out machine's rows it would hold.
Nothing here changes the estimator: it is the check behind README's "What the probe's range
means". Measures nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from rooflight.estimate import ranges

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_probe import machine_key  # noqa: E402
from reprice_accuracy import KINDS, priced_records, saved_files  # noqa: E402

BASE = {"decode_tok_s": ranges.PROBE_DECODE_BAND, "prefill_tok_s": ranges.PROBE_PREFILL_BAND}
TAILS = (10, 3)  # percentiles tried for a derived band: the 10th-90th, then fit_constants' BAND_TAIL
COVERAGE = ranges.COVERAGE


def row_factors(measured: float, predicted: float, low: float, high: float,
                base: tuple[float, float]) -> tuple[float, float, float]:
    """(r, w at the low end, w at the high end) of one priced row: r = measured / predicted,
    each w the widening its printed range applied to the base band."""
    return measured / predicted, base[0] / (low / predicted), (high / predicted) / base[1]


def inside(rows: Sequence[tuple[float, float, float]], band: tuple[float, float]) -> int:
    """How many rows a base band holds, each widened by its own w."""
    return sum(band[0] / wl <= r <= band[1] * wh for r, wl, wh in rows)


def derived_band(rows: Sequence[tuple[float, float, float]], tail: int) -> tuple[float, float]:
    """The base band the rows ask for at the tail-th and (100 - tail)-th percentile: of r * w
    at the low end, of r / w at the high end, widened to hold 1.0 (an estimate is always
    inside its own range)."""
    lows = statistics.quantiles([r * wl for r, wl, _ in rows], n=100, method="inclusive")
    highs = statistics.quantiles([r / wh for r, _, wh in rows], n=100, method="inclusive")
    return min(lows[tail - 1], 1.0), max(highs[99 - tail], 1.0)


def machine_keys(records: dict[str, dict]) -> dict[str, str]:
    """Each record's machine: 'cpu id, L3 MiB'; a record without them takes the key of one
    whose CPU profile (RAM's available bytes aside) is the same, else its CPU's name."""
    def profile(rec: dict) -> str:
        cpu = {k: v for k, v in rec["hardware"]["cpu"].items() if k != "ram_available_bytes"}
        return json.dumps(cpu, sort_keys=True)

    known = {profile(rec): key for rec in records.values() if (key := machine_key(rec))}
    return {name: machine_key(rec) or known.get(profile(rec), rec["hardware"]["cpu"]["name"])
            for name, rec in records.items()}


def main(argv: list[str] | None = None) -> int:
    files = saved_files(argv, __doc__)
    if not files:
        return 1
    rows: dict[str, dict[str, list]] = {key: {} for key, _ in KINDS}  # kind -> machine -> rows
    records, priced = priced_records(files)
    if not priced:
        return 1
    machines = machine_keys(records)
    for name, entries in priced.items():
        for e in entries:
            for key, _ in KINDS:
                _, predicted, measured, _, _ = e[key]
                low, high = e[key + "_range"]
                rows[key].setdefault(machines[name], []).append(
                    row_factors(measured, predicted, low, high, BASE[key]))
    print(f"{len(files)} records, {len(set(machines.values()))} machines; the shipped base bands: "
          f"decode x{BASE['decode_tok_s'][0]:.2f}-{BASE['decode_tok_s'][1]:.2f}, "
          f"prompt x{BASE['prefill_tok_s'][0]:.2f}-{BASE['prefill_tok_s'][1]:.2f}")
    for key, label in KINDS:
        by_machine = rows[key]
        every = [r for rs in by_machine.values() for r in rs]
        print(f"\n{label}: the shipped band holds {inside(every, BASE[key])} of {len(every)} "
              f"({inside(every, BASE[key]) / len(every):.0%}); the bands all machines' rows give: "
              + ", ".join(f"p{t}-p{100 - t} x{lo:.2f}-{hi:.2f}"
                          for t in TAILS for lo, hi in [derived_band(every, t)]))
        print(f"  {'held-out machine':44} {'rows':>4} {'shipped':>8}"
              + "".join(f" {f'p{t}-p{100 - t} from the others':>30}" for t in TAILS))
        for machine, held in sorted(by_machine.items()):
            others = [r for m, rs in by_machine.items() if m != machine for r in rs]
            cells = [f"{inside(held, BASE[key]) / len(held):8.0%}"]
            for t in TAILS:
                band = derived_band(others, t)
                cells.append(f"{f'x{band[0]:.2f}-{band[1]:.2f}: {inside(held, band) / len(held):.0%}':>30}")
            print(f"  {machine[:44]:44} {len(held):4} " + " ".join(cells))
    print(f"\n(a band that says 8 of 10 should hold at least {COVERAGE:.0%} of a machine it was not derived on)")
    return 1 if len(priced) < len(files) else 0


if __name__ == "__main__":
    sys.exit(main())
