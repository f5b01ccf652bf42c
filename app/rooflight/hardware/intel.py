"""Intel GPUs on Linux, from DRM sysfs: discrete Arc boards and the integrated Arc GPUs of
Meteor, Lunar, Arrow and Panther Lake.

Neither mainline i915 nor xe publishes free VRAM, and only some publish the total:
  - xe: device/tileN/physical_vram_size_bytes (physical VRAM per tile, summed);
  - Intel's out-of-tree (DKMS) i915: cardN/lmem_total_bytes;
  - mem_info_vram_total, in case a driver adopts amdgpu's name.
A card with none of these is discrete when its PCI id is a known Arc board (memory then
comes from the GPU table); otherwise it is an integrated GPU sharing system RAM. Free VRAM
stays unknown (None = all free).

An integrated GPU the table knows by its PCI id (the entries marked unified_memory) is
listed as a unified-memory GPU of the RAM that llama.cpp's backends report for it
(integrated_memory_bytes); where one id is two products (Lunar Lake's 0x64a0: the Arc 130V
or 140V) the CPU's name picks (the entries' cpu_families). Older integrated GPUs (UHD, Iris
Xe), and Panther Lake's but the Arc B390, which the table does not have, are not listed:
plans keep to the CPU there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .gpu_table import lookup_pci_id, normalize
from .profile import GPUInfo, shared_memory_gpu
from .sysfs import cards, link_gbs, read_int, read_text

INTEL_VENDOR = "0x8086"
# Mesa's Vulkan driver (anv) gives an integrated GPU one device-local heap of half the RAM
# up to 4 GiB of it and 3/4 above (src/intel/vulkan/anv_physical_device.c,
# anv_compute_sys_heap_size), which ggml's Vulkan backend reports as the device's memory.
# Intel's compute runtime (github.com/intel/compute-runtime), which SYCL's Level Zero runs
# on, reports 80% of the RAM on Linux (DrmMemoryManager::getSystemSharedMemory and
# getPercentOfGlobalMemoryAvailable) less 450 MB for its own resources (Device::
# getGlobalMemorySize; older releases subtract nothing, which only leaves more).
_ANV_HALF_UP_TO = 4 << 30
_NEO_SHARE = 0.8
_NEO_INTERNAL_BYTES = 450 * 1024 * 1024  # MemoryConstants::megaByte is 1024 * 1024


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


def integrated_memory_bytes(ram_total_bytes: int) -> int:
    """The memory llama.cpp reports for an Intel integrated GPU on a machine with this much
    RAM: the smaller of what its Vulkan (Mesa) and SYCL (compute runtime) backends report,
    so a plan fits on either. Vulkan's is the smaller from 9 GB of RAM."""
    vulkan = ram_total_bytes // 2 if ram_total_bytes <= _ANV_HALF_UP_TO else ram_total_bytes * 3 // 4
    sycl = int(ram_total_bytes * _NEO_SHARE) - _NEO_INTERNAL_BYTES
    return max(0, min(vulkan, sycl))


def integrated_entry(candidates: list[dict[str, Any]], cpu_name: str,
                      device_id: str, warnings: list[str]) -> dict[str, Any] | None:
    """The table entry for an integrated GPU by its id: the one made for this CPU's family
    ("Core Ultra 5" -> Arc 130V); for a CPU whose name says none of them, the slowest of
    several, with a warning, and None for one (Panther Lake's 0xb080 is the Arc B390 in a
    Core Ultra X7 or X9; beside another CPU it may be a smaller GPU the table lacks)."""
    def words(text: str) -> str:  # "Intel(R) Core(TM) Ultra 7 258V" -> " core ultra 7 258 v "
        return f" {' '.join(normalize(text))} "

    cpu = words(cpu_name)
    for_cpu = [e for e in candidates if any(words(f) in cpu for f in e.get("cpu_families", ()))]
    if len(for_cpu) == 1:
        return for_cpu[0]
    if len(candidates) == 1:
        (entry,) = candidates
        warnings.append(
            f"Intel integrated GPU {device_id} is the {entry['name']} only in a "
            f"{' or '.join(entry['cpu_families'])}, not in this {cpu_name or 'CPU'}, and Rooflight's "
            "GPU table does not know which it is: it is not counted as a GPU"
        )
        return None
    slowest = min(candidates, key=lambda e: e["fp16_tflops"])
    names = ", ".join(e["name"] for e in candidates)
    warnings.append(
        f"Intel integrated GPU {device_id} could be any of {names}, and the CPU's name "
        f"({cpu_name or 'unknown'}) does not say which; Rooflight assumes the {slowest['name']} "
        "(the slowest); name the GPU in a --hardware profile to plan another"
    )
    return slowest


def detect_intel(
    sysfs_root: Path = Path("/sys"), *, ram_total_bytes: int | None = None, cpu_name: str = ""
) -> tuple[list[GPUInfo], list[str]]:
    """Every Intel GPU llama.cpp can offload to, in card order, and warnings. Integrated
    ones need the RAM's size (their memory is a share of it) and the CPU's name."""
    gpus: list[GPUInfo] = []
    warnings: list[str] = []
    for _n, card, dev in cards(sysfs_root, INTEL_VENDOR):
        device_id = (read_text(dev / "device") or "").lower()
        entries = lookup_pci_id(INTEL_VENDOR, device_id)
        known = [e for e in entries if not e.get("unified_memory")]
        integrated = [e for e in entries if e.get("unified_memory")]
        total = _vram_total(card, dev)
        if total is None and not known:
            if integrated and ram_total_bytes:
                entry = integrated_entry(integrated, cpu_name, device_id, warnings)
                if entry is None:
                    continue
                gpus.append(shared_memory_gpu(len(gpus), entry["name"], "intel",
                                              integrated_memory_bytes(ram_total_bytes)))
            continue  # older integrated graphics: not in the table, planned on the CPU
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
