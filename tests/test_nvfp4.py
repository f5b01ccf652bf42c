"""NVFP4 files: sized from GGML_QUANT_SIZES, checked against llama.cpp, and priced per device
(native FP4 prefill on compute capability 12.x only, estimate/fp4.py)."""

from collections import Counter

import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from rooflight.estimate import Wishes, plan
from rooflight.estimate.fp4 import NATIVE_FP4_PREFILL_SPEEDUP, fp4_share, native_fp4
from rooflight.gguf import load_model_spec
from rooflight.gguf.from_hparams import spec_from_hparams
from rooflight.gguf.synthetic import write_model
from rooflight.hardware.profile import CPUInfo, GPUInfo, HardwareProfile

GiB = 2**30
ROUNDING = 2**20 // 100
CPU = CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0)


def _gpu(name: str, cc: str, tflops: float, bw: float) -> HardwareProfile:
    # figures as resources/gpus.json lists them; only the compute capability differs in kind
    g = GPUInfo(0, name, "nvidia", 32 * GiB, 32 * GiB, bw, tflops, compute_capability=cc)
    return HardwareProfile(cpu=CPU, gpus=(g,), backend="cuda")


def test_nvfp4_is_4_5_bits_per_weight():
    block, nbytes = GGML_QUANT_SIZES[GGMLQuantizationType.NVFP4]
    assert (block, nbytes) == (64, 36)
    spec = spec_from_hparams(name="m", ftype="NVFP4", n_layer=2, n_embd=512, n_head=8, n_head_kv=2,
                             n_ff=1024, n_vocab=1000, context_length=4096)
    blocks = [t for t in spec.tensors if t.layer is not None and len(t.shape) == 2]
    assert blocks and all(t.ggml_type == "NVFP4" and t.n_bytes * 8 == t.n_elements * 4.5 for t in blocks)
    # embeddings and the LM head stay 16-bit, as the converter writes them
    assert spec.tensor("token_embd.weight").ggml_type == "F16"
    assert spec.tensor("output.weight").ggml_type == "F16"


@pytest.fixture(scope="module")
def nvfp4_file(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("nvfp4") / "m.gguf", arch="llama", n_layer=4, n_embd=512,
                       n_head=8, n_head_kv=4, n_ff=1536, n_vocab=4000, ftype="NVFP4", context_length=8192)


def test_nvfp4_file_plan_matches_llama_cpp(nvfp4_file):
    pytest.importorskip("llama_cpp")
    from rooflight.runtime.measure import measure

    spec = load_model_spec(str(nvfp4_file))
    assert spec.file_type == "NVFP4"
    assert Counter(t.ggml_type for t in spec.tensors)["NVFP4"] == 4 * 7
    est = plan(spec, HardwareProfile(cpu=CPU), Wishes(n_ctx=4096, n_gpu_layers=0))
    m = measure(nvfp4_file, est.config, prompt_tokens=8, gen_tokens=4)
    got, cpu = m.buffers, est.memory.device("cpu")
    assert m.decode_tok_s > 0  # llama.cpp's CPU backend runs NVFP4
    assert abs(got.model_bytes - cpu.weights_bytes) <= 64 * 1024
    assert abs(got.kv_bytes - cpu.kv_bytes) <= ROUNDING * len(got.kv)
    reported = got.model_bytes + got.kv_bytes + got.compute_bytes + got.output_bytes
    assert cpu.total_bytes == pytest.approx(reported, rel=0.05)


def test_native_fp4_only_on_compute_capability_12():
    assert native_fp4(_gpu("NVIDIA GeForce RTX 5090", "12.0", 209.5, 1792.0).gpus[0], "cuda")
    assert native_fp4(_gpu("NVIDIA GB10", "12.1", 100.0, 273.0).gpus[0], "cuda")
    # datacenter Blackwell is sm_100: llama.cpp's blackwell_mma_available() is false there
    assert not native_fp4(_gpu("NVIDIA B200", "10.0", 2250.0, 8000.0).gpus[0], "cuda")
    assert not native_fp4(_gpu("NVIDIA GeForce RTX 4090", "8.9", 165.2, 1008.0).gpus[0], "cuda")
    assert not native_fp4(_gpu("NVIDIA GeForce RTX 5090", "12.0", 209.5, 1792.0).gpus[0], "vulkan")


def test_prefill_priced_by_device():
    kw = dict(name="m", n_layer=8, n_embd=2048, n_head=16, n_head_kv=4, n_ff=8192, n_vocab=32000,
              context_length=8192)
    nvfp4 = spec_from_hparams(ftype="NVFP4", **kw)
    q4 = spec_from_hparams(ftype="Q4_K_M", **kw)
    assert fp4_share(nvfp4) == 1.0 and fp4_share(q4) == 0.0
    wishes = Wishes(n_ctx=4096, prompt_tokens=2048)
    blackwell = _gpu("NVIDIA GeForce RTX 5090", "12.0", 209.5, 1792.0)
    same_but_cc10 = _gpu("NVIDIA GeForce RTX 5090", "10.0", 209.5, 1792.0)
    fast = plan(nvfp4, blackwell, wishes).performance
    slow = plan(nvfp4, same_but_cc10, wishes).performance
    assert fast.prefill_tok_s > slow.prefill_tok_s * 1.15
    assert fast.prefill_tok_s <= slow.prefill_tok_s * NATIVE_FP4_PREFILL_SPEEDUP * 1.001
    # decode reads the same bytes either way
    assert fast.decode_tok_s == pytest.approx(slow.decode_tok_s)
    # a K-quant model is not sped up by the FP4 path
    assert plan(q4, blackwell, wishes).performance.prefill_tok_s == pytest.approx(
        plan(q4, same_but_cc10, wishes).performance.prefill_tok_s)
