"""The terminal chat's input: one line at a time, read so that a Ctrl-C always ends the wait.

On Linux a SIGINT sent to the process may be handed to any thread that does not block it,
and llama.cpp's worker threads (ggml's thread pool, OpenMP's) do not. Python runs its
handler in the main thread only when that thread next runs bytecode, so a main thread
blocked in a read of stdin stayed blocked: a Ctrl-C at the prompt was ignored until the next
line came (tests/test_cli_chat.py's Ctrl-C test hung 1 time in 11 on a 2-core Xeon VM,
2026-12-06). signal.set_wakeup_fd makes every signal, whichever thread took it, write a byte
to a socket the wait selects on; Python then runs the handler in this thread. A pipe or file
is read from its descriptor with a buffer of our own (a select cannot see the lines Python's
stdin buffer already holds). A terminal is read with input() as before: readline's own wait
cannot take the socket, and waiting before it drew the prompt twice and left the line to the
tty's editing, so there a Ctrl-C a worker thread takes still waits for Enter. Windows, a stdin
without a descriptor (a test's StringIO) and a caller off the main thread read as before.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading

PROMPT = "> "


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

    def __enter__(self) -> LineInput:
        if self.interactive or os.name != "posix" or threading.current_thread() is not threading.main_thread():
            return self
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
        return self

    def __exit__(self, *exc) -> None:
        if self._wake is not None and self._wake_writer is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
            self._wake.close()
            self._wake_writer.close()
            self._wake = self._wake_writer = None

    def read(self) -> str | None:
        try:
            if self.interactive:
                # a terminal keeps input(): waiting first would leave the line to the tty's
                # own editing (no readline history or keys) and draw the prompt twice
                return input(PROMPT)
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
        while True:
            readable, _, _ = select.select([self._fd, self._wake], [], [])
            if self._wake in readable:
                try:
                    self._wake.recv(4096)
                except (BlockingIOError, InterruptedError):
                    pass
            if self._fd in readable:
                return
