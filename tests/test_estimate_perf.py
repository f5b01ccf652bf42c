"""Roofline speed formulas: hand-computed cases and the structural claims of perf.py."""

from dataclasses import replace

import pytest

from rooflight.estimate import Calibration, RunConfig, Wishes, plan, plan_memory
from rooflight.estimate.calibration import Ratio
from rooflight.estimate.kv import kv_bytes_read_per_token
from rooflight.estimate.layers import layer_table
from rooflight.estimate.perf import BACKENDS, SAMPLING_S_PER_VOCAB, decode_time_s
from rooflight.gguf.from_hparams import spec_from_hparams
from test_estimate_memory import GiB, gemma_like, llama, machine


def test_decode_time_is_bytes_over_bandwidth_plus_fixed_cost_cpu():
    spec = llama()
    hw = machine(ram=64 * GiB, backend="cpu")  # CPU at 50 GB/s
    # No reported clock (cycle tables at DEFAULT_CPU_MHZ): with its 3 GHz at the fitted x86
    # clock share (0.60) this 8-thread host sits at the memory/compute crossover, and the
    # case is about the memory-bound formula
    hw = replace(hw, cpu=replace(hw.cpu, max_freq_mhz=None))
    cfg = RunConfig(n_ctx=4096, n_gpu_layers=0, n_threads=8)
    mem = plan_memory(spec, hw, cfg)
    c = BACKENDS["cpu"]
    table = layer_table(spec)
    weights = sum(table.active_bytes) + table.output_bytes
    kv = sum(kv_bytes_read_per_token(spec, cfg, i, 1000) for i in range(32))
    fixed = SAMPLING_S_PER_VOCAB * 32000 + 32 * c.layer_overhead_s
    expected = (weights + kv) / (50e9 * c.decode_efficiency) + fixed
    t, t_fixed = decode_time_s(spec, hw, cfg, mem, 1000)
    assert t == pytest.approx(expected)
    assert t_fixed == pytest.approx(fixed)


def test_kv_read_grows_with_position_and_is_padded():
    spec = llama()
    cfg = RunConfig(n_ctx=8192, n_gpu_layers=0, n_threads=8)
    assert kv_bytes_read_per_token(spec, cfg, 0, 1) == kv_bytes_read_per_token(spec, cfg, 0, 256)
    assert kv_bytes_read_per_token(spec, cfg, 0, 257) == 2 * kv_bytes_read_per_token(spec, cfg, 0, 256)
    assert kv_bytes_read_per_token(spec, cfg, 0, 100_000) == kv_bytes_read_per_token(spec, cfg, 0, 8192)


def test_partial_offload_adds_device_times_not_blends():
    spec = llama()
    hw = machine(80 * GiB, ram=64 * GiB)
    gpu_only = plan(spec, hw, Wishes(n_ctx=2048, n_gpu_layers=33)).performance.decode_tok_s
    cpu_only = plan(spec, hw, Wishes(n_ctx=2048, n_gpu_layers=0)).performance.decode_tok_s
    half = plan(spec, hw, Wishes(n_ctx=2048, n_gpu_layers=17)).performance.decode_tok_s
    # time per token is (about) half the GPU time plus half the CPU time
    expected = 1 / (0.5 / gpu_only + 0.5 / cpu_only)
    assert half == pytest.approx(expected, rel=0.1)
    assert cpu_only < half < gpu_only


def test_faster_memory_means_faster_decode_and_lower_bits_too():
    spec4 = llama("Q4_0")
    spec8 = llama("Q8_0")
    slow, fast = machine(24 * GiB), machine(24 * GiB)
    fast = fast.__class__(cpu=fast.cpu, gpus=(fast.gpus[0].__class__(0, "g", "nvidia", 24 * GiB, None, 2000.0, 100.0),),
                          backend="cuda")
    d = lambda s, h: plan(s, h, Wishes(n_ctx=2048)).performance.decode_tok_s  # noqa: E731
    assert d(spec4, fast) > d(spec4, slow)
    assert d(spec4, slow) > d(spec8, slow)


