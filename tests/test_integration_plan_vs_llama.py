"""The memory plan against what llama.cpp really allocates, on generated models.

Each case writes a small real GGUF, plans it for this machine (CPU backend), loads it with
llama-cpp-python at exactly the planned RunConfig and compares the plan with the buffers
llama.cpp reports in its log. KV cache must match exactly; weights exactly (llama.cpp also
reports tensors it copies into its repacked CPU layout: those are subtracted); the total
within 5%.
"""

from dataclasses import replace

import pytest

from rooflight.estimate import Wishes, plan
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware.profile import CPUInfo, HardwareProfile
from rooflight.runtime import amx
from rooflight.runtime.confirm import confirm
from rooflight.runtime.measure import measure

llama_cpp = pytest.importorskip("llama_cpp")

GiB = 2**30
ROUNDING = 2**20 // 100  # llama.cpp logs MiB with two decimals

# this machine's llama.cpp places weights in an AMX buffer or not (runtime/amx.py), and the
# plan must say the same to match it
HOST = HardwareProfile(
    cpu=CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0,
                amx_weights=amx.amx_weights_here()),
    backend="cpu",
)


def _weights_held(path, spec, est, got) -> int:
    """The weights llama.cpp holds in RAM, each counted once. From its log: the buffers less
    the repacked copies of weights the mapped file still holds. Where an AMX buffer holds
    weights the log cannot say which (it copies F16 ones without a line, and the mapped range
    need not cover the converted ones), so its no-alloc figures answer (runtime/confirm.py,
    exact there: bench/amx_memory.py)."""
    if amx.AMX_BUFFER not in got.model:
        return got.model_bytes - sum(spec.tensor(t).n_bytes for t in got.repacked_tensors)
    told = confirm(path, est)
    assert told.by == "llama.cpp", told.reason
    return told.devices[0].weights_bytes

