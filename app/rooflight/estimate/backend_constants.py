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
    # MoE prompts: each routed expert's matmul in a micro-batch costs as if it multiplied this
    # many tokens more than the ~T x used/experts it gets (Qwen3-30B-A3B at T=512: 32; gpt-oss-20b
    # at T=2048: 256), beyond the empty columns of its tiles, which moe_prompt.py prices from
    # llama.cpp's tile widths: a fixed cost per expert. 0: the tiles alone.
    moe_expert_overhead_tokens: float = 0.0
    # A block with routed experts costs this much more per token than a dense block: its
    # router, top-k, expert gathers and weighted sum are kernels of their own. 0 in the table
    # (published rows want +0.5 to +1 dense block's worth on Metal and CUDA and none on ROCm
    # or Vulkan: DECISIONS "MoE decode on GPUs"); the GPU half of the probe measures it per GPU.
    moe_layer_overhead_s: float = 0.0
    # measured / predicted ratio quantiles (10th, 90th percentile) out of sample:
    # 8 of 10 measurements fall inside [estimate x lo, estimate x hi]
    decode_band: tuple[float, float] = (0.6, 1.3)
    prefill_band: tuple[float, float] = (0.5, 1.5)
    band_basis: str = "hand-chosen default for a backend with no fitted band"


# Fitted by bench/fit_constants.py on bench/data/llama_bench_rows.json (112 published
# llama-bench rows, 28 devices; each row cites its source). Decode: efficiency against the
# table's peak bandwidth and a cost per layer, weighted least squares on relative time error;
# prefill: efficiency against the matrix rate llama.cpp's kernels use (estimate/tensor_rates.py:
# int8 for quantized weights, FP16-accumulate for F16; the quantized efficiency is that of the
# arithmetic beside the tiled kernels' weight reads, estimate/weight_passes.py), a
# deterministic search on squared log error; moe_expert_overhead_tokens: the median over devices with both dense and MoE prompt rows
# of the overhead that prices its MoE rows at its dense efficiency. Where a backend has no rows
# for a weight class, the value is the one fitted on all rows ("pooled" below). Bands: the
# BAND_TAIL-th to (100 - BAND_TAIL)-th percentile of the leave-one-device-out measured/
# predicted ratios (README "Accuracy"), the backend's own when it has 8 or more, else pooled
# over the GPU backends: the narrowest percentile band that holds 8 of 10 rows of a device
# left out of its derivation (the 10th-90th held 61-72%: a device's rows share its quirks;
# fit_constants.py band_tail). Rerun the script after adding rows
# and write its numbers back until they stop changing (a prompt's fixed part depends on the
# decode constants below); tests/test_fit_constants.py checks these numbers against it.
_FIT = "fitted on published llama-bench rows (bench/fit_constants.py)"
BAND_TAIL = 3
_PCT = f"p{BAND_TAIL:g}-p{100 - BAND_TAIL:g}"
_OWN = _FIT + f"; band: {_PCT} of this backend's leave-one-device-out ratios, checked on held-out devices"
_POOLED = _FIT + f"; band: too few rows of its own, the GPU backends' pooled leave-one-device-out {_PCT}"
# where the pooled band holds fewer than 8 of 10 of the backend's own leave-one-device-out
# ratios, it is widened to hold all of them (fit_constants.py _bands)
_WIDENED = (_FIT + f"; band: too few rows of its own and its devices disagree: the GPU backends' pooled "
            f"leave-one-device-out {_PCT}, widened to hold every one of this backend's own")

# CUDA: 95 rows, 19 devices (RTX 3060/3080/3090/4080/4080 SUPER/4090/5060 Ti/5070 Ti/5080/5090,
# RTX 2000 Ada, RTX PRO 6000 and its Max-Q, V100, P40, H100, L40S, DGX Spark GB10, Jetson AGX
# Orin), and four decode rows after cached positions that fit nothing (fit_constants.cache_check:
# the RTX 4090 read a Qwen2.5-3B's cache at x2.3-2.6 of the estimate's cost). Per-layer cost
# 54 us from 39 decode rows (40 us from 21 before the rows of 2026-12-07; 63 us from solving the
# 3090/3060 pair exactly before that); the P40's 2024 decode rows run x0.82-0.86 of the estimate.
# The V100's gpt-oss prompts fit nothing (fit_constants.checks_only: MoE through the F16 GEMM).
# Float efficiency: F16 rows and quantized prompts run through cuBLAS as F16 (the V100 today,
# the RTX 4090's rows of a 2024-01 build: fit_constants.py prompt_kernel).
CUDA = BackendConstants(0.829, 53.7e-6, 0.471, 0.261, _FIT, moe_expert_overhead_tokens=108,
    decode_band=(0.75, 1.24), prefill_band=(0.48, 1.33), band_basis=_OWN)
