"""A ModelSpec from published hyper-parameters, before any GGUF header is read.

Used for models whose file is not at hand (catalog entries, published benchmark models):
the tensor list and per-tensor quantization types come from the same llama-quant recipe
the synthetic writer follows (synthetic.plan_tensors), so the byte counts are what
llama.cpp's quantizer would produce. Where a real header is available, use it instead.
"""

from __future__ import annotations

import re

from rooflight.gguf.spec import ModelSpec, TensorInfo
from rooflight.gguf.synthetic import plan_tensors

_LAYER_RE = re.compile(r"^blk\.(\d+)\.")


def spec_from_hparams(
    *,
    name: str,
    arch: str = "llama",
    ftype: str,
    n_layer: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    n_ff: int,
    n_vocab: int,
    context_length: int,
    head_dim: int | None = None,
    n_expert: int = 0,
    n_expert_used: int = 0,
    sliding_window: int = 0,
    swa_layers: tuple[bool, ...] = (),
    tie_embeddings: bool = False,
) -> ModelSpec:
    head_dim = head_dim or n_embd // n_head
    plans = plan_tensors(
        arch=arch, ftype=ftype, n_layer=n_layer, n_embd=n_embd, n_head=n_head,
        n_head_kv=n_head_kv, head_dim=head_dim, n_ff=n_ff, n_vocab=n_vocab,
        n_expert=n_expert, tie_embeddings=tie_embeddings,
    )
    tensors = []
    for p in plans:
        m = _LAYER_RE.match(p.name)
        # TensorPlan shapes are numpy order; GGUF lists ne0 first
        tensors.append(TensorInfo(p.name, p.qtype.name, tuple(reversed(p.shape)), p.n_bytes,
                                  int(m.group(1)) if m else None))
    return ModelSpec(
        name=name,
        architecture=arch,
        file_type=ftype.upper(),
        file_bytes=sum(t.n_bytes for t in tensors),
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=(n_head,) * n_layer,
        n_head_kv=(n_head_kv,) * n_layer,
        head_dim_k=head_dim,
        head_dim_v=head_dim,
        n_ff=(n_ff,) * n_layer,
        n_vocab=n_vocab,
        context_length=context_length,
        tensors=tuple(tensors),
        sliding_window=sliding_window,
        swa_layers=swa_layers,
        n_expert=n_expert,
        n_expert_used=n_expert_used,
        tied_embeddings=tie_embeddings,
    )

