"""One screenshot of a page, as bench/screenshots.py takes it (the type the shot modules share)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# wait_until(predicate, timeout_s=60.0): runs the event loop until predicate() holds
Wait = Callable[..., None]


@dataclass(frozen=True)
class Shot:
    """`prepare(wait)` puts the page in the state to show (select a row, open a chat...) and
    may wait for workers with wait(predicate, timeout_s); the window is grabbed afterwards,
    then `after(wait)` undoes what later shots should not see."""

    file: str
    prepare: Callable[[Wait], None] | None = None
    after: Callable[[Wait], None] | None = None
