"""MoE experts in RAM (--n-cpu-moe): the ctypes override layer, real loads with llama.cpp,
the plan's memory and speed, the auto choice against a layer split, several GPUs, the CLI."""

import ctypes
import json
import subprocess
import sys
from dataclasses import replace

import pytest

from rooflight.catalog import find_model
from rooflight.errors import BadInputError
from rooflight.estimate import Wishes, plan, plan_memory, ranges
from rooflight.estimate import experts as ex
from rooflight.estimate.perf import _decode_fixed
from rooflight.gguf import load_model_spec
from rooflight.gguf.from_hparams import spec_from_hparams
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import profile_from_dict
from rooflight.hardware.profile import CPUInfo, HardwareProfile

llama_cpp = pytest.importorskip("llama_cpp")

GiB = 2**30
HOST = HardwareProfile(
    cpu=CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0),
    backend="cpu",
)
SMALL = {
    "qwen3moe": dict(arch="qwen3moe", n_layer=4, n_embd=256, n_head=4, n_head_kv=2, n_ff=256, n_vocab=2000,
                     ftype="Q8_0", n_expert=8, n_expert_used=2),
    "gpt-oss": dict(arch="gpt-oss", n_layer=4, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=256,
                    n_vocab=2000, ftype="MXFP4_MOE", n_expert=8, n_expert_used=2, sliding_window=128),
}


@pytest.fixture(scope="module")
def small_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("moe")
    return {name: write_model(d / f"{name}.gguf", context_length=4096, **kw) for name, kw in SMALL.items()}


def _profile(gpus, ram_gib=64, bw=50.0):
    d = {"gpus": gpus, "cpu": {"name": "test cpu", "cores": 8, "threads": 16, "isa": ["avx2", "fma"],
                               "ram_total_bytes": ram_gib * GiB, "ram_available_bytes": int(0.9 * ram_gib * GiB),
                               "ram_bandwidth_gbs": bw, "max_freq_mhz": 4000.0}}
    return profile_from_dict(d, measure_bandwidth=False)


# ---- the ctypes layer ------------------------------------------------------------------------


def test_patterns_are_llama_cpps_and_cpu_buffer_type_found():
    from rooflight.runtime import tensor_overrides as to

    # common/arg.cpp llm_add_n_cpu_ffn_overrides: blk\.{i} + LLM_FFN_EXPS_REGEX per layer
    assert to.expert_patterns(2) == [r"blk\.0\.ffn_(up|down|gate|gate_up)_(ch|)exps",
                                     r"blk\.1\.ffn_(up|down|gate|gate_up)_(ch|)exps"]
    to.check_layout()
    assert to.buffer_type_name(to.cpu_buffer_type()) == "CPU"
    assert to.BufferOverrides.for_experts(0) is None


def test_override_array_is_null_terminated_and_freed():
    from rooflight.runtime import tensor_overrides as to

    params = llama_cpp.llama_model_default_params()
    ov = to.BufferOverrides(to.expert_patterns(3))
    ov.apply(params)
    assert params.tensor_buft_overrides == ov.address
    arr = (to._Override * 4).from_address(ov.address)
    assert [a.pattern for a in arr[:3]] == [p.encode() for p in ov.patterns]
    assert all(a.buft == to.cpu_buffer_type() for a in arr[:3])
    assert arr[3].pattern is None and arr[3].buft is None
    ov.release(params)
    assert ov.released and params.tensor_buft_overrides is None
    with pytest.raises(RuntimeError):
        _ = ov.address


def test_too_many_overrides_and_layout_mismatch_are_one_sentence(monkeypatch):
    from rooflight.runtime import tensor_overrides as to

    limit = int(llama_cpp.llama_max_tensor_buft_overrides())
    with pytest.raises(to.OverridesUnsupportedError, match="more than this llama.cpp build accepts"):
        to.BufferOverrides(["x"] * limit)

    class Swapped(ctypes.Structure):  # an older binding: overrides not where llama.h puts them
        _fields_ = [("devices", ctypes.c_void_p), ("n_gpu_layers", ctypes.c_int32),
                    ("tensor_buft_overrides", ctypes.c_void_p)]

    monkeypatch.setattr(llama_cpp.llama_cpp, "llama_model_params", Swapped)
    to.check_layout.cache_clear()
    try:
        with pytest.raises(to.OverridesUnsupportedError) as err:
            to.BufferOverrides(to.expert_patterns(1))
        msg = str(err.value)
        assert "cannot keep MoE experts in RAM" in msg and msg.count(". ") == 0 and "\n" not in msg
    finally:
        monkeypatch.undo()
        to.check_layout.cache_clear()


