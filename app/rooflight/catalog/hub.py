"""The Hugging Face Hub, live: search GGUF repositories, list their model files, read headers.

Everything goes through huggingface_hub (HfApi for search and file listings, the range
reader of rooflight.gguf for headers), so HF_ENDPOINT, HF_TOKEN / `hf auth login`,
proxies and HF_HUB_OFFLINE behave as in every other Hub tool. Every answer is kept on
disk (hub_cache.py) and reused while fresh; when the Hub cannot be asked (HF_HUB_OFFLINE
set, no network, a Hub outage) older answers are used whatever their age, and results
say `offline=True`. With nothing cached, the error says so in one sentence.

    search_hub("qwen3", limit=20)        -> HubSearch (.repos: HubRepo, .offline)
    list_gguf_files("owner/repo")        -> RepoFiles (.files: HubModelFile, split parts grouped)
    hub_spec(file)                       -> ModelSpec from the file's real header (cached forever)
    refresh_catalog_files() / cached_catalog_files()  -> the catalog's files as the Hub lists them
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rooflight.catalog import hub_cache
from rooflight.catalog.hub_files import group_gguf, parse_quant
from rooflight.catalog.hub_specs import spec_from_json, spec_to_json
from rooflight.catalog.models import CatalogModel, load_catalog
from rooflight.errors import BadInputError, OperationFailedError, RooflightError
from rooflight.gguf.quant_recipe import FILE_TYPES
from rooflight.gguf.spec import ModelSpec

SEARCH_MAX_AGE_S = 6 * 3600.0  # new uploads and download counts move within hours
FILES_MAX_AGE_S = 24 * 3600.0  # a repository's files change rarely
UNREACHABLE_RETRY_S = 60.0  # after a network failure, do not wait on the network again for this long
_REPO = re.compile(r"^[\w.-]+/[\w.-]+$")

PROBE_TIMEOUT_S = 5.0
# endpoint -> time.monotonic() until which it counts as unreachable
_unreachable: dict[str, float] = {}


# ---- results ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HubRepo:
    """One search result: a repository that publishes GGUF files."""

    repo_id: str
    downloads: int = 0
    likes: int = 0
    tags: tuple[str, ...] = ()
    gated: bool = False
    private: bool = False
    last_modified: str | None = None
    gguf_files: tuple[str, ...] = ()  # model files (first parts) the search named

    @property
    def quants(self) -> tuple[str, ...]:
        """Quant labels read from the file names (display only)."""
        seen: dict[str, None] = {}
        for f in self.gguf_files:
            q = parse_quant(f)
            if q:
                seen[q] = None
        return tuple(seen)

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo_id, "downloads": self.downloads, "likes": self.likes,
                "tags": list(self.tags), "gated": self.gated, "private": self.private,
                "last_modified": self.last_modified, "files": list(self.gguf_files),
                "quants": list(self.quants)}


@dataclass(frozen=True)
class HubModelFile:
    """One loadable model in a repository: a GGUF file, or all parts of a split one."""

    repo_id: str
    filename: str  # the file to load (part 1 of a split model)
    parts: tuple[str, ...]
    part_sizes: tuple[int, ...]  # bytes per part (0 for a part the listing lacks)
    sha256: tuple[str | None, ...]  # the Hub's LFS sha256 per part
    complete: bool  # every part is in the repository
    commit: str | None  # the commit the listing describes

    @property
    def size(self) -> int:
        return sum(self.part_sizes)

    @property
    def quant(self) -> str | None:
        return parse_quant(self.filename)

    @property
    def uri(self) -> str:
        """hf:OWNER/REPO/FILE[@COMMIT]: pinned, so the header matches the listed sizes."""
        return f"hf:{self.repo_id}/{self.filename}" + (f"@{self.commit}" if self.commit else "")

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo_id, "file": self.filename, "quant": self.quant,
                "size_bytes": self.size, "parts": list(self.parts),
                "part_sizes": list(self.part_sizes), "sha256": list(self.sha256),
                "complete": self.complete, "commit": self.commit}


@dataclass(frozen=True)
class HubSearch:
    query: str
    repos: tuple[HubRepo, ...]
    offline: bool  # True: the Hub could not be asked; these are earlier answers
    fetched_at: float  # when the Hub gave this answer (time.time())

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "offline": self.offline, "fetched_at": self.fetched_at,
                "repos": [r.to_dict() for r in self.repos]}


@dataclass(frozen=True)
class RepoFiles:
    repo_id: str
    commit: str | None
    gated: bool
    private: bool
    files: tuple[HubModelFile, ...]
    offline: bool
    fetched_at: float
    projectors: tuple[HubModelFile, ...] = ()  # vision projectors (mmproj-*.gguf) beside the models

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo_id, "commit": self.commit, "gated": self.gated,
                "private": self.private, "offline": self.offline, "fetched_at": self.fetched_at,
                "files": [f.to_dict() for f in self.files],
                "mmproj": [f.to_dict() for f in self.projectors]}


# ---- offline, errors --------------------------------------------------------------------


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def hub_offline() -> bool:
    """HF_HUB_OFFLINE is set (huggingface_hub reads it once, at import)."""
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())


def _unreachable_now() -> bool:
    until = _unreachable.get(endpoint())
    return until is not None and time.monotonic() < until


def offline_reason() -> str | None:
    """Why the Hub is not being asked right now, or None when it is."""
    if hub_offline():
        return "offline mode is on (HF_HUB_OFFLINE is set)"
    if _unreachable_now():
        return f"{endpoint()} could not be reached a moment ago"
    return None


def _probe() -> None:
    """Raise at once when the Hub's host cannot be reached. huggingface_hub retries a
    failed search five times with backoff (24 s without a network); one plain request
    without retries finds out first. Any HTTP answer counts as reachable. (A file
    listing is a single request without retries: it needs no probe.)"""
    from huggingface_hub.utils import get_session

    get_session().head(endpoint(), timeout=PROBE_TIMEOUT_S, follow_redirects=False)


def _is_network_error(e: BaseException) -> bool:
    """The Hub could not answer (no network, offline mode, outage) -- not a refusal."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(e, OfflineModeIsEnabled | httpx2.TransportError | httpx2.StreamError | TimeoutError):
        return True
    if isinstance(e, HfHubHTTPError):
        status = getattr(getattr(e, "response", None), "status_code", None)
        return status is not None and (status >= 500 or status == 429)
    return isinstance(e, ConnectionError)


