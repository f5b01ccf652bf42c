"""4-bit float weights (NVFP4, MXFP4): where llama.cpp runs them natively.

Sizes need nothing special: both are GGML block types (NVFP4: 64 values in 36 bytes, 4.5
bits per weight; MXFP4: 32 in 17, 4.25 -- gguf.GGML_QUANT_SIZES), so a header's tensor
bytes are exact and decode reads them like any other quantized weight.

Prefill differs by device. In the llama.cpp vendored by llama-cpp-python 0.3.36
(ggml/src/ggml-cuda/mmq.cu, common.cuh `blackwell_mma_available`), matrix products with
NVFP4 or MXFP4 weights quantize the activations to FP4 too and use Blackwell's native FP4
tensor-core instruction (W4A4) on NVIDIA GPUs of compute capability 12.x (GeForce RTX 50,
RTX PRO Blackwell, GB10 / DGX Spark); everywhere else, datacenter Blackwell (CC 10.0)
included, they take the int8 path every other quant takes (W4A8). Measured gains of the
native path in prompt processing, token generation unchanged: llama.cpp PR #21896 (NVFP4,
pp512 1.20x Qwen3.5 4B, 1.46x Qwen3.5 27B, 1.33x Nemotron-Cascade-2 30B; tg128 1.00-1.01x)
and PR #17906 (MXFP4, gpt-oss 20B, RTX PRO 6000 Blackwell, pp512..pp8192 1.26-1.27x).
Rooflight uses their median, 1.3x, for the FP4 share of the weights.
"""

from __future__ import annotations

from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import GPUInfo

# MXFP4 takes the same native path, but its rows (gpt-oss on GB10) are in the data the
# CUDA table constants are fitted on (bench/fit_constants.py): pricing it here too moves
# those constants (its prefill LODO error falls from 60% to 53% with the factor), so it is
# left to the gpt-oss / MXFP4 work to refit with it. NVFP4 has no fitted rows yet.
FP4_TYPES = frozenset({"NVFP4"})
NATIVE_FP4_PREFILL_SPEEDUP = 1.3


def native_fp4(gpu: GPUInfo | None, backend: str) -> bool:
    """True where llama.cpp's CUDA backend runs FP4 weights on FP4 tensor cores."""
    if gpu is None or backend != "cuda" or gpu.vendor != "nvidia" or not gpu.compute_capability:
        return False
    try:
        major = int(str(gpu.compute_capability).split(".")[0])
    except ValueError:
        return False
    return major == 12


def fp4_share(spec: ModelSpec) -> float:
    """Fraction of the multiply-adds per token whose weights are NVFP4 / MXFP4."""
    total = fp4 = 0.0
    moe = spec.n_expert_used / spec.n_expert if spec.n_expert else 1.0
    for t in spec.tensors:
        if t.layer is None or len(t.shape) < 2:
            continue
        n = t.n_elements * (moe if t.is_expert else 1.0)
        total += n
        if t.ggml_type in FP4_TYPES:
            fp4 += n
    return fp4 / total if total else 0.0


def prefill_speed_factor(spec: ModelSpec, gpu: GPUInfo | None, backend: str) -> float:
    """How much faster than the int8 path prompt processing runs on this device."""
    if not native_fp4(gpu, backend):
        return 1.0
    share = fp4_share(spec)
    return 1.0 / (1.0 - share + share / NATIVE_FP4_PREFILL_SPEEDUP)