# ---- real loads: overrides applied, logged, and the plan matches llama.cpp's buffers ------------


@pytest.mark.parametrize("name", list(SMALL))
@pytest.mark.parametrize("n_cpu_moe", [0, 2, "all"])
def test_load_keeps_exactly_the_planned_experts_on_the_cpu(small_models, name, n_cpu_moe, monkeypatch):
    from rooflight.runtime import engine as eng
    from rooflight.runtime.engine import load_engine
    from rooflight.runtime.loader import plan_load

    path = small_models[name]
    spec = load_model_spec(str(path))
    made = []
    real = eng.expert_overrides
    monkeypatch.setattr(eng, "expert_overrides", lambda cfg: made.append(real(cfg)) or made[-1])
    lp = plan_load(path, Wishes(n_ctx=512, n_cpu_moe=n_cpu_moe), hardware=HOST)
    n = spec.n_layer if n_cpu_moe == "all" else n_cpu_moe
    assert lp.config.n_cpu_moe == n  # the plan keeps what was asked for, as a count
    with load_engine(lp, warmup=False) as engine:
        got = engine.buffers
        # llama.cpp's own log: each overridden tensor, on a CPU buffer type
        expected = {t.name for t in spec.tensors if t.layer is not None and t.layer < n
                    and ex.is_moved_by_n_cpu_moe(t.name)}
        assert set(got.overridden) == expected
        assert all(b.startswith("CPU") for b in got.overridden.values())
        if name == "gpt-oss":  # the experts' biases move with them, as llama.cpp's regex_search does
            assert n == 0 or "blk.0.ffn_up_exps.bias" in got.overridden
        # the pattern list is freed after the load, and llama.cpp's params no longer point to it
        assert made and (made[0] is None) == (n == 0)
        assert made[0] is None or made[0].released
        assert engine.llm.model_params.tensor_buft_overrides is None
        # planned bytes per buffer (this CPU build puts every buffer in RAM)
        cpu = lp.estimate.memory.device("cpu")
        repacked = sum(spec.tensor(t).n_bytes for t in got.repacked_tensors)
        assert got.model_bytes - repacked == pytest.approx(cpu.weights_bytes, rel=0.02)
        assert got.kv_bytes == pytest.approx(cpu.kv_bytes, rel=0.02)
        reported = got.model_bytes - repacked + got.kv_bytes + got.compute_bytes + got.output_bytes
        assert cpu.weights_bytes + cpu.kv_bytes + cpu.compute_bytes == pytest.approx(reported, rel=0.02)
    # on a GPU the same config moves exactly the logged tensors' bytes off the card
    gpu_hw = _profile([{"name": "RTX 3060"}])
    full = plan(spec, gpu_hw, Wishes(n_ctx=512, n_gpu_layers=spec.n_layer + 1))
    moved = plan(spec, gpu_hw, Wishes(n_ctx=512, n_gpu_layers=spec.n_layer + 1, n_cpu_moe=n))
    logged_bytes = sum(spec.tensor(t).n_bytes for t in expected)
    assert full.memory.device("gpu0").weights_bytes - moved.memory.device("gpu0").weights_bytes == logged_bytes
    assert moved.memory.device("cpu").weights_bytes - full.memory.device("cpu").weights_bytes == logged_bytes
    assert moved.memory.device("gpu0").kv_bytes == full.memory.device("gpu0").kv_bytes


def test_gpt_oss_file_has_mxfp4_experts_sinks_and_alternating_window(small_models):
    spec = load_model_spec(str(small_models["gpt-oss"]))
    assert spec.architecture == "gpt-oss" and spec.file_type == "MXFP4_MOE"
    exps = [t for t in spec.tensors if t.name.endswith("_exps.weight")]
    assert exps and all(t.ggml_type == "MXFP4" and t.n_bytes * 32 == t.n_elements * 17 for t in exps)  # 4.25 bpw
    assert spec.tensor("blk.0.attn_sinks.weight").shape == (4,)
    assert spec.sliding_window == 128 and spec.swa_layers == (True, False, True, False)


# ---- the plan: memory, speed, auto, on gpt-oss-20b-, Qwen3-30B-A3B- and gpt-oss-120b-shaped headers ----

