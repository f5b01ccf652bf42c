"""Small pieces of the downloader: progress throttling, speed and ETA; retry backoff and
what counts as transient; the disk-space rule; checksums; control; split names."""

from __future__ import annotations

import hashlib
import shutil
from collections import namedtuple

import httpx2
import pytest

from rooflight.download import DownloadControl, DownloadStopped, RetryPolicy
from rooflight.download import progress as P
from rooflight.download.diskspace import (
    MARGIN_MIN_BYTES,
    DiskSpaceError,
    check_free_space,
    format_bytes,
)
from rooflight.download.hubfile import unit_filename
from rooflight.download.transfer import is_transient
from rooflight.download.verify import hash_file, matches


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_progress_is_throttled_to_about_four_events_a_second() -> None:
    clock, events = Clock(), []
    meter = P.ProgressMeter(events.append, clock=clock)
    meter.start(P.DOWNLOADING, done=0, total=10_000_000)
    for _ in range(2000):  # 2000 chunks over 2 s
        clock.t += 0.001
        meter.advance(5000)
    meter.emit(force=True)
    # one at the start, ~4 per second, the forced final one
    assert 8 <= len(events) <= 11
    assert events[-1].done_bytes == 10_000_000
    done = [e.done_bytes for e in events]
    assert done == sorted(done)


def test_speed_and_eta_follow_the_recent_rate_not_the_resumed_bytes() -> None:
    clock, events = Clock(), []
    meter = P.ProgressMeter(events.append, clock=clock)
    meter.start(P.DOWNLOADING, done=600_000_000, total=1_000_000_000)  # resumed at 60 %
    for _ in range(100):  # 10 MB/s for 10 s
        clock.t += 0.1
        meter.advance(1_000_000)
    p = meter.snapshot()
    assert p.speed_bps == pytest.approx(10e6, rel=0.01)
    assert p.eta_s == pytest.approx(300_000_000 / 10e6, rel=0.01)
    for _ in range(50):  # the network slows to 2 MB/s: within the window the speed follows
        clock.t += 0.1
        meter.advance(200_000)
    assert meter.snapshot().speed_bps == pytest.approx(2e6, rel=0.1)
    assert meter.snapshot().to_dict()["phase"] == P.DOWNLOADING


def test_progress_without_a_callback_keeps_a_bounded_window() -> None:
    clock = Clock()
    meter = P.ProgressMeter(None, clock=clock)
    meter.start(P.DOWNLOADING, total=10**12)
    for _ in range(100_000):
        clock.t += 0.3
        meter.advance(1)
    assert len(meter._samples) <= 20


def test_notes_are_reported_at_once_and_cleared_when_bytes_flow() -> None:
    clock, events = Clock(), []
    meter = P.ProgressMeter(events.append, clock=clock)
    meter.start(P.DOWNLOADING, total=100)
    meter.set_note("retrying in 2 s")
    assert events[-1].note == "retrying in 2 s"
    clock.t += 1
    meter.advance(10)
    assert events[-1].note == ""


def test_retry_backoff_doubles_up_to_the_cap() -> None:
    r = RetryPolicy(attempts=6, base_delay_s=1.0, max_delay_s=5.0)
    assert [r.delay(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_transient_errors() -> None:
    from huggingface_hub.errors import HfHubHTTPError

    def http(status: int) -> HfHubHTTPError:
        req = httpx2.Request("GET", "http://x/")
        return HfHubHTTPError("x", response=httpx2.Response(status, request=req))

    assert is_transient(httpx2.ReadTimeout("slow"))
    assert is_transient(httpx2.RemoteProtocolError("peer closed"))
    assert is_transient(httpx2.ConnectError("refused"))
    assert all(is_transient(http(s)) for s in (408, 429, 500, 502, 503, 504))
    assert not any(is_transient(http(s)) for s in (401, 403, 404, 416))
    assert not is_transient(OSError(28, "No space left on device"))
    assert not is_transient(ValueError("bug"))


Usage = namedtuple("Usage", "total used free")


def test_disk_space_rule(tmp_path, monkeypatch) -> None:
    free = {"bytes": 0}
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**13, 0, free["bytes"]))
    need = 10 * 10**9
    free["bytes"] = need + MARGIN_MIN_BYTES  # 2 % of 10 GB is 200 MB < the 256 MiB minimum
    check_free_space(tmp_path / "not" / "yet", need)
    free["bytes"] -= 1
    with pytest.raises(DiskSpaceError) as e:
        check_free_space(tmp_path / "not" / "yet", need, kept_bytes=5 * 10**9, what="big.gguf")
    msg = str(e.value)
    assert "big.gguf" in msg and str(tmp_path) in msg and "5.0 GB already downloaded are kept" in msg
    need = 100 * 10**9  # big downloads keep 2 % to spare
    free["bytes"] = need + 2 * 10**9 - 1
    with pytest.raises(DiskSpaceError):
        check_free_space(tmp_path, need)
    free["bytes"] = 0
    check_free_space(tmp_path, 0)  # nothing left to fetch: no check


def test_format_bytes() -> None:
    assert [format_bytes(n) for n in (999, 1000, 1_500_000, 4.2e9, 3e12)] == [
        "999 B", "1.0 KB", "1.5 MB", "4.2 GB", "3.0 TB"
    ]


def test_hash_file_sha256_and_git_blob_id(tmp_path) -> None:
    data = b"hello world\n" * 1000
    f = tmp_path / "f"
    f.write_bytes(data)
    seen = []
    d = hash_file(f, git_sha1=True, on_bytes=seen.append)
    assert d.sha256 == hashlib.sha256(data).hexdigest() and sum(seen) == len(data)
    assert d.git_sha1 == hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()
    assert matches(d, size=len(data), sha256=d.sha256.upper(), blob_id=None)
    assert matches(d, size=len(data), sha256=None, blob_id=d.git_sha1)
    assert not matches(d, size=len(data) + 1, sha256=d.sha256, blob_id=None)
    assert not matches(d, size=len(data), sha256="0" * 64, blob_id=d.git_sha1)
    control = DownloadControl()
    control.pause()
    with pytest.raises(DownloadStopped):
        hash_file(f, control=control)


def test_control_cancel_wins_over_pause() -> None:
    c = DownloadControl()
    c.check()
    c.cancel(remove_partial=True)
    c.pause()
    with pytest.raises(DownloadStopped) as e:
        c.wait(10)  # returns at once: already stopped
    assert e.value.reason == "cancelled" and e.value.remove_partial


def test_unit_filename() -> None:
    assert unit_filename("m.gguf") == "m.gguf"
    assert unit_filename("Q4/m-00002-of-00003.gguf") == "Q4/m-00001-of-00003.gguf"
    assert unit_filename("m-00003-of-00003.gguf") == "m-00001-of-00003.gguf"
