"""The CPU: name, cores, the ISA extensions llama.cpp's CPU kernels use, and RAM.

Linux reads /proc/cpuinfo (its flag names are what the kernel calls them, not what
llama.cpp prints, hence the maps below); macOS asks sysctl; elsewhere numpy's own runtime
CPU-feature probe is the cheap, portable fallback.
"""

from __future__ import annotations

import importlib
import platform
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil

from .limits import ProcessShare, process_share
from .profile import CPUInfo

Runner = Callable[[list[str]], str]


def _pairs(text: str) -> dict[str, str]:
    """Map "a:b c:d" to {"a": "b", "c": "d"}: keeps the long flag tables readable."""
    return dict(item.split(":", 1) for item in text.split())


# The order llama.cpp's system_info prints them in, roughly: x86 first, then Arm.
ISA_ORDER = tuple(
    """sse3 ssse3 avx avx2 fma f16c bmi2 avx_vnni avx512f avx512bw avx512vl avx512_vbmi
    avx512_vnni avx512_bf16 avx512_fp16 amx_int8 amx_bf16
    neon arm_fma fp16_va dotprod i8mm sve sve2 sme bf16""".split()
)
# /proc/cpuinfo "flags" (x86) name -> llama.cpp name. The kernel calls SSE3 "pni".
_X86_FLAGS = _pairs(
    """pni:sse3 sse3:sse3 ssse3:ssse3 avx:avx avx2:avx2 fma:fma f16c:f16c bmi2:bmi2
    avx_vnni:avx_vnni avx512f:avx512f avx512bw:avx512bw avx512vl:avx512vl
    avx512vbmi:avx512_vbmi avx512_vnni:avx512_vnni avx512_bf16:avx512_bf16
    avx512_fp16:avx512_fp16 amx_int8:amx_int8 amx_bf16:amx_bf16"""
)
# /proc/cpuinfo "Features" (aarch64) name -> llama.cpp name. AdvSIMD (asimd) is NEON and
# implies fused multiply-add; asimdhp is FP16 vector arithmetic.
_ARM_FLAGS = _pairs(
    "asimd:neon neon:neon asimdhp:fp16_va asimddp:dotprod i8mm:i8mm sve:sve sve2:sve2 "
    "sme:sme bf16:bf16"
)
# macOS sysctl hw.optional.* keys (value 1 = present) -> llama.cpp name.
_MAC_FLAGS = _pairs(
    "hw.optional.arm.FEAT_DotProd:dotprod hw.optional.arm.FEAT_I8MM:i8mm "
    "hw.optional.arm.FEAT_FP16:fp16_va hw.optional.arm.FEAT_BF16:bf16 "
    "hw.optional.arm.FEAT_SME:sme"
)
# numpy's runtime CPU-feature names -> llama.cpp name (where neither of the above exists).
_NUMPY_FLAGS = _pairs(
    """SSE3:sse3 SSSE3:ssse3 AVX:avx AVX2:avx2 FMA3:fma F16C:f16c AVX512F:avx512f
    AVX512BW:avx512bw AVX512VL:avx512vl AVX512VBMI:avx512_vbmi AVX512VNNI:avx512_vnni
    AVX512_BF16:avx512_bf16 AVX512FP16:avx512_fp16 ASIMD:neon NEON:neon ASIMDHP:fp16_va
    ASIMDDP:dotprod SVE:sve"""
)


def order_isa(flags: Iterable[str]) -> tuple[str, ...]:
    found = set(flags)
    if "neon" in found:
        found.add("arm_fma")  # every AArch64 NEON unit has fused multiply-add
    return tuple(f for f in ISA_ORDER if f in found)


# Arm Linux names no model in /proc/cpuinfo, only each core's "CPU implementer" and "CPU
# part" codes; the names of the parts people run models on, as util-linux's lscpu decodes
# them (sys-utils/lscpu-arm.c, which gathers them from Arm's manuals and the kernel's
# cputype.h). Implementer 0x41 is Arm itself: its cores go by their own names.
_ARM_VENDORS = {0x41: "", 0x46: "Fujitsu", 0x48: "HiSilicon", 0x4E: "NVIDIA", 0x51: "Qualcomm", 0x61: "Apple",
                0xC0: "Ampere"}