def test_moe_decode_reads_only_active_experts():
    dense = spec_from_hparams(name="d", arch="llama", ftype="Q4_0", n_layer=24, n_embd=2048, n_head=16, n_head_kv=4,
                              n_ff=1024, n_vocab=32000, context_length=8192, n_expert=8, n_expert_used=8)
    moe = spec_from_hparams(name="m", arch="llama", ftype="Q4_0", n_layer=24, n_embd=2048, n_head=16, n_head_kv=4,
                            n_ff=1024, n_vocab=32000, context_length=8192, n_expert=8, n_expert_used=2)
    assert moe.file_bytes == dense.file_bytes
    assert moe.active_params < dense.active_params / 2
    hw = machine(ram=48 * GiB)  # CPU at 50 GB/s: bandwidth-bound
    assert plan(moe, hw, Wishes(n_ctx=4096)).performance.decode_tok_s > 1.8 * plan(
        dense, hw, Wishes(n_ctx=4096)).performance.decode_tok_s


def test_prefill_is_compute_bound_on_gpu_and_pcie_bound_when_partial():
    spec = llama("F16")
    full = plan(spec, machine(80 * GiB), Wishes(n_ctx=4096)).performance
    assert full.prefill_bound == "compute"
    partial = plan(spec, machine(80 * GiB), Wishes(n_ctx=4096, n_gpu_layers=8)).performance
    assert partial.prefill_bound == "pcie"
    assert partial.prefill_tok_s < full.prefill_tok_s


def test_a_gpu_build_runs_big_prompt_matmuls_on_the_gpu_with_no_layers_on_it():
    """llama.cpp starts a backend for each of the build's GPUs whatever n_gpu_layers is, and
    its scheduler offloads a host weight's matmul to the first GPU for batches of 32+ tokens
    (op_offload): with no layer on the GPU, a long prompt is bound by copying the weights
    over PCIe, a short one still runs on the CPU."""
    spec = llama("F16")
    gpu, cpu_only = machine(80 * GiB), replace(machine(80 * GiB), gpus=(), backend="cpu")
    none_on_gpu = plan(spec, gpu, Wishes(n_ctx=4096, n_gpu_layers=0, prompt_tokens=512)).performance
    cpu = plan(spec, cpu_only, Wishes(n_ctx=4096, n_gpu_layers=0, prompt_tokens=512)).performance
    assert none_on_gpu.prefill_bound == "pcie" and cpu.prefill_bound != "pcie"
    assert none_on_gpu.prefill_tok_s > cpu.prefill_tok_s
    assert none_on_gpu.decode_tok_s == pytest.approx(cpu.decode_tok_s)  # one token: the CPU's
    short = plan(spec, gpu, Wishes(n_ctx=4096, n_gpu_layers=0, prompt_tokens=16, n_batch=16, n_ubatch=16)).performance
    short_cpu = plan(spec, cpu_only, Wishes(n_ctx=4096, n_gpu_layers=0, prompt_tokens=16, n_batch=16,
                                            n_ubatch=16)).performance
    assert short.prefill_tok_s == pytest.approx(short_cpu.prefill_tok_s)


def test_calibration_scales_and_narrows():
    spec = llama()
    hw = machine(24 * GiB)
    raw = plan(spec, hw, Wishes(n_ctx=2048)).performance
    cal = plan(spec, hw, Wishes(n_ctx=2048), calibration=Calibration(0.5, 2.0, 5)).performance
    assert cal.calibrated and not raw.calibrated
    assert (cal.basis, raw.basis) == ("calibrated", "table")
    assert cal.decode_tok_s == pytest.approx(raw.decode_tok_s * 0.5)
    assert cal.prefill_tok_s == pytest.approx(raw.prefill_tok_s * 2.0)
    width = lambda p: p.decode_tok_s_range[1] / p.decode_tok_s_range[0]  # noqa: E731
    # no per-run detail: nothing to narrow the range with, it stays the table's
    assert width(cal) == pytest.approx(width(raw))
    # five measurements of this kind that agree within a few percent: the range is theirs
    n_threads = plan(spec, hw, Wishes(n_ctx=2048)).config.n_threads
    ratios = tuple(Ratio(spec.file_type, n_threads, spec.file_bytes, d, 2.0) for d in (0.48, 0.49, 0.5, 0.51, 0.52))
    tight = plan(spec, hw, Wishes(n_ctx=2048), calibration=Calibration(0.5, 2.0, 5, ratios=ratios)).performance
    assert width(tight) < width(raw)
    assert "5 stored measurements" in tight.range_basis
    lo, hi = tight.decode_tok_s_range
    assert lo <= tight.decode_tok_s <= hi


