"""Tiny random-weight Gemma 3n (gemma3n) GGUF files for tests: gguf/arch_recipe.py's
tensors and keys (per-layer embeddings, AltUp, LAuReL, the KV cache shared after layer 20),
written with synthetic.py's vocabulary and quantizers."""

from __future__ import annotations

import os
from pathlib import Path

from rooflight.gguf.arch_recipe import (  # noqa: F401 (importable from here as before)
    KV_FROM_START,
    LAUREL_RANK,
    MINIMAL_VOCAB_SIZE,
    N_ALTUP,
    N_EMBD_ALTUP,
    gemma3n_metadata,
    plan_gemma3n_tensors,
)
from rooflight.gguf.synthetic_hybrid import add_metadata, write_plans


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
        add_metadata(w, gemma3n_metadata(n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv,
                             head_dim=head_dim, n_ff=n_ff, context_length=context_length,
                             sliding_window=sliding_window, swa_pattern=swa_pattern))

    return write_plans(path, "gemma3n", plans, metadata, ftype=ftype, n_vocab=n_vocab, seed=seed, name=name)
