"""Names of a split model's parts ("name-00001-of-00003.gguf"), as llama.cpp's gguf-split
writes them: `{prefix}-{no+1:05d}-of-{count:05d}.gguf`. Apart from splits.py (which reads
the parts' headers) so that listing files never imports the header reader.
"""

from __future__ import annotations

import re

from rooflight.errors import BadInputError

_SPLIT = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
MAX_PARTS = 1024


def split_part_names(filename: str) -> list[str] | None:
    """All part names of a split model from any one part's name, or None if not split."""
    m = _SPLIT.match(filename)
    if not m:
        return None
    count = int(m["count"])
    if not 1 <= int(m["no"]) <= count or count > MAX_PARTS:
        raise BadInputError(f"{filename} has an impossible split part number.")
    return [f"{m['prefix']}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]
