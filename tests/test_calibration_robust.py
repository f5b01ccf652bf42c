"""Calibration survives disturbed measurements: a run on a busy machine, or one of a model so
small that per-call overheads dominate, must not drag every later estimate on the machine."""

from __future__ import annotations

import pytest

from rooflight.estimate.calibration import Calibration, Ratio
from rooflight.store.calibration import CalibrationStore, Measurement


def _m(pred_dec: float, dec: float, pred_pre: float, pre: float, *, model_bytes: int = 300_000_000) -> Measurement:
    return Measurement(machine="m", backend="cpu", model="x", quant="Q4_K_M", n_ctx=4096, n_gpu_layers=0,
                       prompt_tokens=512, gen_tokens=128, predicted_decode=pred_dec, measured_decode=dec,
                       predicted_prefill=pred_pre, measured_prefill=pre, n_threads=2,
                       model_bytes=model_bytes)


def test_implausible_rows_are_not_used(tmp_path) -> None:
    store = CalibrationStore(tmp_path / "c.sqlite3")
    try:
        # what this machine's history really held: a tiny model decoding 270x slower than the
        # roofline (overheads), a 27-token prompt timed with the cores busy (90x slower)
        store.add(_m(32761.0, 122.0, 634029.0, 39.7, model_bytes=371_328))
        store.add(_m(93.7, 45.2, 1478.0, 16.7))
        store.add(_m(90.0, 60.0, 1400.0, 1000.0))  # a sane run
        cal = store.calibration("m", "cpu")
    finally:
        store.close()
    assert cal.samples == 1
    decode, prefill = cal.factors("Q4_K_M", 2, 300_000_000)
    assert decode == pytest.approx(60 / 90)
    assert prefill == pytest.approx(1000 / 1400)


def test_factors_are_bounded_where_calibration_stops_trusting_a_measurement() -> None:
    from rooflight.store.calibration import plausible_limit

    limit = plausible_limit("table")
    cal = Calibration(decode_factor=40.0, prefill_factor=0.01, samples=1,
                      ratios=(Ratio("Q4_K_M", 2, 300_000_000, 40.0, 0.01),))
    assert cal.factors("Q4_K_M", 2, 300_000_000) == (limit, 1 / limit)
    assert cal.factors("Q4_K_M", 8, 300_000_000) == (limit, 1 / limit)  # the fallback too


def test_a_machine_far_off_the_table_is_corrected_all_the_way(tmp_path) -> None:
    """A quiet Zen-1-era EPYC VM ran small models' prompts 11-12x slower than the table and
    decode 3-4x: one quiet bench there is a plausible measurement (plausible_limit), and the
    correction it gives is the whole ratio (it stopped at 4x until 2026-12-05)."""
    store = CalibrationStore(tmp_path / "c.sqlite3")
    try:
        store.add(_m(600.0, 150.0, 10531.0, 900.0))  # x0.25 decode, x0.085 prompt, nothing else running
        cal = store.calibration("m", "cpu")
    finally:
        store.close()
    decode, prefill = cal.factors("Q4_K_M", 2, 300_000_000)
    assert decode == pytest.approx(0.25) and prefill == pytest.approx(900 / 10531)


def test_a_table_estimate_far_off_a_machine_still_calibrates_it_a_probe_s_does_not(tmp_path) -> None:
    """A quiet Zen-1-era EPYC VM ran small models' prompts 11-12x slower than the table: the
    limit is PLAUSIBLE_RATIO beyond the table's band (plausible_limit), not 8x of the
    estimate; a probe-based estimate, measured on this machine, keeps its narrow limit."""
    from dataclasses import replace

    from rooflight.store.calibration import PLAUSIBLE_RATIO, plausible_limit

    assert plausible_limit("probe") < 12 < plausible_limit("table")
    assert plausible_limit("probe") >= PLAUSIBLE_RATIO
    quiet_but_slow = _m(600.0, 138.0, 10531.0, 900.0)  # table-based: x0.23 decode, x0.085 prefill
    assert quiet_but_slow.usable
    assert not replace(quiet_but_slow, basis="probe").usable
    assert not _m(600.0, 138.0, 10531.0, 300.0).usable  # x0.028: past any band
    store = CalibrationStore(tmp_path / "c.sqlite3")
    try:
        store.add(quiet_but_slow)
        store.add(replace(quiet_but_slow, basis="probe"))
        cal = store.calibration("m", "cpu")
    finally:
        store.close()
    assert cal.samples == 1 and cal.ratios[0].basis == "table"


