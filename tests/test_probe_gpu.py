"""The GPU half of the probe: solving the estimator for a GPU's constants, the estimate that
stands on them (and only on that GPU), their store, and the measuring code run with the real
llama.cpp of this machine (a CPU build: it runs the "GPU" models on the CPU, so the figures
are the plumbing's check, not a GPU's)."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from rooflight.estimate import Calibration, Wishes, plan
from rooflight.estimate.backend_constants import BACKENDS
from rooflight.estimate.config import RunConfig
from rooflight.estimate.perf import GPU_PROBE_RANGE_NOTE, _device_constants
from rooflight.estimate.probe import AttentionCost, FixedCosts, KernelFigure, MachineProbe
from rooflight.estimate.probe_gpu import (
    EFFICIENCY_LIMITS,
    H2D_GBS_LIMITS,
    LAYER_S_LIMITS,
    MOE_TOKENS_LIMITS,
    GpuFigures,
    Timed,
    derive,
    priced_s,
    with_constants,
    with_gpu_figures,
)
from rooflight.gguf.from_hparams import spec_from_hparams
from rooflight.hardware import profile_from_dict

H200 = {"gpus": [{"name": "NVIDIA H200"}], "backend": "cuda"}
_TINY = dict(n_embd=64, n_head=2, n_head_kv=2, head_dim=32, n_ff=64, n_vocab=260, context_length=4096)
_TINY_MOE = dict(n_expert=8, n_expert_used=2)
# runtime/probe_gpu.py GPU_MOE_SHAPE's block (Qwen3-30B-A3B's proportions)
_MOE_BLOCK = dict(n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_ff=768, n_expert=128, n_expert_used=8,
                  n_vocab=260, context_length=4096)
_WIDE = dict(n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=14336, n_vocab=260, context_length=4096)


def _hw(d=H200):
    return profile_from_dict(d, detect_cpu_if_missing=True, measure_bandwidth=False)


def _cfg(spec) -> RunConfig:
    return RunConfig(n_ctx=2048, n_gpu_layers=spec.n_layer + 1, n_threads=2, flash_attn=True)


def _timed(hw, spec, *, decode: bool) -> Timed:
    run = Timed(spec, _cfg(spec), 0.0, 4 if decode else 512, 16 if decode else 0)
    return replace(run, seconds=priced_s(hw, run))


def test_the_solves_recover_the_constants_the_runs_were_priced_with():
    """Runs priced by the estimator with known constants come back as those constants: the
    probe's figures mean what the table's do."""
    hw = _hw()
    true = replace(BACKENDS["cuda"], decode_efficiency=0.71, layer_overhead_s=23e-6,
                   prefill_efficiency_float=0.33, prefill_efficiency_quant=0.41, moe_layer_overhead_s=41e-6,
                   moe_expert_overhead_tokens=57.0)
    priced = with_constants(hw, "gpu0", true)
    tiny1, tiny32 = (spec_from_hparams(name=f"t{n}", ftype="F16", n_layer=n, **_TINY) for n in (1, 32))
    moe1, moe32 = (spec_from_hparams(name=f"m{n}", ftype="F16", n_layer=n, **_TINY, **_TINY_MOE) for n in (1, 32))
    q4k = spec_from_hparams(name="q", ftype="Q4_K_M", n_layer=8, **_WIDE)
    f16 = spec_from_hparams(name="f", ftype="F16", n_layer=2, **_WIDE)
    moe_block = spec_from_hparams(name="e", arch="qwen3moe", ftype="Q4_K_M", n_layer=2, **_MOE_BLOCK)
    fig, notes = derive(hw, "gpu0", short=_timed(priced, tiny1, decode=True), deep=_timed(priced, tiny32, decode=True),
                        decode={"Q4_K": _timed(priced, q4k, decode=True), "F16": _timed(priced, f16, decode=True)},
                        prefill={"Q4_K": _timed(priced, q4k, decode=False), "F16": _timed(priced, f16, decode=False)},
                        spread=0.02, short_prompt=_timed(priced, tiny1, decode=False),
                        moe=(_timed(priced, moe1, decode=True), _timed(priced, moe32, decode=True)),
                        moe_prompt=_timed(priced, moe_block, decode=False))
    assert notes == []
    assert fig.moe_layer_overhead_s == pytest.approx(41e-6, rel=1e-3)
    # solved with the quantized efficiency as the solve above found it (within 2%)
    assert fig.moe_expert_overhead_tokens == pytest.approx(57.0, rel=0.05)
    assert fig.name == "NVIDIA H200" and fig.backend == "cuda"
    assert fig.layer_overhead_s == pytest.approx(23e-6, rel=1e-3)
    assert fig.decode_efficiency == pytest.approx(0.71, rel=1e-3)
    assert dict(fig.decode_by_type)["F16"] == pytest.approx(0.71, rel=1e-3)
    assert fig.prefill_efficiency_float == pytest.approx(0.33, rel=1e-3)
    # a Q4_K_M file's Q6_K tensors and memory-bound steps make the prompt less sensitive to
    # the quantized efficiency: the solve lands where the estimator prices the prompt alike
    assert fig.prefill_efficiency_quant == pytest.approx(0.41, rel=0.02)
    assert fig.h2d_gbs is None  # no op_offload prompt given


def test_the_copy_rate_is_solved_from_a_prompt_with_the_weights_in_ram():
    hw = _hw()
    q4k = spec_from_hparams(name="q", ftype="Q4_K_M", n_layer=8, **_WIDE)
    tiny1, tiny32 = (spec_from_hparams(name=f"t{n}", ftype="F16", n_layer=n, **_TINY) for n in (1, 32))
    true = replace(BACKENDS["cuda"], decode_efficiency=0.71, layer_overhead_s=23e-6)
    priced = with_constants(replace(hw, gpus=(replace(hw.gpus[0], pcie_gbs=11.0),)), "gpu0", true)
    in_ram = Timed(q4k, RunConfig(n_ctx=2048, n_gpu_layers=0, n_threads=2, flash_attn=True), 0.0, 128)
    in_ram = replace(in_ram, seconds=priced_s(priced, in_ram))
    fig, notes = derive(hw, "gpu0", short=_timed(priced, tiny1, decode=True), deep=_timed(priced, tiny32, decode=True),
                        decode={"Q4_K": _timed(priced, q4k, decode=True)}, prefill={}, spread=0.0, offload=in_ram)
    assert notes == [] and fig.h2d_gbs == pytest.approx(11.0, rel=1e-3)
    assert with_gpu_figures(hw, (fig,)).gpus[0].pcie_gbs == pytest.approx(11.0, rel=1e-3)


def test_a_time_no_constant_can_price_is_said_and_the_table_kept():
    hw = _hw()
    tiny1, tiny32 = (spec_from_hparams(name=f"t{n}", ftype="F16", n_layer=n, **_TINY) for n in (1, 32))
    q4k = spec_from_hparams(name="q", ftype="Q4_K_M", n_layer=8, **_WIDE)
    short = _timed(hw, tiny1, decode=True)
    deep = replace(_timed(hw, tiny32, decode=True), seconds=short.seconds / 2)  # deeper but faster
    impossible = replace(_timed(hw, q4k, decode=True), seconds=1e-9)
    fig, notes = derive(hw, "gpu0", short=short, deep=deep, decode={"Q4_K": impossible}, prefill={}, spread=0.0)
    assert fig is None
    assert any("cost per layer could not be solved" in n for n in notes)
    assert any("Q4_K decode" in n and "not used" in n for n in notes)


def _probe_with(gpus: tuple[GpuFigures, ...]) -> MachineProbe:
    return MachineProbe(machine="m", build="b", n_threads=2, n_ubatch=512,
                        kernels=(KernelFigure("Q4_K", 0.05e-9, 0.02e-9, 21.0, "memory"),),
                        attention=(AttentionCost(True, 0.3e-9, 0.03e-9),), fixed=FixedCosts(70e-6, 25e-6, 3e-9),
                        spread=0.1, disturbed=False, gpus=gpus)


FIG = GpuFigures(device="gpu0", name="NVIDIA H200", backend="cuda", decode_efficiency=0.5, layer_overhead_s=80e-6,
                 prefill_efficiency_float=0.3, prefill_efficiency_quant=0.2, spread=0.03,
                 decode_by_type=(("F16", 0.55), ("Q4_K", 0.5)))


def test_an_estimate_on_a_probed_gpu_stands_on_its_figures_and_says_so():
    hw = _hw()
    spec = spec_from_hparams(name="m", ftype="Q4_K_M", n_layer=32, **{**_WIDE, "n_vocab": 128256})
    table = plan(spec, hw, Wishes(n_ctx=4096))
    probed = plan(spec, hw, Wishes(n_ctx=4096), calibration=Calibration(probe=_probe_with((FIG,))))
    assert table.performance.basis == "table" and probed.performance.basis == "probe"
    assert probed.performance.range_basis.endswith(GPU_PROBE_RANGE_NOTE)
    # lower efficiencies and a dearer layer than the table's: slower on both counts
    assert probed.performance.decode_tok_s < table.performance.decode_tok_s
    assert probed.performance.prefill_tok_s < table.performance.prefill_tok_s
    c = _device_constants(with_gpu_figures(hw, (FIG,)), "gpu0")
    assert (c.decode_efficiency, c.layer_overhead_s, c.prefill_efficiency_quant) == (0.5, 80e-6, 0.2)
    assert c.decode_band == BACKENDS["cuda"].decode_band  # not checked out of sample: the backend's band


def test_a_probe_of_another_gpu_or_backend_leaves_the_table():
    """A what-if GPU swapped in, or the same GPU on another backend, is not what was measured."""
    spec = spec_from_hparams(name="m", ftype="Q4_K_M", n_layer=32, **{**_WIDE, "n_vocab": 128256})
    cal = Calibration(probe=_probe_with((FIG,)))
    for other in ({"gpus": [{"name": "NVIDIA H100 SXM"}], "backend": "cuda"},
                  {"gpus": [{"name": "NVIDIA H200"}], "backend": "vulkan"}):
        hw = _hw(other)
        assert with_gpu_figures(hw, (FIG,)).gpu_constants == ()
        assert plan(spec, hw, Wishes(n_ctx=4096), calibration=cal).performance.basis == "table"


def test_gpu_figures_are_stored_with_the_probe():
    p = _probe_with((FIG,))
    back = MachineProbe.from_dict(p.to_dict())
    assert back.gpus == (FIG,)
    d = p.to_dict()
    del d["gpus"]  # a probe stored before the GPU half
    assert MachineProbe.from_dict(d).gpus == ()
    assert "gpu_constants" not in with_gpu_figures(_hw(), (FIG,)).to_dict()  # never saved with a profile


def test_a_cpu_only_build_says_why_no_gpu_was_measured():
    from rooflight.runtime import probe as rp
    from rooflight.runtime.loader import gpu_offload_supported

    if gpu_offload_supported():
        pytest.skip("this llama.cpp build offloads")
    skipped: dict[str, str] = {}
    clock = rp._Clock(1.0, 1, None, None)
    assert rp._gpu_half(_hw(), True, None, 2, 512, 0.1, {}, skipped, clock, None, None) == ((), None)
    assert skipped == {"GPU": rp.NO_GPU_BUILD}
    skipped.clear()
    assert rp._gpu_half(_hw(), False, None, 2, 512, 0.1, {}, skipped, clock, None, None) == ((), None)
    assert skipped == {}


# A GPU table entry with this CPU's bandwidth and arithmetic: a CPU build runs the "GPU"
# models on the CPU, so what the slow tests check is the plumbing, not a GPU's figures
_TEST_GPU = {"gpus": [{"name": "Probe Test GPU", "vendor": "nvidia", "vram_total_bytes": 8 << 30,
                       "bandwidth_gbs": 20.0, "fp16_tflops": 0.5}], "backend": "cuda"}


def _reduced_gpu_probe(monkeypatch):
    """runtime/probe_gpu.py with models a 2-core CPU runs in seconds, and the test GPU's profile."""
    from rooflight.runtime import probe_gpu as pg

    monkeypatch.setattr(pg, "_GPU_SHAPE", dict(n_embd=512, n_head=8, n_head_kv=2, head_dim=64, n_ff=1536))
    monkeypatch.setattr(pg, "GPU_MODEL_BYTES", 24 << 20)
    monkeypatch.setattr(pg, "TINY_DEEP_LAYERS", 8)
    monkeypatch.setattr(pg, "GPU_MOE_SHAPE", dict(arch="qwen3moe", n_embd=512, n_head=8, n_head_kv=2, head_dim=64,
                                                  n_ff=256, n_expert=32, n_expert_used=4))
    return pg, _hw(_TEST_GPU)


