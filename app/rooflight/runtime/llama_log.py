"""Capture llama.cpp's own log and read the buffers it allocated.

llama.cpp prints every buffer it allocates ("model buffer size", "KV buffer size",
"compute buffer size", "output buffer size"); those lines are the ground truth that a
memory plan is tested against (REFERENCE.md §3). This module installs a log callback
through llama-cpp-python's ctypes binding, keeps the lines, and parses them.
"""

from __future__ import annotations

import ctypes
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

MIB = 1024 * 1024

# "load_tensors:   CPU_Mapped model buffer size =   235.16 MiB"
_MODEL_RE = re.compile(r"load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB")
# "llama_kv_cache:        CPU KV buffer size =     6.00 MiB"
_KV_RE = re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size =\s+([\d.]+) MiB")
# "llama_memory_recurrent:        CPU RS buffer size =     0.05 MiB" (hybrid / SSM state)
_RS_RE = re.compile(r"llama_memory_recurrent:\s+(\S+) RS buffer size =\s+([\d.]+) MiB")
# "sched_reserve:        CPU compute buffer size =   514.50 MiB"
_COMPUTE_RE = re.compile(r"(?<!~)\b\w+:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")
# "llama_context:        CPU  output buffer size =     1.00 MiB"
_OUTPUT_RE = re.compile(r"llama_context:\s+(\S+)\s+output buffer size =\s+([\d.]+) MiB")
# "tensor blk.0.ffn_up_exps.weight (1 MiB q4_K) buffer type overridden to CPU_REPACK"
_OVERRIDE_RE = re.compile(r"tensor (\S+) \(\d+ MiB \S+\) buffer type overridden to (\S+)")
# "repack: repack tensor blk.0.attn_output.weight with q4_K_8x8", and the AMX buffer's (a
# debug line): "ggml_backend_amx_buffer_set_tensor: amx repack tensor blk.0.attn_v.weight of type q8_0"
_REPACK_RE = re.compile(r"(?:repack: repack|amx repack) tensor (\S+) (?:with|of type)")


@dataclass
class ReportedBuffers:
    """Buffers llama.cpp reported, in bytes, keyed by llama.cpp's buffer name (CPU, CUDA0...)."""

    model: dict[str, int] = field(default_factory=dict)
    # KV cache plus recurrent state: what the plan's kv_bytes counts (recurrent alone too)
    kv: dict[str, int] = field(default_factory=dict)
    recurrent: dict[str, int] = field(default_factory=dict)
    compute: dict[str, int] = field(default_factory=dict)
    output: dict[str, int] = field(default_factory=dict)
    repacked_tensors: list[str] = field(default_factory=list)
    # tensor -> buffer type, for tensors a placement override moved (MoE experts in RAM)
    overridden: dict[str, str] = field(default_factory=dict)

    @property
    def model_bytes(self) -> int:
        return sum(self.model.values())

    @property
    def kv_bytes(self) -> int:
        return sum(self.kv.values())

    @property
    def compute_bytes(self) -> int:
        return sum(self.compute.values())

    @property
    def output_bytes(self) -> int:
        return sum(self.output.values())


def _add(target: dict[str, int], name: str, mib: str) -> None:
    target[name] = target.get(name, 0) + round(float(mib) * MIB)


def parse_buffers(text: str) -> ReportedBuffers:
    """Parse the buffer lines of one model load + context creation.

    The compute buffer is reported again when the context is destroyed ("~llama_context:
    ... compute buffer size is ..."); only the allocation lines count.
    """
    rep = ReportedBuffers()
    for line in text.splitlines():
        if m := _MODEL_RE.search(line):
            _add(rep.model, m.group(1), m.group(2))
        elif m := _KV_RE.search(line):
            _add(rep.kv, m.group(1), m.group(2))
        elif m := _RS_RE.search(line):
            _add(rep.kv, m.group(1), m.group(2))
            _add(rep.recurrent, m.group(1), m.group(2))
        elif ("~llama_context" not in line and "reserve_compute_meta" not in line  # mtmd's own
              and (m := _COMPUTE_RE.search(line))):
            # sched_reserve runs once per context; a later re-reserve would repeat it,
            # so keep the last figure per buffer rather than adding.
            rep.compute[m.group(1)] = round(float(m.group(2)) * MIB)
        elif m := _OUTPUT_RE.search(line):
            _add(rep.output, m.group(1), m.group(2))
        elif m := _REPACK_RE.search(line):
            rep.repacked_tensors.append(m.group(1))
        elif m := _OVERRIDE_RE.search(line):
            rep.overridden[m.group(1)] = m.group(2)
    return rep


class LlamaLogCapture:
    """Collects llama.cpp log text while active; thread-safe, re-entrant free."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            self._lines.append(text)

    @property
    def text(self) -> str:
        with self._lock:
            return "".join(self._lines)


_active: list[LlamaLogCapture] = []
_callback_ref = None  # keep the ctypes callback alive for the process lifetime


def _install_callback() -> None:
    global _callback_ref
    if _callback_ref is not None:
        return
    import llama_cpp

    @llama_cpp.llama_log_callback
    def _on_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if _active:
            decoded = text.decode("utf-8", errors="replace")
            for capture in list(_active):
                capture.write(decoded)

    _callback_ref = _on_log
    llama_cpp.llama_log_set(_on_log, ctypes.c_void_p(0))


_mtmd_installed = False


def install_mtmd_log() -> None:
    """Route llama.cpp's mtmd (vision projector) log into the same captures: by default it
    writes to stderr itself (clip-impl.h clip_log_callback_default)."""
    global _mtmd_installed
    if _mtmd_installed:
        return
    _install_callback()
    import llama_cpp.mtmd_cpp as mtmd

    mtmd.mtmd_helper_log_set(_callback_ref, ctypes.c_void_p(0))  # the helper and mtmd both
    _mtmd_installed = True


@contextmanager
def capture_llama_log() -> Iterator[LlamaLogCapture]:
    """Capture everything llama.cpp logs inside the block (load with verbose=True)."""
    _install_callback()
    capture = LlamaLogCapture()
    _active.append(capture)
    try:
        yield capture
    finally:
        _active.remove(capture)
