"""The download queue: several downloads at once, pause/resume/cancel/retry, events, restart."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rooflight.download import DownloadQueue, JobState, RetryPolicy
from rooflight.download import progress as P
from rooflight.store.installed import InstalledStore
from test_download import REPO, blob, partials, resolve_gets, sha

FAST = RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=0.05)
MB = 1_000_000
TIMEOUT = 30


class Recorder:
    """Collects events; tracks how many downloads were running at once."""

    def __init__(self) -> None:
        self.events = []
        self.running: set[str] = set()
        self.max_running = 0
        self.lock = threading.Lock()

    def __call__(self, ev) -> None:
        with self.lock:
            self.events.append(ev)
            if ev.job.state == JobState.RUNNING:
                self.running.add(ev.job.id)
            else:
                self.running.discard(ev.job.id)
            self.max_running = max(self.max_running, len(self.running))

    def states(self, job_id: str) -> list[JobState]:
        out = []
        for ev in self.events:
            if ev.job.id == job_id and ev.kind in ("added", "state") and (not out or out[-1] != ev.job.state):
                out.append(ev.job.state)
        return out


def wait_for(cond, timeout: float = TIMEOUT) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.01)


@pytest.fixture
def queue_factory():
    queues = []

    def make(**kw):
        kw.setdefault("retry", FAST)
        q = DownloadQueue(**kw)
        queues.append(q)
        return q

    yield make
    for q in queues:
        q.shutdown(timeout=10)


def test_concurrent_downloads_of_different_files(hub_server, queue_factory) -> None:
    files = {f"m{i}.gguf": blob(2 * MB, seed=i) for i in range(3)}
    for name, data in files.items():
        hub_server.add_file(REPO, name, data)
        hub_server.throttle(f"{REPO}/{name}", 8 * MB)  # ~0.25 s each: long enough to overlap
    rec = Recorder()
    q = queue_factory(on_event=rec, max_parallel=2)
    ids = {name: q.add(REPO, name) for name in files}
    assert q.wait_idle(TIMEOUT)
    assert rec.max_running == 2  # two at a time, never three
    for name, job_id in ids.items():
        job = q.job(job_id)
        assert job.state == JobState.DONE and job.error is None
        assert Path(job.result.model.path).read_bytes() == files[name]
        assert rec.states(job_id) == [JobState.QUEUED, JobState.RUNNING, JobState.DONE]
    progress = [e for e in rec.events if e.kind == "progress"]
    assert {e.job.id for e in progress} == set(ids.values())
    assert all(isinstance(e.job.progress, P.Progress) for e in progress)
    with InstalledStore() as store:
        assert {m.filename for m in store.list()} == set(files)


def test_one_at_a_time_by_default(hub_server, queue_factory) -> None:
    for i in range(2):
        hub_server.add_file(REPO, f"m{i}.gguf", blob(MB, seed=i))
        hub_server.throttle(f"{REPO}/m{i}.gguf", 8 * MB)
    rec = Recorder()
    q = queue_factory(on_event=rec)
    a, b = q.add(REPO, "m0.gguf"), q.add(REPO, "m1.gguf")
    assert q.wait_idle(TIMEOUT)
    assert rec.max_running == 1
    assert q.job(a).state == q.job(b).state == JobState.DONE


def test_pause_and_resume_continue_from_disk(hub_server, queue_factory) -> None:
    data = blob(3 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.throttle(f"{REPO}/m.gguf", 4 * MB)
    rec = Recorder()
    q = queue_factory(on_event=rec, progress_interval=0.02)
    job_id = q.add(REPO, "m.gguf")
    wait_for(lambda: (q.job(job_id).progress or P.Progress("", 0, 0, 0, None, "", 1, 1)).done_bytes > MB // 2)
    q.pause(job_id)
    job = q.wait(job_id, TIMEOUT)
    assert job.state == JobState.PAUSED
    (part,) = partials()
    kept = part.stat().st_size
    assert 0 < kept < len(data)

    hub_server.throttle(f"{REPO}/m.gguf", None)
    hub_server.reset_counters()
    q.resume(job_id)
    job = q.wait(job_id, TIMEOUT)
    assert job.state == JobState.DONE and job.result.resumed_bytes == kept
    assert [g.range for g in resolve_gets(hub_server, REPO, "m.gguf")] == [f"bytes={kept}-"]
    # the resumed request carried exactly the missing bytes (counted per request: the
    # stopped request's server thread may still be flushing its last chunk)
    assert [g.body_bytes for g in resolve_gets(hub_server, REPO, "m.gguf")] == [len(data) - kept]
    assert rec.states(job_id) == [
        JobState.QUEUED, JobState.RUNNING, JobState.PAUSED, JobState.QUEUED, JobState.RUNNING, JobState.DONE
    ]


def test_resume_while_still_stopping_requeues_once_stopped(hub_server, queue_factory) -> None:
    data = blob(2 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.throttle(f"{REPO}/m.gguf", 4 * MB)
    q = queue_factory(progress_interval=0.02)
    job_id = q.add(REPO, "m.gguf")
    wait_for(lambda: q.job(job_id).progress is not None and q.job(job_id).progress.done_bytes > 0)
    q.pause(job_id)
    q.resume(job_id)  # the worker may not have stopped yet
    hub_server.throttle(f"{REPO}/m.gguf", None)
    wait_for(lambda: q.job(job_id).state == JobState.DONE)
    assert Path(q.job(job_id).result.model.path).read_bytes() == data


@pytest.mark.parametrize("remove", [False, True])
def test_cancel_a_running_download(hub_server, queue_factory, remove) -> None:
    hub_server.add_file(REPO, "m.gguf", blob(3 * MB))
    hub_server.throttle(f"{REPO}/m.gguf", 4 * MB)
    q = queue_factory(progress_interval=0.02)
    job_id = q.add(REPO, "m.gguf")
    wait_for(lambda: q.job(job_id).progress is not None and q.job(job_id).progress.done_bytes > 0)
    q.cancel(job_id, remove_partial=remove)
    assert q.wait(job_id, TIMEOUT).state == JobState.CANCELLED
    assert bool(partials()) is not remove
    with InstalledStore() as store:
        assert store.get(REPO, "m.gguf") is None
        assert bool(store.pending()) is not remove
    # retry after a cancel: starts again (from the kept bytes, or from zero)
    hub_server.throttle(f"{REPO}/m.gguf", None)
    q.retry(job_id)
    job = q.wait(job_id, TIMEOUT)
    assert job.state == JobState.DONE and (job.result.resumed_bytes == 0) is remove


def test_cancel_a_paused_download_and_remove_its_partial(hub_server, queue_factory) -> None:
    hub_server.add_file(REPO, "m.gguf", blob(2 * MB))
    hub_server.throttle(f"{REPO}/m.gguf", 4 * MB)
    q = queue_factory(progress_interval=0.02)
    job_id = q.add(REPO, "m.gguf")
    wait_for(lambda: q.job(job_id).progress is not None and q.job(job_id).progress.done_bytes > 0)
    q.pause(job_id)
    assert q.wait(job_id, TIMEOUT).state == JobState.PAUSED
    assert partials()
    q.cancel(job_id, remove_partial=True)
    assert q.job(job_id).state == JobState.CANCELLED
    wait_for(lambda: not partials())
    with InstalledStore() as store:
        wait_for(lambda: store.pending() == [])


def test_failed_download_reports_a_sentence_and_can_be_retried(hub_server, queue_factory) -> None:
    data = blob(MB)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.corrupt(f"{REPO}/m.gguf")
    q = queue_factory()
    job_id = q.add(REPO, "m.gguf")
    job = q.wait(job_id, TIMEOUT)
    assert job.state == JobState.FAILED and "does not match the checksum" in job.error
    assert job.result is None
    q.retry(job_id)
    job = q.wait(job_id, TIMEOUT)
    assert job.state == JobState.DONE and job.result.model.sha256 == sha(data)


def test_adding_the_same_download_twice_gives_the_same_job(hub_server, queue_factory) -> None:
    hub_server.add_file(REPO, "m.gguf", blob(1000))
    q = queue_factory()
    a = q.add(REPO, "m.gguf", paused=True)
    assert q.add(REPO, "m.gguf") == a and len(q.jobs()) == 1
    assert q.job(a).state == JobState.PAUSED
    q.forget(a)
    assert q.jobs() == []


def test_unfinished_downloads_come_back_paused_after_a_restart(hub_server, queue_factory) -> None:
    data = blob(3 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.throttle(f"{REPO}/m.gguf", 4 * MB)
    q = queue_factory(progress_interval=0.02)
    job_id = q.add(REPO, "m.gguf")
    wait_for(lambda: q.job(job_id).progress is not None and q.job(job_id).progress.done_bytes > 0)
    q.shutdown(timeout=TIMEOUT)  # the app closes
    assert q.job(job_id).state == JobState.PAUSED
    kept = partials()[0].stat().st_size

    hub_server.throttle(f"{REPO}/m.gguf", None)
    hub_server.reset_counters()
    q2 = queue_factory(restore=True)  # the app starts again
    (job,) = q2.jobs()
    assert (job.repo_id, job.filename, job.state) == (REPO, "m.gguf", JobState.PAUSED)
    assert (job.progress.done_bytes, job.progress.total_bytes) == (kept, len(data))
    q2.resume(job.id)
    job = q2.wait(job.id, TIMEOUT)
    assert job.state == JobState.DONE and job.result.resumed_bytes == kept
    # the resumed request carried exactly the missing bytes (counted per request: the
    # stopped request's server thread may still be flushing its last chunk)
    assert [g.body_bytes for g in resolve_gets(hub_server, REPO, "m.gguf")] == [len(data) - kept]


def test_a_handler_that_calls_back_into_the_queue_does_not_deadlock(hub_server, queue_factory) -> None:
    hub_server.add_file(REPO, "m.gguf", blob(MB))
    seen = []
    q = None

    def handler(ev) -> None:
        seen.append(len(q.jobs()))  # re-entrant use from the worker thread

    q = queue_factory(on_event=handler)
    job_id = q.add(REPO, "m.gguf")
    assert q.wait(job_id, TIMEOUT).state == JobState.DONE
    assert seen and all(n == 1 for n in seen)
