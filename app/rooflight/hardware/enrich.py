"""Fill a detected GPU's missing figures (bandwidth, FP16, memory, SMs) from the GPU table."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .gpu_table import lookup_gpu
from .profile import GPUInfo
from .ram_speed import RamModules

# Beyond this relative difference a detected NVML bandwidth is not believed (see below).
BANDWIDTH_TOLERANCE = 0.25
_WORDS = {"bandwidth_gbs": "memory bandwidth", "fp16_tflops": "FP16 throughput"}


def table_figures(entry: dict[str, Any], sm_count: int | None = None) -> dict[str, Any]:
    """The table's bandwidth / FP16 / memory for one device described by `entry`.

    MI250/MI250X: Linux lists each of the package's two dies as its own GPU, so per device
    the figures are half the package's. Apple: FP16 scales with the GPU-core count that
    ioreg reported, and some chips' bandwidth depends on it (M3 Max 30-core: 300 GB/s).
    """
    per = entry.get("devices_per_package") or 1
    bw = entry["bandwidth_gbs"] / per
    fp16 = entry["fp16_tflops"] / per
    cores = entry.get("gpu_cores")
    if entry["vendor"] == "apple" and cores and sm_count and sm_count != cores:
        fp16 = entry["fp16_tflops"] * sm_count / cores
        by_cores = entry.get("bandwidth_by_cores") or {}
        bw = by_cores.get(str(sm_count), bw)
    return {
        "bandwidth_gbs": round(bw, 2),
        "fp16_tflops": round(fp16, 2),
        "memory_bytes": entry["memory_bytes"] // per,
        "sm_count": entry["sm_count"] // per if entry.get("sm_count") else None,
        "compute_capability": entry.get("compute_capability"),
    }


def ram_assumption(entry: dict[str, Any], bandwidth_gbs: float) -> str:
    """What an integrated GPU's figure assumes of the RAM it reads, for a platform that takes
    more than one RAM type (the table's `ram_varies`): "the table assumes ...; ... Estimates
    use 120 GB/s"."""
    return f"{entry['ram_varies']}. Estimates use {bandwidth_gbs:g} GB/s"


def enrich_detected(gpu: GPUInfo, ram: RamModules | None = None) -> tuple[GPUInfo, list[str]]:
    """The detected GPU with gaps filled from the table, and warnings. ram: this machine's
    memory modules (ram_speed.py), which set an integrated GPU's bandwidth where its
    platform takes more than one RAM type (the table's `ram_varies`)."""
    memory_hint = None if gpu.unified_memory else gpu.vram_total_bytes
    entry = lookup_gpu(gpu.name, memory_hint)
    if entry is None:
        missing = [f for f in ("bandwidth_gbs", "fp16_tflops") if getattr(gpu, f) is None]
        if not missing:
            return gpu, []
        return gpu, [
            f"GPU {gpu.index} ({gpu.name}) is not in Rooflight's GPU table, so its "
            f"{' and '.join(_WORDS[m] for m in missing)} {'are' if len(missing) > 1 else 'is'} "
            "unknown and estimates for it are rough; give the figures in a --hardware profile"
        ]
    t = table_figures(entry, gpu.sm_count)
    changes: dict[str, Any] = {}
    warnings: list[str] = []
    bw = gpu.bandwidth_gbs
    if bw is None:
        changes["bandwidth_gbs"] = t["bandwidth_gbs"]
        if entry.get("ram_varies"):
            # an integrated GPU reads the machine's RAM: its modules' speed and width over
            # the platform's bus where the firmware's table gives them, else the table's figure, said
            if ram is not None and entry.get("ram_bus_bits"):
                changes["bandwidth_gbs"] = ram.peak_gbs(entry["ram_bus_bits"])
                changes["source"] = "detected+table+RAM"
            else:
                warnings.append(
                    f"GPU {gpu.index} ({gpu.name}) reads this machine's RAM, whose speed Rooflight could not read: "
                    f"{ram_assumption(entry, t['bandwidth_gbs'])}; a --hardware profile with the GPU's "
                    "bandwidth_gbs corrects them")
    elif abs(bw - t["bandwidth_gbs"]) > BANDWIDTH_TOLERANCE * t["bandwidth_gbs"]:
        # NVML's clock x bus width is right for GDDR6/6X/7 and HBM as NVML reports them
        # today, but a driver that reports the memory clock in another convention (GDDR5X
        # quad-pumped, GDDR7 PAM3 symbol rate) or a board stuck in a low memory P-state
        # yields a figure off by 2x or more. Within 25% the detected figure is kept (it
        # catches factory-overclocked memory); beyond that the vendor's spec is safer.
        changes["bandwidth_gbs"] = t["bandwidth_gbs"]
        warnings.append(
            f"GPU {gpu.index} ({gpu.name}): the driver's memory clock gives {bw:.0f} GB/s but "
            f"the {entry['name']} is specified at {t['bandwidth_gbs']:.0f} GB/s; using the "
            "specification"
        )
    if gpu.fp16_tflops is None:
        changes["fp16_tflops"] = t["fp16_tflops"]
    if gpu.vram_total_bytes is None:
        changes["vram_total_bytes"] = t["memory_bytes"]
    if gpu.sm_count is None and t["sm_count"]:
        changes["sm_count"] = t["sm_count"]
    if gpu.compute_capability is None and t["compute_capability"]:
        changes["compute_capability"] = t["compute_capability"]
    if changes:
        changes.setdefault("source", "detected+table")
    return replace(gpu, **changes), warnings
