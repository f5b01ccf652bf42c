"""CPU parsing (/proc/cpuinfo, sysctl) and Apple Silicon detection with a fake sysctl."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from rooflight.hardware.apple import detect_apple, metal_working_set_bytes
from rooflight.hardware.cpu import detect_cpu, parse_cpuinfo
from rooflight.hardware.detection import Probes, detect

GiB = 1 << 30


def no_nvml() -> types.ModuleType:
    """A pynvml whose init fails as on a machine without an NVIDIA driver."""
    m = types.ModuleType("pynvml")

    def init() -> None:
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    m.nvmlInit = init
    return m


X86_CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme sse sse2 pni ssse3 fma cx16 sse4_1 sse4_2 avx f16c bmi2 avx2 avx512f \
avx512bw avx512vl avx512vbmi avx512_vnni avx512_bf16 avx512_fp16 avx_vnni amx_bf16 amx_tile amx_int8

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu pni
"""

ARM_CPUINFO = """\
processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm \
jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs \
sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm \
svebf16 i8mm bf16 dgh
CPU implementer\t: 0x41
"""


def test_x86_flags_use_llama_cpp_names():
    name, isa = parse_cpuinfo(X86_CPUINFO)
    assert name == "Intel(R) Xeon(R) Platinum 8480+"
    assert isa[:3] == ("sse3", "ssse3", "avx")  # the kernel's "pni" is SSE3
    for flag in (
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512_vnni",
        "avx512_bf16",
        "avx_vnni",
        "amx_int8",
        "avx512_vbmi",
    ):
        assert flag in isa
    assert "sse4_1" not in isa and "amx_tile" not in isa


def test_arm_features():
    name, isa = parse_cpuinfo(ARM_CPUINFO)
    assert name is None
    assert {"neon", "arm_fma", "dotprod", "sve", "sve2", "i8mm", "fp16_va", "bf16"} <= set(isa)
    assert "avx" not in isa


