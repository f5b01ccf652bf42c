"""One download, start to finish: resolve, check the disk, fetch, verify, place, record.

`download_model` is synchronous: the CLI calls it directly, the queue calls it on a
worker thread (the GUI never calls it on its own thread). Every part of a split model
is fetched, then every part is verified, and only then are they placed in the cache and
recorded as installed, so a model is either installed whole and verified or not at all.
On a checksum mismatch the bad data is deleted (a retry starts clean); on any other
failure, a pause or a cancel the partial data stays and the next call resumes it, unless
a cancel asked for it to be removed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rooflight.errors import OperationFailedError, RooflightError
from rooflight.gguf.projector import is_projector_name
from rooflight.store.installed import InstalledModel, InstalledPart, InstalledStore

from . import progress as P
from .cache import LOCK_POLL_S, RepoCache
from .control import DownloadControl, DownloadStopped
from .diskspace import check_free_space, format_bytes
from .hubfile import DownloadPlan, describe_hub_error, resolve, unit_filename
from .transfer import (
    DEFAULT_RETRY,
    RetryPolicy,
    TransferFailed,
    describe_transient,
    fetch,
    is_transient,
)
from .verify import VerificationError, hash_file, matches

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class DownloadResult:
    model: InstalledModel
    seconds: float  # wall time of the whole call
    download_seconds: float  # fetching bytes (0 when nothing was missing)
    verify_seconds: float  # hashing the finished files
    downloaded_bytes: int  # fetched by this call
    resumed_bytes: int  # already on disk when it started (partial or complete)
    already_installed: bool  # recorded and present at this commit: nothing was done
    verified: bool = True  # a result exists only for verified files

    def to_dict(self) -> dict:
        m = self.model
        return {
            "repo": m.repo_id,
            "file": m.filename,
            "revision": m.revision,
            "commit": m.commit,
            "sha256": m.sha256,
            "size_bytes": m.size_bytes,
            "path": m.path,
            "verified": self.verified,
            "seconds": round(self.seconds, 3),
            "download_seconds": round(self.download_seconds, 3),
            "verify_seconds": round(self.verify_seconds, 3),
            "downloaded_bytes": self.downloaded_bytes,
            "resumed_bytes": self.resumed_bytes,
            "already_installed": self.already_installed,
            "parts": [
                {"file": p.filename, "sha256": p.sha256, "size_bytes": p.size_bytes, "path": p.path}
                for p in m.parts
            ],
            "mmproj": next((p.path for p in m.parts if is_projector_name(p.filename)), None),
        }


def hub_headers(token: str | bool | None) -> dict[str, str]:
    from huggingface_hub.utils import build_hf_headers

    from rooflight import __version__

    try:
        return build_hf_headers(token=token, library_name="rooflight", library_version=__version__)
    except Exception as e:  # a malformed token file, an OIDC failure: say so, do not crash
        raise OperationFailedError(f"Cannot read the Hugging Face token: {e}") from None


def download_model(
    repo_id: str,
    filename: str,
    revision: str | None = None,
    *,
    on_progress: P.ProgressCallback | None = None,
    control: DownloadControl | None = None,
    token: str | bool | None = None,
    cache_dir: str | Path | None = None,
    store: InstalledStore | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
    progress_interval: float = 0.25,
    projector: str | None = "auto",
) -> DownloadResult:
    """Download, verify and record a GGUF file (all parts of a split one) into the HF cache.

    Raises RooflightError (one sentence) when it cannot, and DownloadStopped when
    `control` paused or cancelled it. `on_progress` is called on this thread.
    """
    revision = revision or "main"
    control = control or DownloadControl()
    meter = P.ProgressMeter(on_progress, interval=progress_interval)
    own_store = store is None
    store = store or InstalledStore()
    t0 = time.monotonic()
    try:
        meter.start(P.RESOLVING, file=filename)
        plan = _retrying(
            lambda: resolve(repo_id, filename, revision, token=token, projector=projector),
            retry, control, meter, repo_id, filename, revision, token,
        )
        cache = RepoCache(repo_id, cache_dir)
        done = _already_installed(store, plan)
        if done is not None:
            meter.start(P.DONE, done=plan.total_bytes, total=plan.total_bytes, file=plan.filename)
            return DownloadResult(done, time.monotonic() - t0, 0.0, 0.0, 0, plan.total_bytes, True)
        return _run(plan, cache, store, control, meter, retry, token, t0)
    finally:
        if own_store:
            store.close()


def _already_installed(store: InstalledStore, plan: DownloadPlan) -> InstalledModel | None:
    m = store.get(plan.repo_id, plan.filename)
    if m is None or m.commit != plan.commit or not m.present():
        return None
    want = {(p.filename, p.etag) for p in plan.parts}
    return m if {(p.filename, p.etag) for p in m.parts} == want else None


def _run(
    plan: DownloadPlan,
    cache: RepoCache,
    store: InstalledStore,
    control: DownloadControl,
    meter: P.ProgressMeter,
    retry: RetryPolicy,
    token: str | bool | None,
    t0: float,
) -> DownloadResult:
    meter.parts = len(plan.parts)
    complete = {p.etag for p in plan.parts if cache.has_blob(p.etag)}
    partial = {p.etag: cache.partial_size(p.etag) for p in plan.parts if p.etag not in complete}
    on_disk = sum(p.size for p in plan.parts if p.etag in complete) + sum(partial.values())
    remaining = sum(p.size - min(partial[p.etag], p.size) for p in plan.parts if p.etag in partial)
    name = plan.filename.rsplit("/", 1)[-1]
    what = f"{name} ({format_bytes(plan.total_bytes)})"
    check_free_space(cache.storage, remaining, kept_bytes=sum(partial.values()), what=what)
    store.set_pending(
        plan.repo_id, plan.filename, plan.revision, size_bytes=plan.total_bytes,
        blobs=tuple(p.etag for p in plan.parts), cache_dir=cache.cache_dir,
    )
    headers = hub_headers(token)
    try:
        cache.prepare()
    except OSError as e:  # a read-only or foreign-owned cache: nothing was written yet
        raise OperationFailedError(
            f"Cannot write to the Hugging Face cache at {cache.cache_dir} ({e.strerror or e}); "
            "make it writable or point HF_HUB_CACHE at a folder you can write to."
        ) from None
    held: list[str] = []
    finished = False
    try:
        with ExitStack() as locks:
            # huggingface_hub's per-blob locks, always taken in the same order
            for etag in sorted({p.etag for p in plan.parts}):
                locks.enter_context(
                    cache.locked(etag, control, on_wait=lambda: meter.set_note(
                        "waiting: another program is downloading the same file"))
                )
                held.append(etag)
            complete = {p.etag for p in plan.parts if cache.has_blob(p.etag)}  # under the locks now
            t_dl = time.monotonic()
            fetched = _fetch_all(plan, cache, complete, control, meter, retry, headers, token)
            download_s = time.monotonic() - t_dl if fetched else 0.0
            t_v = time.monotonic()
            digests = _verify_all(plan, cache, complete, control, meter)
            verify_s = time.monotonic() - t_v
            parts = []
            for part in plan.parts:
                if cache.has_blob(part.etag):  # was in the cache, or an identical part placed it
                    path = cache.link(part.etag, plan.commit, part.filename, plan.revision)
                else:
                    path = cache.place(part.etag, plan.commit, part.filename, plan.revision)
                parts.append(InstalledPart(part.filename, digests[part.etag], part.etag, part.size, str(path)))
            model = InstalledModel(
                plan.repo_id, plan.filename, plan.revision, plan.commit, parts[0].sha256,
                plan.total_bytes, parts[0].path, time.time(), tuple(parts),
            )
            store.add(model)
            finished = True
    except DownloadStopped as stop:
        if stop.remove_partial:
            for etag in held:  # only blobs whose lock is ours: others may be writing the rest
                cache.partial(etag).unlink(missing_ok=True)
        raise
    except OSError as e:  # reading back for the check, placing in the cache: a disk problem
        raise _explain(e, plan.repo_id, plan.filename, plan.revision, token) from None
    finally:
        if finished or not any(cache.partial_size(p.etag) for p in plan.parts):
            store.clear_pending(plan.repo_id, plan.filename, plan.revision)
    meter.start(P.DONE, done=plan.total_bytes, total=plan.total_bytes, file=plan.filename)
    return DownloadResult(
        model, time.monotonic() - t0, download_s, verify_s, fetched, on_disk, False
    )


def _fetch_all(
    plan: DownloadPlan,
    cache: RepoCache,
    complete: set[str],
    control: DownloadControl,
    meter: P.ProgressMeter,
    retry: RetryPolicy,
    headers: dict[str, str],
    token: str | bool | None,
) -> int:
    already = sum(p.size for p in plan.parts if p.etag in complete)
    already += sum(cache.partial_size(p.etag) for p in plan.parts if p.etag not in complete)
    meter.start(P.DOWNLOADING, done=already, total=plan.total_bytes, file=plan.parts[0].filename)
    fetched = 0
    for i, part in enumerate(plan.parts, 1):
        if part.etag in complete:
            continue
        meter.set_part(part.filename, i)

        def on_retry(n: int, delay: float, error: BaseException) -> None:
            meter.set_note(
                f"connection problem ({describe_transient(error)}); retrying in {delay:.0f} s "
                f"(attempt {n + 1} of {retry.attempts})"
            )

        try:
            fetched += fetch(
                part.url, cache.partial(part.etag), part.size, headers=headers, control=control,
                on_bytes=meter.advance, retry=retry, on_retry=on_retry,
            )
        except TransferFailed as e:
            kept = sum(cache.partial_size(p.etag) for p in plan.parts)
            raise OperationFailedError(
                f"Downloading {part.filename} from {plan.repo_id} failed after {e.attempts} "
                f"tries ({describe_transient(e.last)}); the {format_bytes(kept)} received are kept, "
                "so starting the download again resumes it."
            ) from None
        except (DownloadStopped, RooflightError):
            raise
        except Exception as e:
            raise _explain(e, plan.repo_id, part.filename, plan.revision, token) from None
    meter.emit(force=True)
    return fetched


def _verify_all(
    plan: DownloadPlan,
    cache: RepoCache,
    complete: set[str],
    control: DownloadControl,
    meter: P.ProgressMeter,
) -> dict[str, str]:
    """sha256 of every part; a part that does not match is deleted and reported."""
    meter.start(P.VERIFYING, done=0, total=plan.total_bytes, file=plan.parts[0].filename)
    digests: dict[str, str] = {}
    for i, part in enumerate(plan.parts, 1):
        meter.set_part(part.filename, i)
        in_cache = part.etag in complete
        path = cache.blob(part.etag) if in_cache else cache.partial(part.etag)
        d = hash_file(path, git_sha1=part.sha256 is None, on_bytes=meter.advance, control=control)
        if not matches(d, size=part.size, sha256=part.sha256, blob_id=part.blob_id):
            if in_cache:
                cache.unlink_blob(part.etag, plan.commit, part.filename)
            else:
                path.unlink(missing_ok=True)
            where = "already in the cache" if in_cache else "downloaded"
            raise VerificationError(
                f"The {where} {part.filename} does not match the checksum the Hub gives for it "
                f"({_short(d.sha256)} instead of {_short(part.sha256 or part.blob_id or '')}), so "
                "it was deleted; download it again to start clean."
            )
        digests[part.etag] = d.sha256
    meter.emit(force=True)
    return digests


def _short(h: str) -> str:
    return h[:12] + "…" if len(h) > 12 else h


def _explain(
    e: BaseException, repo_id: str, filename: str, revision: str, token: str | bool | None
) -> RooflightError:
    """A Hub answer, a network failure or a disk error as one sentence."""
    hub = describe_hub_error(e, repo_id, filename, revision, token=token)
    if hub is not None:
        return hub
    if is_transient(e):
        from huggingface_hub import constants

        return OperationFailedError(
            f"Cannot reach the Hub at {constants.ENDPOINT} ({describe_transient(e)}); check the "
            "network connection and try again."
        )
    if isinstance(e, OSError):
        what = e.strerror or str(e)
        return OperationFailedError(
            f"Cannot write the download of {filename} to disk ({what}); the data received so "
            "far is kept, so fix the problem and start the download again to resume it."
        )
    log.exception("unexpected download error")
    return OperationFailedError(f"Downloading {filename} from {repo_id} failed: {e}")


def _retrying(
    call: Callable[[], T],
    retry: RetryPolicy,
    control: DownloadControl,
    meter: P.ProgressMeter,
    repo_id: str,
    filename: str,
    revision: str,
    token: str | bool | None,
) -> T:
    """Run a Hub API call, retrying transient failures with the same backoff as transfers."""
    failures = 0
    while True:
        control.check()
        try:
            return call()
        except RooflightError:
            raise
        except Exception as e:
            if not is_transient(e):
                raise _explain(e, repo_id, filename, revision, token) from None
            failures += 1
            if failures >= retry.attempts:
                raise _explain(e, repo_id, filename, revision, token) from None
            delay = retry.delay(failures)
            meter.set_note(f"cannot reach the Hub ({describe_transient(e)}); retrying in {delay:.0f} s")
            control.wait(delay)


def discard_partial(
    repo_id: str,
    filename: str,
    revision: str | None = None,
    *,
    store: InstalledStore | None = None,
) -> int:
    """Delete the partial data of an unfinished download that is not running; bytes freed.

    The blob names come from the pending record, so this works offline. A partial whose
    lock another download holds right now is left alone.
    """
    own_store = store is None
    store = store or InstalledStore()
    try:
        pending = store.get_pending(repo_id, unit_filename(filename), revision or "main")
        if pending is None:
            return 0
        cache = RepoCache(repo_id, pending.cache_dir)
        freed = 0
        busy = False
        for etag in sorted(set(pending.blobs)):
            try:
                with cache.locked(etag, None, timeout=LOCK_POLL_S):
                    freed += cache.partial_size(etag)
                    cache.partial(etag).unlink(missing_ok=True)
            except TimeoutError:
                busy = True
        if not busy:
            store.clear_pending(repo_id, pending.filename, pending.revision)
        return freed
    finally:
        if own_store:
            store.close()
