"""Rank catalog models for one machine: each at its best quantization, with a fit badge.

For every model and quantization the planner estimates memory and speed at the requested
context. A model's best quant is the highest-quality one that fits at a usable speed
(decode >= MIN_USABLE_TOK_S); failing that, the fastest one that fits; failing that, the
smallest (too large). The score combines quality, speed against a target, fit and
context, with weights per use case (README "Ranking").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rooflight.catalog.models import CatalogModel, load_catalog
from rooflight.catalog.quality import quality_prior, quality_score
from rooflight.estimate import Calibration, Estimate, Wishes, plan
from rooflight.estimate.fit import Fit
from rooflight.gguf.quant_recipe import FILE_TYPES
from rooflight.gguf.spec import ModelSpec
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
FIT_SCORE: dict[str, float] = {Fit.FULL_GPU: 1.0, Fit.PARTIAL_GPU: 0.6, Fit.CPU_ONLY: 0.5, Fit.TOO_LARGE: 0.0}


@dataclass(frozen=True)
class QuantOption:
    quant: str
    estimate: Estimate
    quality: float
    # where the estimate's ModelSpec came from: "computed" (catalog hyper-parameters and
    # llama.cpp's quant recipe), "hub" (the same, resized to the Hub's exact file size),
    # "header" (the file's real GGUF header), "scaled" (another quant's header of the same
    # repository resized to this file's size), "disk" (a header read from a file on disk)
    source: str = "computed"
    repo: str | None = None  # the file to download or load, when known
    filename: str | None = None

    @property
    def file_bytes_source(self) -> str:
        """computed | hub | disk: who says how big the file is."""
        return {"computed": "computed", "disk": "disk"}.get(self.source, "hub")

    def to_dict(self, installed: bool = False) -> dict:
        e = self.estimate
        return {"quant": self.quant, "fit": e.fit, "decode_tok_s": round(e.performance.decode_tok_s, 2),
                "memory_bytes": e.memory.total_bytes, "quality": round(self.quality, 2),
                "file_bytes": e.spec.file_bytes, "file_bytes_source": self.file_bytes_source,
                "estimate_from": self.source, "repo": self.repo, "file": self.filename,
                "installed": installed}


@dataclass(frozen=True)
class RankedModel:
    model: CatalogModel
    best: QuantOption
    options: tuple[QuantOption, ...]
    score: float
    origin: str = "catalog"  # catalog | hub (a Hub search result) | disk (a file found on disk)
    installed: tuple = ()  # local.InstalledFile of this model found on disk
    hub: Any = None  # hub.HubRepo for Hub results
    offline: bool = False  # Hub results from the cache while the Hub could not be asked
    quality_source: str = "benchmark"  # benchmark (catalog figure with size) | size (size prior only)

    @property
    def fit(self) -> str:
        return self.best.estimate.fit

    def installed_quants(self) -> set[str]:
        return {q for q in (getattr(f, "quant", None) for f in self.installed) if q}

    def to_dict(self) -> dict:
        e = self.best.estimate
        p = e.performance
        if self.best.filename is not None:
            repo, filename = self.best.repo, self.best.filename
        else:
            repo, filename = self.model.file_for(self.best.quant)
        have = self.installed_quants()
        doc = {
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
            "quality_source": self.quality_source,
            "n_ctx": e.config.n_ctx,
            "n_gpu_layers": e.config.n_gpu_layers,
            "decode_tok_s": round(p.decode_tok_s, 2),
            "prefill_tok_s": round(p.prefill_tok_s, 2),
            "file_bytes": e.spec.file_bytes,
            "file_bytes_source": self.best.file_bytes_source,
            "estimate_from": self.best.source,
            "memory_bytes": e.memory.total_bytes,
            "available_bytes": sum(d.available_bytes for d in e.memory.devices),
            "repo": repo,
            "file": filename,
            "origin": self.origin,
            "installed": bool(self.installed),
            "installed_files": [f.to_dict() for f in self.installed],
            "options": [o.to_dict(installed=o.quant in have) for o in self.options],
        }
        if self.hub is not None:
            doc.update(downloads=self.hub.downloads, likes=self.hub.likes, gated=self.hub.gated,
                       offline=self.offline)
        return doc


_specs: dict[tuple, tuple[CatalogModel, ModelSpec]] = {}


def _spec(model: CatalogModel, quant: str, file_bytes: int | None = None) -> ModelSpec:
    """Catalog specs are pure functions of (model, quant[, the Hub's file size]): build
    each once per process. Keyed by the entry's identity (kept alive beside the spec), so
    two catalogs with the same id never share a spec."""
    key = (id(model), quant, file_bytes)
    hit = _specs.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    spec = _spec(model, quant) if file_bytes else model.spec(quant)
    if file_bytes:
        from rooflight.catalog.hub_specs import resize_spec

        spec = resize_spec(spec, file_bytes, quant=quant)
    _specs[key] = (model, spec)
    return spec


def evaluate(
    spec: ModelSpec, hardware: HardwareProfile, *, quant: str, n_ctx: int, prior: float,
    params_b: float, calibration: Calibration | None = None, source: str = "computed",
    repo: str | None = None, filename: str | None = None,
) -> QuantOption:
    """Plan one file for this machine at n_ctx; its quality from the prior and the quant."""
    est = plan(spec, hardware, Wishes(n_ctx=n_ctx), calibration=calibration)
    return QuantOption(quant, est, quality_score(prior, quant, params_b), source, repo, filename)


def _catalog_files(model: CatalogModel, hub: Any) -> list[tuple[str, ModelSpec, str, str | None, str | None]]:
    """(quant, spec, source, repo, filename) for each quant of a catalog model. hub: the
    model's hub.CatalogFiles when the Hub listed its repositories: sizes become the
    Hub's, quants the Hub added join, and quants gone from every source leave."""
    if hub is None:
        return [(q, _spec(model, q), "computed", None, None) for q in model.quants]
    order = list(FILE_TYPES)
    quants = set(hub.files) if hub.complete and hub.files else set(model.quants) | set(hub.files)
    out = []
    for q in sorted(quants, key=lambda q: (order.index(q) if q in order else len(order), q)):
        f = hub.files.get(q)
        if f is not None and f.size:
            out.append((q, _spec(model, q, f.size), "hub", f.repo_id, f.filename))
        else:
            out.append((q, _spec(model, q), "computed", None, None))
    return out


def model_from_spec(
    model_id: str, spec: ModelSpec, *, name: str | None = None, repo_id: str | None = None,
    files: Mapping[str, str] | None = None, license: str = "", tags: Sequence[str] = (),
) -> CatalogModel:
    """A catalog-shaped entry for a model known only from its GGUF header (a Hub search
    result, a file on disk), so that it ranks, prints and shows like a catalog model.
    It has no benchmark figure (quality=None): its quality prior is the size prior."""
    from rooflight.catalog.models import GGUFSource, HParams
    from rooflight.gguf.quant_recipe import ARCHITECTURES

    kv = [h for h in spec.n_head_kv if h] or [spec.n_head[0] if spec.n_head else 1]
    swa = spec.swa_layers if spec.sliding_window else ()
    pattern = None
    if swa and False in swa:  # "every Nth layer global", when the layers follow one
        p = swa.index(False) + 1
        if tuple((il % p) < p - 1 for il in range(len(swa))) == tuple(swa):
            pattern = p
    hp = HParams(
        n_layer=spec.n_layer, n_embd=spec.n_embd, n_head=max(spec.n_head or (1,)),
        n_head_kv=kv[0], head_dim=spec.head_dim_k, n_ff=spec.n_ff_exp or max(spec.n_ff or (0,)),
        n_vocab=spec.n_vocab, context_length=spec.context_length, sliding_window=spec.sliding_window,
        swa_pattern=pattern, n_expert=spec.n_expert, n_expert_used=spec.n_expert_used,
        tie_embeddings=spec.tied_embeddings,
    )
    general = spec.metadata.get("general.name")
    return CatalogModel(
        id=model_id, name=name or (general if isinstance(general, str) and general else model_id),
        family=spec.architecture, architecture=spec.architecture,
        layout=spec.architecture if spec.architecture in ARCHITECTURES else "llama",
        params_total=spec.params / 1e9, params_active=spec.active_params / 1e9,
        license=license, tags=tuple(tags), release="", hparams=hp,
        hparams_source=f"GGUF header of {repo_id + '/' if repo_id else ''}{next(iter((files or {}).values()), spec.name)}",
        quality=None, gguf=(GGUFSource(repo_id or "", dict(files or {})),),
    )


def choose_best(options: Sequence[QuantOption]) -> QuantOption:
    """The highest-quality option that fits at a usable speed; else the fastest that fits;
    else the smallest."""
    fitting = [o for o in options if o.estimate.fit != "too_large"]
    usable = [o for o in fitting if o.estimate.performance.decode_tok_s >= MIN_USABLE_TOK_S]
    if usable:
        return max(usable, key=lambda o: (o.quality, o.estimate.performance.decode_tok_s))
    if fitting:
        return max(fitting, key=lambda o: o.estimate.performance.decode_tok_s)
    return min(options, key=lambda o: o.estimate.memory.total_bytes)


def score_option(best: QuantOption, use_case: str) -> float:
    """0-100 by the use case's weights; 0 for a model that does not fit."""
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
    hub_files: Mapping[str, Any] | None = None,
    installed: Sequence[Any] | None = None,
    installed_only: bool = False,
) -> list[RankedModel]:
    """Catalog models for this machine, best first, each at its best quant.

    hub_files: catalog id -> hub.CatalogFiles (hub.cached_catalog_files() or
    refresh_catalog_files().models): file sizes and lists as the Hub has them.
    installed: local.InstalledFile list (local.find_installed()); matching models are
    marked installed, and installed_only keeps only them (found on disk if not given).
    """
    catalog = models if models is not None else load_catalog()
    if installed_only and installed is None:
        from rooflight.catalog.local import find_installed

        installed = find_installed()
    on_disk: Mapping[str, tuple] = {}
    if installed:
        from rooflight.catalog.local import match_catalog

        on_disk = match_catalog(installed, catalog)
    ranked = []
    for model in catalog:
        if use_case not in ("chat", "tiny") and use_case not in model.tags:
            continue
        if not min_params_b <= model.params_total <= max_params_b:
            continue
        if license_contains and license_contains.lower() not in model.license.lower():
            continue
        mine = on_disk.get(model.id, ())
        if installed_only and not mine:
            continue
        n_ctx = min(ctx or DEFAULT_CTX, model.hparams.context_length)
        prior = quality_prior(model)
        options = [
            evaluate(spec, hardware, quant=q, n_ctx=n_ctx, prior=prior, params_b=model.params_total,
                     calibration=calibration, source=source, repo=repo, filename=filename)
            for q, spec, source, repo, filename in _catalog_files(model, (hub_files or {}).get(model.id))
        ]
        best = choose_best(options)
        if fits_only and best.estimate.fit == "too_large":
            continue
        ranked.append(RankedModel(
            model, best, tuple(options), score_option(best, use_case), installed=tuple(mine),
            quality_source="benchmark" if model.quality is not None else "size",
        ))
    ranked.sort(key=lambda r: r.score, reverse=True)
    return ranked
