"""Which catalog architectures the estimator can size and price, and a clear sentence where not.

A catalog entry names its llama.cpp architecture (convert_hf_to_gguf's name). The
architectures below have layers the memory plan and the roofline do not model yet
(recurrent / SSM state instead of KV cells, per-layer embeddings, a shared expert beside the
routed ones, chunked attention): an estimate built from a transformer layout would be a
confident wrong number, so the ranking lists them as "estimate not available for ARCH".

When the estimator learns one, register a spec builder for it (`register(arch, builder)`,
builder(model, quant) -> ModelSpec, e.g. from model.hparams.config) and the architecture
ranks like any other.
"""

from __future__ import annotations

from collections.abc import Callable

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
    "gemma4": "per-layer embeddings, mixed head sizes and experts not in the tensor layouts",
    "llama4": "a shared expert beside the routed ones and chunked attention",
}

SPEC_BUILDERS: dict[str, Callable] = {}


def register(arch: str, builder: Callable) -> None:
    """Let `arch` be estimated: builder(model, quant) -> ModelSpec."""
    SPEC_BUILDERS[arch] = builder


def unavailable_reason(model) -> str | None:
    """None where the model can be estimated; else one sentence saying why not."""
    arch = model.architecture
    if arch in NOT_MODELED and arch not in SPEC_BUILDERS:
        return f"estimate not available for {arch} ({NOT_MODELED[arch]}: not modeled yet)."
    return None
