"""Hub search results ranked for this machine, exactly like catalog entries.

For each repository: its file listing (sizes, sha256), one real header read remotely (a
few MB of range requests; the quant nearest Q4_K_M, the one most people download), and
every other quant estimated from that header resized to the file's exact size
(hub_specs.resize_spec) -- or from its own header when it was read before or when
`exact=True`. Each file is planned like a catalog quant; the best one is chosen and
scored with rank.py's rules. A search result has no benchmark figure, so its quality
prior is quality.size_prior (the catalog blends its figure with that same prior).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rooflight.catalog.hub import (
    FILES_MAX_AGE_S,
    HubModelFile,
    HubRepo,
    access_sentence,
    cached_spec,
    has_token,
    hub_spec,
    list_gguf_files,
    search_hub,
)
from rooflight.catalog.hub_specs import resize_spec
from rooflight.catalog.quality import size_prior
from rooflight.catalog.rank import (
    DEFAULT_CTX,
    RankedModel,
    choose_best,
    evaluate,
    model_from_spec,
    score_option,
)
from rooflight.errors import RooflightError

# which file's header to read first: the usual download, then its neighbours
_PREFERRED = ("Q4_K_M", "Q4_K_S", "Q5_K_M", "IQ4_XS", "Q4_0", "Q5_K_S", "Q6_K", "Q8_0",
              "Q3_K_L", "Q3_K_M", "IQ4_NL", "Q4_1", "Q5_0", "Q5_1", "BF16", "F16")
_NOT_TAGS = ("gguf", "license:", "region:", "base_model:", "endpoints_compatible",
             "arxiv:", "dataset:", "conversational", "text-generation", "imatrix")


@dataclass(frozen=True)
class HubRanking:
    models: list[RankedModel]  # origin "hub", best first
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (repo, one sentence)
    offline: bool = False  # some answers came from the cache because the Hub could not be asked
    query: str | None = None

    # a sequence of its models, so it serves where a list of RankedModel is expected
    # (the GUI's search provider: fn(query, hardware, n_ctx) -> Sequence[RankedModel])
    def __len__(self) -> int:
        return len(self.models)

    def __iter__(self) -> Iterator[RankedModel]:
        return iter(self.models)

    def __getitem__(self, i):
        return self.models[i]

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "offline": self.offline,
                "models": [r.to_dict() for r in self.models],
                "skipped": [{"repo": r, "reason": why} for r, why in self.skipped]}


def _representative(files: Sequence[HubModelFile]) -> HubModelFile:
    def key(f: HubModelFile) -> tuple:
        q = (f.quant or "").removeprefix("UD-")
        pref = _PREFERRED.index(q) if q in _PREFERRED else len(_PREFERRED)
        return (len(f.parts) > 1, pref, f.size)  # a single file reads one header, not N

    return min(files, key=key)


def _license(tags: Sequence[str]) -> str:
    return next((t.split(":", 1)[1] for t in tags if t.startswith("license:")), "")


def _labels(files: Sequence[HubModelFile], spec_quant: str) -> list[str]:
    """One distinct option label per file: its quant, or its name when that is taken."""
    out, seen = [], set()
    for f in files:
        label = f.quant or spec_quant
        if label in seen:
            label = f.filename.rsplit("/", 1)[-1].removesuffix(".gguf")
        seen.add(label)
        out.append(label)
    return out


def rank_hub_repo(
    hardware,
    repo: HubRepo | str,
    *,
    ctx: int | None = None,
    use_case: str = "chat",
    calibration=None,
    exact: bool = False,
    installed: Sequence[Any] = (),
    max_age: float = FILES_MAX_AGE_S,
) -> RankedModel:
    """One repository's GGUF files planned for this machine; its best file first."""
    info = repo if isinstance(repo, HubRepo) else HubRepo(repo)
    listing = list_gguf_files(info.repo_id, max_age=max_age)
    files = [f for f in listing.files if f.complete and f.size]
    if not files:
        raise RooflightError(f"{info.repo_id} has no complete GGUF model file.")
    rep = _representative(files)
    spec = cached_spec(rep)
    if spec is None:
        if (listing.gated or info.gated) and not has_token():
            raise RooflightError(access_sentence(info.repo_id))
        spec = hub_spec(rep)
    from rooflight.catalog.hub_vision import repo_projector, vision_tags, with_vision

    projector = repo_projector(listing)  # a vision model: planned with its projector
    spec = with_vision(spec, projector)
    params_b = spec.params / 1e9
    prior = size_prior(params_b)
    n_ctx = min(ctx or DEFAULT_CTX, spec.context_length or DEFAULT_CTX)
    labels = _labels(files, spec.file_type)
    options = []
    for label, f in zip(labels, files, strict=True):
        own = spec if f is rep else (hub_spec(f) if exact else cached_spec(f))
        if own is not None:
            fspec, source = own, "header"
        else:
            fspec, source = resize_spec(spec, f.size, quant=f.quant), "scaled"
        fspec = with_vision(fspec, projector)
        options.append(evaluate(fspec, hardware, quant=label, n_ctx=n_ctx, prior=prior, params_b=params_b,
                                calibration=calibration, source=source, repo=f.repo_id, filename=f.filename))
    tags = vision_tags((t for t in info.tags if not t.startswith(_NOT_TAGS)), spec.projector is not None)
    model = model_from_spec(info.repo_id, spec, name=info.repo_id.split("/", 1)[1],
                            repo_id=info.repo_id, files=dict(zip(labels, (f.filename for f in files), strict=True)),
                            license=_license(info.tags), tags=tags)
    best = choose_best(options, use_case)
    names = {f.filename for f in files}
    shas = {s for f in files for s in f.sha256 if s}
    mine = tuple(i for i in installed
                 if (i.repo_id == info.repo_id and i.filename in names) or (i.sha256 and i.sha256 in shas))
    return RankedModel(model, best, tuple(options), score_option(best, use_case), origin="hub",
                       installed=mine, hub=info, offline=listing.offline, quality_source="size")


