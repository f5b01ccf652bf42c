"""`hf:OWNER/REPO/PATH/FILE.gguf[@REVISION]` URIs, read with HTTP range requests.

Everything HTTP goes through huggingface_hub: `hf_hub_url` builds the URL (so HF_ENDPOINT
is honoured), `build_hf_headers` adds the token (HF_TOKEN or the saved login) and user
agent, and `get_session` is the shared client with the user's proxy/SSL/offline setup.
Nothing is downloaded beyond the header's bytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from rooflight.errors import BadInputError, OperationFailedError, RooflightError

from .sources import HttpRangeSource

# OWNER/REPO/PATH...: the Hub's repo names use letters, digits, '-', '_', '.'.
_URI = re.compile(
    r"^hf:(?://)?(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)/(?P<file>[^@]+?)(?:@(?P<rev>[^@/][^@]*))?$"
)


class HubNotFoundError(BadInputError):
    """HTTP 404 for a Hub file, its repository or its revision."""


@dataclass(frozen=True)
class HubFile:
    repo_id: str  # "owner/repo"
    filename: str  # path inside the repo: "Q4_K_M/model-00001-of-00002.gguf"
    revision: str | None = None  # branch, tag or commit; None = the default branch

    @property
    def uri(self) -> str:
        rev = f"@{self.revision}" if self.revision else ""
        return f"hf:{self.repo_id}/{self.filename}{rev}"

    def with_filename(self, filename: str) -> HubFile:
        return replace(self, filename=filename)


def is_hf_uri(source: str) -> bool:
    return source.startswith("hf:")


def parse_hf_uri(uri: str) -> HubFile:
    m = _URI.match(uri.strip())
    if not m or m["file"].endswith("/") or "//" in m["file"]:
        raise BadInputError(
            f"{uri!r} is not a Hub file reference; write hf:OWNER/REPO/FILE.gguf "
            "(optionally followed by @REVISION)."
        )
    return HubFile(f"{m['owner']}/{m['repo']}", m["file"], m["rev"] or None)


def _endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def describe_http_error(ref: HubFile, status: int, headers: Mapping[str, str]) -> RooflightError:
    """One sentence for an HTTP error answered for `ref`, naming what to do."""
    code = headers.get("X-Error-Code", "")
    page = f"{_endpoint()}/{ref.repo_id}"
    if status in (401, 403):
        if code == "RepoNotFound":
            return BadInputError(
                f"{ref.uri}: the repository {ref.repo_id} does not exist on the Hub, or it is "
                "private and needs a token (set HF_TOKEN or run `hf auth login`)."
            )
        return OperationFailedError(
            f"{ref.uri} cannot be read: the repository {ref.repo_id} is gated or private "
            f"(HTTP {status}). Accept its licence at {page} and give a token with access: "
            "set HF_TOKEN or run `hf auth login`."
        )
    if status == 404:
        if code == "RepoNotFound":
            return HubNotFoundError(
                f"{ref.uri}: the repository {ref.repo_id} does not exist on the Hub."
            )
        if code == "RevisionNotFound":
            return HubNotFoundError(
                f"{ref.uri}: the revision {ref.revision or 'main'} does not exist in {ref.repo_id}."
            )
        return HubNotFoundError(
            f"{ref.uri}: the file {ref.filename} does not exist in {ref.repo_id} "
            f"(or the repository does not exist); check the names at {page}."
        )
    if status == 429:
        return OperationFailedError(
            f"{ref.uri}: the Hub is rate-limiting requests (HTTP 429); wait a minute and try again."
        )
    return OperationFailedError(
        f"{ref.uri} cannot be read: the Hub answered HTTP {status}; try again later."
    )


def hub_timeout() -> float:
    """Seconds to wait for the Hub: huggingface_hub's own HF_HUB_DOWNLOAD_TIMEOUT when set
    (read now, not at import, so a user's setting always applies), else 30 s."""
    try:
        return max(0.1, float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT", "30")))
    except ValueError:
        return 30.0


def open_hub_source(ref: HubFile, *, timeout: float | None = None) -> HttpRangeSource:
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers

    from rooflight import __version__

    url = hf_hub_url(ref.repo_id, ref.filename, revision=ref.revision)
    try:
        headers = build_hf_headers(library_name="rooflight", library_version=__version__)
    except Exception as e:  # a malformed token file or OIDC failure: say so, do not crash
        raise OperationFailedError(f"Cannot build Hub credentials: {e}") from None
    return HttpRangeSource(
        url,
        ref.uri,
        headers=headers,
        timeout=hub_timeout() if timeout is None else timeout,
        describe_status=lambda status, h: describe_http_error(ref, status, h),
    )
