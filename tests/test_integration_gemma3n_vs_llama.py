"""Gemma 3n (per-layer embeddings, AltUp, shared KV cache) against llama.cpp's buffers.

A generated gemma3n file (gguf/synthetic_gemma3n.py) with 22 layers: every 5th layer
global, layers 20 and 21 attend to the caches of layers 18 / 19 and keep none of their own.
Weights and KV cache must match llama.cpp's log exactly, the total within 5% as in
test_integration_plan_vs_llama.py.
"""

from dataclasses import replace

import pytest

from rooflight.estimate import Wishes, plan
from rooflight.estimate.kv import kv_bytes_by_layer, kv_reads_by_layer
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic_gemma3n import write_gemma3n_model
from rooflight.hardware.profile import CPUInfo, HardwareProfile
from rooflight.runtime.measure import measure

llama_cpp = pytest.importorskip("llama_cpp")

GiB = 2**30
ROUNDING = 2**20 // 100

HOST = HardwareProfile(
    cpu=CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0),
    backend="cpu",
)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_gemma3n_model(tmp_path_factory.mktemp("g3n") / "gemma3n.gguf", n_layer=22, n_vocab=4000,
                               ftype="Q8_0", sliding_window=128)


def test_layout_from_header(model):
    spec = load_model_spec(str(model))
    assert spec.swa_layers == tuple(il % 5 < 4 for il in range(22))
    assert spec.kv_reuse[:20] == (-1,) * 20 and spec.kv_reuse[20:] == (18, 18)
    est = plan(spec, HOST, Wishes(n_ctx=4096, n_gpu_layers=0))
    sizes = kv_bytes_by_layer(spec, est.config)
    reads = kv_reads_by_layer(spec, est.config, 2000)
    # the sharing layers allocate nothing but read their source layer's cache
    assert sizes[20] == sizes[21] == 0 and sizes[18] > 0
    assert reads[20] == reads[18] > 0


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
def test_gemma3n_plan_matches_llama_cpp_buffers(model, wishes):
    spec = load_model_spec(str(model))
    est = plan(spec, HOST, replace(wishes, n_gpu_layers=0))
    got = measure(model, est.config, prompt_tokens=1, gen_tokens=1).buffers
    cpu = est.memory.device("cpu")
    assert abs(got.kv_bytes - cpu.kv_bytes) <= ROUNDING * len(got.kv)
    repacked = sum(spec.tensor(t).n_bytes for t in got.repacked_tensors)
    assert abs(got.model_bytes - repacked - cpu.weights_bytes) <= 64 * 1024
    reported = got.model_bytes - repacked + got.kv_bytes + got.compute_bytes + got.output_bytes
    assert cpu.weights_bytes + cpu.kv_bytes + cpu.compute_bytes == pytest.approx(reported, rel=0.05)
    # the per-layer inputs make the compute buffer 5x a plain transformer's: modelled, not lucky
    assert cpu.compute_bytes == pytest.approx(got.compute_bytes + got.output_bytes, rel=0.05)