def rank_hub_results(
    hardware,
    repos: Sequence[HubRepo | str],
    *,
    ctx: int | None = None,
    use_case: str = "chat",
    calibration=None,
    exact: bool = False,
    installed: Sequence[Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> HubRanking:
    """Rank repositories (search results) for this machine, best first. A repository
    that cannot be ranked (gated, no GGUF model, unreadable header) is listed in
    `skipped` with one sentence; the others still rank."""
    from rooflight.catalog.hub import offline_reason

    installed = () if installed is None else installed
    ranked, skipped = [], []
    for i, repo in enumerate(repos):
        repo_id = repo.repo_id if isinstance(repo, HubRepo) else repo
        try:
            ranked.append(rank_hub_repo(hardware, repo, ctx=ctx, use_case=use_case,
                                        calibration=calibration, exact=exact, installed=installed))
        except RooflightError as e:
            skipped.append((repo_id, str(e)))
        if progress:
            progress(i + 1, len(repos))
    ranked.sort(key=lambda r: r.score, reverse=True)
    offline = any(r.offline for r in ranked) or offline_reason() is not None
    return HubRanking(ranked, skipped, offline)


def search_and_rank(
    query: str,
    hardware,
    ctx: int | None = None,
    *,
    limit: int = 10,
    use_case: str = "chat",
    calibration=None,
    exact: bool = False,
    installed: Sequence[Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> HubRanking:
    """search_hub + rank_hub_results: what `rooflight search` and the GUI's search box do
    (its provider signature: search_and_rank(query, hardware, n_ctx))."""
    found = search_hub(query, limit=limit)
    result = rank_hub_results(hardware, found.repos, ctx=ctx, use_case=use_case, calibration=calibration,
                              exact=exact, installed=installed, progress=progress)
    return HubRanking(result.models, result.skipped, result.offline or found.offline, query)
