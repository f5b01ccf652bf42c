"""A Hub that fails: 500s, a server that accepts and never answers, a closed port, offline
mode. Each ends in one clear sentence, within the timeout, and never in a traceback.

These servers misbehave on purpose, so they are tiny raw-socket servers of their own rather
than the well-behaved local Hub of tests/hub_server.py.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from rooflight.errors import OperationFailedError
from rooflight.gguf import load_model_spec

URI = "hf:someone/some-model-GGUF/model-Q4_K_M.gguf"


class _MisbehavingServer:
    """Accepts connections on 127.0.0.1 and answers each with `reply` (None: never answers)."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            if self.reply is None:
                self._held.append(conn)  # read nothing, say nothing: a hung Hub
                continue
            try:
                conn.settimeout(2)
                conn.recv(65536)
                conn.sendall(self.reply)
            except OSError:
                pass
            finally:
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        for conn in self._held:
            conn.close()
        self._thread.join(timeout=2)


def _serving(reply: bytes | None) -> Iterator[_MisbehavingServer]:
    server = _MisbehavingServer(reply)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def hub_500() -> Iterator[_MisbehavingServer]:
    body = b"internal error"
    yield from _serving(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n"
                        b"Connection: close\r\n\r\n%s" % (len(body), body))


@pytest.fixture
def hub_hung() -> Iterator[_MisbehavingServer]:
    yield from _serving(None)


def _point_hub_at(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """HF_ENDPOINT is read by huggingface_hub at import; set it and the constant it fed."""
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setattr(hf_constants, "ENDPOINT", url)
    monkeypatch.setattr(hf_constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        url + "/{repo_id}/resolve/{revision}/{filename}")


def _one_sentence(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and len(text) < 300, text
    assert "Traceback" not in text
    return text


def test_hub_answering_500_gets_a_sentence(monkeypatch, hub_500) -> None:
    _point_hub_at(monkeypatch, hub_500.url)
    with pytest.raises(OperationFailedError) as e:
        load_model_spec(URI)
    text = _one_sentence(e.value)
    assert "500" in text and "try again" in text
    assert hub_500.connections >= 1


def test_hung_hub_times_out_with_a_sentence(monkeypatch, hub_hung) -> None:
    _point_hub_at(monkeypatch, hub_hung.url)
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "1")  # huggingface_hub's own setting (an integer)
    t0 = time.perf_counter()
    with pytest.raises(OperationFailedError) as e:
        load_model_spec(URI)
    elapsed = time.perf_counter() - t0
    text = _one_sentence(e.value)
    assert "1 s" in text and "network" in text
    assert elapsed < 6  # one timeout per attempt, not a stall


def test_closed_port_says_cannot_connect(monkeypatch) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nobody listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _point_hub_at(monkeypatch, f"http://127.0.0.1:{port}")
    with pytest.raises(OperationFailedError) as e:
        load_model_spec(URI)
    _one_sentence(e.value)


def test_offline_mode_refuses_remote_reads_clearly(monkeypatch) -> None:
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OperationFailedError) as e:
        load_model_spec(URI)
    assert "offline" in _one_sentence(e.value).lower()


@pytest.mark.parametrize("failure", ["500", "hang"])
def test_cli_estimate_against_a_failing_hub_exits_1_without_traceback(failure, tmp_path) -> None:
    reply = (b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
             if failure == "500" else None)
    for server in _serving(reply):
        env = {"HF_ENDPOINT": server.url, "HF_HUB_DOWNLOAD_TIMEOUT": "1", "PATH": "/usr/bin:/bin",
               "HOME": str(tmp_path), "ROOFLIGHT_DATA_DIR": str(tmp_path / "d"),
               "ROOFLIGHT_CACHE_DIR": str(tmp_path / "c")}
        hw = tmp_path / "hw.json"
        hw.write_text('{"cpu": {"cores": 4, "ram_total_bytes": 17179869184, "ram_bandwidth_gbs": 40}, '
                      '"gpus": [], "backend": "cpu"}')
        run = subprocess.run([sys.executable, "-m", "rooflight", "estimate", URI, "--hardware", str(hw)],
                             capture_output=True, text=True, env=env, timeout=60)
        assert run.returncode == 1, run.stderr
        assert "Traceback" not in run.stderr
        lines = [line for line in run.stderr.splitlines() if line.startswith("rooflight:")]
        assert len(lines) == 1, run.stderr
