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

from rooflight.estimate.layers import layer_table
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.gpu_table import lookup_gpu
from rooflight.hardware.profile import GPUInfo

DEFAULT_FP16_TFLOPS = 10.0  # a GPU with no figure at all (warned about where it is detected)


# Vendors whose table `int8_tops` is the rate of one backend's kernels only. AMD's figure is
# the instruction llama.cpp's HIP MMQ kernels multiply int8 with (ggml-cuda/common.cuh
# ggml_cuda_dp4a, mmq.cuh: MFMA on CDNA, WMMA on RDNA3/4, v_dot4_i32_i8 on gfx906/RDNA2); its
# Vulkan kernels on AMD are priced at the FP16 rate (README, "Prompt rates on AMD GPUs").
# Intel's figure is its XMX engines' int8 rate, which no llama.cpp kernel multiplies with:
# SYCL dequantizes for oneDNN's GEMM (FLOAT_GEMM_BACKENDS), and ggml-vulkan's int8 matrix
# kernels are built for AMD RDNA3/4 only (ggml-vulkan.cpp, llama-cpp-python 0.3.36:
# use_cm1_int), so on Intel its quantized prompts take the integer dot product on the
# vector units (4 int8 products per FP32 lane: the FP16 XMX rate again) or the FP16 matrices.
INT8_BACKENDS_BY_VENDOR = {"amd": frozenset({"rocm"}), "intel": frozenset()}


@lru_cache(maxsize=512)
def _ratios(name: str, backend: str | None = None) -> tuple[float, float]:
    """(int8 / fp16, fp16-accumulate / fp16) from the table entry for this backend; 1.0
    where not listed."""
    entry = lookup_gpu(name)
    if not entry or not entry.get("fp16_tflops"):
        return 1.0, 1.0
    fp16 = entry["fp16_tflops"]
    int8 = entry.get("int8_tops") or fp16
    only = INT8_BACKENDS_BY_VENDOR.get(entry.get("vendor", ""))
    if only is not None and backend not in only:
        int8 = fp16
    return int8 / fp16, (entry.get("fp16_acc16_tflops") or fp16) / fp16


@lru_cache(maxsize=512)
def amd_gfx(name: str) -> str | None:
    """The table's LLVM target ("gfx1100") of an AMD GPU, None where not listed."""
    entry = lookup_gpu(name)
    return entry.get("gfx") if entry else None


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


# Quantized types llama.cpp's MMQ kernels implement (ggml_cuda_should_use_mmq); any other
# (IQ1_M, TQ1_0, TQ2_0) is dequantized for the F16 GEMM on CUDA and ROCm alike.
MMQ_TYPES = frozenset(
    "Q1_0 Q2_0 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ1_S IQ2_XXS IQ2_XS IQ2_S "
    "IQ3_XXS IQ3_S IQ4_XS IQ4_NL MXFP4 NVFP4".split())
FLOAT_TYPES = frozenset({"F16", "BF16", "F32"})


def dequantizes_for_gemm(
    gpu: GPUInfo | None, backend: str | None, micro_batch: int,
    weight_type: str | None = None, n_expert: int = 0,
) -> bool:
    """Whether llama.cpp multiplies this GPU's quantized weights as F16 (dequantized, then
    the F16 GEMM) for prompt micro-batches of this size, not with its int8 MMQ kernels.

    CUDA on Pascal without dp4a (the P100, 6.0) for dense models at every batch MMVQ does
    not take; on Volta (compute capability 7.0/7.2: FP16 tensor cores, no int8 MMA, which MMQ
    needs from Turing, 7.5, on) at batches of 64 and more: the V100's prompts then run at
    the float efficiency, 2.1x what the int8 one predicted for them. ROCm: the AMD rules of
    ggml_cuda_should_use_mmq by the table's gfx target (_rocm_dequantizes). weight_type: the
    model's main ggml type ("Q4_K"; main_weight_type); None keeps the type-blind rules.
    n_expert: the model's experts (several AMD rules keep MMQ for big MoE models)."""
    if backend not in ("cuda", "rocm") or gpu is None or micro_batch <= MMVQ_MAX_BATCH_SIZE:
        return False
    wtype = weight_type.upper() if weight_type else None
    if wtype and wtype not in MMQ_TYPES and wtype not in FLOAT_TYPES:
        return True  # no MMQ kernel for this type
    if backend == "rocm":
        gfx = amd_gfx(gpu.name)
        if not gfx:
            return False
        return _rocm_dequantizes(gfx, micro_batch, wtype, n_expert)
    cc = _compute_capability(gpu)
    if cc is not None and cc < (6, 1):
        # no dp4a (the P100, compute capability 6.0): MMQ only for MoE models, whose experts
        # it runs faster even with dp4a emulated; dense ones go to the F16 cuBLAS GEMM
        return not n_expert
    if micro_batch < MMQ_DP4A_MAX_BATCH_SIZE:
        return False
    return cc is not None and cc[0] == 7 and cc[1] < 5