def access_sentence(repo_id: str, status: int | None = None, *, gated: bool = True) -> str:
    """How to get access to a gated or private repository, in one sentence."""
    page = f"{endpoint()}/{repo_id}"
    how = "set HF_TOKEN or run `hf auth login`"
    if status == 403:
        return (f"Your Hugging Face token has no access to {repo_id} (HTTP 403): accept the "
                f"model's licence at {page} while logged in, or use a token with read access ({how}).")
    if gated:
        return (f"{repo_id} is gated: accept the model's licence at {page} while logged in, "
                f"then give Rooflight your token ({how}).")
    return (f"{repo_id} does not exist on the Hub or is private; if you have access, {how} "
            "with a token that can read it.")


def describe_hub_error(e: BaseException, repo_id: str | None = None) -> RooflightError:
    """One sentence for an error huggingface_hub raised while asking about `repo_id`."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    status = getattr(getattr(e, "response", None), "status_code", None)
    what = repo_id or "the Hub"
    if isinstance(e, GatedRepoError):
        return OperationFailedError(access_sentence(what, status))
    if isinstance(e, RepositoryNotFoundError):
        if status in (401, 403):
            return BadInputError(access_sentence(what, status, gated=False))
        return BadInputError(f"{what} does not exist on the Hub; check the name at {endpoint()}.")
    if isinstance(e, RevisionNotFoundError):
        return BadInputError(f"That revision of {what} does not exist on the Hub.")
    if isinstance(e, HfHubHTTPError) and status in (401, 403):
        return OperationFailedError(access_sentence(what, status, gated=status == 401))
    if isinstance(e, HfHubHTTPError) and status is not None:
        return OperationFailedError(f"The Hub answered HTTP {status} about {what}; try again later.")
    return OperationFailedError(f"Asking the Hub about {what} failed: {type(e).__name__}: {e}.")


def _well_formed(kind: str, data: Any) -> bool:
    if kind == "search":
        return (isinstance(data, dict) and isinstance(data.get("repos"), list)
                and isinstance(data.get("limit"), int)
                and all(isinstance(r, dict) and isinstance(r.get("id"), str) for r in data["repos"]))
    if kind == "files":
        return (isinstance(data, dict) and isinstance(data.get("files"), list)
                and all(isinstance(f, dict) and isinstance(f.get("path"), str) for f in data["files"]))
    return True


def _ask(kind: str, key: str, fetch: Callable[[], Any], max_age: float, what: str,
         repo_id: str | None = None, enough: Callable[[Any], bool] = lambda data: True,
         ) -> tuple[Any, bool, float]:
    """(answer, offline, fetched_at): a fresh cached answer that is `enough`, else the
    Hub's, else (the Hub cannot be asked) any cached answer."""
    cached = hub_cache.load(kind, key)
    if cached is not None and not _well_formed(kind, cached.data):
        cached = None  # written by another version, or damaged: ask again
    reason = offline_reason()
    if reason is None and cached is not None and cached.age_s() < max_age and enough(cached.data):
        return cached.data, False, cached.fetched_at
    if reason is None:
        try:
            data = fetch()
        except Exception as e:
            if not _is_network_error(e):
                raise describe_hub_error(e, repo_id) from None
            _unreachable[endpoint()] = time.monotonic() + UNREACHABLE_RETRY_S
            reason = f"{endpoint()} cannot be reached ({type(e).__name__})"
        else:
            _unreachable.pop(endpoint(), None)
            stored = hub_cache.store(kind, key, data)
            return data, False, stored.fetched_at
    if cached is None:
        raise OperationFailedError(
            f"Cannot get {what}: {reason}, and no earlier answer is cached; connect to the "
            "network (or unset HF_HUB_OFFLINE) and try again."
        )
    return cached.data, True, cached.fetched_at


