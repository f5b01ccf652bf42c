"""ModelSpec: everything the estimator needs to know about a GGUF model.

Built from a GGUF header (gguf/header.py), never from a file name. Frozen and plain so
that the estimator stays a set of pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from rooflight.gguf.derived import derived


@dataclass(frozen=True)
class TensorInfo:
    name: str  # e.g. "blk.3.attn_q.weight"
    ggml_type: str  # GGMLQuantizationType name: "Q4_K", "F32", ...
    shape: tuple[int, ...]  # GGUF order (ne0, ne1, ...)
    n_bytes: int  # exact bytes in the file
    layer: int | None  # block index for "blk.N.*", None for non-repeating tensors

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def is_expert(self) -> bool:
        """Routed-expert tensor (ffn_*_exps): only n_expert_used of n_expert are read per token."""
        return "_exps" in self.name


class LazyTensors(Sequence[TensorInfo]):
    """A spec's tensor list, built on first use. A spec restored from the catalog's spec
    cache carries every figure a ranking derives from its tensors (gguf/derived.py), so the
    list (hundreds of objects per spec) is built only when something else reads it. Equal
    to, and hashed like, the tuple it builds; pickles as that tuple."""

    __slots__ = ("_build", "_tensors")

    def __init__(self, build: Callable[[], Iterable[TensorInfo]]) -> None:
        self._build = build
        self._tensors: tuple[TensorInfo, ...] | None = None

    def _all(self) -> tuple[TensorInfo, ...]:
        # Workers may ask at once: each may build (the same tuple), none sees a half-built one
        tensors = self._tensors
        if tensors is None:
            tensors = self._tensors = tuple(self._build())
        return tensors

    @property
    def built(self) -> bool:
        return self._tensors is not None

    def __len__(self) -> int:
        return len(self._all())

    @overload
    def __getitem__(self, i: int) -> TensorInfo: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[TensorInfo, ...]: ...
    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self) -> Iterator[TensorInfo]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyTensors):
            other = other._all()
        return self._all() == other

    def __hash__(self) -> int:
        return hash(self._all())

    def __reduce__(self):
        return (tuple, (self._all(),))

    def __repr__(self) -> str:
        return f"LazyTensors({len(self)} tensors)" if self.built else "LazyTensors(not built)"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    architecture: str  # general.architecture: llama, gemma3, qwen3moe, ...
    file_type: str  # "Q4_K_M" etc. from general.file_type, or the dominant tensor type
    file_bytes: int  # total size of the file(s) on disk
    n_layer: int
    n_embd: int
    n_head: tuple[int, ...]  # per layer (GGUF may store an array)
    n_head_kv: tuple[int, ...]  # per layer; 0 for layers without attention (recurrent)
    head_dim_k: int  # attention.key_length (default n_embd / n_head): full-attention layers'
    head_dim_v: int  # attention.value_length
    n_ff: tuple[int, ...]  # per layer
    n_vocab: int
    context_length: int  # training context (n_ctx_train)
    tensors: Sequence[TensorInfo]  # a tuple, or LazyTensors for a restored catalog spec
    sliding_window: int = 0  # 0 = no sliding-window attention
    swa_layers: tuple[bool, ...] = ()  # per layer: True where the layer uses the window
    n_expert: int = 0
    n_expert_used: int = 0
    n_expert_shared: int = 0
    tied_embeddings: bool = False  # no output.weight: token_embd doubles as output
    split_count: int = 1
    chat_template: str | None = None
    # MLA (DeepSeek-2/3, Kimi): cache holds kv_lora_rank + rope dims per token and layer
    kv_lora_rank: int = 0
    rope_dim: int = 0
    # recurrent / SSM layers (Mamba, RWKV, hybrids): True where the layer keeps a state
    recurrent_layers: tuple[bool, ...] = ()
    ssm_state_bytes_per_seq: int = 0  # conv + ssm state per recurrent layer, f32
    # per layer: the layer whose KV cache it attends to when it keeps none of its own
    # (Gemma 3n: layers from 20 on reuse layers 18 / 19), -1 otherwise; () = no sharing
    kv_reuse: tuple[int, ...] = ()
    metadata: dict = field(default_factory=dict, compare=False, hash=False)  # small scalar keys
    # added by the GGUF reader (gguf/build.py):
    swa_type: str = "none"  # none | standard | chunked (llama4) | symmetric (embedding models)
    n_ff_exp: int = 0  # {arch}.expert_feed_forward_length: FFN width of one routed expert
    # attention.key_length_swa / value_length_swa: the sliding-window layers' head sizes
    # where they differ (Gemma 4: 256 against 512); 0 = the full layers' (llama.cpp's default)
    head_dim_k_swa: int = 0
    head_dim_v_swa: int = 0
    header_bytes: int = field(default=0, compare=False)  # bytes fetched to read the header(s)
    # a vision model's projector (mmproj GGUF), when one is paired with it (gguf/projector.py);
    # the plan then counts its memory and the encoding of one image
    projector: Any = None

    # ---- derived figures -------------------------------------------------------------

    def head_dims(self, layer: int) -> tuple[int, int]:
        """(K, V) head size of one layer: the sliding-window sizes on a window layer where
        the file gives them (llama_hparams::n_embd_head_k(il)), else the full ones."""
        if self.swa_layers and self.swa_layers[layer]:
            return self.head_dim_k_swa or self.head_dim_k, self.head_dim_v_swa or self.head_dim_v
        return self.head_dim_k, self.head_dim_v

    @property
    def params(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    @property
    def tensor_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0

    def layer_bytes(self, layer: int) -> int:
        return sum(t.n_bytes for t in self.tensors if t.layer == layer)

    def active_layer_bytes(self, layer: int) -> int:
        """Bytes read per generated token in one block (only the routed experts used)."""
        total = 0.0
        for t in self.tensors:
            if t.layer != layer:
                continue
            if t.is_expert and self.n_expert:
                total += t.n_bytes * self.n_expert_used / self.n_expert
            else:
                total += t.n_bytes
        return int(total)

    def tensor(self, name: str) -> TensorInfo | None:
        return derived(self, ("tensor", name), lambda spec: next((t for t in spec.tensors if t.name == name), None))

    @property
    def active_params(self) -> int:
        total = 0.0
        for t in self.tensors:
            if t.is_expert and self.n_expert:
                total += t.n_elements * self.n_expert_used / self.n_expert
            else:
                total += t.n_elements
        return int(total)
