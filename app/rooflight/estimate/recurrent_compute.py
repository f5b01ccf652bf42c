"""Compute-buffer peak of a recurrent layer (the graph's largest moment inside a mixer).

The counterpart of compute.attention_peak / ffn_peak for the recurrent layers of hybrid
models (gguf/recurrent.py). What is alive at the peak, read from llama.cpp's graphs
(src/models/mamba-base.cpp, qwen3next.cpp, lfm2.cpp) for a micro-batch of T tokens, f32:

- Mamba-2 (granitehybrid, nemotron_h, mamba2, falcon-h1): the in-projection zxBCdt
  [d_in_proj, T] (z is used at the end), conv_x [T + d_conv - 1, C] and its convolution
  [C, T] (C = d_inner + 2 groups d_state), the scan output [d_inner, T] plus the final
  state, x * D and the gated norm [d_inner, T] each, residuals. ggml-alloc reuses freed
  blocks where they fit, so the count is fitted on what that leaves: per token d_in_proj
  + 1.5 C + 3.2 d_inner + 1 residual (2 without flash attention), plus the state. Against
  llama.cpp 0.3.36's CPU compute buffer on generated granitehybrid models (8 SSM shapes,
  1-4 groups, d_state 32-128, T 512): -1.2 .. +3.5%; at T 128 10% low (attention or the
  feed-forward usually decides there). The attention layers' shape moves the peak by about
  one residual (allocator fragmentation), which no count captures.
- Mamba-1 (jamba, mamba): xz [2 d_inner, T], conv_x, its convolution, dt [d_inner, T],
  the scan output and a residual: 6 d_inner + n_embd per token; within 1% (jamba).
- Gated delta-net (qwen3next, qwen35, qwen35moe): fitted, not derived (its chunked
  kernel keeps many chunk-sized intermediates): per token 2.1 x conv_dim + 1.0 x
  value_dim + 1.6 x 64 value heads + 0.8 x n_embd f32 values, plus 3.3 x the state;
  within 5% on 3 generated qwen3next shapes, extrapolated beyond them.
- Short convolution (lfm2): in-projection [3 n_embd, T], conv_x, its output and two
  residuals; below the feed-forward peak in every LFM2 shape (measured: the FFN decides).

The KQ masks of the attention layers stay alive across the recurrent layers as well.
"""

from __future__ import annotations

from rooflight.gguf.spec import ModelSpec

F32 = 4

MAMBA2 = frozenset({"granitehybrid", "nemotron_h", "nemotron_h_moe", "mamba2", "falcon-h1"})
MAMBA1 = frozenset({"jamba", "mamba"})
DELTA_NET = frozenset({"qwen3next", "qwen35", "qwen35moe"})
SHORT_CONV = frozenset({"lfm2", "lfm2moe"})


def _ssm(spec: ModelSpec, key: str) -> int:
    v = spec.metadata.get(f"{spec.architecture}.ssm.{key}")
    return v if type(v) is int and v > 0 else 0


def recurrent_peak_bytes(spec: ModelSpec, t: int, flash_attn: bool = True) -> int:
    """Peak bytes inside one recurrent layer for a micro-batch of t tokens (no masks)."""
    arch, e = spec.architecture, spec.n_embd
    d_conv, d_inner = _ssm(spec, "conv_kernel"), _ssm(spec, "inner_size")
    d_state, groups, dt_rank = _ssm(spec, "state_size"), _ssm(spec, "group_count"), _ssm(spec, "time_step_rank")
    if arch in MAMBA2:
        channels = d_inner + 2 * groups * d_state
        d_in_proj = 2 * d_inner + 2 * groups * d_state + dt_rank
        per_token = d_in_proj + 1.5 * channels + 3.2 * d_inner + (1 if flash_attn else 2) * e
        return int(F32 * (t * per_token + d_state * d_inner))
    if arch in MAMBA1:
        return F32 * (t * (6 * d_inner + e) + (d_conv - 1) * d_inner + d_state * d_inner)
    if arch in DELTA_NET:
        value_dim = d_inner
        conv_dim = 2 * d_state * groups + value_dim
        per_token = 2.1 * conv_dim + 1.0 * value_dim + 1.6 * 64 * dt_rank + 0.8 * e
        return int(F32 * (t * per_token + 3.3 * d_state * d_state * dt_rank))
    if arch in SHORT_CONV:
        l_cache = spec.metadata.get(f"{arch}.shortconv.l_cache")
        l_cache = l_cache if type(l_cache) is int else 3
        return F32 * (t * 7 * e + (l_cache - 1) * e)
    return 0


# Graphs that keep the final normed hidden state as an output (`res->t_h_nextn`, the seed
# of an MTP draft head) whether or not a draft runs: ggml never frees a graph output, so
# the output layer holds it beside its row-gathered copy and the logits. Unconditional in
# src/models/qwen3next.cpp, qwen35.cpp, qwen35moe.cpp, nemotron-h.cpp (whose graph
# nemotron_h_moe reuses: models.h); measured on qwen3next as 2-3 residual-sized tensors
# beyond a plain output layer.
KEEPS_HIDDEN_STATE = frozenset({"qwen3next", "qwen35", "qwen35moe", "nemotron_h", "nemotron_h_moe"})


def output_extra_residuals(spec: ModelSpec) -> int:
    return 2 if spec.architecture in KEEPS_HIDDEN_STATE else 0

