"""On SYCL a prompt's attention runs F16 matrix products on the XMX engines (oneDNN's SDPA,
oneMKL's flash attention, or the batched F16 GEMM without flash attention), FP32 builds
included; what those paths decline falls to the tile kernel on the vector units
(estimate/sycl_attention.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rooflight.estimate import RunConfig, plan_memory
from rooflight.estimate.backend_constants import BACKENDS
from rooflight.estimate.perf import prefill_attention_flops, prefill_time_s
from rooflight.estimate.sycl_attention import is_alchemist, on_vector_units
from rooflight.estimate.tensor_rates import attention_tflops
from rooflight.gguf.spec import TensorInfo
from rooflight.hardware import lookup_gpu, profile_from_dict
from test_estimate_memory import llama

B580, A770 = "Intel Arc B580", "Intel Arc A770"


def _b580(sycl_f16: bool = True):
    return profile_from_dict({"gpus": [{"name": B580}], "backend": "sycl", "sycl_f16": sycl_f16},
                             measure_bandwidth=False)


@pytest.mark.parametrize("arch, n_head_kv, head_dim, gpu, n_kv, tile", [
    ("llama", 8, 128, B580, 512, False),  # GQA: oneDNN's SDPA
    ("llama", 32, 128, B580, 512, False),  # MHA: oneDNN too (it has no GQA condition)
    ("gpt-oss", 8, 64, B580, 4096, True),  # attention sinks: neither oneDNN nor oneMKL
    ("gemma2", 8, 128, B580, 4096, True),  # a logit soft-cap: neither
    ("bloom", 32, 128, B580, 4096, True),  # ALiBi: neither
    ("llama", 32, 64, A770, 512, True),  # Alchemist declines 64-wide heads in oneDNN, MHA in oneMKL
    ("llama", 8, 64, A770, 512, True),  # ... and oneMKL a cache under 1024 positions
    ("llama", 8, 64, A770, 2048, False),  # GQA at 2048 cached positions: oneMKL's F16 GEMMs
    ("llama", 8, 64, B580, 512, False),  # Battlemage takes 64-wide heads in oneDNN
])
def test_which_kernel_multiplies_a_prompts_attention(arch, n_head_kv, head_dim, gpu, n_kv, tile):
    spec = llama(arch=arch, n_layer=4, n_head_kv=n_head_kv, head_dim=head_dim)
    assert on_vector_units(spec, gpu, True, 512, n_kv) is tile
    assert on_vector_units(spec, gpu, False, 512, n_kv) is False  # the batched F16 GEMM


def test_a_short_batch_and_mla_fall_to_the_tile_kernel():
    spec = llama(n_layer=4)
    assert on_vector_units(spec, B580, True, 16, 4096)  # under 32 query tokens: neither path
    assert on_vector_units(replace(spec, kv_lora_rank=512), B580, True, 512, 4096)  # K and V latents differ


def test_optional_sinks_are_told_by_the_file():
    spec = llama(n_layer=2)
    without = replace(spec, architecture="mimo2")
    with_sinks = replace(without, tensors=(*spec.tensors, TensorInfo("blk.1.attn_sinks.weight", "F32", (32,), 128, 1)))
    assert not on_vector_units(without, B580, True, 512, 4096)
    assert on_vector_units(with_sinks, B580, True, 512, 4096)


def test_alchemist_is_the_arc_a_series():
    assert is_alchemist("Intel Arc A770") and is_alchemist("Intel(R) Arc(TM) A750 Graphics")
    assert is_alchemist("Intel Arc Pro A60") and is_alchemist("Intel Arc A370M")
    assert not is_alchemist("Intel Arc B580") and not is_alchemist("Intel Arc 140V")
    assert not is_alchemist("Intel Arc Pro B60")


def test_the_tile_kernel_runs_packed_fp16_at_twice_the_fp32_rate_or_fp32_in_an_fp32_build():
    gpu = _b580().gpus[0]
    fp32 = lookup_gpu(B580)["fp32_tflops"]
    assert attention_tflops(gpu, "sycl", vector_units=True) == pytest.approx(2 * fp32)
    assert attention_tflops(gpu, "sycl", vector_units=True, fp32_gemm=True) == pytest.approx(fp32)
    # the XMX paths: the FP16 rate, whatever the build
    assert attention_tflops(gpu, "sycl") == pytest.approx(lookup_gpu(B580)["fp16_tflops"])


@pytest.mark.parametrize("sycl_f16", [True, False])
def test_a_long_prompt_pays_attention_at_the_rate_of_its_kernel(sycl_f16):
    hw = _b580(sycl_f16)
    gqa = llama(ftype="Q4_0", n_layer=8)
    sinks = replace(gqa, architecture="gpt-oss")  # the same shape with gpt-oss's attention sinks
    cfg = RunConfig(n_ctx=10 * 1024, n_gpu_layers=gqa.n_layer + 1, n_threads=8, flash_attn=True)
    extra = prefill_attention_flops(gqa, 8192, 512) - prefill_attention_flops(gqa, 0, 512)
    eff = BACKENDS["sycl"].prefill_efficiency_float
    gpu = hw.gpus[0]
    for spec, rate in ((gqa, attention_tflops(gpu, "sycl")),
                       (sinks, attention_tflops(gpu, "sycl", vector_units=True, fp32_gemm=not sycl_f16))):
        mem = plan_memory(spec, hw, cfg)
        fresh = prefill_time_s(spec, hw, cfg, mem, 512)[0]
        later = prefill_time_s(spec, hw, cfg, mem, 512, start=8192)[0]
        assert later - fresh == pytest.approx(extra / (rate * 1e12 * eff), rel=0.02)
