"""ModelSpecs for Hub files: stored on disk, and resized to a file size the Hub reports.

Reading a header costs a few MB of range requests (the vocabulary sits in it), so a
repository with 25 quantizations is not read 25 times to rank it. One header gives the
model's real architecture, hyper-parameters and tensor shapes; every other quantization
of the same repository differs only in its weights' types and bytes, and the Hub's file
listing says exactly how many bytes each file has. `resize_spec` spreads that exact size
over the weight tensors in the proportions of the header that was read and gives them
the quant's main type (a file of the header's own quant keeps each tensor's type). KV
cache, compute buffers and parameter counts (which do not depend on the quant) stay
exact; weights are exact in total and close per layer.
The catalog uses the same resize when the Hub confirms a computed file size.
"""

from __future__ import annotations

import re
from dataclasses import fields, replace
from typing import Any

from rooflight.gguf.spec import ModelSpec, TensorInfo

# The tensor type most weights get in a file of this quant (llama.cpp's
# llama_ftype_get_default_type); the _S/_M/_L mixes only move a few tensors up a type.
_BASE_TYPE = {
    "F32": "F32", "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0",
    "Q4_0": "Q4_0", "Q4_1": "Q4_1", "Q5_0": "Q5_0", "Q5_1": "Q5_1",
    "IQ4_XS": "IQ4_XS", "IQ4_NL": "IQ4_NL",
    "IQ3_XXS": "IQ3_XXS", "IQ3_XS": "IQ3_S", "IQ3_S": "IQ3_S", "IQ3_M": "IQ3_S",
    "IQ2_XXS": "IQ2_XXS", "IQ2_XS": "IQ2_XS", "IQ2_S": "IQ2_XS", "IQ2_M": "IQ2_S",
    "IQ1_S": "IQ1_S", "IQ1_M": "IQ1_M", "TQ1_0": "TQ1_0", "TQ2_0": "TQ2_0",
    "MXFP4": "MXFP4", "MXFP4_MOE": "MXFP4",
}
_K_QUANT = re.compile(r"^(Q[2-6]_K)(?:_\w+)?$")
# Tensors that keep their type in every quant: norms, biases and MoE routers stay F32.
_FIXED_TYPES = ("F32",)


def quant_base_type(quant: str | None) -> str | None:
    """'Q4_K_M' -> 'Q4_K', 'UD-Q4_K_XL' -> 'Q4_K', 'IQ2_M' -> 'IQ2_S'; None if unknown."""
    if not quant:
        return None
    q = quant.upper().removeprefix("UD-")
    if q in _BASE_TYPE:
        return _BASE_TYPE[q]
    m = _K_QUANT.match(q)
    return m.group(1) if m else None


def _label(quant: str) -> str:
    return quant.upper().removeprefix("UD-")


def resize_spec(
    spec: ModelSpec, file_bytes: int, *, quant: str | None = None, header_bytes: int | None = None
) -> ModelSpec:
    """`spec` as a file of `file_bytes` bytes (and of quant `quant`, if given).

    header_bytes: bytes of the target file that are not tensor data (header, padding);
    default: the same as `spec`'s own file, which for a spec built from hyper-parameters
    (no header) is 0 -- the estimate then counts the target's header as weights, a
    fraction of a percent too much, never too little.
    """
    overhead = max(0, spec.file_bytes - spec.tensor_bytes) if header_bytes is None else header_bytes
    fixed = sum(t.n_bytes for t in spec.tensors if t.ggml_type in _FIXED_TYPES)
    scalable = spec.tensor_bytes - fixed
    target = file_bytes - overhead - fixed
    if scalable <= 0 or target <= 0:
        return replace(spec, file_bytes=file_bytes, file_type=(quant or spec.file_type).upper())
    k = target / scalable
    # Another quant than the spec's own: its tensors take that quant's main type. The spec's
    # own quant (a recipe resized to its published file): each tensor keeps its recipe type,
    # so a Q4_K_M file's Q6_K tensors stay Q6_K (the kernels price them per type).
    same = quant is None or _label(quant) == _label(spec.file_type)
    base = None if same else quant_base_type(quant)
    tensors = tuple(
        t if t.ggml_type in _FIXED_TYPES
        else TensorInfo(t.name, base or t.ggml_type, t.shape, round(t.n_bytes * k), t.layer)
        for t in spec.tensors
    )
    return replace(
        spec, tensors=tensors, file_bytes=file_bytes,
        file_type=(_label(quant) if quant else spec.file_type),
    )


# ---- the disk form of a ModelSpec (hub_cache "specs") -----------------------------------


def spec_to_json(spec: ModelSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(ModelSpec):
        v = getattr(spec, f.name)
        if f.name == "tensors":
            v = [[t.name, t.ggml_type, list(t.shape), t.n_bytes, t.layer] for t in v]
        elif f.name == "projector":
            continue  # the model's own header only; a projector is paired where it is found
        elif isinstance(v, tuple):
            v = list(v)
        out[f.name] = v
    return out


def spec_from_json(doc: dict[str, Any]) -> ModelSpec:
    """Inverse of spec_to_json; raises (KeyError, TypeError, ValueError) on a bad document."""
    kwargs: dict[str, Any] = {}
    for f in fields(ModelSpec):
        if f.name not in doc:
            continue  # a field added since the file was written keeps its default
        v = doc[f.name]
        if f.name == "tensors":
            v = tuple(TensorInfo(str(n), str(t), tuple(int(x) for x in s), int(b),
                                 None if lay is None else int(lay)) for n, t, s, b, lay in v)
        elif isinstance(v, list):
            v = tuple(v)
        kwargs[f.name] = v
    return ModelSpec(**kwargs)
