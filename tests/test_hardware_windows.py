"""AMD and Intel GPU detection on Windows, from a registry laid out as Windows keeps it,
read through a stand-in for the `winreg` module (the registry cannot exist here)."""

from __future__ import annotations

import types

import pytest

from rooflight.hardware.detection import Probes, detect
from rooflight.hardware.windows import DISPLAY_CLASS, detect_windows, integrated_memory_bytes

GiB = 1 << 30


class _Key:
    def __init__(self, values: dict, subkeys: dict):
        self.values, self.subkeys = values, subkeys

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def fake_winreg(adapters: dict[str, dict]) -> types.ModuleType:
    """winreg's OpenKey / EnumKey / QueryValueEx over {subkey: {value name: value}} under
    the display adapters' class key; subkeys keep their order, as EnumKey's index does."""
    cls = _Key({"Class": "Display"}, {name: _Key(values, {}) for name, values in adapters.items()})
    hklm = object()
    mod = types.ModuleType("winreg")

    def open_key(parent, path):
        if parent is hklm:
            if path != DISPLAY_CLASS:
                raise FileNotFoundError(path)
            return cls
        if path not in parent.subkeys:
            raise FileNotFoundError(path)
        return parent.subkeys[path]

    def enum_key(key, i):
        names = list(key.subkeys)
        if i >= len(names):
            raise OSError("No more data is available")
        return names[i]

    def query_value_ex(key, name):
        if name not in key.values:
            raise FileNotFoundError(name)
        return key.values[name], 0

    mod.HKEY_LOCAL_MACHINE = hklm
    mod.OpenKey, mod.EnumKey, mod.QueryValueEx = open_key, enum_key, query_value_ex
    return mod


def adapter(name: str, device: str, memory: int | bytes | None) -> dict:
    values = {"DriverDesc": name, "MatchingDeviceId": device}
    if memory is not None:
        values["HardwareInformation.qwMemorySize"] = memory
    return values


DESKTOP = {
    "0000": adapter("AMD Radeon(TM) Graphics", r"PCI\VEN_1002&DEV_164E&REV_C1", 512 << 20),  # Raphael's iGPU
    "0001": adapter("AMD Radeon RX 7900 XTX", r"PCI\VEN_1002&DEV_744C&REV_C8", 24 * GiB),
    "0002": adapter("NVIDIA GeForce RTX 4090", r"PCI\VEN_10DE&DEV_2684", 24 * GiB),  # NVML's
    "0003": adapter("Microsoft Basic Display Adapter", "", None),
    "Configuration": {},
    "Properties": {},
}


def test_a_discrete_amd_card_is_read_from_the_registry():
    gpus, warnings = detect_windows(fake_winreg(DESKTOP), ram_total_bytes=64 * GiB, cpu_name="AMD Ryzen 9 7950X")
    (gpu,) = gpus
    assert (gpu.name, gpu.vendor, gpu.vram_total_bytes, gpu.unified_memory) == (
        "AMD Radeon RX 7900 XTX", "amd", 24 * GiB, False)
    assert warnings == ["AMD Radeon(TM) Graphics has only 512 MiB of dedicated memory and is not counted as a "
                        "GPU (an integrated GPU Rooflight cannot size on Windows; a --hardware profile can "
                        "name it)"]


@pytest.mark.parametrize("name, device, cpu, expected", [
    ("Intel(R) Arc(TM) 140V GPU (16GB)", r"PCI\VEN_8086&DEV_64A0&SUBSYS_0CC91028", "", "Intel Arc 140V"),
    # Meteor Lake's driver names no product: the PCI id and the CPU do
    ("Intel(R) Arc(TM) Graphics", r"PCI\VEN_8086&DEV_7D55&SUBSYS_0C7C1028",
     "Intel(R) Core(TM) Ultra 7 155H", "Intel Arc Graphics (Meteor Lake)"),
])
def test_an_intel_integrated_arc_works_from_the_shared_ram(name, device, cpu, expected):
    """Intel's driver registers a 128 MiB placeholder (here as REG_BINARY, as some drivers
    write it); the GPU gets WDDM's half of the RAM, of which SYCL reports 94%."""
    reg = fake_winreg({"0000": adapter(name, device, (128 << 20).to_bytes(8, "little"))})
    gpus, warnings = detect_windows(reg, ram_total_bytes=32 * GiB, cpu_name=cpu)
    assert warnings == []
    (gpu,) = gpus
    assert (gpu.name, gpu.unified_memory, gpu.vram_total_bytes) == (expected, True, integrated_memory_bytes(32 * GiB))
    assert integrated_memory_bytes(32 * GiB) == int(32 * GiB * 0.47)
    # without the RAM's size it is not listed
    assert detect_windows(reg)[0] == []


def test_a_strix_halo_with_a_large_carve_out_and_an_older_driver():
    """Variable graphics memory set to 64 GB is the APU's own, as on Linux; a driver that
    registers no qwMemorySize leaves a known board to the table's memory."""
    reg = fake_winreg({
        "0000": adapter("AMD Radeon(TM) 8060S Graphics", r"PCI\VEN_1002&DEV_1586", 64 * GiB),
        "0001": adapter("AMD Radeon RX 6800 XT", r"PCI\VEN_1002&DEV_73BF", None),
    })
    gpus, _ = detect_windows(reg, ram_total_bytes=64 * GiB)
    assert [(g.name, g.vram_total_bytes, g.unified_memory) for g in gpus] == [
        ("AMD Radeon 8060S", 64 * GiB, False), ("AMD Radeon RX 6800 XT", None, False)]


