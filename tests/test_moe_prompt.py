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
    # the per-type split (the CPU's MUL_MAT_ID price) follows the same moves
    assert sum(per_dev[CPU].routed_by_type.values()) == pytest.approx(
        sum(sum(t.values()) for t in experts.expert_table(qwen3_moe).by_type[:10]))


def test_cpu_experts_cost_more_than_dense_matmuls_by_type():
    """ggml-cpu multiplies routed experts with MUL_MAT_ID, dearer than the dense kernels a
    probe measures (bench/moe_prompt_cpu.py); unmeasured types take their class's value."""
    from rooflight.estimate.moe_prompt import CPU_EXPERT_COST, cpu_expert_cost, cpu_extra_by_type

    assert all(v > 1.0 for v in CPU_EXPERT_COST.values())
    assert cpu_expert_cost("bf16") == CPU_EXPERT_COST["F16"]
    assert cpu_expert_cost("Q4_K") == pytest.approx((CPU_EXPERT_COST["Q8_0"] + CPU_EXPERT_COST["Q4_0"]) / 2)
    extra = cpu_extra_by_type({"Q8_0": 1e6, "F16": 2e6})
    assert extra == {"Q8_0": pytest.approx(1e6 * (CPU_EXPERT_COST["Q8_0"] - 1)),
                     "F16": pytest.approx(2e6 * (CPU_EXPERT_COST["F16"] - 1))}


def test_a_probe_s_measured_expert_costs_stand_before_the_table_s():
    """This machine's MUL_MAT_ID costs (MachineProbe.expert_costs) price its types; a type it
    did not measure takes the mean of its class's measured ones, a class it measured none of
    the table's."""
    from rooflight.estimate.moe_prompt import CPU_EXPERT_COST, cpu_expert_cost, cpu_extra_by_type

    measured = {"Q4_K": 2.4, "Q8_0": 2.0}
    assert cpu_expert_cost("q4_k", measured) == 2.4
    assert cpu_expert_cost("Q6_K", measured) == pytest.approx(2.2)  # quantized: their mean
    assert cpu_expert_cost("F16", measured) == CPU_EXPERT_COST["F16"]  # no float type measured
    assert cpu_expert_cost("BF16", {"F16": 3.0, **measured}) == 3.0
    assert cpu_extra_by_type({"Q4_K": 1e6}, measured) == {"Q4_K": pytest.approx(1.4e6)}


def test_a_probed_machine_prices_moe_prompts_by_its_own_expert_costs(qwen3_moe):
    from dataclasses import replace

    from rooflight.estimate.probe import AttentionCost, FixedCosts, KernelFigure, MachineProbe

    hw = machine(ram=64 * GiB, backend="cpu")
    cfg = RunConfig(n_ctx=4096, n_gpu_layers=0, n_threads=8, flash_attn=True)
    mem = plan_memory(qwen3_moe, hw, cfg)
    kernels = tuple(KernelFigure(t, 0.05e-9, 0.02e-9, 21.0, "memory") for t in ("Q4_K", "Q6_K", "Q8_0", "F16", "F32"))
    probe = MachineProbe(machine="m", build="b", n_threads=8, n_ubatch=512, kernels=kernels,
                         attention=(AttentionCost(True, 0.3e-9, 0.03e-9),), fixed=FixedCosts(70e-6, 25e-6, 3e-9),
                         spread=0.1, disturbed=False)

    def prompt_s(costs):
        return prefill_time_s(qwen3_moe, hw, cfg, mem, 512, probe=replace(probe, expert_costs=costs))[0]

    at_1, at_2, at_3 = prompt_s((("Q4_K", 1.0),)), prompt_s((("Q4_K", 2.0),)), prompt_s((("Q4_K", 3.0),))
    assert at_1 < at_2 < at_3 and at_3 - at_2 == pytest.approx(at_2 - at_1)  # linear, as probe.expert_cost needs
    # the model's Q6_K experts take the measured quantized type's cost too
    assert prompt_s((("Q4_K", 2.0),)) > prompt_s((("Q4_K", 2.0), ("Q6_K", 1.0)))


def test_a_cpu_moe_prompt_pays_mul_mat_id_and_a_gpu_one_does_not(qwen3_moe, monkeypatch):
    from rooflight.estimate import moe_prompt

    cpu_hw = machine(ram=64 * GiB, backend="cpu")
    cfg = RunConfig(n_ctx=4096, n_gpu_layers=0, n_threads=8, flash_attn=True)
    gpu_hw = machine(96 * GiB)
    gcfg = RunConfig(n_ctx=4096, n_gpu_layers=qwen3_moe.n_layer + 1, n_threads=8, flash_attn=True)

    def times():
        return (prefill_time_s(qwen3_moe, cpu_hw, cfg, plan_memory(qwen3_moe, cpu_hw, cfg), 512)[0],
                prefill_time_s(qwen3_moe, gpu_hw, gcfg, plan_memory(qwen3_moe, gpu_hw, gcfg), 512)[0])

    cpu_s, gpu_s = times()
    monkeypatch.setattr(moe_prompt, "CPU_EXPERT_COST", {k: 1.0 for k in moe_prompt.CPU_EXPERT_COST})
    dense_cpu_s, dense_gpu_s = times()
    assert cpu_s > 1.2 * dense_cpu_s  # most of Qwen3-30B-A3B's prompt work is routed experts
    assert gpu_s == pytest.approx(dense_gpu_s)
