"""A prompt's attention on a GPU runs FP16 products (flash attention's mma kernels), not the
int8 MMQ rate its quantized weights run at (tensor_rates.attention_tflops); and a prompt
after cached positions (a later chat turn, llama-bench -d) attends to all of them."""

from __future__ import annotations

import pytest

from rooflight.estimate import RunConfig, plan_memory
from rooflight.estimate.backend_constants import BACKENDS
from rooflight.estimate.perf import prefill_attention_flops, prefill_time_s
from rooflight.estimate.tensor_rates import HOPPER_MMA_SYNC_SHARE, attention_tflops, matmul_tflops
from rooflight.hardware import lookup_gpu, profile_from_dict
from test_estimate_memory import llama


def _machine(name: str, backend: str = "cuda"):
    return profile_from_dict({"gpus": [{"name": name}], "backend": backend}, measure_bandwidth=False)


def test_attention_runs_at_the_fp16_rates_half_with_fp32_accumulators():
    # GeForce: FP16-accumulate at twice the FP32-accumulate rate -> 4/3 of fp16_tflops
    rtx = _machine("RTX 4090").gpus[0]
    entry = lookup_gpu("RTX 4090")
    assert attention_tflops(rtx, "cuda") == pytest.approx(entry["fp16_tflops"] * 4 / 3, rel=1e-3)
    assert attention_tflops(rtx, "cuda") < matmul_tflops(rtx, True, "cuda") / 2  # far below int8
    # a data-centre card runs both accumulators at one rate; Hopper through mma.sync
    h100 = _machine("H100 SXM").gpus[0]
    assert attention_tflops(h100, "cuda") == pytest.approx(
        lookup_gpu("H100 SXM")["fp16_tflops"] * HOPPER_MMA_SYNC_SHARE, rel=1e-3)
    # AMD lists one FP16 rate
    rx = _machine("RX 7900 XTX", "rocm").gpus[0]
    assert attention_tflops(rx, "rocm") == pytest.approx(lookup_gpu("RX 7900 XTX")["fp16_tflops"])


def test_a_prompt_after_cached_positions_pays_their_attention_at_that_rate():
    hw = _machine("RTX 3090")
    spec = llama(ftype="Q4_0")
    cfg = RunConfig(n_ctx=34 * 1024, n_gpu_layers=spec.n_layer + 1, n_threads=8, flash_attn=True)
    mem = plan_memory(spec, hw, cfg)
    fresh = prefill_time_s(spec, hw, cfg, mem, 512)[0]
    later = prefill_time_s(spec, hw, cfg, mem, 512, start=32768)[0]
    extra = prefill_attention_flops(spec, 32768, 512) - prefill_attention_flops(spec, 0, 512)
    rate = attention_tflops(hw.gpus[0], "cuda") * 1e12 * BACKENDS["cuda"].prefill_efficiency_float
    assert later - fresh == pytest.approx(extra / rate, rel=0.02)
    assert later > 2 * fresh  # at 32k cached positions attention is most of a prompt's time


def test_an_estimate_after_cached_positions_is_slower_for_prompt_and_decode():
    from rooflight.estimate import plan_memory as _plan_memory
    from rooflight.estimate.perf import estimate_performance

    hw = _machine("RTX 3090")
    spec = llama(ftype="Q4_0")
    cfg = RunConfig(n_ctx=34 * 1024, n_gpu_layers=spec.n_layer + 1, n_threads=8, flash_attn=True)
    mem = _plan_memory(spec, hw, cfg)
    fresh = estimate_performance(spec, hw, cfg, mem, prompt_tokens=512, gen_tokens=64)
    later = estimate_performance(spec, hw, cfg, mem, prompt_tokens=512, gen_tokens=64, prompt_start=32768)
    assert later.prefill_tok_s < fresh.prefill_tok_s / 2
    assert later.decode_tok_s < fresh.decode_tok_s  # decode reads the longer cache too
