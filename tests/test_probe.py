"""The machine probe: its arithmetic from synthetic timings, the roofline that stands on it,
its store (a new llama.cpp build or another machine invalidates it), and a reduced probe
run with the real llama.cpp on generated models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rooflight.estimate import Calibration, Wishes, plan, ranges
from rooflight.estimate.cpu_attention import cpu_attention_units
from rooflight.estimate.layers import layer_table
from rooflight.estimate.probe import (
    MAX_CLEAN_SPREAD,
    AttentionCost,
    FixedCosts,
    KernelFigure,
    MachineProbe,
    Repeats,
    attention_cost,
    classify_bounds,
    fixed_costs,
    kernel_figure,
    slope_intercept,
)
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import profile_from_dict
from rooflight.store.calibration import machine_key
from rooflight.store.probes import ProbeStore, probe_status

# ---- arithmetic -----------------------------------------------------------------------------


def test_repeats_use_clean_runs_and_report_their_spread():
    r = Repeats((1.0, 5.0, 1.1, 0.9), (True, False, True, True))
    assert r.used == (1.0, 1.1, 0.9)
    assert r.value == pytest.approx(1.0)
    assert r.spread == pytest.approx(0.2)
    assert not r.disturbed
    # one clean run is not a measurement; clean runs that disagree past MAX_STORED_SPREAD are
    # not either; clean runs that disagree less are the machine's own drift: stored, marked
    assert Repeats((1.0, 2.0), (True, False)).disturbed
    assert Repeats((1.0, 2.0, 4.0), (True, True, True)).disturbed  # 150%
    drift = Repeats((1.0, 1.3, 1.6), (True, True, True))
    assert drift.spread == pytest.approx(0.6 / 1.3) and drift.drifted and not drift.disturbed
    assert not r.drifted
    # no clean run at all: the figure is all runs' median, and disturbed
    busy = Repeats((2.0, 3.0), (False, False))
    assert busy.value == 2.5 and busy.disturbed


def test_repeats_stand_on_the_closest_clean_runs_when_one_was_a_hiccup():
    # three clean runs, one of them slowed by a hiccup of the VM: they disagree (the runner
    # measures on while they do)...
    hiccup = Repeats((1.0, 1.02, 1.5), (True, True, True))
    assert hiccup.spread > MAX_CLEAN_SPREAD and hiccup.drifted
    # ...and once the probe has run it again, the three closest agree: the hiccup is left out
    again = Repeats((1.0, 1.02, 1.5, 0.99), (True, True, True, True))
    assert again.used == (1.0, 1.02, 0.99) and not again.disturbed
    assert again.value == pytest.approx(1.0)
    # runs that keep disagreeing are the machine's drift up to MAX_STORED_SPREAD, past it disturbed
    assert Repeats((1.0, 1.4, 2.0, 2.8, 4.0), (True,) * 5).drifted
    assert Repeats((1.0, 2.0, 4.0, 8.0, 16.0), (True,) * 5).disturbed


def test_fixed_costs_from_two_layer_counts_and_two_vocabularies():
    # made-up machine: 60 us per token, 25 us per layer, 2 ns per vocabulary entry
    t = lambda layers, vocab: 60e-6 + 25e-6 * layers + 2e-9 * vocab  # noqa: E731
    out = 1e-6  # the large vocabulary's output matrix: weights, not fixed cost
    f = fixed_costs((1, 8), (t(1, 260), t(8, 260)), (260, 32000), (t(1, 260), t(1, 32000) + out), output_s=out)
    assert f.layer_s == pytest.approx(25e-6)
    assert f.token_s == pytest.approx(60e-6 + 2e-9 * 260)
    assert f.vocab_s == pytest.approx(2e-9)
    # noise below zero is no negative cost
    assert fixed_costs((1, 8), (1e-4, 0.9e-4), (260, 32000), (1e-4, 0.9e-4)).layer_s == 0.0
    with pytest.raises(ValueError):
        slope_intercept([1.0, 1.0], [1.0, 2.0])


def test_kernel_figure_and_bounds():
    # 100M weights of 1 byte read in 4 ms of a 5 ms token (1 ms fixed): 25 GB/s
    k = kernel_figure("Q8_0", decode_token_s=5e-3, decode_other_s=1e-3, decode_weights=100_000_000,
                      decode_bytes=106_250_000, prefill_s=0.5, prefill_other_s=0.1, prefill_weights=40_000_000,
                      prompt_tokens=512)
    assert k.decode_s_per_weight == pytest.approx(4e-3 / 1e8)
    assert k.decode_gbs == pytest.approx(106.25e6 / 4e-3 / 1e9)
    assert k.prefill_s_per_weight == pytest.approx(0.4 / (4e7 * 512))
    slow = replace(k, weight_type="Q6_K", decode_gbs=10.0)
    fast = replace(k, weight_type="F16", decode_gbs=30.0)
    bounds = {x.weight_type: x.bound for x in classify_bounds((k, slow, fast))}
    assert bounds == {"Q8_0": "memory", "Q6_K": "compute", "F16": "memory"}
    # one type timed in a fast spell does not set the roof for the others
    spell = replace(k, weight_type="BF16", decode_gbs=60.0)
    bounds = {x.weight_type: x.bound for x in classify_bounds((k, slow, fast, spell))}
    assert bounds == {"Q8_0": "memory", "Q6_K": "compute", "F16": "memory", "BF16": "memory"}
    assert classify_bounds((slow,))[0].bound == "memory"  # alone, a type is its own roof
    assert [x.bound for x in classify_bounds((fast, slow))] == ["memory", "compute"]  # of two, the fastest


def test_a_kernel_figure_the_other_costs_swallow_is_disturbed_not_free():
    # fixed costs timed during a stall "explain" 90% of the token (a clean probe: a few %)
    k = kernel_figure("Q8_0", decode_token_s=5e-3, decode_other_s=4.5e-3, decode_weights=100_000_000,
                      decode_bytes=106_250_000, prefill_s=0.5, prefill_other_s=0.1, prefill_weights=40_000_000,
                      prompt_tokens=512)
    assert k.disturbed
    assert k.decode_s_per_weight == pytest.approx(2.5e-3 / 1e8)  # at least half the token: never ~0
    clean = kernel_figure("Q8_0", decode_token_s=5e-3, decode_other_s=0.2e-3, decode_weights=100_000_000,
                          decode_bytes=106_250_000, prefill_s=0.5, prefill_other_s=0.02, prefill_weights=40_000_000,
                          prompt_tokens=512)
    assert not clean.disturbed and clean.decode_s_per_weight == pytest.approx(4.8e-3 / 1e8)


def test_a_large_vocabulary_costs_more_per_entry_past_the_knee():
    # made-up machine: 3 ns per entry up to 32000, 12 ns beyond; 1 ms of extra output matrix
    t_small, t_large = 100e-6, 100e-6 + 3e-9 * (32000 - 260)
    t_huge = t_large + 12e-9 * (262144 - 32000) + 1e-3
    f = fixed_costs((1, 8), (t_small, t_small + 7e-6), (260, 32000), (t_small, t_large),
                    huge=(262144, t_huge, 1e-3))
    assert f.vocab_s == pytest.approx(3e-9) and f.vocab_large_s == pytest.approx(12e-9)
    assert f.vocab_cost_s(262144) == pytest.approx(3e-9 * 32000 + 12e-9 * (262144 - 32000))
    assert f.vocab_cost_s(32000) == pytest.approx(3e-9 * 32000)
    # a probe stored before the third vocabulary was measured: one slope throughout
    old = FixedCosts(70e-6, 25e-6, 3e-9)
    assert old.vocab_large_s is None and old.vocab_cost_s(262144) == pytest.approx(3e-9 * 262144)


def test_attention_cost_per_unit():
    a = attention_cost(True, decode_short_s=1e-3, decode_long_s=3e-3, units_short=1e5, units_long=2.1e6,
                       prefill_s=0.3, prefill_other_s=0.1, prefill_flops=4e9)
    assert a.decode_s_per_unit == pytest.approx(2e-3 / 2e6)
    assert a.prefill_s_per_flop == pytest.approx(0.2 / 4e9)


def test_decode_attention_splits_into_reads_and_per_head_work_from_an_mha_and_a_gqa_model():
    """Two models' timings made with known prices for the K/V reads and the per-query-head
    work come back as those prices, and price a third head layout as they were made; a part
    that solves below zero is held at 0; two models that do not tell the parts apart leave
    the one figure as it was."""
    from rooflight.estimate.config import RunConfig
    from rooflight.estimate.cpu_attention import AttentionUnits, cpu_attention_split
    from rooflight.estimate.probe import split_decode_cost
    from rooflight.gguf.from_hparams import spec_from_hparams

    def units(n_head, n_kv):
        spec = spec_from_hparams(name="a", arch="llama", ftype="F16", n_layer=4, n_embd=256, n_head=n_head,
                                 n_head_kv=n_kv, head_dim=128, n_ff=256, n_vocab=1000, context_length=4096)
        cfg = RunConfig(n_ctx=2048, n_gpu_layers=0, n_threads=2, flash_attn=True)
        return cpu_attention_split(spec, cfg, 1040, ()) - cpu_attention_split(spec, cfg, 20, ())

    mha, gqa, llama3 = units(16, 16), units(32, 4), units(32, 8)
    assert gqa.compute / gqa.memory > 7 * mha.compute / mha.memory  # the work weighs 8x more in the GQA model
    reads, work = 0.05e-9, 1.4e-9
    def time(u):
        return u.memory * reads + u.compute * work

    one = AttentionCost(True, time(mha) / mha.total, 1e-11)
    split = split_decode_cost(one, (time(mha), mha), (time(gqa), gqa))
    assert split.decode_s_per_unit == pytest.approx(reads) and split.decode_s_per_compute_unit == pytest.approx(work)
    assert split.decode_s(llama3) == pytest.approx(time(llama3))
    assert one.decode_s(llama3) == pytest.approx(llama3.total * one.decode_s_per_unit)  # one figure for both
    assert one.decode_s(llama3) < 0.5 * time(llama3)  # what one figure did to a GQA model here
    # a GQA model faster than its reads alone allow: the work held at 0, the reads fitted to
    # both; far slower than the MHA model's reads allow: the reads held at 0
    fast = split_decode_cost(one, (time(mha), mha), (0.1 * time(gqa), gqa))
    assert fast.decode_s_per_compute_unit == 0.0 and fast.decode_s_per_unit > 0
    slow = split_decode_cost(one, (0.1 * time(mha), mha), (time(gqa), gqa))
    assert slow.decode_s_per_unit == 0.0 and slow.decode_s_per_compute_unit > 0
    same = AttentionUnits(mha.memory, mha.compute)
    assert split_decode_cost(one, (time(mha), mha), (2 * time(mha), same)) is one


def test_attention_units_keep_their_total_and_split_by_heads():
    from rooflight.estimate.config import RunConfig
    from rooflight.estimate.cpu_attention import cpu_attention_cycles, cpu_attention_parts
    from rooflight.gguf.from_hparams import spec_from_hparams

    def spec(n_head, n_kv, width=128):
        return spec_from_hparams(name="a", arch="llama", ftype="F16", n_layer=2, n_embd=256, n_head=n_head,
                                 n_head_kv=n_kv, head_dim=width, n_ff=256, n_vocab=1000, context_length=4096)

    cfg = RunConfig(n_ctx=2048, n_gpu_layers=0, n_threads=2, flash_attn=True)
    isa = ("avx2", "avx512f", "avx512_fp16")
    for s in (spec(16, 16), spec(32, 8), spec(64, 8, 64)):
        parts = cpu_attention_parts(s, cfg, 1000, 0, 2, isa)
        assert parts.total == pytest.approx(cpu_attention_cycles(s, cfg, 1000, 0, 2, isa))
    a, b = cpu_attention_parts(spec(32, 8), cfg, 1000, 0, 2), cpu_attention_parts(spec(32, 4), cfg, 1000, 0, 2)
    assert b.memory == pytest.approx(a.memory / 2) and b.compute == pytest.approx(a.compute)  # reads per KV head
    # a narrow head's scalar V remainder is per-query-head work
    narrow = cpu_attention_parts(spec(64, 8, 64), cfg, 1000, 0, 2, isa)
    assert narrow.compute > cpu_attention_parts(spec(64, 8, 64), cfg, 1000, 0, 2).compute


def test_the_attention_model_s_cache_outgrows_the_last_level_cache():
    """Its KV cache at the probe's cached positions is twice the LLC (the weights of a real
    model evict each layer's cache between tokens), within 2-8 layers."""
    from rooflight.runtime.probe import ATTN_PROMPT, attention_shape

    def cache_bytes(shape: dict) -> int:
        return ATTN_PROMPT * shape["n_head_kv"] * 2 * shape["head_dim"] * 2 * shape["n_layer"]

    assert attention_shape(32 << 20)["n_layer"] == 8 and cache_bytes(attention_shape(32 << 20)) == 64 << 20
    assert attention_shape(12 << 20)["n_layer"] == 3  # 24 MiB of cache: 3 layers of 8 MiB
    assert attention_shape(1 << 20)["n_layer"] == 2  # a small cache keeps two layers
    assert attention_shape(260 << 20)["n_layer"] == 8  # a larger one is capped (the prompt's time)
    assert cache_bytes(attention_shape(20 << 20)) >= 2 * (20 << 20)


