"""Quality of a model at a quantization: one public scale for every model, times the quant's loss.

The scale (SCALE): the Open LLM Leaderboard v2 average (Hugging Face's normalized mean of
IFEval, BBH, MATH Lvl 5, GPQA, MuSR and MMLU-PRO, 0-100), the one public evaluation run the
same way on every family. Each catalog figure is that leaderboard's own row for the model
(catalog.json names the export it was read from). The leaderboard closed in March 2025, so
models released since have no figure on it; rather than mix in a benchmark on another
scale, such a model ranks by the second index below mapped onto this scale where it has a
score there, else by a stated prior, shown as a prior (quality_source "prior"):

- "size": the least-squares line through the catalog's own leaderboard figures against
  log2 of the parameter count (SIZE_PRIOR_A + SIZE_PRIOR_B * log2(B); 28 models, residual
  standard deviation 7.0 points); a mixture of experts counts its total parameters (what
  it knows is held in all its experts; its speed, which the ranking weighs apart, follows
  the active ones);
- "successor:ID": a model published to replace catalog model ID is assumed at least as good
  as ID (its figure, or its own prior), and at least its size prior.

A second index, mapped onto SCALE (quality_source "mapped"): the LMArena text score
(INDEX_NAME; lmarena/arena-catalog data/leaderboard-text.json, category "full", one snapshot
of December 2025, so every score comes from one joint fit of the same votes). A model with no
leaderboard figure but an arena score of its own release and variant ranks by
INDEX_A + INDEX_B * score + INDEX_C * log2(total parameters, billions), a least-squares fit
on the 65 models that have both figures (bench/data/quality_index_overlap.json, built and
refitted by bench/quality_index.py; tests/test_catalog_quality.py refits it). Held out one
at a time, its error is INDEX_LOO_RMSE = 6.8 points, against 7.1 for the arena score alone and
7.6 for size alone on the same models, so the score adds what size cannot (a newer model of
the same size does better). Its largest miss is QwQ-32B, a reasoning model the leaderboard
scored 12 and the arena 1329 (32.6 points held out; 5.5 RMSE without it): the leaderboard
under-rates reasoning models, which the mapping cannot undo. The overlap's scores run
999..1329 (the next highest 1283); 10 of the 16 mapped models score above 1329 (up to 1418),
so theirs are extrapolations, which the ± says nothing about. A leaderboard figure, where
one exists, always wins over a mapped one, and the successor rule floors a mapped figure as
it does a prior: the mapped figures of the catalog's nine models that also have a
leaderboard figure fall 2.6 points short of it on average (these late-2024 models beat the
fit's 2023-24 average), so a mapped successor could otherwise rank under the leaderboard
model it replaces (Qwen3 32B 41.1 against Qwen2.5 32B's 46.6).

Sources examined and not used: the Artificial Analysis Intelligence Index v4.1 (as copied daily
into jesusprodriguezUnir/Modelos-de-Inteligencia-Artificial data/intelligence-index-master.json,
commit 9440848, 595 models): on the 15 catalog models with both figures its held-out error is
10.9 points (its MMLU-Pro column alone 9.2; size alone 7.8 on the same models), and it
floors at 1 for many small models (Llama 3.2 1B, Qwen3 0.6B, Gemma 3 1B and 4B, Llama 3 8B
all at 1), so it cannot order them. The nakasyou/lmarena-history
export stops in May 2025, before most of the catalog's new models.

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

INDEX_NAME = "LMArena text score"
# fitted by bench/quality_index.py (index_fit) on bench/data/quality_index_overlap.json;
# tests/test_catalog_quality.py refits them and the held-out error
INDEX_A = -60.00
INDEX_B = 0.06813
INDEX_C = 1.953
INDEX_LOO_RMSE = 6.8

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


def mapped_score(index_score: float, params_b: float) -> float:
    """An INDEX_NAME score mapped onto SCALE (module docstring), clamped to 1..60 like the
    size prior; params_b is the total parameter count in billions."""
    raw = INDEX_A + INDEX_B * index_score + INDEX_C * math.log2(max(params_b, 0.05))
    return max(1.0, min(60.0, raw))


def index_fit(rows: list[dict]) -> dict:
    """Least squares of the leaderboard figure on the index score and log2(params), over rows
    {"arena_score", "leaderboard", "params_b"}, with its leave-one-out RMSE and, for
    comparison on the same rows, that of the score alone and of size alone."""
    import numpy as np

    y = np.array([r["leaderboard"] for r in rows], float)
    x = np.array([r["arena_score"] for r in rows], float)
    lp = np.log2(np.array([r["params_b"] for r in rows], float))
    one = np.ones_like(y)

    def loo(design):
        errs = []
        for i in range(len(y)):
            keep = np.arange(len(y)) != i
            coef, *_ = np.linalg.lstsq(design[keep], y[keep], rcond=None)
            errs.append(y[i] - design[i] @ coef)
        return float(np.sqrt(np.mean(np.square(errs))))

    both = np.c_[one, x, lp]
    (a, b, c), *_ = np.linalg.lstsq(both, y, rcond=None)
    return {"n": len(y), "a": float(a), "b": float(b), "c": float(c), "loo_rmse": loo(both),
            "loo_rmse_index_only": loo(np.c_[one, x]), "loo_rmse_size_only": loo(np.c_[one, lp]),
            "x_min": float(x.min()), "x_max": float(x.max())}


def _by_id(model_id: str):
    from rooflight.catalog.models import find_model

    return find_model(model_id)


def _successor_floor(model, seen: frozenset) -> float:
    """What the model it succeeds stands at (0 where it succeeds none): the successor rule."""
    q = model.quality
    if q is None or not q.prior.startswith("successor:") or model.id in seen:
        return 0.0
    before = _by_id(q.prior.removeprefix("successor:"))
    return 0.0 if before is None else quality_prior(before, seen | {model.id})


def quality_prior(model, _seen: frozenset = frozenset()) -> float:
    """The model's figure on SCALE where it has one, else its mapped index score, else its
    stated prior; the successor rule floors both of the latter."""
    q = model.quality
    if q is not None and q.score is not None:
        return float(q.score)
    if q is not None and q.index is not None:
        base = mapped_score(q.index.score, model.params_total)
    else:
        base = size_prior(model.params_total)
    return max(base, _successor_floor(model, _seen))


def quality_basis(model) -> dict:
    """What a model's quality stands on, for rows and the model detail: scale, whether it
    is a measured figure, one mapped from the second index, or a prior, and the source or the
    prior's reason, in words."""
    q = model.quality
    if q is not None and q.score is not None:
        return {"quality_benchmark": SCALE, "quality_source": "benchmark", "quality_figure": q.score,
                "quality_note": q.source}
    if q is not None and q.index is not None:
        mapped = mapped_score(q.index.score, model.params_total)
        figure = quality_prior(model)
        note = (f"no {SCALE} figure; mapped from its {q.index.name} {q.index.score:g} "
                f"(+ size), ±{INDEX_LOO_RMSE:g} points held-out: {q.index.source}")
        if figure > mapped:
            note += (f"; {mapped:.1f} raised to {figure:.1f}, the standing of the model it succeeds "
                     f"({q.prior.removeprefix('successor:')})")
        figure = round(figure, 1)
        return {"quality_benchmark": SCALE, "quality_source": "mapped", "quality_figure": figure,
                "quality_note": note}
    prior = q.prior if q is not None else "size"
    if prior.startswith("successor:"):
        before = prior.removeprefix("successor:")
        note = (f"no {SCALE} figure; prior: at least the model it succeeds ({before}) and at least "
                f"the size prior")
    else:
        note = (f"no {SCALE} figure; prior: the size line {SIZE_PRIOR_A} + {SIZE_PRIOR_B} x log2(total "
                f"parameters, billions)")
    return {"quality_benchmark": SCALE, "quality_source": "prior", "quality_figure": None, "quality_note": note}
