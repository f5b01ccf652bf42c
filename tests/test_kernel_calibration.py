"""Measurements correct a probe-based estimate per kernel (estimate/kernel_calibration.py):
the arithmetic, the store, and a real bench on this machine against a stored probe."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rooflight.estimate import Calibration, Wishes, plan
from rooflight.estimate.calibration import Ratio
from rooflight.estimate.kernel_calibration import (
    MIN_COVERAGE,
    KernelShares,
    corrections,
    factor,
    shares_of,
)
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import profile_from_dict
from rooflight.store.calibration import CalibrationStore, Measurement, machine_key

# ---- arithmetic -----------------------------------------------------------------------------


def test_shares_are_normalised_over_the_kernels_that_took_time():
    assert shares_of({"Q4_K": 3.0, "Q6_K": 1.0, "F16": 0.0}) == (("Q4_K", 0.75), ("Q6_K", 0.25))
    assert shares_of({}) == ()


def test_one_measurement_is_explained_by_the_smallest_corrections():
    """One bench of a Q4_K_M-like prediction: it reproduces its own ratio, and lays most of it
    on the kernel that took most of its time (minimum norm), so a model all in its minor
    kernel is corrected only a little, and known only as far as that kernel was measured."""
    own = (("Q4_K", 0.8), ("Q6_K", 0.2))
    fitted = corrections([(own, 0.8)])
    assert factor(own, fitted)[0] == pytest.approx(0.8)
    assert factor(own, fitted)[1] == pytest.approx(1.0)
    q6k_only, covered = factor((("Q6_K", 1.0),), fitted)
    assert 0.8 < q6k_only < 1.0 and q6k_only > factor((("Q4_K", 1.0),), fitted)[0]
    assert covered == pytest.approx(0.2)
    assert factor((("Q8_0", 1.0),), fitted) == (1.0, 0.0)  # a kernel nobody measured
    assert factor((), fitted) == (1.0, 0.0)


def test_measurements_that_tell_kernels_apart_give_each_its_own_correction():
    fitted = corrections([((("Q6_K", 1.0),), 0.8), ((("Q4_K", 0.5), ("Q6_K", 0.5)), 1.0)])
    assert math.exp(fitted.log_factor["Q6_K"]) == pytest.approx(0.8)
    assert math.exp(fitted.log_factor["Q4_K"]) == pytest.approx(1.25)
    assert factor((("Q4_K", 1.0),), fitted) == (pytest.approx(1.25), pytest.approx(0.5))
    # two measurements of the same kernels: their geometric mean
    same = corrections([((("Q8_0", 1.0),), 0.5), ((("Q8_0", 1.0),), 2.0)])
    assert factor((("Q8_0", 1.0),), same) == (pytest.approx(1.0), 1.0)


def test_shares_round_trip_through_json_and_garbage_reads_as_none():
    k = KernelShares(decode=(("Q4_K", 0.75), ("Q6_K", 0.25)), prefill=(("Q4_K", 1.0),))
    assert KernelShares.from_json(k.to_json()) == k
    for bad in ("", None, "not json", "[1, 2]", '{"decode": {"Q4_K": "x"}}'):
        assert KernelShares.from_json(bad) is None


# ---- Calibration: which measurements correct which estimates -----------------------------


def _probe_for(hw, build: str = "b"):
    """test_probe's synthetic probe, with a Q4_K figure too."""
    from dataclasses import replace

    from rooflight.estimate.probe import KernelFigure
    from test_probe import _probe

    p = _probe(machine_key(hw), build)
    return replace(p, kernels=(*p.kernels, KernelFigure("Q4_K", 0.03e-9, 0.015e-9, 17.0, "compute")))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """Generated models whose kernel time is all Q6_K, all Q8_0, and mostly Q4_K with some
    Q6_K (a Q4_K_M file: attn_v, half the ffn_down and the output layer in Q6_K)."""
    d = tmp_path_factory.mktemp("k")
    args = dict(n_layer=4, n_embd=512, n_head=8, n_head_kv=4, n_ff=1024, n_vocab=2000, context_length=4096)
    return {"q6k": write_model(d / "q6k.gguf", ftype="Q6_K", pure=True, **args),
            "q8": write_model(d / "q8.gguf", ftype="Q8_0", pure=True, **args),
            "q4km": write_model(d / "q4km.gguf", ftype="Q4_K_M", **args)}


