"""The Llama() arguments of a plan, with per-GPU settings in llama.cpp's device order.

The plan numbers GPUs as detection does (NVML's PCI order, less what CUDA_VISIBLE_DEVICES
hides); llama.cpp numbers its devices as CUDA does. CUDA_DEVICE_ORDER=PCI_BUS_ID (set by
rooflight/__init__.py) makes the two agree; where a user's environment still makes them
differ, the tensor_split fractions are moved to the llama.cpp device with the same PCI bus
id, so a plan for "GPU 1" never lands on GPU 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from rooflight.estimate.config import RunConfig
from rooflight.hardware.device_order import llama_gpu_bus_ids, reorder_split, runtime_index_map


def load_kwargs(config: RunConfig, gpu_bus_ids: Sequence[str | None], backend: str,
                runtime_bus_ids: Sequence[str | None] | None = None) -> dict:
    """config.runtime_kwargs(), tensor_split reordered to llama.cpp's devices when needed.

    gpu_bus_ids: the plan's GPUs' PCI bus ids in plan order; runtime_bus_ids: llama.cpp's
    GPUs' ids in its order (read from llama.cpp when None)."""
    kwargs = config.runtime_kwargs()
    split = kwargs.get("tensor_split")
    if not split or backend == "cpu" or len(gpu_bus_ids) < 2 or not any(gpu_bus_ids):
        return kwargs
    runtime = list(llama_gpu_bus_ids() if runtime_bus_ids is None else runtime_bus_ids)
    mapping = runtime_index_map(gpu_bus_ids, runtime)
    if mapping and any(i != j for i, j in mapping.items()):
        kwargs["tensor_split"] = reorder_split(split, mapping, len(runtime))
    return kwargs


def plan_load_kwargs(config: RunConfig, hardware) -> dict:
    """load_kwargs for a plan made for `hardware` (a HardwareProfile)."""
    return load_kwargs(config, [g.pci_bus_id for g in hardware.offload_gpus], hardware.backend)
