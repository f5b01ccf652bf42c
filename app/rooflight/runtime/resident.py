"""Models this process has loaded, and the RAM their memory-mapped weights hold.

Free VRAM read from NVML already counts every process's allocations, Rooflight's own
included, and so does RAM in anonymous buffers (KV cache, compute). Weights llama.cpp
memory-maps from the file (its CPU_Mapped buffers) are page cache, which the OS reports as
"available": a second model planned while one is loaded would count that RAM twice. The
engine registers its mapped bytes here while it is loaded; refresh_free_memory subtracts them.
"""

from __future__ import annotations

import itertools
import threading
import weakref

from rooflight.runtime.llama_log import ReportedBuffers

_lock = threading.Lock()
_mapped: dict[int, int] = {}  # key -> bytes of mapped weights
_keys = itertools.count(1)


def mapped_weight_bytes(buffers: ReportedBuffers) -> int:
    return sum(n for name, n in buffers.model.items() if name.endswith("_Mapped"))


def register(owner: object, buffers: ReportedBuffers) -> int:
    """Count `owner`'s mapped weights until release(key), or until owner is garbage (an
    engine dropped without close() frees its model then, too)."""
    key = next(_keys)
    with _lock:
        _mapped[key] = mapped_weight_bytes(buffers)
    weakref.finalize(owner, release, key)
    return key


def release(key: int) -> None:
    with _lock:
        _mapped.pop(key, None)


def resident_mapped_bytes() -> int:
    """RAM held by the mapped weights of every model this process has loaded now."""
    with _lock:
        return sum(_mapped.values())