def _perf(path: Path, hw, cal: Calibration):
    return plan(load_model_spec(str(path)), hw, Wishes(n_ctx=2048, n_threads=2), calibration=cal).performance


def _min_norm_exponent(target, measured) -> float:
    """One measurement with shares w explains its log ratio by the corrections w x log r /
    |w|^2 (minimum norm): a target with shares s takes r ** (s . w / |w|^2)."""
    w, t = dict(measured), dict(target)
    return sum(t.get(k, 0.0) * v for k, v in w.items()) / sum(v * v for v in w.values())


def test_a_measurement_corrects_the_kernels_it_used_and_only_by_their_share(models):
    from test_probe import HW

    hw = profile_from_dict(HW)
    probe = _probe_for(hw)
    bare = Calibration(probe=probe)
    q6k = _perf(models["q6k"], hw, bare)
    assert q6k.basis == "probe" and q6k.kernels is not None
    decode = dict(q6k.kernels.decode)
    # its weights, the probe's attention and its fixed costs: a tiny model pays much of both
    assert set(decode) == {"Q6_K", "attention", "fixed"} and max(decode, key=decode.get) == "Q6_K"
    assert sum(decode.values()) == pytest.approx(1.0)
    measured = Ratio("Q6_K", 2, 10**7, 0.8, 1.25, "probe", q6k.kernels)
    cal = Calibration(samples=1, ratios=(measured,), probe=probe)

    # the measured model itself: its own measurement, exactly
    again = _perf(models["q6k"], hw, cal)
    assert again.basis == "calibrated"
    assert again.decode_tok_s == pytest.approx(0.8 * q6k.decode_tok_s)
    assert again.prefill_tok_s == pytest.approx(1.25 * q6k.prefill_tok_s)

    # another weight type: only through the attention and fixed costs it shares, so less
    q8_bare, q8 = _perf(models["q8"], hw, bare), _perf(models["q8"], hw, cal)
    exponent = _min_norm_exponent(q8_bare.kernels.decode, q6k.kernels.decode)
    assert 0 < exponent < 1
    assert q8.decode_tok_s == pytest.approx(q8_bare.decode_tok_s * 0.8 ** exponent)
    assert q8_bare.decode_tok_s * 0.8 < q8.decode_tok_s < q8_bare.decode_tok_s

    # a Q4_K_M file, which the file-type rule did not correct at all: by its Q6_K share and
    # the shared figures; calibrated only when the measurement covers MIN_COVERAGE of it
    km_bare, km = _perf(models["q4km"], hw, bare), _perf(models["q4km"], hw, cal)
    exponent = _min_norm_exponent(km_bare.kernels.decode, q6k.kernels.decode)
    assert km.decode_tok_s == pytest.approx(km_bare.decode_tok_s * 0.8 ** exponent)
    assert km.decode_tok_s < km_bare.decode_tok_s
    covered = sum(min(v, decode.get(k, 0.0)) for k, v in km_bare.kernels.decode)
    assert (km.basis == "calibrated") == (covered >= MIN_COVERAGE)
    if km.basis == "probe":  # a partial correction is said in the range's basis
        assert "partly corrected" in km.range_basis and "partly" not in km_bare.range_basis


def test_measurements_without_shares_still_correct_their_own_file_type(models):
    """Rows stored before kernels were kept: the file-type rule."""
    from test_probe import HW

    hw = profile_from_dict(HW)
    probe = _probe_for(hw)
    old = Ratio("Q8_0", 2, 10**7, 0.8, 1.25, "probe")
    base = _perf(models["q8"], hw, Calibration(probe=probe))
    got = _perf(models["q8"], hw, Calibration(samples=1, ratios=(old,), probe=probe))
    assert _perf(models["q6k"], hw, Calibration(samples=1, ratios=(old,), probe=probe)).basis == "probe"
    assert got.decode_tok_s == pytest.approx(0.8 * base.decode_tok_s) and got.basis == "calibrated"


