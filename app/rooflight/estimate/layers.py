"""Per-layer totals of a ModelSpec, computed once per spec.

The estimator evaluates many configurations of the same model (auto GPU layers, ranking
over quants and contexts); summing tensors each time would make that O(tensors) per call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

from rooflight.gguf.derived import derived
from rooflight.gguf.spec import ModelSpec, TensorInfo


@dataclass(frozen=True)
class LayerTable:
    bytes: tuple[int, ...]  # per block: all weights
    active_bytes: tuple[float, ...]  # per block: weights read per token (routed experts scaled)
    active_params: tuple[float, ...]  # per block: multiply-adds per token
    output_bytes: int  # output matrix (or tied token_embd) + output norm
    output_params: int
    input_bytes: int  # token_embd and other input-side tensors (stay on the CPU)
    tied_output_bytes: int  # part of output_bytes that is token_embd reused as the output
    # per block: CPU cycles to multiply its active weights by one token's activations
    # (sum of elements x cpu_cycles_per_weight(type)); the decode compute roof on a CPU
    active_cpu_cycles: tuple[float, ...] = ()
    output_cpu_cycles: float = 0.0
    # per block: {ggml type: active weight elements}, and the same for the output layer;
    # what a machine probe's per-type kernel figures price (estimate/probe_roofline.py)
    active_by_type: tuple[dict[str, float], ...] = ()
    output_by_type: dict[str, float] | None = None
    # the last block's FFN matrices other than routed experts (experts.ExpertTable holds
    # those): {ggml type: active elements}; llama.cpp runs them for the output rows only
    # in prompt processing (estimate/output_rows.py)
    last_ffn_by_type: dict[str, float] | None = None


# CPU cycles per weight for a matrix-vector product (decode), by weight type. On few cores
# llama.cpp's quantized dot products are compute-bound, not bandwidth-bound. Fitted on the
# project's 2-core AVX-512 EPYC VM (bench/accuracy.py) as time x cores x 3 GHz / weights,
# from pairs of models that differ only in size: Q8_0 0.25, Q4_0 0.14 (repacked 8x8
# kernels), Q4_K 0.17, Q6_K 0.20; F16 stayed bandwidth-bound. Types not measured take
# their nearest measured relative.
_CPU_CYCLES = {
    "F32": 0.15, "F16": 0.15, "BF16": 0.15,
    "Q8_0": 0.25, "Q4_0": 0.14, "Q4_1": 0.16, "Q5_0": 0.2, "Q5_1": 0.2, "IQ4_NL": 0.14,
    "Q4_K": 0.17, "Q5_K": 0.19, "Q6_K": 0.2, "Q3_K": 0.19, "Q2_K": 0.19,
    "IQ4_XS": 0.19, "IQ3_S": 0.25, "IQ3_XXS": 0.25, "IQ2_XXS": 0.25, "IQ2_XS": 0.25, "IQ2_S": 0.25,
    "IQ1_S": 0.25, "IQ1_M": 0.25, "MXFP4": 0.17,
}


def cpu_cycles_per_weight(ggml_type: str) -> float:
    return _CPU_CYCLES.get(ggml_type.upper(), 0.25)


# Tensors outside "blk.N." that llama.cpp does not keep with the input (llm_tensor_info in
# llama-arch.cpp): LAYER_OUTPUT ones go with the output layer, LAYER_REPEATING ones created
# with block index 0 with the first block (Gemma 3n's AltUp and per-layer projections,
# LFM2's final norm, which its loader names token_embd_norm).
_WITH_OUTPUT = ("output.", "output_norm.", "altup_proj.", "altup_unembd_proj.")
_WITH_BLOCK_0 = ("per_layer_model_proj.", "per_layer_proj_norm.")
_WITH_OUTPUT_BY_ARCH = {"lfm2": ("token_embd_norm.",), "lfm2moe": ("token_embd_norm.",)}


OUTPUT, INPUT = "output", "input"


def tensor_slot(spec: ModelSpec) -> Callable[[TensorInfo], int | str]:
    """For this spec, where a tensor is counted: its block's index, OUTPUT (the output layer's
    tensors) or INPUT (token_embd and the other input-side tensors, kept on the CPU)."""
    n = spec.n_layer
    with_output = _WITH_OUTPUT + _WITH_OUTPUT_BY_ARCH.get(spec.architecture, ())

    def slot(t: TensorInfo) -> int | str:
        layer = 0 if t.layer is None and n and t.name.startswith(_WITH_BLOCK_0) else t.layer
        if layer is not None and 0 <= layer < n:
            return layer
        return OUTPUT if t.name.startswith(with_output) else INPUT

    return slot


def layer_table(spec: ModelSpec) -> LayerTable:
    """The spec's per-layer totals, computed once per spec (gguf/derived.py)."""
    return derived(spec, "layer_table", _build)


