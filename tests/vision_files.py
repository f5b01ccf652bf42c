"""Small real images and a generated vision model (language model + projector) for tests."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from rooflight.gguf.synthetic import write_model
from rooflight.gguf.synthetic_mmproj import write_projector


def png_bytes(width: int, height: int, seed: int = 0) -> bytes:
    """A complete RGB PNG of random pixels."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 256, (height, width * 3), dtype=np.uint8)
    raw = b"".join(b"\x00" + r.tobytes() for r in rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


def png_header_only(width: int, height: int) -> bytes:
    """The first bytes of a PNG that says it is width x height (a decompression bomb's look)."""
    return png_bytes(1, 1)[:8] + struct.pack(">I", 13) + b"IHDR" + struct.pack(
        ">IIBBBBB", width, height, 8, 2, 0, 0, 0) + b"\0\0\0\0"


def vision_model(folder: Path, *, n_merge: int = 4, n_embd: int = 64, projector_name: str | None = None,
                 **projector_kw) -> tuple[Path, Path]:
    """A gemma3 language model and its projector side by side in folder: (model, projector)."""
    folder.mkdir(parents=True, exist_ok=True)
    lm = write_model(folder / "vis-lm-F16.gguf", arch="gemma3", n_layer=2, n_embd=n_embd, n_head=4,
                     n_head_kv=2, n_ff=128, n_vocab=800, context_length=4096)
    proj = write_projector(folder / (projector_name or "mmproj-vis-lm-f16.gguf"), projection_dim=n_embd,
                           n_merge=n_merge, **projector_kw)
    return lm, proj