def test_a_probe_measured_the_older_way_is_measured_again(tmp_path):
    old = dict(_probe("m", "b").to_dict(), method=2)
    with pytest.raises(ValueError, match="measure again"):
        MachineProbe.from_dict(old)
    # stored by an older version for this very machine and build: the status says so, not
    # that llama.cpp changed
    store = ProbeStore(tmp_path / "c.sqlite3")
    try:
        store._db.execute("INSERT INTO probes (machine, build, created_at, disturbed, probe) VALUES (?,?,?,?,?)",
                          ("m", "b", 1.0, 0, json.dumps(old)))
        status = store.status("m", "b")
    finally:
        store.close()
    assert status.probe is None and status.state == "outdated"
    assert "older version" in status.message and "measure this machine again" in status.message


def test_probe_round_trips_through_a_dict():
    from dataclasses import replace

    p = replace(_probe("m", "b", expert_costs=(("Q4_K", 2.3), ("Q8_0", 1.8))), out_of_time=("NVFP4",))
    assert MachineProbe.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    older = p.to_dict()
    del older["out_of_time"]  # a probe stored before the field
    assert MachineProbe.from_dict(older).out_of_time == ()
    assert p.expert_cost_by_type == {"Q4_K": 2.3, "Q8_0": 1.8}
    split = replace(p, attention=tuple(replace(a, decode_s_per_compute_unit=2e-10) for a in p.attention))
    assert MachineProbe.from_dict(json.loads(json.dumps(split.to_dict()))) == split
    for a in older["attention"]:  # a probe stored before decode attention had two figures
        a.pop("decode_s_per_compute_unit", None)
    assert all(a.decode_s_per_compute_unit is None for a in MachineProbe.from_dict(older).attention)


