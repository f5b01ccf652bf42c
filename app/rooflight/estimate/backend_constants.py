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
    decode_band: tuple[float, float] = (0.8, 1.15)
    prefill_band: tuple[float, float] = (0.7, 1.3)
    band_basis: str = "hand-chosen (not yet fitted)"


# Bands chosen by hand before any fit (kept until bench/fit_constants.py replaces them):
# known backends x0.8-1.15 decode, x0.7-1.3 prefill; guessed backends x0.6-1.3, x0.5-1.5.
_HAND_KNOWN = dict(decode_band=(0.8, 1.15), prefill_band=(0.7, 1.3), band_basis="hand-chosen (not yet fitted)")
_HAND_GUESSED = dict(decode_band=(0.6, 1.3), prefill_band=(0.5, 1.5), band_basis="hand-chosen (not yet fitted)")

# GPU figures fitted on published llama-bench results (REFERENCE.md §4): decode efficiency
# and per-layer cost solve the RTX 3090 / RTX 3060 Q4_0 pair (158.2 and 75.6 t/s at 936 and
# 360 GB/s: 0.88 and 63 us/layer), and reproduce RTX 4090 F16/Q8_0 within 5%; prefill from
# RTX 4090 F16 pp512 (0.90 of 165 TFLOPS) and the quantized 4090/3090/3060 spread (0.62 to
# 1.1 of the FP16 figure: int8 MMQ kernels): 0.8.
CUDA = BackendConstants(0.88, 63e-6, 0.90, 0.80, "llama-bench, REFERENCE.md §4 (RTX 3090/3060/4090)", **_HAND_KNOWN)
# Apple: M2 and M2 Max F16/Q8_0 pairs give 0.95 and ~195 us/layer; pp512 F16 0.75, Q4_0 0.67.
METAL = BackendConstants(0.95, 195e-6, 0.75, 0.67, "llama.cpp discussion #4167, REFERENCE.md §4 (M2, M2 Max)",
                         **_HAND_KNOWN)
# ROCm, Vulkan, SYCL: no published pairs in REFERENCE.md; assume CUDA-like kernels with
# lower efficiency. Marked as assumptions in the output range (wider).
ROCM = BackendConstants(0.75, 80e-6, 0.6, 0.5, "assumed from CUDA, lower kernel efficiency", **_HAND_GUESSED)
VULKAN = BackendConstants(0.70, 90e-6, 0.5, 0.45, "assumed from CUDA, lower kernel efficiency", **_HAND_GUESSED)
SYCL = VULKAN
# CPU: fitted on this project's 2-core AMD EPYC VM with llama.cpp 0.3.36 against the
# measured copy bandwidth (hardware/bandwidth.py) over generated llama models of 10-400 MB
# and Gemma-3-270M (bench/accuracy.py prints the check).
# Decode efficiency > 1: decode only reads, and the measured figure is a copy (read+write);
# F16 models (bandwidth-bound) read at 42.5 GB/s against a measured 37.1 here. The fixed
# cost (about 0.1 ms per token for 4-18 layers) is from the intercept of the same fit.
# Prefill efficiencies are per weight type (perf.CPU_PREFILL_EFFICIENCY).
CPU = BackendConstants(1.15, 10e-6, 0.38, 0.42, "fitted on a 2-core EPYC VM, bench/accuracy.py", **_HAND_KNOWN)

BACKENDS = {"cuda": CUDA, "metal": METAL, "rocm": ROCM, "vulkan": VULKAN, "sycl": SYCL, "cpu": CPU}

# Clock when the OS does not report one (VMs often don't): a typical all-core turbo.
# An assumption, not a measurement.
DEFAULT_CPU_MHZ = 3000.0
