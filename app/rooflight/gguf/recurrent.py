"""Which layers keep a recurrent state instead of KV cells, and how large it is.

Mirrors the llama.cpp vendored by llama-cpp-python 0.3.36: each architecture's
`load_arch_hparams` (src/models/*.cpp) decides `is_recr` per layer, `llama_model::create_memory`
(src/llama-model.cpp) picks which layers get a KV cache (`filter_attn`) and which a
recurrent state (`filter_recr`), and `llama_hparams::n_embd_r / n_embd_s`
(src/llama-hparams.cpp) size the state. llama_memory_recurrent allocates, per recurrent
layer, one f32 row of n_embd_r (the convolution's last d_conv-1 inputs) and one of
n_embd_s (the SSM / delta-net state) per sequence (llama-cpp-python runs one sequence, and
no rollback snapshots: n_rs_seq = 0). Its size does not depend on the context length.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .arrays import ArrayInfo

F32 = 4

# Hybrids whose layer filters and state sizes Rooflight models and tests against llama.cpp
# (tests/test_integration_hybrid_vs_llama.py), plus the pure SSMs that share the code.
# rule: how a layer is found recurrent
#   kv0      n_head_kv(il) == 0                       (lfm2, granitehybrid, jamba)
#   kv0_ff0  n_head_kv(il) == 0 and n_ff(il) == 0     (nemotron_h; the rest are MLP-only)
#   interval recurrent_layers array, else (il+1) % full_attention_interval != 0 (qwen3next)
#   all      every layer (mamba, mamba2; falcon-h1 has attention in every layer as well)
RECURRENT_RULES: dict[str, str] = {
    "lfm2": "kv0",
    "lfm2moe": "kv0",
    "granitehybrid": "kv0",
    "jamba": "kv0",
    "nemotron_h": "kv0_ff0",
    "nemotron_h_moe": "kv0_ff0",
    "qwen3next": "interval",
    "qwen35": "interval",
    "qwen35moe": "interval",
    "mamba": "all",
    "mamba2": "all",
    "falcon-h1": "all",
}
# falcon-h1 runs attention and a Mamba-2 mixer side by side in every layer
ATTENTION_AND_STATE = frozenset({"falcon-h1"})
# pure recurrent models: no KV cache at all (llm_arch_is_recurrent)
PURE_RECURRENT = frozenset({"mamba", "mamba2"})


@dataclass(frozen=True)
class RecurrentLayout:
    layers: tuple[bool, ...]  # True where the layer keeps a recurrent state
    attention: tuple[bool, ...]  # True where the layer keeps KV cells
    conv_elements: int  # n_embd_r: f32 values of convolution state per layer and sequence
    state_elements: int  # n_embd_s: f32 values of SSM / delta-net state per layer and sequence

    @property
    def bytes_per_layer(self) -> int:
        return (self.conv_elements + self.state_elements) * F32


def _u(meta: Mapping[str, Any], key: str, default: int = 0) -> int:
    v = meta.get(key)
    return v if type(v) is int and v >= 0 else default


def state_elements(arch: str, meta: Mapping[str, Any], n_embd: int) -> tuple[int, int]:
    """(n_embd_r, n_embd_s) as llama_hparams computes them."""
    conv = _u(meta, f"{arch}.ssm.conv_kernel")
    inner = _u(meta, f"{arch}.ssm.inner_size")
    d_state = _u(meta, f"{arch}.ssm.state_size")
    groups = _u(meta, f"{arch}.ssm.group_count")
    l_cache = _u(meta, f"{arch}.shortconv.l_cache")
    if l_cache:  # LFM2 short convolutions: no SSM state
        return n_embd * (l_cache - 1), d_state * inner
    n_r = max(conv - 1, 0) * (inner + 2 * groups * d_state)
    return n_r, d_state * inner


def recurrent_layout(
    arch: str,
    meta: Mapping[str, Any],
    n_layer_all: int,
    n_embd: int,
    n_head_kv: tuple[int, ...],
    n_ff: tuple[int, ...],
) -> RecurrentLayout | None:
    """The layout for a hybrid or recurrent architecture; None for plain transformers."""
    rule = RECURRENT_RULES.get(arch)
    if rule is None:
        return None
    nextn = _u(meta, f"{arch}.nextn_predict_layers")
    n_layer = n_layer_all - nextn if nextn <= n_layer_all else n_layer_all
    trunk = [il < n_layer for il in range(n_layer_all)]
    if rule == "kv0":
        recr = [trunk[il] and n_head_kv[il] == 0 for il in range(n_layer_all)]
        attn = [trunk[il] and not recr[il] for il in range(n_layer_all)]
    elif rule == "kv0_ff0":
        recr = [trunk[il] and n_head_kv[il] == 0 and n_ff[il] == 0 for il in range(n_layer_all)]
        attn = [trunk[il] and not recr[il] and n_ff[il] == 0 for il in range(n_layer_all)]
    elif rule == "interval":
        given = meta.get(f"{arch}.attention.recurrent_layers")
        if isinstance(given, ArrayInfo) and given.values is not None and given.length == n_layer_all:
            recr = [bool(v) for v in given.values]
        else:
            interval = _u(meta, f"{arch}.full_attention_interval", 4) or 4
            recr = [trunk[il] and (il + 1) % interval != 0 for il in range(n_layer_all)]
        attn = [trunk[il] and not recr[il] for il in range(n_layer_all)]
    else:  # all
        recr = list(trunk)
        attn = list(trunk) if arch in ATTENTION_AND_STATE else [False] * n_layer_all
    conv, state = state_elements(arch, meta, n_embd)
    return RecurrentLayout(tuple(recr), tuple(attn), conv, state)
