"""Apple Silicon: one GPU sharing the machine's RAM (unified memory), read via sysctl/ioreg.

The runner is a parameter: tests hand in a fake that answers like sysctl and ioreg.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from collections.abc import Callable

from .profile import GPUInfo

Runner = Callable[[list[str]], str]

GiB = 1 << 30


def metal_working_set_bytes(ram_bytes: int) -> int:
    """How much of the RAM Metal lets one process keep on the GPU.

    This is MTLDevice.recommendedMaxWorkingSetSize, which llama.cpp's Metal backend prints
    and treats as the GPU's memory. Apple does not document it; the values llama.cpp users
    post show 2/3 of RAM up to 36 GB and 3/4 above: 10922.67 MB on 16 GB, 21845.34 MB on
    32 GB, ~49152 MB on 64 GB (llama.cpp issues #1870, #2011; ollama #434).
    """
    fraction = 2 / 3 if ram_bytes <= 36 * GiB else 3 / 4
    return int(ram_bytes * fraction)


def _run(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=True).stdout


def is_apple_silicon(platform_name: str | None = None, machine: str | None = None) -> bool:
    return (platform_name or sys.platform) == "darwin" and (machine or platform.machine()) in (
        "arm64",
        "aarch64",
    )


def detect_apple(
    run: Runner | None = None,
    *,
    platform_name: str | None = None,
    machine: str | None = None,
) -> tuple[list[GPUInfo], list[str]]:
    """The Apple GPU (name = the chip, "Apple M2 Max"), or nothing on other machines."""
    if not is_apple_silicon(platform_name, machine):
        return [], []
    run = run or _run
    warnings: list[str] = []
    try:
        chip = run(["sysctl", "-n", "machdep.cpu.brand_string"]).strip()
        ram = int(run(["sysctl", "-n", "hw.memsize"]).strip())
    except Exception as exc:
        return [], [f"could not read the Apple chip and memory size with sysctl ({exc})"]
    cores = None
    try:  # the GPU core count varies within a chip (M3 Max: 30 or 40), ioreg knows it
        out = run(["ioreg", "-rc", "AGXAccelerator", "-d1"])
        m = re.search(r'"gpu-core-count"\s*=\s*(\d+)', out)
        cores = int(m.group(1)) if m else None
    except Exception:
        pass
    gpu = GPUInfo(
        index=0,
        name=chip or "Apple GPU",
        vendor="apple",
        vram_total_bytes=metal_working_set_bytes(ram),
        vram_free_bytes=None,  # unified: what is free is the CPU's available RAM, counted there
        bandwidth_gbs=None,  # filled from the GPU table by chip name (and core count)
        fp16_tflops=None,
        unified_memory=True,
        sm_count=cores,
        source="detected",
    )
    return [gpu], warnings
