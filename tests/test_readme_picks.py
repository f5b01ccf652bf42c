"""README's "Top picks on reference machines" tables are what bench/picks.py prints today: an
estimator change that moves a pick or a speed must regenerate them (they had fallen behind
once, up to 7% on the GPU machines' speeds)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("use_case", ["chat", "coding"])
def test_readme_top_picks_table_is_current(use_case):
    r = subprocess.run([sys.executable, "bench/picks.py", "--markdown", "--use-case", use_case],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    table = r.stdout.strip()
    assert table.count("\n") >= 10
    assert table in (ROOT / "README.md").read_text(), (
        f"README's {use_case} top-picks table is stale: paste `python bench/picks.py --markdown "
        f"--use-case {use_case}` over it")
