"""KV cache size per layer, as llama.cpp allocates it (src/llama-kv-cache*.cpp).

Recurrent layers of hybrid and SSM models (gguf/recurrent.py) keep a fixed-size state
instead (llama-memory-recurrent.cpp): it is counted here with the cache, on the layer's
device, and decode reads and rewrites it once per token whatever the position.
"""

from __future__ import annotations

import itertools
import operator
import weakref

from rooflight.estimate.config import RunConfig, kv_bytes_per_element, padded_ctx
from rooflight.gguf.recurrent import ATTENTION_AND_STATE
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
    if is_recurrent(spec, layer) and spec.architecture not in ATTENTION_AND_STATE:
        return False
    return spec.n_head_kv[layer] > 0 or spec.kv_lora_rank > 0


def is_recurrent(spec: ModelSpec, layer: int) -> bool:
    return bool(spec.recurrent_layers) and spec.recurrent_layers[layer]


def state_bytes(spec: ModelSpec, layer: int) -> int:
    """Recurrent state (conv + SSM rows, f32, one sequence) of one layer; 0 elsewhere."""
    return spec.ssm_state_bytes_per_seq if is_recurrent(spec, layer) else 0


def kv_row_bytes(spec: ModelSpec, cfg: RunConfig, layer: int) -> float:
    """Bytes of K plus V for one cached token in one layer."""
    per_el = kv_bytes_per_element(cfg.kv_type)
    if spec.kv_lora_rank:
        # MLA (DeepSeek-2/3): one compressed latent + rope part per token, no separate V
        # (llama-kv-cache.cpp: has_v = !is_mla).
        return (spec.kv_lora_rank + spec.rope_dim) * per_el
    n_kv = spec.n_head_kv[layer]
    head_k, head_v = spec.head_dims(layer)
    k = head_k * n_kv
    if cfg.flash_attn:
        v = head_v * n_kv
    else:
        # without flash attention V is stored transposed and padded to the widest layer
        # ([TAG_V_CACHE_VARIABLE] in llama-kv-cache.cpp: n_embd_v_gqa_max over all layers)
        v = max(spec.head_dims(il)[1] * spec.n_head_kv[il] for il in range(spec.n_layer))
    return (k + v) * per_el


# Per spec (by identity, like layers.layer_table) and per cache-shaping config: each
# layer's (cells, bytes per cell). The planner asks for every layer many times per plan
# (each GPU-layer count tried, four decode positions); ranking the catalog made these
# small calls a third of its time.
# cells, row bytes, bytes (cache + recurrent state), state bytes read and written per token
_KVTable = tuple[tuple[int, ...], tuple[float, ...], tuple[int, ...], tuple[float, ...]]
_tables: dict[int, dict[tuple, _KVTable]] = {}


def _kv_table(spec: ModelSpec, cfg: RunConfig) -> _KVTable:
    per_spec = _tables.get(id(spec))
    if per_spec is None:
        per_spec = _tables[id(spec)] = {}
        weakref.finalize(spec, _tables.pop, id(spec), None)
    key = (cfg.n_ctx, cfg.kv_type, cfg.flash_attn, cfg.swa_full, cfg.n_ubatch, cfg.n_batch)
    table = per_spec.get(key)
    if table is None:
        layers = range(spec.n_layer)
        kv = [has_kv(spec, il) for il in layers]
        cells = tuple(layer_cells(spec, cfg, il) if kv[il] else 0 for il in layers)
        rows = tuple(kv_row_bytes(spec, cfg, il) if kv[il] else 0.0 for il in layers)
        states = tuple(state_bytes(spec, il) for il in layers)
        sizes = tuple(int(c * r) + st for c, r, st in zip(cells, rows, states, strict=True))
        if spec.kv_reuse:
            # a layer that reuses another's cache allocates nothing but reads that cache
            src = [il if s < 0 else s for il, s in enumerate(spec.kv_reuse)]
            sizes = tuple(0 if src[il] != il else sizes[il] for il in layers)
            cells = tuple(cells[src[il]] for il in layers)
            rows = tuple(rows[src[il]] for il in layers)
        table = (cells, rows, sizes, tuple(2.0 * st for st in states))
        per_spec[key] = table
    return table


