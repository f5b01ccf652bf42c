"""Hardware detection -> HardwareProfile (CPU, GPUs, llama.cpp backend).

Public API:
  detect(*, measure_bandwidth=True, cache_dir=None) -> HardwareProfile   (never raises)
  profile_from_dict(d, *, detect_cpu_if_missing=True, ...) -> HardwareProfile
  load_profile(path) -> HardwareProfile            (BadInputError if unreadable/malformed)
  profile_to_json(profile) -> str
  format_profile(profile) -> str
  lookup_gpu(name, memory_bytes=None) -> dict | None
  gpu_table() -> list[dict]
"""

from __future__ import annotations

from .detection import Probes, detect
from .format import format_profile
from .gpu_table import gpu_table, lookup_gpu
from .profile import CPUInfo, GPUInfo, HardwareProfile
from .profile_io import load_profile, profile_from_dict, profile_to_json

__all__ = [
    "CPUInfo",
    "GPUInfo",
    "HardwareProfile",
    "Probes",
    "detect",
    "format_profile",
    "gpu_table",
    "load_profile",
    "lookup_gpu",
    "profile_from_dict",
    "profile_to_json",
]
