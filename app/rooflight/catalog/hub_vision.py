"""Vision models on the Hub and in the catalog: their projector files, and its header.

A repository that publishes a vision model carries its projector beside the model files
(mmproj-*.gguf, usually F16 and often Q8_0). Rooflight reads the chosen projector's header
remotely once (a few KB of range requests; cached forever by its sha256, like a model's
header) so a Hub result or a catalog model is planned with the projector's memory and
its image encoding. The catalog names projectors per source repository as
`"mmproj": {"F16": "mmproj-F16.gguf", ...}`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from rooflight.catalog import hub_cache
from rooflight.gguf.projector import (
    ProjectorSpec,
    build_projector_spec,
    choose_projector,
    load_projector_spec,
)

VISION_TAG = "vision"


def _to_json(p: ProjectorSpec) -> dict:
    from dataclasses import asdict

    return asdict(p)


def _from_json(d: dict) -> ProjectorSpec:
    return ProjectorSpec(**d)


def _key(repo_id: str, filename: str, sha256: str | None, commit: str | None) -> str:
    if sha256:
        return f"sha256:{sha256}"
    return f"{repo_id}@{commit or 'main'}/{filename}"


def cached_projector(repo_id: str, filename: str, sha256: str | None = None,
                     commit: str | None = None) -> ProjectorSpec | None:
    got = hub_cache.load("projectors", _key(repo_id, filename, sha256, commit))
    if got is None:
        return None
    try:
        return _from_json(got.data)
    except (TypeError, ValueError):
        return None


def hub_projector(repo_id: str, filename: str, sha256: str | None = None,
                  commit: str | None = None, *, network: bool = True) -> ProjectorSpec | None:
    """The projector's spec from its header on the Hub (cached), or None when it cannot be
    read now (offline, gated, not a projector): the model is then planned without it."""
    from rooflight.catalog.hub import offline_reason
    from rooflight.errors import RooflightError

    spec = cached_projector(repo_id, filename, sha256, commit)
    if spec is not None or not network or offline_reason() is not None:
        return spec
    uri = f"hf:{repo_id}/{filename}" + (f"@{commit}" if commit else "")
    try:
        spec = load_projector_spec(uri)
    except RooflightError:
        return None
    hub_cache.store("projectors", _key(repo_id, filename, sha256, commit), _to_json(spec))
    return spec


def repo_projector(listing, *, network: bool = True) -> ProjectorSpec | None:
    """The best projector of a repository's listing (hub.RepoFiles), read from its header."""
    projectors = {f.filename: f for f in getattr(listing, "projectors", ())}
    name = choose_projector(list(projectors))
    if name is None:
        return None
    f = projectors[name]
    return hub_projector(f.repo_id, f.filename, f.sha256[0] if f.sha256 else None, f.commit,
                         network=network)


def catalog_projector_files(model) -> dict[str, str]:
    """precision -> file name of a catalog model's projector (its first source that has one)."""
    for source in model.gguf:
        files = getattr(source, "mmproj", None) or {}
        if files:
            return dict(files)
    return {}


def catalog_projector(model, *, network: bool = False) -> ProjectorSpec | None:
    """A catalog vision model's projector spec from a header read earlier (or now)."""
    for source in model.gguf:
        files = getattr(source, "mmproj", None) or {}
        name = choose_projector(list(files.values()))
        if name:
            return hub_projector(source.repo, name, network=network)
    return None


def with_vision(spec, projector: ProjectorSpec | None):
    """spec with the projector when it fits the model (a projector for another width is
    left out rather than planned wrong)."""
    if projector is None or (projector.projection_dim and projector.projection_dim != spec.n_embd):
        return spec
    from rooflight.gguf import derived

    return derived.inherit(replace(spec, projector=projector), spec)  # same tensors: same tables


def vision_tags(tags: Iterable[str], has_projector: bool) -> tuple[str, ...]:
    tags = tuple(tags)
    return tags + (VISION_TAG,) if has_projector and VISION_TAG not in tags else tags


__all__ = ["VISION_TAG", "build_projector_spec", "cached_projector", "catalog_projector",
           "catalog_projector_files", "hub_projector", "repo_projector", "vision_tags", "with_vision"]
