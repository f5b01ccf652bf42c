"""Stopping a running download from another thread: pause (keep the partial) or cancel.

The download loop calls `check()` after every network read and every hashed chunk, so
a pause or cancel takes effect within one read (a read blocks at most for huggingface_hub's
download timeout when the connection stalls). Backoff sleeps use `wait()` so they end
at once too.
"""

from __future__ import annotations

import threading


class DownloadStopped(Exception):
    """Raised inside a download when its control was paused or cancelled.

    Not a RooflightError: stopping on request is not a failure. `reason` is "paused" or
    "cancelled"; `remove_partial` says whether the caller asked to delete partial data.
    """

    def __init__(self, reason: str, remove_partial: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.remove_partial = remove_partial


class DownloadControl:
    """Shared between the thread running a download and whoever may stop it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason = ""
        self._remove_partial = False
        self._lock = threading.Lock()

    def pause(self) -> None:
        self._stop("paused", False)

    def cancel(self, remove_partial: bool = False) -> None:
        self._stop("cancelled", remove_partial)

    def _stop(self, reason: str, remove_partial: bool) -> None:
        with self._lock:
            # a cancel overrides an earlier pause, never the other way round
            if self._reason != "cancelled":
                self._reason = reason
            self._remove_partial = self._remove_partial or remove_partial
            self._event.set()

    @property
    def stopped(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str:
        """"paused" or "cancelled" once stopped, else ""."""
        with self._lock:
            return self._reason

    def check(self) -> None:
        """Raise DownloadStopped if a pause or cancel was asked for."""
        if self._event.is_set():
            with self._lock:
                raise DownloadStopped(self._reason, self._remove_partial)

    def wait(self, seconds: float) -> None:
        """Sleep up to `seconds`, raising DownloadStopped as soon as a stop is asked for."""
        self._event.wait(max(0.0, seconds))
        self.check()
