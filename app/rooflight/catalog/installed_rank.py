"""The models already on disk, each planned for this machine from its own GGUF header
(`rooflight models`): a file that matches a catalog model keeps its quality figure, any
other gets the size prior.

Here, not in local.py, so that finding files (local.py) and ranking (rank.py) do not
import each other: this module uses both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rooflight.catalog.local import InstalledFile, find_installed, match_catalog
from rooflight.catalog.models import CatalogModel, load_catalog
from rooflight.catalog.quality import quality_basis, quality_prior, size_prior
from rooflight.catalog.rank import DEFAULT_CTX, RankedModel, evaluate, model_from_spec, score_option
from rooflight.errors import RooflightError
from rooflight.gguf import load_model_spec


@dataclass(frozen=True)
class InstalledRanking:
    models: list  # RankedModel, origin "disk", one per file
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, one sentence)

    def to_dict(self) -> dict[str, Any]:
        return {"models": [r.to_dict() for r in self.models],
                "skipped": [{"path": p, "reason": why} for p, why in self.skipped]}


def rank_installed(
    hardware,
    files: Sequence[InstalledFile] | None = None,
    *,
    ctx: int | None = None,
    use_case: str = "chat",
    calibration=None,
    models: Sequence[CatalogModel] | None = None,
) -> InstalledRanking:
    """Each installed model planned for this machine from its real header, best first.
    A catalog model keeps its quality figure; any other gets the size prior."""
    files = find_installed() if files is None else files
    catalog = {m.id: m for m in (models if models is not None else load_catalog())}
    matched = {id(f): catalog[mid] for mid, fs in match_catalog(files, catalog.values()).items() for f in fs}
    ranked, skipped = [], []
    for f in files:
        if not f.complete:
            skipped.append((str(f.path), f"{f.name} is missing some of its {f.parts} parts."))
            continue
        try:
            spec = load_model_spec(f.path)
        except RooflightError as e:
            skipped.append((str(f.path), str(e)))
            continue
        if getattr(f, "mmproj", None):  # a vision model: planned with the projector beside it
            from rooflight.gguf.projector import pair_local

            spec = pair_local(spec, f.path)
        model = matched.get(id(f))
        quant = f.quant or spec.file_type
        if model is not None:
            prior, params_b = quality_prior(model), model.params_total
            source = quality_basis(model)["quality_source"]
        else:
            model = model_from_spec(f.name, spec, name=f.name, repo_id=f.repo_id,
                                    files={quant: f.filename})
            prior, params_b, source = size_prior(model.params_total), model.params_total, "size"
        n_ctx = min(ctx or DEFAULT_CTX, spec.context_length or DEFAULT_CTX)
        option = evaluate(spec, hardware, quant=quant, n_ctx=n_ctx, prior=prior, params_b=params_b,
                          calibration=calibration, source="disk", repo=f.repo_id, filename=str(f.path))
        ranked.append(RankedModel(model, option, (option,), score_option(option, use_case),
                                  origin="disk", installed=(f,), quality_source=source))
    ranked.sort(key=lambda r: r.score, reverse=True)
    return InstalledRanking(ranked, skipped)
