"""The advisor's search: advise() evaluates the settings llama.cpp offers for one model on
one machine with the estimator itself (plan(): plan_memory + estimate_performance, or
advise_experts.plan_experts_on_cpu for MoE experts kept in RAM), collects the cards
(advise_cards.py) and a small Pareto front over quality, decode, prefill and memory.

How the space is pruned (so one model takes well under 200 ms, bench/advise_speed.py):
- GPU layers are not enumerated: for every other setting the planner's own placement rule
  (choose_gpu_layers, a binary search) gives the most layers that fit, and in the
  estimator more layers on a GPU are never slower.
- Flash attention off and a full-size sliding-window cache never use less memory or run
  faster in the estimator (without flash attention the KQ scores are materialised and V
  is padded; a full-size SWA cache only adds cells), so they are evaluated only where the
  user's current settings use them, to say what switching buys.
- Threads beyond the physical cores buy nothing in the estimator (it counts cores), so
  the only candidate is "all physical cores".
- Micro-batch sizes and contexts are tried around the user's settings, not crossed with
  every other lever.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

from rooflight.errors import BadInputError
from rooflight.estimate.advise_cards import (
    _batch_card,
    _combined_card,
    _context_cards,
    _experts_card,
    _flash_card,
    _gpu_layers_card,
    _kv_card,
    _quant_cards,
    _rank_key,
    _swa_card,
    _threads_card,
)
from rooflight.estimate.advise_experts import plan_experts_on_cpu
from rooflight.estimate.advise_types import (
    Advice,
    AdviceCard,
    Candidate,
    Variant,
    _kv_types_for,
    quality_of,
)
from rooflight.estimate.calibration import Calibration
from rooflight.estimate.plan import Wishes, plan
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile

MIN_SCORE = 0.05  # a card must buy at least ~3.5% speed or ~10% memory to be shown


class _Search:
    """Evaluates candidates once each (memoised by file and wishes)."""

    def __init__(self, variants: Sequence[Variant], hardware: HardwareProfile, calibration: Calibration | None):
        self.variants = variants
        self.hw = hardware
        self.cal = calibration
        self.cache: dict[tuple, Candidate] = {}

    def eval(self, v: Variant, w: Wishes, n_cpu_moe: int = 0) -> Candidate:
        key = (v.quant, id(v.spec), w, n_cpu_moe)
        c = self.cache.get(key)
        if c is None:
            if n_cpu_moe:
                est = plan_experts_on_cpu(v.spec, self.hw, w, n_cpu_moe, calibration=self.cal)
            else:
                est = plan(v.spec, self.hw, w, calibration=self.cal)
            c = Candidate(v, w, est, quality_of(v.quant, est.config.kv_type), n_cpu_moe)
            self.cache[key] = c
        return c


def advise(
    variants: Variant | ModelSpec | Sequence[Variant],
    hardware: HardwareProfile,
    wishes: Wishes | None = None,
    *,
    current: str | None = None,
    calibration: Calibration | None = None,
    max_cards: int = 6,
    max_pareto: int = 8,
) -> Advice:
    """Search the settings space of one model on one machine.

    variants: the model's files (same model, different quantizations); `current` names
    the quant in use (default: the first). wishes: the user's current settings, kept for
    the baseline; each card changes one lever (or, for "combined", several) from there.
    """
    t0 = time.perf_counter()
    if isinstance(variants, ModelSpec):
        variants = (Variant(variants.file_type, variants),)
    elif isinstance(variants, Variant):
        variants = (variants,)
    variants = tuple(variants)
    if not variants:
        raise BadInputError("Nothing to advise on: no model file was given.")
    if current is None:
        cur = variants[0]
    else:
        found = next((v for v in variants if v.quant.upper() == current.upper()), None)
        if found is None:
            raise BadInputError(
                f"No {current} file of this model is known; available: {', '.join(v.quant for v in variants)}."
            )
        cur = found
    wishes = wishes or Wishes()
    s = _Search(variants, hardware, calibration)
    base = s.eval(cur, wishes)
    n_ctx = base.estimate.config.n_ctx
    w0 = replace(wishes, n_ctx=n_ctx)  # the user's settings with the context made explicit
    # the best settings the estimator knows of, all else equal: flash attention on, the
    # windowed SWA cache, the most layers that fit, all physical cores
    tuned = replace(w0, flash_attn="on", swa_full=False, n_gpu_layers="auto", n_threads=None)

    cards: list[AdviceCard] = []
    cards += _kv_card(s, cur, base, w0)
    cards += _flash_card(s, cur, base, w0)
    cards += _swa_card(s, cur, base, w0)
    cards += _gpu_layers_card(s, cur, base, w0)
    cards += _threads_card(s, cur, base, w0)
    cards += _batch_card(s, cur, base, w0)
    cards += _context_cards(s, cur, base, w0)
    cards += _quant_cards(s, cur, base, w0)
    cards += _experts_card(s, cur, base, w0)
    cards += _combined_card(s, cur, base, tuned, cards)
    cards = [c for c in cards if c.gain["score"] >= MIN_SCORE]
    if base.fit == "too_large":
        # what matters then is what makes the model fit; smaller overflows are noise
        cards = [c for c in cards if c.after["fit"] != "too_large"]
    cards.sort(key=_rank_key)

    pareto = _pareto(s, n_ctx, tuned, max_pareto)
    return Advice(base, tuple(cards[:max_cards]), tuple(pareto), len(s.cache), time.perf_counter() - t0)


def _objectives(c: Candidate) -> tuple[float, float, float, float]:
    """Smaller is better on each: quality loss (unknown counts as worst), -decode,
    -prefill, memory; speeds and memory rounded to 2% so near-ties do not split the front."""
    def r(x: float) -> float:
        return round(math.log(max(x, 1e-9)) / math.log(1.02))
    q = c.quality.kld if c.quality.kld is not None else math.inf
    return (round(q, 4), -r(c.decode), -r(c.prefill), r(c.memory_bytes))


def _pareto(s: _Search, n_ctx: int, tuned: Wishes, max_points: int) -> list[Candidate]:
    # every file at every KV type with the estimator's best settings, plus everything
    # evaluated so far at the current context
    for v in s.variants:
        for k in _kv_types_for(v.spec):
            s.eval(v, replace(tuned, kv_type=k))
    pts: dict[tuple, Candidate] = {}
    for c in s.cache.values():
        if c.fit == "too_large" or c.estimate.config.n_ctx != n_ctx:
            continue
        pts.setdefault((c.variant.quant, c.n_cpu_moe, c.estimate.config), c)
    cands = list(pts.values())
    objs = [_objectives(c) for c in cands]
    front = []
    for i, c in enumerate(cands):
        oi = objs[i]
        dominated = any(
            all(a <= b for a, b in zip(oj, oi, strict=True)) and oj != oi for j, oj in enumerate(objs) if j != i
        )
        if not dominated:
            front.append(c)
    # one point per distinct objective vector
    seen, unique = set(), []
    for c in sorted(front, key=lambda c: (-c.decode, c.memory_bytes)):
        o = _objectives(c)
        if o not in seen:
            seen.add(o)
            unique.append(c)
    if len(unique) <= max_points:
        return unique
    # keep the extremes (fastest, best quality, smallest), the fastest point of each
    # file, then the fastest of the rest
    keep = [unique[0], min(unique, key=lambda c: _objectives(c)[0]), min(unique, key=lambda c: c.memory_bytes)]
    by_quant: dict[str, Candidate] = {}
    for c in unique:
        by_quant.setdefault(c.variant.quant, c)
    keep += sorted(by_quant.values(), key=lambda c: _objectives(c)[0])
    for c in unique:
        if len(keep) >= max_points:
            break
        keep.append(c)
    out, ids = [], set()
    for c in keep:
        if id(c) not in ids:
            ids.add(id(c))
            out.append(c)
    return sorted(out, key=lambda c: -c.decode)[:max_points]


# ---- catalog files -------------------------------------------------------------------------------

_catalog_specs: dict[tuple[str, str], ModelSpec] = {}


def catalog_variants(model) -> tuple[Variant, ...]:
    """Every quantization the catalog lists for a CatalogModel, as Variants (specs built
    from the model's hyper-parameters once per process; sources as hf: references)."""
    out = []
    for quant in model.quants:
        key = (model.id, quant)
        spec = _catalog_specs.get(key)
        if spec is None:
            spec = _catalog_specs[key] = model.spec(quant)
        repo, filename = model.file_for(quant)
        out.append(Variant(quant, spec, f"hf:{repo}/{filename}"))
    return tuple(out)


def default_quant(quants: Sequence[str], native: str | None = None) -> str:
    """The file people start with: the format the model was released in where the catalog
    names one and lists its file (gpt-oss: MXFP4, as the ranking picks it), else Q4_K_M where
    published, else the middle one."""
    upper = [q.upper() for q in quants]
    if native and native.upper() in upper:
        return quants[upper.index(native.upper())]
    if "Q4_K_M" in upper:
        return quants[upper.index("Q4_K_M")]
    return quants[len(quants) // 2]