def test_expert_cost_is_what_prices_the_measured_moe_prompt():
    """The estimate is linear in the MUL_MAT_ID cost: the cost that makes it the measured
    time, from the estimate at 1 and at 2; absurd results are clamped, a flat slope refused."""
    from rooflight.estimate.probe import expert_cost

    assert expert_cost(0.30, priced_at_1_s=0.20, priced_at_2_s=0.25) == pytest.approx(3.0)
    assert expert_cost(0.18, priced_at_1_s=0.20, priced_at_2_s=0.25) == pytest.approx(0.6)
    assert expert_cost(5.0, priced_at_1_s=0.20, priced_at_2_s=0.25) == 10.0
    assert expert_cost(0.01, priced_at_1_s=0.20, priced_at_2_s=0.25) == 0.5
    with pytest.raises(ValueError):
        expert_cost(0.3, 0.2, 0.2)


# ---- the roofline on a probe ---------------------------------------------------------------


HW = {"cpu": {"name": "Test CPU", "cores": 2, "threads": 2, "isa": ["avx2"], "ram_total_bytes": 16 * 10**9,
              "ram_available_bytes": 12 * 10**9, "ram_bandwidth_gbs": 20.0, "max_freq_mhz": 3000},
      "gpus": [], "backend": "cpu"}


def _probe(machine: str, build: str, n_threads: int = 2, **over) -> MachineProbe:
    kernels = (KernelFigure("Q8_0", 0.05e-9, 0.02e-9, 21.0, "memory"),
               KernelFigure("F16", 0.08e-9, 0.025e-9, 25.0, "memory"),
               KernelFigure("Q6_K", 0.06e-9, 0.03e-9, 14.0, "compute"))
    p = MachineProbe(machine=machine, build=build, n_threads=n_threads, n_ubatch=512, kernels=kernels,
                     attention=(AttentionCost(True, 0.3e-9, 0.03e-9), AttentionCost(False, 0.4e-9, 0.04e-9)),
                     fixed=FixedCosts(70e-6, 25e-6, 3e-9), spread=0.1, disturbed=False, created_at=1.0)
    return replace(p, **over)


def test_a_range_is_widened_by_the_spread_of_the_figures_it_stands_on():
    """Each figure's spread by its share of the estimate's time; the table's share at the
    probe's widest spread; a figure the estimate does not use widens nothing."""
    probe = _probe("m", "b", spread=0.4, kernels=(
        KernelFigure("Q8_0", 0.05e-9, 0.02e-9, 21.0, "memory", decode_spread=0.1, prefill_spread=0.3),
        KernelFigure("NVFP4", 0.05e-9, 0.02e-9, 9.0, "compute", decode_spread=0.4, prefill_spread=0.4)),
        attention=(AttentionCost(True, 0.3e-9, 0.03e-9, spread=0.2),), fixed=FixedCosts(70e-6, 25e-6, 3e-9, 0.05))
    decode = (("Q8_0", 0.7), ("attention", 0.2), ("fixed", 0.1))
    assert probe.spread_of(decode, prefill=False, flash_attn=True) == pytest.approx(0.7 * 0.1 + 0.2 * 0.2 + 0.1 * 0.05)
    assert probe.spread_of((("Q8_0", 1.0),), prefill=True, flash_attn=True) == pytest.approx(0.3)
    assert probe.spread_of((("Q8_0", 0.5), ("Q4_K (table)", 0.5)), prefill=False, flash_attn=True) == pytest.approx(0.25)
    assert probe.spread_of((), prefill=False, flash_attn=True) == 0.4
    narrow = ranges.probe_band(0.1, 0.3, False)
    wide = ranges.probe_band(0.4, 0.3, False)
    assert wide.decode[0] < narrow.decode[0] < narrow.decode[1] < wide.decode[1]
    assert wide.prefill == narrow.prefill
    assert "decode 10%, prompt 30%" in narrow.basis


@pytest.fixture(scope="module")
def q8_model(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("m") / "q8.gguf", n_layer=4, n_embd=512, n_head=8, n_head_kv=4,
                       n_ff=1024, n_vocab=2000, ftype="Q8_0", context_length=4096)


def test_estimate_stands_on_the_probe(q8_model):
    spec = load_model_spec(str(q8_model))
    hw = profile_from_dict(HW)
    probe = _probe(machine_key(hw), "b")
    w = Wishes(n_ctx=2048, n_threads=2, prompt_tokens=512, gen_tokens=128)
    table = plan(spec, hw, w).performance
    est = plan(spec, hw, w, calibration=Calibration(probe=probe))
    p = est.performance
    assert (table.basis, p.basis) == ("table", "probe")
    assert not p.calibrated
    assert "8 of 10" in p.range_basis and "spread" in p.range_basis
    lo, hi = p.decode_tok_s_range
    assert lo < p.decode_tok_s < hi
    # the decode time by hand: weights by type x the probe's seconds per weight, fixed costs,
    # attention over the cache at the mean position (positions 512 + 16..112)
    t = layer_table(spec)
    weights = sum(n * probe.kernel(k).decode_s_per_weight
                  for counts in (*t.active_by_type, t.output_by_type) for k, n in counts.items())
    fixed = 70e-6 + 25e-6 * spec.n_layer + 3e-9 * spec.n_vocab
    positions = [512 + (i + 0.5) * 128 / 4 for i in range(4)]
    attn = sum(cpu_attention_units(spec, est.config, int(x)) for x in positions) / 4 * 0.3e-9
    assert 1 / p.decode_tok_s == pytest.approx(weights + fixed + attn, rel=1e-9)
    # prefill: 512 tokens in one micro-batch
    assert p.prefill_tok_s > 0 and p.prefill_bound == "compute"
    # another thread count than the probe's: back to the table
    other = plan(spec, hw, replace(w, n_threads=1), calibration=Calibration(probe=probe)).performance
    assert other.basis == "table"


def test_bench_against_a_probe_corrects_only_the_same_kernels(q8_model):
    from rooflight.estimate.calibration import Ratio

    spec = load_model_spec(str(q8_model))
    hw = profile_from_dict(HW)
    probe = _probe(machine_key(hw), "b")
    w = Wishes(n_ctx=2048, n_threads=2)
    base = plan(spec, hw, w, calibration=Calibration(probe=probe)).performance
    q8 = Ratio("Q8_0", 2, 10**8, 0.8, 1.2, "probe")
    other = Ratio("Q4_K_M", 2, 10**8, 2.0, 2.0, "probe")
    table_era = Ratio("Q8_0", 2, 10**8, 3.0, 3.0, "table")  # measured against table constants
    cal = Calibration(decode_factor=1.0, prefill_factor=1.0, samples=3, ratios=(q8, other, table_era), probe=probe)
    p = plan(spec, hw, w, calibration=cal).performance
    assert p.basis == "calibrated" and p.calibrated
    assert p.decode_tok_s == pytest.approx(base.decode_tok_s * 0.8)
    assert p.prefill_tok_s == pytest.approx(base.prefill_tok_s * 1.2)
    # no probe-era measurement of this type: the probe stands uncorrected
    cal2 = Calibration(samples=2, ratios=(other, table_era), probe=probe)
    assert plan(spec, hw, w, calibration=cal2).performance.decode_tok_s == pytest.approx(base.decode_tok_s)


# ---- store: per machine and build ----------------------------------------------------------


