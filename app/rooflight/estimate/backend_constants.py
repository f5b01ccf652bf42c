"""Table constants of the roofline per llama.cpp backend (estimate/perf.py uses them).

They stand in for what a probe of this machine would measure (decode efficiency against
peak bandwidth, fixed cost per layer, prefill efficiency against peak FLOPs) wherever no
probe or calibration exists: what-if hardware and machines never measured. The bands say
how far measured speeds fall from the estimate out of sample: the ratio measured /
predicted that 80% of published rows fall inside.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendConstants:
    decode_efficiency: float  # achieved / peak memory bandwidth during decode
    layer_overhead_s: float  # fixed time per layer per token (launches, graph, sync)
    prefill_efficiency_float: float  # achieved / peak FP16 FLOPs, F16/BF16/F32 weights
    prefill_efficiency_quant: float  # same, quantized weights (MMQ / dequant kernels)
    source: str
    # MoE models: expert FLOPs cost this many dense FLOPs in prompt processing. With a
    # micro-batch of T tokens each expert multiplies only ~T x used/experts of them (Qwen3-30B-A3B
    # at T=512: 32), far below the tile sizes the matmul kernels reach their rate at.
    moe_prefill_slowdown: float = 1.0
    # measured / predicted ratio quantiles (10th, 90th percentile) out of sample:
    # 8 of 10 measurements fall inside [estimate x lo, estimate x hi]
    decode_band: tuple[float, float] = (0.6, 1.3)
    prefill_band: tuple[float, float] = (0.5, 1.5)
    band_basis: str = "hand-chosen default for a backend with no fitted band"


# Fitted by bench/fit_constants.py on bench/data/llama_bench_rows.json (93 published
# llama-bench rows, 21 devices; each row cites its source). Decode: efficiency against the
# table's peak bandwidth and a cost per layer, weighted least squares on relative time error;
# prefill: efficiency against the matrix rate llama.cpp's kernels use (estimate/tensor_rates.py:
# int8 for quantized weights, FP16-accumulate for F16), a deterministic search on squared log
# error; moe_prefill_slowdown: the median over devices with both dense and MoE prompt rows of
# the ratio of their two efficiencies. Where a backend has no rows for a weight class, the
# value is the one fitted on all rows ("pooled" below). Bands: the 10th-90th percentile of the
# leave-one-device-out measured/predicted ratios (README "Accuracy"), the backend's own when
# it has 8 or more, else pooled over the GPU backends. Rerun the script after adding rows
# and write its numbers back until they stop changing (a prompt's fixed part depends on the
# decode constants below); tests/test_fit_constants.py checks these numbers against it.
_FIT = "fitted on published llama-bench rows (bench/fit_constants.py)"
_OWN = _FIT + "; band: leave-one-device-out p10-p90 of this backend's rows"
_POOLED = _FIT + "; band: too few rows of its own, the GPU backends' pooled leave-one-device-out p10-p90"
_ROCM_BAND = _FIT + "; band: prefill from its own 8 leave-one-device-out rows, decode (4 rows) pooled over the GPU backends"

# CUDA: 24 rows, 6 devices (RTX 3060/3090/4090, V100, P40, DGX Spark GB10). Per-layer cost
# 52 us from 9 decode rows (was 63 us from solving the 3090/3060 pair exactly).
CUDA = BackendConstants(0.881, 52.2e-6, 0.453, 0.200, _FIT, moe_prefill_slowdown=1.74,
    decode_band=(0.93, 1.05), prefill_band=(0.58, 1.39), band_basis=_OWN)
# Metal: 18 rows, 5 devices (M1 Max, M2, M2 Max, M2 Ultra, M5); one MoE prompt row, no dense
# one on the same device: pooled MoE slowdown. M1 Max's Qwen3-30B-A3B decode runs x0.63 of the
# estimate (MoE decode on Metal is slower than its bytes say), the widest metal miss.
METAL = BackendConstants(0.919, 172.4e-6, 0.725, 0.623, _FIT, moe_prefill_slowdown=1.92,
    decode_band=(0.88, 1.17), prefill_band=(0.92, 1.07), band_basis=_OWN)
# ROCm: 12 rows, 4 devices (RX 6700 XT, RX 7900 XTX, MI50, Radeon 8060S / Strix Halo); no F16
# rows: pooled float efficiency. Strix Halo's 2025 ROCm prompts run x0.45-0.56 of the estimate
# while the discrete cards run x0.98-1.7: one quantized efficiency cannot fit both (the wide band).
ROCM = BackendConstants(0.824, 108.0e-6, 0.648, 0.389, _FIT, moe_prefill_slowdown=2.00,
    decode_band=(0.8, 1.24), prefill_band=(0.53, 1.56), band_basis=_ROCM_BAND)
# Vulkan: 29 rows, 5 devices (Radeon 8060S / Strix Halo, RX 9070 XT, RX 5700 XT, RTX 3090,
# RTX 5090); no F16 rows.
VULKAN = BackendConstants(0.908, 87.8e-6, 0.648, 0.233, _FIT, moe_prefill_slowdown=2.17,
    decode_band=(0.79, 1.26), prefill_band=(0.71, 1.15), band_basis=_OWN)
# SYCL: 6 rows, 2 devices (Arc B580 with ggml-org's backend and Intel's IPEX-LLM build, Lunar
# Lake's Arc 140V); per-layer cost: the 90 us prior; float efficiency and MoE slowdown pooled.
# Still the weakest-founded backend.
SYCL = BackendConstants(0.679, 90.0e-6, 0.648, 0.199, _FIT, moe_prefill_slowdown=1.92,
    decode_band=(0.8, 1.24), prefill_band=(0.6, 1.45), band_basis=_POOLED)
# CPU: fitted on this project's 2-core AMD EPYC VM with llama.cpp 0.3.36 against the
# measured copy bandwidth (hardware/bandwidth.py) over generated llama models of 10-400 MB
# and Gemma-3-270M (bench/accuracy.py prints the check).
# Decode efficiency > 1: decode only reads, and the measured figure is a copy (read+write);
# F16 models (bandwidth-bound) read at 42.5 GB/s against a measured 37.1 here. The fixed
# cost (about 0.1 ms per token for 4-18 layers) is from the intercept of the same fit.
# Prefill efficiencies are per weight type (perf.CPU_PREFILL_EFFICIENCY). Not refitted: the
# one published CPU in the fitting set (Ryzen 9 7950X, 2024 build, memory speed unpublished)
# cannot refit per-type CPU tables; its 4 rows run x0.54-0.64 (decode) and x0.26-0.53
# (prefill) of the estimate, and the band is widened to cover them.
_CPU_BAND = ("constants fitted on the project's 2-core EPYC VM; band: the GPU backends' pooled "
             "leave-one-device-out p10-p90, widened to the published Ryzen 9 7950X rows")
CPU = BackendConstants(1.15, 10e-6, 0.38, 0.42, "fitted on a 2-core EPYC VM, bench/accuracy.py",
                       decode_band=(0.54, 1.24), prefill_band=(0.26, 1.45), band_basis=_CPU_BAND)

BACKENDS = {"cuda": CUDA, "metal": METAL, "rocm": ROCM, "vulkan": VULKAN, "sycl": SYCL, "cpu": CPU}

# Clock when the OS does not report one (VMs often don't): a typical all-core turbo.
# An assumption, not a measurement (a probe of this machine replaces it where one exists).
DEFAULT_CPU_MHZ = 3000.0
