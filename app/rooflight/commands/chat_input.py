"""The terminal chat's input: one line at a time, read so that a Ctrl-C always ends the wait.

On Linux a SIGINT sent to the process may be handed to any thread that does not block it,
and llama.cpp's worker threads (ggml's thread pool, OpenMP's) do not. Python runs its
handler in the main thread only when that thread next runs bytecode, so a main thread
blocked in a read of stdin stayed blocked: a Ctrl-C at the prompt was ignored until the next
line came (tests/test_cli_chat.py's Ctrl-C test hung 1 time in 11 on a 2-core Xeon VM,
2026-12-06). signal.set_wakeup_fd makes every signal, whichever thread took it, write a byte
to a socket. A pipe or file is read from its descriptor with a buffer of our own, the wait
selecting on stdin and that socket (a select cannot see the lines Python's stdin buffer
already holds). A terminal keeps input(), with its line editing and a prompt drawn once: a
watcher thread reads the socket, and when a SIGINT's byte comes while input() still waits
(NUDGE_AFTER_S later: the main thread took it itself, or another thread did), it hands the
signal to the main thread, whose read then ends and runs the handler. Windows, a stdin
without a descriptor (a test's StringIO) and a caller off the main thread read as before.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time

PROMPT = "> "
# how long a SIGINT's byte may wait for the main thread's own handler before the watcher hands
# the signal on: a main thread that took it ends input() within microseconds
NUDGE_AFTER_S = 0.2


def _line_editing() -> None:
    """Give input() the arrow keys and the session's history (GNU readline or libedit), where
    Python has the module; without it a terminal reads with the tty's own erase and kill."""
    try:
        import readline  # noqa: F401 - importing it is what hooks it into input()
    except ImportError:
        pass


class LineInput:
    """`with LineInput(interactive) as lines: lines.read()`: the next line without its newline,
    None at the end of the input (Ctrl-D, EOF). A signal's handler (a KeyboardInterrupt for
    Ctrl-C) runs during the wait."""

    def __init__(self, interactive: bool) -> None:
        self.interactive = interactive
        self._fd: int | None = None  # stdin's descriptor, where the wait can select on it
        self._wake: socket.socket | None = None  # the end signals write to
        self._wake_writer: socket.socket | None = None
        self._previous_wakeup = -1
        self._pending = b""  # read from the descriptor, not yet returned (pipes and files)
        self._eof = False
        self._waiting = False  # a terminal: input() is waiting for the line
        self._watcher: threading.Thread | None = None
        self._stop_watcher: tuple[int, int] | None = None  # a pipe: a byte on it ends the watcher

    def __enter__(self) -> LineInput:
        if self.interactive:
            _line_editing()
        if os.name != "posix" or threading.current_thread() is not threading.main_thread():
            return self
        fd = None
        if not self.interactive:
            try:
                fd = sys.stdin.fileno()
            except (AttributeError, OSError, ValueError):  # no descriptor: read as before
                return self
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        try:
            self._previous_wakeup = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):
            reader.close()
            writer.close()
            return self
        self._fd, self._wake, self._wake_writer = fd, reader, writer
        if self.interactive:
            self._stop_watcher = os.pipe()
            self._watcher = threading.Thread(target=self._watch, name="rooflight-ctrl-c", daemon=True)
            self._watcher.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._watcher is not None and self._stop_watcher is not None:
            os.write(self._stop_watcher[1], b"x")
            self._watcher.join()
            for end in self._stop_watcher:
                os.close(end)
            self._watcher = self._stop_watcher = None
        if self._wake is not None and self._wake_writer is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
            self._wake.close()
            self._wake_writer.close()
            self._wake = self._wake_writer = None

    def read(self) -> str | None:
        try:
            if self.interactive:
                # a terminal keeps input(): waiting first would leave the line to the tty's
                # own editing and draw the prompt twice; the watcher ends its wait instead
                self._waiting = True
                try:
                    return input(PROMPT)
                finally:
                    self._waiting = False
            if self._fd is None:
                line = sys.stdin.readline()
                return None if line == "" else line.rstrip("\n")
            return self._read_descriptor()
        except EOFError:
            return None

    def _read_descriptor(self) -> str | None:
        fd = self._fd
        assert fd is not None
        while b"\n" not in self._pending and not self._eof:
            self._wait()
            chunk = os.read(fd, 65536)
            if chunk:
                self._pending += chunk
            else:
                self._eof = True
        if not self._pending:
            return None
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode(sys.stdin.encoding or "utf-8", errors="replace")

    def _wait(self) -> None:
        """Until stdin has something to read (data or its end). A signal's byte ends one
        select early; Python runs the signal's handler as this loop goes on."""
        assert self._wake is not None and self._fd is not None
        wake = self._wake.fileno()
        while True:
            readable, _, _ = select.select([self._fd, wake], [], [])
            if wake in readable:
                try:
                    self._wake.recv(4096)
                except (BlockingIOError, InterruptedError):
                    pass
            if self._fd in readable:
                return

    def _watch(self) -> None:
        """The terminal's watcher thread: hand a SIGINT that left input() waiting to the main
        thread (a read there ends with EINTR and Python runs the handler: one
        KeyboardInterrupt, both deliveries counting as one while it is pending)."""
        assert self._wake is not None and self._stop_watcher is not None
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # the kernel must not pick this one
        main = threading.main_thread().ident
        assert main is not None
        wake, stop = self._wake.fileno(), self._stop_watcher[0]
        while True:
            readable, _, _ = select.select([wake, stop], [], [])
            if stop in readable:
                return
            try:
                received = self._wake.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            if signal.SIGINT in received and self._waiting:
                time.sleep(NUDGE_AFTER_S)
                if self._waiting:
                    signal.pthread_kill(main, signal.SIGINT)
