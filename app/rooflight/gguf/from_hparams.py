"""A ModelSpec from published hyper-parameters, before any GGUF header is read.

Used for models whose file is not at hand (catalog entries, published benchmark models):
the tensor list and per-tensor quantization types come from the same llama-quant recipe
the synthetic writer follows (quant_recipe.plan_tensors), so the byte counts are what
llama.cpp's quantizer would produce. Where a real header is available, use it instead.
"""

from __future__ import annotations

from rooflight.gguf.quant_recipe import TYPE_NAMES, tensor_rows
from rooflight.gguf.spec import ModelSpec, TensorInfo


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
    rows = tensor_rows(
        arch=arch, ftype=ftype, n_layer=n_layer, n_embd=n_embd, n_head=n_head,
        n_head_kv=n_head_kv, head_dim=head_dim, n_ff=n_ff, n_vocab=n_vocab,
        n_expert=n_expert, tie_embeddings=tie_embeddings,
    )
    # the recipe's shapes are numpy order; GGUF lists ne0 first
    ne: dict[tuple[int, ...], tuple[int, ...]] = {}
    tensors = [TensorInfo(r.name, TYPE_NAMES[r.qtype], ne.get(r.shape) or ne.setdefault(r.shape, r.shape[::-1]),
                          r.n_bytes, r.layer) for r in rows]
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

