"""GGUF file names: which files in a folder or repository are models, and their quant label.

Publishers (ggml-org, bartowski, unsloth, lmstudio-community...) name files
`<Model>-<QUANT>.gguf`, split models `<Model>-<QUANT>-00001-of-00003.gguf` (llama.cpp's
gguf-split naming), sometimes in a `<QUANT>/` folder. The quant label read from a name
is for display and for matching the quality table only: estimates always come from a
header (DESIGN.md: a ModelSpec is never built from a file name).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from rooflight.gguf.split_names import split_part_names

# Longest alternatives first; "UD-" is unsloth's dynamic-quant prefix, "_XL" its mixes.
_QUANT = re.compile(
    r"(?<![A-Za-z0-9])((?:UD-)?(?:"
    r"IQ[1-4]_(?:XXS|XS|NL|S|M)"
    r"|Q[2-8]_K(?:_(?:XXL|XL|L|M|S))?"
    r"|Q[4-8]_[01]|TQ[12]_0|MXFP4(?:_MOE)?|NVFP4|BF16|F16|FP16|F32|FP32"
    r"))(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SPLIT_SUFFIX = re.compile(r"-\d{5}-of-\d{5}\.gguf$", re.IGNORECASE)


def parse_quant(name: str) -> str | None:
    """The quant label in a file name ("Qwen3-8B-Q4_K_M.gguf" -> "Q4_K_M"), or None.

    The last label wins (a folder "Q8_0/model-Q8_0-00001-of-00002.gguf" agrees with
    itself; "Q4_K_M-imat" styles put it last). Returned upper-case, FP16 as F16.
    """
    found = _QUANT.findall(_SPLIT_SUFFIX.sub(".gguf", name))
    if not found:
        return None
    q = found[-1].upper()
    return {"FP16": "F16", "FP32": "F32"}.get(q, q)


def is_model_file(path: str) -> bool:
    """A .gguf that is a language model: not a vision projector (mmproj) or an
    importance matrix, which share the extension."""
    name = PurePosixPath(path).name.lower()
    return name.endswith(".gguf") and "mmproj" not in name and not name.startswith("imatrix")


@dataclass(frozen=True)
class FileGroup:
    """One model in a listing: a single file, or every part of a split model."""

    filename: str  # the path to load: the file, or the first part
    parts: tuple[str, ...]  # every part's path, in order (one element if not split)
    present: tuple[bool, ...]  # per part: found in the listing

    @property
    def complete(self) -> bool:
        return all(self.present)


def group_gguf(paths: Iterable[str]) -> list[FileGroup]:
    """Model files of a listing, split parts grouped into one entry each, sorted by name.

    A split model whose part 1 is absent is still listed (as incomplete), so that a
    half-downloaded or half-uploaded model shows up as such instead of disappearing.
    """
    groups: dict[str, FileGroup] = {}
    for path in sorted(set(paths)):
        if not is_model_file(path):
            continue
        p = PurePosixPath(path)
        try:
            names = split_part_names(p.name)
        except Exception:  # an impossible part number: treat it as an ordinary file
            names = None
        if names is None or len(names) == 1:
            groups[path] = FileGroup(path, (path,), (True,))
            continue
        parent = "" if str(p.parent) == "." else f"{p.parent}/"
        parts = tuple(parent + n for n in names)
        if parts[0] not in groups:
            groups[parts[0]] = FileGroup(parts[0], parts, tuple(False for _ in parts))
        g = groups[parts[0]]
        present = tuple(have or part == path for have, part in zip(g.present, parts, strict=True))
        groups[parts[0]] = FileGroup(g.filename, parts, present)
    return [groups[k] for k in sorted(groups)]