@pytest.mark.slow
def test_the_measuring_code_times_real_loads_and_solves_them(monkeypatch):
    """runtime/probe_gpu.py end to end with this machine's llama.cpp: models written, loaded
    as a plan loads them (every layer on "GPU 0"), timed, solved. This build has no GPU, so
    llama.cpp runs them on the CPU, and the GPU is a table entry with this CPU's bandwidth
    and arithmetic; what is checked is that the solved constants price the measured runs."""
    from rooflight.gguf.synthetic import write_model
    from rooflight.runtime import probe as rp

    pg, hw = _reduced_gpu_probe(monkeypatch)
    skipped: dict[str, str] = {}
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        def write(name, **kw):
            return write_model(Path(tmp) / f"{name}.gguf", tiled=True, context_length=4096, **kw)

        runner = rp._Runner(rp._Clock(20.0, 4, None, None), 0.5, runs, figures=8)
        figures, notes = pg.probe_gpus(hw, runner, write, 2, 128, skipped)
    assert set(runs) == {"gpu0/tiny1/decode", "gpu0/tiny8/decode", "gpu0/Q4_K/decode", "gpu0/Q4_K/prefill-128",
                         "gpu0/F16/decode", "gpu0/F16/prefill-128", "gpu0/Q4_K/offload-prefill-128",
                         "gpu0/tiny1/prefill-128", "gpu0/moe1/decode", "gpu0/moe8/decode",
                         "gpu0/moe-Q4_K/prefill-128"}
    # What the code promises whatever the timings (here the CPU's, under whatever else runs):
    # each constant solved inside its limits, or a note that names it and the table's kept;
    # no figures at all only with the GPU named in skipped, and why
    if not figures:
        assert skipped["gpu0"].startswith("not measured: ") and notes, (skipped, notes)
        return
    assert skipped == {}, skipped
    (fig,) = figures
    assert fig.device == "gpu0" and fig.name == "Probe Test GPU"
    said = " ".join(notes)
    lo, hi = EFFICIENCY_LIMITS
    assert LAYER_S_LIMITS[0] <= fig.layer_overhead_s <= LAYER_S_LIMITS[1]
    assert lo < fig.decode_efficiency < hi
    for wt, eff in (("F16", fig.prefill_efficiency_float), ("Q4_K", fig.prefill_efficiency_quant)):
        assert (eff is not None and lo < eff < hi) or f"the {wt} prompt is outside" in said, (wt, notes)
    # the copy rate: this build ran the weights-in-RAM prompt on the CPU, copying nothing, which
    # no rate may price (the table prices that prompt's CPU work and a copy): said, not stored
    assert (fig.h2d_gbs is not None and H2D_GBS_LIMITS[0] < fig.h2d_gbs < H2D_GBS_LIMITS[1]) or (
        "the prompt with its weights in RAM" in said), notes
    # the MoE blocks: solved inside the per-layer limits, or said (a CPU's timings may put the
    # MoE pair's difference below the dense pair's)
    assert (fig.moe_layer_overhead_s is not None
            and LAYER_S_LIMITS[0] <= fig.moe_layer_overhead_s <= LAYER_S_LIMITS[1]) or (
        "a block with routed experts could not be priced" in said), notes
    assert (fig.moe_expert_overhead_tokens is not None
            and MOE_TOKENS_LIMITS[0] <= fig.moe_expert_overhead_tokens <= MOE_TOKENS_LIMITS[1]) or (
        "the MoE prompt" in said and "outside what any cost per expert prices" in said), notes