def layer_kv_bytes(spec: ModelSpec, cfg: RunConfig, layer: int) -> int:
    return _kv_table(spec, cfg)[2][layer]  # 0 for layers without a cache


def kv_bytes_read_per_token(spec: ModelSpec, cfg: RunConfig, layer: int, position: int) -> float:
    """Bytes of this layer's cache that attention reads when generating at `position`.

    llama.cpp pads the attended range to 256 cells (llama_kv_cache::get_n_kv) and never
    beyond the cache size; sliding-window layers see at most their own cache.
    """
    cells, rows, _, state_io = _kv_table(spec, cfg)
    return min(cells[layer], padded_ctx(max(position, 1))) * rows[layer] + state_io[layer]


def kv_bytes_by_layer(spec: ModelSpec, cfg: RunConfig) -> tuple[int, ...]:
    """layer_kv_bytes for every layer at once (the planner's per-device sums)."""
    return _kv_table(spec, cfg)[2]


def kv_cells_seen(spec: ModelSpec, cfg: RunConfig, position: int, *, padded: bool = True) -> tuple[int, ...]:
    """Per layer, how many cached positions attention visits when generating at `position`
    (padded to 256 like llama.cpp's get_n_kv unless padded=False; at most the layer's cache;
    0 without a cache)."""
    cells = _kv_table(spec, cfg)[0]
    seen = padded_ctx(max(position, 1)) if padded else max(position, 1)
    return tuple(map(min, cells, itertools.repeat(seen)))


def window_positions(spec: ModelSpec, layer: int, position: int) -> int | None:
    """How many positions the mask leaves a sliding-window layer's token at `position`
    (llama_hparams::is_masked_swa): the last `window` with the standard window, those since
    the chunk began with llama4's chunked one, half the window back with the symmetric one;
    None for a layer that sees the whole context."""
    if not (spec.sliding_window and spec.swa_layers and spec.swa_layers[layer]):
        return None
    window = spec.sliding_window
    if spec.swa_type == "chunked":
        return position % window + 1
    if spec.swa_type == "symmetric":
        return window // 2 + 1
    return window


def kv_cells_attended(spec: ModelSpec, cfg: RunConfig, position: int) -> tuple[int, ...]:
    """Per layer, the cached positions llama.cpp's CPU flash-attention kernel visits when
    generating at `position`: it skips a masked cell before reading it (ggml-cpu/ops.cpp,
    flash_attn_ext_f16_one_chunk: `if (mv == -INFINITY) continue;`), so a sliding-window
    layer reads its window, not its cache of window + n_ubatch cells. What the visits cost
    over the threads is cpu_attention.cpu_attention_cells; without flash attention the two mat-muls
    run over every cell, masked or not."""
    seen = kv_cells_seen(spec, cfg, position, padded=False)
    if not spec.sliding_window:
        return seen
    return tuple(s if (w := window_positions(spec, il, max(position, 1))) is None else min(s, w)
                 for il, s in enumerate(seen))


def kv_reads_by_layer(spec: ModelSpec, cfg: RunConfig, position: int, *, attended: bool = False) -> tuple[float, ...]:
    """kv_bytes_read_per_token for every layer at once; attended: only the cells a CPU
    flash-attention kernel reads (kv_cells_attended) rather than the padded range."""
    cells, rows, _, state_io = _kv_table(spec, cfg)
    if attended:
        seen_cells = kv_cells_attended(spec, cfg, position)
    else:
        seen_cells = tuple(map(min, cells, itertools.repeat(padded_ctx(max(position, 1)))))
    # layers without a cache have 0 cells and 0.0 bytes per cell: they read 0.0
    reads = tuple(map(operator.mul, seen_cells, rows))
    if spec.recurrent_layers:
        reads = tuple(map(operator.add, reads, state_io))
    return reads
