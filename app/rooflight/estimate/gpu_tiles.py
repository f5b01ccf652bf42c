"""The tiles llama.cpp's GPU matrix-matrix kernels multiply a batch's token columns in.

One place for the widths the MoE prompt model (moe_prompt.py: empty columns of an expert's
tiles) and the weight reads (weight_passes.py: one read of the weights per column tile)
both stand on.
"""

from __future__ import annotations

import math
from functools import lru_cache

# The widest MMQ tile (ggml-cuda/mmq.cuh mul_mat_q_switch_J: J from 8 to 128 in steps of 8,
# the fewest tiles that cover the columns it is picked against).
MMQ_MAX_TILE = 128
# Vulkan picks its small, medium or large tile by the columns (the default
# matmul_tile_selector, and ggml_vk_mul_mat_id_q_f16 against the tokens per expert): up to 32
# columns the small, up to 64 the medium, else the large, 32, 64 and 128 columns wide in the
# default shader configuration (coopmat2 devices take 64 up to 64, then 128: the same padding
# from 33 columns on).
VULKAN_TILES = ((32, 32), (64, 64), (math.inf, 128))
# Metal's kernel_mul_mm_id: 32-column tiles, taken from 32 tokens on (ggml-metal-ops.cpp:
# (ne21 + 31)/32 threadgroups per expert; ggml_metal_op_mul_mat_id_use_mm: ne21 >= 32).
METAL_ID_TILE = 32
METAL_ID_MIN_TOKENS = 32


def tile_columns(backend: str | None, n_columns: int) -> int:
    """The tile width CUDA/ROCm MMQ or Vulkan picks for n_columns columns."""
    if backend == "vulkan":
        return next(w for limit, w in VULKAN_TILES if n_columns <= limit)
    return min(MMQ_MAX_TILE, -(-n_columns // 8) * 8)


@lru_cache(maxsize=1024)
def expected_tiles(n_expert: int, n_expert_used: int, n_tokens: int, tile: int) -> float:
    """E[ceil(X / tile)]: the tiles one expert's X ~ Binomial(n_tokens, used / experts) tokens
    fill (uniform routing; 0 for an expert no token reaches)."""
    p = min(1.0, n_expert_used / n_expert)
    if p >= 1.0:
        return float(-(-n_tokens // tile))
    log_p, log_q = math.log(p), math.log1p(-p)
    log_n = math.lgamma(n_tokens + 1)
    tiles = 0.0
    for x in range(1, n_tokens + 1):
        log_pmf = log_n - math.lgamma(x + 1) - math.lgamma(n_tokens - x + 1) + x * log_p + (n_tokens - x) * log_q
        if log_pmf > -60.0:
            tiles += -(-x // tile) * math.exp(log_pmf)
    return tiles
