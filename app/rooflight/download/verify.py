"""Checksums of a finished download, streamed in chunks.

The sha256 must equal the Hub's LFS sha256 (small non-LFS files are checked against
their git blob id instead). Hashing a multi-gigabyte file takes seconds, so this runs
on the download's worker thread, never a GUI thread: hashlib releases the GIL while it
hashes each chunk, and the caller's control can stop it between chunks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rooflight.errors import OperationFailedError

from .control import DownloadControl

CHUNK_BYTES = 8 * 1024**2  # big enough to amortise Python overhead, small enough to stop quickly


class VerificationError(OperationFailedError):
    """A downloaded file's checksum does not match the Hub's."""


@dataclass(frozen=True)
class Digest:
    size: int
    sha256: str
    git_sha1: str | None  # sha1 of "blob <size>\0" + content, when asked for


def hash_file(
    path: Path,
    *,
    git_sha1: bool = False,
    on_bytes: Callable[[int], None] | None = None,
    control: DownloadControl | None = None,
) -> Digest:
    """sha256 (and optionally the git blob sha1) of a file, reporting bytes as it goes."""
    path = Path(path)
    size = path.stat().st_size
    sha256 = hashlib.sha256()
    sha1 = None
    if git_sha1:
        sha1 = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
    buf = bytearray(CHUNK_BYTES)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            sha256.update(view[:n])
            if sha1 is not None:
                sha1.update(view[:n])
            if on_bytes is not None:
                on_bytes(n)
            if control is not None:
                control.check()
    return Digest(size, sha256.hexdigest(), sha1.hexdigest() if sha1 is not None else None)


def matches(digest: Digest, *, size: int, sha256: str | None, blob_id: str | None) -> bool:
    """Whether a digest is the Hub's file: size, then LFS sha256 or else the git blob id."""
    if digest.size != size:
        return False
    if sha256 is not None:
        return digest.sha256 == sha256.lower()
    return blob_id is not None and digest.git_sha1 == blob_id.lower()
