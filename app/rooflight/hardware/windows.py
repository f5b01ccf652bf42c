"""AMD and Intel GPUs on Windows, from the display adapters' registry keys.

Windows has no sysfs and NVML covers NVIDIA only. Every display adapter's driver key under
HKLM\\SYSTEM\\CurrentControlSet\\Control\\Class\\{4d36e968-e325-11ce-bfc1-08002be10318}
(0000, 0001, ...) holds what its driver registered: `DriverDesc` (the name Device Manager
shows, "AMD Radeon RX 7900 XTX", "Intel(R) Arc(TM) 140V GPU (16GB)"), `MatchingDeviceId`
("PCI\\VEN_1002&DEV_744C...") and the dedicated memory in bytes,
`HardwareInformation.qwMemorySize` (the 64-bit successor of the MemorySize value of
Microsoft's "Registering Hardware Information"; that one and WMI's AdapterRAM are 32 bits
and stop at 4 GiB, so a board without qwMemorySize takes the table's memory for its name).
Free memory is not there (None: all free).

- A discrete board, or an AMD APU whose BIOS carve-out ("variable graphics memory", up to
  96 GB on Strix Halo) is at least MIN_DEDICATED_BYTES, is a GPU of its dedicated memory,
  as on Linux.
- An Intel integrated Arc GPU the table knows (by its driver's name, else its PCI id and
  the CPU's name, as intel.py) has 128 MiB of "dedicated" memory, a placeholder: it works
  from the shared RAM, whose size for the GPU is integrated_memory_bytes below.
- Other integrated GPUs with a token carve-out (most Radeon iGPUs' 512 MiB) are not
  counted, and a warning says so. NVIDIA adapters are NVML's.

A driver key stays after its card is taken out (Windows keeps non-present devices until
they are uninstalled), so only the keys of adapters present now are read: those SetupAPI
lists for the display class with DIGCF_PRESENT, each naming its driver key (SPDRP_DRIVER,
"{4d36e968-...}\\0001"). Where SetupAPI cannot be asked, every key is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from .amd import MIN_DEDICATED_BYTES
from .gpu_table import lookup_gpu, lookup_pci_id
from .intel import integrated_entry
from .profile import GPUInfo, shared_memory_gpu

DISPLAY_CLASS = r"SYSTEM\CurrentControlSet\Control\Class\{4d36e968-e325-11ce-bfc1-08002be10318}"
_VENDORS = {"1002": "amd", "8086": "intel"}
_PCI_ID = re.compile(r"ven_([0-9a-f]{4})&dev_([0-9a-f]{4})", re.IGNORECASE)
_ADAPTER_KEY = re.compile(r"\d{4}$")  # not "Properties" or "Configuration"
# Windows' video memory manager lets the GPUs share half the RAM (Microsoft, "Calculating
# Graphics Memory": TotalSystemMemoryAvailableForGraphics = max(RAM / 2, 64 MB); Intel's
# "Detecting Video Memory Budget": an integrated GPU's budget is the memory divided by two).
# Intel's compute runtime, under SYCL, reports 94% of that (WddmMemoryManager::
# getPercentOfGlobalMemoryAvailable); Rooflight plans the smaller.
_WDDM_SHARED_SHARE = 0.5
_NEO_WDDM_SHARE = 0.94


def integrated_memory_bytes(ram_total_bytes: int) -> int:
    """The memory llama.cpp's backends get for an Intel integrated GPU on Windows."""
    return int(ram_total_bytes * _WDDM_SHARED_SHARE * _NEO_WDDM_SHARE)


def _value(winreg: ModuleType, key: Any, name: str) -> Any:
    try:
        return winreg.QueryValueEx(key, name)[0]
    except OSError:
        return None


def _as_int(value: Any) -> int | None:
    """A REG_QWORD / REG_DWORD (int) or the REG_BINARY some drivers write (little-endian)."""
    if isinstance(value, int):
        return value
    if isinstance(value, (bytes, bytearray)) and value:
        return int.from_bytes(bytes(value[:8]), "little")
    return None


