"""Per-layer totals of a ModelSpec, computed once per spec.

The estimator evaluates many configurations of the same model (auto GPU layers, ranking
over quants and contexts); summing tensors each time would make that O(tensors) per call.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from rooflight.gguf.spec import ModelSpec


@dataclass(frozen=True)
class LayerTable:
    bytes: tuple[int, ...]  # per block: all weights
    active_bytes: tuple[float, ...]  # per block: weights read per token (routed experts scaled)
    active_params: tuple[float, ...]  # per block: multiply-adds per token
    output_bytes: int  # output matrix (or tied token_embd) + output norm
    output_params: int
    input_bytes: int  # token_embd and other input-side tensors (stay on the CPU)
    tied_output_bytes: int  # part of output_bytes that is token_embd reused as the output


_cache: weakref.WeakKeyDictionary[ModelSpec, LayerTable] = weakref.WeakKeyDictionary()


def layer_table(spec: ModelSpec) -> LayerTable:
    table = _cache.get(spec)
    if table is None:
        table = _build(spec)
        _cache[spec] = table
    return table


def _build(spec: ModelSpec) -> LayerTable:
    n = spec.n_layer
    nbytes = [0] * n
    active_b = [0.0] * n
    active_p = [0.0] * n
    out_b = out_p = in_b = tied_b = 0
    moe_ratio = spec.n_expert_used / spec.n_expert if spec.n_expert else 1.0
    for t in spec.tensors:
        if t.layer is not None and 0 <= t.layer < n:
            r = moe_ratio if t.is_expert else 1.0
            nbytes[t.layer] += t.n_bytes
            active_b[t.layer] += t.n_bytes * r
            active_p[t.layer] += t.n_elements * r
        elif t.name.startswith(("output.", "output_norm.")):
            out_b += t.n_bytes
            out_p += t.n_elements
        else:
            in_b += t.n_bytes
    if spec.tied_embeddings:
        embd = spec.tensor("token_embd.weight")
        if embd:
            tied_b = embd.n_bytes
            out_b += embd.n_bytes
            out_p += embd.n_elements
    return LayerTable(tuple(nbytes), tuple(active_b), tuple(active_p), out_b, out_p, in_b, tied_b)
