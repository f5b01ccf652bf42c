"""NVIDIA GPUs through NVML (the nvidia-ml-py package, imported as pynvml).

Every NVML call can raise NVMLError (old driver, MIG, a function the board does not
support): each failure costs only that figure and adds a warning; nothing here raises.

A GPU that shares its system's memory (DGX Spark's GB10, Jetson Thor: the table's
unified_memory entries) has no memory of its own to report: NVML answers Not Supported
(NVIDIA's DGX Spark known issues, "nvidia-smi reports memory usage Not Supported"). llama.cpp
takes such a device (cudaDeviceProp.integrated) as an integrated GPU whose memory is the
RAM: cudaMemGetInfo's total, and /proc/meminfo's MemAvailable as free (ggml-cuda.cu,
ggml_backend_cuda_device_get_memory). So it is listed as a unified-memory GPU of the RAM's
size, whose use comes out of the RAM, as an Apple chip's does.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .device_order import visible_to_cuda
from .gpu_table import lookup_gpu
from .pcie import pcie_gbs
from .profile import GPUInfo

# CUDA cores per SM by compute-capability major.minor, to turn nvmlDeviceGetNumGpuCores into
# an SM count where nvmlDeviceGetAttributes is not supported (it is meant for MIG handles).
_CORES_PER_SM = {"6.0": 64, "7.0": 64, "7.5": 64, "8.0": 64}
_DEFAULT_CORES_PER_SM = 128  # 6.1, 8.6, 8.9, 9.0, 10.x, 12.x

# NVML error codes that mean "no NVIDIA driver here": a normal state, not worth a warning.
_NO_DRIVER_CODES = (9, 12)  # NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_LIBRARY_NOT_FOUND


def _import_pynvml() -> ModuleType | None:
    try:
        return importlib.import_module("pynvml")
    except Exception:
        return None


def memory_bandwidth_gbs(mem_clock_mhz: float, bus_width_bits: int) -> float:
    """Peak bandwidth from NVML's max memory clock and bus width.

    NVML reports the memory clock such that two transfers happen per reported cycle for
    GDDR6/GDDR6X/GDDR7 and HBM alike (RTX 4090: 10501 MHz x 384 bit x 2 / 8 = 1008 GB/s;
    A100: 1215 MHz x 5120 bit x 2 / 8 = 1555 GB/s), hence the factor 2.
    """
    return round(mem_clock_mhz * bus_width_bits * 2 / 8 / 1000, 1)


def _decode(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def detect_nvidia(
    nvml: ModuleType | None = None, *, ram_total_bytes: int | None = None,
    board: dict[str, Any] | None = None,
) -> tuple[list[GPUInfo], list[str]]:
    """Every NVIDIA GPU NVML sees, in NVML order, and warnings. A unified-memory GPU's
    memory is the RAM's size (ram_total_bytes; the table's pool when it is not given).
    `board`: the GPU table's entry for the Jetson board this runs on (jetson.py), the name
    of NVML's one GPU where the table does not know NVML's ("NVIDIA Thor")."""
    nvml = nvml if nvml is not None else _import_pynvml()
    if nvml is None:
        return [], []
    error_type: type[BaseException] = getattr(nvml, "NVMLError", Exception)
    try:
        nvml.nvmlInit()
    except error_type as exc:
        if getattr(exc, "value", None) in _NO_DRIVER_CODES:
            return [], []
        return [], [
            f"NVIDIA driver found but NVML would not start ({exc}); NVIDIA GPUs are not listed"
        ]
    except Exception:  # no libnvidia-ml at all (OSError and friends): simply no NVIDIA GPU
        return [], []
    warnings: list[str] = []
    gpus: list[GPUInfo] = []
    try:
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:
            return [], [f"NVML could not count the NVIDIA GPUs ({exc})"]
        for i in range(count):
            gpu = _read_device(nvml, i, warnings, ram_total_bytes, board if count == 1 else None)
            if gpu is not None:
                gpus.append(gpu)
        # what CUDA (and so llama.cpp) will see: CUDA_VISIBLE_DEVICES hides and reorders
        gpus, more = visible_to_cuda(gpus, os.environ)
        warnings.extend(more)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    return gpus, warnings


def _read_device(nvml: ModuleType, i: int, warnings: list[str],
                 ram_total_bytes: int | None = None, board: dict[str, Any] | None = None) -> GPUInfo | None:
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
    except Exception as exc:
        warnings.append(f"NVIDIA GPU {i} could not be opened through NVML ({exc}); it is left out")
        return None
    label = f"NVIDIA GPU {i}"

    def call(what: str, fn: str, *args: Any, quiet: bool = False) -> Any:
        f: Callable[..., Any] | None = getattr(nvml, fn, None)
        try:
            if f is None:
                raise AttributeError(f"{fn} is not in this pynvml")
            return f(handle, *args)
        except Exception as exc:
            if not quiet:
                warnings.append(f"{label}: could not read its {what} ({exc})")
            return None

    name_raw = call("name", "nvmlDeviceGetName")
    name = _decode(name_raw) if name_raw is not None else label
    label = f"NVIDIA GPU {i} ({name})" if name_raw is not None else label

    entry = lookup_gpu(name) if name_raw is not None else None
    if entry is None and board is not None:  # a Jetson: the device tree names the board
        entry, name = board, board["name"]
    unified = bool(entry and entry.get("unified_memory"))
    mem = call("memory size and free memory", "nvmlDeviceGetMemoryInfo", quiet=unified)
    total = int(mem.total) if mem is not None and mem.total else None
    free = int(mem.free) if mem is not None and mem.total else None
    if unified:  # the RAM is its memory; detection bounds what is free by the RAM free now
        total, free = ram_total_bytes or total, None

    bandwidth = None
    # (a unified-memory GPU's come from the table: NVML has no memory clock for it to give)
    clock = call("memory clock", "nvmlDeviceGetMaxClockInfo", getattr(nvml, "NVML_CLOCK_MEM", 2), quiet=unified)
    bus = call("memory bus width", "nvmlDeviceGetMemoryBusWidth", quiet=unified)
    if clock and bus:
        bandwidth = memory_bandwidth_gbs(float(clock), int(bus))

    cc = call("compute capability", "nvmlDeviceGetCudaComputeCapability")
    capability = f"{int(cc[0])}.{int(cc[1])}" if cc else None

    sm_count = None
    attrs = call("SM count", "nvmlDeviceGetAttributes", quiet=True)
    if attrs is not None and getattr(attrs, "multiprocessorCount", None):
        sm_count = int(attrs.multiprocessorCount)
    else:
        cores = call("CUDA core count", "nvmlDeviceGetNumGpuCores", quiet=True)
        if cores:
            per_sm = _CORES_PER_SM.get(capability or "", _DEFAULT_CORES_PER_SM)
            sm_count = int(cores) // per_sm or None

    # The CURRENT link generation drops to gen 1 at idle to save power, so ask for the
    # maximum the GPU and this slot support together, then fall back to the current one.
    gen = call("PCIe generation", "nvmlDeviceGetMaxPcieLinkGeneration", quiet=True)
    gen = gen or call("PCIe generation", "nvmlDeviceGetCurrPcieLinkGeneration", quiet=True)
    width = call("PCIe width", "nvmlDeviceGetMaxPcieLinkWidth", quiet=True)
    width = width or call("PCIe width", "nvmlDeviceGetCurrPcieLinkWidth", quiet=True)

    # A GPU split into MIG instances runs CUDA work in one instance, with that instance's
    # share of the memory and SMs; NVML's figures above are the whole GPU's. Which instance
    # a process gets depends on CUDA_VISIBLE_DEVICES and the CUDA version, so Rooflight
    # does not guess: it says so, and a profile (--hardware) can give the instance's memory.
    mig = call("MIG mode", "nvmlDeviceGetMigMode", quiet=True)
    if mig is not None and int(mig[0]) == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
        warnings.append(f"{label} is split into MIG instances: Rooflight plans for the whole GPU's memory and speed, "
                        "which one instance does not have; give the instance's in a profile (--hardware FILE).")

    pci = call("PCI bus id", "nvmlDeviceGetPciInfo", quiet=True)
    bus_id = getattr(pci, "busId", None) if pci is not None else None

    return GPUInfo(
        index=i,
        name=name,
        vendor="nvidia",
        vram_total_bytes=total,
        vram_free_bytes=free,
        bandwidth_gbs=bandwidth,
        fp16_tflops=None,  # NVML does not say; filled from the GPU table by name
        unified_memory=unified,
        compute_capability=capability,
        sm_count=sm_count,
        # a unified-memory GPU reads its weights where they are: no host link to pay
        pcie_gbs=None if unified else pcie_gbs(int(gen) if gen else None, int(width) if width else None),
        source="detected",
        pci_bus_id=_decode(bus_id) if bus_id else None,
    )