# Metal: 52 rows, 10 devices (M1 Max, M1 Pro, M2, M2 Max, M2 Ultra, M3 Max, M3 Ultra, M4 Pro,
# M4 Max, M5), and five decode rows after cached positions that fit nothing
# (fit_constants.cache_check); MoE overhead from the M2 Ultra, the one device with dense and MoE
# prompt rows. The widest misses: the M2 Ultra's 0.6B-3B models decode x1.35-1.76 of the
# estimate (its cost per layer is below the other devices'), M1 Max's Qwen3-30B-A3B x0.65 (MoE
# decode on Metal is slower than its bytes say: gpt-oss-20b x0.85-0.95 on five chips, x1.04 on
# the M2 Ultra).
METAL = BackendConstants(0.839, 149.3e-6, 0.706, 0.606, _FIT, moe_expert_overhead_tokens=19,
    decode_band=(0.78, 1.52), prefill_band=(0.84, 1.39), band_basis=_OWN)
# ROCm: 32 rows, 11 devices (RX 6700 XT, RX 6800, RX 7900 GRE, RX 7900 XTX, RX 9060 XT, Radeon
# PRO W7900, Radeon 780M, MI50, MI100, MI300X, Radeon 8060S / Strix Halo), and one decode row after cached
# positions that fits nothing (fit_constants.cache_check);
# no F16 rows: pooled float efficiency. Its prompts run x0.35 (a Radeon 8060S's gpt-oss-120b on
# Windows) to x1.63-1.66 (the RX 7900 XTX's) of what the other devices predict: one quantized
# efficiency cannot fit them all (the wide band).
ROCM = BackendConstants(0.861, 154.7e-6, 0.590, 0.256, _FIT, moe_expert_overhead_tokens=42,
    decode_band=(0.75, 1.14), prefill_band=(0.4, 1.65), band_basis=_OWN)
# Vulkan: 57 rows, 13 devices (Radeon 8060S / Strix Halo, Radeon 890M and 660M, RX 9070 XT,
# RX 7800 XT, RX 5700 XT, Radeon PRO W7900, RTX 3090, RTX 4070, RTX 5090, Arc Pro B70, Iris Xe,
# Meteor Lake's Arc iGPU), and one decode row after cached positions (the 8060S's: its cache
# read at x1.19 of the estimate's cost); no F16 rows. Integrated GPUs run below what the others
# predict: the Radeon 890M's and 660M's gpt-oss decode x0.75-0.80, the Iris Xe's Gemma-3-1B
# x0.60, the Meteor Lake's gpt-oss-20b x0.13 (the wide decode band). Intel's quantized prompts
# are priced at its FP16 rate (tensor_rates.INT8_BACKENDS_BY_VENDOR); the B70's one prompt
# row (a 2026 apt build) still runs x0.36 of what the other devices predict.
VULKAN = BackendConstants(0.797, 55.7e-6, 0.590, 0.246, _FIT, moe_expert_overhead_tokens=29,
    decode_band=(0.51, 1.24), prefill_band=(0.48, 1.61), band_basis=_OWN)
# SYCL: 25 rows, 4 devices (Arc B580 with ggml-org's backend, 1.5B and 7B models; Intel's
# IPEX-LLM fork and a B70 tree 12 commits past master are left out: neither mainline nor a
# merged pull request; Arc A770 and Arc Pro B70 on 2026 builds, Lunar Lake's Arc 140V on 2025
# builds, Linux and Windows); float efficiency and MoE overhead pooled; quantized prompts priced at the
# FP16 GEMM rate of the GGML_SYCL_F16 build (tensor_rates.FLOAT_GEMM_BACKENDS); a build
# without it (HardwareProfile.sycl_f16 False) at the FP32 rate with the pooled float efficiency,
# checked, not fitted, on three Arc Pro B60 rows of such a build (x0.69-1.10). Still the
# weakest-founded backend: its devices disagree on the cost per layer, which small models
# show: out of sample the 140V decodes x0.61-0.87 of what the others predict, the B580
# x1.56-1.89, and prompts range x0.38 (140V) to x2.08 (B580).
SYCL = BackendConstants(0.577, 160.5e-6, 0.590, 0.138, _FIT, moe_expert_overhead_tokens=42,
    decode_band=(0.61, 1.84), prefill_band=(0.41, 1.99), band_basis=_OWN)