def test_detect_cpu_from_a_file(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(X86_CPUINFO)
    cpu, warnings = detect_cpu(cpuinfo_path=path, platform_name="linux", machine="x86_64")
    assert cpu.name == "Intel(R) Xeon(R) Platinum 8480+" and "amx_int8" in cpu.isa
    assert cpu.cores >= 1 and cpu.threads >= cpu.cores
    assert cpu.ram_total_bytes >= cpu.ram_available_bytes > 0
    assert cpu.arch == "x86_64" and cpu.ram_bandwidth_gbs is None and warnings == []


class FakeMac:
    """Answers like sysctl and ioreg on a 64 GB M2 Max with a 30-core GPU."""

    def __init__(self, ram: int = 64 * GiB, cores: int | None = 30, chip: str = "Apple M2 Max"):
        self.values = {
            "machdep.cpu.brand_string": chip,
            "hw.memsize": str(ram),
            "hw.optional.arm.FEAT_DotProd": "1",
            "hw.optional.arm.FEAT_I8MM": "0",
            "hw.optional.arm.FEAT_FP16": "1",
        }
        self.cores = cores

    def __call__(self, cmd: list[str]) -> str:
        if cmd[0] == "ioreg":
            if self.cores is None:
                raise FileNotFoundError("ioreg")
            return f'+-o AGXAcceleratorG14X  <class AGXAccelerator>\n    "gpu-core-count" = {self.cores}\n'
        key = cmd[-1]
        if key not in self.values:
            raise OSError(f"sysctl: unknown oid '{key}'")
        return self.values[key] + "\n"


def test_metal_share_rule():
    assert metal_working_set_bytes(16 * GiB) == pytest.approx(10922.67 * 2**20, rel=1e-4)
    assert metal_working_set_bytes(32 * GiB) == pytest.approx(21845.34 * 2**20, rel=1e-4)
    assert metal_working_set_bytes(36 * GiB) == 24 * GiB
    assert metal_working_set_bytes(64 * GiB) == 48 * GiB
    assert metal_working_set_bytes(192 * GiB) == 144 * GiB


def test_apple_gpu_is_one_unified_entry():
    gpus, warnings = detect_apple(FakeMac(), platform_name="darwin", machine="arm64")
    (g,) = gpus
    assert warnings == []
    assert g.name == "Apple M2 Max" and g.vendor == "apple" and g.unified_memory
    assert g.vram_total_bytes == 48 * GiB and g.sm_count == 30


def test_not_a_mac_means_no_apple_gpu():
    assert detect_apple(FakeMac(), platform_name="linux", machine="x86_64") == ([], [])
    assert detect_apple(FakeMac(), platform_name="darwin", machine="x86_64") == ([], [])


def test_sysctl_failure_warns():
    def broken(cmd):
        raise OSError("no sysctl")

    gpus, warnings = detect_apple(broken, platform_name="darwin", machine="arm64")
    assert gpus == [] and "sysctl" in warnings[0]


def test_mac_cpu_flags_from_sysctl():
    cpu, _ = detect_cpu(run=FakeMac(), platform_name="darwin", machine="arm64")
    assert cpu.name == "Apple M2 Max"
    assert {"neon", "dotprod", "fp16_va"} <= set(cpu.isa) and "i8mm" not in cpu.isa


def test_detect_on_a_fake_mac_scales_fp16_by_cores(tmp_path: Path):
    def llama_metal(name):
        if name != "llama_cpp":
            raise ImportError(name)
        m = types.ModuleType("llama_cpp")
        m.llama_supports_gpu_offload = lambda: True
        return m

    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libggml-metal.dylib").write_text("")
    probes = Probes(
        sysfs_root=tmp_path / "sys",
        run=FakeMac(),
        nvml=no_nvml(),
        importer=llama_metal,
        llama_lib_dir=lib,
        platform_name="darwin",
        machine="arm64",
    )
    p = detect(measure_bandwidth=False, probes=probes)
    (g,) = p.gpus
    assert g.bandwidth_gbs == 400.0
    assert g.fp16_tflops == pytest.approx(13.6 * 30 / 38, abs=0.01)
    assert g.vram_free_bytes <= g.vram_total_bytes
    assert p.backend == "metal"


def test_m3_max_bandwidth_depends_on_cores(tmp_path: Path):
    probes = Probes(
        sysfs_root=tmp_path,
        run=FakeMac(36 * GiB, 30, "Apple M3 Max"),
        nvml=no_nvml(),
        importer=lambda n: (_ for _ in ()).throw(ImportError(n)),
        platform_name="darwin",
        machine="arm64",
    )
    p = detect(measure_bandwidth=False, probes=probes)
    assert p.gpus[0].bandwidth_gbs == 300.0
    assert p.gpus[0].vram_total_bytes == 24 * GiB


# /proc/cpuinfo as the boards print it (a Raspberry Pi 5 and 4, posted in hrw/arm-socs-table
# issue #96 and nicolargo/glances issue #2616; two of the four cores kept), and a
# big.LITTLE phone-class SoC's mix of parts
PI5_CPUINFO = """\
processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x4
CPU part\t: 0xd0b
CPU revision\t: 1

processor\t: 1
CPU implementer\t: 0x41
CPU part\t: 0xd0b

Hardware\t: BCM2835
Revision\t: d04170
Model\t\t: Raspberry Pi 5 Model B Rev 1.0
"""
PI4_CPUINFO = PI5_CPUINFO.replace("0xd0b", "0xd08").replace("Pi 5 Model B Rev 1.0", "Pi 4 Model B Rev 1.5")


def test_arm_linux_names_the_cores_and_the_board():
    assert parse_cpuinfo(PI5_CPUINFO) == ("Raspberry Pi 5 Model B Rev 1.0 (Cortex-A76)",
                                          ("neon", "arm_fma", "fp16_va", "dotprod"))
    assert parse_cpuinfo(PI4_CPUINFO)[0] == "Raspberry Pi 4 Model B Rev 1.5 (Cortex-A72)"
    server = ARM_CPUINFO + "CPU part\t: 0xd40\n\nprocessor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd40\n"
    assert parse_cpuinfo(server)[0] == "Neoverse-V1"  # a Graviton3: no board line
    mixed = "".join(f"processor\t: {i}\nCPU implementer\t: 0x41\nCPU part\t: {p}\n\n"
                    for i, p in enumerate(("0xd05", "0xd05", "0xd41", "0xd44")))
    assert parse_cpuinfo(mixed)[0] == "Cortex-A55 + Cortex-A78 + Cortex-X1"
    ampere = "CPU implementer\t: 0xc0\nCPU part\t: 0xac3\n"
    assert parse_cpuinfo(ampere)[0] == "Ampere Ampere-1"
    assert parse_cpuinfo("CPU implementer\t: 0x41\nCPU part\t: 0xd8e\n")[0] == "Arm part 0xd8e"  # not in the table
    # a 32-bit kernel's generic name stays where the part is unknown, and x86's numeric "model" is no board
    armv7 = "model name\t: ARMv7 Processor rev 5 (v7l)\nCPU implementer\t: 0x41\nCPU part\t: 0xc07\n"
    assert parse_cpuinfo(armv7)[0] == "ARMv7 Processor rev 5 (v7l)"
    assert parse_cpuinfo("model\t\t: 143\n" + X86_CPUINFO)[0] == "Intel(R) Xeon(R) Platinum 8480+"


def test_windows_names_the_cpu_from_the_registry(monkeypatch):
    """The registry is what Windows has and this machine lacks: a stand-in module answers
    as Windows' winreg does."""
    calls = []

    class Key:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    fake = types.ModuleType("winreg")
    fake.HKEY_LOCAL_MACHINE = "HKLM"
    fake.OpenKey = lambda root, path: calls.append((root, path)) or Key()
    fake.QueryValueEx = lambda key, name: ("13th Gen Intel(R) Core(TM) i7-13700H  ", 1)
    monkeypatch.setitem(sys.modules, "winreg", fake)
    cpu, _ = detect_cpu(platform_name="win32", machine="AMD64")
    assert cpu.name == "13th Gen Intel(R) Core(TM) i7-13700H"
    assert calls == [("HKLM", r"HARDWARE\DESCRIPTION\System\CentralProcessor\0")]

    def missing(root, path):
        raise FileNotFoundError(path)

    fake.OpenKey = missing
    cpu, _ = detect_cpu(platform_name="win32", machine="AMD64")
    assert cpu.name  # platform.processor() or the architecture, as before
