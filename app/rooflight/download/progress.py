"""Progress of one download: bytes, total, speed and ETA, throttled for the UI.

One `Progress` value describes the whole download unit (all parts of a split model):
the CLI's progress bar and the GUI's Downloads page show the same numbers. Events are
throttled to `interval` seconds (4 Hz) so a fast local transfer does not flood a GUI
event loop; phase changes and the final figures are always reported.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

# Phases, in the order a download goes through them.
RESOLVING = "resolving"  # asking the Hub for the commit, sizes and checksums
WAITING = "waiting"  # another download (maybe another program) holds the file's lock
DOWNLOADING = "downloading"
VERIFYING = "verifying"  # sha256 of the finished file against the Hub's
DONE = "done"

# Speed is measured over the last few seconds: steady enough to read, quick to follow a
# network that slows down or speeds up.
SPEED_WINDOW_S = 3.0


@dataclass(frozen=True)
class Progress:
    phase: str
    done_bytes: int  # downloading: bytes on disk; verifying: bytes hashed
    total_bytes: int
    speed_bps: float  # bytes per second over the last few seconds (0.0 when unknown)
    eta_s: float | None  # seconds left in this phase at the current speed, None if unknown
    file: str  # the part being worked on
    part: int  # 1-based index of that part
    parts: int
    note: str = ""  # e.g. "connection lost; retrying in 2 s" (empty once bytes flow again)

    @property
    def fraction(self) -> float:
        return self.done_bytes / self.total_bytes if self.total_bytes > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            "phase": self.phase,
            "done_bytes": self.done_bytes,
            "total_bytes": self.total_bytes,
            "speed_bps": round(self.speed_bps, 1),
            "eta_s": None if self.eta_s is None else round(self.eta_s, 1),
            "file": self.file,
            "part": self.part,
            "parts": self.parts,
            "note": self.note,
        }


ProgressCallback = Callable[[Progress], None]


class ProgressMeter:
    """Counts bytes for one phase and reports them through a callback, throttled."""

    def __init__(
        self,
        callback: ProgressCallback | None,
        *,
        parts: int = 1,
        interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._callback = callback
        self._interval = interval
        self._clock = clock
        self.parts = parts
        self.phase = RESOLVING
        self.done = 0
        self.total = 0
        self.file = ""
        self.part = 1
        self.note = ""
        self._samples: deque[tuple[float, int]] = deque([(clock(), 0)])
        self._last_emit = float("-inf")

    def start(self, phase: str, *, done: int = 0, total: int = 0, file: str = "", part: int = 1) -> None:
        """Begin a phase; the speed window starts afresh (bytes already on disk are not speed)."""
        self.phase, self.done, self.total = phase, done, total
        self.file, self.part = file or self.file, part
        self.note = ""
        self._samples.clear()
        self._samples.append((self._clock(), done))
        self.emit(force=True)

    def set_part(self, file: str, part: int) -> None:
        self.file, self.part = file, part

    def set_note(self, note: str) -> None:
        """Say something about the transfer (a retry, a wait) in the next events, at once."""
        self.note = note
        self.emit(force=True)

    def advance(self, n: int) -> None:
        """n more bytes done (negative when a server ignored a Range and data was dropped)."""
        self.done += n
        if self.note and n > 0:
            self.note = ""
        now = self._clock()
        if now - self._samples[-1][0] >= self._interval:
            self._samples.append((now, self.done))
            self._prune(now)
            self.emit(now=now)

    def _prune(self, now: float) -> None:
        # keep the newest sample that is at least SPEED_WINDOW_S old as the window's start
        while len(self._samples) > 2 and now - self._samples[1][0] >= SPEED_WINDOW_S:
            self._samples.popleft()

    def emit(self, *, force: bool = False, now: float | None = None) -> None:
        now = self._clock() if now is None else now
        if self._callback is None or (not force and now - self._last_emit < self._interval):
            return
        self._last_emit = now
        self._callback(self.snapshot(now))

    def snapshot(self, now: float | None = None) -> Progress:
        now = self._clock() if now is None else now
        self._prune(now)
        speed = 0.0
        if self._samples:
            t0, d0 = self._samples[0]
            if now - t0 > 0:
                speed = max(0.0, (self.done - d0) / (now - t0))
        left = max(0, self.total - self.done)
        eta = left / speed if speed > 0 else (0.0 if left == 0 else None)
        return Progress(
            self.phase, self.done, self.total, speed, eta, self.file, self.part, self.parts, self.note
        )
