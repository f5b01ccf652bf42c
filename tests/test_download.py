"""Downloads end to end: huggingface_hub's client over real HTTP against the local Hub
stand-in, into a real Hugging Face cache on disk. Only the disk's free space is faked
(at shutil.disk_usage) when a full disk is the point."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import namedtuple
from pathlib import Path

import pytest
from huggingface_hub import constants, hf_hub_download, scan_cache_dir, try_to_load_from_cache

from rooflight.download import (
    DownloadControl,
    DownloadStopped,
    RetryPolicy,
    discard_partial,
    download_model,
)
from rooflight.download import progress as P
from rooflight.download.cache import RepoCache
from rooflight.download.diskspace import DiskSpaceError
from rooflight.download.verify import VerificationError
from rooflight.errors import BadInputError, OperationFailedError
from rooflight.store.installed import InstalledStore

REPO = "acme/Tiny-GGUF"
FAST = RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=0.05)
MB = 1_000_000


def blob(n: int, seed: int = 0) -> bytes:
    """Deterministic incompressible bytes."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{counter}".encode()).digest() * 64
        counter += 1
    return bytes(out[:n])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def resolve_gets(hub, repo: str, filename: str) -> list:
    """The GET requests that fetched file bytes (not metadata)."""
    return [r for r in hub.requests if r.method == "GET" and "/resolve/" in r.path and r.path.endswith(f"/{filename}")]


def partials(repo: str = REPO) -> list[Path]:
    return sorted((RepoCache(repo).storage / "blobs").glob("*.incomplete"))


def stop_after(control: DownloadControl, n_bytes: int, *, remove: bool | None = None):
    """A progress callback that pauses (remove=None) or cancels once n_bytes are on disk."""

    def on_progress(p: P.Progress) -> None:
        if p.phase == P.DOWNLOADING and p.done_bytes >= n_bytes:
            if remove is None:
                control.pause()
            else:
                control.cancel(remove_partial=remove)

    return on_progress


# ---- happy path ----------------------------------------------------------------------------


def test_download_verifies_places_in_the_hf_cache_and_records(hub_server) -> None:
    data = blob(3 * MB)
    hub_server.add_file(REPO, "tiny-Q4_K_M.gguf", data)
    events: list[P.Progress] = []
    r = download_model(REPO, "tiny-Q4_K_M.gguf", on_progress=events.append, retry=FAST)

    m = r.model
    assert m.sha256 == sha(data) and m.size_bytes == len(data) and r.verified
    assert Path(m.path).read_bytes() == data
    # huggingface_hub's layout: its own lookup finds the file, a relative symlink to the blob
    assert try_to_load_from_cache(REPO, "tiny-Q4_K_M.gguf") == m.path
    assert os.readlink(m.path).startswith("../../blobs/")
    assert Path(m.path).resolve() == RepoCache(REPO).blob(sha(data))
    (cached,) = scan_cache_dir(constants.HF_HUB_CACHE).repos
    assert cached.repo_id == REPO and cached.size_on_disk == len(data)
    assert not partials()
    # recorded as installed, nothing pending
    with InstalledStore() as store:
        assert store.get(REPO, "tiny-Q4_K_M.gguf") == m
        assert [x.filename for x in store.list()] == ["tiny-Q4_K_M.gguf"]
        assert store.pending() == []
    assert hub_server.served(f"{REPO}/tiny-Q4_K_M.gguf") == len(data)
    assert r.downloaded_bytes == len(data) and r.resumed_bytes == 0

    # progress: resolving -> downloading (monotonic, to the total) -> verifying -> done
    phases = [e.phase for e in events]
    assert phases[0] == P.RESOLVING and phases[-1] == P.DONE
    order = [p for i, p in enumerate(phases) if i == 0 or p != phases[i - 1]]
    assert order == [P.RESOLVING, P.DOWNLOADING, P.VERIFYING, P.DONE]
    dl = [e for e in events if e.phase == P.DOWNLOADING]
    assert all(e.total_bytes == len(data) for e in dl)
    assert [e.done_bytes for e in dl] == sorted(e.done_bytes for e in dl)
    assert dl[-1].done_bytes == len(data)
    ver = [e for e in events if e.phase == P.VERIFYING]
    assert ver[-1].done_bytes == len(data)
    assert events[-1].fraction == 1.0