# ---- search -----------------------------------------------------------------------------


def _api():
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint(), library_name="rooflight")


def _repo_from_json(d: Mapping[str, Any]) -> HubRepo:
    files = tuple(g.filename for g in group_gguf(d.get("files") or ()))
    return HubRepo(
        repo_id=str(d["id"]), downloads=int(d.get("downloads") or 0), likes=int(d.get("likes") or 0),
        tags=tuple(d.get("tags") or ()), gated=bool(d.get("gated")), private=bool(d.get("private")),
        last_modified=d.get("last_modified"), gguf_files=files,
    )


def search_hub(
    query: str, *, limit: int = 20, author: str | None = None, max_age: float = SEARCH_MAX_AGE_S
) -> HubSearch:
    """GGUF repositories whose name contains `query`, most downloaded first."""
    query = query.strip()
    if not 1 <= limit <= 1000:
        raise BadInputError(f"The search limit must be between 1 and 1000, not {limit}.")
    key = json.dumps([endpoint(), query.lower(), author])

    def fetch() -> dict[str, Any]:
        _probe()
        out = []
        for m in _api().list_models(search=query or None, filter="gguf", author=author,
                                    sort="downloads", limit=limit, full=True):
            lm = getattr(m, "last_modified", None)
            out.append({
                "id": m.id, "downloads": m.downloads, "likes": m.likes, "tags": list(m.tags or ()),
                "gated": bool(m.gated), "private": bool(m.private),
                "last_modified": lm.isoformat() if lm else None,
                "files": [s.rfilename for s in (m.siblings or ()) if s.rfilename.lower().endswith(".gguf")],
            })
        return {"limit": limit, "repos": out}

    def enough(data: dict[str, Any]) -> bool:
        # an answer to a longer (or exhausted) search also answers this one
        return data["limit"] >= limit or len(data["repos"]) < data["limit"]

    data, offline, fetched = _ask("search", key, fetch, max_age, f"Hub results for {query!r}",
                                  enough=enough)
    return HubSearch(query, tuple(_repo_from_json(d) for d in data["repos"][:limit]), offline, fetched)


