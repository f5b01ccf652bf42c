"""Quality of a model at a quantization: a public benchmark prior times the quant's loss.

Quant losses: llama.cpp tools/perplexity README, Llama-3-8B on wikitext, mean KL
divergence against F16 (REFERENCE.md §2). Larger models lose less at the same quant
(Llama-2-70B Q4_K_M +1.2% PPL vs Llama-3-8B's +2.8%): we scale the divergence by
(8B / params)^0.5, capped at 2x for tiny models, a fit to those two points.
"""

from __future__ import annotations

from rooflight.estimate.quant_loss import QUANT_KLD_INTERPOLATED, QUANT_KLD_PUBLISHED

# mean KL divergence vs F16: the published table and, for ranking, the interpolated rows
QUANT_KLD = {**QUANT_KLD_PUBLISHED, **QUANT_KLD_INTERPOLATED}


def quant_kld(quant: str, params_b: float) -> float:
    base = QUANT_KLD.get(quant.upper(), 0.1)
    size_factor = min(2.0, (8.0 / max(params_b, 0.1)) ** 0.5)
    return base * size_factor


def quality_score(prior: float, quant: str, params_b: float) -> float:
    """0-100: the benchmark prior, reduced by the quant's divergence (a KLD of 0.5 costs
    about a third, in line with Q2_K's 71% same-top-token rate against Q8_0's 98%)."""
    return prior / (1.0 + 1.4 * quant_kld(quant, params_b))


def size_prior(params_b: float) -> float:
    """A size-only prior, 0-100: benchmark averages of current instruct models grow about
    linearly in log(params) (Open LLM Leaderboard v2: ~20 at 0.5B, ~45 at 70B)."""
    import math

    return max(5.0, min(80.0, 28.0 + 5.0 * math.log2(max(params_b, 0.05))))


def quality_prior(model) -> float:
    """The catalog's published figure when it has one, else the size prior. The figures
    come from different benchmarks per family (each entry names its own), so they are
    averaged with the size prior to keep families comparable."""
    size = size_prior(model.params_total)
    if model.quality is None or model.quality.score is None:
        return size
    return 0.5 * size + 0.5 * float(model.quality.score)