@pytest.mark.slow
def test_a_moe_model_the_gpu_will_not_load_keeps_its_other_figures(monkeypatch):
    """The MoE figures come last and are optional: a MoE load the build refuses on that GPU is
    said in a note, and the dense figures stand (here the writer refuses it: the boundary)."""
    from rooflight.gguf.synthetic import write_model
    from rooflight.runtime import probe as rp

    pg, hw = _reduced_gpu_probe(monkeypatch)
    skipped: dict[str, str] = {}
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        def write(name, **kw):
            if kw.get("n_expert"):
                raise OSError("this GPU's backend has no MUL_MAT_ID")
            return write_model(Path(tmp) / f"{name}.gguf", tiled=True, context_length=4096, **kw)

        runner = rp._Runner(rp._Clock(20.0, 4, None, None), 0.5, runs, figures=8)
        figures, notes = pg.probe_gpus(hw, runner, write, 2, 128, skipped)
    assert "gpu0: its MoE figures not measured (this GPU's backend has no MUL_MAT_ID): the table's kept" in notes
    assert not any(k.startswith("gpu0/moe") for k in runs)
    if figures:  # the CPU's timings as a "GPU" may not solve: then skipped says why, not the MoE load
        (fig,) = figures
        assert fig.moe_layer_overhead_s is None and fig.moe_expert_overhead_tokens is None
    else:
        assert "MUL_MAT_ID" not in skipped["gpu0"]