def test_the_store_keeps_a_measurements_kernel_shares(tmp_path):
    db = CalibrationStore(tmp_path / "c.sqlite3")
    shares = KernelShares(decode=(("Q4_K", 0.8), ("Q6_K", 0.2)), prefill=(("Q4_K", 1.0),))
    common = dict(machine="m", backend="cpu", model="x", quant="Q4_K_M", n_ctx=2048, n_gpu_layers=0,
                  prompt_tokens=512, gen_tokens=64, predicted_decode=10.0, measured_decode=9.0,
                  predicted_prefill=100.0, measured_prefill=110.0, n_threads=2, model_bytes=10**8)
    try:
        db.add(Measurement(**common, basis="probe", kernels=shares))
        db.add(Measurement(**common, basis="table", kernels=shares))  # a table prediction has none
        cal = db.calibration("m", "cpu")
    finally:
        db.close()
    by_basis = {r.basis: r for r in cal.ratios}
    assert by_basis["probe"].kernels == shares
    assert by_basis["table"].kernels is None


# ---- real runs against a stored probe -------------------------------------------------------


def _this_machine_probed():
    """This machine, with test_probe's synthetic figures stored as its probe for the
    installed llama.cpp build (the test's own data dir)."""
    pytest.importorskip("llama_cpp")
    from rooflight.hardware import detect
    from rooflight.runtime.build import llama_build
    from rooflight.store.probes import ProbeStore

    hw = detect()
    store = ProbeStore()
    try:
        store.put(_probe_for(hw, llama_build()))
    finally:
        store.close()
    return hw


def test_a_real_bench_stores_its_kernels_and_corrects_a_model_of_another_file_type(models):
    """llama.cpp runs the Q6_K model; the stored measurement carries its kernel shares, and
    the Q4_K_M model (another file type) is then corrected by its Q6_K share of that
    measurement's ratio, where the file-type rule corrected it not at all."""
    from rooflight.runtime.bench import run_bench
    from rooflight.store.calibration import machine_calibration

    hw = _this_machine_probed()
    wishes = Wishes(n_ctx=1024, n_threads=2, prompt_tokens=64, gen_tokens=16)
    before = machine_calibration(hw)
    assert before.probe is not None and not before.ratios
    result = run_bench(str(models["q6k"]), wishes, profile=hw, repetitions=1)
    assert result.estimate.performance.basis == "probe"
    assert set(result.to_dict()["kernel_shares"]["decode"]) == {"Q6_K", "attention", "fixed"}  # bench --json
    from rooflight.commands.bench import kernels_sentence

    said = kernels_sentence(result.estimate.performance.kernels)
    assert "decode: Q6_K " in said and "their own share" in said
    cal = machine_calibration(hw)
    spec = load_model_spec(str(models["q4km"]))
    bare = plan(spec, hw, wishes, calibration=before).performance
    after = plan(spec, hw, wishes, calibration=cal).performance
    if not result.used_for_calibration:
        # a busy machine ran it more than 8x off the synthetic probe: stored, never applied
        assert cal.ratios == () and after.decode_tok_s == pytest.approx(bare.decode_tok_s)
        return
    (stored,) = cal.ratios
    shares = dict(stored.kernels.decode)
    assert stored.basis == "probe" and max(shares, key=shares.get) == "Q6_K"
    exponent = _min_norm_exponent(bare.kernels.decode, stored.kernels.decode)
    assert after.decode_tok_s == pytest.approx(bare.decode_tok_s * stored.decode ** exponent)


def test_the_learnt_corrections_read_in_one_line():
    from rooflight.estimate.kernel_calibration import learnt_line

    shares = KernelShares(decode=(("Q4_K", 0.8), ("Q6_K", 0.2)), prefill=(("Q4_K", 0.9), ("Q6_K", 0.1)))
    ratios = [Ratio("Q4_K_M", 2, 10**8, 0.9, 1.1, "probe", shares),
              Ratio("Q4_K_M", 4, 10**8, 0.5, 0.5, "probe", shares),  # another thread count
              Ratio("Q8_0", 2, 10**8, 3.0, 3.0, "table")]  # against the table
    line = learnt_line(ratios, 2)
    assert line.startswith("Corrected by 1 measurement against this probe (benches and chats): Q4_K decode x")
    assert "Q6_K decode x" in line and "prompt x" in line
    assert learnt_line(ratios[2:], 2) == "" and learnt_line(ratios, 8) == ""


