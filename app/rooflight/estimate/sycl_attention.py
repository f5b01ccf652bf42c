"""Which units multiply a prompt's attention on llama.cpp's SYCL backend.

Every prompt attention on a GPU is priced as FP16 matrix products (tensor_rates.attention_tflops).
On SYCL that holds for the FP32 build too (GGML_SYCL_F16 off, which converts the weights'
matmuls to FP32: tensor_rates.FP32_TO_XMX_FP16), because the attention paths are F16 of
their own (ggml-sycl, llama-cpp-python 0.3.36):
- flash attention off: KQ and KQV of a batch are ggml_sycl_mul_mat_batched_sycl, which
  converts Q to F16 and runs a batched F16 GEMM (oneMKL / oneDNN) on the XMX engines;
- flash attention on (fattn.cpp ggml_sycl_get_best_fattn_kernel): oneDNN's SDPA graph
  (fattn-onednn.cpp: "native F16", its systolic micro-kernel) for a prompt of 32 or more
  tokens, and where it declines, oneMKL's F16 GEMMs (fattn-mkl.cpp) for a GQA model with a
  cache of 1024 or more positions.
What neither takes falls to the tile kernel (fattn-tile), which multiplies on the vector
units: in half2 in an FP16 build, in float in an FP32 one (fattn-common.hpp, `#ifdef
GGML_SYCL_F16`). oneDNN declines attention sinks (gpt-oss), a logit soft-cap (Gemma 2),
ALiBi (BLOOM, MPT, ...), K and V heads of different sizes (MLA), and on Alchemist (Arc A-series)
64-wide heads; oneMKL declines sinks, soft-cap, ALiBi, MHA, heads not a multiple of 64 in
64-512, and caches under 1024 positions. A build without oneDNN (GGML_SYCL_DNN off, or no
oneDNN found) is not told apart: the oneAPI toolkit ships oneDNN and the option is on.

Decided per model from its full-attention layers' heads (a model whose window layers have
other head sizes is decided by the full ones).
"""

from __future__ import annotations

import re

from rooflight.gguf.spec import ModelSpec

# oneDNN's SDPA needs this many query tokens (fattn-onednn.cpp GGML_SYCL_FA_ONEDNN_MIN_Q)
ONEDNN_MIN_QUERY_TOKENS = 32
# oneMKL's flash attention needs a cache of this many positions (fattn.cpp, K->ne[1] >= 1024)
MKL_MIN_CACHE = 1024

# Architectures whose attention llama.cpp soft-caps (models/gemma2.cpp sets attn_soft_cap) or
# biases with ALiBi (f_max_alibi_bias > 0: models/bloom.cpp, refact.cpp and jina-bert-v2.cpp
# set it, mpt.cpp and jais.cpp read it from the file, where their releases carry it); llama-graph.cpp
# passes both to FLASH_ATTN_EXT. Not listed: Baichuan, whose 13B has ALiBi and 7B RoPE under one
# architecture name (baichuan.cpp decides by the layer count)
SOFTCAP_ARCHITECTURES = frozenset({"gemma2"})
ALIBI_ARCHITECTURES = frozenset({"bloom", "mpt", "refact", "jais", "jina-bert-v2"})

# Arc A-series (Alchemist, DG2): the gpu_arch values oneDNN's SDPA gate lists
# (intel_gpu_dg2_g10/g11/g12), which Intel sells as Arc A3xx-A7xx and Arc Pro A-series
_ALCHEMIST = re.compile(r"\bArc(?:\(TM\))?\s+(?:Pro\s+)?A\d{2,3}M?\b", re.IGNORECASE)


# Architectures whose blocks always hold a per-head attention sink (create_tensor(..., 0) in
# models/openai-moe.cpp, granite-swa.cpp, hy-v4.cpp), and those where it is optional
# (TENSOR_NOT_REQUIRED or a flag: mimo2.cpp, dflash.cpp, deepseek4.cpp), told by the tensor
SINK_ARCHITECTURES = frozenset({"gpt-oss", "granite_swa", "hy_v4"})
OPTIONAL_SINK_ARCHITECTURES = frozenset({"mimo2", "dflash", "deepseek4"})


def has_attention_sinks(spec: ModelSpec) -> bool:
    """A per-head sink logit in the blocks (attn_sinks). By architecture, so a cached spec's
    tensor list is built only for the few where the file decides."""
    if spec.architecture in SINK_ARCHITECTURES:
        return True
    return spec.architecture in OPTIONAL_SINK_ARCHITECTURES and any(
        spec.tensor(f"blk.{il}.attn_sinks.weight") is not None for il in range(spec.n_layer))


def is_alchemist(gpu_name: str) -> bool:
    return bool(_ALCHEMIST.search(gpu_name))


def on_vector_units(spec: ModelSpec, gpu_name: str, flash_attn: bool, n_tokens: int, n_kv: int) -> bool:
    """True where this prompt micro-batch's attention runs the tile kernel on the vector
    units, False where it runs F16 matrix products on the XMX engines. n_tokens: the
    micro-batch; n_kv: the positions in the cache it attends to (its own included)."""
    if not flash_attn:
        return False  # the batched F16 GEMM
    sinks = has_attention_sinks(spec)
    capped = spec.architecture in SOFTCAP_ARCHITECTURES or spec.architecture in ALIBI_ARCHITECTURES
    head_k, head_v = spec.head_dim_k, spec.head_dim_v
    same_heads = head_k == head_v and not spec.kv_lora_rank  # MLA attends over 576/512 latents
    onednn = (n_tokens >= ONEDNN_MIN_QUERY_TOKENS and not sinks and not capped and same_heads
              and not (head_k == 64 and is_alchemist(gpu_name)))
    if onednn:
        return False
    gqa = max(spec.n_head) // max(1, max(spec.n_head_kv))
    mkl = (not sinks and not capped and same_heads and gqa >= 2 and 64 <= head_k <= 512 and head_k % 64 == 0
           and n_tokens >= ONEDNN_MIN_QUERY_TOKENS and n_kv >= MKL_MIN_CACHE)
    return not mkl
