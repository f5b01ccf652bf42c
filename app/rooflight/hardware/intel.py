"""Intel Arc (discrete) GPUs on Linux, from DRM sysfs.

Neither mainline i915 nor xe publishes free VRAM, and only some publish the total:
  - xe: device/tileN/physical_vram_size_bytes (physical VRAM per tile, summed);
  - Intel's out-of-tree (DKMS) i915: cardN/lmem_total_bytes;
  - mem_info_vram_total, in case a driver adopts amdgpu's name.
A card with none of these is still taken as discrete when its PCI id is a known Arc board
(memory then comes from the GPU table); anything else on vendor 0x8086 is an integrated GPU
sharing system RAM, which is not listed. Free VRAM stays unknown (None = all free).
"""

from __future__ import annotations

from pathlib import Path

from .gpu_table import lookup_pci_id
from .profile import GPUInfo
from .sysfs import cards, link_gbs, read_int, read_text

INTEL_VENDOR = "0x8086"


def _vram_total(card: Path, dev: Path) -> int | None:
    tiles = 0
    for t in range(8):
        size = read_int(dev / f"tile{t}" / "physical_vram_size_bytes")
        if size is None:
            break
        tiles += size
    if tiles:
        return tiles
    return read_int(card / "lmem_total_bytes") or read_int(dev / "mem_info_vram_total")


def detect_intel(sysfs_root: Path = Path("/sys")) -> tuple[list[GPUInfo], list[str]]:
    """Every discrete Intel GPU, in card order, and warnings."""
    gpus: list[GPUInfo] = []
    warnings: list[str] = []
    for _n, card, dev in cards(sysfs_root, INTEL_VENDOR):
        device_id = (read_text(dev / "device") or "").lower()
        known = lookup_pci_id(INTEL_VENDOR, device_id)
        total = _vram_total(card, dev)
        if total is None and not known:
            continue  # integrated graphics: shares system RAM, nothing to offload to
        name = known[0]["name"] if known else f"Intel GPU {device_id}"
        if known and total is not None:  # A770 8 GB and 16 GB share an id
            name = min(known, key=lambda e: abs(e["memory_bytes"] - total))["name"]
        gpus.append(
            GPUInfo(
                index=len(gpus),
                name=name,
                vendor="intel",
                vram_total_bytes=total,  # None: filled from the table by name
                vram_free_bytes=None,
                bandwidth_gbs=None,
                fp16_tflops=None,
                unified_memory=False,
                pcie_gbs=link_gbs(dev),
                source="detected",
            )
        )
    return gpus, warnings