def test_the_probe_report_names_each_gpus_figures_beside_the_tables():
    from rooflight.commands.probe import format_probe
    from rooflight.runtime.probe import ProbeRun

    text = format_probe(ProbeRun(_probe_with((FIG,)), stored=True))
    cuda = BACKENDS["cuda"]
    assert (f"gpu0 NVIDIA H200 (cuda): decode efficiency 0.500 (table {cuda.decode_efficiency:.3f}), 80.0 us per "
            f"layer (table {cuda.layer_overhead_s * 1e6:.1f}), prompt efficiency F16 0.300 (table "
            f"{cuda.prefill_efficiency_float:.3f}), quantized 0.200 (table {cuda.prefill_efficiency_quant:.3f})") in text
    devices = ProbeRun(_probe_with((FIG,))).to_dict()["devices"]
    assert [d["device"] for d in devices] == ["cpu", "gpu0"]
    assert devices[1]["weight_types"] == {"F16": {"decode_efficiency": 0.55}, "Q4_K": {"decode_efficiency": 0.5}}


def test_this_machine_shows_each_probed_gpus_line():
    from rooflight.ui.probe_panel import summary

    assert ("GPU 0 (NVIDIA H200): decode at 50% of its bandwidth figure, 80 us per layer, prompts at 20% "
            "(quantized) / 30% (F16) of its matrix rate; estimates on it use these") in summary(_probe_with((FIG,)))