def test_a_second_download_of_an_installed_model_fetches_nothing(hub_server) -> None:
    data = blob(MB)
    hub_server.add_file(REPO, "m.gguf", data)
    first = download_model(REPO, "m.gguf", retry=FAST)
    hub_server.reset_counters()
    again = download_model(REPO, "m.gguf", retry=FAST)
    assert again.already_installed and again.model.path == first.model.path
    assert not resolve_gets(hub_server, REPO, "m.gguf")


def test_hf_hub_download_and_rooflight_share_the_cache(hub_server) -> None:
    a, b = blob(MB, 1), blob(MB, 2)
    hub_server.add_file(REPO, "a.gguf", a)
    hub_server.add_file(REPO, "b.gguf", b)
    # fetched by another tool first: Rooflight verifies the blob, fetches nothing
    theirs = hf_hub_download(REPO, "a.gguf")
    hub_server.reset_counters()
    r = download_model(REPO, "a.gguf", retry=FAST)
    assert r.model.path == theirs and r.model.sha256 == sha(a)
    assert not resolve_gets(hub_server, REPO, "a.gguf")
    # fetched by Rooflight first: huggingface_hub finds it without downloading
    mine = download_model(REPO, "b.gguf", retry=FAST).model.path
    hub_server.reset_counters()
    assert hf_hub_download(REPO, "b.gguf") == mine
    assert hub_server.served(f"{REPO}/b.gguf") == 0


def test_small_non_lfs_file_is_checked_against_its_git_blob_id(hub_server) -> None:
    hub_server.add_file(REPO, "README.md", b"# Tiny\n")
    r = download_model(REPO, "README.md", retry=FAST)
    assert Path(r.model.path).read_bytes() == b"# Tiny\n"
    assert r.model.sha256 == sha(b"# Tiny\n")


def test_lfs_redirect_to_a_cdn_is_followed(hub_server) -> None:
    data = blob(MB)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.redirect_lfs = True
    r = download_model(REPO, "m.gguf", retry=FAST)
    assert Path(r.model.path).read_bytes() == data
    assert any(q.path.startswith("/_cdn/") for q in hub_server.requests)


# ---- resume ------------------------------------------------------------------------------


