"""NVIDIA Jetson boards, from the device tree's model string.

A Jetson's GPU shares the board's RAM, and NVML does not describe it: Orin (JetPack 6) has
no NVML at all, and Thor's reports the GPU as "NVIDIA Thor", a name its T5000 and T4000
modules share, with memory "Not Supported". The board says what it is in the device tree
(/sys/firmware/devicetree/base/model, which /proc/device-tree links to): "NVIDIA Jetson
Orin Nano Engineering Reference Developer Kit Super", "NVIDIA Jetson AGX Thor Developer
Kit", "NVIDIA Jetson AGX Orin Developer Kit" (as jetson-stats and users' reports print it). A model the GPU table knows (its
unified-memory NVIDIA entries) is the GPU: llama.cpp's CUDA backend takes the device as
integrated (cudaDeviceProp.integrated) with the RAM as its memory
(ggml_backend_cuda_device_get_memory), and so does Rooflight: NVML's one GPU takes the
board's name (nvidia.py), or, where NVML lists none, the board's GPU is added.
"""

from __future__ import annotations

from pathlib import Path

from .gpu_table import lookup_gpu
from .profile import GPUInfo, shared_memory_gpu
from .sysfs import read_text


def board_entry(sysfs_root: Path, ram_total_bytes: int | None = None) -> dict | None:
    """The GPU table's entry for this Jetson board, or None (not a Jetson, or one the table
    lacks: a Xavier). The RAM tells modules under one board name apart: the AGX Orin
    developer kit's model string is the same with the 32GB and the 64GB module, the Orin NX
    reference carrier's (and its Super mode's) with the 8GB and the 16GB."""
    model = (read_text(sysfs_root / "firmware" / "devicetree" / "base" / "model") or "").strip("\x00 ")
    if not model.startswith("NVIDIA Jetson"):
        return None
    entry = lookup_gpu(model, ram_total_bytes)
    if entry is None or entry["vendor"] != "nvidia" or not entry.get("unified_memory"):
        return None
    return entry


def board_gpu(entry: dict, ram_total_bytes: int) -> GPUInfo:
    """The board's GPU where NVML lists none (Orin): the table's, with the RAM as memory."""
    return shared_memory_gpu(0, entry["name"], "nvidia", ram_total_bytes)