def test_the_measured_range_stands_on_left_out_measurements(models):
    """Five measurements, each with a kernel of its own besides the shared ones: least
    squares fits them all exactly, so their in-sample residuals say nothing; the range comes
    from each one priced by the other four, and is a real band."""
    from test_probe import HW

    hw = profile_from_dict(HW)
    probe = _probe_for(hw)
    def shares(i: int):
        return (("Q8_0", 0.4), ("attention", 0.2), ("fixed", 0.1), (f"K{i}", 0.3))

    ratios = tuple(Ratio("Q8_0", 2, 10**7, r, r, "probe", KernelShares(decode=shares(i), prefill=shares(i)))
                   for i, r in enumerate((0.8, 0.9, 1.0, 1.1, 1.25)))
    p = _perf(models["q8"], hw, Calibration(samples=5, ratios=ratios, probe=probe))
    assert p.basis == "calibrated" and "5 stored measurements" in p.range_basis
    lo, hi = p.decode_tok_s_range
    assert lo < 0.97 * p.decode_tok_s and hi > 1.03 * p.decode_tok_s


def test_a_stress_run_on_this_machine_stands_on_its_probe_and_corrects_attention_most_at_length(models):
    """rooflight stress on a probed machine: each point is planned on the probe and stored
    with its kernel shares, and the larger context gives attention the larger share, so the
    points tell attention apart from the weights (least squares)."""
    from rooflight.runtime.stress import run_stress
    from rooflight.store.calibration import machine_calibration

    hw = _this_machine_probed()
    spec = load_model_spec(str(models["q6k"]))
    db = CalibrationStore()
    try:
        result = run_stress(models["q6k"], spec, hw, contexts=[256, 2048], wishes=Wishes(n_threads=2),
                            gen_tokens=8, store=db, machine=machine_key(hw))
    finally:
        db.close()
    assert [p.planned.estimate.performance.basis for p in result.points] == ["probe", "probe"]
    attention = [dict(p.planned.estimate.performance.kernels.decode)["attention"] for p in result.points]
    assert attention[1] > attention[0] > 0
    # the points within 8x of the plan are read back as probe-basis ratios with their shares
    stored = [r for r in machine_calibration(hw).ratios if r.basis == "probe"]
    assert len(stored) == result.used_for_calibration
    assert all(r.kernels is not None and "attention" in dict(r.kernels.decode) for r in stored)


def test_the_probe_names_its_machine_as_a_person_reads_it():
    """`rooflight probe` heads its table with the machine, not the raw key it is stored by."""
    from rooflight.commands.probe import format_probe
    from rooflight.runtime.probe import ProbeRun
    from rooflight.store.calibration import describe_machine_key
    from test_probe import _probe

    assert describe_machine_key("AMD EPYC 9B14|2c|25GB|") == "AMD EPYC 9B14, 2 cores, 25 GB RAM"
    assert describe_machine_key("Apple M2|1c|8GB|Apple M2 GPU,Apple M2 GPU 2") == (
        "Apple M2, 1 core, 8 GB RAM, Apple M2 GPU, Apple M2 GPU 2")
    assert describe_machine_key("a key of another shape") == "a key of another shape"
    first = format_probe(ProbeRun(_probe("Intel(R) Xeon(R) Processor|2c|25GB|", "b"))).splitlines()[0]
    assert first.startswith("Probe of this machine (Intel(R) Xeon(R) Processor, 2 cores, 25 GB RAM) with b, ")


def test_a_probe_the_budget_cut_short_says_how_to_give_it_time():
    from dataclasses import replace

    from rooflight.commands.probe import format_probe
    from rooflight.runtime.probe import OUT_OF_TIME, ProbeRun
    from test_probe import _probe

    cut = format_probe(ProbeRun(replace(_probe("m", "b"), out_of_time=("NVFP4",)), stored=True,
                                skipped={"NVFP4": OUT_OF_TIME}))
    assert cut.splitlines()[-1] == ("The table prices the parts the time budget left out; "
                                    "`rooflight probe --budget 60` gives them time.")
    whole = format_probe(ProbeRun(_probe("m", "b"), stored=True))
    assert "--budget" not in whole and whole.splitlines()[-1].startswith("Stored:")