def test_time_to_first_token_is_prompt_over_prefill_plus_one_token():
    p = plan(llama(), machine(24 * GiB), Wishes(n_ctx=4096, prompt_tokens=1000)).performance
    assert p.time_to_first_token_s == pytest.approx(1000 / p.prefill_tok_s + 1 / p.decode_tok_s)


def test_ranking_speed_many_plans_are_cheap():
    import time

    specs = [llama(ft) for ft in ("Q4_0", "Q8_0", "F16", "Q4_K_M")]
    hw = machine(8 * GiB)
    t0 = time.perf_counter()
    for s in specs:
        for ctx in (2048, 8192, 32768):
            plan(s, hw, Wishes(n_ctx=ctx))
    # 12 full plans with auto GPU layers; generous bound (the bench/ figure is the real one)
    assert time.perf_counter() - t0 < 2.0


def test_cpu_decode_slows_with_context_and_gqa_costs_less():
    # measured on this project's CPU (cpu_attention._ATTENTION_CYCLES): at 4k positions attention
    # took 4-10x the weights' time on a small model; the estimate must fall with context.
    # No reported clock, like that VM: the cycle tables hold at DEFAULT_CPU_MHZ there
    hw = machine(ram=64 * GiB, backend="cpu")
    hw = replace(hw, cpu=replace(hw.cpu, max_freq_mhz=None))
    mha, gqa = llama(n_head_kv=32), llama(n_head_kv=8)

    def decode(spec, prompt, flash="on"):
        w = Wishes(n_ctx=32768, n_threads=8, prompt_tokens=prompt, flash_attn=flash)
        return plan(spec, hw, w).performance.decode_tok_s

    assert decode(mha, 16384) < 0.8 * decode(mha, 512)
    assert decode(gqa, 16384) > decode(mha, 16384)  # fewer KV rows to walk
    # without flash attention the cache goes through batched mat-muls: faster decode on a CPU
    assert decode(mha, 16384, "off") > decode(mha, 16384, "on")


def test_decode_time_includes_cpu_attention_at_the_position():
    spec = llama()
    hw = machine(ram=64 * GiB, backend="cpu")
    cfg = RunConfig(n_ctx=8192, n_gpu_layers=0, n_threads=8, flash_attn=True)
    mem = plan_memory(spec, hw, cfg)
    short, _ = decode_time_s(spec, hw, cfg, mem, 100)
    long, _ = decode_time_s(spec, hw, cfg, mem, 8000)
    assert long > short


def test_prefill_attention_of_sliding_window_layers_stops_at_the_window():
    # Gemma-3-270M measured (2 threads): 870 tok/s for a 2048-token prompt, 801 for 4096;
    # counting full-context attention in its 15 windowed layers predicted ~250 at 4096
    from test_estimate_memory import gemma_like

    spec, hw = gemma_like(), machine(ram=64 * GiB, backend="cpu")

    def prefill(n):
        return plan(spec, hw, Wishes(n_ctx=8192, n_threads=2, prompt_tokens=n)).performance.prefill_tok_s

    assert prefill(4096) > 0.6 * prefill(512)