# ---- a repository's files ---------------------------------------------------------------


def _check_repo(repo_id: str) -> None:
    if not _REPO.match(repo_id):
        raise BadInputError(f"{repo_id!r} is not a Hub repository name; write OWNER/REPO.")


def _files_key(repo_id: str, revision: str | None) -> str:
    return f"{endpoint()}|{repo_id}@{revision or 'main'}"


def _repo_files(repo_id: str, data: Mapping[str, Any], offline: bool, fetched: float) -> RepoFiles:
    by_path = {f["path"]: f for f in data.get("files", ())}
    files = []
    for g in group_gguf(by_path):
        entries = [by_path.get(p) for p in g.parts]
        files.append(HubModelFile(
            repo_id=repo_id, filename=g.filename, parts=g.parts,
            part_sizes=tuple(int(e["size"] or 0) if e else 0 for e in entries),
            sha256=tuple(e.get("sha256") if e else None for e in entries),
            complete=g.complete, commit=data.get("sha"),
        ))
    from rooflight.gguf.projector import is_projector_name

    projectors = tuple(
        HubModelFile(repo_id=repo_id, filename=p, parts=(p,), part_sizes=(int(e["size"] or 0),),
                     sha256=(e.get("sha256"),), complete=True, commit=data.get("sha"))
        for p, e in sorted(by_path.items()) if is_projector_name(p))
    return RepoFiles(repo_id, data.get("sha"), bool(data.get("gated")), bool(data.get("private")),
                     tuple(files), offline, fetched, projectors)


def list_gguf_files(
    repo_id: str, *, revision: str | None = None, max_age: float = FILES_MAX_AGE_S
) -> RepoFiles:
    """The repository's GGUF models with sizes and sha256 (one Hub request, cached)."""
    _check_repo(repo_id)

    def fetch() -> dict[str, Any]:
        info = _api().model_info(repo_id, revision=revision, files_metadata=True)
        files = [
            {"path": s.rfilename, "size": s.size,
             "sha256": s.lfs.sha256 if s.lfs is not None else None}
            for s in (info.siblings or ()) if s.rfilename.lower().endswith(".gguf")
        ]
        return {"sha": info.sha, "gated": bool(info.gated), "private": bool(info.private), "files": files}

    data, offline, fetched = _ask("files", _files_key(repo_id, revision), fetch, max_age,
                                  f"the file list of {repo_id}", repo_id)
    return _repo_files(repo_id, data, offline, fetched)


def cached_gguf_files(repo_id: str, *, revision: str | None = None) -> RepoFiles | None:
    """The last file list the Hub gave for this repository, whatever its age; never asks."""
    cached = hub_cache.load("files", _files_key(repo_id, revision))
    if cached is None or not _well_formed("files", cached.data):
        return None
    return _repo_files(repo_id, cached.data, True, cached.fetched_at)


# ---- headers ----------------------------------------------------------------------------


def _spec_key(file: HubModelFile) -> str | None:
    if file.sha256 and all(file.sha256):
        return "sha256:" + ",".join(s for s in file.sha256 if s)  # content: valid forever
    if file.commit:
        return f"{endpoint()}|{file.repo_id}@{file.commit}/{file.filename}"
    return None


def cached_spec(file: HubModelFile) -> ModelSpec | None:
    """The ModelSpec of a header read earlier, or None; never asks the Hub."""
    key = _spec_key(file)
    cached = hub_cache.load("specs", key) if key else None
    if cached is None:
        return None
    try:
        return spec_from_json(cached.data)
    except (KeyError, TypeError, ValueError):
        return None  # an unreadable cache entry is read again


