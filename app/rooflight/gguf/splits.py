"""Split models ("name-00001-of-00003.gguf"): read every part's header.

llama.cpp's gguf-split writes `split.count`, `split.no` (0-based) and `split.tensors.count`
into each part and names the parts `{prefix}-{no+1:05d}-of-{count:05d}.gguf`; the first
part carries the model's metadata and each part its own tensors. The model's size is
the sum of the parts, and a missing part means the model cannot load.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from gguf import Keys

from rooflight.errors import BadInputError

from .header import DEFAULT_MAX_HEADER_BYTES, GGUFHeader, parse_header, read_header
from .remote import HubFile, HubNotFoundError, is_hf_uri, open_hub_source, parse_hf_uri
from .split_names import MAX_PARTS, split_part_names  # noqa: F401 - importable from here too


def _int(meta: dict[str, Any], key: str) -> int | None:
    v = meta.get(key)
    return v if type(v) is int else None


def read_parts(
    part_names: list[str], read_one: Callable[[str], GGUFHeader], *, missing: type[Exception]
) -> list[GGUFHeader]:
    """Read each part's header in order; check their split keys agree with the names."""
    headers: list[GGUFHeader] = []
    count = len(part_names)
    for i, part in enumerate(part_names):
        try:
            h = read_one(part)
        except missing:
            raise BadInputError(
                f"{PurePosixPath(part).name} is missing: the model is split into {count} "
                f"parts and all of them are needed."
            ) from None
        n = _int(h.metadata, Keys.Split.LLM_KV_SPLIT_COUNT)
        no = _int(h.metadata, Keys.Split.LLM_KV_SPLIT_NO)
        if count > 1 and (n != count or no != i):
            raise BadInputError(
                f"{h.source} does not belong with its neighbours: its split keys say part "
                f"{'?' if no is None else no + 1} of {n}, its name says part {i + 1} of {count}."
            )
        headers.append(h)
    if count > 1:
        declared = _int(headers[0].metadata, Keys.Split.LLM_KV_SPLIT_TENSORS_COUNT)
        total = sum(len(h.tensors) for h in headers)
        if declared is not None and declared != total:
            raise BadInputError(
                f"{headers[0].source} says the model has {declared} tensors but its "
                f"{count} parts hold {total}."
            )
    return headers


def _single_part_check(h: GGUFHeader) -> None:
    n = _int(h.metadata, Keys.Split.LLM_KV_SPLIT_COUNT)
    if n is not None and n > 1:
        raise BadInputError(
            f"{h.source} is one part of a model split into {n} files, but its name does not "
            "follow the NAME-00001-of-0000N.gguf pattern, so the other parts cannot be found."
        )


class _PartMissing(Exception):
    pass


def read_local_headers(
    path: str | Path, *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
) -> list[GGUFHeader]:
    path = Path(path)
    names = split_part_names(path.name)
    if names is None:
        h = read_header(path, max_header_bytes=max_header_bytes)
        _single_part_check(h)
        return [h]

    def read_one(name: str) -> GGUFHeader:
        p = path.with_name(name)
        if not p.exists():
            raise _PartMissing(name)
        return read_header(p, max_header_bytes=max_header_bytes)

    return read_parts(names, read_one, missing=_PartMissing)


def read_remote_headers(
    ref: HubFile, *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES, timeout: float | None = None
) -> list[GGUFHeader]:
    path = PurePosixPath(ref.filename)
    names = split_part_names(path.name)

    def read_one(filename: str) -> GGUFHeader:
        src = open_hub_source(ref.with_filename(filename), timeout=timeout)
        return parse_header(src, max_header_bytes=max_header_bytes)

    if names is None:
        h = read_one(ref.filename)
        _single_part_check(h)
        return [h]
    parent = "" if str(path.parent) == "." else f"{path.parent}/"

    def read_part(filename: str) -> GGUFHeader:
        try:
            return read_one(filename)
        except HubNotFoundError:
            # a 404 on a later part: that part is missing, say which
            if filename != parent + names[0]:
                raise _PartMissing(filename) from None
            raise

    return read_parts([parent + n for n in names], read_part, missing=_PartMissing)


def read_headers(
    source: str | Path, *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
) -> list[GGUFHeader]:
    """Every part's header for a local path or an hf: URI (one element if not split)."""
    if isinstance(source, str) and is_hf_uri(source):
        return read_remote_headers(parse_hf_uri(source), max_header_bytes=max_header_bytes)
    return read_local_headers(source, max_header_bytes=max_header_bytes)
