"""Price the runs bench/accuracy_probe.py --save kept again, with the estimator as it is now:
what an estimator change does to every saved measurement, without measuring anything.

    python bench/reprice_accuracy.py [PATH ...]   (files or folders; default bench/results/accuracy/)

Each record holds the machine's hardware profile, the probe its run stood on, and every row's
measured runs. The shapes are generated again (bench/accuracy_probe.py SHAPES, random weights:
only their header matters here), each row is planned as the run planned it (the record's
profile and probe, the same wishes), and its new estimate is printed beside the one the run
printed and the measured median, as predicted / measured - 1, with the median errors and the
count inside the printed range, old and new. A change that helps one shape and hurts others
shows here first; the saved runs are measurements no constant of the change was fitted on
unless the change says so. A record whose probe an older PROBE_METHOD derived is priced with
its figures as they were, and says so: a change of method changes what a figure is per.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rooflight.estimate import Calibration, plan
from rooflight.estimate.probe import PROBE_METHOD
from rooflight.gguf import load_model_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_probe import (  # noqa: E402
    GEMMA,
    GEN_TOKENS,
    RESULTS_DIR,
    SHAPES,
    load_record,
    record_files,
    wishes,
    write_shape,
)
from gemma_model import gemma_270m_path  # noqa: E402 - on the path accuracy_probe put there (tests/)

KINDS = (("decode_tok_s", "decode"), ("prefill_tok_s", "prefill"))


class Specs(dict):
    """Each shape's ModelSpec, generated the first time a record names it (in folder)."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    def __missing__(self, name: str):
        if name in dict(SHAPES):
            path = write_shape(self.folder, name)
        elif name == GEMMA:
            path = gemma_270m_path()
        else:
            raise ValueError(f"{name} is not a shape of bench/accuracy_probe.py; this record cannot be priced again.")
        self[name] = load_model_spec(str(path))
        return self[name]


def reprice(path: Path, specs: dict) -> list[dict]:
    """Every row of a saved record with its new estimate: {name, prompt, KIND: (old, new,
    measured, old inside, new inside), KIND_range: the new printed range}."""
    rec, hw, probe = load_record(path)
    cal = Calibration(probe=probe)
    out = []
    for row in rec["rows"]:
        prompt = row["prompt_tokens"]
        w = wishes(prompt, row.get("gen_tokens", GEN_TOKENS))
        perf = plan(specs[row["name"]], hw, w, calibration=cal).performance
        new = {"decode_tok_s": (perf.decode_tok_s, perf.decode_tok_s_range),
               "prefill_tok_s": (perf.prefill_tok_s, perf.prefill_tok_s_range)}
        entry = {"name": row["name"], "prompt": prompt}
        for key, _ in KINDS:
            got, (value, (low, high)) = row[key], new[key]
            entry[key] = (got["probe"], value, got["measured"], got["inside"], low <= got["measured"] <= high)
            entry[key + "_range"] = (low, high)
        out.append(entry)
    return out


def saved_files(argv: list[str] | None, doc: str) -> list[Path]:
    """The records a record tool's command line names (PATH ...: files or folders; default
    RESULTS_DIR; --help shows doc's first line); with none, says what to run."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("paths", nargs="*", metavar="PATH")
    files = record_files(ap.parse_args(argv).paths)
    if not files:
        print(f"no saved record: run bench/accuracy_probe.py --save (they go to {RESULTS_DIR})")
    return files


def repriced(files: list[Path]) -> Iterator[tuple[Path, list[dict] | None]]:
    """Each record with its rows priced again (reprice; the shapes generated once, in a
    temporary folder), or None for a file that is not a record, its reason on stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        specs = Specs(Path(tmp))
        for f in files:
            try:
                rows = reprice(f, specs)
            except ValueError as exc:  # not a record: say so, go on with the others
                print(exc, file=sys.stderr)
                rows = None
            yield f, rows


def priced_records(files: list[Path]) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """The records among files, by file name: their JSON, and their rows priced again
    (repriced); a file that is not a record is left out, its reason on stderr."""
    records, priced = {}, {}
    for f, rows in repriced(files):
        if rows is not None:
            records[f.name], priced[f.name] = json.loads(f.read_text(encoding="utf-8")), rows
    return records, priced


def main(argv: list[str] | None = None) -> int:
    files = saved_files(argv, __doc__)
    if not files:
        return 1
    unreadable = 0
    for f, rows in repriced(files):
        if rows is None:
            unreadable += 1
            continue
        method = json.loads(f.read_text(encoding="utf-8"))["probe"].get("method", 1)
        print(f"\n{f.name}" + (f"  (its probe: method {method}, priced as it was; now {PROBE_METHOD})"
                                if method != PROBE_METHOD else ""))
        print(f"{'model':24}{'pos':>6} | {'decode: run / now':>20} | {'prefill: run / now':>20}")
        for r in rows:
            cells = [f"{o / m - 1:+8.1%}{'' if oi else '*'} {n / m - 1:+8.1%}{'' if ni else '*'}"
                     for o, n, m, oi, ni in (r[k] for k, _ in KINDS)]
            print(f"{r['name']:24}{r['prompt']:6} | {cells[0]:>20} | {cells[1]:>20}")
        for key, label in KINDS:
            old = statistics.median(abs(r[key][0] / r[key][2] - 1) for r in rows)
            new = statistics.median(abs(r[key][1] / r[key][2] - 1) for r in rows)
            print(f"{label}: median error {old:.1%} -> {new:.1%}")
        inside = [sum(r[k][i] for r in rows for k, _ in KINDS) for i in (3, 4)]
        print(f"inside the printed range: {inside[0]} -> {inside[1]} of {2 * len(rows)} (* outside)")
    return 1 if unreadable else 0

if __name__ == "__main__":
    sys.exit(main())
