"""A reply's decode rate while it streams, measured on the engine itself.

The rate is the tokens the engine evaluated since the reply's first token over the time
since then, so it counts every decoded token (also those a stop string holds back), not
only the text that reached the screen. Called once per streamed chunk; it yields a figure
at most every `every_s` seconds, so a GUI or a monitor is not flooded.
"""

from __future__ import annotations

import time
from collections.abc import Callable

LIVE_RATE_S = 0.25  # how often a new rate is reported


class LiveRate:
    def __init__(self, engine, every_s: float = LIVE_RATE_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine, self.every_s, self.clock = engine, every_s, clock
        self.t0: float | None = None
        self.n0 = 0
        self.last = 0.0

    def tick(self) -> tuple[int, float | None] | None:
        """After a streamed chunk: (tokens so far, tokens/s) when a figure is due, else
        None. The first chunk gives (1, None): the reply started, no rate yet."""
        now = self.clock()
        n = self.engine.tokens_evaluated
        if n is None:  # the engine was closed under the reply
            return None
        if self.t0 is None:
            self.t0, self.n0, self.last = now, n, now
            return (1, None)
        if now - self.last >= self.every_s and now > self.t0:
            self.last = now
            return (n - self.n0 + 1, (n - self.n0) / (now - self.t0))
        return None
