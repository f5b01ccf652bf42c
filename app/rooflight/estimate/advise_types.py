"""What the optimization advisor deals in (advise.py is its front door): the files and
settings it weighs (Variant, Candidate), what it says (AdviceCard, Advice), the published
quality effects it quotes, the settings space llama.cpp offers for a model, and the
conversion of a card's settings back to what the runtime loads.

Quality effects are only those with a published source: weight quantization from the
llama.cpp perplexity table (REFERENCE.md §2, catalog/quality.py) and the q8_0 KV cache
from llama.cpp PR #7412. Everything else says "quality effect: not measured", or why
the outputs do not change.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from rooflight.estimate.config import KV_TYPES, RunConfig
from rooflight.estimate.fit import Fit
from rooflight.estimate.placement import CPU
from rooflight.estimate.plan import Estimate, Wishes

# Weight quantization: the published table (estimate/quant_loss.py), shared with the
# catalog's ranking (catalog/quality.py)
from rooflight.estimate.quant_loss import QUANT_DPPL, QUANT_KLD_PUBLISHED, QUANT_SOURCE
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile

# ---- published quality effects ----------------------------------------------------------

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
# Every card is loadable now: MoE experts in RAM go through llama.cpp's tensor overrides
# (runtime/tensor_overrides.py). Kept for a candidate a runtime could not load.
RUNTIME_NOTE = "not available in this runtime"

# ---- search space ------------------------------------------------------------------------

CONTEXT_LADDER = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
UBATCH_SIZES = (128, 256, 512, 1024, 2048)
FIT_RANK: dict[str, int] = {f: f.rank for f in Fit}


def _kv_types_for(spec: ModelSpec) -> tuple[str, ...]:
    """KV types llama.cpp accepts for this model: block-quantized caches need head sizes
    that are multiples of the 32-wide block (llama-context.cpp checks n_embd_head_k/v)."""
    if any(d % 32 for il in range(spec.n_layer) for d in spec.head_dims(il)) or spec.head_dim_k % 32:
        return ("f16",)
    return KV_TYPES


def _has_swa(spec: ModelSpec) -> bool:
    return bool(spec.sliding_window and any(spec.swa_layers))


def _has_gpu(hw: HardwareProfile) -> bool:
    return bool(hw.offload_gpus)


# ---- the advisor's values ------------------------------------------------------------------


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
    assert w_dppl is not None and kv_dppl is not None  # each table has its KLD's keys
    return Quality(w_kld + kv_kld, w_dppl + kv_dppl, text, "; ".join(sources))
