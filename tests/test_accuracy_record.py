"""bench/accuracy_probe.py --save writes a run as a JSON record that reloads exactly (hardware
profile, probe, every row's figures), and bench/probe_type_transfer.py --results prices the
weight types of every saved probe with its own machine's profile."""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime

import pytest

from bench_modules import load_bench
from rooflight.estimate.probe import AttentionCost, FixedCosts, KernelFigure, MachineProbe
from rooflight.hardware import profile_from_dict

accuracy_probe = load_bench("accuracy_probe")
probe_type_transfer = load_bench("probe_type_transfer")

HW = profile_from_dict({"cpu": {"name": "Test CPU (R) 9000", "cores": 2, "threads": 2, "isa": ["avx2"],
                                "ram_total_bytes": 16 * 10**9, "ram_available_bytes": 12 * 10**9,
                                "ram_bandwidth_gbs": 20.0, "max_freq_mhz": 3000},
                        "gpus": [], "backend": "cpu"}, measure_bandwidth=False)
PROBE = MachineProbe(machine="m", build="b", n_threads=2, n_ubatch=512,
                     kernels=(KernelFigure("Q8_0", 0.05e-9, 0.02e-9, 21.0, "memory"),
                              KernelFigure("F16", 0.08e-9, 0.025e-9, 25.0, "memory"),
                              KernelFigure("Q6_K", 0.06e-9, 0.03e-9, 14.0, "compute")),
                     attention=(AttentionCost(True, 0.3e-9, 0.03e-9),), fixed=FixedCosts(70e-6, 25e-6, 3e-9),
                     spread=0.1, disturbed=False, created_at=1.0)


def _row(name: str, decode: tuple[float, float, float], prefill: tuple[float, float, float],
         runs: list[tuple[float, float]], d_in: bool, p_in: bool) -> dict:
    """A row as accuracy_probe.run() builds it: (probe, table, measured median) per kind."""
    return dict(name=name, prompt=512, basis="probe", decode=decode, prefill=prefill, d_in=d_in, p_in=p_in,
                threads=2, busy=0.01, runs=runs, ranges=((decode[0] * 0.8, decode[0] * 1.3),
                                                         (prefill[0] * 0.88, prefill[0] * 1.21)))


def test_save_writes_a_record_that_reloads_exactly(tmp_path):
    rows = [_row("a", (110.0, 150.0, 100.0), (1000.0, 2000.0, 900.0), [(99.0, 880.0), (100.0, 900.0)], True, False),
            _row("b", (50.0, 70.0, 52.0), (400.0, 300.0, 410.0), [(52.0, 410.0), (53.0, 400.0)], True, True)]
    when = datetime(2026, 12, 6, 4, 30, 12, tzinfo=UTC)
    rec = accuracy_probe.record(HW, PROBE, rows, repeats=2, load_before=0.42, when=when)
    path = accuracy_probe.save(rec, tmp_path)
    assert path.name == "accuracy_probe-test-cpu-r-9000-20261206T043012Z.json"
    back = json.loads(path.read_text(encoding="utf-8"))
    assert back["utc"] == "2026-12-06T04:30:12+00:00" and back["repeats"] == 2 and back["load_1min_before"] == 0.42
    assert back["llama_cpp_python"] and back["last_level_cache_bytes"] > 0  # which build, what cache
    first = back["rows"][0]
    assert first["decode_tok_s"] == {"probe": 110.0, "table": 150.0, "measured": 100.0, "runs": [99.0, 100.0],
                                     "range": [88.0, 143.0], "inside": True}
    assert first["prefill_tok_s"]["runs"] == [880.0, 900.0] and first["prefill_tok_s"]["inside"] is False
    assert back["summary"] == {
        "decode_median_error": round(statistics.median([0.10, abs(50 / 52 - 1)]), 4),
        "prefill_median_error": round(statistics.median([abs(1000 / 900 - 1), abs(400 / 410 - 1)]), 4),
        "inside": 3, "of": 4}
    # the hardware profile and the probe come back as they were: the record can be priced again
    (name, hw, probe), = probe_type_transfer.saved_probes([str(tmp_path)])
    assert name == path.name and hw == HW and probe == PROBE