def test_a_measured_copy_rate_is_reported_and_priced():
    from rooflight.commands.probe import format_probe
    from rooflight.runtime.probe import ProbeRun
    from rooflight.ui.probe_panel import summary

    fig = replace(FIG, h2d_gbs=24.5)
    run = ProbeRun(_probe_with((fig,)), stored=True)
    assert ", copies to it at 24.5 GB/s (spread 3%)" in format_probe(run)
    assert run.to_dict()["devices"][1]["h2d_gbs"] == 24.5
    assert ", weights copied to it at 24.5 GB/s; estimates on it use these" in summary(run.probe)
    # a prompt with layers in RAM pays the measured copy rate: faster than the link's 12 GB/s
    hw = _hw({"gpus": [{"name": "NVIDIA H200", "pcie_gbs": 12.0}], "backend": "cuda"})
    spec = spec_from_hparams(name="m", ftype="Q4_K_M", n_layer=32, **{**_WIDE, "n_vocab": 128256})
    w = Wishes(n_ctx=4096, n_gpu_layers=8)
    slow = plan(spec, hw, w, calibration=Calibration(probe=_probe_with((FIG,)))).performance.prefill_tok_s
    fast = plan(spec, hw, w, calibration=Calibration(probe=_probe_with((fig,)))).performance.prefill_tok_s
    assert fast > slow


