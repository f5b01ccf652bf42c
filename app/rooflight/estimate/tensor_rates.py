"""The matrix rate llama.cpp's prompt-processing kernels run at on a GPU.

A profile's `fp16_tflops` is the dense FP16 tensor rate with FP32 accumulate (GPU table).
llama.cpp does not use that rate: quantized weights go through its MMQ kernels, which
multiply int8 (NVIDIA Turing and later: int8 tensor cores; Volta and Pascal: dp4a), and F16
weights through cuBLAS with FP16 accumulate. GeForce cards run FP32-accumulate FP16 at half
the FP16-accumulate rate and int8 at 4x it, data-centre and workstation cards run both FP16
modes at one rate and int8 at 2x: pricing every card by `fp16_tflops` makes the A100, H100,
L40S or RTX 6000 look twice as fast at quantized prompts as they are next to a GeForce. The
table's `int8_tops` and `fp16_acc16_tflops` hold the rates the kernels use; this module
scales the profile's figure by the table's ratio, so a profile that overrides fp16_tflops
(or an Apple chip with fewer GPU cores) keeps its own scale.
"""

from __future__ import annotations

from functools import lru_cache

from rooflight.hardware.gpu_table import lookup_gpu
from rooflight.hardware.profile import GPUInfo

DEFAULT_FP16_TFLOPS = 10.0  # a GPU with no figure at all (warned about where it is detected)


@lru_cache(maxsize=512)
def _ratios(name: str) -> tuple[float, float]:
    """(int8 / fp16, fp16-accumulate / fp16) from the table entry; 1.0 where not listed."""
    entry = lookup_gpu(name)
    if not entry or not entry.get("fp16_tflops"):
        return 1.0, 1.0
    fp16 = entry["fp16_tflops"]
    return (entry.get("int8_tops") or fp16) / fp16, (entry.get("fp16_acc16_tflops") or fp16) / fp16


# Backends whose quantized prompt matmuls run no int8 kernel: llama.cpp's SYCL backend
# dequantizes the weights and multiplies them with oneDNN's GEMM (docs/backend/SYCL.md, "Use
# oneDNN as the default GEMM library"; its MMQ path is switched off, ggml_sycl_supports_mmq
# returns false, "TODO: accuracy issues in MMQ"). Pricing them at the table's int8 rate made
# the one Intel GPU with an int8 figure (Arc 140V) look 2x faster at prompts than the Arc B580
# and A770 in the fitting set, whose 2x slower measured rates then dragged the SYCL fit.
FLOAT_GEMM_BACKENDS = frozenset({"sycl"})


# Micro-batches from this size up run quantized weights through cuBLAS on NVIDIA GPUs with
# FP16 tensor cores but no int8 MMA: llama.cpp's ggml_cuda_should_use_mmq (ggml-cuda/mmq.cu,
# llama-cpp-python 0.3.36) uses its dp4a MMQ kernels there only below MMQ_DP4A_MAX_BATCH_SIZE.
MMQ_DP4A_MAX_BATCH_SIZE = 64


def dequantizes_for_gemm(gpu: GPUInfo | None, backend: str | None, micro_batch: int) -> bool:
    """Whether llama.cpp multiplies this GPU's quantized weights as F16 (dequantized, then
    the F16 GEMM) for prompt micro-batches of this size, not with its int8 MMQ kernels.

    CUDA on Volta (compute capability 7.0/7.2: FP16 tensor cores, no int8 MMA, which MMQ
    needs from Turing, 7.5, on) at batches of 64 and more: the V100's prompts then run at
    the float efficiency, 2.1x what the int8 one predicted for them."""
    if backend != "cuda" or gpu is None or micro_batch < MMQ_DP4A_MAX_BATCH_SIZE:
        return False
    try:
        major, minor = (int(x) for x in str(gpu.compute_capability).split(".")[:2])
    except ValueError:
        return False
    return major == 7 and minor < 5


def matmul_tflops(gpu: GPUInfo, quantized: bool, backend: str | None = None) -> float:
    """Peak matrix rate (T ops/s) of the kernels llama.cpp uses for this weight class."""
    base = gpu.fp16_tflops or DEFAULT_FP16_TFLOPS
    int8, acc16 = _ratios(gpu.name)
    if quantized and backend in FLOAT_GEMM_BACKENDS:
        return base * acc16  # dequantized to F16, then the F16 GEMM
    return base * (int8 if quantized else acc16)
