"""Rank catalog models for one machine: each at its best quantization, with a fit badge.

For every model and quantization the planner estimates memory and speed at the requested
context. A model's pick is the quant a careful user would download (picks.choose_best:
usable speed for the use case, headroom, Q4_K_M..Q6_K, full GPU over partial offload).
Models rank first by tier (fits with headroom at a usable speed > fits but slow or tight >
too large), then by score: quality on the catalog's one scale, nudged by speed (README
"Ranking"). Architectures the estimator cannot model yet are listed apart
(unavailable_models) with the reason, never given a number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rooflight.catalog import picks
from rooflight.catalog.arch_support import unavailable_reason
from rooflight.catalog.models import (
    CatalogModel,
    is_packaged,
    load_catalog,
    proxy_quant,
    quant_order,
)
from rooflight.catalog.quality import quality_basis, quality_prior, quality_score
from rooflight.catalog.spec_cache import spec_cache
from rooflight.estimate import Calibration, Estimate, Wishes, plan
from rooflight.estimate.fit import Fit
from rooflight.gguf.quant_recipe import FILE_TYPES
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile

DEFAULT_CTX = 8192
MIN_USABLE_TOK_S = picks.USABLE_TOK_S["chat"]  # chat's threshold; picks.usable_tok_s per use case
# the use cases rank understands, each with its usable decode speed (picks.py)
USE_CASES = {u: picks.USABLE_TOK_S[u] for u in ("chat", "coding", "reasoning", "tiny")}

# Within a tier, quality decides; speed adds up to SPEED_SHARE of the score, reached at
# SPEED_TARGET x the use case's threshold (a model twice as fast as "usable" is nicer to use,
# but never worth a worse model). Tiny: speed matters as much as quality.
SPEED_SHARE = {"tiny": 0.5}
DEFAULT_SPEED_SHARE = 0.15
SPEED_TARGET = 3.0
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
    headroom: bool = True  # leaves picks.HEADROOM of RAM and VRAM free beyond the margin

    @property
    def file_bytes_source(self) -> str:
        """computed | published | hub | disk: who says how big the file is."""
        return {"computed": "computed", "disk": "disk", "published": "published"}.get(self.source, "hub")

    def to_dict(self, installed: bool = False) -> dict:
        e = self.estimate
        return {"quant": self.quant, "fit": e.fit, "decode_tok_s": round(e.performance.decode_tok_s, 2),
                "memory_bytes": e.memory.total_bytes, "quality": round(self.quality, 2),
                "file_bytes": e.spec.file_bytes, "file_bytes_source": self.file_bytes_source,
                "estimate_from": self.source, "repo": self.repo, "file": self.filename,
                "installed": installed, "headroom": self.headroom}


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
    # benchmark (a figure on quality.SCALE) | mapped (from quality.INDEX_NAME) | prior | size (size prior only)
    quality_source: str = "benchmark"
    tier: int = 2  # picks.tier: 2 usable with headroom, 1 fits but slow or tight, 0 too large
    usable_tok_s: float = MIN_USABLE_TOK_S
    superseded_by: str | None = None  # a newer model of the same line that runs as well here
    successor_name: str | None = None  # that model's name

    @property
    def fit(self) -> str:
        return self.best.estimate.fit

    def ranked_lower_because(self) -> tuple[picks.Reason, ...]:
        """Why this model is listed below models its score would put it above: its pick is
        tight, slow or below Q4_K_M (picks.tier_reasons), or a newer model of its line runs as
        well here; () for a model in the first group (and one too large: its fit says so)."""
        out = picks.tier_reasons(self.best, self.usable_tok_s, [o.quant for o in self.options])
        if self.superseded_by:
            out += (picks.Reason("superseded", "a newer model of its line runs as well here, listed above",
                                 self.successor_name or self.superseded_by),)
        return out

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
            **self._quality_fields(),
            "release": self.model.release or None,  # YYYY-MM; None for a Hub or disk file
            "architecture": self.model.architecture,
            "usable": self.tier == 2,
            "usable_tok_s": self.usable_tok_s,
            "headroom": self.best.headroom,
            "superseded_by": self.superseded_by,
            "ranked_lower_because": [str(why) for why in self.ranked_lower_because()],
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
            # a vision model planned with its projector: what it adds and where (estimate/vision.py)
            "vision": e.vision.to_dict(e.spec.projector) if e.vision is not None else None,
        }
        if self.hub is not None:
            doc.update(downloads=self.hub.downloads, likes=self.hub.likes, gated=self.hub.gated,
                       offline=self.offline)
        return doc

    def quality_text(self) -> tuple[str, str]:
        """(short line, full source) of what the quality figure stands on, for the detail."""
        f = self._quality_fields()
        q = self.model.quality
        if q is not None and q.score is not None:
            return f"quality {q.score:g} on the {f['quality_benchmark']}", f["quality_note"]
        if self.quality_source == "mapped":
            from rooflight.catalog.quality import INDEX_LOO_RMSE, INDEX_NAME

            return (f"quality {quality_prior(self.model):.0f} on the {f['quality_benchmark']}, mapped from the "
                    f"{INDEX_NAME} (±{INDEX_LOO_RMSE:g} held-out)", f["quality_note"])
        return f"quality: no {f['quality_benchmark']} figure, ranked by a prior", f["quality_note"]

    def _quality_fields(self) -> dict:
        if self.origin == "catalog" or self.model.quality is not None:
            basis = quality_basis(self.model)
            return {"quality_benchmark": basis["quality_benchmark"], "quality_note": basis["quality_note"]}
        from rooflight.catalog.quality import SCALE

        return {"quality_benchmark": SCALE, "quality_note": "no figure: the size prior from the file's parameters"}


_specs: dict[tuple, tuple[CatalogModel, ModelSpec]] = {}


def _spec(model: CatalogModel, quant: str, file_bytes: int | None = None) -> ModelSpec:
    """Catalog specs are pure functions of (model, quant[, the Hub's file size]): build
    each once per process. Keyed by the entry's identity (kept alive beside the spec), so
    two catalogs with the same id never share a spec."""
    key = (id(model), quant, file_bytes)
    hit = _specs.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]

    def build() -> ModelSpec:
        if file_bytes:
            from rooflight.catalog.hub_specs import resize_spec

            base = (_spec(model, proxy_quant(quant)) if model.untied_in(quant) == model.untied_in(proxy_quant(quant))
                    else model._computed(proxy_quant(quant), untied=model.untied_in(quant)))
            return resize_spec(base, file_bytes, quant=quant)
        return model.spec(quant)

    if is_packaged(model):  # the packaged catalog: its specs are kept on disk
        spec = spec_cache().get(f"{model.id}|{quant}|{file_bytes or ''}", build)
    else:
        spec = build()
    _specs[key] = (model, spec)
    return spec


def evaluate(
    spec: ModelSpec, hardware: HardwareProfile, *, quant: str, n_ctx: int, prior: float,
    params_b: float, calibration: Calibration | None = None, source: str = "computed",
    repo: str | None = None, filename: str | None = None,
) -> QuantOption:
    """Plan one file for this machine at n_ctx; its quality from the prior and the quant."""
    est = plan(spec, hardware, Wishes(n_ctx=n_ctx), calibration=calibration)
    return QuantOption(quant, est, quality_score(prior, quant, params_b), source, repo, filename,
                       picks.headroom_ok(est, hardware))


def _catalog_files(model: CatalogModel, hub: Any) -> list[tuple[str, ModelSpec, str, str | None, str | None]]:
    """(quant, spec, source, repo, filename) for each quant of a catalog model. hub: the
    model's hub.CatalogFiles when the Hub listed its repositories: sizes become the
    Hub's, quants the Hub added join, and quants gone from every source leave."""
    def known(q: str):
        published = model.published_size(q)
        if published is not None:
            repo, name = model.file_for(q)
            return (q, _spec(model, q), "published", repo, name)
        if q in FILE_TYPES:
            return (q, _spec(model, q), "computed", None, None)
        return None  # neither a recipe nor a published size: not offered until the Hub sizes it

    if hub is None:
        return [o for o in (known(q) for q in model.quants) if o is not None]
    quants = set(hub.files) if hub.complete and hub.files else set(model.quants) | set(hub.files)
    out = []
    for q in sorted(quants, key=quant_order):
        f = hub.files.get(q)
        if f is not None and f.size:
            out.append((q, _spec(model, q, f.size), "hub", f.repo_id, f.filename))
        elif (o := known(q)) is not None:
            out.append(o)
    return out


def prepare_catalog_specs() -> None:
    """Build (or restore from the spec cache) every packaged catalog spec a ranking plans,
    without planning any: what a GUI start does while this machine is still detected."""
    for model in load_catalog():
        if unavailable_reason(model) is None:
            _catalog_files(model, None)
    spec_cache().save()


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


def choose_best(options: Sequence[QuantOption], use_case: str = "chat",
                native_quant: str | None = None) -> QuantOption:
    """The quant a careful user would download for this use case (picks.choose_best)."""
    return picks.choose_best(options, threshold=picks.usable_tok_s(use_case), native_quant=native_quant)


def score_option(best: QuantOption, use_case: str, offered: Sequence[str] = ()) -> float:
    """Quality (0-100 scale) with up to a sixth from speed; halved when the pick is slow or
    leaves no headroom; 0 for a model that does not fit. Ranking sorts by tier first."""
    e = best.estimate
    if e.fit == "too_large":
        return 0.0
    share = SPEED_SHARE.get(use_case, DEFAULT_SPEED_SHARE)
    speed = min(1.0, e.performance.decode_tok_s / (SPEED_TARGET * picks.usable_tok_s(use_case)))
    score = best.quality * (1.0 - share + share * speed)
    return score if picks.tier(best, picks.usable_tok_s(use_case), offered) == 2 else 0.5 * score


def unavailable_models(models: Sequence[CatalogModel] | None = None, use_case: str = "chat") -> list[dict]:
    """Catalog models the estimator cannot size yet, each with the one-sentence reason."""
    out = []
    for model in models if models is not None else load_catalog():
        reason = unavailable_reason(model)
        if reason is None or (use_case not in ("chat", "tiny") and use_case not in model.tags):
            continue
        repo, name = model.file_for(model.quants[0])
        out.append({"id": model.id, "name": model.name, "architecture": model.architecture,
                    "params_b": model.params_total, "release": model.release, "tags": list(model.tags),
                    "reason": reason, "repo": repo, "file": name})
    return out


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
    unavailable: list[dict] | None = None,
) -> list[RankedModel]:
    """Catalog models for this machine, best first, each at its best quant.

    hub_files: catalog id -> hub.CatalogFiles (hub.cached_catalog_files() or
    refresh_catalog_files().models): file sizes and lists as the Hub has them.
    installed: local.InstalledFile list (local.find_installed()); matching models are
    marked installed, and installed_only keeps only them (found on disk if not given).
    unavailable: when given, gets one {"id", "name", "architecture", "reason"} row per
    model whose architecture cannot be estimated (estimate/support.py); they are not ranked.
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
        if unavailable_reason(model) is not None:  # listed apart, never given a number
            if unavailable is not None:
                unavailable.extend(unavailable_models((model,)))
            continue
        n_ctx = min(ctx or DEFAULT_CTX, model.hparams.context_length)
        prior = quality_prior(model)
        from rooflight.catalog.hub_vision import catalog_projector, with_vision

        projector = catalog_projector(model)  # a vision model's projector, when its header was read
        options = [
            evaluate(with_vision(spec, projector), hardware, quant=q, n_ctx=n_ctx, prior=prior,
                     params_b=model.params_total, calibration=calibration, source=source, repo=repo,
                     filename=filename)
            for q, spec, source, repo, filename in _catalog_files(model, (hub_files or {}).get(model.id))
        ]
        if not options:
            continue
        best = choose_best(options, use_case, model.native_quant)
        if fits_only and best.estimate.fit == "too_large":
            continue
        threshold = picks.usable_tok_s(use_case)
        offered = [o.quant for o in options]
        ranked.append(RankedModel(
            model, best, tuple(options), score_option(best, use_case, offered), installed=tuple(mine),
            quality_source=quality_basis(model)["quality_source"], tier=picks.tier(best, threshold, offered),
            usable_tok_s=threshold,
        ))
    ranked = _mark_superseded(ranked)
    ranked.sort(key=lambda r: (r.tier, r.superseded_by is None, round(r.score, 6), r.model.release), reverse=True)
    spec_cache().save()  # what this ranking derived, for the next process (spec_cache.py)
    return ranked


def _mark_superseded(ranked: list[RankedModel]) -> list[RankedModel]:
    """A model whose catalog successor (quality prior "successor:ID") runs in the same tier
    or better here is listed after the models that are not superseded: an expert would not
    recommend the older model of a line when its replacement runs as well."""
    from dataclasses import replace

    tiers = {r.model.id: r.tier for r in ranked}
    newer: dict[str, RankedModel] = {}
    for r in ranked:
        q = r.model.quality
        if q is not None and q.prior.startswith("successor:"):
            old = q.prior.removeprefix("successor:")
            if old in tiers and r.tier >= tiers[old] and r.tier > 0:
                newer.setdefault(old, r)
    return [replace(r, superseded_by=(n := newer[r.model.id]).model.id, successor_name=n.model.name)
            if r.model.id in newer else r for r in ranked]
