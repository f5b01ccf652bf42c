"""Optimization advisor: which llama.cpp settings buy the most for one model on one machine.

Hardware is fixed once bought; the settings are not. advise() searches the settings
llama.cpp offers - the quantization file (when the other files of the model are known),
context length, KV cache type, flash attention, full or windowed sliding-window cache,
GPU layers, MoE experts kept on the CPU, threads, batch and micro-batch - and evaluates
every candidate with the estimator itself (plan(): plan_memory + estimate_performance),
never with numbers of its own. The result is a small Pareto front over quality, decode
speed, prefill speed and memory, and a few advice cards ranked by gain, each with the
exact settings that produce it.

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

Quality effects are only those with a published source: weight quantization from the
llama.cpp perplexity table (REFERENCE.md §2, catalog/quality.py) and the q8_0 KV cache
from llama.cpp PR #7412. Everything else says "quality effect: not measured", or why
the outputs do not change.

Pure functions and frozen dataclasses: no llama.cpp, no Qt, no network.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

from rooflight.errors import BadInputError
from rooflight.estimate.config import KV_TYPES, RunConfig
from rooflight.estimate.moe_plan import fewest_experts_in_ram
from rooflight.estimate.perf import Calibration
from rooflight.estimate.placement import CPU
from rooflight.estimate.plan import Estimate, Wishes, plan
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile

# ---- published quality effects ----------------------------------------------------------

# Weight quantization, llama.cpp tools/perplexity README, Llama-3-8B on wikitext-2
# (REFERENCE.md §2): increase in perplexity and mean KL divergence against F16. Only the
# published rows: catalog/quality.py also interpolates Q4_1/Q5_0/Q5_1 for ranking, but an
# interpolation is not a measurement, so the advisor does not quote it.
QUANT_SOURCE = "llama.cpp tools/perplexity README (Llama-3-8B, wikitext-2; larger models lose less)"
QUANT_DPPL = {
    "F32": 0.0, "F16": 0.0, "BF16": 0.0,
    "Q8_0": 0.0027, "Q6_K": 0.022, "Q5_K_M": 0.057, "Q5_K_S": 0.105, "Q4_K_M": 0.175,
    "Q4_K_S": 0.269, "IQ4_XS": 0.228, "Q4_0": 0.469, "Q3_K_L": 0.556, "Q3_K_M": 0.657,
    "IQ3_M": 0.667, "IQ3_XXS": 1.23, "Q3_K_S": 1.63, "IQ2_M": 2.37, "Q2_K": 3.52,
    "IQ2_XXS": 7.86, "IQ1_M": 19.3, "IQ1_S": 52.0,
}
QUANT_KLD_PUBLISHED = {
    "F32": 0.0, "F16": 0.0, "BF16": 0.0,
    "Q8_0": 0.0014, "Q6_K": 0.0055, "Q5_K_M": 0.011, "Q5_K_S": 0.017, "Q4_K_M": 0.031,
    "Q4_K_S": 0.043, "IQ4_XS": 0.036, "Q4_0": 0.072, "Q3_K_L": 0.087, "Q3_K_M": 0.102,
    "IQ3_M": 0.103, "IQ3_XXS": 0.184, "Q3_K_S": 0.228, "IQ2_M": 0.326, "Q2_K": 0.445,
    "IQ2_XXS": 0.812, "IQ1_M": 1.39, "IQ1_S": 2.21,
}

# KV cache types, llama.cpp PR #7412 ("CUDA: quantized KV cache demo", J. Gaessler, May
# 2024): LLaMA-3-8B F16 weights, wikitext-2, n_ctx 512, flash attention. q8_0 K + q8_0 V
# gave dPPL 0.004616 and KLD 0.000980 against 0.002443 and 0.000189 for the f16 cache on
# the same run, so the cache's own share is +0.0022 PPL and +0.0008 KLD. No figure for a
# q4_0 cache is carried here: its effect is reported as not measured.
KV_SOURCE = "llama.cpp PR #7412 (LLaMA-3-8B, wikitext-2, n_ctx 512)"
KV_DPPL = {"f16": 0.0, "q8_0": 0.004616 - 0.002443}
KV_KLD = {"f16": 0.0, "q8_0": 0.000980 - 0.000189}

NOT_MEASURED = "quality effect: not measured"

FLASH_SOURCE = "FlashAttention computes exact attention (Dao et al. 2022, arXiv:2205.14135)"
SWA_SOURCE = "llama.cpp PR #13194 (sliding-window cache)"
# Settings every card offers are loadable: MoE experts in RAM go through llama.cpp's tensor
# overrides (runtime/tensor_overrides.py). Kept for a runtime that cannot (see runtime_supported).
RUNTIME_NOTE = "not available in this runtime"

# ---- search space ------------------------------------------------------------------------

CONTEXT_LADDER = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
UBATCH_SIZES = (128, 256, 512, 1024, 2048)
FIT_RANK = {"too_large": 0, "cpu_only": 1, "partial_gpu": 2, "full_gpu": 3}
MIN_SCORE = 0.05  # a card must buy at least ~3.5% speed or ~10% memory to be shown


@dataclass(frozen=True)
class Variant:
    """One GGUF file of the model: its quantization, its spec, and where it comes from
    (a local path or hf:OWNER/REPO/FILE.gguf; None when unknown)."""

    quant: str
    spec: ModelSpec
    source: str | None = None


@dataclass(frozen=True)
class Quality:
    """Quality loss of a candidate against F16 weights and an f16 cache, where published."""

    kld: float | None  # mean KL divergence, weights + KV cache; None: not measured
    dppl: float | None  # perplexity increase on the source's model
    text: str
    source: str

    @property
    def known(self) -> bool:
        return self.kld is not None


@dataclass(frozen=True)
class Candidate:
    """One point of the search: a file and settings, evaluated by the estimator."""

    variant: Variant
    wishes: Wishes
    estimate: Estimate
    quality: Quality
    n_cpu_moe: int = 0  # experts of the first N layers kept in RAM (RunConfig.n_cpu_moe)

    @property
    def runtime_supported(self) -> bool:
        return True  # every candidate is a RunConfig the runtime loads as planned

    @property
    def fit(self) -> str:
        return self.estimate.fit

    @property
    def decode(self) -> float:
        return self.estimate.performance.decode_tok_s

    @property
    def prefill(self) -> float:
        return self.estimate.performance.prefill_tok_s

    @property
    def memory_bytes(self) -> int:
        return self.estimate.memory.total_bytes

    @property
    def settings(self) -> dict:
        """What the runtime loads: the RunConfig (Llama() arguments) plus the file."""
        d = {"quant": self.variant.quant, "model": self.variant.source, **self.estimate.config.to_dict()}
        if self.n_cpu_moe:
            d["n_cpu_moe"] = self.n_cpu_moe
        return d

    def numbers(self) -> dict:
        """The figures a card shows before and after (sizes in bytes, speeds in tok/s)."""
        e = self.estimate
        gpu = [d for d in e.memory.devices if d.device != CPU]
        return {
            "quant": self.variant.quant,
            "fit": e.fit,
            "decode_tok_s": round(self.decode, 3),
            "prefill_tok_s": round(self.prefill, 3),
            "memory_bytes": self.memory_bytes,
            "gpu_bytes": sum(d.total_bytes for d in gpu),
            "weights_bytes": sum(d.weights_bytes for d in e.memory.devices),
            "kv_bytes": sum(d.kv_bytes for d in e.memory.devices),
            "compute_bytes": sum(d.compute_bytes for d in e.memory.devices),
            "n_ctx": e.config.n_ctx,
            "n_gpu_layers": e.config.n_gpu_layers,
            "n_cpu_moe": self.n_cpu_moe,
            "quality_kld": None if self.quality.kld is None else round(self.quality.kld, 5),
        }

    def to_dict(self) -> dict:
        return {**self.numbers(), "settings": self.settings, "runtime_supported": self.runtime_supported,
                "quality_effect": self.quality.text, "source": self.quality.source}


@dataclass(frozen=True)
class AdviceCard:
    """One piece of advice: what to change, what it buys, and the settings that do it."""

    kind: str  # kv_type | flash_attn | swa | quant | gpu_layers | experts | threads | batch | context | combined
    title: str  # one plain sentence with the before -> after numbers
    detail: str  # why, in a sentence or two
    settings: dict  # Candidate.settings: RunConfig fields + quant/model (+ n_cpu_moe)
    before: dict  # Candidate.numbers() of the current plan
    after: dict  # Candidate.numbers() with the advice applied
    gain: dict  # {"score", "decode_x", "prefill_x", "memory_bytes", "fit"}
    quality_effect: str
    source: str
    runtime_supported: bool = True  # False: the estimate holds, but this runtime cannot load it
    candidate: Candidate | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind, "title": self.title, "detail": self.detail, "settings": self.settings,
            "before": self.before, "after": self.after, "gain": self.gain,
            "quality_effect": self.quality_effect, "source": self.source,
            "runtime_supported": self.runtime_supported,
        }


@dataclass(frozen=True)
class Advice:
    baseline: Candidate  # the user's current file and settings, as planned
    cards: tuple[AdviceCard, ...]  # best gain first
    pareto: tuple[Candidate, ...]  # at the current context, best decode first
    searched: int  # candidates the estimator evaluated
    elapsed_s: float

    def to_dict(self, model: str | None = None) -> dict:
        return {
            "model": model if model is not None else self.baseline.variant.spec.name,
            "baseline": self.baseline.estimate.to_dict(),
            "advice": [c.to_dict() for c in self.cards],
            "pareto": [c.to_dict() for c in self.pareto],
            "searched": self.searched,
            "elapsed_ms": round(self.elapsed_s * 1e3, 2),
        }


# ---- settings <-> runtime ------------------------------------------------------------------

_CONFIG_FIELDS = tuple(f.name for f in fields(RunConfig))


def settings_config(settings: dict) -> RunConfig:
    """The RunConfig a card's settings describe (what llama_cpp.Llama gets).

    n_cpu_moe (experts in RAM) is a RunConfig field like the others.
    """
    kwargs = {k: settings[k] for k in _CONFIG_FIELDS if k in settings}
    if kwargs.get("tensor_split") is not None:
        kwargs["tensor_split"] = tuple(kwargs["tensor_split"])
    return RunConfig(**kwargs)


def settings_wishes(settings: dict, base: Wishes | None = None) -> Wishes:
    """Wishes that make plan() choose these settings again (prompt/gen sizes from base)."""
    base = base or Wishes()
    return replace(
        base,
        n_ctx=settings["n_ctx"],
        n_gpu_layers=settings["n_gpu_layers"],
        kv_type=settings["kv_type"],
        flash_attn="on" if settings["flash_attn"] else "off",
        n_threads=settings["n_threads"],
        n_batch=settings["n_batch"],
        n_ubatch=settings["n_ubatch"],
        swa_full=settings["swa_full"],
        n_cpu_moe=settings.get("n_cpu_moe", 0),
    )


# ---- quality -------------------------------------------------------------------------------


def quality_of(quant: str, kv_type: str) -> Quality:
    """Published loss of a weight quantization plus a KV cache type, or 'not measured'."""
    q = quant.upper()
    w_kld, w_dppl = QUANT_KLD_PUBLISHED.get(q), QUANT_DPPL.get(q)
    kv_kld, kv_dppl = KV_KLD.get(kv_type), KV_DPPL.get(kv_type)
    if w_kld is None or kv_kld is None:
        missing = q if w_kld is None else f"a {kv_type} KV cache"
        return Quality(None, None, f"{NOT_MEASURED} (no published figure for {missing})", "")
    sources = [QUANT_SOURCE] + ([KV_SOURCE] if kv_type != "f16" else [])
    text = f"{q} weights: +{w_dppl:.3f} PPL, KLD {w_kld:.4f} vs F16"
    if kv_type != "f16":
        text += f"; {kv_type} KV cache: +{kv_dppl:.4f} PPL, KLD +{kv_kld:.4f}"
    return Quality(w_kld + kv_kld, w_dppl + kv_dppl, text, "; ".join(sources))


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


# ---- the search ----------------------------------------------------------------------------


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


def _kv_types_for(spec: ModelSpec) -> tuple[str, ...]:
    """KV types llama.cpp accepts for this model: block-quantized caches need head sizes
    that are multiples of the 32-wide block (llama-context.cpp checks n_embd_head_k/v)."""
    if spec.head_dim_k % 32 or spec.head_dim_v % 32:
        return ("f16",)
    return KV_TYPES


def _has_swa(spec: ModelSpec) -> bool:
    return bool(spec.sliding_window and any(spec.swa_layers))


def _has_gpu(hw: HardwareProfile) -> bool:
    return hw.backend != "cpu" and bool(hw.gpus)


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
        cur = next((v for v in variants if v.quant.upper() == current.upper()), None)
        if cur is None:
            raise BadInputError(
                f"No {current} file of this model is known; available: {', '.join(v.quant for v in variants)}."
            )
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


# ---- gains and wording ---------------------------------------------------------------------


def gain(before: Candidate, after: Candidate) -> dict:
    """How much `after` buys over `before`: a score to rank cards by (log2 of the decode
    speed-up, a quarter of the prefill's, half the memory saved as a fraction; +10 for
    making a model fit that did not), and its parts."""
    fb, fa = before.fit, after.fit
    d_x = after.decode / before.decode
    p_x = after.prefill / before.prefill
    saved = before.memory_bytes - after.memory_bytes
    if fb == "too_large" and fa != "too_large":
        score = 10.0 + math.log2(max(d_x, 1e-9))
    elif fa == "too_large":
        score = -10.0 if fb != "too_large" else 0.5 * saved / max(before.memory_bytes, 1)
    else:
        score = math.log2(d_x) + 0.25 * math.log2(p_x) + 0.5 * saved / max(before.memory_bytes, 1)
    return {
        "score": round(score, 4),
        "decode_x": round(d_x, 4),
        "prefill_x": round(p_x, 4),
        "memory_bytes": -saved,
        "fit": f"{fb} -> {fa}" if fb != fa else fb,
    }


def _rank_key(card: AdviceCard) -> tuple[float, str]:
    """Best gain first; a card whose quality effect is not measured yields to a sourced one
    of nearly the same gain (0.15: about 10% of speed)."""
    unknown = card.quality_effect.startswith(NOT_MEASURED)
    return (-(card.gain["score"] - (0.15 if unknown else 0.0)), card.kind)


def _tok(x: float) -> str:
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if abs(n) < 10e9 else f"{n / 1e9:.1f} GB"


def _ctx(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 and n >= 1024 else str(n)


_FIT_PHRASE = {
    "full_gpu": "fit entirely on the GPU",
    "partial_gpu": "fit partly on the GPU",
    "cpu_only": "fit in RAM",
    "too_large": "not fit",
}


def _numbers(before: Candidate, after: Candidate) -> str:
    """The before -> after figure that moved most: decode, else prefill, else memory."""
    d = f"decode {_tok(before.decode)} -> {_tok(after.decode)} tok/s"
    saved = before.memory_bytes - after.memory_bytes
    if abs(after.decode / before.decode - 1) >= 0.03:
        more = f", {_gb(saved)} less memory" if saved > 0.05 * before.memory_bytes else ""
        return d + more
    if abs(after.prefill / before.prefill - 1) >= 0.05:
        return f"prefill {_tok(before.prefill)} -> {_tok(after.prefill)} tok/s"
    if saved > 0:
        return f"{_gb(saved)} less memory ({_gb(before.memory_bytes)} -> {_gb(after.memory_bytes)})"
    return d


def _title(lever: str, before: Candidate, after: Candidate, subject: str = "the model") -> str:
    """'KV cache in q8_0 lets 32k context fit entirely on the GPU: decode 14 -> 41 tok/s',
    or '<lever>: <numbers>' when the fit does not improve."""
    if FIT_RANK[after.fit] > FIT_RANK[before.fit]:
        return f"{lever} lets {subject} {_FIT_PHRASE[after.fit]}: {_numbers(before, after)}"
    if after.fit == "too_large":
        return f"{lever}: {subject} still does not fit ({_gb(after.memory_bytes)})"
    return f"{lever}: {_numbers(before, after)}"


def _card(kind: str, lever: str, detail: str, before: Candidate, after: Candidate, *,
          subject: str = "the model", quality: str | None = None, source: str | None = None,
          title: str | None = None) -> AdviceCard:
    if not after.runtime_supported:
        detail = f"{detail} Estimate only - {RUNTIME_NOTE}."
    return AdviceCard(
        kind=kind, title=title or _title(lever, before, after, subject), detail=detail, settings=after.settings,
        before=before.numbers(), after=after.numbers(), gain=gain(before, after),
        quality_effect=quality if quality is not None else after.quality.text,
        source=source if source is not None else after.quality.source,
        runtime_supported=after.runtime_supported, candidate=after,
    )


def _better(a: Candidate, b: Candidate) -> bool:
    return gain(b, a)["score"] > 0


# ---- one card per lever ----------------------------------------------------------------------


def _kv_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    if w0.kv_type != "f16":
        return []
    options = [s.eval(v, replace(w0, kv_type=k, flash_attn="on")) for k in _kv_types_for(v.spec) if k != "f16"]
    if not options:
        return []
    # q4_0 only where it buys a better fit or 10% more speed than q8_0, not memory alone:
    # its quality effect is not measured
    best = options[0]
    for o in options[1:]:
        if FIT_RANK[o.fit] > FIT_RANK[best.fit] or (o.fit == best.fit and o.decode >= 1.1 * best.decode):
            best = o
    kv = best.estimate.config.kv_type
    subject = f"{_ctx(best.estimate.config.n_ctx)} context"
    fa = " (with flash attention, which a quantized V cache needs)" if w0.flash_attn == "off" else ""
    b_kv, a_kv = base.numbers()["kv_bytes"], best.numbers()["kv_bytes"]
    detail = (f"A {kv} KV cache{fa} holds the same context in {_gb(a_kv)} instead of {_gb(b_kv)}; "
              "decode also reads less cache per token.")
    if any(d.device == CPU and d.kv_bytes for d in best.estimate.memory.devices):
        # measured here (tests/test_advise_real.py's model, 512-token prompt): 27k tok/s
        # with f16, 10k with q8_0, 7k with q4_0; the estimator does not model it
        detail += (" On the CPU, flash attention converts a quantized cache back as it reads it: prompt "
                   "processing can be slower than estimated, most of all for small models.")
    q = (f"{kv} KV cache: +{KV_DPPL[kv]:.4f} PPL, KLD +{KV_KLD[kv]:.4f}" if kv in KV_KLD
         else f"{NOT_MEASURED} (no published figure for a {kv} KV cache)")
    return [_card("kv_type", f"KV cache in {kv}", detail, base, best, subject=subject, quality=q,
                  source=KV_SOURCE if kv in KV_KLD else "")]


def _flash_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    if w0.flash_attn != "off":
        return []
    after = s.eval(v, replace(w0, flash_attn="on"))
    b, a = base.numbers(), after.numbers()
    detail = (f"Flash attention never materialises the attention scores: compute buffers "
              f"{_gb(b['compute_bytes'])} -> {_gb(a['compute_bytes'])}, KV cache {_gb(b['kv_bytes'])} -> "
              f"{_gb(a['kv_bytes'])}.")
    return [_card("flash_attn", "Flash attention on", detail, base, after,
                  quality="none: same attention, only rounding differs", source=FLASH_SOURCE)]


def _swa_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    if not (w0.swa_full and _has_swa(v.spec)):
        return []
    after = s.eval(v, replace(w0, swa_full=False))
    detail = (f"Sliding-window layers only ever attend to the last {v.spec.sliding_window} tokens: a windowed "
              f"cache keeps those instead of the whole context (KV {_gb(base.numbers()['kv_bytes'])} -> "
              f"{_gb(after.numbers()['kv_bytes'])}). A full-size cache only helps reusing a cached prompt prefix.")
    return [_card("swa", "The windowed sliding-window cache", detail, base, after,
                  quality="none: the model attends within its window either way", source=SWA_SOURCE)]


def _gpu_layers_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    if not _has_gpu(s.hw) or w0.n_gpu_layers == "auto":
        return []
    after = s.eval(v, replace(w0, n_gpu_layers="auto"))
    nb, na = base.estimate.config.n_gpu_layers, after.estimate.config.n_gpu_layers
    if na == nb:
        return []
    total = v.spec.n_layer + 1
    detail = f"{na} of {total} layers fit on the GPU at these settings; you asked for {nb}."
    return [_card("gpu_layers", f"{na} GPU layers instead of {nb}", detail, base, after,
                  quality="none: same computation on another device", source="")]


def _threads_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    if w0.n_threads is None:
        return []
    # the planner's own choice: all physical cores, or what a thread sweep measured here
    after = s.eval(v, replace(w0, n_threads=None))
    cores = after.estimate.config.n_threads
    if cores == w0.n_threads:
        return []
    if w0.n_threads < cores:
        detail = (f"Only {w0.n_threads} of {cores} usable cores work on the model; on a CPU, the "
                  "dequantize-and-multiply work and prompt processing scale with the cores used.")
    else:
        detail = (f"llama.cpp runs best with one thread per physical core ({s.hw.cpu.cores} here); you set {w0.n_threads}. "
                  "Extra threads share a core's arithmetic units and add synchronisation.")
    return [_card("threads", f"{cores} threads instead of {w0.n_threads}", detail, base, after,
                  quality="none: same computation", source="")]


def _batch_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    n_ctx = base.estimate.config.n_ctx
    cur = base.estimate.config.n_ubatch
    best = None
    for ub in UBATCH_SIZES:
        if ub == cur or ub > n_ctx:
            continue
        c = s.eval(v, replace(w0, n_ubatch=ub, n_batch=max(w0.n_batch, ub)))
        if best is None or _better(c, best):
            best = c
    if best is None or not _better(best, base):
        return []
    ub = best.estimate.config.n_ubatch
    b, a = base.numbers(), best.numbers()
    detail = (f"The micro-batch sets how many prompt tokens go through the model at once: the compute buffer "
              f"is {_gb(b['compute_bytes'])} at {cur} and {_gb(a['compute_bytes'])} at {ub}; "
              f"bigger batches read the weights fewer times per prompt.")
    return [_card("batch", f"Micro-batch {ub} instead of {cur}", detail, base, best,
                  quality="none: same computation, different batching", source="")]


def _context_cards(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    n_ctx = base.estimate.config.n_ctx
    limit = v.spec.context_length or n_ctx
    out: list[AdviceCard] = []
    # smaller: the largest context that reaches a better fit, or 1.3x decode
    if FIT_RANK[base.fit] < 3 or base.fit == "too_large":
        for c in sorted((c for c in CONTEXT_LADDER if c < n_ctx), reverse=True):
            cand = s.eval(v, replace(w0, n_ctx=c))
            if FIT_RANK[cand.fit] > FIT_RANK[base.fit] or (
                cand.fit != "too_large" and cand.decode >= 1.3 * base.decode
            ):
                detail = (f"The KV cache and compute buffers grow with the context: {_ctx(c)} tokens need "
                          f"{_gb(cand.memory_bytes)} in all instead of {_gb(base.memory_bytes)}.")
                out.append(_card("context", f"{_ctx(c)} context instead of {_ctx(n_ctx)}", detail, base, cand,
                                 quality=f"the model sees at most {c} tokens of the conversation", source=""))
                break
    # larger: the longest context at the same fit and (nearly) the same speed
    if base.fit != "too_large":
        room = None
        for c in sorted(c for c in CONTEXT_LADDER if n_ctx < c <= limit):
            cand = s.eval(v, replace(w0, n_ctx=c))
            if cand.fit != base.fit or cand.decode < 0.97 * base.decode:
                break
            room = cand
        if room is not None:
            c = room.estimate.config.n_ctx
            title = (f"Room for {_ctx(c)} context at the same fit: decode {_tok(base.decode)} -> "
                     f"{_tok(room.decode)} tok/s")
            card = _card("context", "", f"{_gb(room.memory_bytes)} in all at {_ctx(c)} tokens.", base, room,
                         quality=f"the model can see {c} tokens of the conversation instead of {n_ctx}", source="",
                         title=title)
            # worth a little: more context for (almost) nothing
            out.append(replace(card, gain=dict(card.gain, score=round(0.06 + 0.02 * math.log2(c / n_ctx), 4))))
    return out


def _quant_cards(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    others = [o for o in s.variants if o.quant != v.quant]
    if not others:
        return []
    cands = [s.eval(o, w0) for o in others]
    cur_bytes = v.spec.file_bytes
    out: list[AdviceCard] = []
    # faster: a smaller file that buys a better fit or >= 10% decode, highest quality first
    smaller = [c for c in cands if c.variant.spec.file_bytes < cur_bytes and c.fit != "too_large"]
    smaller.sort(key=lambda c: -c.variant.spec.file_bytes)
    best_fit = max((FIT_RANK[c.fit] for c in smaller), default=-1)
    pick = None
    if best_fit > FIT_RANK[base.fit]:
        pick = next(c for c in smaller if FIT_RANK[c.fit] == best_fit)
    else:
        pick = next((c for c in smaller if c.decode >= 1.1 * base.decode), None)
    if pick is not None:
        out.append(_quant_card(base, pick, faster=True))
    # better quality: the largest file that keeps the fit and >= 85% of the speed
    larger = [c for c in cands if c.variant.spec.file_bytes > cur_bytes and c.fit == base.fit
              and base.fit != "too_large" and c.decode >= 0.85 * base.decode]
    if larger:
        up = max(larger, key=lambda c: c.variant.spec.file_bytes)
        card = _quant_card(base, up, faster=False)
        if up.quality.known and base.quality.known and up.quality.kld < base.quality.kld:
            # a small positive score: quality for a little speed
            out.append(replace(card, gain=dict(card.gain, score=round(0.08 + 0.5 * (base.quality.kld - up.quality.kld), 4))))
    return out


def _quant_card(base: Candidate, after: Candidate, *, faster: bool) -> AdviceCard:
    qa, qb = after.variant.quant, base.variant.quant
    a_ppl, b_ppl = QUANT_DPPL.get(qa.upper()), QUANT_DPPL.get(qb.upper())
    if a_ppl is not None and b_ppl is not None:
        # perplexity rises as quality falls: +PPL is a loss, -PPL a gain
        quality = (f"{qa} instead of {qb}: perplexity {a_ppl - b_ppl:+.3f}, "
                   f"KL divergence {QUANT_KLD_PUBLISHED[qa.upper()]:.4f} vs {QUANT_KLD_PUBLISHED[qb.upper()]:.4f}")
        source = QUANT_SOURCE
        ppl = f"{a_ppl - b_ppl:+.2f} PPL"
    else:
        quality, source, ppl = f"{NOT_MEASURED} (no published figure for {qa if a_ppl is None else qb})", "", ""
    d_pct = (after.decode / base.decode - 1) * 100
    if FIT_RANK[after.fit] > FIT_RANK[base.fit]:
        title = _title(f"{qa} instead of {qb}", base, after)
    else:
        title = f"{qa} instead of {qb}: {d_pct:+.0f}% decode speed" + (f" for {ppl}" if ppl else "")
    size = f"{_gb(after.variant.spec.file_bytes)} instead of {_gb(base.variant.spec.file_bytes)}"
    detail = (f"The {qa} file is {size}; " + ("fewer bytes to read per token." if faster
                                                else "more bits per weight, closer to the original model."))
    return _card("quant", "", detail, base, after, quality=quality, source=source, title=title)


def _experts_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    spec = v.spec
    if not (spec.is_moe and _has_gpu(s.hw)) or base.fit == "full_gpu":
        return []
    w = replace(w0, n_gpu_layers="auto")
    n = _min_experts_on_cpu(spec, s.hw, w)
    if not n:
        return []
    after = s.eval(v, w, n_cpu_moe=n)
    plain = s.eval(v, w)
    if after.fit == "too_large" or after.decode <= plain.decode:
        return []
    gpu = after.numbers()["gpu_bytes"]
    room = sum(d.available_bytes for d in after.estimate.memory.devices if d.device != CPU)
    title = (f"Experts of the first {n} layers in RAM: the rest fits in {_gb(room)} of GPU memory, "
             f"{_numbers(base, after)}")
    detail = (f"Attention and the KV cache of every layer stay on the GPU ({_gb(gpu)}); only the routed experts "
              f"of layers 0-{n - 1} are read from RAM, {spec.n_expert_used} of {spec.n_expert} per token. "
              f"Plain partial offload at the same settings: {_tok(plain.decode)} tok/s.")
    return [_card("experts", "", detail, base, after, title=title,
                  quality="none: same computation on another device", source="")]


def _combined_card(s: _Search, v: Variant, base: Candidate, tuned: Wishes,
                   singles: list[AdviceCard]) -> list[AdviceCard]:
    """Levers add up: the best loadable combination for the same file, with only
    published-quality KV types (f16, q8_0)."""
    pool = []
    kv_types = [k for k in _kv_types_for(v.spec) if k in KV_KLD]
    ubs = sorted({base.estimate.config.n_ubatch} | {c.settings["n_ubatch"] for c in singles if c.kind == "batch"})
    for k in kv_types:
        for ub in ubs:
            pool.append(s.eval(v, replace(tuned, kv_type=k, n_ubatch=ub, n_batch=max(tuned.n_batch, ub))))
    best = max(pool, key=lambda c: gain(base, c)["score"])
    g = gain(base, best)["score"]
    loadable = [c for c in singles if c.runtime_supported]
    if any(c.settings == best.settings for c in loadable):
        return []
    if g < max((c.gain["score"] for c in loadable), default=0.0) + 0.05:
        return []
    changes = _changes(base.settings, best.settings)
    if not changes:
        return []
    detail = "Several levers at once: " + ", ".join(changes) + "."
    kv_b, kv_a = base.estimate.config.kv_type, best.estimate.config.kv_type
    if kv_a != kv_b and kv_a in KV_KLD and kv_b in KV_KLD:
        # the only lever here that changes the numbers computed: the cache type
        quality = (f"{kv_a} KV cache instead of {kv_b}: {KV_DPPL[kv_a] - KV_DPPL[kv_b]:+.4f} PPL, "
                   f"KLD {KV_KLD[kv_a] - KV_KLD[kv_b]:+.4f}")
        source = KV_SOURCE
    else:
        quality, source = "none: same computation, other placement and batching", ""
    return [_card("combined", "All together (" + ", ".join(changes) + ")", detail, base, best,
                  quality=quality, source=source)]


def _changes(before: dict, after: dict) -> list[str]:
    names = {"kv_type": "KV cache {}", "flash_attn": "flash attention {}", "swa_full": "full-size SWA cache {}",
             "n_gpu_layers": "{} GPU layers", "n_threads": "{} threads", "n_ubatch": "micro-batch {}",
             "n_batch": "batch {}"}
    out = []
    for k, fmt in names.items():
        if before.get(k) != after.get(k):
            val = after[k]
            if isinstance(val, bool):
                val = "on" if val else "off"
            out.append(fmt.format(val))
    return out


# ---- Pareto front ------------------------------------------------------------------------------


def _objectives(c: Candidate) -> tuple[float, float, float, float]:
    """Smaller is better on each: quality loss (unknown counts as worst), -decode,
    -prefill, memory; speeds and memory rounded to 2% so near-ties do not split the front."""
    def r(x: float) -> float:
        return round(math.log(max(x, 1e-9)) / math.log(1.02))
    q = c.quality.kld if c.quality.known else math.inf
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


def default_quant(quants: Sequence[str]) -> str:
    """The file people start with: Q4_K_M where published, else the middle one."""
    upper = [q.upper() for q in quants]
    if "Q4_K_M" in upper:
        return quants[upper.index("Q4_K_M")]
    return quants[len(quants) // 2]
