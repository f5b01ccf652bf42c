"""Make llama.cpp's GPU numbering match the plan's.

The plan numbers GPUs as NVML does: by PCI bus id. CUDA numbers them fastest first unless
CUDA_DEVICE_ORDER=PCI_BUS_ID is set before it initialises (CUDA C Programming Guide, "CUDA
Environment Variables"), so on a machine with an RTX 4090 in the second slot and an RTX
3060 in the first, a plan for "GPU 1" would land on CUDA device 0. Two guards:

- pci_bus_order(): set CUDA_DEVICE_ORDER=PCI_BUS_ID for this process (and pci_order_environ
  for child processes) before llama.cpp is imported; rooflight/__init__.py calls it.
- runtime_index_map(): where the orders still differ (the user set another order, or
  CUDA_VISIBLE_DEVICES hides or reorders GPUs), map each plan GPU to llama.cpp's device with
  the same PCI bus id, and reorder per-device settings (tensor_split) to llama.cpp's order.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping, Sequence

ENV = "CUDA_DEVICE_ORDER"
PCI = "PCI_BUS_ID"

_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])")


def pci_bus_order(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Ask CUDA for PCI bus order unless the user chose an order; a warning if they chose
    another one (the plan's GPU numbers are then mapped by bus id at load)."""
    environ = os.environ if environ is None else environ
    value = environ.setdefault(ENV, PCI)
    if value != PCI:
        return (f"{ENV}={value} numbers GPUs differently from NVML; Rooflight maps its plan to "
                "llama.cpp's devices by PCI bus id")
    return None


def pci_order_environ(environ: MutableMapping[str, str]) -> dict[str, str]:
    """A copy of `environ` for a child process that will start llama.cpp."""
    env = dict(environ)
    env.setdefault(ENV, PCI)
    return env


def normalize_bus_id(bus_id: str | bytes | None) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) from NVML's "00000000:C1:00.0" or CUDA's "0000:c1:00.0"."""
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode(errors="replace")
    if not bus_id:
        return None
    m = _BUS_ID.match(bus_id.strip())
    if not m:
        return None
    return (int(m.group(1) or "0", 16), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4)))


def runtime_index_map(plan_bus_ids: Sequence[str | None], runtime_bus_ids: Sequence[str | None]) -> dict[int, int] | None:
    """plan GPU index -> llama.cpp device index, matched by PCI bus id.

    None when nothing can be matched (ids unknown on either side): the orders are then
    assumed equal, which pci_bus_order() makes true for CUDA. A plan GPU that llama.cpp
    does not see (hidden by CUDA_VISIBLE_DEVICES) is left out of the map."""
    runtime = {normalize_bus_id(b): j for j, b in enumerate(runtime_bus_ids) if normalize_bus_id(b)}
    mapping = {}
    for i, b in enumerate(plan_bus_ids):
        key = normalize_bus_id(b)
        if key is not None and key in runtime:
            mapping[i] = runtime[key]
    return mapping or None


def reorder_split(split: Sequence[float], mapping: dict[int, int] | None, n_runtime: int) -> list[float]:
    """tensor_split in the plan's GPU order -> the same fractions in llama.cpp's order."""
    if not mapping:
        return list(split)
    out = [0.0] * max(n_runtime, max(mapping.values()) + 1)
    for i, fraction in enumerate(split):
        if i in mapping:
            out[mapping[i]] = fraction
    return out


def llama_gpu_bus_ids() -> list[str | None]:
    """The PCI bus id of each GPU llama.cpp sees, in its own device order (ggml backend API)."""
    import ctypes

    import llama_cpp

    lib = llama_cpp.llama_cpp._lib

    class Caps(ctypes.Structure):  # a few bools, more in newer ggml: room for 32
        _fields_ = [("flags", ctypes.c_bool * 32)]

    class Props(ctypes.Structure):  # ggml-backend.h struct ggml_backend_dev_props
        _fields_ = [("name", ctypes.c_char_p), ("description", ctypes.c_char_p),
                    ("memory_free", ctypes.c_size_t), ("memory_total", ctypes.c_size_t),
                    ("type", ctypes.c_int), ("device_id", ctypes.c_char_p), ("caps", Caps)]

    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_dev_get.restype = ctypes.c_void_p
    lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    lib.ggml_backend_dev_get_props.argtypes = [ctypes.c_void_p, ctypes.POINTER(Props)]
    lib.ggml_backend_dev_get_props.restype = None
    gpu_type = 1  # GGML_BACKEND_DEVICE_TYPE_GPU (CPU 0, GPU 1, IGPU 2, ACCEL 3)
    out: list[str | None] = []
    for i in range(int(lib.ggml_backend_dev_count())):
        props = Props()
        lib.ggml_backend_dev_get_props(lib.ggml_backend_dev_get(i), ctypes.byref(props))
        if props.type == gpu_type:
            out.append(props.device_id.decode() if props.device_id else None)
    return out


def visible_to_cuda(gpus: Sequence, environ: Mapping[str, str]) -> tuple[list, list[str]]:
    """NVIDIA GPUs (in NVML order) as CUDA will see them under CUDA_VISIBLE_DEVICES.

    CUDA keeps the listed devices in the listed order and stops at the first entry it cannot
    parse; integers index the PCI-ordered list. Plans then number GPUs as llama.cpp will.
    UUIDs ("GPU-...", "MIG-...") are not matched here: every GPU is kept, with a warning."""
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return list(gpus), []
    chosen: list = []
    for token in (t.strip() for t in value.split(",")):
        if token.startswith(("GPU-", "MIG-")):
            return list(gpus), [f"CUDA_VISIBLE_DEVICES={value} names GPUs by UUID; every NVIDIA GPU "
                                "is planned for, whether CUDA shows it or not"]
        if not token.isdigit() or int(token) >= len(gpus):
            break  # CUDA ignores this entry and every one after it
        gpu = gpus[int(token)]
        if gpu not in chosen:
            chosen.append(gpu)
    return chosen, []