def test_volta_runs_quantized_prompts_as_float_gemms_from_batch_64():
    # llama.cpp's ggml_cuda_should_use_mmq: FP16 tensor cores but no int8 MMA (Volta) means
    # dp4a MMQ below 64 tokens, dequantize + F16 GEMM from 64 on; Turing and Pascal keep MMQ
    from rooflight.estimate.tensor_rates import dequantizes_for_gemm
    from rooflight.hardware import profile_from_dict

    def gpu(name):
        return profile_from_dict({"gpus": [{"name": name}], "backend": "cuda"}, measure_bandwidth=False).gpus[0]

    v100, t4, p40 = gpu("NVIDIA V100 PCIe 16GB"), gpu("NVIDIA Tesla T4"), gpu("NVIDIA Tesla P40")
    assert dequantizes_for_gemm(v100, "cuda", 512) and dequantizes_for_gemm(v100, "cuda", 64)
    assert not dequantizes_for_gemm(v100, "cuda", 63)
    assert not dequantizes_for_gemm(v100, "vulkan", 512)  # only CUDA's MMQ rule
    assert not dequantizes_for_gemm(t4, "cuda", 512) and not dequantizes_for_gemm(p40, "cuda", 512)
    # a GPU without dp4a (the P100, compute capability 6.0): cuBLAS for dense models past
    # MMVQ's 8 tokens, MMQ for MoE ones (not in the GPU table: see README, The GPU table)
    p100 = replace(p40, name="Tesla P100-PCIE-16GB", compute_capability="6.0")
    assert dequantizes_for_gemm(p100, "cuda", 16) and not dequantizes_for_gemm(p100, "cuda", 8)
    assert not dequantizes_for_gemm(p100, "cuda", 512, "Q4_K", n_expert=128)

    # the plan prices those prompts at the float efficiency: faster than the int8 path by
    # the ratio of the two fitted efficiencies (both against the same 112 TFLOPS here)
    hw = profile_from_dict({"gpus": [{"name": "NVIDIA V100 PCIe 16GB"}], "backend": "cuda",
                            "cpu": {"ram_total_bytes": 64 * GiB}}, measure_bandwidth=False)
    spec = llama("Q4_0")
    big = plan(spec, hw, Wishes(n_ctx=4096, n_ubatch=512, prompt_tokens=512)).performance.prefill_tok_s
    small = plan(spec, hw, Wishes(n_ctx=4096, n_ubatch=32, prompt_tokens=512)).performance.prefill_tok_s
    cuda = BACKENDS["cuda"]
    assert big / small > 0.8 * cuda.prefill_efficiency_float / cuda.prefill_efficiency_quant


def test_a_gpu_that_multiplies_quantized_prompts_as_f16_first_converts_them(monkeypatch):
    """On the cuBLAS path (a V100 from 64 tokens on) every quantized weight is converted into
    an F16 buffer before the GEMM (ggml-cuda.cu ggml_cuda_mul_mat_cublas_impl), so a Q8_0
    prompt takes longer than the same model's F16 one: the same GEMM, plus a pass over the
    Q8_0 bytes read and the F16 bytes written (the RTX 4090 of a 2024-01 build, on this path:
    7664 tok/s Q8_0 against 11048 F16). On an MMQ GPU the int8 kernel reads Q8_0 directly."""
    from rooflight.estimate.perf import _read_bytes_s, prefill_time_s
    from rooflight.hardware import profile_from_dict

    def prompt_s(gpu_name, ftype):
        hw = profile_from_dict({"gpus": [{"name": gpu_name}], "backend": "cuda",
                                "cpu": {"ram_total_bytes": 64 * GiB}}, measure_bandwidth=False)
        spec = llama(ftype)
        est = plan(spec, hw, Wishes(n_ctx=4096, n_ubatch=512, prompt_tokens=512))
        return prefill_time_s(spec, hw, est.config, est.memory, 512)[0], spec, hw

    q8, spec, hw = prompt_s("NVIDIA V100 PCIe 16GB", "Q8_0")
    f16, f16_spec, _ = prompt_s("NVIDIA V100 PCIe 16GB", "F16")
    blocks = [t for t in spec.tensors if t.layer is not None]
    convert = (sum(t.n_bytes for t in blocks) + 2 * sum(t.n_elements for t in blocks)) / _read_bytes_s(hw, "gpu0")
    assert q8 == pytest.approx(f16 + convert, rel=0.02)
    mmq_q8, _, _ = prompt_s("NVIDIA GeForce RTX 4090", "Q8_0")
    mmq_f16, _, _ = prompt_s("NVIDIA GeForce RTX 4090", "F16")
    from rooflight.estimate import weight_passes

    # the int8 kernels' arithmetic alone, without their tiles' reads (weight_passes.py)
    monkeypatch.setattr(weight_passes, "TILED_BACKENDS", frozenset())
    arithmetic, _, _ = prompt_s("NVIDIA GeForce RTX 4090", "Q8_0")
    assert arithmetic < 1.5 * mmq_f16  # no conversion pass: priced by the int8 rate instead
    assert mmq_q8 > arithmetic  # plus its tiles' reads