def test_a_new_build_or_another_machine_invalidates_the_probe(tmp_path, monkeypatch):
    import rooflight.runtime.build as build

    db = tmp_path / "c.sqlite3"
    hw = profile_from_dict(HW)
    monkeypatch.setattr(build, "llama_build", lambda: "llama-cpp-python 0.3.36 [aaaa]")
    assert probe_status(hw, db).state == "none"
    store = ProbeStore(db)
    try:
        store.put(_probe(machine_key(hw), "llama-cpp-python 0.3.36 [aaaa]"))
    finally:
        store.close()
    status = probe_status(hw, db)
    assert status.state == "current" and status.probe is not None
    assert Calibration(probe=status.probe).probe_for(plan_cfg(hw)) is not None

    # llama.cpp rebuilt (other libraries, same version): the probe no longer applies
    monkeypatch.setattr(build, "llama_build", lambda: "llama-cpp-python 0.3.36 [bbbb]")
    status = probe_status(hw, db)
    assert status.state == "new_build" and status.probe is None
    assert "measure this machine again" in status.message

    # the same build on another machine (more RAM): not this machine's probe either
    monkeypatch.setattr(build, "llama_build", lambda: "llama-cpp-python 0.3.36 [aaaa]")
    bigger = profile_from_dict({**HW, "cpu": {**HW["cpu"], "ram_total_bytes": 64 * 10**9}})
    status = probe_status(bigger, db)
    assert status.state == "other_machine" and status.probe is None


def test_a_probe_of_other_cpu_kernels_than_loads_now_use_is_measured_again(tmp_path, monkeypatch):
    """Where the AMX guard changes how loads place weights (runtime/amx.py), a probe measured
    the other way priced kernels that no longer run: it asks to be measured again."""
    import dataclasses

    import rooflight.runtime.amx as amx
    import rooflight.runtime.build as build

    db = tmp_path / "c.sqlite3"
    hw = profile_from_dict(HW)
    monkeypatch.setattr(build, "llama_build", lambda: "llama-cpp-python 0.3.36 [aaaa]")
    store = ProbeStore(db)
    try:
        store.put(dataclasses.replace(_probe(machine_key(hw), "llama-cpp-python 0.3.36 [aaaa]"),
                                      extra_buffers=False))
    finally:
        store.close()
    monkeypatch.setattr(amx, "loads_use_extra_buffers", lambda: False)
    assert probe_status(hw, db).state == "current"
    monkeypatch.setattr(amx, "loads_use_extra_buffers", lambda: True)
    status = probe_status(hw, db)
    assert status.state == "outdated" and status.probe is None
    assert "measure it again" in status.message


def plan_cfg(hw):
    from rooflight.estimate.config import RunConfig

    return RunConfig(n_ctx=2048, n_gpu_layers=0, n_threads=2)


def test_the_build_key_changes_with_the_libraries(tmp_path, monkeypatch):
    import importlib.util

    from rooflight.runtime.build import llama_build

    first = llama_build()
    assert first.startswith("llama-cpp-python ")
    fake = tmp_path / "llama_cpp"
    (fake / "lib").mkdir(parents=True)
    (fake / "lib" / "libggml-cpu.so").write_bytes(b"x" * 10)
    real = importlib.util.find_spec

    class Spec:
        submodule_search_locations = [str(fake)]

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: Spec() if name == "llama_cpp" else real(name))
    a = llama_build()
    (fake / "lib" / "libggml-cpu.so").write_bytes(b"y" * 11)  # rebuilt
    assert llama_build() != a != first


# ---- a reduced probe on the real llama.cpp ---------------------------------------------------


@pytest.fixture(scope="module")
def llama_cpp():
    return pytest.importorskip("llama_cpp")


def test_reduced_probe_then_estimate_stands_on_it(llama_cpp, q8_model, tmp_path, monkeypatch, capsys):
    """One weight type, two repeats: a few seconds on a quiet machine. This machine is
    shared, so the probe is kept even if disturbed (--keep-disturbed), and says so."""
    from rooflight.cli import main
    from rooflight.runtime import probe as probe_module

    calls: list[tuple[str, bool]] = []  # (figure, a deferred part) in the order measured
    measure = probe_module._Runner.measure

    def recording(self, name, fn, repeats=None, prior=None, **kw):
        calls.append((name, prior is not None))
        return measure(self, name, fn, repeats=repeats, prior=prior, **kw)

    monkeypatch.setattr(probe_module._Runner, "measure", recording)
    # the budget: 30 s is the probe's own; a shared test machine gets more before it gives up
    rc = main(["probe", "--types", "Q8_0", "--keep-disturbed", "--budget", "60", "--json"])
    doc = json.loads(capsys.readouterr().out)
    if rc != 0:
        # only when the budget ran out before the one weight type (a probe without one is
        # never stored): exit 1 and the reason, then nothing to check the roofline with
        assert rc == 1 and doc["stored"] is False
        assert "no weight type" in doc["refused"] or "budget ran out" in doc["refused"]
        pytest.skip(f"this machine was too busy to measure one weight type in 60 s: {doc['refused']}")
    assert doc["stored"] is True
    cpu = doc["devices"][0]
    assert cpu["device"] == "cpu" and set(cpu["weight_types"]) == {"Q8_0"}
    q8 = cpu["weight_types"]["Q8_0"]
    assert q8["decode_ns_per_weight"] > 0 and q8["prefill_ns_per_weight"] > 0 and q8["bound"] in ("memory", "compute")
    assert {a["flash_attn"] for a in cpu["attention"]} == {True, False}
    # flash attention on has two decode figures (the GQA model beside the MHA one), off one
    on = next(a for a in cpu["attention"] if a["flash_attn"])
    assert on["decode_ns_per_compute_unit"] is not None and on["decode_ns_per_compute_unit"] >= 0
    assert next(a for a in cpu["attention"] if not a["flash_attn"])["decode_ns_per_compute_unit"] is None
    assert "attention-gqa/fa-on/decode-long" in doc["runs"]
    assert cpu["fixed"]["token_us"] >= 0 and doc["duration_s"] <= 60 + 10
    # Q8_0 is an expert type: its MoE prompt was measured and priced, or it says why not
    assert ("Q8_0" in cpu["expert_costs"] and 0.5 <= cpu["expert_costs"]["Q8_0"] <= 10) or (
        "Q8_0 experts" in cpu["not_measured"])
    assert "experts/Q8_0/prefill-512" in doc["runs"] or "Q8_0 experts" in cpu["not_measured"]
    # the image part ran too: its figure, or a note that says why there is none
    enc = cpu["image_encode"]
    assert (enc is not None and enc["gflops"] > 0 and "image/encode" in doc["runs"]) or any(
        n.startswith("Image encode") for n in doc["notes"])
    # every run is recorded with how busy the rest of the machine was, and each figure with
    # whether its clean runs drifted apart (stored with that spread) or could not be stored
    assert all("others_cpu_share" in r for r in doc["runs"].values())
    assert all(r["drifted"] == (not r["disturbed"] and r["spread"] > MAX_CLEAN_SPREAD)
               for r in doc["runs"].values() if abs(r["spread"] - MAX_CLEAN_SPREAD) > 1e-3)  # (spread is rounded)
    # each fixed cost and flash-on attention figure has runs in its own slot and more a slot
    # later: the fixed costs' after attention's first runs, attention's after the fixed ones'
    order = [c[0] for c in calls]
    early = ("fixed/", "attention/fa-on/", "attention-gqa/fa-on/")
    for figure in [n for n, deferred in calls if not deferred and n.startswith(early)]:
        assert (figure, True) in calls, f"{figure} has no deferred runs"
    last_attention_slot = max(i for i, (n, d) in enumerate(calls) if n.startswith("attention/fa-on/") and not d)
    assert all(i > last_attention_slot for i, (n, d) in enumerate(calls) if d and n.startswith(early))
    assert order.index("fixed/1-layer") < order.index("attention/fa-on/decode-short")
    # flash attention off, which plans use only when told to, comes after every kernel
    last_kernel = max(i for i, n in enumerate(order) if n.startswith(("kernel/", "experts/")))
    assert all(i > last_kernel for i, n in enumerate(order) if n.startswith("attention/fa-off/"))
    if doc["disturbed"]:
        assert any("busy" in n or "disturbed" in n for n in doc["notes"])

    assert main(["estimate", str(q8_model), "--ctx", "2048", "--json"]) == 0
    perf = json.loads(capsys.readouterr().out)["performance"]
    assert perf["basis"] == "probe"
    assert "8 of 10" in perf["range_basis"]
    if doc["disturbed"]:
        assert "busy machine" in perf["range_basis"]
    lo, hi = perf["decode_tok_s_range"]
    assert lo < perf["decode_tok_s"] < hi


