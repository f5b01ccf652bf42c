"""Optimization advisor: which llama.cpp settings buy the most for one model on one machine.

Hardware is fixed once bought; the settings are not. advise() searches the settings
llama.cpp offers - the quantization file (when the other files of the model are known),
context length, KV cache type, flash attention, full or windowed sliding-window cache,
GPU layers, MoE experts kept on the CPU, threads, batch and micro-batch - and evaluates
every candidate with the estimator itself (plan(): plan_memory + estimate_performance),
never with numbers of its own. The result is a small Pareto front over quality, decode
speed, prefill speed and memory, and a few advice cards ranked by gain, each with the
exact settings that produce it.

How the space is pruned so that one model takes well under 200 ms: advise_search.py.

Quality effects are only those with a published source: weight quantization from the
llama.cpp perplexity table (REFERENCE.md §2, catalog/quality.py) and the q8_0 KV cache
from llama.cpp PR #7412. Everything else says "quality effect: not measured", or why
the outputs do not change.

Pure functions and frozen dataclasses: no llama.cpp, no Qt, no network.

The advisor lives in five modules; this one is its front door (its public names are
importable from here):
- advise_types.py: Variant, Candidate, AdviceCard, Advice, published quality effects, the
  settings space, a card's settings back to a RunConfig / Wishes;
- advise_search.py: advise(), the evaluator memo, the Pareto front, catalog files;
- advise_cards.py: one card per lever, and the gain that ranks them;
- advise_experts.py: the MoE experts-in-RAM candidates;
- advise_text.py: the wording of a card.
"""

from __future__ import annotations

from rooflight.estimate.advise_cards import gain
from rooflight.estimate.advise_experts import min_experts_on_cpu, plan_experts_on_cpu
from rooflight.estimate.advise_search import MIN_SCORE, advise, catalog_variants, default_quant
from rooflight.estimate.advise_types import (
    CONTEXT_LADDER,
    FIT_RANK,
    FLASH_SOURCE,
    KV_DPPL,
    KV_KLD,
    KV_SOURCE,
    NOT_MEASURED,
    QUANT_DPPL,
    QUANT_KLD_PUBLISHED,
    QUANT_SOURCE,
    RUNTIME_NOTE,
    SWA_SOURCE,
    UBATCH_SIZES,
    Advice,
    AdviceCard,
    Candidate,
    Quality,
    Variant,
    quality_of,
    settings_config,
    settings_wishes,
)

__all__ = [
    "CONTEXT_LADDER", "FIT_RANK", "FLASH_SOURCE", "KV_DPPL", "KV_KLD", "KV_SOURCE", "MIN_SCORE", "NOT_MEASURED",
    "QUANT_DPPL", "QUANT_KLD_PUBLISHED", "QUANT_SOURCE", "RUNTIME_NOTE", "SWA_SOURCE", "UBATCH_SIZES",
    "Advice", "AdviceCard", "Candidate", "Quality", "Variant", "advise", "catalog_variants", "default_quant",
    "gain", "min_experts_on_cpu", "plan_experts_on_cpu", "quality_of", "settings_config", "settings_wishes",
]
