"""Refuse a download the disk cannot hold, before any byte of it is written.

The check asks for the bytes still to fetch plus a margin, so that finishing the model
does not leave the system with a full disk (logs, swap, the browser's cache...). A
partial file already on disk is left alone and counted as done: after freeing space the
same download resumes where it stopped.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rooflight.errors import OperationFailedError
from rooflight.units import size_text

MARGIN_MIN_BYTES = 256 * 1024**2
MARGIN_FRACTION = 0.02  # of what is still to download


class DiskSpaceError(OperationFailedError):
    """Not enough free space for the rest of a download plus the margin."""


def margin_bytes(remaining: int) -> int:
    return max(MARGIN_MIN_BYTES, int(remaining * MARGIN_FRACTION))


def _existing(path: Path) -> Path:
    """The path itself or its nearest existing ancestor (the cache may not exist yet)."""
    path = Path(path).absolute()
    for p in (path, *path.parents):
        if p.exists():
            return p
    return path  # unreachable: the root exists


def free_bytes(path: Path) -> int:
    # looked up on the module at call time so tests can fake the disk at this boundary
    return shutil.disk_usage(_existing(path)).free


def check_free_space(directory: Path, remaining: int, *, kept_bytes: int = 0, what: str = "the model") -> None:
    """Raise DiskSpaceError unless `remaining` bytes plus the margin fit in `directory`."""
    if remaining <= 0:
        return
    need = remaining + margin_bytes(remaining)
    free = free_bytes(directory)
    if free >= need:
        return
    kept = f" (the {format_bytes(kept_bytes)} already downloaded are kept)" if kept_bytes else ""
    raise DiskSpaceError(
        f"Not enough disk space for {what} in {_existing(directory)}: it needs {format_bytes(need)} "
        f"({format_bytes(remaining)} still to download plus {format_bytes(need - remaining)} to spare) but "
        f"{format_bytes(free)} is free; free some space and start the download again{kept}."
    )


def format_bytes(n: int) -> str:
    return size_text(n, auto=True)
