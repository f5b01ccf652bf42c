"""Architectures Rooflight cannot size: say so instead of printing a confident wrong number.

llama.cpp gives these models memory that the plan does not model (the special cases of
`llama_model::create_memory` in the llama.cpp vendored by llama-cpp-python 0.3.36, and the
recurrent and hybrid architectures whose state sizes gguf/recurrent.py does not cover).
An estimate for them would look measured and be wrong, so plan() refuses with one sentence.
"""

from __future__ import annotations

from rooflight.errors import EstimateUnavailableError
from rooflight.gguf.spec import ModelSpec

# arch -> what about it the plan does not model
UNMODELED: dict[str, str] = {
    **dict.fromkeys(("rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"), "RWKV recurrent state"),
    **dict.fromkeys(("plamo2", "kimi-linear", "bailingmoe3", "kimi-k3", "qwen4exp", "minimax-01", "glm5-next"),
                    "hybrid linear-attention state"),
    **dict.fromkeys(("deepseek32", "glm-dsa", "minimax-m3", "hy-v4", "dots3note", "deepseek4", "dflash"),
                    "sparse-attention indexer cache"),
    # the Gemma 4 draft model (gemma4-assistant) reads its target's cache
    "gemma4-assistant": "cache shared with its target model",
    **dict.fromkeys(("t5", "t5encoder", "bert", "nomic-bert", "jina-bert-v2", "modern-bert"),
                    "encoder-only or encoder-decoder graph"),
}


def unavailable_reason(architecture: str) -> str | None:
    """The one-sentence reason an estimate is not available, or None when it is."""
    what = UNMODELED.get(architecture)
    if what is None:
        return None
    return f"Estimate not available for {architecture}: Rooflight does not model its {what}."


def check_supported(spec: ModelSpec) -> None:
    reason = unavailable_reason(spec.architecture)
    if reason is not None:
        raise EstimateUnavailableError(reason, spec.architecture)