def _build(spec: ModelSpec) -> LayerTable:
    n = spec.n_layer
    nbytes = [0] * n
    active_b = [0.0] * n
    active_p = [0.0] * n
    out_b = out_p = in_b = tied_b = 0
    cycles = [0.0] * n
    out_cycles = 0.0
    by_type: list[dict[str, float]] = [{} for _ in range(n)]
    out_types: dict[str, float] = {}
    moe_ratio = spec.n_expert_used / spec.n_expert if spec.n_expert else 1.0
    # cpu_cycles_per_weight and the upper-case name by type: ~100k tensors, ~10 types
    per_type: dict[str, tuple[float, str]] = {}
    slot = tensor_slot(spec)
    from rooflight.estimate.experts import is_moved_by_n_cpu_moe  # both import this module
    from rooflight.estimate.output_rows import is_last_ffn

    last_ffn: dict[str, float] = {}
    for t in spec.tensors:
        layer = slot(t)
        if isinstance(layer, int):
            r = moe_ratio if "_exps" in t.name else 1.0  # t.is_expert, inlined
            b, e = t.n_bytes, prod(t.shape)  # t.n_elements, exactly
            info = per_type.get(t.ggml_type)
            if info is None:
                info = per_type[t.ggml_type] = (cpu_cycles_per_weight(t.ggml_type), t.ggml_type.upper())
            c, kind = info
            nbytes[layer] += b
            active_b[layer] += b * r
            active_p[layer] += e * r
            cycles[layer] += e * r * c
            if len(t.shape) >= 2:  # matrices; norms and biases are element-wise work
                kinds = by_type[layer]
                kinds[kind] = kinds.get(kind, 0.0) + e * r
                if is_last_ffn(spec, t.name, layer) and not is_moved_by_n_cpu_moe(t.name):
                    last_ffn[kind] = last_ffn.get(kind, 0.0) + e * r
        elif layer == OUTPUT:
            out_b += t.n_bytes
            out_p += t.n_elements
            out_cycles += t.n_elements * cpu_cycles_per_weight(t.ggml_type)
            if len(t.shape) >= 2:
                out_types[t.ggml_type.upper()] = out_types.get(t.ggml_type.upper(), 0.0) + t.n_elements
        else:
            in_b += t.n_bytes
    if spec.tied_embeddings:
        embd = spec.tensor("token_embd.weight")
        if embd:
            tied_b = embd.n_bytes
            out_b += embd.n_bytes
            out_p += embd.n_elements
            out_cycles += embd.n_elements * cpu_cycles_per_weight(embd.ggml_type)
            out_types[embd.ggml_type.upper()] = out_types.get(embd.ggml_type.upper(), 0.0) + embd.n_elements
    return LayerTable(tuple(nbytes), tuple(active_b), tuple(active_p), out_b, out_p, in_b, tied_b, tuple(cycles),
                      out_cycles, tuple(by_type), out_types, last_ffn)