def test_a_prompt_fed_a_token_at_a_time_reads_the_whole_cache_each_step():
    """Each micro-batch reads its layers' KV cache once, as a decode step does: one token per
    micro-batch after a long cache costs about a decode step (no output layer, no sampling)
    and far more than the attention's arithmetic alone would say; at 512 tokens a micro-batch
    the read is spread over them."""
    from rooflight.estimate.perf import prefill_time_s

    spec = llama("Q4_0")
    hw = machine(80 * GiB)
    wishes = dict(n_ctx=36864, n_gpu_layers=33, prompt_tokens=64, gen_tokens=1)
    est = plan(spec, hw, Wishes(**wishes, n_batch=1, n_ubatch=1))
    t_prompt, _ = prefill_time_s(spec, hw, est.config, est.memory, 64, start=32768)
    t_decode, _ = decode_time_s(spec, hw, est.config, est.memory, 32768 + 32)
    table = layer_table(spec)
    rate = hw.gpus[0].bandwidth_gbs * 1e9 * BACKENDS["cuda"].decode_efficiency
    cache = sum(kv_bytes_read_per_token(spec, est.config, i, 32768 + 32) for i in range(spec.n_layer))
    assert t_prompt / 64 >= (sum(table.active_bytes) + cache) / rate * 0.99
    assert t_prompt / 64 == pytest.approx(t_decode, rel=0.15)
    wide = plan(spec, hw, Wishes(**wishes, n_batch=512, n_ubatch=512))
    t_wide, _ = prefill_time_s(spec, hw, wide.config, wide.memory, 64, start=32768)
    assert t_wide < t_prompt / 10


def test_narrow_heads_accumulate_v_in_scalar_code_past_the_f16_simd_block():
    """ggml_vec_mad_f16 takes a head's V row GGML_F16_STEP elements at a time and the rest
    one by one (vec.h): a 64-wide head runs all of it scalar on AVX512-FP16 (blocks of 128),
    none on AVX-512 without FP16 (64), AVX2 (32) or SVE; measured on an AMX Xeon VM, the
    attention of the 25M and 100M accuracy shapes (64 wide) took 1.1-1.6 and 3.7-7.3 ms a
    token more at 512 positions than at 16, which the unit model alone priced at 0.7-0.8 and
    0.8-1.0 (bench/attention_delta.py)."""
    from rooflight.estimate.cpu_attention import (
        SCALAR_V_CYCLES,
        cpu_attention_units,
        f16_simd_block,
    )

    assert [f16_simd_block(isa) for isa in (("avx2", "avx512f", "avx512_fp16"), ("avx2", "avx512f"), ("avx2",),
                                            ("neon", "fp16_va"), ("neon",), ("neon", "sve"), ())] == \
        [128, 64, 32, 32, 16, None, None]
    narrow = llama(n_embd=1024, n_head=16, n_head_kv=4, head_dim=64, n_layer=4)
    wide = llama(n_embd=2048, n_head=16, n_head_kv=4, head_dim=128, n_layer=4)
    cfg = RunConfig(n_ctx=4096, n_gpu_layers=0, n_threads=2, flash_attn=True)
    fp16, avx512 = ("avx2", "avx512f", "avx512_fp16"), ("avx2", "avx512f")

    def units(spec, isa, c=cfg):
        return cpu_attention_units(spec, c, 1000, isa)

    # every V element of every query head and cell, scalar: n_head x 64 x the cycles each (the
    # cells of 2 threads' split of a 1024-cell view: cpu_attention_cells)
    extra = units(narrow, fp16) - units(narrow, avx512)
    assert extra == pytest.approx(4 * 1024 * 16 * 64 * SCALAR_V_CYCLES, rel=0.01)
    assert units(narrow, avx512) == units(narrow, ("avx2",)) == units(narrow, ())
    assert units(wide, fp16) == units(wide, avx512)  # 128 wide: whole blocks everywhere
    # only the flash-attention decode path with an F16 cache accumulates in F16
    assert units(narrow, fp16, replace(cfg, flash_attn=False)) == units(narrow, (), replace(cfg, flash_attn=False))
    assert units(narrow, fp16, replace(cfg, kv_type="q8_0")) == units(narrow, (), replace(cfg, kv_type="q8_0"))
    # and the estimate follows: a long context decodes slower on the AVX512-FP16 CPU
    hw = machine(ram=64 * GiB, backend="cpu")
    on = {isa: plan(narrow, replace(hw, cpu=replace(hw.cpu, isa=isa)),
                    Wishes(n_ctx=8192, n_threads=2, prompt_tokens=4096, flash_attn="on")).performance.decode_tok_s
          for isa in (fp16, avx512)}
    assert on[fp16] < 0.9 * on[avx512]


