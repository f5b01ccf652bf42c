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


def _stay_for(seconds: float) -> None:
    """Run bytecode for a while, so a second pending KeyboardInterrupt would be raised here."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.01)


@pytest.mark.skipif(sys.platform == "win32", reason="thread-directed signals are POSIX")
def test_at_a_terminal_a_ctrl_c_another_thread_takes_ends_input_once(pipe_stdin):
    """input() (a terminal's read): the SIGINT goes to another thread, as the kernel may hand
    it to one of llama.cpp's; the watcher hands it to the main thread, whose wait ends in one
    KeyboardInterrupt, not when the next line comes (written 5 s later as a fallback)."""
    finished = threading.Event()
    llama_like = threading.Thread(target=finished.wait, daemon=True)
    llama_like.start()

    def ctrl_c_to_the_other_thread():
        time.sleep(0.3)
        signal.pthread_kill(llama_like.ident, signal.SIGINT)
        if not finished.wait(5):
            os.write(pipe_stdin, b"the next line\n")

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=ctrl_c_to_the_other_thread, daemon=True)
    sender.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt), LineInput(interactive=True) as lines:
            lines.read()
        assert time.monotonic() - t0 < 3
        _stay_for(0.6)  # no second KeyboardInterrupt
    finally:
        finished.set()
        sender.join()
        llama_like.join()
        signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(sys.platform == "win32", reason="os.kill's SIGINT is POSIX")
def test_at_a_terminal_a_ctrl_c_the_main_thread_takes_is_not_handed_on_again(pipe_stdin):
    finished = threading.Event()

    def ctrl_c_to_the_process():
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)
        if not finished.wait(5):
            os.write(pipe_stdin, b"the next line\n")

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=ctrl_c_to_the_process, daemon=True)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt), LineInput(interactive=True) as lines:
            lines.read()
        _stay_for(0.6)  # NUDGE_AFTER_S passes: no second KeyboardInterrupt
    finally:
        finished.set()
        sender.join()
        signal.signal(signal.SIGINT, previous)


_TERMINAL_CHILD = r"""
import signal, sys, threading, time
if sys.argv[1] == "plain":
    sys.modules["readline"] = None  # as where Python has no readline module
from rooflight.commands.chat_input import LineInput
other = threading.Thread(target=time.sleep, args=(30,), daemon=True)
other.start()
def ctrl_c():
    time.sleep(0.5)
    signal.pthread_kill(other.ident, signal.SIGINT)
threading.Thread(target=ctrl_c, daemon=True).start()
try:
    with LineInput(interactive=True) as lines:
        line = lines.read()
    print("LINE", line, flush=True)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal is POSIX")
@pytest.mark.parametrize("line_reader", ["readline", "plain"])
def test_a_real_terminal_prompt_ends_on_a_ctrl_c_another_thread_takes(line_reader):
    """The same in a child on a pseudo-terminal, where input() reads through readline (the
    chat imports it for its line editing) or, without it, the C library: the child prints
    INTERRUPTED without a line being typed, the prompt drawn once."""
    import pty
    import select
    import subprocess

    controller, terminal = pty.openpty()
    child = subprocess.Popen([sys.executable, "-c", _TERMINAL_CHILD, line_reader], stdin=terminal, stdout=terminal,
                             stderr=terminal, close_fds=True)
    os.close(terminal)
    seen = b""
    typed = False
    try:
        deadline = time.monotonic() + 10
        while b"INTERRUPTED" not in seen and b"LINE" not in seen and time.monotonic() < deadline:
            if select.select([controller], [], [], 0.1)[0]:
                try:
                    seen += os.read(controller, 4096)
                except OSError:
                    break
            if not typed and time.monotonic() > deadline - 5:
                os.write(controller, b"typed\n")  # the fallback: what the old reader waited for
                typed = True
        assert b"INTERRUPTED" in seen, seen
        assert not typed, "the wait ended only when a line came"
        assert seen.count(b"> ") == 1  # the prompt, drawn once
    finally:
        child.kill()
        child.wait()
        os.close(controller)