# Hyper-parameters from the catalog entries, which cite each model's config.json
# (openai/gpt-oss-20b, openai/gpt-oss-120b, Qwen/Qwen3-30B-A3B); gpt-oss-120b's also match
# https://crafiq.ai/models/language/openai-gpt-oss-120b (36 layers, 128 experts, top-4, GQA 8).
# gpt-oss as released: MXFP4 experts, Q8_0 elsewhere (gguf/gptoss_layout.py).


def _gpt_oss(model_id):
    h = find_model(model_id).hparams
    return spec_from_hparams(name=model_id, arch="gpt-oss", ftype="MXFP4_MOE", n_layer=h.n_layer, n_embd=h.n_embd,
                             n_head=h.n_head, n_head_kv=h.n_head_kv, n_ff=h.n_ff, n_vocab=h.n_vocab,
                             context_length=h.context_length, head_dim=h.head_dim, n_expert=h.n_expert,
                             n_expert_used=h.n_expert_used, sliding_window=h.sliding_window,
                             swa_layers=tuple(i % 2 == 0 for i in range(h.n_layer)))


SHAPES = {
    "gpt-oss-20b": lambda: _gpt_oss("gpt-oss-20b"),
    "qwen3-30b-a3b": lambda: find_model("qwen3-30b-a3b").spec("Q4_K_M"),
    "gpt-oss-120b": lambda: _gpt_oss("gpt-oss-120b"),
}
GPUS = {8: "RTX 4060", 12: "RTX 3060", 16: "RTX 4060 Ti 16GB", 24: "RTX 3090"}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("gb", list(GPUS))
def test_auto_takes_the_faster_of_experts_in_ram_and_a_layer_split(shape, gb):
    spec = SHAPES[shape]()
    hw = _profile([{"name": GPUS[gb]}], ram_gib=128)
    w = Wishes(n_ctx=8192)
    est = plan(spec, hw, replace(w, n_cpu_moe="auto"))
    choice = est.moe_choice
    d = est.to_dict()
    assert d["config"]["n_cpu_moe"] == est.config.n_cpu_moe and d["config"]["moe_placement"] == choice.placement
    assert d["moe_choice"]["reason"] == choice.reason and choice.reason.endswith(".")
    split = plan(spec, hw, w)
    assert choice.layer_split["decode_tok_s"] == pytest.approx(split.performance.decode_tok_s, rel=1e-3)
    if split.fit == "full_gpu":
        assert choice.placement == "full_gpu" and est.config.n_cpu_moe == 0
        return
    n = choice.experts_in_ram["n_cpu_moe"]
    moe = plan(spec, hw, replace(w, n_cpu_moe=n, n_gpu_layers=choice.experts_in_ram["n_gpu_layers"]))
    if choice.experts_in_ram["n_gpu_layers"] == spec.n_layer + 1:
        # the fewest expert layers in RAM with every layer's attention and KV on the GPU
        assert all(dv.fits for dv in moe.memory.devices if dv.device != "cpu")
        fewer = plan_memory(spec, hw, replace(moe.config, n_cpu_moe=n - 1))
        assert n == 0 or not all(dv.fits for dv in fewer.devices if dv.device != "cpu")
    best = max(moe.performance.decode_tok_s, split.performance.decode_tok_s)
    assert est.performance.decode_tok_s == pytest.approx(best, rel=1e-6)
    assert choice.placement == ("experts_in_ram" if moe.performance.decode_tok_s > split.performance.decode_tok_s
                                else "layer_split")
    assert ("experts" in choice.reason and "layer" in choice.reason)


def test_expected_choices_on_the_what_if_cards():
    """What the estimator concludes (figures in the README): a 24 GB card holds gpt-oss-20b
    whole; on 8 and 12 GB it keeps experts in RAM; gpt-oss-120b always needs RAM for experts."""
    hw = {gb: _profile([{"name": n}], ram_gib=128) for gb, n in GPUS.items()}
    a = {gb: plan(SHAPES["gpt-oss-20b"](), h, Wishes(n_ctx=8192, n_cpu_moe="auto")) for gb, h in hw.items()}
    assert a[24].moe_choice.placement == "full_gpu"
    assert a[8].moe_choice.placement == a[12].moe_choice.placement == "experts_in_ram"
    assert a[8].config.n_cpu_moe > a[12].config.n_cpu_moe > 0
    big = plan(SHAPES["gpt-oss-120b"](), hw[24], Wishes(n_ctx=8192, n_cpu_moe="auto"))
    assert big.config.n_cpu_moe > 0 and big.fit == "partial_gpu"


