"""Detect this machine: CPU, every GPU, and the llama.cpp backend. Never raises.

Each probe is injectable so tests run the whole path on fake NVML modules, fake sysfs
trees and fake sysctl output.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType

from .amd import detect_amd
from .apple import detect_apple
from .backend import detect_backend_build
from .bandwidth import ram_bandwidth
from .cpu import detect_cpu
from .enrich import enrich_detected
from .intel import detect_intel
from .jetson import board_entry, board_gpu
from .limits import process_share
from .nvidia import detect_nvidia
from .profile import CPUInfo, GPUInfo, HardwareProfile
from .ram_speed import UDEV_DMI, RamModules, parse_smbios_memory, raw_smbios, read_ram_modules
from .windows import detect_windows, present_driver_keys

Runner = Callable[[list[str]], str]
Importer = Callable[[str], ModuleType]


@dataclass(frozen=True)
class Probes:
    """Where detection looks. The defaults are the real machine."""

    sysfs_root: Path = Path("/sys")
    cpuinfo_path: Path = Path("/proc/cpuinfo")
    run: Runner | None = None  # sysctl / ioreg on macOS
    nvml: ModuleType | None = None  # None: import pynvml
    importer: Importer = field(default=importlib.import_module)  # llama_cpp, amdsmi
    llama_lib_dir: Path | None = None
    platform_name: str | None = None  # sys.platform
    machine: str | None = None  # platform.machine()
    # Windows: the driver keys of the display adapters present now (SetupAPI; None: all)
    present_adapters: Callable[[], set[str] | None] = present_driver_keys
    # udev's decoding of the firmware's memory table (ram_speed.py); None: the real one when
    # sysfs_root is the real /sys, else none (a test's tree does not read this machine's)
    udev_dmi: Path | None = None
    # Windows: the raw SMBIOS table (ram_speed.raw_smbios: GetSystemFirmwareTable)
    smbios: Callable[[], bytes | None] = raw_smbios


def _fallback_cpu() -> CPUInfo:
    s = process_share()
    return CPUInfo("unknown CPU", s.cores, s.threads, (), s.ram_total, s.ram_available, None, "unknown")


def detect_gpus(probes: Probes, cpu: CPUInfo | None = None) -> tuple[list[GPUInfo], list[str]]:
    """All GPUs, NVIDIA first, renumbered 0..n-1, figures filled from the table. A GPU that
    shares the RAM without reporting memory of its own (DGX Spark's GB10, a Jetson, an
    Intel integrated Arc) is sized from the CPU's RAM, a Jetson's named by its board
    (jetson.py) and an Intel one with the CPU's help (Arc 130V or 140V): without `cpu`,
    Jetsons without NVML and Intel's integrated GPUs are not listed."""
    found: list[GPUInfo] = []
    warnings: list[str] = []
    ram = cpu.ram_total_bytes if cpu else None
    cpu_name = cpu.name if cpu else ""
    board = board_entry(probes.sysfs_root, ram)  # a Jetson's, which NVML names badly or not at all
    readers: list[tuple[str, Callable[[], tuple[list[GPUInfo], list[str]]]]] = [
        ("NVIDIA", lambda: detect_nvidia(probes.nvml, ram_total_bytes=ram, board=board)),
        ("AMD", lambda: detect_amd(probes.sysfs_root, importer=probes.importer)),
        ("Intel", lambda: detect_intel(probes.sysfs_root, ram_total_bytes=ram, cpu_name=cpu_name)),
        (
            "Apple",
            lambda: detect_apple(
                probes.run, platform_name=probes.platform_name, machine=probes.machine
            ),
        ),
    ]
    if (probes.platform_name or sys.platform) == "win32":  # no sysfs: the registry
        readers.append(("AMD and Intel", lambda: detect_windows(
            probes.importer("winreg"), ram_total_bytes=ram, cpu_name=cpu_name,
            present=probes.present_adapters())))
    for vendor, read in readers:
        try:
            gpus, more = read()
        except Exception as exc:  # a probe bug must cost only that vendor's GPUs
            gpus, more = [], [f"{vendor} GPU detection failed ({type(exc).__name__}: {exc})"]
        found.extend(gpus)
        warnings.extend(more)
    if board is not None and ram and not any(g.vendor == "nvidia" for g in found):
        found.insert(0, board_gpu(board, ram))  # Orin: no NVML
    out: list[GPUInfo] = []
    # an AMD or Intel integrated GPU reads the RAM, a BIOS carve-out included
    modules = _ram_modules(probes) if any(g.vendor in ("amd", "intel") for g in found) else None
    for gpu in found:
        # One numbering across vendors. For NVIDIA this is NVML's order (PCI bus order),
        # which is CUDA's too when CUDA_DEVICE_ORDER=PCI_BUS_ID.
        gpu, more = enrich_detected(replace(gpu, index=len(out)), modules)
        out.append(gpu)
        warnings.extend(more)
    return out, warnings


