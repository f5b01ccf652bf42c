"""The raw header bytes of a GGUF model (every part of a split one), local or remote.

A header-only copy of a model (header bytes, then a hole up to the file's real size) is
what llama.cpp needs for a no-alloc load (runtime/confirm.py): it reads the metadata and
tensor table, checks every tensor lies inside the file, and reads no weight. The parser
(header.py) skips the bodies of numeric arrays without fetching them, so the bytes it saw
are recorded here and the gaps fetched afterwards: a remote header costs its own size
in range requests, never the weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .header import DEFAULT_MAX_HEADER_BYTES, parse_header
from .remote import is_hf_uri, open_hub_source, parse_hf_uri
from .sources import ByteSource, LocalFileSource
from .splits import split_part_names


@dataclass(frozen=True)
class HeaderCopy:
    """One file of a model: its name, its header bytes (up to the tensor data) and its size."""

    name: str
    header: bytes
    file_size: int


class _RecordingSource:
    """A ByteSource that remembers what it returned, so the header need not be read twice."""

    def __init__(self, inner: ByteSource) -> None:
        self.inner = inner
        self.name = inner.name
        self.pieces: list[tuple[int, bytes]] = []

    @property
    def size(self) -> int | None:
        return self.inner.size

    def read(self, offset: int, n: int) -> bytes:
        data = self.inner.read(offset, n)
        self.pieces.append((offset, data))
        return data

    def close(self) -> None:
        self.inner.close()

    def prefix(self, end: int) -> bytes:
        """Bytes [0, end), from what was read plus reads of the gaps (skipped array bodies)."""
        out = bytearray(end)
        have = bytearray(end)  # 1 where filled; headers are a few MB, so a byte map is fine
        for offset, data in self.pieces:
            stop = min(end, offset + len(data))
            if offset < stop:
                out[offset:stop] = data[: stop - offset]
                have[offset:stop] = b"\x01" * (stop - offset)
        pos = 0
        while pos < end:
            gap = have.find(b"\x00", pos)
            if gap < 0:
                break
            gap_end = have.find(b"\x01", gap)
            gap_end = end if gap_end < 0 else gap_end
            data = self.inner.read(gap, gap_end - gap)
            if len(data) != gap_end - gap:
                raise OSError(f"{self.name}: short read of header bytes {gap}-{gap_end}")
            out[gap:gap_end] = data
            pos = gap_end
        return bytes(out)


def _copy(source: ByteSource, name: str, max_header_bytes: int) -> HeaderCopy:
    rec = _RecordingSource(source)
    try:
        h = parse_header(rec, max_header_bytes=max_header_bytes)
        return HeaderCopy(name, rec.prefix(h.data_offset), h.file_size)
    finally:
        rec.close()


def header_copies(source: str | Path, *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> list[HeaderCopy]:
    """Every part's header bytes for a local path or an hf: URI (one element if not split)."""
    if isinstance(source, str) and is_hf_uri(source):
        ref = parse_hf_uri(source)
        path = PurePosixPath(ref.filename)
        names = split_part_names(path.name) or [path.name]
        parent = "" if str(path.parent) == "." else f"{path.parent}/"
        return [_copy(open_hub_source(ref.with_filename(parent + n)), n, max_header_bytes) for n in names]
    local = Path(source)
    names = split_part_names(local.name) or [local.name]
    return [_copy(LocalFileSource(local.with_name(n)), n, max_header_bytes) for n in names]
