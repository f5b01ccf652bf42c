"""Calibration survives disturbed measurements: a run on a busy machine, or one of a model so
small that per-call overheads dominate, must not drag every later estimate on the machine."""

from __future__ import annotations

import pytest

from rooflight.estimate.perf import Calibration, Ratio
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


def test_factors_are_bounded() -> None:
    cal = Calibration(decode_factor=7.0, prefill_factor=0.13, samples=1,
                      ratios=(Ratio("Q4_K_M", 2, 300_000_000, 7.0, 0.13),))
    assert cal.factors("Q4_K_M", 2, 300_000_000) == (4.0, 0.25)
    assert cal.factors("Q4_K_M", 8, 300_000_000) == (4.0, 0.25)  # the fallback too


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
