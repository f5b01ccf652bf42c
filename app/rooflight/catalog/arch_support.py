"""Which catalog architectures the estimator can size and price, and a clear sentence where not.

A catalog entry names its llama.cpp architecture (convert_hf_to_gguf's name). The
architectures in NOT_MODELED have layers the transformer layouts of the size recipe do not
have (recurrent / SSM state instead of KV cells, per-layer embeddings, a shared expert
beside the routed ones, chunked attention): a spec built from a transformer layout would
give a confident wrong number, so such a model is built from its config.json fields
(`hparams.config`) by the estimator's config builder where there is one
(rooflight.gguf.from_config.spec_from_config), and otherwise -- or when its recorded fields
are not enough -- the ranking lists it as "Estimate not available for ARCH" with the reason.
The estimator's own list of architectures it refuses (rooflight.estimate.support) is
honoured first. `register(arch, builder)` adds a builder of one's own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from rooflight.errors import RooflightError

NOT_MODELED: dict[str, str] = {
    "granitehybrid": "Mamba-2 layers beside attention (recurrent state instead of KV cells)",
    "nemotron_h": "Mamba-2 layers beside attention (recurrent state instead of KV cells)",
    "nemotron_h_moe": "Mamba-2 layers beside attention and experts (recurrent state instead of KV cells)",
    "jamba": "Mamba layers beside attention (recurrent state instead of KV cells)",
    "qwen3next": "gated delta-net linear attention beside full attention (recurrent state)",
    "qwen35": "gated delta-net linear attention beside full attention (recurrent state)",
    "qwen35moe": "gated delta-net linear attention beside full attention (recurrent state)",
    "lfm2": "short convolution layers beside attention (convolution state)",
    "lfm2moe": "short convolution layers beside attention (convolution state)",
    "gemma3n": "per-layer embeddings, AltUp and KV sharing across layers",
    # every Gemma 4 is built from its config.json fields (gguf/gemma4_layout.py); the reason
    # shows only for an entry whose recorded fields are not enough
    "gemma4": "window and full layers of their own head sizes, experts, per-layer embeddings, a shared KV cache",
    "llama4": "a shared expert beside the routed ones and chunked attention",
}

SPEC_BUILDERS: dict[str, Callable] = {}


def register(arch: str, builder: Callable) -> None:
    """Let `arch` be estimated: builder(model, quant) -> ModelSpec."""
    SPEC_BUILDERS[arch] = builder
    _build_error.cache_clear()


@functools.cache
def _estimator_support():
    try:
        from rooflight.estimate import support
    except ImportError:
        return None
    return support


def _estimator_refuses(arch: str) -> str | None:
    support = _estimator_support()
    return None if support is None else support.unavailable_reason(arch)


@functools.cache
def _config_builder() -> Callable | None:
    try:
        from rooflight.gguf.from_config import spec_from_config
    except ImportError:
        return None
    return spec_from_config


def spec_builder(model) -> Callable | None:
    """builder(model, quant) -> ModelSpec for an architecture the transformer layouts do not
    cover, or None where the catalog's own recipe applies."""
    arch = model.architecture
    if arch in SPEC_BUILDERS:
        return SPEC_BUILDERS[arch]
    if arch not in NOT_MODELED or not model.hparams.config:
        return None
    build = _config_builder()
    if build is None:
        return None
    return lambda m, quant: build(dict(m.hparams.config), arch=m.architecture, ftype=quant, name=m.id)


@functools.lru_cache(maxsize=512)
def _build_error(model) -> str | None:
    builder = spec_builder(model)
    if builder is None:
        return "not modeled yet"
    try:
        builder(model, "Q4_K_M")
    except (RooflightError, KeyError, TypeError, ValueError) as e:
        return str(e).rstrip(".")
    return None


def unavailable_reason(model) -> str | None:
    """None where the model can be estimated; else one sentence saying why not."""
    arch = model.architecture
    refused = _estimator_refuses(arch)
    if refused is not None:
        return refused
    if arch not in NOT_MODELED:
        return None
    from rooflight.catalog.models import is_packaged

    if is_packaged(model):  # a packaged entry: the answer is kept on disk
        from rooflight.catalog.spec_cache import spec_cache

        error = spec_cache().value(f"build_error|{model.id}", lambda: _build_error(model))
    else:
        error = _build_error(model)
    if error is None:
        return None
    return f"Estimate not available for {arch} ({NOT_MODELED[arch]}): {error}."