def present_driver_keys() -> set[str] | None:
    """The driver keys ("0001") of the display adapters present now, from SetupAPI; None
    where it cannot be asked (not Windows, or a failure: then every key is read)."""
    try:
        import ctypes
        from ctypes import wintypes

        class Guid(ctypes.Structure):
            _fields_ = [("Data1", wintypes.DWORD), ("Data2", wintypes.WORD), ("Data3", wintypes.WORD),
                        ("Data4", ctypes.c_ubyte * 8)]

        class DevInfoData(ctypes.Structure):  # SP_DEVINFO_DATA
            _fields_ = [("cbSize", wintypes.DWORD), ("ClassGuid", Guid), ("DevInst", wintypes.DWORD),
                        ("Reserved", ctypes.c_void_p)]

        display = Guid(0x4D36E968, 0xE325, 0x11CE, (ctypes.c_ubyte * 8)(0xBF, 0xC1, 0x08, 0x00, 0x2B, 0xE1, 0x03, 0x18))
        setupapi = ctypes.WinDLL("setupapi")  # type: ignore[attr-defined]  # Windows only
        setupapi.SetupDiGetClassDevsW.restype = ctypes.c_void_p
        setupapi.SetupDiGetClassDevsW.argtypes = [ctypes.POINTER(Guid), wintypes.LPCWSTR, wintypes.HWND, wintypes.DWORD]
        setupapi.SetupDiEnumDeviceInfo.argtypes = [ctypes.c_void_p, wintypes.DWORD, ctypes.POINTER(DevInfoData)]
        setupapi.SetupDiGetDeviceRegistryPropertyW.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(DevInfoData), wintypes.DWORD, ctypes.POINTER(wintypes.DWORD),
            ctypes.c_void_p, wintypes.DWORD, ctypes.POINTER(wintypes.DWORD)]
        setupapi.SetupDiDestroyDeviceInfoList.argtypes = [ctypes.c_void_p]
        digcf_present, spdrp_driver = 0x2, 0x9
        handle = setupapi.SetupDiGetClassDevsW(ctypes.byref(display), None, None, digcf_present)
        if handle in (None, ctypes.c_void_p(-1).value):  # INVALID_HANDLE_VALUE
            return None
        keys: set[str] = set()
        try:
            i = 0
            while True:
                data = DevInfoData(cbSize=ctypes.sizeof(DevInfoData))
                if not setupapi.SetupDiEnumDeviceInfo(handle, i, ctypes.byref(data)):
                    break  # ERROR_NO_MORE_ITEMS
                i += 1
                driver = ctypes.create_unicode_buffer(512)
                if setupapi.SetupDiGetDeviceRegistryPropertyW(handle, ctypes.byref(data), spdrp_driver, None,
                                                              driver, ctypes.sizeof(driver), None):
                    keys.add(driver.value.rsplit("\\", 1)[-1])
        finally:
            setupapi.SetupDiDestroyDeviceInfoList(handle)
        return keys
    except Exception:  # AttributeError off Windows (no WinDLL), OSError from the DLL
        return None


def _adapters(winreg: ModuleType, present: set[str] | None = None) -> Iterator[dict[str, Any]]:
    """Each display adapter's driver values, in the registry's order: of the adapters
    present now where `present` lists their keys."""
    with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, DISPLAY_CLASS) as cls:
        i = 0
        while True:
            try:
                sub = winreg.EnumKey(cls, i)
            except OSError:
                return
            i += 1
            if not _ADAPTER_KEY.match(sub) or (present is not None and sub not in present):
                continue
            try:
                key = winreg.OpenKey(cls, sub)
            except OSError:  # a key this user may not read
                continue
            with key:
                yield {
                    "name": str(_value(winreg, key, "DriverDesc") or ""),
                    "device": str(_value(winreg, key, "MatchingDeviceId") or ""),
                    "memory": _as_int(_value(winreg, key, "HardwareInformation.qwMemorySize")),
                }


