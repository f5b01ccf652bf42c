"""PCIe link -> host<->device bandwidth (one direction), shared by NVML and sysfs readers."""

from __future__ import annotations

# Usable GB/s per lane after line encoding (8b/10b for gen 1-2, 128b/130b for 3-5, FLIT for 6).
_PER_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# sysfs current_link_speed "16.0 GT/s PCIe" -> generation
_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def pcie_gbs(gen: int | None, width: int | None) -> float | None:
    if not gen or not width or gen not in _PER_LANE_GBS or width <= 0:
        return None
    return round(_PER_LANE_GBS[gen] * width, 1)


def gen_from_speed(text: str) -> int | None:
    """Generation from a sysfs link speed such as "16.0 GT/s PCIe" (None if unknown)."""
    try:
        gts = float(text.strip().split()[0])
    except (IndexError, ValueError):
        return None
    return _GEN_BY_GTS.get(gts)