def test_cpu_decode_attention_costs_the_busiest_threads_chunk_of_the_cache_view():
    """llama.cpp's CPU flash attention splits a token's cache view (padded to 256 cells) into
    one chunk per thread from 512 cells on, and skips masked cells: the token waits for the
    fullest chunk. Measured on the Zen 4 VM (bench/attention_split.py): with 2 threads decode
    after 530 positions cost what after 740 did; with 1 thread it grew with the positions."""
    from rooflight.estimate.cpu_attention import cpu_attention_cells

    spec = llama(n_layer=2)
    two = RunConfig(n_ctx=4096, n_gpu_layers=0, n_threads=2, flash_attn=True)
    one = replace(two, n_threads=1)
    assert cpu_attention_cells(spec, two, 530) == cpu_attention_cells(spec, two, 740) == (768, 768)
    assert cpu_attention_cells(spec, one, 530) == (530, 530)
    assert cpu_attention_cells(spec, replace(two, n_threads=16), 530) == (768, 768)
    assert cpu_attention_cells(spec, two, 300) == (512, 512)  # a 512-cell view: the first chunk of 256 full
    assert cpu_attention_cells(spec, two, 200) == (200, 200)  # under 512 cells: heads shared, no split
    # a quantized cache takes the other path; without flash attention the mat-muls see every cell
    assert cpu_attention_cells(spec, replace(two, kv_type="q8_0"), 530) == (530, 530)
    assert cpu_attention_cells(spec, replace(two, flash_attn=False), 530) == (768, 768)


def test_a_sliding_window_layer_costs_its_window_or_the_busiest_chunk_around_it():
    """A Gemma 3 window of 512 in its 1024-cell cache: the kernel visits the window, which
    lies in one thread's chunk; bench/swa_attention.py measured the windowed model's extra
    time at 4096 positions as 0.290 of the full model's with 1 thread (0.265 priced, 0.369
    by the whole cache) and 0.358 with 2 (0.358 priced)."""
    from rooflight.estimate.cpu_attention import cpu_attention_cells
    from rooflight.estimate.kv import kv_cells_attended, kv_reads_by_layer, window_positions

    spec = gemma_like()
    two = RunConfig(n_ctx=8192, n_gpu_layers=0, n_threads=2, flash_attn=True)
    visited = kv_cells_attended(spec, two, 4096)
    assert visited[:6] == (512,) * 5 + (4096,)
    assert cpu_attention_cells(spec, replace(two, n_threads=1), 4096)[:6] == (512,) * 5 + (4096,)
    assert cpu_attention_cells(spec, two, 4096)[:6] == (1024,) * 5 + (4352,)
    # the bytes it reads are the visited cells'; a GPU's reads stay the padded view's
    row = 2 * 256 * 2  # K and V, one head of 256, f16
    assert kv_reads_by_layer(spec, two, 4096, attended=True)[0] == 512 * row
    assert kv_reads_by_layer(spec, two, 4096)[0] == 1024 * row
    # llama4's chunked window: the positions since its chunk began
    chunked = replace(spec, swa_type="chunked")
    assert window_positions(chunked, 0, 8192 + 100) == 100 % 512 + 1
    assert window_positions(spec, 5, 4096) is None  # a full layer
