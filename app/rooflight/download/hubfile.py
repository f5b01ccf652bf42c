"""What to download: a Hub file (or every part of a split GGUF) pinned to one commit.

One `model_info(files_metadata=True)` call gives the commit a revision points to and,
for every file of the repo, its size, git blob id and (for LFS files, which GGUF files
always are) the sha256 the finished download must have. huggingface_hub names cache
blobs after the resolve endpoint's ETag, which the Hub sets to that same sha256 for LFS
files (X-Linked-Etag) and to the git blob id otherwise, so the blob name comes from the
same answer without a HEAD request per part. Every part is then fetched at the pinned
commit, so the parts of a split model always belong together.

Hub failures become one sentence each (`describe_hub_error`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from rooflight.errors import BadInputError, OperationFailedError, RooflightError
from rooflight.gguf.split_names import split_part_names

_REPO = re.compile(r"^[\w.-]+/[\w.-]+$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_HASH = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # git sha1 / sha256: also a blob's file name


@dataclass(frozen=True)
class HubFileInfo:
    """One file of a repo at one commit, with what the finished file must hash to."""

    repo_id: str
    filename: str  # path inside the repo
    commit: str
    size: int
    etag: str  # huggingface_hub's blob name: sha256 for LFS files, git blob id otherwise
    sha256: str | None  # the Hub's LFS sha256; None for small non-LFS files
    blob_id: str | None  # git blob sha1 (non-LFS files are checked against it)

    @property
    def url(self) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo_id, self.filename, revision=self.commit)


@dataclass(frozen=True)
class DownloadPlan:
    """A download unit: one file, or all parts of a split model, at one commit."""

    repo_id: str
    filename: str  # the file to load (the first part of a split model)
    revision: str  # what the user asked for ("main" by default)
    commit: str
    parts: tuple[HubFileInfo, ...]

    @property
    def total_bytes(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def page(self) -> str:
        return f"{_endpoint()}/{self.repo_id}"


def _endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def check_names(repo_id: str, filename: str) -> None:
    if not _REPO.match(repo_id or ""):
        raise BadInputError(f"{repo_id!r} is not a Hub repository name; write OWNER/REPO.")
    parts = PurePosixPath(filename).parts if filename else ()
    if not parts or filename.startswith("/") or any(p in ("..", ".") for p in parts):
        raise BadInputError(f"{filename!r} is not a file path inside a repository.")


def unit_filename(filename: str) -> str:
    """The file a download unit is known by: the first part of a split model, else itself."""
    path = PurePosixPath(filename)
    names = split_part_names(path.name)
    if not names:
        return filename
    return names[0] if str(path.parent) == "." else f"{path.parent}/{names[0]}"


def resolve(
    repo_id: str, filename: str, revision: str | None = None, *, token: str | bool | None = None,
    projector: str | None = "auto",
) -> DownloadPlan:
    """Ask the Hub for the commit, sizes and checksums of a file and its split siblings.

    A vision model's projector joins the unit (downloaded, verified and removed with it):
    projector "auto" picks the repository's mmproj file (gguf/projector.py's preference:
    F16 first), a file name picks that one, None leaves it out.

    Raises a RooflightError with one sentence for a missing repo, revision or file and
    for gated or private repos; network errors propagate (the caller retries them).
    """
    from huggingface_hub import HfApi

    from rooflight import __version__

    check_names(repo_id, filename)
    revision = revision or "main"
    api = HfApi(token=token, library_name="rooflight", library_version=__version__)
    info = api.model_info(repo_id, revision=revision, files_metadata=True)
    commit = info.sha or (revision if _COMMIT.match(revision) else None)
    if not commit or not _COMMIT.match(commit):
        raise OperationFailedError(
            f"The Hub did not say which commit {revision} of {repo_id} is; try again later."
        )
    siblings = {s.rfilename: s for s in info.siblings or ()}
    path = PurePosixPath(filename)
    names = split_part_names(path.name)
    parent = "" if str(path.parent) == "." else f"{path.parent}/"
    wanted = [parent + n for n in names] if names else [filename]
    if filename not in siblings:
        raise _missing_file(repo_id, filename, revision, siblings)
    from rooflight.gguf.projector import choose_projector, is_projector_name

    if projector is not None and not is_projector_name(filename):
        chosen = choose_projector(list(siblings), projector)
        if chosen is None and projector != "auto":
            raise BadInputError(f"{repo_id} has no vision projector {projector!r} at {revision}.")
        if chosen is not None:
            wanted.append(chosen)
    parts = []
    for name in wanted:
        s = siblings.get(name)
        if s is None:
            raise OperationFailedError(
                f"{repo_id} is missing {name}: the model is split into {len(wanted)} parts "
                f"and all of them are needed, but the repository at {revision} lacks this one."
            )
        if s.size is None or (s.lfs is None and s.blob_id is None):
            raise OperationFailedError(
                f"The Hub did not give the size and checksum of {name} in {repo_id}; try again later."
            )
        sha256 = s.lfs.sha256.lower() if s.lfs is not None else None
        etag = sha256 or (s.blob_id or "").lower()
        if not _HASH.match(etag):  # it becomes a file name in the cache: nothing else allowed
            raise OperationFailedError(
                f"The Hub gave an unexpected checksum for {name} in {repo_id}; try again later."
            )
        parts.append(HubFileInfo(repo_id, name, commit, int(s.size), etag, sha256, s.blob_id))
    return DownloadPlan(repo_id, wanted[0], revision, commit, tuple(parts))


def _missing_file(repo_id: str, filename: str, revision: str, siblings: dict) -> BadInputError:
    ggufs = sorted(n for n in siblings if n.endswith(".gguf"))
    hint = ""
    if ggufs and len(ggufs) <= 6:
        hint = f" (its GGUF files: {', '.join(ggufs)})"
    elif ggufs:
        hint = f" (it has {len(ggufs)} GGUF files; see {_endpoint()}/{repo_id}/tree/{revision})"
    return BadInputError(f"{repo_id} has no file {filename} at revision {revision}{hint}.")


def _has_token(token: str | bool | None) -> bool:
    if isinstance(token, str):
        return True
    if token is False:
        return False
    from huggingface_hub import get_token

    return get_token() is not None


def describe_hub_error(
    exc: BaseException,
    repo_id: str,
    filename: str,
    revision: str | None,
    *,
    token: str | bool | None = None,
) -> RooflightError | None:
    """One sentence for a Hub error while resolving or fetching; None if not a Hub answer."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    revision = revision or "main"
    page = f"{_endpoint()}/{repo_id}"
    login = "set HF_TOKEN or run `hf auth login`"
    if isinstance(exc, OfflineModeIsEnabled):
        return OperationFailedError(
            f"Cannot download {filename}: huggingface_hub is in offline mode (HF_HUB_OFFLINE is set)."
        )
    status = None
    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        status = exc.response.status_code
    if isinstance(exc, GatedRepoError) or (
        status in (401, 403) and not isinstance(exc, RepositoryNotFoundError)
    ):
        if _has_token(token):
            return OperationFailedError(
                f"{repo_id} is gated and the token given has no access to it: accept the "
                f"model's licence at {page} with the account the token belongs to, then try again."
            )
        return OperationFailedError(
            f"{repo_id} is gated: accept the model's licence at {page} and give Rooflight a "
            f"token with access ({login}), then try again."
        )
    if isinstance(exc, RepositoryNotFoundError):
        return BadInputError(
            f"The repository {repo_id} does not exist on the Hub, or it is private and needs a "
            f"token with access ({login})."
        )
    if isinstance(exc, RevisionNotFoundError):
        return BadInputError(f"{repo_id} has no revision {revision}.")
    if isinstance(exc, RemoteEntryNotFoundError) or status == 404:
        return BadInputError(f"{repo_id} has no file {filename} at revision {revision}.")
    if status == 429:
        return OperationFailedError(
            "The Hub is rate-limiting downloads (HTTP 429); wait a few minutes and try again."
        )
    if status is not None:
        return OperationFailedError(
            f"The Hub answered HTTP {status} for {filename} in {repo_id}; try again later."
        )
    return None
