"""A small, bounded, streaming GGUF header parser.

Why not `gguf.GGUFReader`: it memory-maps the whole file (impossible for a remote read
of a 5 GB model), walks a 262k-token vocabulary element by element into numpy views
(seconds), and trusts every count it reads. This parser reads only the header, through a
growing buffer over a byte source, skips the bodies of large arrays, and checks every
count against the bytes that can exist before allocating or looping on it. It mirrors
the checks of llama.cpp's own loader (ggml/src/gguf.cpp) so that a file it accepts is
one llama.cpp would accept, and a file it rejects gets one clear sentence instead.

Constants (magic, value types, tensor types and their block sizes, key names) come from
the `gguf` package.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any

from gguf import (
    GGML_QUANT_SIZES,
    GGUF_DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    GGMLQuantizationType,
    GGUFValueType,
    Keys,
)

from rooflight.errors import BadInputError

from .arrays import ArrayInfo  # noqa: F401 (importable from here as before)
from .sources import ByteSource, LocalFileSource

GGML_MAX_DIMS = 4  # ggml.h; not exported by the gguf package
GGML_MAX_NAME = 64  # ggml.h: tensor names must be shorter than this
MAX_COUNT = 1_000_000  # no real model has a million tensors or metadata keys
MAX_STRING_BYTES = 64 * 1024 * 1024  # one metadata string (chat templates are ~10 KB)
MAX_ARRAY_ELEMENTS = 2**27  # beyond this a count past the file's end is corrupt, not cut short
SMALL_ARRAY = 4096  # numeric arrays up to this length are kept (per-layer values)
SMALL_STRING_ARRAY = 256  # string arrays up to this length are kept (tags, languages)
DEFAULT_MAX_HEADER_BYTES = 64 * 1024 * 1024  # a real header is a few MB (vocab included)
FIRST_CHUNK = 1024 * 1024

# Tensor types the llama.cpp we ship knows but gguf 0.19 does not: id -> (name, block, bytes).
# Kept tiny and checked against ggml/src/ggml-common.h (block_q2_0: fp16 scale + 64 x 2 bits).
_EXTRA_TYPES: dict[int, tuple[str, int, int]] = {42: ("Q2_0", 64, 18)}

# Scalar value types: (struct code, byte size).
_SCALARS: dict[int, tuple[str, int]] = {
    GGUFValueType.UINT8: ("B", 1),
    GGUFValueType.INT8: ("b", 1),
    GGUFValueType.UINT16: ("H", 2),
    GGUFValueType.INT16: ("h", 2),
    GGUFValueType.UINT32: ("I", 4),
    GGUFValueType.INT32: ("i", 4),
    GGUFValueType.FLOAT32: ("f", 4),
    GGUFValueType.BOOL: ("?", 1),
    GGUFValueType.UINT64: ("Q", 8),
    GGUFValueType.INT64: ("q", 8),
    GGUFValueType.FLOAT64: ("d", 8),
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_I32 = struct.Struct("<i")


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    type_id: int  # GGMLQuantizationType value
    type_name: str  # "Q4_K", "F32", ...
    shape: tuple[int, ...]  # GGUF order (ne0, ne1, ...)
    offset: int  # relative to the start of the data section
    n_bytes: int  # exact bytes of the tensor's data


@dataclass(frozen=True)
class GGUFHeader:
    source: str  # the file's display name
    version: int
    metadata: dict[str, Any] = field(repr=False)  # key -> int/float/bool/str/ArrayInfo
    tensors: tuple[GGUFTensor, ...] = field(repr=False)
    alignment: int
    data_offset: int  # absolute byte where the tensor data starts
    file_size: int
    bytes_read: int  # bytes fetched from the source to parse this header

    @property
    def tensor_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)


def tensor_type_info(type_id: int) -> tuple[str, int, int] | None:
    """(name, elements per block, bytes per block) for a ggml type id, None if unknown."""
    try:
        qt = GGMLQuantizationType(type_id)
    except ValueError:
        return _EXTRA_TYPES.get(type_id)
    sizes = GGML_QUANT_SIZES.get(qt)
    if sizes is None:
        return None
    return qt.name, sizes[0], sizes[1]


class _Reader:
    """Sequential reader over a byte source, with a contiguous buffer that grows.

    Only bytes the parser actually looks at are fetched: skipping past the buffer (the
    body of a numeric array) leaves a gap instead of downloading it. Fetch sizes double
    (1 MiB, 2 MiB, ...) so a remote header costs a handful of requests, and the total
    fetched is capped so a hostile file cannot make us read gigabytes.
    """

    def __init__(self, source: ByteSource, max_bytes: int, first_chunk: int) -> None:
        self.src = source
        self.name = source.name
        self.max_bytes = max_bytes
        self.chunk = max(1, first_chunk)
        self.buf = bytearray()
        self.base = 0  # file offset of buf[0]
        self.pos = 0  # file offset of the next byte to parse
        self.fetched = 0
        self.size: int | None = source.size

    # -- errors ------------------------------------------------------------------------

    def bad(self, what: str) -> BadInputError:
        return BadInputError(f"{self.name} is not a valid GGUF file: {what}.")

    def truncated(self, need_end: int) -> BadInputError:
        if need_end <= 4:  # not even a magic number
            return BadInputError(f"{self.name} is not a GGUF file (it has only {self.size} bytes).")
        return BadInputError(
            f"{self.name} is truncated: the header ends at byte {need_end} "
            f"but the file has {self.size} bytes."
        )

    # -- buffer ------------------------------------------------------------------------

    def remaining(self) -> int:
        assert self.size is not None
        return self.size - self.pos

    def _fill(self, need_end: int) -> None:
        """Make buf cover [pos, need_end)."""
        if self.size is not None and need_end > self.size:
            raise self.truncated(need_end)
        drop = self.pos - self.base
        if drop >= len(self.buf):  # nothing useful buffered (or we skipped past it)
            self.buf = bytearray()
            self.base = self.pos
        elif drop > 0:
            del self.buf[:drop]
            self.base = self.pos
        have_end = self.base + len(self.buf)
        if have_end >= need_end:
            return
        want = max(need_end - have_end, self.chunk)
        if self.size is not None:
            want = min(want, self.size - have_end)
        budget = self.max_bytes - self.fetched
        if want > budget:
            if need_end - have_end > budget:
                cap = self.max_bytes
                cap_text = f"{cap // 2**20} MiB" if cap >= 2**20 else f"{cap} bytes"
                raise BadInputError(
                    f"{self.name} has a header larger than {cap_text} "
                    "(real GGUF headers are a few MB); it is not a usable model file."
                )
            want = budget
        data = self.src.read(have_end, want)
        if self.size is None:
            self.size = self.src.size
        self.fetched += len(data)
        self.buf += data
        self.chunk *= 2
        if self.base + len(self.buf) < need_end:
            if self.size is None:
                self.size = self.base + len(self.buf)
            raise self.truncated(need_end)

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > self.base + len(self.buf):
            self._fill(end)
        start = self.pos - self.base
        self.pos = end
        # a copy, not a memoryview: a live view would stop the buffer from being resized
        return bytes(self.buf[start : start + n])

    def skip(self, n: int) -> None:
        end = self.pos + n
        if self.size is None:
            self._fill(self.pos + 1)  # learn the size
        if end > self.size:  # type: ignore[operator]
            raise self.truncated(end)
        self.pos = end

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def u64(self) -> int:
        return _U64.unpack(self.take(8))[0]

    def i32(self) -> int:
        return _I32.unpack(self.take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self.take(8))[0]

    def raw_string(self, what: str) -> bytes:
        n = self.u64()
        self._check_string_length(n, what)
        return self.take(n)

    def string(self, what: str) -> str:
        return self.raw_string(what).decode("utf-8", errors="replace")

    def _check_string_length(self, n: int, what: str) -> None:
        if n > MAX_STRING_BYTES:
            raise self.bad(f"{what} claims a length of {n} bytes")
        if self.size is not None and n > self.size - self.pos:
            raise self.truncated(self.pos + n)  # a plausible length: the file was cut short

    def skip_strings(self, count: int, what: str) -> None:
        """Walk `count` length-prefixed strings without decoding them (a vocabulary)."""
        unpack = _U64.unpack_from
        buf, off = self.buf, self.pos - self.base
        end = len(buf)
        left = count
        while left:
            if off + 8 <= end:
                n = unpack(buf, off)[0]
                nxt = off + 8 + n
                if nxt <= end:
                    off = nxt
                    left -= 1
                    continue
                self.pos = self.base + off + 8
                self._check_string_length(n, what)
                self.pos -= 8
                self._fill(self.pos + 8 + n)
            else:
                self.pos = self.base + off
                self._fill(self.pos + 8)
            buf, off, end = self.buf, self.pos - self.base, len(self.buf)
        self.pos = self.base + off


def _shown(text: str, limit: int = 60) -> str:
    """A name read from the file, quoted for an error sentence: one line, printable, short.

    Keys and tensor names come from strangers' files; a hostile one can be megabytes of
    control characters, which must not end up verbatim in a message or a log.
    """
    clean = "".join(c if c.isprintable() else "?" for c in text[: limit + 1])
    return repr(clean[:limit] + "…") if len(clean) > limit else repr(clean)


def parse_header(
    source: ByteSource,
    *,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    first_chunk: int = FIRST_CHUNK,
) -> GGUFHeader:
    """Parse the header of a GGUF file; BadInputError with one sentence if it is not valid."""
    r = _Reader(source, max_header_bytes, first_chunk)
    name = r.name
    if _U32.unpack(r.take(4))[0] != GGUF_MAGIC:
        raise BadInputError(f"{name} is not a GGUF file (bad magic).")
    version = r.u32()
    if version in (2, 3):
        pass
    elif version == 1:
        raise BadInputError(f"{name} is a GGUF version 1 file, which llama.cpp no longer reads.")
    elif version & 0xFFFF == 0 and version >> 16:
        raise BadInputError(f"{name} is a big-endian GGUF file, which llama.cpp cannot load here.")
    else:
        raise BadInputError(f"{name} has GGUF version {version}; only versions 2 and 3 are known.")

    n_tensors = r.i64()
    n_kv = r.i64()
    if not 0 <= n_tensors <= MAX_COUNT:
        raise r.bad(f"it claims {n_tensors} tensors")
    if not 0 <= n_kv <= MAX_COUNT:
        raise r.bad(f"it claims {n_kv} metadata keys")

    metadata: dict[str, Any] = {}
    for i in range(n_kv):
        key = _read_key(r, i, metadata)
        metadata[key] = _read_value(r, key)

    alignment = GGUF_DEFAULT_ALIGNMENT
    if Keys.General.ALIGNMENT in metadata:
        alignment = metadata[Keys.General.ALIGNMENT]
        # llama.cpp requires a uint32 power of two (ggml/src/gguf.cpp)
        if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
            raise r.bad(f"general.alignment is {alignment!r}, not a power of two")

    tensors: list[tuple[str, int, str, tuple[int, ...], int, int]] = []
    seen: set[str] = set()
    for i in range(n_tensors):
        tensors.append(_read_tensor_info(r, i, seen))

    data_offset = r.pos + (-r.pos % alignment)
    if r.size is None:  # only when there were no bytes at all; handled above
        raise r.truncated(r.pos)
    file_size = r.size
    if n_tensors and data_offset > file_size:
        raise r.truncated(data_offset)

    # llama.cpp lays tensors out back to back, each padded to the alignment, and refuses
    # any other offset; check the same, and that every tensor lies inside the file.
    expected = 0
    out: list[GGUFTensor] = []
    for tname, type_id, type_name, shape, offset, n_bytes in tensors:
        if offset % alignment:
            raise r.bad(f"tensor {_shown(tname)} has offset {offset}, not a multiple of {alignment}")
        if offset != expected:
            raise r.bad(f"tensor {_shown(tname)} has offset {offset}, expected {expected}")
        end = data_offset + offset + n_bytes
        if end > file_size:
            raise BadInputError(
                f"{name} is truncated: tensor {_shown(tname)} ends at byte {end} "
                f"but the file has {file_size} bytes."
            )
        expected = offset + n_bytes + (-n_bytes % alignment)
        out.append(GGUFTensor(tname, type_id, type_name, shape, offset, n_bytes))

    return GGUFHeader(
        source=name,
        version=version,
        metadata=metadata,
        tensors=tuple(out),
        alignment=alignment,
        data_offset=data_offset,
        file_size=file_size,
        bytes_read=r.fetched,
    )


def _read_key(r: _Reader, i: int, metadata: dict[str, Any]) -> str:
    key = r.string(f"metadata key #{i}")
    if not key:
        raise r.bad(f"metadata key #{i} is empty")
    if key in metadata:
        raise r.bad(f"metadata key {_shown(key)} appears twice")
    return key


def _value_type(r: _Reader, type_id: int, key: str) -> GGUFValueType:
    try:
        return GGUFValueType(type_id)
    except ValueError:
        raise r.bad(f"metadata key {_shown(key)} has unknown value type {type_id}") from None


def _read_value(r: _Reader, key: str) -> Any:
    vtype = _value_type(r, r.u32(), key)
    if vtype == GGUFValueType.STRING:
        return r.string(f"the value of {_shown(key)}")
    if vtype != GGUFValueType.ARRAY:
        code, size = _SCALARS[vtype]
        return struct.unpack("<" + code, r.take(size))[0]

    item = _value_type(r, r.u32(), key)
    n = r.u64()
    if item == GGUFValueType.ARRAY:
        raise r.bad(f"metadata key {_shown(key)} is an array of arrays, which llama.cpp rejects")
    remaining = r.remaining() if r.size is not None else None
    if item == GGUFValueType.STRING:
        # every element has at least its 8-byte length prefix
        if remaining is not None and n * 8 > remaining:
            if n > MAX_ARRAY_ELEMENTS:
                raise r.bad(f"metadata array {_shown(key)} claims {n} strings, past the end of the file")
            raise r.truncated(r.pos + n * 8)
        if n <= SMALL_STRING_ARRAY:
            what = f"an element of {_shown(key)}"
            return ArrayInfo(item, n, tuple(r.string(what) for _ in range(n)))
        r.skip_strings(n, f"an element of {_shown(key)}")
        return ArrayInfo(item, n)
    code, size = _SCALARS[item]
    if remaining is not None and n * size > remaining:
        if n > MAX_ARRAY_ELEMENTS:
            raise r.bad(f"metadata array {_shown(key)} claims {n} elements, past the end of the file")
        raise r.truncated(r.pos + n * size)
    if n <= SMALL_ARRAY:
        return ArrayInfo(item, n, struct.unpack(f"<{n}{code}", r.take(n * size)))
    r.skip(n * size)
    return ArrayInfo(item, n)


def _read_tensor_info(
    r: _Reader, i: int, seen: set[str]
) -> tuple[str, int, str, tuple[int, ...], int, int]:
    raw = r.raw_string(f"the name of tensor #{i}")
    if len(raw) >= GGML_MAX_NAME:
        raise r.bad(f"tensor #{i} has a name longer than {GGML_MAX_NAME - 1} bytes")
    tname = raw.decode("utf-8", errors="replace")
    if tname in seen:
        raise r.bad(f"tensor {_shown(tname)} appears twice")
    seen.add(tname)
    n_dims = r.u32()
    if n_dims > GGML_MAX_DIMS:
        raise r.bad(f"tensor {_shown(tname)} has {n_dims} dimensions (at most {GGML_MAX_DIMS})")
    shape = tuple(r.i64() for _ in range(n_dims))
    n_elements = 1
    for d in shape:
        if d < 0:
            raise r.bad(f"tensor {_shown(tname)} has a negative dimension {d}")
        n_elements *= d
        if n_elements >= 2**63:
            raise r.bad(f"tensor {_shown(tname)} has shape {list(shape)}, too large to exist")
    type_id = r.i32()
    info = tensor_type_info(type_id)
    if info is None:
        raise r.bad(f"tensor {_shown(tname)} has unknown tensor type {type_id}")
    type_name, block, block_bytes = info
    ne0 = shape[0] if shape else 1
    if ne0 % block:
        raise r.bad(
            f"tensor {_shown(tname)} of type {type_name} has rows of {ne0} elements, "
            f"not a multiple of its block size {block}"
        )
    n_bytes = n_elements // block * block_bytes
    if n_bytes >= 2**63:
        raise r.bad(f"tensor {_shown(tname)} would take {n_bytes} bytes")
    offset = r.u64()
    return tname, type_id, type_name, shape, offset, n_bytes


def read_header(
    path: str | os.PathLike[str], *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
) -> GGUFHeader:
    """Parse the header of one local GGUF file (one part, for split models)."""
    with LocalFileSource(path) as src:
        return parse_header(src, max_header_bytes=max_header_bytes)