# CPU: fitted on this project's 2-core AMD EPYC VM with llama.cpp 0.3.36 against the
# measured copy bandwidth (hardware/bandwidth.py) over generated llama models of 10-400 MB
# and Gemma-3-270M (bench/accuracy.py prints the check).
# Decode efficiency > 1: decode only reads, and the measured figure is a copy (read+write);
# F16 models (bandwidth-bound) read at 42.5 GB/s against a measured 37.1 here. The fixed
# cost (about 0.1 ms per token for 4-18 layers) is from the intercept of the same fit.
# Prefill efficiencies are per weight type (perf.CPU_PREFILL_EFFICIENCY). A CPU known by its
# datasheet (a what-if profile, the published rows) is priced by the same tables through the
# three shares below, fitted on 176 published rows of 19 CPUs; the band is their
# leave-one-CPU-out BAND_TAIL percentiles (as the GPU bands, above).
_CPU_BAND = ("constants fitted on the project's 2-core EPYC VM, datasheet shares on 19 published CPUs; "
             f"band: {_PCT} of those CPUs' leave-one-CPU-out ratios, checked on held-out CPUs")
CPU = BackendConstants(1.15, 10e-6, 0.38, 0.42, "fitted on a 2-core EPYC VM, bench/accuracy.py",
                       decode_band=(0.53, 2.01), prefill_band=(0.37, 2.2), band_basis=_CPU_BAND)

BACKENDS = {"cuda": CUDA, "metal": METAL, "rocm": ROCM, "vulkan": VULKAN, "sycl": SYCL, "cpu": CPU}

# Hybrid recurrent models (Qwen3.5, Qwen3.6, Qwen3-Next) with layers on a GPU: their state
# scans and extra kernels are priced on a CPU only (recurrent_work.py), and published GPU rows
# of them fall outside the backends' bands (decode 13 of 17 inside, prompts 15 of 19). Their
# band joins the backend's with percentiles of those rows' measured / predicted ratios (36 rows
# of 6 GPUs, bench/data/hybrid_gpu_rows.json), the narrowest that holds 8 of 10 of each GPU's
# rows held out of them (bench/hybrid_gpu_check.py): p1-p99, 14 of 17 decode and 16 of 19
# prompt rows inside.
HYBRID_GPU_DECODE_BAND = (0.52, 1.33)
HYBRID_GPU_PREFILL_BAND = (0.22, 1.92)
HYBRID_GPU_BAND_BASIS = ("widened for a hybrid model's layers on a GPU, which the estimate does not fully price: "
                         "p1-p99 of published hybrid rows on 6 GPUs, checked on GPUs held out")

# CPUs given by their datasheet (what-if profiles, the published rows), per ISA family
# (cpu_family: x86, or arm for NEON chips): the share of a peak bandwidth
# (ram_bandwidth_source "peak") llama.cpp's decode reads at, and the shares of a reported
# maximum (boost) clock at which the CPU cycle tables (fitted on a VM that reports no clock)
# hold for decode and for prompts. Fitted by bench/fit_cpu.py on the published CPU rows of
# each family, each CPU weighted alike; leave-one-CPU-out error in README. The families read
# memory differently: x86 desktops, laptops and servers reach 0.53-0.83 of the datasheet
# peak, the ARM chips in the set (Apple M1/M2/M4 Max CPU clusters, a Raspberry Pi 4, Grace,
# Graviton3/3E) differ among themselves: one ARM share is a compromise (README "Accuracy": CPUs known by their datasheet).


@dataclass(frozen=True)
class CpuShares:
    peak_read: float
    clock: float  # decode (matrix-vector)
    matmul_clock: float  # prompts (matrix-matrix)


CPU_SHARES = {
    "x86": CpuShares(peak_read=0.68, clock=0.604, matmul_clock=0.204),
    "arm": CpuShares(peak_read=0.39, clock=0.958, matmul_clock=0.381),
}


def cpu_family(isa: tuple[str, ...] | list[str], arch: str = "") -> str:
    """arm for NEON chips (or an aarch64/arm64 machine), else x86."""
    return "arm" if "neon" in isa or arch.lower() in ("aarch64", "arm64") else "x86"


# Clock when the OS does not report one (VMs often don't): a typical all-core turbo.
# An assumption, not a measurement (a probe of this machine replaces it where one exists).
DEFAULT_CPU_MHZ = 3000.0
