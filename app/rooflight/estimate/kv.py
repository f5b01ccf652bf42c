"""KV cache size per layer, as llama.cpp allocates it (src/llama-kv-cache*.cpp)."""

from __future__ import annotations

from rooflight.estimate.config import RunConfig, kv_bytes_per_element, padded_ctx
from rooflight.gguf.spec import ModelSpec


def swa_cells(spec: ModelSpec, cfg: RunConfig) -> int:
    """Cells in the sliding-window cache (llama-kv-cache-iswa.cpp):
    PAD(min(n_ctx, n_swa * n_seq + n_ubatch), 256), or the full size with swa_full."""
    n_ctx = padded_ctx(cfg.n_ctx)
    if cfg.swa_full:
        return n_ctx
    size = min(n_ctx, spec.sliding_window + min(cfg.n_ubatch, cfg.n_batch, n_ctx))
    return padded_ctx(size)


def layer_cells(spec: ModelSpec, cfg: RunConfig, layer: int) -> int:
    """How many token positions layer `layer` keeps in its cache."""
    if spec.sliding_window and spec.swa_layers and spec.swa_layers[layer]:
        return swa_cells(spec, cfg)
    return padded_ctx(cfg.n_ctx)


def has_kv(spec: ModelSpec, layer: int) -> bool:
    """Recurrent layers and layers without KV heads keep no KV cache."""
    if spec.recurrent_layers and spec.recurrent_layers[layer]:
        return False
    return spec.n_head_kv[layer] > 0 or spec.kv_lora_rank > 0


def kv_row_bytes(spec: ModelSpec, cfg: RunConfig, layer: int) -> float:
    """Bytes of K plus V for one cached token in one layer."""
    per_el = kv_bytes_per_element(cfg.kv_type)
    if spec.kv_lora_rank:
        # MLA (DeepSeek-2/3): one compressed latent + rope part per token, no separate V
        # (llama-kv-cache.cpp: has_v = !is_mla).
        return (spec.kv_lora_rank + spec.rope_dim) * per_el
    n_kv = spec.n_head_kv[layer]
    k = spec.head_dim_k * n_kv
    if cfg.flash_attn:
        v = spec.head_dim_v * n_kv
    else:
        # without flash attention V is stored transposed and padded to the widest layer
        # ([TAG_V_CACHE_VARIABLE] in llama-kv-cache.cpp)
        v = spec.head_dim_v * max(spec.n_head_kv)
    return (k + v) * per_el


def layer_kv_bytes(spec: ModelSpec, cfg: RunConfig, layer: int) -> int:
    if not has_kv(spec, layer):
        return 0
    return int(layer_cells(spec, cfg, layer) * kv_row_bytes(spec, cfg, layer))


def kv_bytes_read_per_token(spec: ModelSpec, cfg: RunConfig, layer: int, position: int) -> float:
    """Bytes of this layer's cache that attention reads when generating at `position`.

    llama.cpp pads the attended range to 256 cells (llama_kv_cache::get_n_kv) and never
    beyond the cache size; sliding-window layers see at most their own cache.
    """
    if not has_kv(spec, layer):
        return 0.0
    cells = min(layer_cells(spec, cfg, layer), padded_ctx(max(position, 1)))
    return cells * kv_row_bytes(spec, cfg, layer)