def _table_name(vendor_id: str, device_id: str, name: str, memory: int | None) -> str:
    """The GPU table's name for this adapter: by its driver's name (memory picks among a
    board's sizes), else by its PCI id, else the driver's name as it is."""
    entry = lookup_gpu(name, memory) if name else None
    if entry is None and device_id:
        same_id = lookup_pci_id(f"0x{vendor_id}", f"0x{device_id}")
        entry = min(same_id, key=lambda e: abs(e["memory_bytes"] - (memory or 0))) if same_id else None
    return entry["name"] if entry else name or f"GPU {vendor_id}:{device_id}"


def _intel_integrated(adapter: dict[str, Any], device_id: str, cpu_name: str,
                      warnings: list[str]) -> dict[str, Any] | None:
    """The table entry of an Intel integrated GPU: by the driver's name where it names the
    product ("Intel(R) Arc(TM) 140V GPU (16GB)"), else by PCI id and CPU (Meteor Lake's
    driver says only "Intel(R) Arc(TM) Graphics"); None for one the table lacks."""
    entry = lookup_gpu(adapter["name"]) if adapter["name"] else None
    if entry is not None:
        return entry if entry.get("unified_memory") else None
    candidates = [e for e in lookup_pci_id("0x8086", f"0x{device_id}") if e.get("unified_memory")]
    return integrated_entry(candidates, cpu_name, f"0x{device_id}", warnings) if candidates else None


def detect_windows(winreg: ModuleType, *, ram_total_bytes: int | None = None, cpu_name: str = "",
                   present: set[str] | None = None) -> tuple[list[GPUInfo], list[str]]:
    """AMD and Intel GPUs llama.cpp can offload to, in the registry's order, and warnings.
    Intel's integrated ones need the RAM's size and the CPU's name. `present`: the driver
    keys of the adapters present now (present_driver_keys; None: every key)."""
    gpus: list[GPUInfo] = []
    warnings: list[str] = []
    for adapter in _adapters(winreg, present):
        ids = _PCI_ID.search(adapter["device"])
        vendor_id, device_id = (ids.group(1).lower(), ids.group(2).lower()) if ids else ("", "")
        vendor = _VENDORS.get(vendor_id)
        if vendor is None:
            continue  # NVIDIA (NVML's), Microsoft's basic display adapter, virtual displays
        memory = adapter["memory"]
        label = adapter["name"] or f"{vendor_id}:{device_id}"
        if memory is None:  # an older driver: a board the table knows gets the table's memory
            entry = lookup_gpu(adapter["name"]) if adapter["name"] else None
            if entry is not None and not entry.get("unified_memory"):
                gpus.append(GPUInfo(index=len(gpus), name=entry["name"], vendor=vendor,
                                    vram_total_bytes=None, vram_free_bytes=None, bandwidth_gbs=None,
                                    fp16_tflops=None, unified_memory=False, source="detected"))
                continue
        if not memory or memory < MIN_DEDICATED_BYTES:
            entry = (_intel_integrated(adapter, device_id, cpu_name, warnings)
                     if vendor == "intel" and ram_total_bytes else None)
            if entry is not None:
                gpus.append(shared_memory_gpu(len(gpus), entry["name"], vendor,
                                              integrated_memory_bytes(ram_total_bytes or 0)))
                continue
            shown = "no" if not memory else f"only {memory / 2**20:.0f} MiB of"
            warnings.append(
                f"{label} has {shown} dedicated memory and is not counted as a GPU (an integrated "
                "GPU Rooflight cannot size on Windows; a --hardware profile can name it)"
            )
            continue
        gpus.append(GPUInfo(
            index=len(gpus), name=_table_name(vendor_id, device_id, adapter["name"], memory),
            vendor=vendor, vram_total_bytes=memory, vram_free_bytes=None,
            bandwidth_gbs=None, fp16_tflops=None,  # filled from the GPU table by name
            unified_memory=False, source="detected"))
    return gpus, warnings