def test_a_probed_gpus_moe_figures_price_moe_models_on_it_only():
    """A probed GPU's cost of a block with routed experts is paid by each such block of a MoE
    model on it, in decode and per micro-batch, its cost per expert by MoE prompts, and
    neither by a dense model; both are reported."""
    from rooflight.commands.probe import format_probe
    from rooflight.runtime.probe import ProbeRun
    from rooflight.ui.probe_panel import summary

    fig = replace(FIG, moe_layer_overhead_s=60e-6, moe_expert_overhead_tokens=75.0)
    hw = _hw()
    moe = spec_from_hparams(name="moe", ftype="Q4_K_M", n_layer=24, n_expert=32, n_expert_used=4,
                            **{**_WIDE, "n_ff": 768, "n_vocab": 128256})
    dense = spec_from_hparams(name="m", ftype="Q4_K_M", n_layer=32, **{**_WIDE, "n_vocab": 128256})
    w = Wishes(n_ctx=4096)

    def perf(spec, f):
        return plan(spec, hw, w, calibration=Calibration(probe=_probe_with((f,)))).performance

    without, blocks = perf(moe, FIG), perf(moe, replace(FIG, moe_layer_overhead_s=60e-6))
    assert 1 / blocks.decode_tok_s - 1 / without.decode_tok_s == pytest.approx(24 * 60e-6, rel=1e-6)
    assert blocks.prefill_tok_s < without.prefill_tok_s  # each micro-batch's blocks pay it too
    dear = perf(moe, replace(FIG, moe_expert_overhead_tokens=500.0))  # the table's: 108
    assert dear.prefill_tok_s < without.prefill_tok_s and dear.decode_tok_s == without.decode_tok_s
    for f in (FIG, fig):  # a dense model: no block with experts
        assert perf(dense, f).decode_tok_s == perf(dense, FIG).decode_tok_s
        assert perf(dense, f).prefill_tok_s == perf(dense, FIG).prefill_tok_s
    run = ProbeRun(_probe_with((fig,)), stored=True)
    table = BACKENDS["cuda"].moe_expert_overhead_tokens
    assert (", a block with experts +60.0 us (table 0.0), MoE prompts 75 tokens per expert "
            f"(table {table:.0f})") in format_probe(run)
    assert run.to_dict()["devices"][1]["moe_layer_overhead_us"] == 60.0
    assert run.to_dict()["devices"][1]["moe_expert_overhead_tokens"] == 75.0
    unmeasured = ProbeRun(_probe_with((FIG,))).to_dict()["devices"][1]
    assert unmeasured["moe_layer_overhead_us"] is None and unmeasured["moe_expert_overhead_tokens"] is None
    assert (", 60 us more per block with experts, MoE prompts at 75 tokens' cost per expert; estimates on it "
            "use these") in summary(run.probe)
    assert MachineProbe.from_dict(run.probe.to_dict()).gpus == (fig,)