def _ram_modules(probes: Probes) -> RamModules | None:
    """This machine's memory modules, for integrated GPUs' bandwidth (ram_speed.py): the raw
    SMBIOS table on Windows, udev's decoding of it on Linux (the real one only when sysfs is)."""
    if (probes.platform_name or sys.platform) == "win32":
        table = probes.smbios()
        return parse_smbios_memory(table) if table else None
    dmi = probes.udev_dmi or (UDEV_DMI if probes.sysfs_root == Path("/sys") else None)
    return read_ram_modules(dmi) if dmi else None


def _amx_warning() -> list[str]:
    """On an AMX CPU, whether the installed llama.cpp's AMX kernels crash here (measured
    once per build and machine by runtime/amx.py; loads then go without them)."""
    from rooflight.runtime import amx

    try:
        return [amx.NOTICE] if amx.amx_crashes() else []
    except Exception as exc:  # the check is advice: detection never fails on it
        return [f"llama.cpp's AMX kernels could not be checked ({type(exc).__name__}: {exc})"]


def _amx_weights() -> bool | None:
    """Whether the installed llama.cpp keeps weights in its AMX buffer here (None: unknown)."""
    from rooflight.runtime import amx

    try:
        return amx.amx_weights_here()
    except Exception:  # _amx_warning has said so
        return None


def detect(
    *,
    measure_bandwidth: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    probes: Probes | None = None,
) -> HardwareProfile:
    """Profile this machine. Never raises: whatever cannot be read becomes a warning."""
    probes = probes or Probes()
    warnings: list[str] = []
    try:
        cpu, more = detect_cpu(
            cpuinfo_path=probes.cpuinfo_path,
            run=probes.run,
            platform_name=probes.platform_name,
            machine=probes.machine,
        )
        warnings.extend(more)
    except Exception as exc:
        cpu = _fallback_cpu()
        warnings.append(f"CPU detection failed ({type(exc).__name__}: {exc})")
    if measure_bandwidth:
        try:
            gbs, source, more = ram_bandwidth(
                cpu.name, cpu.ram_total_bytes, cpu.cores, cache_dir_override=cache_dir
            )
            cpu = replace(cpu, ram_bandwidth_gbs=gbs, ram_bandwidth_source=source)
            warnings.extend(more)
        except Exception as exc:
            warnings.append(f"RAM bandwidth could not be measured ({type(exc).__name__}: {exc})")
    try:
        gpus, more = detect_gpus(probes, cpu)
        warnings.extend(more)
    except Exception as exc:
        gpus = []
        warnings.append(f"GPU detection failed ({type(exc).__name__}: {exc})")
    # Unified memory: what the GPU can use now is bounded by the RAM that is free now.
    gpus = [
        replace(g, vram_free_bytes=min(g.vram_total_bytes, cpu.ram_available_bytes))
        if g.unified_memory and g.vram_total_bytes is not None and g.vram_free_bytes is None
        else g
        for g in gpus
    ]
    try:
        backend, more, sycl_f16 = detect_backend_build(gpus, importer=probes.importer, lib_dir=probes.llama_lib_dir)
        warnings.extend(more)
    except Exception as exc:
        backend, sycl_f16 = "cpu", None
        warnings.append(f"llama.cpp backend detection failed ({type(exc).__name__}: {exc})")
    if "amx_int8" in cpu.isa and probes.importer is importlib.import_module and probes.llama_lib_dir is None:
        warnings.extend(_amx_warning())
        cpu = replace(cpu, amx_weights=_amx_weights())
    return HardwareProfile(cpu=cpu, gpus=tuple(gpus), backend=backend, warnings=tuple(warnings),
                           sycl_f16=sycl_f16)
