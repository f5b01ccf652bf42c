"""Small readers for Linux DRM sysfs (/sys/class/drm/cardN/device), shared by amd.py and
intel.py. The root is a parameter so tests build fake trees under a temporary folder."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from .pcie import gen_from_speed, pcie_gbs

_CARD = re.compile(r"card(\d+)$")  # not card0-DP-1 (connectors) nor renderD128


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def read_int(path: Path) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def cards(sysfs_root: Path, vendor_id: str) -> Iterator[tuple[int, Path, Path]]:
    """(card number, cardN dir, its PCI device dir) for each DRM card of one PCI vendor,
    in card order."""
    drm = sysfs_root / "class" / "drm"
    try:
        entries = list(drm.iterdir())
    except OSError:
        return
    found = []
    for entry in entries:
        m = _CARD.match(entry.name)
        if not m:
            continue
        dev = entry / "device"
        if (read_text(dev / "vendor") or "").lower() == vendor_id:
            found.append((int(m.group(1)), entry, dev))
    yield from sorted(found, key=lambda t: t[0])


def bus_id(dev: Path) -> str:
    """The PCI address ("0000:03:00.0"): the name of the directory the device link points to."""
    try:
        return dev.resolve().name
    except OSError:
        return dev.name


def link_gbs(dev: Path) -> float | None:
    """Host link bandwidth from the device's PCIe link files (max first: the current speed
    drops at idle). Behind AMD's on-board switch this can be the internal link."""
    for prefix in ("max", "current"):
        gen = gen_from_speed(read_text(dev / f"{prefix}_link_speed") or "")
        width = read_int(dev / f"{prefix}_link_width")
        gbs = pcie_gbs(gen, width)
        if gbs:
            return gbs
    return None
