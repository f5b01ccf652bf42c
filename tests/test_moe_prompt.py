"""MoE prompts: each routed expert's matmul pays a fixed overhead per micro-batch
(estimate/moe_prompt.py), so a MoE prompt gets faster with a larger micro-batch where a
dense one hardly changes: what the published rows show (GB10 and RTX 4090 at n_ubatch 2048
near their dense rate, an RTX PRO 6000 at 512 far below it)."""

from __future__ import annotations

import dataclasses

import pytest

from rooflight.catalog.models import find_model
from rooflight.estimate import RunConfig, backend_constants, plan_memory
from rooflight.estimate.moe_prompt import experts_touched, overhead_multiply_adds
from rooflight.estimate.perf import _prefill_work, prefill_time_s
from test_estimate_memory import GiB, llama, machine


@pytest.fixture(scope="module")
def qwen3_moe():
    entry = find_model("qwen3-30b-a3b")
    assert entry is not None
    spec = entry.spec("Q4_K_M")
    assert (spec.n_expert, spec.n_expert_used) == (128, 8)
    return spec


def test_experts_touched_grows_to_all_of_them(qwen3_moe):
    assert experts_touched(llama(n_layer=2), 512) == 0.0
    assert experts_touched(qwen3_moe, 1) == pytest.approx(8)
    assert experts_touched(qwen3_moe, 4) < 4 * 8
    assert experts_touched(qwen3_moe, 512) == pytest.approx(128, rel=1e-6)


def test_the_overhead_is_per_expert_not_per_token(qwen3_moe):
    routed = 1e9  # multiply-adds per token of the 8 routed experts
    at_512 = overhead_multiply_adds(qwen3_moe, routed, 512, 100.0)
    assert at_512 == pytest.approx(128 * routed / 8 * 100.0, rel=1e-6)
    # every expert is touched at both sizes: the same cost per micro-batch, a quarter per token
    assert overhead_multiply_adds(qwen3_moe, routed, 2048, 100.0) == pytest.approx(at_512, rel=1e-6)
    assert overhead_multiply_adds(qwen3_moe, routed, 512, 0.0) == 0.0
    assert overhead_multiply_adds(llama(n_layer=2), routed, 512, 100.0) == 0.0


def _prompt_tok_s(spec, n_ubatch, hw, n_tokens=4096):
    cfg = RunConfig(n_ctx=8192, n_gpu_layers=spec.n_layer + 1, n_threads=8, flash_attn=True,
                    n_batch=n_ubatch, n_ubatch=n_ubatch)
    return n_tokens / prefill_time_s(spec, hw, cfg, plan_memory(spec, hw, cfg), n_tokens)[0]


def test_a_moe_prompt_gains_from_a_larger_micro_batch_and_a_dense_one_does_not(qwen3_moe, monkeypatch):
    hw = machine(96 * GiB)
    dense = llama(ftype="Q4_K_M")
    assert backend_constants.BACKENDS["cuda"].moe_expert_overhead_tokens > 0
    moe_gain = _prompt_tok_s(qwen3_moe, 2048, hw) / _prompt_tok_s(qwen3_moe, 512, hw)
    dense_gain = _prompt_tok_s(dense, 2048, hw) / _prompt_tok_s(dense, 512, hw)
    assert moe_gain > 1.3 and dense_gain < 1.1
    # without the overhead, MoE matmuls are priced like dense ones: no such gain
    monkeypatch.setitem(backend_constants.BACKENDS, "cuda", dataclasses.replace(
        backend_constants.BACKENDS["cuda"], moe_expert_overhead_tokens=0.0))
    flat_gain = _prompt_tok_s(qwen3_moe, 2048, hw) / _prompt_tok_s(qwen3_moe, 512, hw)
    assert flat_gain < 1.1


def test_routed_work_follows_the_experts_to_the_cpu(qwen3_moe):
    """--n-cpu-moe moves the routed experts' work, and the overhead's base, with them."""
    from rooflight.estimate import experts, output_rows
    from rooflight.estimate.perf import _PrefillWork
    from rooflight.estimate.placement import CPU, gpu_name

    gpu = gpu_name(0)
    devices = (gpu,) * (qwen3_moe.n_layer + 1)
    per_dev = _prefill_work(qwen3_moe, devices)
    total = sum(experts.expert_table(qwen3_moe).active_params)
    assert per_dev[gpu].routed_params == pytest.approx(total)
    experts.shift_prefill(per_dev, qwen3_moe, devices, 10, lambda: _PrefillWork(params_by_type={}))
    on_cpu = sum(experts.expert_table(qwen3_moe).active_params[:10])
    assert per_dev[CPU].routed_params == pytest.approx(on_cpu)
    assert per_dev[gpu].routed_params == pytest.approx(total - on_cpu)
    output_rows.crop_last_ffn(per_dev, qwen3_moe, devices, 10)  # the last block's experts: output rows only
    last = experts.expert_table(qwen3_moe).active_params[-1]
    assert per_dev[gpu].routed_params == pytest.approx(total - on_cpu - last)
