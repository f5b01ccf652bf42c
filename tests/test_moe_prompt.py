"""MoE prompts: each routed expert's matmul pays a fixed overhead per micro-batch
(estimate/moe_prompt.py), so a MoE prompt gets faster with a larger micro-batch where a
dense one hardly changes: what the published rows show (GB10 and RTX 4090 at n_ubatch 2048
near their dense rate, an RTX PRO 6000 at 512 far below it)."""

from __future__ import annotations

import dataclasses

import pytest

from rooflight.catalog.models import find_model
from rooflight.estimate import RunConfig, backend_constants, moe_prompt, plan_memory
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
    # without the fitted overhead the gain is the tiles' alone: 32 tokens per expert fill a
    # quarter of a 128-column MMQ tile at 512, 128 about two thirds of 1.5 tiles at 2048
    monkeypatch.setitem(backend_constants.BACKENDS, "cuda", dataclasses.replace(
        backend_constants.BACKENDS["cuda"], moe_expert_overhead_tokens=0.0))
    tiles_gain = _prompt_tok_s(qwen3_moe, 2048, hw) / _prompt_tok_s(qwen3_moe, 512, hw)
    assert 1.3 < tiles_gain < moe_gain
    # and with neither, MoE matmuls are priced like dense ones: no such gain
    monkeypatch.setattr(moe_prompt, "expert_tile_columns", lambda *args: None)
    assert _prompt_tok_s(qwen3_moe, 2048, hw) / _prompt_tok_s(qwen3_moe, 512, hw) < 1.1


def test_expert_tiles_follow_llama_cpps_kernel_choice(qwen3_moe):
    """mul_mat_q_switch_J picks J against the micro-batch (NVIDIA, CDNA, RDNA2) or against the
    tokens an expert gets on average (RDNA3/4); Metal's kernel_mul_mm_id tiles are 32 wide;
    Vulkan picks its small, medium or large tile against the tokens per expert."""
    tile = moe_prompt.expert_tile_columns
    assert tile("cuda", None, 512, qwen3_moe) == 128
    assert tile("cuda", None, 20, qwen3_moe) == 24  # fewest tiles at the smallest J that covers 20
    assert tile("rocm", "gfx1100", 512, qwen3_moe) == 32  # 512 x 8 / 128
    assert tile("rocm", "gfx1201", 100, qwen3_moe) == 8  # ceil(100 x 8 / 128) = 7 -> 8
    assert tile("rocm", "gfx908", 512, qwen3_moe) == 128
    assert tile("metal", None, 512, qwen3_moe) == 32
    assert tile("metal", None, 16, qwen3_moe) is None  # mul_mv_id below 32 tokens
    assert tile("vulkan", None, 512, qwen3_moe) == 32  # 32 per expert: the small tile
    assert tile("vulkan", None, 1024, qwen3_moe) == 64
    assert tile("vulkan", None, 2048, qwen3_moe) == 128
    assert tile("sycl", None, 512, qwen3_moe) is None
    assert tile("cuda", None, 512, llama(n_layer=2)) is None


def test_padding_columns_is_what_whole_tiles_hold_beyond_the_tokens():
    pad = moe_prompt.padding_columns
    assert pad(8, 8, 100, 128) == pytest.approx(8 * 128 - 800)  # every expert gets every token
    assert pad(128, 8, 512, 1) == pytest.approx(0.0, abs=1e-6)  # one-column tiles waste nothing
    # 32 tokens an expert on average, 128-wide tiles: almost always one tile, 4x the work
    assert pad(128, 8, 512, 128) == pytest.approx(128 * 128 - 512 * 8, rel=0.01)
    # 256 tokens an expert (gpt-oss-20b at 2048): two tiles or three, about even odds
    assert 0.3 * 128 * 32 < pad(32, 4, 2048, 128) < 0.7 * 128 * 32


def test_the_tiles_price_the_expert_counts_the_published_rows_show(monkeypatch):
    """On the GB10 (llama.cpp's benches/dgx-spark.md, one build, n_ubatch 2048) gpt-oss-120b's
    prompt runs at 0.51 of gpt-oss-20b's: its 128 experts get 64 tokens each, a half-empty
    128-column tile, where gpt-oss-20b's 32 get 256. The tiles alone price that ratio within
    15%; a fixed cost per expert alone (the model before the tiles, fitted at 214 tokens on
    CUDA) put it at six tenths of the measured one."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import fit_constants

    rows = {r["model"]: r for r in fit_constants.load()["rows"]
            if r["device"] == "NVIDIA GB10" and r["test"] == "pp2048" and r["model"].startswith("gpt-oss")}
    measured = rows["gpt-oss-120b"]["t_s"] / rows["gpt-oss-20b"]["t_s"]
    assert measured == pytest.approx(0.512, abs=0.001)

    def predicted(overhead_tokens):
        with fit_constants.constants("cuda", moe_expert_overhead_tokens=overhead_tokens):
            return fit_constants._seconds(rows["gpt-oss-20b"]) / fit_constants._seconds(rows["gpt-oss-120b"])

    assert predicted(0.0) == pytest.approx(measured, rel=0.15)
    monkeypatch.setattr(moe_prompt, "expert_tile_columns", lambda *args: None)
    assert predicted(214.0) < 0.65 * measured


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


def test_a_remote_gpu_multiplies_experts_in_its_own_tiles(qwen3_moe):
    """An rpc-server's GPU runs the same MMQ kernels as a local one: its expert tiles are
    those of its own machine's backend (a CUDA card behind a CPU-only client included)."""
    from rooflight.estimate.perf import _expert_tile
    from rooflight.hardware import profile_from_dict
    from rooflight.hardware.remote import remote_devices

    cpu = {"name": "laptop", "cores": 8, "threads": 16, "ram_total_bytes": 32 * GiB, "ram_bandwidth_gbs": 50.0,
           "isa": ["avx2"]}
    hw = profile_from_dict({"cpu": cpu, "backend": "cpu", "remotes": [
        {"endpoint": "192.168.1.20:50052", "gpus": [{"name": "RTX 3090"}], "backend": "cuda"}]},
        measure_bandwidth=False)
    (remote,) = remote_devices(hw)
    assert _expert_tile(hw, remote.name, 512, qwen3_moe, "Q4_K") == 128
    assert _expert_tile(hw, "cpu", 512, qwen3_moe, "Q4_K") is None
