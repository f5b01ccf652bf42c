"""Several downloads, N at a time, each pausable, resumable, cancellable and retryable.

Plain threads and callbacks, no Qt: the GUI's Downloads page passes `on_event` and turns
each DownloadEvent into a queued signal. Events come from worker threads (progress,
finished) and from the calling thread (added, paused while queued...), never while the
queue's lock is held, so a handler may call back into the queue.

Pause stops the transfer and keeps the partial file; resume starts the same download
again, which continues from the bytes on disk with an HTTP Range request. Cancel also
stops it and, when asked, deletes the partial data. Unfinished downloads are remembered
in the installed store, so `DownloadQueue(restore=True)` after a restart lists them as
paused, ready to resume.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from rooflight.errors import RooflightError
from rooflight.store.installed import InstalledStore

from .control import DownloadControl, DownloadStopped
from .hubfile import check_names, unit_filename
from .job import DownloadResult, discard_partial, download_model
from .progress import DOWNLOADING, Progress
from .transfer import DEFAULT_RETRY, RetryPolicy

log = logging.getLogger(__name__)


class JobState(StrEnum):
    QUEUED = "queued"  # waiting for a free slot
    RUNNING = "running"  # resolving, downloading or verifying (see progress.phase)
    PAUSED = "paused"  # stopped, partial data kept
    DONE = "done"  # installed and verified
    FAILED = "failed"  # error says why; retry() tries again
    CANCELLED = "cancelled"


ACTIVE = (JobState.QUEUED, JobState.RUNNING)


@dataclass(frozen=True)
class DownloadJob:
    """A snapshot of one download in the queue."""

    id: str
    repo_id: str
    filename: str
    revision: str
    state: JobState
    progress: Progress | None
    error: str | None  # one sentence when FAILED
    result: DownloadResult | None  # when DONE

    @property
    def active(self) -> bool:
        return self.state in ACTIVE


@dataclass(frozen=True)
class DownloadEvent:
    kind: str  # "added" | "state" | "progress" | "forgotten"
    job: DownloadJob


EventCallback = Callable[[DownloadEvent], None]


class _Job:
    def __init__(self, id: str, repo_id: str, filename: str, revision: str) -> None:
        self.id, self.repo_id, self.filename, self.revision = id, repo_id, filename, revision
        self.state = JobState.QUEUED
        self.progress: Progress | None = None
        self.error: str | None = None
        self.result: DownloadResult | None = None
        self.control = DownloadControl()
        self.thread: threading.Thread | None = None
        self.resume_after_stop = False  # resumed while its worker was still stopping

    def snapshot(self) -> DownloadJob:
        return DownloadJob(
            self.id, self.repo_id, self.filename, self.revision, self.state, self.progress,
            self.error, self.result,
        )


class DownloadQueue:
    def __init__(
        self,
        on_event: EventCallback | None = None,
        *,
        max_parallel: int = 1,
        token: str | bool | None = None,
        cache_dir: str | Path | None = None,
        store: InstalledStore | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        progress_interval: float = 0.25,
        restore: bool = False,
    ) -> None:
        if max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        self._on_event = on_event
        self._max_parallel = max_parallel
        self._token = token
        self._cache_dir = cache_dir
        self._own_store = store is None
        self.store = store or InstalledStore()
        self._retry = retry
        self._interval = progress_interval
        self._jobs: dict[str, _Job] = {}
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._closed = False
        if restore:
            for p in self.store.pending():
                job_id = self.add(p.repo_id, p.filename, p.revision, paused=True)
                with self._cond:
                    # what is on disk, so a restored row can show "1.2 GB of 4.1 GB" at once
                    self._jobs[job_id].progress = Progress(
                        DOWNLOADING, p.partial_bytes(), p.size_bytes, 0.0, None, p.filename,
                        1, len(p.blobs),
                    )

    # -- commands ---------------------------------------------------------------------

    def add(self, repo_id: str, filename: str, revision: str | None = None, *, paused: bool = False) -> str:
        """Queue a download; returns its id (the existing one if it is already listed unfinished)."""
        check_names(repo_id, filename)
        revision = revision or "main"
        key = (repo_id, unit_filename(filename), revision)
        with self._cond:
            self._check_open()
            for job in self._jobs.values():
                same = (job.repo_id, unit_filename(job.filename), job.revision) == key
                if same and job.state not in (JobState.DONE, JobState.CANCELLED):
                    return job.id
            job = _Job(str(next(self._ids)), repo_id, filename, revision)
            job.state = JobState.PAUSED if paused else JobState.QUEUED
            self._jobs[job.id] = job
            snap = job.snapshot()
        self._emit("added", snap)
        self._pump()
        return snap.id

    def pause(self, job_id: str) -> None:
        """Stop a queued or running download, keeping what was downloaded."""
        with self._cond:
            job = self._get(job_id)
            if job.state == JobState.RUNNING:
                job.control.pause()  # the worker reports PAUSED when it has stopped
                job.resume_after_stop = False
                return
            if job.state != JobState.QUEUED:
                return
            job.state = JobState.PAUSED
            snap = job.snapshot()
            self._cond.notify_all()
        self._emit("state", snap)

    def resume(self, job_id: str) -> None:
        """Queue a paused, failed or cancelled download again; it continues from the disk."""
        with self._cond:
            self._check_open()
            job = self._get(job_id)
            if job.thread is not None:
                # still winding down after a pause: queue it again once it has stopped
                if job.control.stopped and job.control.reason == "paused":
                    job.resume_after_stop = True
                return
            if job.state not in (JobState.PAUSED, JobState.FAILED, JobState.CANCELLED):
                return
            self._requeue(job)
            snap = job.snapshot()
        self._emit("state", snap)
        self._pump()

    retry = resume  # a failed download is retried the same way: fresh start, resume from disk

    def cancel(self, job_id: str, *, remove_partial: bool = False) -> None:
        """Stop a download for good; with remove_partial, delete its partial data too."""
        with self._cond:
            job = self._get(job_id)
            if job.state == JobState.DONE:
                return
            if job.thread is not None:
                job.control.cancel(remove_partial)  # the worker removes data under its locks
                job.resume_after_stop = False
                return
            job.state = JobState.CANCELLED
            job.error = None
            snap = job.snapshot()
            self._cond.notify_all()
        self._emit("state", snap)
        if remove_partial:
            threading.Thread(
                target=self._discard, args=(job.repo_id, job.filename, job.revision),
                name=f"discard-{job.id}", daemon=True,
            ).start()

    def forget(self, job_id: str) -> None:
        """Drop a finished, failed, cancelled or paused download from the list."""
        with self._cond:
            job = self._get(job_id)
            if job.state in ACTIVE or job.thread is not None:
                raise RuntimeError("pause or cancel a download before forgetting it")
            del self._jobs[job_id]
            snap = job.snapshot()
        self._emit("forgotten", snap)

    def set_max_parallel(self, n: int) -> None:
        if n < 1:
            raise ValueError("max_parallel must be at least 1")
        with self._cond:
            self._max_parallel = n
        self._pump()

    # -- queries ----------------------------------------------------------------------

    def jobs(self) -> list[DownloadJob]:
        with self._cond:
            return [j.snapshot() for j in self._jobs.values()]

    def job(self, job_id: str) -> DownloadJob:
        with self._cond:
            return self._get(job_id).snapshot()

    def wait(self, job_id: str, timeout: float | None = None) -> DownloadJob:
        """Block until a download is no longer queued or running (or the timeout passes)."""
        with self._cond:
            self._cond.wait_for(
                lambda: self._get(job_id).state not in ACTIVE and self._get(job_id).thread is None,
                timeout,
            )
            return self._get(job_id).snapshot()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or running; False if the timeout passed first."""
        with self._cond:
            return self._cond.wait_for(
                lambda: all(j.state not in ACTIVE and j.thread is None for j in self._jobs.values()),
                timeout,
            )

    def shutdown(self, timeout: float | None = 30.0) -> None:
        """Pause everything (partials stay for next time) and wait for the workers to stop."""
        with self._cond:
            self._closed = True
            threads = []
            for job in self._jobs.values():
                if job.state == JobState.QUEUED:
                    job.state = JobState.PAUSED
                if job.thread is not None:
                    job.control.pause()
                    threads.append(job.thread)
            self._cond.notify_all()
        for t in threads:
            t.join(timeout)
        if self._own_store:
            self.store.close()

    # -- internals --------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the download queue has been shut down")

    def _get(self, job_id: str) -> _Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise KeyError(f"no download with id {job_id!r}") from None

    def _requeue(self, job: _Job) -> None:
        job.state = JobState.QUEUED
        job.error = None
        job.control = DownloadControl()

    def _emit(self, kind: str, snap: DownloadJob) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(DownloadEvent(kind, snap))
        except Exception:  # a broken handler must not kill a download thread
            log.exception("download event handler failed")

    def _pump(self) -> None:
        """Start queued downloads while slots are free."""
        started = []
        with self._cond:
            if self._closed:
                return
            running = sum(1 for j in self._jobs.values() if j.thread is not None)
            for job in self._jobs.values():
                if running >= self._max_parallel:
                    break
                if job.state == JobState.QUEUED and job.thread is None:
                    job.state = JobState.RUNNING
                    job.progress = None
                    job.thread = threading.Thread(
                        target=self._work, args=(job,), name=f"download-{job.id}", daemon=True
                    )
                    running += 1
                    started.append(job)
            snaps = [(j.snapshot(), j.thread) for j in started]
        for snap, thread in snaps:
            self._emit("state", snap)  # RUNNING before the worker's first progress event
            if thread is not None:  # set with the job's start just above
                thread.start()

    def _work(self, job: _Job) -> None:
        state, error, result = JobState.FAILED, None, None
        try:
            result = download_model(
                job.repo_id, job.filename, job.revision,
                on_progress=lambda p: self._progress(job, p), control=job.control,
                token=self._token, cache_dir=self._cache_dir, store=self.store,
                retry=self._retry, progress_interval=self._interval,
            )
            state = JobState.DONE
        except DownloadStopped as stop:
            state = JobState.CANCELLED if stop.reason == "cancelled" else JobState.PAUSED
        except RooflightError as e:
            error = str(e)
        except Exception as e:
            log.exception("download %s failed", job.id)
            error = f"Downloading {job.filename} failed unexpectedly: {e}"
        with self._cond:
            job.state, job.error, job.result = state, error, result
            job.thread = None
            if job.resume_after_stop and state == JobState.PAUSED and not self._closed:
                self._requeue(job)
            job.resume_after_stop = False
            snap = job.snapshot()
            self._cond.notify_all()
        self._emit("state", snap)
        self._pump()

    def _progress(self, job: _Job, p: Progress) -> None:
        with self._cond:
            job.progress = p
            snap = job.snapshot()
        self._emit("progress", snap)

    def _discard(self, repo_id: str, filename: str, revision: str) -> None:
        try:
            discard_partial(repo_id, filename, revision, store=self.store)
        except Exception:
            log.exception("could not delete the partial data of %s/%s", repo_id, filename)
