"""The transfer of one file into its `.incomplete` partial: resumable, retried, stoppable.

Why not `hf_hub_download` itself: in huggingface_hub 2.x it writes each attempt to a
process-unique temporary file and deletes that file when anything goes wrong, so a
download interrupted by a dropped network, a closed app or a sleeping laptop starts
again from byte 0 — for a 40 GB model that is the failure users remember. Its byte
progress comes only through a tqdm class and it cannot be paused or cancelled from
another thread except by raising out of that progress bar. So Rooflight does the one
GET itself, with everything else from huggingface_hub: the URL (`hf_hub_url`, honouring
HF_ENDPOINT), the token and user agent (`build_hf_headers`), the shared HTTP client with
the user's proxy and SSL setup (`get_session`), error mapping (`hf_raise_for_status`)
and the cache layout (cache.py). A retry or a later run asks for `Range: bytes=N-` where
N is what is on disk, so no byte is fetched twice.

Transient failures (connection errors and resets, timeouts, HTTP 408/429/5xx) are
retried with exponential backoff; the count restarts whenever bytes arrived, so a
flaky but working connection finishes and a dead one gives up after a few tries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .control import DownloadControl

log = logging.getLogger(__name__)

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6  # consecutive failed attempts (no new bytes) before giving up
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0

    def delay(self, failure: int) -> float:
        return min(self.max_delay_s, self.base_delay_s * 2 ** max(0, failure - 1))


DEFAULT_RETRY = RetryPolicy()


class TransferFailed(Exception):
    """Transient errors went on past the retry policy; `last` is the final one."""

    def __init__(self, attempts: int, last: BaseException) -> None:
        super().__init__(f"{attempts} attempts failed; last error: {describe_transient(last)}")
        self.attempts = attempts
        self.last = last


class _RestartClean(Exception):
    """The partial file is not a prefix the server can continue (416, wrong Content-Range)."""


def is_transient(exc: BaseException) -> bool:
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(exc, httpx2.TransportError):
        return not isinstance(exc, httpx2.UnsupportedProtocol | httpx2.LocalProtocolError)
    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        return exc.response.status_code in TRANSIENT_STATUS
    return False


def describe_transient(exc: BaseException) -> str:
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def fetch(
    url: str,
    partial: Path,
    size: int,
    *,
    headers: Mapping[str, str],
    control: DownloadControl,
    on_bytes: Callable[[int], None],
    retry: RetryPolicy = DEFAULT_RETRY,
    on_retry: Callable[[int, float, BaseException], None] | None = None,
    timeout: float | None = None,
) -> int:
    """Make `partial` hold the file's `size` bytes, continuing what is there. Returns bytes fetched.

    `on_bytes(n)` is called for every chunk written (negative if data had to be dropped).
    Raises DownloadStopped when the control is paused or cancelled (the partial stays),
    TransferFailed when transient errors outlast the policy, and huggingface_hub's
    HfHubHTTPError subclasses for answers that retrying cannot change (401, 404...).
    """
    fetched = 0
    failures = 0

    def count(n: int) -> None:
        nonlocal fetched
        if n > 0:
            fetched += n
        on_bytes(n)

    while True:
        control.check()
        have = _size(partial)
        if have > size:  # longer than the file: not a prefix of it
            partial.unlink()
            on_bytes(-have)
            have = 0
        if have == size:
            return fetched
        try:
            _get_once(url, partial, have, headers, control, count, timeout)
            if _size(partial) == size:
                return fetched
            # the body ended early without an error from the client: treat as a drop
            error: BaseException = ConnectionError("the server closed the connection early")
        except _RestartClean:
            n = _size(partial)
            partial.unlink(missing_ok=True)
            on_bytes(-n)
            error = ConnectionError("the server could not continue the partial file")
        except Exception as e:
            if not is_transient(e):
                raise
            error = e
        if _size(partial) > have:
            failures = 0  # bytes arrived: the connection works, keep going
        failures += 1
        if failures >= retry.attempts:
            raise TransferFailed(failures, error)
        delay = retry.delay(failures)
        log.info("download of %s interrupted (%s); retrying in %.1f s", url, describe_transient(error), delay)
        if on_retry is not None:
            on_retry(failures, delay, error)
        control.wait(delay)


def _get_once(
    url: str,
    partial: Path,
    have: int,
    headers: Mapping[str, str],
    control: DownloadControl,
    on_bytes: Callable[[int], None],
    timeout: float | None,
) -> None:
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session, hf_raise_for_status

    h = dict(headers)
    # identity: a compressed answer cannot be continued with Range (huggingface_hub#2393)
    h["Accept-Encoding"] = "identity"
    if have:
        h["Range"] = f"bytes={have}-"
    with get_session().stream(
        "GET",
        url,
        headers=h,
        follow_redirects=True,
        timeout=timeout if timeout is not None else constants.HF_HUB_DOWNLOAD_TIMEOUT,
    ) as r:
        if r.status_code == 416 and have:
            raise _RestartClean()
        hf_raise_for_status(r)
        mode = "ab"
        if have and r.status_code == 200:
            # the server ignored Range: it sends the whole file, so start the partial over
            mode = "wb"
            on_bytes(-have)
        elif have and r.status_code == 206:
            start = _content_range_start(r.headers.get("Content-Range"))
            if start != have:
                raise _RestartClean()
        with open(partial, mode) as fh:
            for chunk in r.iter_bytes():
                fh.write(chunk)
                on_bytes(len(chunk))
                control.check()


def _content_range_start(value: str | None) -> int | None:
    # "bytes 100-199/200"
    if not value or not value.startswith("bytes "):
        return None
    first = value[6:].split("-", 1)[0].strip()
    return int(first) if first.isdigit() else None