def test_dropped_connection_resumes_without_fetching_bytes_twice(hub_server) -> None:
    data = blob(4 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.drop_after(f"{REPO}/m.gguf", 1_500_000, times=2)
    notes: list[str] = []
    r = download_model(REPO, "m.gguf", retry=FAST, on_progress=lambda p: p.note and notes.append(p.note))
    assert Path(r.model.path).read_bytes() == data
    gets = resolve_gets(hub_server, REPO, "m.gguf")
    assert [g.range for g in gets] == [None, "bytes=1500000-", "bytes=3000000-"]
    assert hub_server.served(f"{REPO}/m.gguf") == len(data)  # not one byte twice
    assert any("retrying" in n for n in notes)


def test_paused_download_resumes_from_the_partial_file(hub_server) -> None:
    data = blob(4 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    control = DownloadControl()
    with pytest.raises(DownloadStopped) as stop:
        download_model(REPO, "m.gguf", control=control, retry=FAST, progress_interval=0,
                       on_progress=stop_after(control, MB))
    assert stop.value.reason == "paused"
    (part,) = partials()
    kept = part.stat().st_size
    assert MB <= kept < len(data)
    assert part.name == f"{sha(data)}.incomplete"  # the name scan_cache_dir reports as partial
    with InstalledStore() as store:
        assert store.get(REPO, "m.gguf") is None  # never presented as installed
        (pending,) = store.pending()
        assert pending.partial_bytes() == kept

    hub_server.reset_counters()
    r = download_model(REPO, "m.gguf", retry=FAST)  # as after a restart: fresh call, fresh store
    assert Path(r.model.path).read_bytes() == data
    assert [g.range for g in resolve_gets(hub_server, REPO, "m.gguf")] == [f"bytes={kept}-"]
    # the resumed request carried exactly the missing bytes (counted per request: the
    # stopped request's server thread may still be flushing its last chunk)
    assert [g.body_bytes for g in resolve_gets(hub_server, REPO, "m.gguf")] == [len(data) - kept]
    assert r.resumed_bytes == kept and r.downloaded_bytes == len(data) - kept
    with InstalledStore() as store:
        assert store.pending() == []


def test_cancel_keeps_or_removes_the_partial_as_asked(hub_server) -> None:
    data = blob(3 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    control = DownloadControl()
    with pytest.raises(DownloadStopped) as stop:
        download_model(REPO, "m.gguf", control=control, retry=FAST, progress_interval=0,
                       on_progress=stop_after(control, MB, remove=False))
    assert stop.value.reason == "cancelled"
    assert partials() and partials()[0].stat().st_size >= MB

    control = DownloadControl()
    with pytest.raises(DownloadStopped):
        download_model(REPO, "m.gguf", control=control, retry=FAST, progress_interval=0,
                       on_progress=stop_after(control, 2 * MB, remove=True))
    assert partials() == []
    with InstalledStore() as store:
        assert store.pending() == [] and store.get(REPO, "m.gguf") is None
    # a new start begins at byte 0
    hub_server.reset_counters()
    download_model(REPO, "m.gguf", retry=FAST)
    assert [g.range for g in resolve_gets(hub_server, REPO, "m.gguf")] == [None]


def test_discard_partial_of_a_stopped_download(hub_server) -> None:
    hub_server.add_file(REPO, "m.gguf", blob(2 * MB))
    control = DownloadControl()
    with pytest.raises(DownloadStopped):
        download_model(REPO, "m.gguf", control=control, retry=FAST, progress_interval=0,
                       on_progress=stop_after(control, MB))
    kept = partials()[0].stat().st_size
    hub_server.stop()  # works offline: the blob names were remembered
    assert discard_partial(REPO, "m.gguf") == kept
    assert partials() == []
    with InstalledStore() as store:
        assert store.pending() == []


def test_transient_server_errors_are_retried(hub_server) -> None:
    data = blob(MB)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.fail_next(f"{REPO}/m.gguf", 503, times=2)
    r = download_model(REPO, "m.gguf", retry=FAST)
    assert Path(r.model.path).read_bytes() == data
    assert [g.status for g in resolve_gets(hub_server, REPO, "m.gguf")] == [503, 503, 200]


def test_persistent_failure_gives_up_and_keeps_the_partial(hub_server) -> None:
    data = blob(2 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.drop_after(f"{REPO}/m.gguf", 500_000, times=1)
    hub_server.fail_next(f"{REPO}/m.gguf", 502, times=0)
    control = DownloadControl()

    # after the drop, every retry is answered 502 until the policy gives up
    def after_first_drop(p: P.Progress) -> None:
        if p.note and "retrying" in p.note:
            hub_server.fail_next(f"{REPO}/m.gguf", 502, times=100)

    with pytest.raises(OperationFailedError) as err:
        download_model(REPO, "m.gguf", control=control, retry=FAST, on_progress=after_first_drop)
    msg = str(err.value)
    assert "failed after 4 tries" in msg and "HTTP 502" in msg and "resumes" in msg
    assert "\n" not in msg
    assert partials()[0].stat().st_size == 500_000
    hub_server.fail_next(f"{REPO}/m.gguf", 502, times=0)
    r = download_model(REPO, "m.gguf", retry=FAST)
    assert r.resumed_bytes == 500_000


# ---- verification ----------------------------------------------------------------------------


def test_corrupted_body_is_deleted_never_installed_and_a_retry_starts_clean(hub_server) -> None:
    data = blob(2 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.corrupt(f"{REPO}/m.gguf")
    with pytest.raises(VerificationError) as err:
        download_model(REPO, "m.gguf", retry=FAST)
    msg = str(err.value)
    assert "does not match the checksum" in msg and "deleted" in msg and "\n" not in msg
    cache = RepoCache(REPO)
    assert partials() == [] and not cache.has_blob(sha(data))
    assert try_to_load_from_cache(REPO, "m.gguf") is None
    with InstalledStore() as store:
        assert store.list(include_missing=True) == [] and store.pending() == []

    hub_server.reset_counters()
    r = download_model(REPO, "m.gguf", retry=FAST)
    assert Path(r.model.path).read_bytes() == data
    assert [g.range for g in resolve_gets(hub_server, REPO, "m.gguf")] == [None]
    assert hub_server.served(f"{REPO}/m.gguf") == len(data)


def test_a_damaged_blob_already_in_the_cache_is_not_trusted(hub_server) -> None:
    data = blob(MB)
    hub_server.add_file(REPO, "m.gguf", data)
    path = Path(hf_hub_download(REPO, "m.gguf"))
    blob_path = path.resolve()
    blob_path.write_bytes(b"x" * len(data))  # bit rot, a bad copy...
    with pytest.raises(VerificationError, match="already in the cache"):
        download_model(REPO, "m.gguf", retry=FAST)
    assert not blob_path.exists() and not path.is_symlink()
    r = download_model(REPO, "m.gguf", retry=FAST)
    assert Path(r.model.path).read_bytes() == data


# ---- clear errors ----------------------------------------------------------------------------


def test_missing_repo_file_and_revision_name_what_is_missing(hub_server) -> None:
    hub_server.add_file(REPO, "tiny-Q4_K_M.gguf", blob(1000))
    with pytest.raises(BadInputError) as e:
        download_model("acme/nope", "x.gguf", retry=FAST)
    assert "acme/nope does not exist" in str(e.value)
    with pytest.raises(BadInputError) as e:
        download_model(REPO, "tiny-Q8_0.gguf", retry=FAST)
    assert f"{REPO} has no file tiny-Q8_0.gguf at revision main" in str(e.value)
    assert "tiny-Q4_K_M.gguf" in str(e.value)  # says what there is
    with pytest.raises(BadInputError, match="has no revision v9"):
        download_model(REPO, "tiny-Q4_K_M.gguf", "v9", retry=FAST)
    with pytest.raises(BadInputError, match="not a Hub repository name"):
        download_model("no-slash", "x.gguf")
    with pytest.raises(BadInputError, match="not a file path"):
        download_model(REPO, "../escape.gguf")
    assert not (Path(constants.HF_HUB_CACHE) / "models--acme--nope").exists()


def test_gated_repo_says_accept_the_licence_and_give_a_token(hub_server) -> None:
    hub_server.add_file(REPO, "m.gguf", blob(1000))
    hub_server.require_token(REPO, "hf_right")
    with pytest.raises(OperationFailedError) as e:
        download_model(REPO, "m.gguf", retry=FAST, token=False)
    msg = str(e.value)
    assert f"{REPO} is gated" in msg and "licence" in msg and f"{hub_server.url}/{REPO}" in msg
    assert "HF_TOKEN" in msg and "hf auth login" in msg and "\n" not in msg
    with pytest.raises(OperationFailedError, match="token given has no access"):
        download_model(REPO, "m.gguf", retry=FAST, token="hf_wrong")
    r = download_model(REPO, "m.gguf", retry=FAST, token="hf_right")
    assert r.model.size_bytes == 1000
    assert partials() == []


def test_private_repo_without_token_reads_as_missing_or_private(hub_server) -> None:
    hub_server.add_file(REPO, "m.gguf", blob(1000))
    hub_server.require_token(REPO, private=True)
    with pytest.raises(BadInputError, match="does not exist on the Hub, or it is private"):
        download_model(REPO, "m.gguf", retry=FAST, token=False)


def test_unreachable_hub_is_one_sentence(hub_server, monkeypatch) -> None:
    hub_server.stop()
    with pytest.raises(OperationFailedError) as e:
        download_model(REPO, "m.gguf", retry=FAST)
    assert "Cannot reach the Hub" in str(e.value) and "\n" not in str(e.value)


# ---- disk space ------------------------------------------------------------------------------

Usage = namedtuple("Usage", "total used free")


def test_full_disk_is_refused_before_any_byte_is_written(hub_server, monkeypatch) -> None:
    data = blob(3 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    # first a partial download, then the disk fills up
    control = DownloadControl()
    with pytest.raises(DownloadStopped):
        download_model(REPO, "m.gguf", control=control, retry=FAST, progress_interval=0,
                       on_progress=stop_after(control, MB))
    (part,) = partials()
    kept = part.read_bytes()
    hub_server.reset_counters()
    asked: list[Path] = []

    def full(path):
        asked.append(Path(path))
        return Usage(10**12, 10**12 - 100 * MB, 100 * MB)  # 100 MB free < 2 MB + margin

    monkeypatch.setattr(shutil, "disk_usage", full)
    with pytest.raises(DiskSpaceError) as e:
        download_model(REPO, "m.gguf", retry=FAST)
    msg = str(e.value)
    assert "Not enough disk space" in msg and "kept" in msg and "\n" not in msg
    assert asked and asked[0].is_relative_to(constants.HF_HUB_CACHE)  # the cache's own disk
    assert resolve_gets(hub_server, REPO, "m.gguf") == []  # nothing was fetched
    assert part.read_bytes() == kept  # the partial is untouched, still resumable

    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**12, 0, 10**12))
    r = download_model(REPO, "m.gguf", retry=FAST)
    assert r.resumed_bytes == len(kept)


def test_full_disk_for_a_new_download_creates_nothing(hub_server, monkeypatch) -> None:
    hub_server.add_file(REPO, "m.gguf", blob(MB))
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**12, 10**12, 10 * MB))
    with pytest.raises(DiskSpaceError):
        download_model(REPO, "m.gguf", retry=FAST)
    assert not RepoCache(REPO).storage.exists()
    with InstalledStore() as store:
        assert store.pending() == []


# ---- split models ------------------------------------------------------------------------------


def split_names(n: int) -> list[str]:
    return [f"Q4_K_M/big-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]


def test_split_model_downloads_as_one_unit(hub_server) -> None:
    names = split_names(3)
    datas = [blob(MB + i * 1000, seed=i) for i in range(3)]
    for name, data in zip(names, datas, strict=True):
        hub_server.add_file(REPO, name, data)
    hub_server.drop_after(f"{REPO}/{names[1]}", 300_000)
    events: list[P.Progress] = []
    # any part names the whole model
    r = download_model(REPO, names[1], retry=FAST, on_progress=events.append, progress_interval=0)
    m = r.model
    assert m.filename == names[0] and len(m.parts) == 3
    assert m.size_bytes == sum(map(len, datas))
    for part, data in zip(m.parts, datas, strict=True):
        assert Path(part.path).read_bytes() == data and part.sha256 == sha(data)
        assert try_to_load_from_cache(REPO, part.filename) == part.path
    assert Path(m.path).parent == Path(m.parts[1].path).parent
    # one progress for the unit, through every part
    dl = [e for e in events if e.phase == P.DOWNLOADING]
    assert {e.total_bytes for e in dl} == {m.size_bytes}
    assert {e.part for e in dl} == {1, 2, 3} and {e.parts for e in dl} == {3}
    assert max(e.done_bytes for e in dl) == m.size_bytes
    assert hub_server.served(f"{REPO}/{names[1]}") == len(datas[1])


def test_split_model_with_a_missing_part_is_refused_up_front(hub_server) -> None:
    names = split_names(3)
    for i, name in enumerate(names[:2]):
        hub_server.add_file(REPO, name, blob(1000, i))
    with pytest.raises(OperationFailedError, match="missing .*big-00003-of-00003.gguf.*split into 3 parts"):
        download_model(REPO, names[0], retry=FAST)
    assert hub_server.served(f"{REPO}/{names[0]}") == 0


def test_split_model_with_one_bad_part_installs_nothing(hub_server) -> None:
    names = split_names(2)
    for i, name in enumerate(names):
        hub_server.add_file(REPO, name, blob(MB, i))
    hub_server.corrupt(f"{REPO}/{names[1]}")
    with pytest.raises(VerificationError, match="big-00002-of-00002.gguf"):
        download_model(REPO, names[0], retry=FAST)
    assert try_to_load_from_cache(REPO, names[0]) is None  # the good part is not linked either
    with InstalledStore() as store:
        assert store.list(include_missing=True) == []
    hub_server.reset_counters()
    r = download_model(REPO, names[0], retry=FAST)
    assert len(r.model.parts) == 2
    # the good part was kept (verified again, not fetched again); the bad one fetched clean
    assert hub_server.served(f"{REPO}/{names[0]}") == 0
    assert hub_server.served(f"{REPO}/{names[1]}") == MB


# ---- another program holds the lock -------------------------------------------------------------


def test_waits_for_another_download_of_the_same_blob_and_can_be_cancelled_meanwhile(hub_server) -> None:
    from huggingface_hub.utils import WeakFileLock

    data = blob(MB)
    hub_server.add_file(REPO, "m.gguf", data)
    control = DownloadControl()
    notes: list[str] = []

    def on_progress(p: P.Progress) -> None:
        if p.note:
            notes.append(p.note)
            control.cancel()

    with WeakFileLock(RepoCache(REPO).lock_path(sha(data))):
        with pytest.raises(DownloadStopped):
            download_model(REPO, "m.gguf", control=control, on_progress=on_progress, retry=FAST)
    assert notes and "another program" in notes[0]
    assert resolve_gets(hub_server, REPO, "m.gguf") == []


def test_a_write_error_mid_download_keeps_the_partial_and_says_so(hub_server) -> None:
    """A real write failure from the OS (a file-size limit: EFBIG), not a simulated one."""
    resource = pytest.importorskip("resource")  # POSIX
    import signal

    data = blob(3 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write, not the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (MB, old_limit[1]))
    try:
        with pytest.raises(OperationFailedError) as e:
            download_model(REPO, "m.gguf", retry=FAST)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    msg = str(e.value)
    assert "Cannot write the download of m.gguf" in msg and "kept" in msg and "\n" not in msg
    kept = partials()[0].stat().st_size
    assert 0 < kept <= MB
    r = download_model(REPO, "m.gguf", retry=FAST)
    assert r.resumed_bytes == kept and Path(r.model.path).read_bytes() == data