def test_a_refusal_says_whether_other_programs_or_the_machine_s_own_drift_spoiled_it():
    """Closing programs cannot help a machine whose speed drifts with nothing else running
    (a shared VM): the reason names the cause the runs show, with the spread, in one sentence."""
    from rooflight.estimate.probe import MAX_STORED_SPREAD
    from rooflight.runtime.probe import _drift_note, _others_note, _refusal

    steady = Repeats((0.10, 0.10, 0.11), (True, True, True))
    drifting = Repeats((0.10, 0.14, 0.07), (True, True, True))  # 70%: the machine's own, stored
    adrift = Repeats((0.10, 0.17, 0.05), (True, True, True))  # 120%: past MAX_STORED_SPREAD
    busy = Repeats((0.10, 0.30, 0.20), (True, False, False))
    assert _refusal([("the fixed costs", [steady]), ("attention", [steady])], 0.1) is None
    assert _refusal([("the fixed costs", [steady, drifting]), ("attention", [steady])], 0.1) is None
    note = _drift_note([steady, drifting, steady])
    assert "1 of the 3 figures' runs disagreed by up to 70%" in note and "widens every range" in note
    assert _drift_note([steady, steady]) is None
    # other programs' use during the runs, as the busy watch measured it (not the load
    # average, which still counts this app's own chat of a minute ago)
    quiet = {"a": {"others_cpu_share": [0.0, 0.01, 0.02]}, "b": {"others_cpu_share": [0.3]}}
    assert _others_note(quiet, 0.1) is None
    loud = {"a": {"others_cpu_share": [0.06, 0.08, 0.2]}}
    assert _others_note(loud, 0.1) == ("Other programs used 8% of the CPU during a typical run of the probe "
                                       "(a clean run allows 10%).")
    why = _refusal([("the fixed costs", [steady, adrift]), ("attention", [steady])], 0.1)
    assert why.startswith("Not stored: the fixed costs could not be measured cleanly")
    assert f"disagreed by up to 120% (more than the {MAX_STORED_SPREAD:.0%} a stored figure may)" in why
    assert "nothing else running" in why and "Close other" not in why
    why = _refusal([("the fixed costs", [adrift]), ("attention", [busy])], 0.1)
    assert "the fixed costs and attention" in why
    assert "other programs used more than 10% of the CPU" in why and why.endswith("Close other programs and measure again.")
    assert why.count(". ") == 1  # one sentence of reason, one of advice


def test_one_clean_run_cut_short_by_the_budget_is_not_blamed_on_other_programs():
    """A figure with a single run, clean, was cut short by the budget (the MoE prompts on a
    slow 2-core VM, 2026-12-04); one with a busy run beside it was disturbed."""
    from rooflight.runtime.probe import _disturbance

    why, advice = _disturbance([Repeats((0.39,), (True,))], 0.1)
    assert "time budget ran out" in why and "other programs" not in why
    assert "other programs used more than 10%" in _disturbance([Repeats((0.39, 0.9), (True, False))], 0.1)[0]


def test_the_probe_s_models_run_on_the_cpu_even_in_a_gpu_build(llama_cpp, q8_model):
    """op_offload off: a GPU build would otherwise run their prompts' matmuls on the GPU."""
    from rooflight.runtime.probe import _Model

    m = _Model(q8_model, 2, 512, True, 512)
    try:
        assert m.llm.context_params.op_offload is False
        assert m.llm.model_params.n_gpu_layers == 0
    finally:
        m.close()



def test_a_decode_run_rolls_the_cache_back_to_its_prefix_instead_of_evaluating_it_again(llama_cpp, q8_model):
    """Each run decodes after the same 4 cached positions; where the cache already begins
    with them (the warm-up, a run before), they are not evaluated again (a pass over the
    weights per run), and where it does not (another prompt filled it), they are."""
    from rooflight.runtime.probe import _decode_run, _Model, _tokens_for

    m = _Model(q8_model, 2, 512, True, 512)
    try:
        run = _decode_run(m, 3)
        _tokens_for(m)
        batches: list[int] = []
        real_eval = m.llm.eval
        m.llm.eval = lambda tokens: (batches.append(len(tokens)), real_eval(tokens))[1]
        for _ in range(2):
            assert run() > 0
            assert m.llm.n_tokens == 4 + 3
        assert batches == [1] * 6  # the decoded tokens only: no 4-token prefix
        m.llm.reset()
        real_eval(m.tokens(6, 100))  # a cache that begins with other tokens
        batches.clear()
        run()
        assert batches == [4, 1, 1, 1]
        assert list(m.llm.input_ids[:4]) == m.tokens(4)
    finally:
        m.close()

def test_probe_refuses_what_it_could_not_measure_cleanly(llama_cpp, tmp_path):
    """A threshold no run can meet (others must use less than no CPU at all) stands in for a
    busy machine: every run is disturbed, repeated while the budget lasts, and nothing is
    stored; the reason is one sentence."""
    from rooflight.hardware import detect
    from rooflight.runtime.probe import probe_machine

    db = tmp_path / "p.sqlite3"
    store = ProbeStore(db)
    try:
        run = probe_machine(detect(), weight_types=("Q4_0",), busy_threshold=-1.0, budget_s=8.0, repeats=2,
                            store=store)
        assert not run.stored
        assert run.refused.startswith("Not stored:") and "Close other programs" in run.refused
        assert store._db.execute("SELECT COUNT(*) FROM probes").fetchone()[0] == 0
        # the disturbed runs were repeated while each figure's share of the budget lasted,
        # each recorded as not clean
        assert run.runs and all(not any(r["clean"]) for r in run.runs.values())
        # (on a machine so busy that one run outlasts a figure's share, the budget ends first)
        assert any(len(r["seconds"]) >= 2 for r in run.runs.values()) or "budget ran out" in run.refused
    finally:
        store.close()


def test_probe_with_a_data_folder_it_cannot_write_stops_before_measuring(tmp_path):
    """The folder is checked first: 30 s of measuring are not thrown away at the end."""
    taken = tmp_path / "taken"
    taken.write_text("")
    env = dict(os.environ, ROOFLIGHT_DATA_DIR=str(taken))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "rooflight", "probe", "--types", "Q4_0"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 2
    assert "is a file, not a folder" in r.stderr and "Traceback" not in r.stderr
    assert "%" not in r.stderr  # no progress line: nothing was measured
    assert time.perf_counter() - t0 < 20


