"""Quality of a model at a quantization: one public scale for every model, times the quant's loss.

The scale (SCALE): the Open LLM Leaderboard v2 average (Hugging Face's normalized mean of
IFEval, BBH, MATH Lvl 5, GPQA, MuSR and MMLU-PRO, 0-100), the one public evaluation run the
same way on every family. Each catalog figure is that leaderboard's own row for the model
(catalog.json names the export it was read from). The leaderboard closed in March 2025, so
models released since have no figure on it; rather than mix in a benchmark on another
scale, such a model ranks by a stated prior, shown as a prior (quality_source "prior"):

- "size": the least-squares line through the catalog's own leaderboard figures against
  log2 of the parameter count (SIZE_PRIOR_A + SIZE_PRIOR_B * log2(B); 28 models, residual
  standard deviation 7.0 points); a mixture of experts counts its total parameters (what
  it knows is held in all its experts; its speed, which the ranking weighs apart, follows
  the active ones);
- "successor:ID": a model published to replace catalog model ID is assumed at least as good
  as ID (its figure, or its own prior), and at least its size prior.

Quant losses: mean KL divergence against F16 from llama.cpp's tools/perplexity README
(Llama-3-8B, wikitext-2; REFERENCE.md §2) -- the advisor's table, the only one in the code.
Larger models lose less at the same quant (Llama-2-70B Q4_K_M +1.2% PPL vs Llama-3-8B's
+2.8%): the divergence is scaled by (8B / params)^0.5, capped at 2x for tiny models, a fit
to those two points.
"""

from __future__ import annotations

import math

from rooflight.estimate.quant_loss import QUANT_KLD_PUBLISHED

SCALE = "Open LLM Leaderboard v2 average"
SIZE_PRIOR_A = 12.62  # fitted in tests/test_catalog_quality.py on the catalog's own figures
SIZE_PRIOR_B = 4.81

# Labels the perplexity README has no row for. Q4_1/Q5_0/Q5_1 are interpolated between the
# published neighbours by bits per weight; an unsloth "_XL"/bartowski "_L" mix keeps its
# base quant's figure (its extra bits sit in embeddings and output). MXFP4 is gpt-oss's own
# training format (its experts were post-trained in MXFP4): no loss against the release.
# NVFP4 has no published figure: it is given Q4_0's (the 4-bit format with the larger
# published loss) until one is.
_UNPUBLISHED = {
    "Q4_1": 0.06, "Q5_0": 0.02, "Q5_1": 0.016, "MXFP4": 0.0, "NVFP4": 0.072,
    "Q2_K_L": 0.445, "Q3_K_XL": 0.087, "Q4_K_L": 0.031, "Q4_K_XL": 0.031, "Q5_K_L": 0.011,
    "Q5_K_XL": 0.011, "Q6_K_L": 0.0055, "Q6_K_XL": 0.0055, "Q8_K_XL": 0.0014,
}
QUANT_KLD = {**QUANT_KLD_PUBLISHED, **_UNPUBLISHED}


def quant_kld(quant: str, params_b: float) -> float:
    q = quant.upper().removeprefix("UD-")
    base = QUANT_KLD.get(q, 0.1)
    size_factor = min(2.0, (8.0 / max(params_b, 0.1)) ** 0.5)
    return base * size_factor


def quality_score(prior: float, quant: str, params_b: float) -> float:
    """0-100: the figure (or prior), reduced by the quant's divergence (a KLD of 0.5 costs
    about a third, in line with Q2_K's 71% same-top-token rate against Q8_0's 98%)."""
    return prior / (1.0 + 1.4 * quant_kld(quant, params_b))


def size_prior(params_b: float) -> float:
    """The size-only prior on SCALE (module docstring), clamped to 1..60; params_b is the
    total parameter count in billions (all experts of a mixture of experts)."""
    return max(1.0, min(60.0, SIZE_PRIOR_A + SIZE_PRIOR_B * math.log2(max(params_b, 0.05))))


def _by_id(model_id: str):
    from rooflight.catalog.models import find_model

    return find_model(model_id)


def quality_prior(model, _seen: frozenset = frozenset()) -> float:
    """The model's figure on SCALE where it has one, else its stated prior."""
    q = model.quality
    if q is not None and q.score is not None:
        return float(q.score)
    prior = size_prior(model.params_total)
    if q is not None and q.prior.startswith("successor:") and model.id not in _seen:
        before = _by_id(q.prior.removeprefix("successor:"))
        if before is not None:
            prior = max(prior, quality_prior(before, _seen | {model.id}))
    return prior


def quality_basis(model) -> dict:
    """What a model's quality stands on, for rows and the model detail: scale, whether it
    is a measured figure or a prior, and the source or the prior's reason, in words."""
    q = model.quality
    if q is not None and q.score is not None:
        return {"quality_benchmark": SCALE, "quality_source": "benchmark", "quality_figure": q.score,
                "quality_note": q.source}
    prior = q.prior if q is not None else "size"
    if prior.startswith("successor:"):
        before = prior.removeprefix("successor:")
        note = (f"no {SCALE} figure; prior: at least the model it succeeds ({before}) and at least "
                f"the size prior")
    else:
        note = (f"no {SCALE} figure; prior: the size line {SIZE_PRIOR_A} + {SIZE_PRIOR_B} x log2(total "
                f"parameters, billions)")
    return {"quality_benchmark": SCALE, "quality_source": "prior", "quality_figure": None, "quality_note": note}