def test_speed_charges_the_cpu_for_the_routed_experts():
    spec = SHAPES["gpt-oss-20b"]()
    hw = _profile([{"name": "RTX 3090"}])
    w = Wishes(n_ctx=4096, n_gpu_layers=spec.n_layer + 1)
    base, moved = plan(spec, hw, w), plan(spec, hw, replace(w, n_cpu_moe=6))
    r0 = _decode_fixed(spec, hw, base.memory).reads
    r6 = _decode_fixed(spec, hw, moved.memory).reads
    routed = sum(ex.expert_table(spec).active_bytes[:6])
    assert r6["cpu"] - r0.get("cpu", 0.0) == pytest.approx(routed)
    assert r0["gpu0"] - r6["gpu0"] == pytest.approx(routed)
    assert routed == pytest.approx(sum(ex.expert_table(spec).bytes[:6]) * 4 / 32)  # 4 of 32 experts per token
    # decode and prefill (experts copied over PCIe per micro-batch) both pay for it
    assert moved.performance.decode_tok_s < base.performance.decode_tok_s
    assert moved.performance.prefill_tok_s < base.performance.prefill_tok_s
    assert moved.fit == "partial_gpu" and base.fit == "full_gpu"


def test_two_gpus_split_layers_by_free_memory_and_experts_leave_the_first():
    spec = SHAPES["qwen3-30b-a3b"]()
    hw = _profile([{"name": "RTX 4060"}, {"name": "RTX 4060"}])
    auto = plan(spec, hw, Wishes(n_ctx=8192, n_cpu_moe="auto"))
    assert {d["device"] for d in auto.to_dict()["memory"]["devices"]} == {"cpu", "gpu0", "gpu1"}
    n = auto.moe_choice.experts_in_ram["n_cpu_moe"]  # the fewest that fit on both cards
    est = plan(spec, hw, Wishes(n_ctx=8192, n_cpu_moe=n, n_gpu_layers=spec.n_layer + 1))
    layers = est.memory.layer_devices
    # llama.cpp's split by free memory: equal cards share the blocks half and half
    assert abs(layers.count("gpu0") - layers.count("gpu1")) <= 1
    n = est.config.n_cpu_moe
    full = plan_memory(spec, hw, replace(est.config, n_cpu_moe=0))
    table = ex.expert_table(spec)
    for dev in ("gpu0", "gpu1"):
        own = sum(table.bytes[i] for i in range(n) if layers[i] == dev)
        assert full.device(dev).weights_bytes - est.memory.device(dev).weights_bytes == own
    assert all(d.fits for d in est.memory.devices)


def test_n_cpu_moe_values():
    spec = SHAPES["qwen3-30b-a3b"]()
    hw = _profile([{"name": "RTX 3060"}])
    assert plan(spec, hw, Wishes(n_cpu_moe="all")).config.n_cpu_moe == spec.n_layer
    assert plan(spec, hw, Wishes(n_cpu_moe=999)).config.n_cpu_moe == spec.n_layer
    with pytest.raises(BadInputError, match="--n-cpu-moe"):
        plan(spec, hw, Wishes(n_cpu_moe="most"))
    with pytest.raises(BadInputError, match="--n-cpu-moe"):
        plan(spec, hw, Wishes(n_cpu_moe=-1))
    dense = find_model("qwen3-8b").spec("Q4_K_M") if find_model("qwen3-8b") else None
    if dense is not None:  # a dense model has no experts to move
        assert plan(dense, hw, Wishes(n_cpu_moe="all")).config.n_cpu_moe == 0
    # a CPU-only machine has nothing to choose between
    assert plan(spec, HOST, Wishes(n_cpu_moe="auto")).config.n_cpu_moe == 0


# ---- the command line ------------------------------------------------------------------------


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "rooflight", *args], capture_output=True, text=True, timeout=300)