def test_a_figure_s_runs_a_slot_later_outvote_a_slow_spell_in_its_own_slot():
    """A slow spell the busy watch cannot see (memory shared with other VMs) slows a figure's
    back-to-back runs alike; its deferred runs a slot later disagree, and the runner measures
    on until the runs that agree are the undisturbed ones."""
    from rooflight.runtime.probe import _Clock, _Runner

    runs: dict[str, dict] = {}
    runner = _Runner(_Clock(60.0, 4, None, None), 1.0, runs, 3, figures=4)  # threshold 1: every run clean
    in_spell = runner.measure("kernel/X/decode", lambda: 0.2, repeats=2)
    assert in_spell.value == 0.2 and not in_spell.disturbed  # two agreeing runs: nothing to see yet
    later = runner.measure("kernel/X/decode", lambda: 0.1, prior=in_spell)
    assert later.value == pytest.approx(0.1) and not later.disturbed
    assert runs["kernel/X/decode"]["seconds"][:2] == [0.2, 0.2] and len(runs["kernel/X/decode"]["seconds"]) == 5
    # a steady machine: the deferred part is one run
    steady = runner.measure("kernel/Y/decode", lambda: 0.1, repeats=2)
    assert len(runner.measure("kernel/Y/decode", lambda: 0.1, prior=steady).seconds) == 3


def test_a_run_that_would_end_past_the_budget_is_not_begun(monkeypatch):
    """The budget is the whole probe's: with less time left than a run takes, the runner
    stops a figure on the runs it has, and a figure without any is out of time."""
    import rooflight.runtime.probe as probe_module

    now = [0.0]  # a clock that only the runs move: 0.1 s each
    monkeypatch.setattr(probe_module.time, "perf_counter", lambda: now[0])

    def run() -> float:
        now[0] += 0.1
        return 0.1
    runner = probe_module._Runner(probe_module._Clock(0.25, 2, None, None), 1.0, {}, 3, figures=1)
    first = runner.measure("fixed/1-layer", run, repeats=3)
    # two runs end at 0.2 s; a third would end at 0.3, past the 0.25 s budget
    assert first.seconds == (0.1, 0.1) and now[0] == pytest.approx(0.2)
    with pytest.raises(probe_module._OutOfTime):
        runner.measure("fixed/8-layer", run)
    assert now[0] == pytest.approx(0.2)


def test_a_figure_nothing_continues_is_not_cut_to_one_run_by_its_share(monkeypatch):
    """Shares are counted for every figure the probe may reach; on a slow machine most are
    never reached, and a figure's share can be a fraction of one run. A figure whose last
    runs come a slot later may stop at one run there; one that nothing continues (the MoE
    prompts, the image) takes its second run while the budget lasts: one run is no figure."""
    import rooflight.runtime.probe as probe_module

    now = [0.0]
    monkeypatch.setattr(probe_module.time, "perf_counter", lambda: now[0])

    def run() -> float:
        now[0] += 0.5
        return 0.5
    # 3 s left over 40 figures still to come: a share of 0.075 s, a sixth of one run
    runner = probe_module._Runner(probe_module._Clock(3.0, 2, None, None), 1.0, {}, 3, figures=40)
    assert len(runner.measure("kernel/X/prefill-512", run, repeats=2, continued=True).seconds) == 1
    experts = runner.measure("experts/Q4_K/prefill-512", run)
    assert experts.seconds == (0.5, 0.5) and not experts.disturbed  # two runs that agree: stored
    # the budget still bounds it: 0.5 s left is no room for a first run
    now[0] = 2.5
    with pytest.raises(probe_module._OutOfTime):
        runner.measure("experts/Q8_0/prefill-512", run)


def test_a_first_run_a_like_figure_says_is_too_long_is_not_begun(monkeypatch):
    """A figure's first run has no time of its own yet: the flash-off attention prompt takes
    about what the flash-on one took (expect_s), and is not begun where that would end past
    the budget, however short the run before it was."""
    import rooflight.runtime.probe as probe_module

    now = [0.0]
    monkeypatch.setattr(probe_module.time, "perf_counter", lambda: now[0])
    began: list[float] = []

    def run() -> float:
        began.append(now[0])
        now[0] += 0.01
        return 0.01
    runner = probe_module._Runner(probe_module._Clock(1.0, 2, None, None), 1.0, {}, 2, figures=2)
    runner.measure("attention/fa-off/decode-short", run)
    assert len(began) == 2  # a short figure: its runs fit
    with pytest.raises(probe_module._OutOfTime):
        runner.measure("attention/fa-off/prompt-1024", run, expect_s=2.0)
    assert len(began) == 2
    # with the budget to spare it runs
    assert runner.measure("attention/fa-off/decode-long", run, expect_s=0.5).seconds == (0.01, 0.01)