def test_type_transfer_prices_every_saved_probe(tmp_path, capsys):
    for minute in (1, 2):
        rec = accuracy_probe.record(HW, PROBE, [], repeats=1, load_before=0.0,
                                    when=datetime(2026, 12, 6, 4, minute, tzinfo=UTC))
        accuracy_probe.save(rec, tmp_path)
    (tmp_path / "notes.txt").write_text("not a record")  # other files in the folder are left alone
    assert probe_type_transfer.main(["--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("probe of 3 types (Q8_0, F16, Q6_K)") == 2
    assert "all 2 probes, 6 types:" in out


def test_type_transfer_without_records_says_what_to_run(tmp_path, capsys):
    assert probe_type_transfer.main(["--results", str(tmp_path / "none")]) == 1
    assert "run bench/accuracy_probe.py --save" in capsys.readouterr().out


def test_reprice_plans_a_saved_row_again_as_the_run_planned_it(tmp_path, capsys):
    """A record of the 25M shape whose 'probe' column is what plan() gives now: priced again,
    the old and the new estimate agree to the digit, and the range check is redone."""
    reprice = load_bench("reprice_accuracy")
    from rooflight.estimate import Calibration, Wishes, plan

    specs = reprice.Specs(tmp_path)
    name = "llama-25M-F16-mha"
    w = Wishes(n_ctx=2048, n_gpu_layers=0, prompt_tokens=512, gen_tokens=accuracy_probe.GEN_TOKENS)
    perf = plan(specs[name], HW, w, calibration=Calibration(probe=PROBE)).performance
    measured = (perf.decode_tok_s * 0.9, perf.prefill_tok_s * 2.0)  # inside, and far outside, the ranges
    row = _row(name, (perf.decode_tok_s, 1.0, measured[0]), (perf.prefill_tok_s, 1.0, measured[1]),
               [measured], True, False)
    row["ranges"] = (perf.decode_tok_s_range, perf.prefill_tok_s_range)
    path = accuracy_probe.save(accuracy_probe.record(HW, PROBE, [row], repeats=1, load_before=0.0,
                                                     when=datetime(2026, 12, 6, 5, 0, tzinfo=UTC)), tmp_path)
    (again,) = reprice.reprice(path, specs)
    old, new, got, old_in, new_in = again["decode_tok_s"]
    assert new == pytest.approx(old, rel=1e-3) and got == round(measured[0], 3) and old_in and new_in
    assert again["prefill_tok_s"][3:] == (False, False)
    assert reprice.main([str(path)]) == 0
    assert "inside the printed range: 1 -> 1 of 2" in capsys.readouterr().out


def test_a_file_that_is_not_a_record_is_named_and_the_others_still_read(tmp_path, capsys):
    good = accuracy_probe.save(accuracy_probe.record(HW, PROBE, [], repeats=1, load_before=0.0,
                                                     when=datetime(2026, 12, 6, 5, 0, tzinfo=UTC)), tmp_path)
    bad = tmp_path / "accuracy_probe-broken.json"
    bad.write_text("{not json")
    assert [name for name, _, _ in probe_type_transfer.saved_probes([str(tmp_path)])] == [good.name]
    assert f"{bad} is not a saved accuracy record" in capsys.readouterr().err
    reprice = load_bench("reprice_accuracy")
    assert reprice.main([str(bad)]) == 1  # one sentence, no traceback
    assert "is not a saved accuracy record" in capsys.readouterr().err


def test_probe_band_check_widens_each_row_by_its_own_spread_and_derives_bands_out_of_sample():
    """bench/probe_band_check.py's arithmetic on rows made by hand: a row's w is read back from
    its printed range, a base band holds a row when the row's own widening reaches it, and a
    derived band is the tails of r * w and r / w, never excluding 1.0."""
    check = load_bench("probe_band_check")
    base = (0.8, 1.3)
    r, wl, wh = check.row_factors(90.0, 100.0, 100.0 * 0.8 / 1.1, 100.0 * 1.3 * 1.1, base)
    assert (r, wl, wh) == pytest.approx((0.9, 1.1, 1.1))
    rows = [(0.75, 1.1, 1.1),   # 0.75 >= 0.8 / 1.1 = 0.727: inside only thanks to its widening
            (0.70, 1.0, 1.0),   # below
            (1.40, 1.1, 1.1),   # 1.40 <= 1.43: inside
            (1.50, 1.1, 1.1)]   # above
    assert check.inside(rows, base) == 2
    many = [(x, 1.0, 1.0) for x in (0.90, 0.95, 1.00, 1.05, 1.10, 1.15, 1.20, 1.25, 1.30, 1.35, 1.40)]
    lo, hi = check.derived_band(many, 10)
    assert lo == pytest.approx(0.95) and hi == pytest.approx(1.35)
    assert check.derived_band([(x, 1.0, 1.0) for x in (1.1, 1.2, 1.3)] * 4, 10)[0] == 1.0  # holds 1.0


def test_probe_band_check_groups_an_early_record_with_the_machine_whose_profile_it_shares():
    check = load_bench("probe_band_check")
    cpu = {"name": "Intel(R) Xeon(R) Processor", "isa": ["avx2"], "ram_total_bytes": 1, "ram_available_bytes": 5}
    records = {"early": {"hardware": {"cpu": dict(cpu, ram_available_bytes=7)}},
               "later": {"hardware": {"cpu": cpu}, "cpu_id": "family 6 model 167", "last_level_cache_bytes": 480 << 20},
               "other": {"hardware": {"cpu": dict(cpu, isa=["avx512f"])}, "cpu_id": "family 6 model 207",
                         "last_level_cache_bytes": 300 << 20}}
    keys = check.machine_keys(records)
    assert keys["early"] == keys["later"] == "family 6 model 167, L3 480 MiB"
    assert keys["other"] == "family 6 model 207, L3 300 MiB"


def test_probe_band_check_without_records_says_what_to_run(tmp_path, capsys):
    check = load_bench("probe_band_check")
    assert check.main([str(tmp_path / "none")]) == 1
    assert "run bench/accuracy_probe.py --save" in capsys.readouterr().out


def test_probe_band_check_names_a_file_that_is_not_a_record(tmp_path, capsys):
    bad = tmp_path / "accuracy_probe-broken.json"
    bad.write_text("{not json")
    assert load_bench("probe_band_check").main([str(bad)]) == 1
    assert f"{bad} is not a saved accuracy record" in capsys.readouterr().err
