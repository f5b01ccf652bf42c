"""ModelSpecs for Hub files: stored on disk, and resized to a file size the Hub reports.

Reading a header costs a few MB of range requests (the vocabulary sits in it), so a
repository with 25 quantizations is not read 25 times to rank it. One header gives the
model's real architecture, hyper-parameters and tensor shapes; every other quantization
of the same repository differs only in its weights' types and bytes, and the Hub's file
listing says exactly how many bytes each file has. `resize_spec` spreads that exact size
over the weight tensors of the header that was read, each typed as that quant's file
would have it (the header's main type becomes the quant's; the tensors its mix gave more
bits keep them; llama.cpp's fallbacks for rows a block does not divide), a file of the
header's own quant keeping every tensor's type. KV cache, compute buffers and parameter
counts (which do not depend on the quant) stay exact; weights are exact in total and
close per layer.
The catalog uses the same resize when the Hub confirms a computed file size.
"""

from __future__ import annotations

import re
from dataclasses import fields, replace
from typing import Any

from rooflight.gguf.quant_recipe import fallback_type, type_block_size
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
    q = _label(quant)
    if q in _BASE_TYPE:
        return _BASE_TYPE[q]
    m = _K_QUANT.match(q)
    return m.group(1) if m else None


def _label(quant: str) -> str:
    label = quant.upper().removeprefix("UD-")
    return "MXFP4" if label == "MXFP4_MOE" else label  # gpt-oss as released, either name


# Types a quantizer leaves as released whatever the file's label: gpt-oss's MXFP4 experts
# (its quantizers say so on their model cards: catalog/models.py); the label then says what
# the other tensors became.
_KEPT_TYPES = ("MXFP4",)


def _bits(type_name: str) -> float:
    block, size = type_block_size(type_name)
    return 8 * size / block


def _main_type(spec: ModelSpec) -> str:
    """The type most of the spec's requantizable weight bytes are in (its file's main type)."""
    by_type: dict[str, int] = {}
    for t in spec.tensors:
        if t.ggml_type not in _FIXED_TYPES + _KEPT_TYPES:
            by_type[t.ggml_type] = by_type.get(t.ggml_type, 0) + t.n_bytes
    return max(by_type, key=by_type.__getitem__) if by_type else ""


def _retype(t: TensorInfo, source: str, target: str) -> str:
    """The type tensor t of a file whose main type is `source` has in the same model's file
    of main type `target`: the main type's tensors (and their fallbacks for rows a block does
    not divide) take the target; a tensor the source's mix gave more bits (a Q4_K_M file's
    Q6_K output, attention V and half its FFN down) keeps its type unless the target has
    more; the target's fallbacks apply."""
    ne0 = t.shape[0]
    main = t.ggml_type in (source, fallback_type(source, ne0))
    if main or _bits(t.ggml_type) < _bits(target):
        return fallback_type(target, ne0)
    return t.ggml_type


def resize_spec(
    spec: ModelSpec, file_bytes: int, *, quant: str | None = None, header_bytes: int | None = None
) -> ModelSpec:
    """`spec` as a file of `file_bytes` bytes (and of quant `quant`, if given).

    Another quant than the spec's own re-types its tensors as that quant's file would have
    them (_retype); the spec's own quant (a recipe resized to its published file) keeps
    every tensor's type. Each tensor's bytes follow its type, then all are scaled by one
    factor to the file's size.

    header_bytes: bytes of the target file that are not tensor data (header, padding);
    default: the same as `spec`'s own file, which for a spec built from hyper-parameters
    (no header) is 0 -- the estimate then counts the target's header as weights, a
    fraction of a percent too much, never too little.
    """
    overhead = max(0, spec.file_bytes - spec.tensor_bytes) if header_bytes is None else header_bytes
    fixed = sum(t.n_bytes for t in spec.tensors if t.ggml_type in _FIXED_TYPES)
    target_bytes = file_bytes - overhead - fixed
    if spec.tensor_bytes - fixed <= 0 or target_bytes <= 0:
        return replace(spec, file_bytes=file_bytes, file_type=(quant or spec.file_type).upper())
    same = quant is None or _label(quant) == _label(spec.file_type)
    target = None if same else quant_base_type(quant)
    source = quant_base_type(spec.file_type)
    if source is None or source in _KEPT_TYPES:
        source = _main_type(spec)
    typed = []  # (tensor, its type in the target file, its bytes at that type before scaling)
    for t in spec.tensors:
        new = (t.ggml_type if target is None or t.ggml_type in _FIXED_TYPES + _KEPT_TYPES
               else _retype(t, source, target))
        typed.append((t, new, t.n_bytes if new == t.ggml_type else t.n_elements * _bits(new) / 8))
    k = target_bytes / sum(b for t, new, b in typed if new not in _FIXED_TYPES)
    tensors = tuple(
        t if new in _FIXED_TYPES else TensorInfo(t.name, new, t.shape, round(b * k), t.layer)
        for t, new, b in typed
    )
    return replace(spec, tensors=tensors, file_bytes=file_bytes,
                   file_type=(_label(quant) if quant else spec.file_type))


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