CASES = {
    "llama-f16": dict(arch="llama", n_layer=4, n_embd=256, n_head=8, n_head_kv=2, n_ff=768, n_vocab=2000, ftype="F16"),
    "llama-q4km": dict(arch="llama", n_layer=4, n_embd=512, n_head=8, n_head_kv=4, n_ff=1536, n_vocab=4000, ftype="Q4_K_M"),
    "gemma3-swa": dict(arch="gemma3", n_layer=7, n_embd=256, n_head=4, n_head_kv=1, head_dim=128, n_ff=512,
                       n_vocab=3000, ftype="Q8_0", sliding_window=128),
    "qwen3moe": dict(arch="qwen3moe", n_layer=3, n_embd=256, n_head=8, n_head_kv=2, n_ff=256, n_vocab=2000,
                     ftype="Q8_0", n_expert=8, n_expert_used=2),
    # Llama 4 Scout's layout: routed experts beside a shared one (every 2nd block here, every
    # block in Scout), dense blocks between; chunked attention in 3 of 4 blocks
    "llama4": dict(arch="llama4", n_layer=8, n_embd=256, n_head=4, n_head_kv=2, n_ff=512, n_ff_exp=256,
                   n_vocab=3000, ftype="Q8_0", n_expert=4, n_expert_used=1, moe_layer_step=2),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    return {name: write_model(d / f"{name}.gguf", context_length=16384, **kw) for name, kw in CASES.items()}


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
def test_plan_matches_llama_cpp_buffers(models, name, wishes):
    path = models[name]
    spec = load_model_spec(str(path))
    est = plan(spec, HOST, replace(wishes, n_gpu_layers=0))
    got = measure(path, est.config, prompt_tokens=1, gen_tokens=1).buffers
    cpu = est.memory.device("cpu")

    # llama.cpp prints MiB with two decimals: allow that rounding per reported buffer
    assert abs(got.kv_bytes - cpu.kv_bytes) <= ROUNDING * len(got.kv), "KV cache differs from llama.cpp's"
    weights = _weights_held(path, spec, est, got)
    assert abs(weights - cpu.weights_bytes) <= 64 * 1024, "weights differ"  # + alignment
    reported = weights + got.kv_bytes + got.compute_bytes + got.output_bytes
    planned = cpu.weights_bytes + cpu.kv_bytes + cpu.compute_bytes
    assert planned == pytest.approx(reported, rel=0.05)


# Gemma 4 31B's layout in small: window layers of 64-wide heads, 2 KV heads; every 6th layer
# full attention with 128-wide heads, 1 KV head, keys doubling as values (no attn_v)
GEMMA4 = dict(n_embd=256, n_head=4, n_ff=512, n_vocab=3000, swa_layers=((True,) * 5 + (False,)) * 2,
              head_dim_swa=64, head_dim_full=128, n_head_kv_swa=2, n_head_kv_full=1, sliding_window=128,
              k_eq_v=True, context_length=16384)


GEMMA4_VARIANTS = {
    "dense": {},
    "moe": dict(n_expert=8, n_expert_used=2, n_ff_exp=128),  # the 26B-A4B's experts beside the dense FFN
    # the E2B's: per-layer embeddings, the last 5 layers on the cache of layers 3 / 4 (llama.cpp
    # takes the two layers before the shared ones), their FFN twice as wide
    "e2b": dict(k_eq_v=False, n_embd_per_layer=32, n_kv_shared=5, double_wide_mlp=True,
                swa_layers=((True,) * 4 + (False,)) * 2),
}


@pytest.fixture(scope="module", params=list(GEMMA4_VARIANTS))
def gemma4_model(request, tmp_path_factory):
    """The 31B's layout, the 26B-A4B's and the E2B's."""
    from rooflight.gguf.gemma4_layout import Gemma4Shape
    from rooflight.gguf.synthetic_gemma4 import write_gemma4_model

    shape = dict(GEMMA4, **GEMMA4_VARIANTS[request.param])
    return write_gemma4_model(tmp_path_factory.mktemp("gemma4") / f"gemma4-{request.param}.gguf",
                              Gemma4Shape(**shape), ftype="Q8_0")


@pytest.mark.parametrize(
    "wishes",
    [Wishes(n_ctx=512, flash_attn="off"), Wishes(n_ctx=4096, flash_attn="on"),
     Wishes(n_ctx=4096, flash_attn="off", n_ubatch=128), Wishes(n_ctx=8192, flash_attn="on", kv_type="q8_0")],
    ids=["512-nofa", "4096-fa", "4096-nofa-ub128", "8192-fa-q8kv"],
)
def test_gemma4_plan_matches_llama_cpp_buffers(gemma4_model, wishes):
    """Layers with head sizes of their own: the KV cache exactly (without flash attention V
    is padded to the widest layer), the weights exactly, the total within 5%."""
    spec = load_model_spec(str(gemma4_model))
    full = spec.swa_layers.index(False)
    assert spec.head_dims(0) == (64, 64) and spec.head_dims(full) == (128, 128)
    est = plan(spec, HOST, replace(wishes, n_gpu_layers=0))
    got = measure(gemma4_model, est.config, prompt_tokens=1, gen_tokens=1).buffers
    cpu = est.memory.device("cpu")
    assert abs(got.kv_bytes - cpu.kv_bytes) <= ROUNDING * len(got.kv), "KV cache differs from llama.cpp's"
    weights = _weights_held(gemma4_model, spec, est, got)
    assert abs(weights - cpu.weights_bytes) <= 64 * 1024, "weights differ"
    reported = weights + got.kv_bytes + got.compute_bytes + got.output_bytes
    planned = cpu.weights_bytes + cpu.kv_bytes + cpu.compute_bytes
    assert planned == pytest.approx(reported, rel=0.05)


def test_llama4_chunked_cache_past_its_chunk(models):
    """Past 8192 positions llama4's chunked blocks keep 8192 + a micro-batch cells (the
    sliding-window cache), its full-attention blocks the whole context."""
    path = models["llama4"]
    spec = load_model_spec(str(path))
    assert spec.swa_type == "chunked" and spec.swa_layers == (True, True, True, False) * 2
    est = plan(spec, HOST, Wishes(n_ctx=16384, n_gpu_layers=0, flash_attn="on"))
    got = measure(path, est.config, prompt_tokens=1, gen_tokens=1).buffers
    cpu = est.memory.device("cpu")
    assert abs(got.kv_bytes - cpu.kv_bytes) <= ROUNDING * len(got.kv), "KV cache differs from llama.cpp's"
    row = 2 * 64 * 2 * 2  # a cell: 2 KV heads x 64 x (K and V) x f16
    assert cpu.kv_bytes == (2 * 16384 + 6 * (8192 + 512)) * row  # 2 full blocks, 6 chunked ones


def test_gemma_270m_package_model_matches(tmp_path):
    from gemma_model import gemma_270m_path

    path = gemma_270m_path()
    spec = load_model_spec(str(path))
    for n_ctx in (2048, 32768):
        est = plan(spec, HOST, Wishes(n_ctx=n_ctx, n_gpu_layers=0, flash_attn="off"))
        got = measure(path, est.config, prompt_tokens=1, gen_tokens=1).buffers
        cpu = est.memory.device("cpu")
        assert abs(got.kv_bytes - cpu.kv_bytes) <= ROUNDING * len(got.kv)
        reported = _weights_held(path, spec, est, got) + got.kv_bytes + got.compute_bytes + got.output_bytes
        assert cpu.total_bytes == pytest.approx(reported, rel=0.05)
