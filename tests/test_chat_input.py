"""The terminal chat's input (commands/chat_input.py): lines from a real pipe, and a Ctrl-C
that another thread takes still ends the wait at once."""

import io
import os
import signal
import sys
import threading
import time

import pytest

from rooflight.commands.chat_input import LineInput


@pytest.fixture
def pipe_stdin(monkeypatch):
    """sys.stdin reading a real pipe; yields the write end's descriptor."""
    r, w = os.pipe()
    stdin = open(r, encoding="utf-8")  # noqa: SIM115 - closed below
    monkeypatch.setattr(sys, "stdin", stdin)
    try:
        yield w
    finally:
        stdin.close()
        try:
            os.close(w)
        except OSError:
            pass


def test_lines_written_at_once_come_back_one_by_one_then_the_end(pipe_stdin):
    os.write(pipe_stdin, "héllo\nsecond message\n/quit\nlast without newline".encode())
    os.close(pipe_stdin)
    with LineInput(interactive=False) as lines:
        got = [lines.read() for _ in range(5)]
    assert got == ["héllo", "second message", "/quit", "last without newline", None]


def test_a_stdin_without_a_descriptor_is_read_as_before(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("one\ntwo\n"))
    with LineInput(interactive=False) as lines:
        assert [lines.read(), lines.read(), lines.read()] == ["one", "two", None]


@pytest.mark.skipif(sys.platform == "win32", reason="thread signal masks are POSIX")
def test_a_ctrl_c_another_thread_takes_ends_the_wait(pipe_stdin):
    """The main thread blocks SIGINT, so the kernel hands it to the one thread that does not,
    as it may hand it to one of llama.cpp's: the wait must still end in a KeyboardInterrupt
    here, not when the next line comes (written 5 s later as a fallback)."""
    finished = threading.Event()

    def other_thread():
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)
        if not finished.wait(5):  # never once the test is over: the descriptor may be reused
            os.write(pipe_stdin, b"the next line\n")

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    worker = threading.Thread(target=other_thread, daemon=True)
    worker.start()  # created before the mask: it keeps SIGINT unblocked
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt), LineInput(interactive=False) as lines:
            lines.read()
        assert time.monotonic() - t0 < 3
    finally:
        finished.set()
        worker.join()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, previous)
