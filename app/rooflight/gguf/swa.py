"""Which layers use sliding-window attention, exactly as llama.cpp's loader decides.

Source: the llama.cpp vendored by llama-cpp-python 0.3.36 — `llama_hparams::set_swa_pattern`
(src/llama-hparams.cpp), `llama_model_base::load_swa_pattern` (src/llama-model.cpp) and
each architecture's `load_arch_hparams` in src/models/*.cpp. The KV cache of a SWA layer
holds about `window + n_ubatch` cells instead of `n_ctx`, so getting this wrong misstates
memory by up to 6x on Gemma 3. Architectures not listed here have no SWA in llama.cpp.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .arrays import ArrayInfo


@dataclass(frozen=True)
class SwaRule:
    # pattern: set_swa_pattern(n_pattern, dense_first), overridable by the pattern key
    # array:   per-layer bool/int array from the pattern key only
    # all:     every layer (set_swa_pattern(0))
    # non_recurrent: every attention layer (LFM2: layers with head_count_kv > 0)
    # none:    llama.cpp ignores the window (Phi-3 SWA is disabled there)
    kind: str
    n_pattern: int = 0
    dense_first: bool = False
    swa_type: str = "standard"  # standard | chunked | symmetric
    needs_window: bool = False  # SWA only if the sliding_window key exists and is > 0
    default_window: int = 0  # llama.cpp's value when the key is absent
    forced_window: int = 0  # llama.cpp overwrites the key's value with this


RULES: dict[str, SwaRule] = {
    "gemma2": SwaRule("pattern", 2, default_window=4096),
    "gemma3": SwaRule("pattern", 6, needs_window=True),
    "gemma3n": SwaRule("pattern", 5),
    "gemma-embedding": SwaRule("pattern", 6, swa_type="symmetric"),
    "gemma4": SwaRule("array"),
    "gemma4-assistant": SwaRule("array"),
    "cohere2": SwaRule("pattern", 4),
    "cohere2moe": SwaRule("pattern", 4, dense_first=True),
    "gpt-oss": SwaRule("pattern", 2),
    "exaone-moe": SwaRule("pattern", 4, default_window=128),
    "muse-glimmer": SwaRule("pattern", 4),
    "afmoe": SwaRule("pattern", 4, needs_window=True),
    "laguna": SwaRule("pattern", 4, dense_first=True, needs_window=True),
    "mellum": SwaRule("pattern", 4, needs_window=True),
    "olmo2": SwaRule("pattern", 4, needs_window=True),
    "plamo3": SwaRule("pattern", 8, needs_window=True),
    "modern-bert": SwaRule("pattern", 3, True, "symmetric", needs_window=True),
    "smallthinker": SwaRule("pattern", 4, True, needs_window=True, forced_window=4096),
    "granite_swa": SwaRule("array"),
    "maple": SwaRule("array"),
    "mimo2": SwaRule("array"),
    "step35": SwaRule("array"),
    "spark2_5": SwaRule("array"),
    "dots3note": SwaRule("array"),
    "dflash": SwaRule("array", needs_window=True),
    "deepseek4": SwaRule("all"),
    "lfm2": SwaRule("non_recurrent", needs_window=True),
    "phi3": SwaRule("none"),
}


@dataclass(frozen=True)
class SwaLayout:
    swa_type: str  # none | standard | chunked | symmetric
    window: int  # 0 when swa_type is none
    layers: tuple[bool, ...]  # per layer, True where the layer attends within the window


def _set_pattern(n_pattern: int, dense_first: bool, n_layer: int, n_all: int) -> list[bool]:
    """llama_hparams::set_swa_pattern; layers past n_layer (MTP / nextn) are dense."""
    out = []
    for il in range(n_all):
        if il >= n_layer:
            out.append(False)
        elif n_pattern == 0:
            out.append(True)
        elif dense_first:
            out.append(il % n_pattern != 0)
        else:
            out.append(il % n_pattern < n_pattern - 1)
    return out


def _from_array(value: ArrayInfo, n_all: int) -> list[bool] | None:
    # llama_model_loader::get_arr: bool/int arrays, non-zero = SWA, missing tail stays dense
    if value.values is None or value.length > n_all:
        return None
    vals = [bool(v) for v in value.values if isinstance(v, int | bool)]
    if len(vals) != value.length:
        return None
    return vals + [False] * (n_all - len(vals))


def swa_layout(arch: str, meta: Mapping[str, Any], n_layer_all: int) -> SwaLayout:
    """The SWA type, window and per-layer flags llama.cpp uses for this model."""
    dense = SwaLayout("none", 0, (False,) * n_layer_all)
    window_key = f"{arch}.attention.sliding_window"
    pattern_key = f"{arch}.attention.sliding_window_pattern"
    key_window = meta.get(window_key)
    found = type(key_window) is int
    window: int = key_window if found else 0  # type: ignore[assignment]  # int when found
    rule: SwaRule | None
    nextn = meta.get(f"{arch}.nextn_predict_layers")
    n_layer = (
        n_layer_all - nextn if type(nextn) is int and 0 <= nextn <= n_layer_all else n_layer_all
    )

    if arch == "llama4":
        # llama4.cpp: chunked attention with a fixed 8192 chunk unless the key says 0
        if found and window == 0:
            return dense
        rule = SwaRule("pattern", 4, swa_type="chunked", forced_window=8192)
    elif arch == "exaone4":
        # exaone4.cpp: only the 64-layer (32B) model interleaves SWA, default window 4096
        if n_layer != 64:
            return dense
        rule = SwaRule("pattern", 4, default_window=4096)
    else:
        rule = RULES.get(arch)
        if rule is None or rule.kind == "none":
            return dense

    if rule.needs_window and not (found and window > 0):
        return dense
    if not found:
        window = rule.default_window
    if rule.forced_window:
        window = rule.forced_window

    pattern = meta.get(pattern_key)
    if rule.kind == "pattern":
        layers = _from_array(pattern, n_layer_all) if isinstance(pattern, ArrayInfo) else None
        if layers is None:
            n_pattern = pattern if type(pattern) is int and pattern >= 0 else rule.n_pattern
            layers = _set_pattern(n_pattern, rule.dense_first, n_layer, n_layer_all)
    elif rule.kind == "array":
        layers = _from_array(pattern, n_layer_all) if isinstance(pattern, ArrayInfo) else None
        if layers is None:
            layers = [False] * n_layer_all
    elif rule.kind == "all":
        layers = [True] * n_layer_all
    else:  # non_recurrent: LFM2 attention layers are those with KV heads
        kv = meta.get(f"{arch}.attention.head_count_kv")
        if isinstance(kv, ArrayInfo) and kv.values is not None and kv.length == n_layer_all:
            layers = [bool(v) for v in kv.values]
        else:
            layers = [bool(kv)] * n_layer_all

    if window <= 0 or not any(layers):
        # llama.cpp would refuse a SWA model without a window; never promise a 0-cell cache
        return dense
    return SwaLayout(rule.swa_type, window, tuple(layers))
