"""Tiny random-weight dense Gemma 4 (gemma4) GGUF files for tests: gguf/gemma4_layout.py's
tensors and keys (window and full-attention layers with head sizes and KV-head counts of
their own, full layers without a V projection), written with synthetic.py's vocabulary and
quantizers, so llama.cpp loads them and allocates what it would for a real model of that shape."""

from __future__ import annotations

import os
from pathlib import Path

from rooflight.gguf.gemma4_layout import ARCH, Gemma4Shape, gemma4_metadata, plan_gemma4_tensors
from rooflight.gguf.synthetic_hybrid import add_metadata, write_plans


def write_gemma4_model(path: str | os.PathLike[str], shape: Gemma4Shape, *, ftype: str = "F16", seed: int = 0,
                       name: str | None = None) -> Path:
    """Write a random-weight gemma4 model that llama.cpp can load and run; return its path."""
    if len(shape.swa_layers) < 1 or all(shape.swa_layers):
        raise ValueError("Gemma 4 needs at least one full-attention layer (its rope_freqs belong to one)")
    return write_plans(path, ARCH, plan_gemma4_tensors(shape, ftype), lambda w: add_metadata(w, gemma4_metadata(shape)),
                       ftype=ftype, n_vocab=shape.n_vocab, seed=seed, name=name)
