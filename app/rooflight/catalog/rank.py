"""Rank catalog models for one machine: each at its best quantization, with a fit badge.

For every model and quantization the planner estimates memory and speed at the requested
context. A model's best quant is the highest-quality one that fits at a usable speed
(decode >= MIN_USABLE_TOK_S); failing that, the fastest one that fits; failing that, the
smallest (too large). The score combines quality, speed against a target, fit and
context, with weights per use case (README "Ranking").
"""

from __future__ import annotations

from dataclasses import dataclass

from rooflight.catalog.models import CatalogModel, load_catalog
from rooflight.catalog.quality import quality_prior, quality_score
from rooflight.estimate import Calibration, Estimate, Wishes, plan
from rooflight.hardware.profile import HardwareProfile

DEFAULT_CTX = 8192
MIN_USABLE_TOK_S = 5.0  # below this, a chat feels broken (one word every half second)

# target decode speed and weights per use case: quality, speed, fit margin
USE_CASES = {
    "chat": dict(target_tok_s=20.0, quality=0.5, speed=0.35, fit=0.15),
    "coding": dict(target_tok_s=25.0, quality=0.6, speed=0.3, fit=0.1),
    "reasoning": dict(target_tok_s=30.0, quality=0.65, speed=0.25, fit=0.1),
    "tiny": dict(target_tok_s=40.0, quality=0.3, speed=0.5, fit=0.2),
}
FIT_SCORE = {"full_gpu": 1.0, "partial_gpu": 0.6, "cpu_only": 0.5, "too_large": 0.0}


@dataclass(frozen=True)
class QuantOption:
    quant: str
    estimate: Estimate
    quality: float


@dataclass(frozen=True)
class RankedModel:
    model: CatalogModel
    best: QuantOption
    options: tuple[QuantOption, ...]
    score: float

    @property
    def fit(self) -> str:
        return self.best.estimate.fit

    def to_dict(self) -> dict:
        e = self.best.estimate
        p = e.performance
        repo, filename = self.model.file_for(self.best.quant)
        return {
            "id": self.model.id,
            "name": self.model.name,
            "family": self.model.family,
            "params_b": self.model.params_total,
            "active_params_b": self.model.params_active,
            "license": self.model.license,
            "tags": list(self.model.tags),
            "quant": self.best.quant,
            "fit": e.fit,
            "score": round(self.score, 2),
            "quality": round(self.best.quality, 2),
            "n_ctx": e.config.n_ctx,
            "n_gpu_layers": e.config.n_gpu_layers,
            "decode_tok_s": round(p.decode_tok_s, 2),
            "prefill_tok_s": round(p.prefill_tok_s, 2),
            "file_bytes": e.spec.file_bytes,
            "memory_bytes": e.memory.total_bytes,
            "available_bytes": sum(d.available_bytes for d in e.memory.devices),
            "repo": repo,
            "file": filename,
            "options": [
                {"quant": o.quant, "fit": o.estimate.fit, "decode_tok_s": round(o.estimate.performance.decode_tok_s, 2),
                 "memory_bytes": o.estimate.memory.total_bytes, "quality": round(o.quality, 2)}
                for o in self.options
            ],
        }


_specs: dict[tuple[str, str], object] = {}


def _spec(model: CatalogModel, quant: str):
    """Catalog specs are pure functions of (model, quant): build each once per process."""
    key = (model.id, quant)
    if key not in _specs:
        _specs[key] = model.spec(quant)
    return _specs[key]


def _choose(options: list[QuantOption]) -> QuantOption:
    fitting = [o for o in options if o.estimate.fit != "too_large"]
    usable = [o for o in fitting if o.estimate.performance.decode_tok_s >= MIN_USABLE_TOK_S]
    if usable:
        return max(usable, key=lambda o: (o.quality, o.estimate.performance.decode_tok_s))
    if fitting:
        return max(fitting, key=lambda o: o.estimate.performance.decode_tok_s)
    return min(options, key=lambda o: o.estimate.memory.total_bytes)


def _score(best: QuantOption, use_case: str) -> float:
    w = USE_CASES.get(use_case, USE_CASES["chat"])
    e = best.estimate
    if e.fit == "too_large":
        return 0.0
    speed = min(1.0, e.performance.decode_tok_s / w["target_tok_s"])
    used = e.memory.total_bytes / max(1, sum(d.available_bytes for d in e.memory.devices))
    fit = FIT_SCORE[e.fit] * (1.0 - 0.5 * min(1.0, used))
    return 100 * (w["quality"] * best.quality / 100 + w["speed"] * speed + w["fit"] * fit)


def rank_models(
    hardware: HardwareProfile,
    *,
    ctx: int | None = None,
    use_case: str = "chat",
    fits_only: bool = False,
    min_params_b: float = 0.0,
    max_params_b: float = float("inf"),
    license_contains: str | None = None,
    calibration: Calibration | None = None,
    models: tuple[CatalogModel, ...] | None = None,
) -> list[RankedModel]:
    ranked = []
    for model in models if models is not None else load_catalog():
        if use_case not in ("chat", "tiny") and use_case not in model.tags:
            continue
        if not min_params_b <= model.params_total <= max_params_b:
            continue
        if license_contains and license_contains.lower() not in model.license.lower():
            continue
        n_ctx = min(ctx or DEFAULT_CTX, model.hparams.context_length)
        options = []
        for quant in model.quants:
            spec = _spec(model, quant)
            est = plan(spec, hardware, Wishes(n_ctx=n_ctx), calibration=calibration)
            options.append(QuantOption(quant, est, quality_score(quality_prior(model), quant, model.params_total)))
        best = _choose(options)
        if fits_only and best.estimate.fit == "too_large":
            continue
        ranked.append(RankedModel(model, best, tuple(options), _score(best, use_case)))
    ranked.sort(key=lambda r: r.score, reverse=True)
    return ranked
