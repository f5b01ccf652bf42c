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

The advisor lives in four modules; this one is its front door (every name is importable
from here) and holds the MoE experts-in-RAM candidates:
- advise_types.py: Variant, Candidate, AdviceCard, Advice, published quality effects, the
  settings space, a card's settings back to a RunConfig / Wishes;
- advise_search.py: advise(), the evaluator memo, the Pareto front, catalog files;
- advise_cards.py: one card per lever, and the gain that ranks them;
- advise_text.py: the wording of a card.
"""

from __future__ import annotations

from dataclasses import replace

from rooflight.estimate.calibration import Calibration
from rooflight.estimate.moe_plan import fewest_experts_in_ram
from rooflight.estimate.plan import Estimate, Wishes, plan
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile

# ---- MoE experts in RAM (llama.cpp's --n-cpu-moe; estimate/experts.py, estimate/moe_plan.py) ----


def _experts_moved(spec: ModelSpec, n_cpu_moe: int) -> ModelSpec:
    """The spec with the routed-expert tensors of the first n layers taken out of their
    blocks, i.e. placed with the CPU-side input tensors: an independent way to state what
    --n-cpu-moe does to memory (tests compare plan_memory of this with RunConfig.n_cpu_moe)."""
    tensors = tuple(
        replace(t, layer=None) if t.is_expert and t.layer is not None and t.layer < n_cpu_moe else t
        for t in spec.tensors
    )
    return replace(spec, tensors=tensors)


def plan_experts_on_cpu(
    spec: ModelSpec,
    hardware: HardwareProfile,
    wishes: Wishes,
    n_cpu_moe: int,
    *,
    calibration: Calibration | None = None,
) -> Estimate:
    """Every block offloaded, the experts of the first n_cpu_moe blocks in RAM: plan() with
    RunConfig.n_cpu_moe, the same estimator (and the same load) as `estimate --n-cpu-moe N`."""
    return plan(spec, hardware, replace(wishes, n_gpu_layers=spec.n_layer + 1, n_cpu_moe=n_cpu_moe),
                calibration=calibration)


def _min_experts_on_cpu(spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes) -> int | None:
    """Fewest leading blocks whose experts must stay in RAM for the rest of the model to
    fit on the GPU(s) with every block offloaded, or None when all of them are not enough."""
    return fewest_experts_in_ram(spec, hardware, replace(wishes, n_cpu_moe=0), spec.n_layer + 1)


# ---- the rest of the advisor, importable from here (advise.py was one module) ----------------
# Imported after the functions above, which advise_search / advise_cards call at run time.

from rooflight.estimate.advise_cards import (  # noqa: E402, F401
    _batch_card,
    _better,
    _card,
    _combined_card,
    _context_cards,
    _experts_card,
    _flash_card,
    _gpu_layers_card,
    _kv_card,
    _quant_card,
    _quant_cards,
    _rank_key,
    _swa_card,
    _threads_card,
    gain,
)
from rooflight.estimate.advise_search import (  # noqa: E402, F401
    MIN_SCORE,
    _catalog_specs,
    _objectives,
    _pareto,
    _Search,
    advise,
    catalog_variants,
    default_quant,
)
from rooflight.estimate.advise_text import _FIT_PHRASE, _changes, _ctx, _gb, _numbers, _title, _tok  # noqa: E402, F401
from rooflight.estimate.advise_types import (  # noqa: E402, F401
    _CONFIG_FIELDS,
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
    _has_gpu,
    _has_swa,
    _kv_types_for,
    quality_of,
    settings_config,
    settings_wishes,
)