def _compute_capability(gpu: GPUInfo) -> tuple[int, int] | None:
    """(major, minor) of an NVIDIA GPU's compute capability ("8.9" -> (8, 9)), None unknown."""
    try:
        major, minor = (int(x) for x in str(gpu.compute_capability).split(".")[:2])
    except ValueError:
        return None
    return major, minor


# llama.cpp multiplies batches of up to this many tokens with its MMVQ kernels, whatever the GPU
MMVQ_MAX_BATCH_SIZE = 8
# CDNA before CDNA3 keeps MMQ up to these batch sizes (ggml_cuda_should_use_mmq)
CDNA_MMQ_MAX_BATCH = 128
CDNA_MMQ_MAX_BATCH_K = 256  # Q4_K and Q5_K
_CDNA_MMQ_ALWAYS = frozenset({"Q4_0", "Q4_1", "Q5_0", "Q5_1"})


def _rocm_dequantizes(gfx: str, ne11: int, wtype: str | None, n_expert: int) -> bool:
    """ggml_cuda_should_use_mmq's AMD branches (ggml-cuda/mmq.cu, llama-cpp-python 0.3.36),
    negated: True where hipBLAS multiplies the dequantized weights."""
    gfx = gfx.lower()
    if gfx in ("gfx908", "gfx90a") or gfx.startswith("gfx95"):  # CDNA1/2/4: MFMA
        if n_expert > 64 or ne11 <= CDNA_MMQ_MAX_BATCH or wtype is None or wtype in _CDNA_MMQ_ALWAYS:
            return False
        return not (ne11 <= CDNA_MMQ_MAX_BATCH_K and wtype in ("Q4_K", "Q5_K"))
    if gfx.startswith("gfx94"):  # CDNA3: MMQ always (rocBLAS/Tensile is slow there)
        return False
    if gfx.startswith("gfx11"):  # RDNA3 (gfx110x) and RDNA3.5 (gfx115x): WMMA MMQ
        if n_expert >= 64 or wtype is None:
            return False
        rdna3_5 = gfx.startswith("gfx115")
        if wtype == "Q2_K":
            return ne11 > 128
        if wtype == "Q6_K":
            return ne11 > (256 if rdna3_5 else 128)
        if wtype in ("IQ2_XS", "IQ2_S"):
            return not rdna3_5 and ne11 > 128
        return False
    if gfx in ("gfx900", "gfx909", "gfx90c"):  # Vega 10 / GCN APUs: no native dp4a
        return n_expert == 0
    return False  # RDNA1/2/4, gfx906: MMQ


def main_weight_type(spec: ModelSpec) -> str | None:
    """The ggml type of most of the weight elements a prompt token multiplies (the blocks'
    matrices, routed experts at their active share): "Q4_K" for a Q4_K_M file. From the
    spec's layer table, so a cached spec is priced without building its tensor list."""
    count: dict[str, float] = {}
    for kinds in layer_table(spec).active_by_type:
        for kind, n in kinds.items():
            count[kind] = count.get(kind, 0.0) + n
    return max(count, key=lambda k: count[k]) if count else None


