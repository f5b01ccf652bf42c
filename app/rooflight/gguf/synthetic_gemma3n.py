"""Tiny random-weight Gemma 3n (gemma3n) GGUF files for tests.

The tensor list and keys are those `llama_model_gemma3n::load_arch_tensors` /
`load_arch_hparams` (src/models/gemma3n.cpp, llama.cpp vendored by llama-cpp-python
0.3.36) require: per-layer embeddings (`per_layer_token_embd`, a [n_embd_altup x n_layer,
n_vocab] table read by token, and its projection), AltUp (4 streams) and LAuReL (rank 64)
per layer, sliding-window attention with every 5th layer global, and the KV cache of the
first 20 layers shared by the layers after them. llama.cpp fixes n_altup = 4,
laurel_rank = 64, n_embd_altup = 256 and the 20 KV layers for this architecture (no keys).
"""

from __future__ import annotations

import os
from pathlib import Path

from rooflight.gguf.synthetic import (
    MINIMAL_VOCAB_SIZE,
    Q,
    TensorPlan,
    _normalize_ftype,
    _weight_type,
)
from rooflight.gguf.synthetic_hybrid import write_plans

N_ALTUP = 4
LAUREL_RANK = 64
N_EMBD_ALTUP = 256
KV_FROM_START = 20  # hparams.n_layer_kv_from_start for gemma3n


def plan_gemma3n_tensors(
    *, ftype: str, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, head_dim: int,
    n_ff: int, n_vocab: int,
) -> list[TensorPlan]:
    """Every tensor llama.cpp's gemma3n loader requires, with llama-quant's types (altup*,
    laurel* and per_layer_model_proj are never quantized; per_layer_token_embd follows the
    token embedding)."""
    ftype = _normalize_ftype(ftype)
    e = n_embd

    def w(name: str, shape: tuple[int, ...], role: str = "other", il: int = 0) -> TensorPlan:
        qtype = _weight_type(ftype, role, shape[-1], il, n_layer, 0)
        return TensorPlan(name, shape, qtype, "output" if role == "output" else "normal")

    def f32(name: str, shape: tuple[int, ...], init: str = "normal") -> TensorPlan:
        return TensorPlan(name, shape, Q.F32, init)

    def norm(name: str, size: int) -> TensorPlan:
        return f32(name, (size,), "ones")

    plans = [
        w("token_embd.weight", (n_vocab, e), "output"),  # tied: it is the output too
        f32("altup_proj.weight", (N_ALTUP - 1, e, e)),
        f32("altup_unembd_proj.weight", (N_ALTUP - 1, e, e)),
        w("per_layer_token_embd.weight", (n_vocab, N_EMBD_ALTUP * n_layer), "token_embd"),
        f32("per_layer_model_proj.weight", (N_EMBD_ALTUP * n_layer, e)),
        norm("per_layer_proj_norm.weight", N_EMBD_ALTUP),
        norm("output_norm.weight", e),
    ]
    q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim
    for il in range(n_layer):
        b = f"blk.{il}."
        plans += [
            norm(b + "attn_norm.weight", e),
            w(b + "attn_q.weight", (q_dim, e), "attn_q", il),
            w(b + "attn_k.weight", (kv_dim, e), "attn_k", il),
            w(b + "attn_v.weight", (kv_dim, e), "attn_v", il),
            w(b + "attn_output.weight", (e, q_dim), "attn_output", il),
            norm(b + "attn_q_norm.weight", head_dim),
            norm(b + "attn_k_norm.weight", head_dim),
            norm(b + "post_attention_norm.weight", e),
            norm(b + "ffn_norm.weight", e),
            w(b + "ffn_gate.weight", (n_ff, e), "ffn_gate", il),
            w(b + "ffn_up.weight", (n_ff, e), "ffn_up", il),
            w(b + "ffn_down.weight", (e, n_ff), "ffn_down", il),
            norm(b + "post_ffw_norm.weight", e),
            w(b + "inp_gate.weight", (N_EMBD_ALTUP, e), "other", il),
            w(b + "proj.weight", (e, N_EMBD_ALTUP), "other", il),
            norm(b + "post_norm.weight", e),
            f32(b + "altup_correct_coef.weight", (N_ALTUP, N_ALTUP)),
            norm(b + "altup_correct_scale.weight", e),
            f32(b + "altup_predict_coef.weight", (N_ALTUP * N_ALTUP, N_ALTUP)),
            f32(b + "altup_router.weight", (N_ALTUP, e)),
            norm(b + "altup_router_norm.weight", e),
            f32(b + "laurel_l.weight", (LAUREL_RANK, e)),
            f32(b + "laurel_r.weight", (e, LAUREL_RANK)),
            norm(b + "laurel_post_norm.weight", e),
        ]
    return plans


def add_gemma3n_metadata(
    w, *, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, head_dim: int, n_ff: int,
    context_length: int, sliding_window: int, swa_pattern: list[bool] | None = None,
) -> None:
    """The keys llama.cpp's gemma3n loader reads; swa_pattern (one bool per layer, from
    config.json's layer_types as the converter writes it) or llama.cpp's default of 5."""
    w.add_context_length(context_length)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1_000_000.0)
    w.add_rope_freq_base_swa(10_000.0)
    w.add_sliding_window(sliding_window)
    w.add_final_logit_softcapping(30.0)
    if swa_pattern is not None:
        w.add_sliding_window_pattern(list(swa_pattern))


def write_gemma3n_model(
    path: str | os.PathLike[str],
    *,
    n_layer: int = 22,
    n_embd: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 64,
    n_ff: int = 512,
    n_vocab: int = MINIMAL_VOCAB_SIZE,
    context_length: int = 4096,
    sliding_window: int = 128,
    ftype: str = "F16",
    seed: int = 0,
    name: str | None = None,
    swa_pattern: list[bool] | None = None,
) -> Path:
    """Write a random-weight gemma3n model that llama.cpp can load and run; return its path.

    More than 20 layers exercise the shared KV cache (layers 20.. reuse layers 18 and 19)."""
    if n_vocab < MINIMAL_VOCAB_SIZE:
        raise ValueError(f"n_vocab must be at least {MINIMAL_VOCAB_SIZE}")
    plans = plan_gemma3n_tensors(ftype=ftype, n_layer=n_layer, n_embd=n_embd, n_head=n_head,
                                 n_head_kv=n_head_kv, head_dim=head_dim, n_ff=n_ff, n_vocab=n_vocab)

    def metadata(w) -> None:
        add_gemma3n_metadata(w, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv,
                             head_dim=head_dim, n_ff=n_ff, context_length=context_length,
                             sliding_window=sliding_window, swa_pattern=swa_pattern)

    return write_plans(path, "gemma3n", plans, metadata, ftype=ftype, n_vocab=n_vocab, seed=seed, name=name)
