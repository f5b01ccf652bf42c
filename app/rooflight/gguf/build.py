"""GGUF header(s) -> ModelSpec, reading keys the way llama.cpp's loader does.

Per-layer values (`head_count`, `head_count_kv`, `feed_forward_length`) may be a scalar or
an array of one value per layer, as in `llama_model_loader::get_key_or_arr`; an array of
the wrong length is an error there and here. Defaults follow llama-model.cpp:
head_count_kv = head_count, key/value_length = n_embd / n_head(0), rope dims = key_length.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from rooflight.errors import BadInputError

from .arrays import ArrayInfo
from .recurrent import recurrent_layout
from .spec import ModelSpec, TensorInfo
from .swa import swa_layout


class _TensorLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def type_name(self) -> str: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def n_bytes(self) -> int: ...


class HeaderLike(Protocol):
    """What build_model_spec reads of a header: a parsed GGUFHeader (gguf/header.py), or
    the one gguf/from_config.py writes for a config.json (read-only attributes)."""

    @property
    def source(self) -> str: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def file_size(self) -> int: ...
    @property
    def bytes_read(self) -> int: ...
    @property
    def tensors(self) -> Sequence[_TensorLike]: ...

# key names (gguf.Keys), literal so that this module needs neither the gguf package nor numpy:
# gguf/from_config.py builds catalog specs through it while ranking
_ARCHITECTURE, _TYPE, _NAME, _FILE_TYPE = "general.architecture", "general.type", "general.name", "general.file_type"
_TOKENS, _CHAT_TEMPLATE = "tokenizer.ggml.tokens", "tokenizer.chat_template"

_LAYER = re.compile(r"^blk\.(\d+)\.")
METADATA_STRING_LIMIT = 256
# llama.h ftypes that gguf 0.19's LlamaFileType does not name yet
_EXTRA_FTYPES = {41: "Q2_0"}


def _file_type_name(value: Any) -> str | None:
    if type(value) is not int:
        return None
    from .quant_recipe import FileType  # the common ones, without the gguf package

    try:
        name = FileType(value).name
    except ValueError:
        from gguf import LlamaFileType

        try:
            ft = LlamaFileType(value)
        except ValueError:
            return _EXTRA_FTYPES.get(value)
        if ft == LlamaFileType.GUESSED:
            return None
        name = ft.name
    for prefix in ("MOSTLY_", "ALL_"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _dominant_type(tensors: Sequence[TensorInfo]) -> str:
    """The weight type holding the most bytes among 2-D (matrix) tensors."""
    by_bytes: Counter[str] = Counter()
    for t in tensors:
        if len([d for d in t.shape if d > 1]) >= 2:
            by_bytes[t.ggml_type] += t.n_bytes
    if not by_bytes:
        for t in tensors:
            by_bytes[t.ggml_type] += t.n_bytes
    return by_bytes.most_common(1)[0][0] if by_bytes else "unknown"


class _Keys:
    def __init__(self, meta: dict[str, Any], arch: str, source: str) -> None:
        self.meta, self.arch, self.source = meta, arch, source

    def key(self, suffix: str) -> str:
        return f"{self.arch}.{suffix}"

    def uint(self, suffix: str, default: int | None = None) -> int | None:
        key = self.key(suffix)
        v = self.meta.get(key)
        if v is None:
            return default
        if type(v) is bool or type(v) is not int or v < 0:
            raise BadInputError(f"{self.source} has {key} = {v!r}, not a non-negative integer.")
        return v

    def required(self, suffix: str) -> int:
        v = self.uint(suffix)
        if v is None:
            raise BadInputError(
                f"{self.source} has no {self.key(suffix)} key, so it is not a model llama.cpp "
                "can load (is it a vision projector or an adapter?)."
            )
        return v

    def per_layer(self, suffix: str, n_layer: int, default: tuple[int, ...]) -> tuple[int, ...]:
        key = self.key(suffix)
        v = self.meta.get(key)
        if v is None:
            return default
        if isinstance(v, ArrayInfo):
            if v.length != n_layer or v.values is None:
                raise BadInputError(
                    f"{self.source} has {v.length} values in {key} but {n_layer} layers."
                )
            if not all(type(x) is int and x >= 0 for x in v.values):
                raise BadInputError(f"{self.source} has non-integer values in {key}.")
            return tuple(v.values)
        if type(v) is bool or type(v) is not int or v < 0:
            raise BadInputError(f"{self.source} has {key} = {v!r}, not a non-negative integer.")
        return (v,) * n_layer


def _small_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in meta.items():
        if isinstance(v, ArrayInfo) or k.startswith(_CHAT_TEMPLATE):
            continue
        if isinstance(v, str) and len(v) > METADATA_STRING_LIMIT:
            v = v[:METADATA_STRING_LIMIT]
        out[k] = v
    return out


# llama.cpp's n_layer_kv_from_start: only the first N layers keep a KV cache, the others
# attend to the last full / sliding-window layer before N (llama_model::create_memory's
# reuse callback). Gemma 3n fixes N = 20 (src/models/gemma3n.cpp); Gemma 4 keeps all but
# its attention.shared_kv_layers (src/models/gemma4.cpp).
_KV_FROM_START = {"gemma3n": 20}


def _kv_reuse(arch: str, n_layer: int, swa_layers: tuple[bool, ...], shared: int = 0) -> tuple[int, ...]:
    start = _KV_FROM_START.get(arch)
    if arch == "gemma4" and shared > 0:
        start = n_layer - shared
    if start is None or n_layer <= start:
        return ()
    return tuple(-1 if il < start else start - (2 if swa_layers[il] else 1) for il in range(n_layer))


def build_model_spec(headers: Sequence[HeaderLike], *, default_name: str) -> ModelSpec:
    """One ModelSpec from all the parts' headers of one model (metadata from the first)."""
    if not headers:
        raise BadInputError(f"{default_name}: no GGUF header to read.")
    first = headers[0]
    meta = first.metadata
    source = first.source

    arch = meta.get(_ARCHITECTURE)
    if not isinstance(arch, str) or not arch:
        raise BadInputError(f"{source} has no general.architecture key, so it is not a model.")
    if arch == "clip":
        raise BadInputError(f"{source} is a vision projector (mmproj), not a language model.")
    if meta.get(_TYPE) == "adapter":
        raise BadInputError(f"{source} is a LoRA adapter, not a model.")
    k = _Keys(meta, arch, source)

    n_layer = k.required("block_count")
    n_embd = k.required("embedding_length")
    context_length = k.required("context_length")
    if not 0 < n_layer <= 4096:
        raise BadInputError(f"{source} has {arch}.block_count = {n_layer}.")

    n_head = k.per_layer("attention.head_count", n_layer, (0,) * n_layer)
    n_head_kv = k.per_layer("attention.head_count_kv", n_layer, n_head)
    n_ff = k.per_layer("feed_forward_length", n_layer, (0,) * n_layer)
    default_head_dim = n_embd // n_head[0] if n_head and n_head[0] else 0
    head_dim_k = k.uint("attention.key_length", default_head_dim) or 0
    head_dim_v = k.uint("attention.value_length", default_head_dim) or 0
    rope_dim = k.uint("rope.dimension_count", head_dim_k) or 0

    tensors: list[TensorInfo] = []
    for h in headers:
        for t in h.tensors:
            m = _LAYER.match(t.name)
            tensors.append(
                TensorInfo(t.name, t.type_name, t.shape, t.n_bytes, int(m[1]) if m else None)
            )
    names = {t.name for t in tensors}
    if len(names) != len(tensors):
        raise BadInputError(f"{source}: two parts of the split model hold the same tensor.")

    tokens = meta.get(_TOKENS)
    if isinstance(tokens, ArrayInfo):
        n_vocab = tokens.length
    else:
        embd = next((t for t in tensors if t.name == "token_embd.weight"), None)
        n_vocab = embd.shape[1] if embd is not None and len(embd.shape) > 1 else 0

    swa = swa_layout(arch, meta, n_layer)
    recurrent = recurrent_layout(arch, meta, n_layer, n_embd, n_head_kv, n_ff)
    if recurrent is not None:
        # only the layers llama.cpp gives a KV cache keep their KV heads (create_memory's
        # filter_attn): recurrent, MLP-only and MTP layers of hybrids have none
        n_head_kv = tuple(kv if a else 0 for kv, a in zip(n_head_kv, recurrent.attention, strict=True))
    kv_reuse = _kv_reuse(arch, n_layer, swa.layers, k.uint("attention.shared_kv_layers", 0) or 0)
    file_type = _file_type_name(meta.get(_FILE_TYPE)) or _dominant_type(tensors)
    name = meta.get(_NAME)
    chat_template = meta.get(_CHAT_TEMPLATE)
    n_ff_exp = meta.get(k.key("expert_feed_forward_length"))
    if isinstance(n_ff_exp, ArrayInfo):
        n_ff_exp = max(n_ff_exp.values or (0,))

    return ModelSpec(
        name=name if isinstance(name, str) and name.strip() else default_name,
        architecture=arch,
        file_type=file_type,
        file_bytes=sum(h.file_size for h in headers),
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        head_dim_k_swa=k.uint("attention.key_length_swa", 0) or 0,
        head_dim_v_swa=k.uint("attention.value_length_swa", 0) or 0,
        n_ff=n_ff,
        n_vocab=n_vocab,
        context_length=context_length,
        tensors=tuple(tensors),
        sliding_window=swa.window,
        swa_layers=swa.layers,
        n_expert=k.uint("expert_count", 0) or 0,
        n_expert_used=max(k.per_layer("expert_used_count", n_layer, (0,))),
        n_expert_shared=k.uint("expert_shared_count", 0) or 0,
        tied_embeddings="output.weight" not in names,
        split_count=len(headers),
        chat_template=chat_template if isinstance(chat_template, str) else None,
        kv_lora_rank=k.uint("attention.kv_lora_rank", 0) or 0,
        kv_reuse=kv_reuse,
        recurrent_layers=recurrent.layers if recurrent else (),
        ssm_state_bytes_per_seq=recurrent.bytes_per_layer if recurrent else 0,
        rope_dim=rope_dim,
        metadata=_small_metadata(meta),
        swa_type=swa.swa_type,
        n_ff_exp=n_ff_exp if type(n_ff_exp) is int else 0,
        header_bytes=sum(h.bytes_read for h in headers),
    )
