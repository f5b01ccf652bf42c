"""The one byte formatter: sizes as people read them (decimal units, as disks and the
Hugging Face Hub count them). Every module that prints a size calls size_text."""

from __future__ import annotations

GB = 1e9
MB = 1e6


def size_text(n: float | None, digits: int = 2, *, mb_digits: int | None = None, mb_below: float = GB,
              auto: bool = False) -> str:
    """n bytes as text; None gives "?".

    - "12.35 GB" (`digits` decimals);
    - with mb_digits, sizes below `mb_below` in MB instead ("512.0 MB");
    - auto: the unit that keeps the number under 1000, one decimal ("814 B", "3.2 MB").
    """
    if n is None:
        return "?"
    if auto:
        if n < 1000:
            return f"{n} B"
        value = float(n)
        for unit in ("KB", "MB", "GB", "TB"):
            value /= 1000
            if value < 1000 or unit == "TB":
                break
        return f"{value:.1f} {unit}"
    if mb_digits is not None and n < mb_below:
        return f"{n / MB:.{mb_digits}f} MB"
    return f"{n / GB:.{digits}f} GB"
