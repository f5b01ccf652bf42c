"""AMD GPUs as ROCm's kernel driver (KFD) describes them: the ISA target and the active
compute units of each GPU node, from /sys/class/kfd/kfd/topology/nodes/N/properties.

The PCI device id does not tell an RX 7900 XTX (96 CUs) from an XT (84) or a GRE (80),
nor names an integrated GPU (Strix Halo's 8060S / 8050S / 8040S are one id with 40, 32
and 16 CUs); the ISA target and the CU count do, and KFD publishes both for every GPU the
amdgpu driver runs, ROCm installed or not. The CU count is simd_count / simd_per_cu (the
active units: a cut-down part reports its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .sysfs import read_text


@dataclass(frozen=True)
class KfdGpu:
    gfx: str  # "gfx1151"
    compute_units: int


def gfx_target(version: int) -> str | None:
    """KFD's gfx_target_version (major * 10000 + minor * 100 + stepping) as the ISA name
    LLVM and ROCm use: 110501 -> "gfx1151", 90402 -> "gfx942", 90010 -> "gfx90a"."""
    major, minor, stepping = version // 10000, version // 100 % 100, version % 100
    if major == 0 or minor > 9 or stepping > 15:
        return None
    return f"gfx{major}{minor}{stepping:x}"


def _properties(path: Path) -> dict[str, int]:
    out = {}
    for line in (read_text(path) or "").splitlines():
        key, _, value = line.partition(" ")
        try:
            out[key] = int(value)
        except ValueError:
            continue
    return out


def kfd_gpus(sysfs_root: Path = Path("/sys")) -> dict[str, KfdGpu]:
    """PCI bus id ("0000:c6:00.0") -> KfdGpu for each GPU node; {} without KFD."""
    nodes = sysfs_root / "class" / "kfd" / "kfd" / "topology" / "nodes"
    found: dict[str, KfdGpu] = {}
    try:
        entries = sorted(nodes.iterdir())
    except OSError:
        return found
    for node in entries:
        p = _properties(node / "properties")
        gfx = gfx_target(p.get("gfx_target_version", 0))
        simd, per_cu = p.get("simd_count", 0), p.get("simd_per_cu", 0)
        if gfx is None or simd <= 0 or per_cu <= 0:
            continue  # a CPU node, or a GPU the driver describes only in part
        loc = p.get("location_id", 0)  # bus << 8 | device << 3 | function
        bus = f"{p.get('domain', 0):04x}:{loc >> 8 & 0xFF:02x}:{loc >> 3 & 0x1F:02x}.{loc & 0x7:x}"
        found[bus] = KfdGpu(gfx, simd // per_cu)
    return found
