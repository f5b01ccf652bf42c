"""Check an image before it reaches llama.cpp: one sentence for a bad one, never a crash.

mtmd decodes images with stb_image (JPEG, PNG, BMP, GIF, TGA, PNM, PSD, HDR): it reads
the whole picture into RGB in memory before resizing it to the projector's size, and a
file cut short may decode to a half-grey picture without a word. So the header is read
here first (format, width, height, without decoding), the size is bounded, and the end
marker that every complete PNG, JPEG and GIF carries is required.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

from rooflight.errors import BadInputError

MAX_IMAGE_BYTES = 50 * 1024 * 1024  # a 50 MB photo is already far beyond any projector's input
MAX_IMAGE_PIXELS = 64 * 1024 * 1024  # decoded RGB: 192 MB; stb would allocate it all at once

# Some writers pad or append a few bytes after a PNG's IEND or a JPEG's EOI; a cut-short
# file has neither in its last bytes (JPEG scan data escapes 0xFF, so EOI cannot occur there).
_TAIL = 64

_MIME = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "bmp": "image/bmp"}


@dataclass(frozen=True)
class ImageData:
    data: bytes
    format: str  # png | jpeg | gif | bmp
    width: int
    height: int
    sha256: str
    name: str = ""  # the file name it came from, for messages

    @property
    def mime(self) -> str:
        return _MIME[self.format]

    @property
    def extension(self) -> str:
        return "jpg" if self.format == "jpeg" else self.format

    def data_url(self) -> str:
        import base64

        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


def _png(data: bytes) -> tuple[int, int, bool]:
    if len(data) < 33 or data[12:16] != b"IHDR":
        raise ValueError("no IHDR")
    w, h = struct.unpack(">II", data[16:24])
    return w, h, b"IEND\xaeB`\x82" in data[-_TAIL:]


def _jpeg(data: bytes) -> tuple[int, int, bool]:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        (length,) = struct.unpack(">H", data[i + 2:i + 4])
        # SOF0-SOF15 except DHT (C4), JPG (C8), DAC (CC) carry the frame size
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return w, h, b"\xff\xd9" in data[-_TAIL:]
        i += 2 + length
    raise ValueError("no frame header")


def _gif(data: bytes) -> tuple[int, int, bool]:
    w, h = struct.unpack("<HH", data[6:10])
    return w, h, data.rstrip(b"\x00").endswith(b";")  # a ';' inside LZW data is common


def _bmp(data: bytes) -> tuple[int, int, bool]:
    size, = struct.unpack("<I", data[2:6])
    w, h = struct.unpack("<ii", data[18:26])
    return abs(w), abs(h), len(data) >= size


def _sniff(data: bytes) -> tuple[str, tuple[int, int, bool]]:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png", _png(data)
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg", _jpeg(data)
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif", _gif(data)
    if data[:2] == b"BM" and len(data) >= 26:
        return "bmp", _bmp(data)
    raise LookupError


def check_image(data: bytes, name: str = "the image") -> ImageData:
    """The image's format and size, or BadInputError with one sentence saying what is wrong."""
    if len(data) > MAX_IMAGE_BYTES:
        raise _too_big(name, len(data))
    try:
        fmt, (w, h, complete) = _sniff(data)
    except LookupError:
        raise BadInputError(f"{name} is not a PNG, JPEG, GIF or BMP image, so the model cannot read it.") from None
    except (ValueError, struct.error):
        raise BadInputError(f"{name} is a damaged {_sniff_name(data)} file (its header cannot be read).") from None
    if w <= 0 or h <= 0:
        raise BadInputError(f"{name} says it is {w} x {h} pixels; it is damaged.")
    if w * h > MAX_IMAGE_PIXELS:
        raise BadInputError(f"{name} is {w} x {h} pixels ({w * h / 1e6:.0f} megapixels); images up to "
                            f"{MAX_IMAGE_PIXELS // (1024 * 1024)} megapixels can be attached, so scale it down first.")
    if not complete:
        raise BadInputError(f"{name} is cut short (the {fmt.upper()} file has no end); save or download it again.")
    return ImageData(data, fmt, w, h, hashlib.sha256(data).hexdigest(), name)


def _sniff_name(data: bytes) -> str:
    return {b"\x89P": "PNG", b"\xff\xd8": "JPEG", b"GI": "GIF", b"BM": "BMP"}.get(data[:2], "image")


def _too_big(name: str, n_bytes: int) -> BadInputError:
    return BadInputError(f"{name} is {n_bytes / 1e6:.0f} MB; images up to "
                         f"{MAX_IMAGE_BYTES // (1024 * 1024)} MB can be attached, so scale it down first.")


def read_image(path: str | Path) -> ImageData:
    """Read and check an image file; BadInputError for a missing, unreadable or bad one."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_IMAGE_BYTES:  # not read at all
            raise _too_big(p.name, size)
        data = p.read_bytes()
    except FileNotFoundError:
        raise BadInputError(f"{p} does not exist; give the path of an image file.") from None
    except IsADirectoryError:
        raise BadInputError(f"{p} is a folder; give the path of an image file.") from None
    except OSError as exc:
        raise BadInputError(f"{p} cannot be read ({exc.strerror or exc}).") from None
    return check_image(data, p.name)