def test_a_card_taken_out_is_not_listed():
    """Windows keeps a removed card's driver key: only the keys SetupAPI lists as present
    are read, and where SetupAPI cannot be asked (None) all of them."""
    reg = fake_winreg({
        "0000": adapter("AMD Radeon RX 6800 XT", r"PCI\VEN_1002&DEV_73BF", 16 * GiB),  # the old card
        "0001": adapter("AMD Radeon RX 7900 XTX", r"PCI\VEN_1002&DEV_744C", 24 * GiB),
    })
    assert [g.name for g in detect_windows(reg, present={"0001"})[0]] == ["AMD Radeon RX 7900 XTX"]
    assert len(detect_windows(reg, present=None)[0]) == 2
    from rooflight.hardware.windows import present_driver_keys

    assert present_driver_keys() is None  # not Windows: SetupAPI cannot be asked


def test_detection_on_windows_reads_the_registry_and_fills_from_the_table(tmp_path):
    reg = fake_winreg(DESKTOP)

    def importer(name):
        if name == "winreg":
            return reg
        raise ImportError(name)

    p = detect(measure_bandwidth=False, probes=Probes(
        sysfs_root=tmp_path, nvml=types.ModuleType("pynvml"), importer=importer,
        platform_name="win32", machine="AMD64", present_adapters=lambda: {"0000", "0001", "0002", "0003"}))
    (gpu,) = p.gpus
    assert gpu.name == "AMD Radeon RX 7900 XTX" and gpu.bandwidth_gbs == 960.0 and gpu.fp16_tflops
    assert any("AMD Radeon(TM) Graphics has only 512 MiB" in w for w in p.warnings)
    # on Linux the registry is not asked
    linux = detect(measure_bandwidth=False, probes=Probes(
        sysfs_root=tmp_path, nvml=types.ModuleType("pynvml"), importer=importer,
        platform_name="linux", machine="x86_64"))
    assert linux.gpus == ()


def test_present_driver_keys_walks_setupapi(monkeypatch):
    """SetupAPI itself cannot run here: a stand-in DLL answers its three calls as Windows
    does for two present adapters, to check what is asked and how the answer is read."""
    import ctypes

    calls = []

    def get_class_devs(guid, enumerator, hwnd, flags):
        calls.append(("classdevs", flags))
        return 1234

    def enum_device_info(handle, index, data):
        return index < 2

    def get_property(handle, data, prop, regtype, buffer, size, required):
        calls.append(("property", prop, size))
        buffer.value = "{4d36e968-e325-11ce-bfc1-08002be10318}\\000" + str(len(calls) - 1)
        return True

    def destroy(handle):
        calls.append(("destroy", handle))

    # functions, not methods: ctypes' argtypes and restype are set on them as on a DLL's
    fake = types.SimpleNamespace(SetupDiGetClassDevsW=get_class_devs, SetupDiEnumDeviceInfo=enum_device_info,
                                 SetupDiGetDeviceRegistryPropertyW=get_property,
                                 SetupDiDestroyDeviceInfoList=destroy)

    def win_dll(name):
        assert name == "setupapi"
        return fake

    monkeypatch.setattr(ctypes, "WinDLL", win_dll, raising=False)
    from rooflight.hardware.windows import present_driver_keys

    assert present_driver_keys() == {"0001", "0002"}
    assert calls[0] == ("classdevs", 0x2)  # DIGCF_PRESENT
    # SPDRP_DRIVER, into a 512-character buffer given by its size in bytes (wchar: 2 on Windows)
    assert calls[1] == ("property", 0x9, 512 * ctypes.sizeof(ctypes.c_wchar))
    assert calls[-1] == ("destroy", 1234)


def test_a_meteor_lake_laptop_on_windows_reads_at_its_rams_speed(tmp_path):
    """The whole path on Windows: the registry names the Arc iGPU, and the raw SMBIOS table (GetSystemFirmwareTable, here its bytes) says two
    DDR5-5600 SO-DIMMs: 89.6 GB/s, not the table's LPDDR5X figure, and no warning."""
    from test_ram_speed import smbios_table, smbios_type17

    reg = fake_winreg({"0000": adapter("Intel(R) Arc(TM) Graphics", r"PCI\VEN_8086&DEV_7D55&SUBSYS_0C7C1028",
                                       (128 << 20).to_bytes(8, "little"))})

    def machine(table):
        return detect(measure_bandwidth=False, probes=Probes(
            sysfs_root=tmp_path, nvml=types.ModuleType("pynvml"),
            importer=lambda name: reg if name == "winreg" else (_ for _ in ()).throw(ImportError(name)),
            platform_name="win32", machine="AMD64", present_adapters=lambda: None, smbios=lambda: table))

    p = machine(smbios_table(smbios_type17(0x20, 16384, 5600), smbios_type17(0x21, 16384, 5600)))
    (gpu,) = p.gpus
    # the CPU's name comes from the registry on Windows, which this stand-in lacks: the
    # slower Meteor Lake entry, which shares the platform's memory bus
    assert gpu.name.endswith("(Meteor Lake)") and (gpu.bandwidth_gbs, gpu.source) == (89.6, "detected+table+RAM")
    assert not any("RAM, whose speed" in w for w in p.warnings)
    unread = machine(None)  # the call failed: the table's figure, said
    assert unread.gpus[0].bandwidth_gbs == 120.0 and any("RAM, whose speed" in w for w in unread.warnings)