# Hopper (compute capability 9.x) reaches its tensor peak only through the warpgroup wgmma
# instructions; llama.cpp's MMQ kernels issue the per-warp mma.sync (ggml-cuda has no wgmma,
# llama-cpp-python 0.3.36), which instruction-level microbenchmarks measure at 494 of 757
# TFLOPS on an H800 (Luo et al., "Dissecting the NVIDIA Hopper Architecture through
# Microbenchmarking", arXiv:2501.12084, as quoted by github.com/waynehacking8/
# blackwell-tensorcore-kernels). F16 weights go through cuBLAS, which uses wgmma.
HOPPER_MMA_SYNC_SHARE = 494 / 757


def _mma_sync_share(gpu: GPUInfo, backend: str | None) -> float:
    cc = _compute_capability(gpu) if backend == "cuda" else None
    return HOPPER_MMA_SYNC_SHARE if cc is not None and cc[0] == 9 else 1.0


# A SYCL build without GGML_SYCL_F16 (the CMake default) dequantizes every prompt matmul's
# weights, F16 ones too, to FP32 and multiplies them with oneDNN in its strict fp32 mode, on
# the vector units (ggml-sycl.cpp ggml_sycl_op_mul_mat_sycl, gemm.hpp: set_fpmath_mode(f16)
# only under GGML_SYCL_F16): the table's fp32_tflops. A GPU the table has no FP32 figure for
# takes the Xe cores' ratio, 256 FP32 FLOPs to 2,048 FP16 XMX ops per clock (gpus.json sources).
FP32_TO_XMX_FP16 = 256 / 2048


@lru_cache(maxsize=512)
def _fp32_ratio(name: str) -> float:
    """fp32_tflops / fp16_tflops of the table entry, FP32_TO_XMX_FP16 where not listed."""
    entry = lookup_gpu(name)
    if not entry or not entry.get("fp16_tflops") or not entry.get("fp32_tflops"):
        return FP32_TO_XMX_FP16
    return entry["fp32_tflops"] / entry["fp16_tflops"]


def matmul_tflops(gpu: GPUInfo, quantized: bool, backend: str | None = None, fp32_gemm: bool = False) -> float:
    """Peak matrix rate (T ops/s) of the kernels llama.cpp uses for this weight class.
    fp32_gemm: the build multiplies prompts in FP32 (HardwareProfile.fp32_gemm)."""
    base = gpu.fp16_tflops or DEFAULT_FP16_TFLOPS
    if fp32_gemm:
        return base * _fp32_ratio(gpu.name)
    int8, acc16 = _ratios(gpu.name, backend)
    if quantized and backend in FLOAT_GEMM_BACKENDS:
        return base * acc16  # dequantized to F16, then the F16 GEMM
    if quantized:
        return base * int8 * _mma_sync_share(gpu, backend)
    return base * acc16


def attention_tflops(gpu: GPUInfo, backend: str | None = None, vector_units: bool = False,
                     fp32_gemm: bool = False) -> float:
    """Peak rate (TFLOPS) of a prompt's attention (QK^T and softmax x V) on this GPU, whatever
    the weights' type: FP16 matrix products. llama.cpp's flash-attention kernels on NVIDIA
    (ggml-cuda/fattn-mma-f16.cuh, llama-cpp-python 0.3.36) multiply K x Q into FP32
    accumulators and V x KQ into FP16 ones, per-warp mma.sync; without flash attention KQ
    is an F16 GEMM at FP32 precision and KQV one at FP16. So half the FLOPs run at the FP32-
    accumulate rate (`fp16_tflops`) and half at the FP16-accumulate one: on a GeForce, where
    the latter is twice the former, 4/3 of `fp16_tflops`, a third of the int8 rate quantized
    weights are priced at. Other vendors list one FP16 rate. vector_units: SYCL's tile
    flash-attention kernel (sycl_attention.py), on the vector units: packed FP16 at twice
    the FP32 rate (the GPU table's Xe-LPG entry, which has no XMX), or FP32 in an FP32 build
    (fp32_gemm)."""
    base = gpu.fp16_tflops or DEFAULT_FP16_TFLOPS
    if vector_units:
        fp32 = base * _fp32_ratio(gpu.name)
        return fp32 if fp32_gemm else 2 * fp32
    _, acc16 = _ratios(gpu.name, backend)
    return 2.0 / (1.0 / base + 1.0 / (base * acc16)) * _mma_sync_share(gpu, backend)
