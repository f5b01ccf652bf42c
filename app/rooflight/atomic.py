"""Writing a file so that a crash leaves the old one or the new one, never half of it:
write a temporary file beside it, fsync, rename it over the old (os.replace is atomic on
one file system). The temporary file never outlives a failure.

Settings, the Hugging Face token file, the Hub and bandwidth caches, chat exports and plot
exports all write this way.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path


def write_text_atomic(path: Path, text: str, *, make_parent: bool = False) -> None:
    """Replace `path` with `text` (UTF-8). The file is owner-only (mkstemp's 0600), which
    the token file needs and the others do not mind. Raises OSError."""
    if make_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_file_atomic(path: Path, write: Callable[[Path], bool]) -> Path:
    """write(tmp) creates a temporary file beside `path` (a Qt image or SVG writer, say),
    then it is fsynced and renamed over `path`. The writer creates the file itself, so it
    gets the usual permissions (umask), not 0600. Raises OSError when nothing was written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{uuid.uuid4().hex[:12]}.tmp{path.suffix}")
    try:
        if not write(tmp) or not tmp.is_file() or tmp.stat().st_size == 0:
            raise OSError(f"Could not write {path.name}; check that the folder is writable.")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
