"""bench/vm_target.py: issue 14's on-VM target judged per machine from the saved records, by
the median of each row's error over the runs, and README's table is what the script prints."""

from __future__ import annotations

import re
from pathlib import Path

from bench_modules import load_bench

vm_target = load_bench("vm_target")
GEMMA = vm_target.GEMMA
SHAPE_NAMES = [name for name, _ in vm_target.SHAPES]
README = Path(__file__).resolve().parents[1] / "README.md"


def _errors(decode: float = 0.02, prefill: float = 0.03, **by_row) -> dict:
    """Every row of a run at these errors; by_row: 'name@pos' -> (decode, prefill) for the others."""
    rows = {(name, 512): (decode, prefill) for name in SHAPE_NAMES}
    rows |= {(GEMMA, pos): (decode, prefill) for pos in (512, 4096)}
    for key, errs in by_row.items():
        name, pos = key.split("@")
        rows[(name, int(pos))] = errs
    return {row: {"decode_tok_s": d, "prefill_tok_s": p} for row, (d, p) in rows.items()}


def test_one_shape_may_miss_but_neither_gemma_row():
    one_shape = vm_target.verdict(_errors(**{f"{SHAPE_NAMES[0]}@512": (-0.30, 0.03)}), 17, 18)
    assert one_shape.shapes_within["decode_tok_s"] == 6 and one_shape.met("decode_tok_s")
    assert one_shape.met_all
    assert one_shape.misses["decode_tok_s"] == [f"{SHAPE_NAMES[0]} @512: -30.0%"]
    gemma = vm_target.verdict(_errors(**{f"{GEMMA}@512": (0.12, 0.03)}), 18, 18)
    assert not gemma.met("decode_tok_s") and gemma.met("prefill_tok_s") and not gemma.met_all
    two = vm_target.verdict(_errors(**{f"{SHAPE_NAMES[0]}@512": (0.02, 0.20), f"{SHAPE_NAMES[1]}@512": (0.02, -0.16)}),
                            18, 18)
    assert two.shapes_within["prefill_tok_s"] == 5 and not two.met("prefill_tok_s")


def test_the_range_must_hold_eight_of_ten_and_a_missing_gemma_row_is_a_miss():
    assert not vm_target.verdict(_errors(), 14, 18).met_all  # 78% inside
    rows = _errors()
    del rows[(GEMMA, 4096)]
    quick = vm_target.verdict(rows, 16, 16)
    assert not quick.met("decode_tok_s") and f"{GEMMA} @4096: not run" in quick.misses["decode_tok_s"]


def test_each_row_takes_the_median_of_its_runs():
    name = SHAPE_NAMES[2]
    runs = [_errors(**{f"{name}@512": (e, 0.0)}) for e in (0.30, -0.04, 0.08)]
    med = vm_target.median_errors(runs)
    assert med[(name, 512)]["decode_tok_s"] == 0.08
    assert vm_target.verdict(med, 54, 54).met_all  # no run but the first missed that row


def test_readme_table_is_what_the_script_prints_for_the_saved_records():
    """README's per-machine table follows the saved records and the estimator: after a new
    record or an estimator change, `python bench/vm_target.py --markdown` gives the new one."""
    results, _, _ = vm_target.per_machine(vm_target.record_files())
    block = re.search(r"<!-- vm_target:begin -->\n(.*?)\n<!-- vm_target:end -->", README.read_text(encoding="utf-8"),
                      re.S)
    assert block, "README lacks the vm_target table"
    assert block.group(1).strip() == vm_target.markdown(results).strip()


def test_without_a_current_record_it_says_what_to_run(tmp_path, capsys):
    assert vm_target.main([str(tmp_path / "none")]) == 1
    assert "run bench/accuracy_probe.py --save" in capsys.readouterr().out
