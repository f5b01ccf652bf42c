"""The memory plan of hybrid recurrent/attention models against llama.cpp's own buffers.

Each case writes a small real GGUF of one hybrid architecture (gguf/synthetic_hybrid.py:
exactly the tensors and keys llama.cpp 0.3.36's loader requires), plans it for this
machine (CPU backend), loads it with llama-cpp-python at the planned RunConfig and compares
with the buffers llama.cpp logs: weights exactly (to the log's rounding and alignment),
KV cache plus recurrent state ("RS buffer") exactly, the total within 5% as in
test_integration_plan_vs_llama.py.
"""

from dataclasses import replace

import pytest

from rooflight.estimate import Wishes, plan
from rooflight.estimate.kv import state_bytes
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic_hybrid import HybridShape, write_hybrid_model
from rooflight.hardware.profile import CPUInfo, HardwareProfile
from rooflight.runtime.measure import measure

llama_cpp = pytest.importorskip("llama_cpp")

GiB = 2**30
ROUNDING = 2**20 // 100  # llama.cpp logs MiB with two decimals

HOST = HardwareProfile(
    cpu=CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0),
    backend="cpu",
)

L = 8
ATTN_AT = (3, 7)  # Granite 4 / LFM2 style: a few attention layers among recurrent ones
COMMON = dict(n_embd=256, n_head=4, head_dim=64, n_vocab=4000)
CASES = {
    "lfm2": HybridShape("lfm2", **COMMON, n_head_kv=tuple(2 if i in ATTN_AT else 0 for i in range(L)),
                        n_ff=(1024,) * L),
    # LFM2-MoE (LFM2-8B-A1B style): two dense layers, then routed experts with a bias
    "lfm2moe": HybridShape("lfm2moe", **COMMON, n_head_kv=tuple(2 if i in ATTN_AT else 0 for i in range(L)),
                           n_ff=(1024,) * L, n_expert=4, n_expert_used=2, n_ff_exp=256,
                           moe_layers=tuple(i >= 2 for i in range(L))),
    "granitehybrid": HybridShape("granitehybrid", **COMMON,
                                 n_head_kv=tuple(2 if i in ATTN_AT else 0 for i in range(L)),
                                 n_ff=(1024,) * L, ssm_d_inner=512, ssm_d_state=128, ssm_dt_rank=8,
                                 ssm_n_group=1),
    # Granite 4 H Tiny/Small style: routed experts plus a shared expert in every layer
    "granitehybrid-moe": HybridShape("granitehybrid", **COMMON,
                                     n_head_kv=tuple(2 if i in ATTN_AT else 0 for i in range(L)),
                                     n_ff=(256,) * L, ssm_d_inner=512, ssm_d_state=64, ssm_dt_rank=8,
                                     ssm_n_group=1, n_expert=4, n_expert_used=2, n_ff_shexp=512),
    # Nemotron-H: Mamba-2, MLP-only and attention layers in one stack
    "nemotron_h": HybridShape("nemotron_h", **COMMON, n_head_kv=(0, 0, 0, 2, 0, 0, 0, 0),
                              n_ff=(0, 1024, 0, 0, 1024, 0, 1024, 0), ssm_d_inner=512, ssm_d_state=128,
                              ssm_dt_rank=8, ssm_n_group=2),
    # Nemotron-H MoE (Nemotron 3 Nano): Mamba-2, attention and expert layers (M E M * E M E M),
    # routed experts with a shared one
    "nemotron_h_moe": HybridShape("nemotron_h_moe", **COMMON, n_head_kv=(0, 0, 0, 2, 0, 0, 0, 0),
                                  n_ff=(0, 256, 0, 0, 256, 0, 256, 0), ssm_d_inner=512, ssm_d_state=128,
                                  ssm_dt_rank=8, ssm_n_group=2, n_expert=8, n_expert_used=2, n_ff_exp=256,
                                  n_ff_shexp=512, n_expert_shared=1, expert_weights_norm=True,
                                  expert_weights_scale=2.5),
    # Jamba: Mamba-1 mixers, one attention layer in eight, MoE feed-forward
    "jamba": HybridShape("jamba", **COMMON, n_head_kv=tuple(2 if i == 4 else 0 for i in range(L)),
                         n_ff=(512,) * L, ssm_d_inner=512, ssm_d_state=16, ssm_dt_rank=16,
                         n_expert=4, n_expert_used=2),
    # Qwen3-Next: gated delta-net layers, full attention every 4th, routed + shared experts
    "qwen3next": HybridShape("qwen3next", **COMMON, n_head_kv=(2,) * L, n_ff=(512,) * L,
                             ssm_d_inner=256, ssm_d_state=64, ssm_dt_rank=4, ssm_n_group=2,
                             n_expert=4, n_expert_used=2, n_ff_exp=256, n_ff_shexp=512),
    # Qwen3.5: the same delta-net layout with a dense feed-forward; Qwen3.5-MoE with experts
    "qwen35": HybridShape("qwen35", **COMMON, n_head_kv=(2,) * L, n_ff=(1024,) * L,
                          ssm_d_inner=256, ssm_d_state=64, ssm_dt_rank=4, ssm_n_group=2),
    "qwen35moe": HybridShape("qwen35moe", **COMMON, n_head_kv=(2,) * L, n_ff=(512,) * L,
                             ssm_d_inner=256, ssm_d_state=64, ssm_dt_rank=4, ssm_n_group=2,
                             n_expert=4, n_expert_used=2, n_ff_exp=256, n_ff_shexp=512),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("hybrid")
    return {name: write_hybrid_model(d / f"{name}.gguf", shape, ftype="Q8_0") for name, shape in CASES.items()}


def test_header_gives_recurrent_layout(models):
    for name, shape in CASES.items():
        spec = load_model_spec(str(models[name]))
        assert spec.recurrent_layers == tuple(shape.is_recurrent(il) for il in range(L)), name
        # only attention layers keep KV heads (llama.cpp's filter_attn)
        for il in range(L):
            attends = not shape.is_recurrent(il) and not (shape.arch.startswith("nemotron_h") and shape.n_ff[il])
            assert (spec.n_head_kv[il] > 0) == attends, (name, il)
        assert spec.ssm_state_bytes_per_seq > 0


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize(
    "wishes",
    [
        Wishes(n_ctx=512, flash_attn="off"),
        Wishes(n_ctx=4096, flash_attn="on"),
        Wishes(n_ctx=4096, flash_attn="off", n_ubatch=128),
        Wishes(n_ctx=8192, flash_attn="on", kv_type="q8_0"),
    ],
    ids=["512-nofa", "4096-fa", "4096-nofa-ub128", "8192-fa-q8kv"],
)
def test_hybrid_plan_matches_llama_cpp_buffers(models, name, wishes, request):
    if name == "granitehybrid-moe" and request.node.callspec.id.startswith("512-nofa"):
        # a known miss, kept visible: without flash attention (Rooflight plans it on) the
        # compute buffer of Mamba-2 + MoE layers is 12% above the fitted peak here (5.3%
        # of the total); with flash attention the same model is within tolerance
        request.applymarker(pytest.mark.xfail(strict=True, reason="Mamba-2+MoE compute without flash attention"))
    path = models[name]
    spec = load_model_spec(str(path))
    est = plan(spec, HOST, replace(wishes, n_gpu_layers=0))
    got = measure(path, est.config, prompt_tokens=1, gen_tokens=1).buffers
    cpu = est.memory.device("cpu")

    assert got.recurrent, "llama.cpp allocated no recurrent state"
    planned_state = sum(state_bytes(spec, il) for il in range(spec.n_layer))
    assert abs(sum(got.recurrent.values()) - planned_state) <= ROUNDING * len(got.recurrent)
    # KV cache + recurrent state: every reported buffer rounds to 0.01 MiB
    assert abs(got.kv_bytes - cpu.kv_bytes) <= ROUNDING * (len(got.kv) + len(got.recurrent))
    repacked = sum(spec.tensor(t).n_bytes for t in got.repacked_tensors)
    assert abs(got.model_bytes - repacked - cpu.weights_bytes) <= 64 * 1024, "weights differ"
    reported = got.model_bytes - repacked + got.kv_bytes + got.compute_bytes + got.output_bytes
    planned = cpu.weights_bytes + cpu.kv_bytes + cpu.compute_bytes
    assert planned == pytest.approx(reported, rel=0.05)
    # the compute buffer alone: the recurrent mixers' peak is fitted (recurrent_compute.py)
    assert cpu.compute_bytes == pytest.approx(got.compute_bytes + got.output_bytes, rel=0.08)


def test_recurrent_state_does_not_grow_with_context(models):
    spec = load_model_spec(str(models["granitehybrid"]))
    small = plan(spec, HOST, Wishes(n_ctx=1024, n_gpu_layers=0)).memory.device("cpu").kv_bytes
    large = plan(spec, HOST, Wishes(n_ctx=8192, n_gpu_layers=0)).memory.device("cpu").kv_bytes
    # only the two attention layers grow: 2 layers x 2 KV heads x 64 x (K+V) x 2 bytes per cell
    assert large - small == (8192 - 1024) * 2 * 2 * 64 * 2 * 2


def test_roofline_charges_recurrent_layers_their_state_not_a_growing_cache(models):
    from rooflight.estimate.kv import kv_reads_by_layer

    spec = load_model_spec(str(models["granitehybrid"]))
    cfg = plan(spec, HOST, Wishes(n_ctx=8192, n_gpu_layers=0)).config
    early, late = kv_reads_by_layer(spec, cfg, 300), kv_reads_by_layer(spec, cfg, 6000)
    for il in range(L):
        if spec.recurrent_layers[il]:
            # read and written back once per token, whatever the position
            assert early[il] == late[il] == 2 * spec.ssm_state_bytes_per_seq
        else:
            assert late[il] > early[il] > 0
    # decode slows with the context only through the two attention layers
    short = plan(spec, HOST, Wishes(n_ctx=8192, n_gpu_layers=0, prompt_tokens=256)).performance
    long = plan(spec, HOST, Wishes(n_ctx=8192, n_gpu_layers=0, prompt_tokens=6000)).performance
    assert long.decode_tok_s < short.decode_tok_s
