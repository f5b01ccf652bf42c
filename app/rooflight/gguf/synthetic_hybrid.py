"""Tiny random-weight GGUF files of hybrid recurrent/attention architectures.

The tensors and keys are gguf/arch_recipe.py's (LFM2, LFM2-MoE, Granite 4 H, Nemotron-H,
Jamba, Qwen3-Next, Qwen3.5, Qwen3.5-MoE: what llama.cpp 0.3.36's loaders require); this
module writes them with synthetic.py's vocabulary and quantizers, so llama.cpp loads these
files and allocates for them what it would for a real model of that shape.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gguf import GGUFWriter

from rooflight.gguf.arch_recipe import (  # noqa: F401 (importable from here as before)
    DELTA_NET,
    HYBRID_ARCHITECTURES,
    HybridShape,
    _check,
    hybrid_metadata,
    plan_hybrid_tensors,
)
from rooflight.gguf.fast_writer import FastArrayWriter
from rooflight.gguf.synthetic import (
    FILE_TYPES,
    TensorPlan,
    _normalize_ftype,
    add_test_vocab,
    write_tensors,
)


def add_metadata(writer: GGUFWriter, metadata: Mapping[str, Any]) -> None:
    """Recipe keys as GGUFWriter's add_* would write them: bool, uint32, float32, string, array."""
    for key, value in metadata.items():
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, int(value))
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, list(value))


def write_hybrid_model(
    path: str | os.PathLike[str],
    shape: HybridShape,
    *,
    ftype: str = "F16",
    seed: int = 0,
    name: str | None = None,
) -> Path:
    """Write a random-weight hybrid model that llama.cpp can load and run; return its path."""
    _check(shape)
    plans = plan_hybrid_tensors(shape, ftype)
    return write_plans(path, shape.arch, plans, lambda w: add_metadata(w, hybrid_metadata(shape)), ftype=ftype,
                       n_vocab=shape.n_vocab, seed=seed, name=name)


def write_plans(
    path: str | os.PathLike[str],
    arch: str,
    plans: Sequence[TensorPlan],
    add_metadata,
    *,
    ftype: str,
    n_vocab: int,
    seed: int = 0,
    name: str | None = None,
) -> Path:
    """Write the tensors `plans` and the architecture's keys (add_metadata(writer)) with the
    synthetic SPM vocabulary, streaming one tensor at a time; nothing half-written is left."""
    ftype = _normalize_ftype(ftype)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = FastArrayWriter(path, arch)
    try:
        writer.add_type("model")
        writer.add_name(name or f"synthetic-{arch}-{ftype}")
        writer.add_file_type(int(FILE_TYPES[ftype][0]))
        writer.add_quantization_version(2)
        add_metadata(writer)
        add_test_vocab(writer, n_vocab)
        write_tensors(writer, plans, seed)
    except BaseException:
        writer.close()
        path.unlink(missing_ok=True)  # never leave a half-written model behind
        raise
    writer.close()
    return path


def layer_pattern(n_layer: int, attention_every: int, offset: int = 0) -> Sequence[bool]:
    """True where a layer is an attention layer: every `attention_every`-th from `offset`."""
    return [(il - offset) % attention_every == 0 for il in range(n_layer)]
