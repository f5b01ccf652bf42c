"""AMD GPUs on Linux: amdgpu's sysfs files, with names from amdsmi when it is installed.

sysfs gives exact total and used VRAM (mem_info_vram_total / mem_info_vram_used) but no
marketing name except on Instinct boards (product_name). Without amdsmi the name comes
from the ISA target and compute-unit count KFD publishes (kfd.py: 96 CUs of gfx1100 is an
RX 7900 XTX, 84 an XT), else from the PCI device id; where one id covers several boards
(0x744c is the RX 7900 XTX, XT and GRE) the VRAM size usually tells them apart, and
otherwise the slowest is assumed.

An integrated GPU (an APU: Strix Halo's 8060S, the 890M, 780M...) has a BIOS carve-out as
its "VRAM", often 512 MiB, and reaches system RAM through the GTT (mem_info_gtt_total),
which llama.cpp uses: ROCm's HIP then reports the GTT's size as the device's memory (a
Ryzen AI Max+ 395 with a 4 GiB carve-out and a 96 GiB GTT: "Total VRAM: 98304 MiB",
noamsto/nix-amd-ai issue #42), and ggml's Vulkan backend adds up every memory heap of an
integrated GPU (ggml-vulkan.cpp, ggml_backend_vk_get_device_memory). So a GPU the table
marks as sharing its system's memory, with a GTT larger than its carve-out, is listed as
a unified-memory GPU of the GTT's size, whose use comes out of the RAM (as an Apple chip's
does); with a carve-out at least as large as the GTT it is listed by its carve-out, which
is what HIP uses then (a 64 GB carve-out: HIP "sees only the BIOS VRAM carveout",
defilantech/LLMKube issue #1155).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from .gpu_table import lookup_amd_target, lookup_gpu, lookup_pci_id
from .kfd import KfdGpu, kfd_gpus
from .profile import GPUInfo, shared_memory_gpu
from .sysfs import bus_id, cards, link_gbs, read_int, read_text

AMD_VENDOR = "0x1002"
# Below this, "VRAM" is the BIOS carve-out of an integrated GPU (APU), typically 512 MiB:
# offloading to it gains nothing, so it is not listed as a GPU.
MIN_DEDICATED_BYTES = 1 << 30

Importer = Callable[[str], ModuleType]


def _amdsmi_names(importer: Importer) -> dict[str, str]:
    """PCI bus id -> market name from amdsmi (ROCm's Python bindings), or {}."""
    try:
        smi = importer("amdsmi")
    except Exception:
        return {}
    names: dict[str, str] = {}
    try:
        smi.amdsmi_init()
        try:
            for h in smi.amdsmi_get_processor_handles():
                try:
                    bdf = str(smi.amdsmi_get_gpu_device_bdf(h)).lower()
                    name = str(smi.amdsmi_get_gpu_asic_info(h).get("market_name") or "")
                    if name and name.upper() != "N/A":
                        names[bdf] = name
                except Exception:
                    continue
        finally:
            smi.amdsmi_shut_down()
    except Exception:
        return names
    return names


def _memory_distance(vram: int) -> Callable[[dict], float]:
    """How far a table entry's memory (per device: an MI250X is two devices of half the
    package's memory) is from what this device has."""
    return lambda c: abs(c["memory_bytes"] / (c.get("devices_per_package") or 1) - vram)


def _name_from_target(target: KfdGpu | None, vram: int) -> str | None:
    """A table name from KFD's ISA target and CU count; among boards that differ only in
    memory (RX 7900 XTX and PRO W7900), the closest size."""
    candidates = lookup_amd_target(target.gfx, target.compute_units) if target else []
    if not candidates:
        return None
    return min(candidates, key=_memory_distance(vram))["name"]


def _name_from_pci(device_id: str, vram: int, warnings: list[str]) -> str:
    """A table name from the PCI id, choosing among boards by VRAM size."""
    candidates = lookup_pci_id(AMD_VENDOR, device_id)
    if not candidates:
        return f"AMD GPU {device_id}"
    distance = _memory_distance(vram)

    best = min(map(distance, candidates))
    closest = sorted(
        (c for c in candidates if distance(c) - best < 2**29), key=lambda c: c["fp16_tflops"]
    )
    chosen = closest[0]
    if len(closest) > 1:
        others = ", ".join(c["name"] for c in closest)
        warnings.append(
            f"AMD GPU with PCI id {device_id} could be any of {others}; Rooflight assumes the "
            f"{chosen['name']} (the slowest); install amdsmi to read the exact model"
        )
    return chosen["name"]


def detect_amd(
    sysfs_root: Path = Path("/sys"), *, importer: Importer = importlib.import_module
) -> tuple[list[GPUInfo], list[str]]:
    """Every amdgpu-driven GPU with dedicated VRAM, in card order, and warnings."""
    warnings: list[str] = []
    gpus: list[GPUInfo] = []
    found = list(cards(sysfs_root, AMD_VENDOR))
    if not found:
        return gpus, warnings
    market = _amdsmi_names(importer)
    targets = kfd_gpus(sysfs_root)
    for n, _card, dev in found:
        total = read_int(dev / "mem_info_vram_total")
        if total is None:
            continue  # not the amdgpu driver (radeon, vfio): nothing llama.cpp can use
        bdf = bus_id(dev).lower()
        name = (market.get(bdf) or read_text(dev / "product_name")
                or _name_from_target(targets.get(bdf), total) or "")
        entry = lookup_gpu(name) if name else None
        gtt = read_int(dev / "mem_info_gtt_total")
        if entry is not None and entry.get("unified_memory") and gtt is not None and gtt > total:
            # an APU reaching system RAM through the GTT: that RAM is its memory, and what
            # it takes the CPU side loses (vram_free None: detection bounds it by free RAM)
            gpus.append(shared_memory_gpu(len(gpus), name, "amd", gtt))
            continue
        if total < MIN_DEDICATED_BYTES:
            warnings.append(
                f"AMD integrated GPU card{n} has only {total / 2**20:.0f} MiB of dedicated "
                "memory and is not counted as a GPU"
                + ("" if entry is None else f" (a {name} whose shared memory, GTT, is not larger)")
            )
            continue
        used = read_int(dev / "mem_info_vram_used")
        free = max(0, total - used) if used is not None else None
        if not name:
            name = _name_from_pci((read_text(dev / "device") or "").lower(), total, warnings)
        gpus.append(
            GPUInfo(
                index=len(gpus),
                name=name,
                vendor="amd",
                vram_total_bytes=total,
                vram_free_bytes=free,
                bandwidth_gbs=None,  # sysfs does not say: filled from the GPU table by name
                fp16_tflops=None,
                unified_memory=False,
                pcie_gbs=link_gbs(dev),
                source="detected",
            )
        )
    return gpus, warnings
