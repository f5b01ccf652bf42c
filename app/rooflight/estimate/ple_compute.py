"""Compute-buffer terms of per-layer embeddings and AltUp (Gemma 3n).

Gemma 3n adds to every token a per-layer input: rows of `per_layer_token_embd` gathered
by token plus a projection of the embedding (`per_layer_model_proj`), one
[n_embd_altup x n_layer] f32 vector per token that stays alive through every layer; and it
carries 4 AltUp streams of the residual instead of one, with their predictions beside them.
Read from src/models/gemma3n.cpp (llama.cpp vendored by llama-cpp-python 0.3.36) and
measured against its CPU compute buffer on generated gemma3n models (two shapes, n_ctx
512..8192, n_ubatch 128 and 512, flash attention on and off): within -2.1 .. +1%.

- at its start the graph holds four copies of the per-layer input (gathered rows, their
  projection, its norm, their sum), two residuals and the masks;
- inside every layer one copy stays alive, and the 4-stream state and its predictions are
  eight residual-sized tensors instead of the plain transformer's one.
"""

from __future__ import annotations

from rooflight.gguf.spec import ModelSpec

F32 = 4
N_ALTUP = {"gemma3n": 4}


def per_layer_input_width(spec: ModelSpec) -> int:
    """n_embd_altup x n_layer: f32 values of per-layer input per token (0 without PLE)."""
    proj = spec.tensor("per_layer_model_proj.weight")
    return proj.shape[1] if proj is not None and len(proj.shape) > 1 else 0


def layer_extra_bytes(spec: ModelSpec, t: int) -> int:
    """What every layer's peak holds beyond a plain transformer's, for t tokens."""
    width = per_layer_input_width(spec)
    if not width:
        return 0
    streams = N_ALTUP.get(spec.architecture, 1)
    return F32 * t * (width + 2 * streams * spec.n_embd - spec.n_embd)


def start_peak_bytes(spec: ModelSpec, t: int) -> int:
    """The graph's first moment (per-layer inputs computed), without the masks."""
    width = per_layer_input_width(spec)
    return F32 * t * (4 * width + 2 * spec.n_embd) if width else 0
