"""bench/recurrent_cost.py's fit on plain per-run figures: --save records reload, and --pool
fits the hybrid constants on the other machines' runs and checks them on the one left out
(arithmetic only: the figures are synthetic, made from known constants)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bench_modules import load_bench

recurrent_cost = load_bench("recurrent_cost")
TRUE = (0.3, 1.5)  # (prompt, decode) cycles per element the synthetic machines pay


def _runs(machine_speed: float, reference_ratio: float, constants=TRUE) -> tuple[dict, dict]:
    """Three hybrids and their reference: each measures reference_ratio x what the estimate
    with `constants` predicts, as its reference does (so only the constants explain a miss)."""
    runs, refs = {}, {}
    refs["ref"] = {"measured": [2e-3 * reference_ratio, 0.5 * reference_ratio], "bare": [2e-3, 0.5]}
    for k, (unit_prompt, unit_decode) in enumerate(((0.10, 2e-4), (0.05, 5e-4), (0.20, 1e-4))):
        bare = [2e-3 * machine_speed * (1 + k / 3), 0.5 * machine_speed * (1 + k / 3)]
        predicted = (bare[0] + unit_decode * constants[1], bare[1] + unit_prompt * constants[0])
        runs[f"hybrid{k}"] = {"reference": "ref", "measured": [x * reference_ratio for x in predicted],
                              "bare": bare, "unit": [unit_prompt, unit_decode]}
    return runs, refs


def _record(runs: dict, refs: dict, cpu: str) -> dict:
    rec = recurrent_cost.record(runs, refs, 3, (0.2, 1.1), datetime(2026, 12, 6, 22, 0, tzinfo=UTC))
    rec["cpu_id"] = cpu  # the machine: a record from elsewhere
    return rec


def test_the_fit_recovers_the_constants_the_runs_were_made_with():
    runs, refs = _runs(1.0, 1.2)
    assert recurrent_cost.fit(runs, refs, list(runs)) == pytest.approx(TRUE, rel=1e-6)
    for n in runs:  # with them, each run misses by just its reference's ratio
        assert recurrent_cost.miss(runs, refs, n, 0, TRUE) == pytest.approx(0.0, abs=1e-9)
        assert recurrent_cost.miss(runs, refs, n, 1, TRUE) == pytest.approx(0.0, abs=1e-9)
        assert recurrent_cost.miss(runs, refs, n, 0, None) > 0.01  # without: the scan's time is missing


def test_pool_leaves_each_machine_out_and_saved_records_reload(tmp_path, capsys):
    for k, (speed, ratio) in enumerate(((1.0, 1.2), (0.6, 0.9), (1.4, 1.05))):
        rec = _record(*_runs(speed, ratio), cpu=f"family {k} model 1 stepping 1")
        (tmp_path / f"recurrent_cost-m{k}.json").write_text(json.dumps(rec), encoding="utf-8")
    (tmp_path / "recurrent_cost-broken.json").write_text("{}", encoding="utf-8")
    records = recurrent_cost.load_records([str(tmp_path)])
    assert "recurrent_cost-broken.json is not a record" in capsys.readouterr().err
    assert len(records) == 3
    result = recurrent_cost.pool(records)
    assert result["all"]["fitted"] == pytest.approx(TRUE, rel=1e-4)
    machines = [k for k in result if k != "all"]
    assert len(machines) == 3 and all(k.endswith("L3 " + str(records[0][1]["last_level_cache_bytes"] >> 20) + " MiB")
                                      for k in machines)
    for key in machines:
        e = result[key]
        assert e["runs"] == 3 and e["fitted"] == pytest.approx(TRUE, rel=1e-4)  # from the other two machines
        for kind in ("decode", "prefill"):
            assert e[kind]["held out"] == pytest.approx(0.0, abs=1e-4)
            assert e[kind]["none"] > 0.01
    recurrent_cost.print_pool(result)
    out = capsys.readouterr().out
    assert "| machine held out |" in out and "fitted on every machine's runs" in out


def test_one_machine_alone_has_nothing_to_be_checked_against(tmp_path):
    (tmp_path / "recurrent_cost-only.json").write_text(json.dumps(_record(*_runs(1.0, 1.1), cpu="family 9 model 9")),
                                                       encoding="utf-8")
    result = recurrent_cost.pool(recurrent_cost.load_records([str(tmp_path)]))
    (key,) = [k for k in result if k != "all"]
    assert result[key]["fitted"] is None and result[key]["decode"]["held out"] is None
    assert result["all"]["fitted"] == pytest.approx(TRUE, rel=1e-4)