def test_a_measurement_taken_beside_a_busy_program_is_stored_but_not_used(tmp_path) -> None:
    """On two cores llama.cpp's threads stall beside any busy process: a bench or chat reply
    measured while other programs took more than DEFAULT_BUSY_THRESHOLD of the CPU would
    correct every later estimate by the other program's load."""
    from dataclasses import replace

    from rooflight.runtime.probe_defaults import DEFAULT_BUSY_THRESHOLD

    quiet = _m(90.0, 60.0, 1400.0, 1000.0)
    busy = replace(_m(90.0, 20.0, 1400.0, 300.0), others_cpu=DEFAULT_BUSY_THRESHOLD + 0.2)
    assert quiet.usable and not busy.usable and busy.disturbed
    store = CalibrationStore(tmp_path / "c.sqlite3")
    try:
        store.add(quiet)
        store.add(busy)
        cal = store.calibration("m", "cpu")
        kept = store._db.execute("SELECT others_cpu FROM measurements ORDER BY id").fetchall()
    finally:
        store.close()
    assert [round(r[0], 2) for r in kept] == [0.0, round(DEFAULT_BUSY_THRESHOLD + 0.2, 2)]  # both stored
    assert cal.samples == 1 and cal.factors("Q4_K_M", 2, 300_000_000)[0] == pytest.approx(60 / 90)


class _ScriptedWatch:
    """runtime/busy.Watch with the other programs' shares given: the one thing a test cannot
    make happen on cue is another program's CPU use."""

    shares: list[float] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        from rooflight.runtime.busy import Window

        self.window = Window(1.0, self.shares.pop(0))


def test_bench_takes_a_disturbed_run_again(monkeypatch) -> None:
    from rooflight.runtime import bench, busy

    monkeypatch.setattr(busy, "Watch", _ScriptedWatch)
    _ScriptedWatch.shares = [0.0, 0.45, 0.02, 0.01]
    said: list[str] = []
    n = iter(range(10))
    runs, others = bench.quiet_runs(lambda: next(n), 3, said.append)
    assert runs == [0, 2, 3] and others == pytest.approx(0.02)
    assert len(said) == 1 and "45%" in said[0] and "again" in said[0]


def test_bench_on_a_machine_that_stays_busy_keeps_the_quietest_runs_and_says_so(monkeypatch) -> None:
    from rooflight.runtime import bench, busy

    monkeypatch.setattr(busy, "Watch", _ScriptedWatch)
    _ScriptedWatch.shares = [0.5, 0.3, 0.6, 0.4, 0.7, 0.35]
    n = iter(range(10))
    runs, others = bench.quiet_runs(lambda: next(n), 3, lambda _s: None)
    assert runs == [1, 3, 5] and others == pytest.approx(0.4)  # 6 runs at most, then the quietest 3


def test_the_real_watch_sees_a_busy_program_beside_a_run() -> None:
    """The watch itself, unfaked: a child process spinning on a core while the run sleeps."""
    import subprocess
    import sys
    import time

    from rooflight.runtime import bench

    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 3: pass"])
    try:
        time.sleep(0.3)  # the child's start-up is not the run
        runs, others = bench.quiet_runs(lambda: time.sleep(0.4), 1, lambda _s: None)
    finally:
        child.kill()
        child.wait()
    assert len(runs) == 1 and others > 0.2  # one core of two or more spun: a quarter at least, less the tick rounding