def hub_spec(file: HubModelFile) -> ModelSpec:
    """The model's ModelSpec from its real header: a few MB of range requests, once."""
    from rooflight.gguf import load_model_spec

    spec = cached_spec(file)
    if spec is not None:
        return spec
    reason = offline_reason()
    if reason is not None:
        raise OperationFailedError(
            f"Cannot read the header of {file.uri}: {reason}, and it was never read before; "
            "connect to the network and try again."
        )
    if not file.complete:
        missing = [p for p, size in zip(file.parts, file.part_sizes, strict=True) if not size]
        raise BadInputError(f"{file.repo_id} lacks {missing[0]}: the split model is incomplete.")
    spec = load_model_spec(file.uri)
    key = _spec_key(file)
    if key:
        hub_cache.store("specs", key, spec_to_json(spec))
    return spec


def has_token() -> bool:
    from huggingface_hub import get_token

    try:
        return bool(get_token())
    except Exception:
        return False


# ---- the catalog's files as the Hub lists them ------------------------------------------


@dataclass(frozen=True)
class CatalogFiles:
    """For one catalog model: quant -> the Hub file that publishes it."""

    files: Mapping[str, HubModelFile]
    complete: bool  # every source repository's listing is known (so absent quants are gone)


@dataclass(frozen=True)
class CatalogRefresh:
    models: dict[str, CatalogFiles]  # catalog id -> files
    offline: bool
    errors: dict[str, str] = field(default_factory=dict)  # repo -> one sentence


def _match_catalog(model: CatalogModel, listings: Mapping[str, RepoFiles]) -> CatalogFiles:
    out: dict[str, HubModelFile] = {}
    for source in model.gguf:
        listing = listings.get(source.repo)
        if listing is None:
            continue
        by_name = {f.filename: f for f in listing.files if f.complete}
        for quant, name in source.files.items():
            if quant in out:
                continue
            if name.endswith("/"):
                hit = next((f for n, f in by_name.items() if n.startswith(name)), None)
            else:
                hit = by_name.get(name)
            if hit is None:  # renamed upstream: the same quant under another name
                hit = next((f for f in by_name.values() if f.quant == quant), None)
            if hit is not None:
                out[quant] = hit
        # quants the catalog does not list yet, where the size recipe knows them
        for f in by_name.values():
            q = f.quant
            if q in FILE_TYPES and q not in out:
                out[q] = f
    complete = all(s.repo in listings for s in model.gguf)
    return CatalogFiles(out, complete)


def cached_catalog_files(models: Iterable[CatalogModel] | None = None) -> dict[str, CatalogFiles]:
    """What earlier refreshes learned about the catalog's files; reads the disk only."""
    out = {}
    for model in models if models is not None else load_catalog():
        listings = {}
        for s in model.gguf:
            got = cached_gguf_files(s.repo)
            if got is not None:
                listings[s.repo] = got
        if listings:
            out[model.id] = _match_catalog(model, listings)
    return out


def refresh_catalog_files(
    models: Iterable[CatalogModel] | None = None, *, max_age: float = FILES_MAX_AGE_S,
    progress: Callable[[int, int], None] | None = None,
) -> CatalogRefresh:
    """Ask the Hub (where the cached listing is older than max_age) for every catalog
    source repository's files. A repository that fails is reported, not fatal."""
    models = list(models if models is not None else load_catalog())
    repos = list(dict.fromkeys(s.repo for m in models for s in m.gguf))
    listings: dict[str, RepoFiles] = {}
    errors: dict[str, str] = {}
    offline = False
    for i, repo in enumerate(repos):
        try:
            got = list_gguf_files(repo, max_age=max_age)
            listings[repo] = got
            offline = offline or got.offline
        except RooflightError as e:
            errors[repo] = str(e)
            offline = offline or offline_reason() is not None
        if progress:
            progress(i + 1, len(repos))
    result = {m.id: _match_catalog(m, listings) for m in models
              if any(s.repo in listings for s in m.gguf)}
    if not offline:  # vision models: their projector's header, once (cached forever)
        from rooflight.catalog.hub_vision import catalog_projector

        for m in models:
            catalog_projector(m, network=True)
    return CatalogRefresh(result, offline, errors)