def test_cli_estimate_advise_bench_take_n_cpu_moe(small_models, tmp_path):
    path = str(small_models["qwen3moe"])
    prof = tmp_path / "gpu.json"
    prof.write_text(json.dumps({"gpus": [{"name": "RTX 3060"}]}))
    r = _cli("estimate", path, "--hardware", str(prof), "--n-cpu-moe", "2", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["config"]["n_cpu_moe"] == 2 and doc["memory"]["fit"] == "partial_gpu"
    r = _cli("estimate", path, "--hardware", str(prof), "--n-cpu-moe", "auto", "--json")
    doc = json.loads(r.stdout)
    assert doc["config"]["moe_placement"] == doc["moe_choice"]["placement"] == "full_gpu"
    r = _cli("estimate", path, "--n-cpu-moe", "lots")
    assert r.returncode == 2 and "--n-cpu-moe must be a number, auto or all" in r.stderr
    r = _cli("advise", path, "--hardware", str(prof), "--n-cpu-moe", "all", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["baseline"]["config"]["n_cpu_moe"] == 4
    # bench loads it here, overrides applied, and reports the config it ran
    r = _cli("bench", path, "--n-cpu-moe", "2", "--repetitions", "1", "--prompt-tokens", "16",
             "--gen-tokens", "4", "--ctx", "256", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["config"]["n_cpu_moe"] == 2


def test_a_measured_probe_prices_the_experts_in_ram(small_models):
    """With this machine's kernel probe (estimate/probe_roofline.py) the CPU's share of decode
    is the probe's seconds per weight over the moved experts' active elements."""
    from rooflight.store.calibration import machine_key
    from test_probe import _probe

    spec = load_model_spec(str(small_models["qwen3moe"]))
    hw = _profile([{"name": "RTX 3090"}])
    probe = _probe(machine_key(hw), "b", n_threads=8)
    w = Wishes(n_ctx=512, n_threads=8, n_gpu_layers=spec.n_layer + 1, n_cpu_moe=2)
    est = plan(spec, hw, w)
    fixed = _decode_fixed(spec, hw, est.memory, est.config, probe)
    elements = ex.cpu_by_type(spec, est.memory.layer_devices, 2)
    assert elements and all(set(d) == {"Q8_0"} for d in elements)
    want = sum(n * probe.kernel("Q8_0").decode_s_per_weight for d in elements for n in d.values())
    assert sum(fixed.cpu_weights.values()) == pytest.approx(want)
    assert "cpu" not in fixed.reads  # priced by the probe, not by bandwidth


def test_a_plan_with_experts_in_ram_stands_on_the_probe_for_the_cpu_s_share(small_models):
    """End to end: the CPU's share of a mixed plan (experts in RAM, or a layer split) is
    priced by the probe, the GPU's by the table under a kernel of its own; the range combines
    both bands by the table's share of the time (ranges.combined), between the two; a plan
    with every layer and expert on the GPU stays on the table."""
    from rooflight.estimate import Calibration
    from rooflight.store.calibration import machine_key
    from test_probe import _probe

    spec = load_model_spec(str(small_models["qwen3moe"]))
    hw = _profile([{"name": "RTX 3090"}])
    probe = _probe(machine_key(hw), "b", n_threads=8)
    cal = Calibration(probe=probe)
    w = Wishes(n_ctx=512, n_threads=8, n_gpu_layers=spec.n_layer + 1, n_cpu_moe=2)
    table, probed = plan(spec, hw, w).performance, plan(spec, hw, w, calibration=cal).performance
    assert (table.basis, probed.basis) == ("table", "probe")
    shares = dict(probed.kernels.decode)
    assert "Q8_0" in shares and "CUDA (table)" in shares and shares["CUDA (table)"] > 0
    assert "by their shares of the predicted time" in probed.range_basis
    own = ranges.probe_band(probe.spread_of(probed.kernels.decode, prefill=False, flash_attn=True),
                            probe.spread_of(probed.kernels.prefill, prefill=True, flash_attn=True), probe.disturbed)
    lo, hi = (x / probed.decode_tok_s for x in probed.decode_tok_s_range)
    t_lo, t_hi = (x / table.decode_tok_s for x in table.decode_tok_s_range)
    g = shares["CUDA (table)"]  # the GPU's share of the time: its part is off by the table's band
    assert 1 / lo == pytest.approx((1 - g) / own.decode[0] + g / t_lo)
    assert 1 / hi == pytest.approx((1 - g) / own.decode[1] + g / t_hi)
    assert min(t_lo, own.decode[0]) <= lo <= max(t_lo, own.decode[0])
    # the probe's CPU kernels twice as slow: the mixed plan decodes slower, the full-GPU one not
    slow = replace(probe, kernels=tuple(replace(k, decode_s_per_weight=2 * k.decode_s_per_weight)
                                        for k in probe.kernels))
    slower = plan(spec, hw, w, calibration=Calibration(probe=slow)).performance
    assert slower.decode_tok_s < probed.decode_tok_s
    full = Wishes(n_ctx=512, n_threads=8, n_gpu_layers=spec.n_layer + 1, n_cpu_moe=0)
    on_gpu = plan(spec, hw, full, calibration=cal).performance
    assert on_gpu.basis == "table" and on_gpu.decode_tok_s == plan(spec, hw, full).performance.decode_tok_s
