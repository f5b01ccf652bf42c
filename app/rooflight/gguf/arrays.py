"""ArrayInfo: a GGUF metadata array, in a module of its own so that code reading layouts
from metadata (gguf/swa.py, gguf/recurrent.py, gguf/from_config.py) needs neither the
header parser nor the gguf package (`rooflight rank` imports neither)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArrayInfo:
    """A metadata array: its element type and length, and its values when small.

    Large arrays (a vocabulary's tokens, scores, merges) keep only their length: the
    estimator needs the vocabulary size, not 262,144 strings.
    """

    item_type: int  # a gguf.GGUFValueType
    length: int
    values: tuple | None = None  # None when the body was skipped

    def __len__(self) -> int:
        return self.length