def test_a_probe_from_before_the_gpu_half_asks_for_one_where_the_build_offloads(tmp_path, monkeypatch):
    """Still current for the CPU; the message says a new probe adds the GPU's figures. The
    build's ability to offload is the boundary faked here: this machine's build cannot."""
    from rooflight.runtime import build, loader
    from rooflight.store.calibration import machine_key
    from rooflight.store.probes import ProbeStore, probe_status

    db = tmp_path / "c.sqlite3"
    hw = _hw({"gpus": [{"name": "NVIDIA H200", "vram_total_bytes": 141 * 10**9}], "backend": "cuda"})
    monkeypatch.setattr(build, "llama_build", lambda: "llama-cpp-python 0.3.36 [cuda]")
    monkeypatch.setattr(loader, "gpu_offload_supported", lambda: True)
    for gpu_half, asks in ((False, True), (True, False)):
        store = ProbeStore(db)
        try:
            store.put(replace(_probe_with(()), machine=machine_key(hw), build="llama-cpp-python 0.3.36 [cuda]",
                              gpu_half=gpu_half))
        finally:
            store.close()
        status = probe_status(hw, db)
        assert status.state == "current" and status.probe is not None
        assert ("predates the probe's GPU half: measure again" in status.message) is asks


def test_a_gpu_whose_models_cannot_be_written_is_named_with_why():
    from rooflight.runtime import probe as rp
    from rooflight.runtime import probe_gpu as pg

    def full_disk(name, **kw):
        raise OSError("No space left on device")

    skipped: dict[str, str] = {}
    runner = rp._Runner(rp._Clock(5.0, 4, None, None), 0.5, {}, figures=8)
    assert pg.probe_gpus(_hw(), runner, full_disk, 2, 512, skipped) == ((), [])
    assert skipped == {"gpu0": "not measured: No space left on device"}


@pytest.mark.slow
def test_the_probe_runs_its_gpu_half_after_the_cpus_and_stores_it(monkeypatch, tmp_path):
    """probe_machine end to end with the GPU half wired in: a reduced CPU half, then the GPU
    half on its own clock (its progress continues the bar to 100%), the figures stored with
    the probe and read back. The build's ability to offload is the faked boundary, and the
    "GPU" a table entry with this CPU's bandwidth (the models run on the CPU here)."""
    from rooflight.hardware import detect
    from rooflight.runtime import loader
    from rooflight.runtime import probe as rp
    from rooflight.store.probes import ProbeStore

    pg, test_gpu = _reduced_gpu_probe(monkeypatch)
    monkeypatch.setattr(pg, "GPU_BUDGET_S", 15.0)
    monkeypatch.setattr(loader, "gpu_offload_supported", lambda: True)
    hw = replace(detect(measure_bandwidth=False), backend="cuda", gpus=test_gpu.gpus)
    seen: list[tuple[float, str]] = []
    store = ProbeStore(tmp_path / "probes.sqlite3")
    try:
        run = rp.probe_machine(hw, weight_types=("F16",), budget_s=20.0, repeats=2, busy_threshold=0.5,
                               keep_disturbed=True, image=False, store=store,
                               progress=lambda f, m, s: seen.append((f, m)))
        assert run.probe.gpu_half
        gpu_steps = [f for f, m in seen if m.startswith("gpu0:")]
        assert gpu_steps and gpu_steps == sorted(gpu_steps) and seen[-1][0] == 1.0
        assert min(gpu_steps) >= max(f for f, m in seen if not m.startswith("gpu0:") and f < 1.0)
        if run.probe.gpus:
            (fig,) = run.probe.gpus
            assert fig.name == "Probe Test GPU" and fig.backend == "cuda"
            assert [d["device"] for d in run.to_dict()["devices"]] == ["cpu", "gpu0"]
        else:  # the CPU's timings as a "GPU" could not be solved: said
            assert run.skipped["gpu0"].startswith("not measured: ")
        if run.stored:
            assert store.get(run.probe.machine, run.probe.build).gpus == run.probe.gpus
    finally:
        store.close()
