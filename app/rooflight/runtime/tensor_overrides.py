"""Keep MoE expert tensors in RAM: llama.cpp's tensor buffer-type overrides, from Python.

Why this exists: llama.cpp's own tools keep the routed experts of the first N layers on the
CPU with `--n-cpu-moe N` (common/arg.cpp: one override `blk\\.{i}\\.ffn_(up|down|gate|gate_up)
_(ch|)exps` -> ggml_backend_cpu_buffer_type() per layer, a NULL-terminated array in
`llama_model_params.tensor_buft_overrides`). llama-cpp-python 0.3.36 has the field in its
ctypes struct (as a bare void pointer) but no Llama() argument for it, so this module builds
that array, puts it on the parameters Llama() is about to load with, keeps the pattern strings
alive while llama.cpp reads them (llama-model-loader.cpp matches every tensor name against
them during the load, and keeps no copy) and frees them afterwards.

The struct is checked against the installed build first (the field must be where llama.h
puts it, and the defaults llama.cpp returns must read back as llama.h says); a mismatch is one
sentence (OverridesUnsupportedError), never a load with a garbage pointer.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

from rooflight.errors import OperationFailedError
from rooflight.estimate.experts import EXPERT_REGEX  # the estimator moves exactly these tensors
from rooflight.runtime.ggml_api import ggml_function

GGML_BACKEND_DEVICE_TYPE_CPU = 0  # ggml-backend.h enum ggml_backend_dev_type


class OverridesUnsupportedError(OperationFailedError):
    """This llama-cpp-python build cannot take tensor placement overrides."""


def expert_patterns(n_cpu_moe: int) -> list[str]:
    """The patterns llama.cpp's --n-cpu-moe N adds: one per layer 0..N-1 (llm_ffn_block_regex)."""
    if n_cpu_moe < 0:
        raise ValueError("n_cpu_moe must be 0 or more")
    return [f"blk\\.{i}{EXPERT_REGEX}" for i in range(n_cpu_moe)]


class _Override(ctypes.Structure):
    # llama.h: struct llama_model_tensor_buft_override { const char * pattern; ggml_backend_buffer_type_t buft; }
    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def _lib():
    import llama_cpp.llama_cpp as lc

    return lc


def _symbol(name: str, restype, argtypes):
    """A ggml function (runtime/ggml_api.py), or one sentence where this build lacks it."""
    fn = ggml_function(name, restype, argtypes)
    if fn is None:
        raise OverridesUnsupportedError(
            f"This llama-cpp-python build does not export {name}, so MoE experts cannot be kept in RAM; "
            "load without --n-cpu-moe.")
    return fn


@functools.cache
def check_layout() -> None:
    """Raise OverridesUnsupportedError unless llama_model_params is laid out as this module
    assumes: tensor_buft_overrides the second pointer, and llama.cpp's defaults reading back
    as llama.h documents them (devices and overrides NULL, n_gpu_layers -1, extra buffer types
    on, no_alloc off): a struct that disagreed with the C one would not read them back."""
    lc = _lib()
    params_cls = getattr(lc, "llama_model_params", None)
    fields = [f[0] for f in getattr(params_cls, "_fields_", ())]
    problem = None
    if params_cls is None or fields[:3] != ["devices", "tensor_buft_overrides", "n_gpu_layers"]:
        problem = f"its llama_model_params starts with {fields[:3]}"
    elif params_cls.tensor_buft_overrides.offset != ctypes.sizeof(ctypes.c_void_p):
        problem = "tensor_buft_overrides is not the second pointer of llama_model_params"
    else:
        d = lc.llama_model_default_params()
        if (d.devices, d.tensor_buft_overrides, d.n_gpu_layers) != (None, None, -1) or not d.use_extra_bufts or d.no_alloc:
            problem = "llama.cpp's default model parameters do not read back as llama.h defines them"
    if problem:
        raise OverridesUnsupportedError(
            f"This llama-cpp-python build cannot keep MoE experts in RAM ({problem}); load without --n-cpu-moe.")


@functools.cache
def cpu_buffer_type() -> int:
    """ggml_backend_cpu_buffer_type(), found through ggml's backend registry (the CPU device's
    buffer type) and checked against the exported function: llama-model-loader.cpp compares
    the override with that exact pointer to also allow the CPU's repacked buffer types."""
    by_type = _symbol("ggml_backend_dev_by_type", ctypes.c_void_p, [ctypes.c_int])
    dev_buft = _symbol("ggml_backend_dev_buffer_type", ctypes.c_void_p, [ctypes.c_void_p])
    dev = by_type(GGML_BACKEND_DEVICE_TYPE_CPU)
    buft = dev_buft(dev) if dev else None
    if not buft:
        raise OverridesUnsupportedError("ggml's backend registry has no CPU device; load without --n-cpu-moe.")
    try:
        exported = _symbol("ggml_backend_cpu_buffer_type", ctypes.c_void_p, [])()
    except OverridesUnsupportedError:
        exported = buft
    if exported != buft:
        raise OverridesUnsupportedError(
            "ggml's CPU device and ggml_backend_cpu_buffer_type() disagree in this build; load without --n-cpu-moe.")
    return int(buft)


def buffer_type_name(buft: int) -> str:
    return _symbol("ggml_backend_buft_name", ctypes.c_char_p, [ctypes.c_void_p])(buft).decode()


class BufferOverrides:
    """A NULL-terminated llama_model_tensor_buft_override array and the strings it points to.

    apply(params) sets it on a llama_model_params; release(params) clears the pointer and
    drops the array and strings (ctypes frees them). Use as a context manager around the load.
    """

    def __init__(self, patterns: Sequence[str], buft: int | None = None) -> None:
        check_layout()
        limit = int(_lib().llama_max_tensor_buft_overrides())
        if len(patterns) >= limit:
            raise OverridesUnsupportedError(
                f"{len(patterns)} tensor overrides are more than this llama.cpp build accepts ({limit - 1}).")
        self.patterns = list(patterns)
        self.buft = cpu_buffer_type() if buft is None else buft
        self._strings: list[ctypes.Array] | None = [ctypes.create_string_buffer(p.encode()) for p in self.patterns]
        arr = (_Override * (len(self.patterns) + 1))()
        for slot, s in zip(arr, self._strings, strict=False):  # the last slot stays the terminator
            slot.pattern = ctypes.cast(s, ctypes.c_char_p)
            slot.buft = self.buft
        arr[len(self.patterns)].pattern = None  # the terminator llama.cpp stops at
        arr[len(self.patterns)].buft = None
        self._array: ctypes.Array | None = arr

    @classmethod
    def for_experts(cls, n_cpu_moe: int) -> BufferOverrides | None:
        """The overrides of llama.cpp's --n-cpu-moe n_cpu_moe; None for 0 (nothing to override)."""
        return cls(expert_patterns(n_cpu_moe)) if n_cpu_moe else None

    @property
    def released(self) -> bool:
        return self._array is None

    @property
    def address(self) -> int:
        if self._array is None:
            raise RuntimeError("the override list was already released")
        return ctypes.addressof(self._array)

    def apply(self, params) -> None:
        params.tensor_buft_overrides = self.address

    def release(self, params=None) -> None:
        if params is not None:
            params.tensor_buft_overrides = None  # llama.cpp must never see the freed array
        self._array = None
        self._strings = None

    def __enter__(self) -> BufferOverrides:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