def test_busy_watch_counts_what_others_used(monkeypatch):
    """The share is the machine's busy CPU time minus this process's, over all cores' time."""
    import rooflight.runtime.busy as busy

    clock = iter([100.0, 101.0])  # a one-second window
    machine = iter([50.0, 51.6])  # 1.6 CPU-seconds busy in all
    own = iter([10.0, 11.0])  # of which this process used 1.0
    monkeypatch.setattr(busy.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(busy, "_busy_seconds", lambda cpus=None: next(machine))
    monkeypatch.setattr(busy, "_own_seconds", lambda proc: next(own))
    monkeypatch.setattr(busy.psutil, "cpu_count", lambda: 2)
    with busy.Watch() as w:
        pass
    # 0.6 of 2 core-seconds, less the counters' rounding: a tick on each core and on this process
    assert w.window.others_share == pytest.approx((0.6 - 3 * busy._TICK_S) / 2)
    assert not w.window.clean(0.1) and w.window.clean(0.35)


def test_busy_watch_does_not_take_the_counters_rounding_for_another_program(monkeypatch):
    """A 50 ms window on 2 cores whose busy counter ticked twice more than this process's
    (the rounding of 100 Hz counters, nothing else running) once read 20% others."""
    import rooflight.runtime.busy as busy

    clock = iter([100.0, 100.05])
    machine = iter([50.0, 50.12])
    own = iter([10.0, 10.10])
    monkeypatch.setattr(busy.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(busy, "_busy_seconds", lambda cpus=None: next(machine))
    monkeypatch.setattr(busy, "_own_seconds", lambda proc: next(own))
    monkeypatch.setattr(busy.psutil, "cpu_count", lambda: 2)
    monkeypatch.setattr(busy, "_TICK_S", 0.01)
    with busy.Watch() as w:
        pass
    assert w.window.others_share == 0.0


def test_types_the_probe_did_not_measure_use_the_table(q8_model):
    """A probe without Q8_0 still prices the fixed costs and attention; the Q8_0 weights take
    the table's matrix-vector roof (perf.cpu_table_matvec_s)."""
    from rooflight.estimate.perf import cpu_table_matvec_s

    spec = load_model_spec(str(q8_model))
    hw = profile_from_dict(HW)
    probe = _probe(machine_key(hw), "b")
    no_q8 = replace(probe, kernels=tuple(k for k in probe.kernels if k.weight_type != "Q8_0"))
    w = Wishes(n_ctx=2048, n_threads=2, prompt_tokens=512, gen_tokens=128)
    est = plan(spec, hw, w, calibration=Calibration(probe=no_q8))
    t = layer_table(spec)
    by_type: dict[str, float] = {}
    for counts in (*t.active_by_type, t.output_by_type):
        for k, n in counts.items():
            by_type[k] = by_type.get(k, 0.0) + n
    weights = sum(cpu_table_matvec_s(hw, est.config, k, n) if k == "Q8_0" else n * probe.kernel(k).decode_s_per_weight
                  for k, n in by_type.items())
    fixed = 70e-6 + 25e-6 * spec.n_layer + 3e-9 * spec.n_vocab
    positions = [512 + (i + 0.5) * 128 / 4 for i in range(4)]
    attn = sum(cpu_attention_units(spec, est.config, int(x)) for x in positions) / 4 * 0.3e-9
    assert est.performance.basis == "probe"
    assert 1 / est.performance.decode_tok_s == pytest.approx(weights + fixed + attn, rel=1e-6)
    # its range: the table-priced Q8_0 share of the time is as uncertain as the table says
    # (the 1B Q4_0 shape's prompt on a probe without Q4_0 ran x0.51 of the estimate, outside
    # the probe's own band), the rest as the probe's band says
    from rooflight.estimate import ranges

    perf = est.performance
    share = dict(perf.kernels.decode)["Q8_0 (table)"]
    assert 0 < share < 1 and "by their shares of the predicted time" in perf.range_basis
    full = plan(spec, hw, w, calibration=Calibration(probe=probe)).performance
    table = plan(spec, hw, w).performance
    width = [hi / lo for lo, hi in (p.decode_tok_s_range for p in (full, perf, table))]
    assert width[0] < width[1] < width[2]  # the probe's band, the mix, the table's band
    assert ranges.table_share(full.kernels.decode) == 0


def test_the_table_s_level_moves_to_the_measured_types_only_past_its_band():
    """probe_roofline.table_level: the median measured / table time of the measured types,
    but only where it lies outside the table's out-of-sample band (measured / predicted
    speed); inside it the table's own price stands."""
    from rooflight.estimate.probe_roofline import level_table, table_level

    band = (0.6, 2.0)  # speed: the table's time is right within x0.5-1.67
    table = lambda kind, n: n * 1e-10  # noqa: E731

    def kernels(*times):
        return [KernelFigure(f"T{i}", t * 1e-10, t * 1e-10, 1.0) for i, t in enumerate(times)]

    assert table_level(kernels(1.2, 1.5, 0.9), table, band, prompt=False) == 1.0
    assert table_level(kernels(2.5, 3.0, 4.0), table, band, prompt=False) == pytest.approx(3.0)
    assert table_level(kernels(0.3, 0.4, 0.45), table, band, prompt=True) == pytest.approx(0.4)
    assert table_level([], table, band, prompt=False) == 1.0
    assert level_table(table, 1.0) is table
    assert level_table(table, 3.0)("Q4_0", 2.0) == pytest.approx(6e-10)


def test_a_machine_the_table_prices_3x_fast_prices_unmeasured_types_at_its_level(q8_model):
    """A probe whose measured types all run 3x slower than the table (a core generation the
    table was not fitted on) prices the Q8_0 it did not measure at 3x the table too, decode
    and prompt; the kernel shares still name it as table-priced."""
    from rooflight.estimate.perf import cpu_table_matmul_s, cpu_table_matvec_s

    spec = load_model_spec(str(q8_model))
    hw = profile_from_dict(HW)
    w = Wishes(n_ctx=2048, n_threads=2, prompt_tokens=512, gen_tokens=128)
    cfg = plan(spec, hw, w).config
    slow = tuple(KernelFigure(k, 3 * cpu_table_matvec_s(hw, cfg, k, 1.0), 3 * cpu_table_matmul_s(hw, cfg, k, 1.0),
                              1.0, "compute") for k in ("F16", "Q6_K", "Q4_K"))
    probe = replace(_probe(machine_key(hw), "b"), kernels=slow)
    near = replace(probe, kernels=tuple(replace(k, decode_s_per_weight=k.decode_s_per_weight / 2.5,
                                                prefill_s_per_weight=k.prefill_s_per_weight / 2.5) for k in slow))
    far_est, near_est = (plan(spec, hw, w, calibration=Calibration(probe=p)).performance for p in (probe, near))
    n_q8 = sum(c.get("Q8_0", 0.0) for c in (*layer_table(spec).active_by_type, layer_table(spec).output_by_type))
    decode_s = {e: dict(e.kernels.decode)["Q8_0 (table)"] / e.decode_tok_s for e in (far_est, near_est)}
    # x3 the table past its band; x1.2 (inside it) leaves the table's price
    assert decode_s[far_est] == pytest.approx(3 * cpu_table_matvec_s(hw, cfg, "Q8_0", n_q8), rel=0.02)
    assert decode_s[near_est] == pytest.approx(cpu_table_matvec_s(hw, cfg, "Q8_0", n_q8), rel=0.02)
    assert far_est.prefill_tok_s < near_est.prefill_tok_s / 2


def test_a_probe_prices_q5_0_prompts_by_its_q8_0_figure_on_x86():
    """llamafile_sgemm runs Q5_0 and Q8_0 through the same tinyBLAS_Q0_AVX kernel on x86, the
    fifth bit's unpacking costing x1.19-1.42 on three machines (the mean: x1.26); on ARM the
    table prices Q5_0."""
    from rooflight.estimate import probe_roofline
    from rooflight.estimate.probe import FixedCosts, KernelFigure, MachineProbe

    q8 = KernelFigure("Q8_0", decode_s_per_weight=3e-11, prefill_s_per_weight=1e-11, decode_gbs=30.0)
    p = MachineProbe(machine="m", build="b", n_threads=2, n_ubatch=512, kernels=(q8,), attention=(),
                     fixed=FixedCosts(0.0, 0.0, 0.0), spread=0.0, disturbed=False)
    table = lambda kind, n: 99.0  # noqa: E731 - what the table would say
    x86 = probe_roofline.prefill_weights_s(p, {"Q5_0": 1e6}, 512, table, ("avx", "avx2"))
    assert x86 == pytest.approx(1e6 * 512 * 1e-11 * 1.26)
    assert probe_roofline.prefill_weights_s(p, {"Q5_0": 1e6}, 512, table, ("neon", "dotprod")) == 99.0
    # a Q5_0 figure of its own, where the probe has one, is used as it is
    q5 = KernelFigure("Q5_0", decode_s_per_weight=3e-11, prefill_s_per_weight=2e-11, decode_gbs=20.0)
    own = probe_roofline.prefill_weights_s(replace(p, kernels=(q8, q5)), {"Q5_0": 1e6}, 512, table, ("avx",))
    assert own == pytest.approx(1e6 * 512 * 2e-11)


def test_without_extra_buffers_q4_0_prompts_take_the_q8_0_figure_not_the_repacked_table():
    """Where runtime/amx.py turned llama.cpp's extra buffers off, Q4_0 is not repacked and its
    prompts run the tinyBLAS template Q8_0's do; with them on, the table's (repacked) price
    stands for a probe without a Q4_0 figure. The probe says which (and round-trips it)."""
    from rooflight.estimate import probe_roofline
    from rooflight.estimate.probe import FixedCosts, KernelFigure, MachineProbe

    q8 = KernelFigure("Q8_0", decode_s_per_weight=3e-11, prefill_s_per_weight=1e-11, decode_gbs=30.0)
    p = MachineProbe(machine="m", build="b", n_threads=2, n_ubatch=512, kernels=(q8,), attention=(),
                     fixed=FixedCosts(0.0, 0.0, 0.0), spread=0.0, disturbed=False)
    table = lambda kind, n: 99.0  # noqa: E731 - what the table would say
    assert p.extra_buffers  # a probe stored before the field
    assert probe_roofline.prefill_weights_s(p, {"Q4_0": 1e6}, 512, table, ("avx", "avx2")) == 99.0
    plain = replace(p, extra_buffers=False)
    assert probe_roofline.prefill_weights_s(plain, {"Q4_0": 1e6, "IQ4_NL": 1e6}, 512, table, ("avx",)) \
        == pytest.approx(2 * 1e6 * 512 * 1e-11)
    assert MachineProbe.from_dict(plain.to_dict()).extra_buffers is False
    assert MachineProbe.from_dict({k: v for k, v in p.to_dict().items() if k != "extra_buffers"}).extra_buffers


def test_a_band_of_two_parts_adds_their_time_ratios_by_share():
    """ranges.combined: s = 0 is the probe's band, s = 1 the table's; between, each end is
    the share-weighted sum of the parts' time ratios at that end."""
    from rooflight.estimate import ranges

    probe = ranges.Band((0.9, 1.1), (0.8, 1.2), "probe")
    table = ranges.Band((0.5, 2.0), (0.4, 2.5), "table")
    assert ranges.combined(probe, table, 0.0, 0.0) is probe
    whole = ranges.combined(probe, table, 1.0, 1.0)
    assert whole.decode == pytest.approx(table.decode) and whole.prefill == pytest.approx(table.prefill)
    half = ranges.combined(probe, table, 0.5, 0.25)
    assert half.decode[0] == pytest.approx(1 / (0.5 / 0.9 + 0.5 / 0.5))
    assert half.prefill[1] == pytest.approx(1 / (0.75 / 1.2 + 0.25 / 2.5))
    assert ranges.table_share((("Q4_K", 0.6), ("Q4_0 (table)", 0.3), ("CUDA (table)", 0.1))) == pytest.approx(0.4)


def test_flash_off_attention_cut_short_is_left_to_the_table_not_a_refusal(monkeypatch, tmp_path):
    """Flash-off attention comes last: when the budget cuts its runs short (one run of a
    part), the probe is stored without it and says so, rather than refused as disturbed."""
    import rooflight.runtime.probe as probe_module
    from rooflight.hardware import detect
    from rooflight.store.probes import ProbeStore

    measure_attention = probe_module._measure_attention

    def cut_short(runner, clock, path, fa, *args, **kw):
        entry, parts, m = measure_attention(runner, clock, path, fa, *args, **kw)
        if not fa:  # as if the budget ran out after one run of its prompt
            entry[5] = probe_module.Repeats(entry[5].seconds[:1], entry[5].clean[:1])
        return entry, parts, m

    monkeypatch.setattr(probe_module, "_measure_attention", cut_short)
    store = ProbeStore(tmp_path / "probes.sqlite")
    try:
        run = probe_module.probe_machine(detect(), weight_types=("Q8_0",), budget_s=60.0, repeats=2,
                                         store=store, image=False)
    finally:
        store.close()
    if run.refused and "budget ran out before" in run.refused:
        pytest.skip(f"this machine was too busy: {run.refused}")
    assert run.stored, run.refused
    assert run.skipped["attention (flash attention off)"].startswith("not measured: the time budget ran out")
    assert [a.flash_attn for a in run.probe.attention] == [True]
    # stored as a part more time would measure (the app offers it: ui/probe_panel.py)
    assert run.probe.out_of_time == ("attention (flash attention off)",)


def test_a_slow_machine_s_later_prompt_models_have_two_layers():
    """The first type's prompt model has 3 layers; where its runs took over PREFILL_SLOW_S
    (a Zen-1-era VM: ~1 s each) the later types' have 2, at the same cost per weight
    (bench/probe_prompt_layers.py: x0.98-1.07), so more types fit in the 30 s."""
    from rooflight.runtime.probe import PREFILL_LAYERS, PREFILL_LAYERS_SLOW, prefill_layers

    assert prefill_layers(None) == PREFILL_LAYERS == 3
    assert prefill_layers((0.11, 0.1, 0.12)) == 3  # the Zen 4/5 VMs
    assert prefill_layers((1.02, 1.03)) == PREFILL_LAYERS_SLOW == 2
    assert prefill_layers((1.0, 0.3)) == 3  # one fast run: the machine can be fast


def test_the_next_weight_type_is_begun_by_the_median_type_and_the_image_goes_first_when_tight():
    from rooflight.runtime.probe import next_step

    assert next_step(0.5, 2.0, []) == "type"  # the first type, whatever is left
    # one stalled type (10 s) does not end the types while a typical one (2 s) still fits
    assert next_step(20.0, 2.0, [2.0, 10.0, 2.2]) == "type"
    # the slowest type's time would reach into the image's reserve: the image first, then
    # the caller asks again without the reserve
    assert next_step(10.0, 2.0, [2.0, 10.0, 2.2]) == "image first"
    assert next_step(4.0, 2.0, [2.0, 10.0, 2.2]) == "image first"
    assert next_step(3.0, 0.0, [2.0, 10.0, 2.2]) == "type"
    assert next_step(1.5, 0.0, [2.0, 10.0, 2.2]) == "skip"
    # two types, one stalled: the typical one decides
    assert next_step(8.3, 0.0, [2.0, 11.5]) == "type"
    assert next_step(1.9, 0.0, [2.0, 11.5]) == "skip"


def test_the_weight_types_of_the_models_on_disk_are_measured_first(tmp_path):
    """A Gemma QAT Q4_0 or an IQ4_XS file on this disk is priced by its own kernel even when
    a slow spell ends the budget before the catalog's order would reach its type."""
    from rooflight.catalog.local import find_installed
    from rooflight.runtime.probe_defaults import (
        ALL_TYPES,
        installed_order,
        main_type,
        measurement_order,
    )

    assert [main_type(q) for q in ("Q4_K_M", "UD-Q5_K_XL", "MXFP4_MOE", "iq4_xs", "IQ3_XXS", "Q3_K_M", None)] == \
        ["Q4_K", "Q5_K", "MXFP4", "IQ4_XS", None, None, None]
    order = measurement_order({"Q4_0": 3 << 30, "IQ4_XS": 1 << 30, "F16": 9 << 30})
    assert order[:3] == ("F16", "Q4_0", "IQ4_XS") and sorted(order) == sorted(ALL_TYPES)
    assert measurement_order({}) == ALL_TYPES
    # real files in a models folder, found as `rooflight models` finds them
    for name, ftype in (("tiny-Q4_0.gguf", "Q4_0"), ("small-Q8_0.gguf", "Q8_0")):
        write_model(tmp_path / name, ftype=ftype, n_layer=1, n_embd=64, n_head=2, n_head_kv=2, head_dim=32, n_ff=64)
    files = find_installed(hf_caches=[], lmstudio_dirs=[], ollama_dirs=[], folders=[tmp_path])
    sizes = {f.quant: f.size for f in files}
    first = installed_order(files)[1:3]
    assert set(first) == {"Q4_0", "Q8_0"} and first[0] == max(sizes, key=sizes.get)


def test_the_parts_more_time_would_measure_are_the_cpu_half_s():
    """MachineProbe.out_of_time: what the CPU half's budget left out, whether not begun or
    cut to one run; not a GPU, whose half has a budget of its own."""
    from rooflight.hardware import profile_from_dict
    from rooflight.runtime.probe import OUT_OF_TIME, _out_of_time

    gpu = profile_from_dict({"gpus": [{"name": "NVIDIA GeForce RTX 4090"}], "backend": "cuda"},
                            detect_cpu_if_missing=True, measure_bandwidth=False)
    skipped = {"NVFP4": OUT_OF_TIME, "gpu0": OUT_OF_TIME,
               "IQ4_XS": "measured, not stored: the time budget ran out after one run (a figure stands on two that agree)",
               "Q5_0": "measured, not stored: other programs used more than 10% of the CPU during the runs",
               "BF16": "not measured: its model could not be written or loaded"}
    assert _out_of_time(skipped, None, gpu) == ("NVFP4", "IQ4_XS")