_ARM_PARTS = {
    (0x41, 0xD03): "Cortex-A53", (0x41, 0xD04): "Cortex-A35", (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57", (0x41, 0xD08): "Cortex-A72", (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75", (0x41, 0xD0B): "Cortex-A76", (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD0D): "Cortex-A77", (0x41, 0xD40): "Neoverse-V1", (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD44): "Cortex-X1", (0x41, 0xD46): "Cortex-A510", (0x41, 0xD47): "Cortex-A710",
    (0x41, 0xD48): "Cortex-X2", (0x41, 0xD49): "Neoverse-N2", (0x41, 0xD4B): "Cortex-A78C",
    (0x41, 0xD4D): "Cortex-A715", (0x41, 0xD4E): "Cortex-X3", (0x41, 0xD4F): "Neoverse-V2",
    (0x46, 0x001): "A64FX", (0x48, 0xD01): "Kunpeng-920", (0x4E, 0x004): "Carmel",
    (0x61, 0x022): "M1 Icestorm", (0x61, 0x023): "M1 Firestorm", (0x61, 0x032): "M2 Blizzard",
    (0x61, 0x033): "M2 Avalanche", (0xC0, 0xAC3): "Ampere-1", (0xC0, 0xAC4): "Ampere-1a",
}


def _arm_part_name(implementer: int, part: int) -> str:
    vendor = _ARM_VENDORS.get(implementer, f"implementer {implementer:#04x}")
    known = _ARM_PARTS.get((implementer, part))
    if known:
        return f"{vendor} {known}".strip()
    return f"{vendor or 'Arm'} part {part:#05x}"


def _hex(value: str) -> int | None:
    try:
        return int(value, 16)
    except ValueError:
        return None


def parse_cpuinfo(text: str) -> tuple[str | None, tuple[str, ...]]:
    """(model name, llama.cpp ISA flags) from /proc/cpuinfo text (x86 or Arm). On Arm the
    name is made of the cores' part names ("Cortex-A76", "Cortex-X1 + Cortex-A78 +
    Cortex-A55"), after the board's where the kernel gives it (a Raspberry Pi's "Model")."""
    name: str | None = None
    board: str | None = None
    flags: set[str] = set()
    implementer: int | None = None
    parts: list[str] = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        value = value.strip()
        if key == "model name" and name is None and value:
            name = value
        elif key == "model" and value and not value.isdigit():  # x86's "model" is a number
            board = value
        elif key == "flags":
            flags.update(_X86_FLAGS[f] for f in value.split() if f in _X86_FLAGS)
        elif key == "features":
            flags.update(_ARM_FLAGS[f] for f in value.split() if f in _ARM_FLAGS)
        elif key == "cpu implementer":
            implementer = _hex(value)
        elif key == "cpu part" and implementer is not None and (part := _hex(value)) is not None:
            part_name = _arm_part_name(implementer, part)
            if part_name not in parts:
                parts.append(part_name)
    # 32-bit Arm's model name says only "ARMv7 Processor rev 3 (v7l)": known parts say more
    if parts and (name is None or (name.startswith("ARMv") and not any(" part 0x" in p for p in parts))):
        cores = " + ".join(parts)
        name = f"{board} ({cores})" if board else cores
    return name, order_isa(flags)


def _numpy_isa() -> tuple[str, ...]:
    try:
        try:
            from numpy._core._multiarray_umath import __cpu_features__ as feats
        except ImportError:  # numpy < 2
            from numpy.core._multiarray_umath import __cpu_features__ as feats  # type: ignore
    except Exception:
        return ()
    return order_isa(_NUMPY_FLAGS[k] for k, on in feats.items() if on and k in _NUMPY_FLAGS)


def _run_sysctl(cmd: list[str]) -> str:
    import subprocess

    return subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=True).stdout


def _mac_cpu(run: Runner, machine: str) -> tuple[str | None, tuple[str, ...]]:
    name = run(["sysctl", "-n", "machdep.cpu.brand_string"]).strip() or None
    flags: set[str] = set()
    if machine in ("arm64", "aarch64"):
        flags.add("neon")
        for key, flag in _MAC_FLAGS.items():
            try:  # one key per call: sysctl fails outright on a key this chip lacks
                if run(["sysctl", "-n", key]).strip() == "1":
                    flags.add(flag)
            except Exception:
                continue
    else:
        flags.update(_numpy_isa())
    return name, order_isa(flags)


def _windows_cpu_name() -> str | None:
    """The name Windows shows for the CPU ("13th Gen Intel(R) Core(TM) i7-13700H"), from the
    registry; platform.processor() there gives only "Intel64 Family 6 Model 186 Stepping 2,
    GenuineIntel"."""
    try:
        winreg: Any = importlib.import_module("winreg")  # Windows only
        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"HARDWARE\DESCRIPTION\System\CentralProcessor\0") as key:
            value, _ = winreg.QueryValueEx(key, "ProcessorNameString")
    except (ImportError, OSError):
        return None
    return str(value).strip() or None


def _max_freq_mhz(proc_root: Path) -> float | None:
    try:
        freq = psutil.cpu_freq()
        if freq and freq.max:
            return float(freq.max)
    except Exception:  # psutil raises on some VMs and containers
        pass
    try:  # kHz, exposed by cpufreq where psutil found nothing
        khz = proc_root.parent / "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
        return int(khz.read_text().strip()) / 1000.0
    except (OSError, ValueError):
        return None


def detect_cpu(
    *,
    cpuinfo_path: Path = Path("/proc/cpuinfo"),
    run: Runner | None = None,
    platform_name: str | None = None,
    machine: str | None = None,
    share: Callable[[], ProcessShare] = process_share,
) -> tuple[CPUInfo, list[str]]:
    """CPUInfo without the RAM bandwidth (bandwidth.py measures it), and warnings. Cores,
    threads and RAM are what this process may use (limits.py: affinity, a container's
    quota and memory limit), each limit said in a warning."""
    warnings: list[str] = []
    plat = platform_name or sys.platform
    arch = machine or platform.machine()
    name: str | None = None
    isa: tuple[str, ...] = ()
    try:
        if plat == "darwin":
            name, isa = _mac_cpu(run or _run_sysctl, arch)
        elif plat == "win32":
            name = _windows_cpu_name()
        elif cpuinfo_path.exists():
            name, isa = parse_cpuinfo(cpuinfo_path.read_text(errors="replace"))
    except Exception as exc:  # a failed probe must not stop detection
        warnings.append(f"could not read the CPU model and features: {exc}")
    if not isa:
        isa = _numpy_isa()
    name = name or platform.processor() or arch or "unknown CPU"
    mine = share()
    warnings.extend(mine.warnings())
    cpu = CPUInfo(
        name=name,
        cores=mine.cores,
        threads=mine.threads,
        isa=isa,
        ram_total_bytes=mine.ram_total,
        ram_available_bytes=mine.ram_available,
        ram_bandwidth_gbs=None,
        ram_bandwidth_source="unknown",
        max_freq_mhz=_max_freq_mhz(cpuinfo_path.parent),
        arch=arch,
    )
    return cpu, warnings
