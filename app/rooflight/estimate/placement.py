"""Which device holds each block, as llama.cpp's load_tensors assigns it.

llama-model.cpp: i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0); block il (and the
output layer, il == n_layer) is on a GPU when il >= i_gpu_start. GPUs share the offloaded
range in proportion to their free memory (or tensor_split). The input embedding always
stays on the CPU ("very little benefit to offloading the input layer").
"""

from __future__ import annotations

import bisect
import functools
import itertools

from rooflight.hardware.profile import HardwareProfile
from rooflight.hardware.remote import remote_devices

CPU = "cpu"


def gpu_name(index: int) -> str:
    return f"gpu{index}"


def offload_devices(hardware: HardwareProfile) -> tuple[tuple[str, int], ...]:
    """(name, free bytes) of the devices llama.cpp offloads layers to, in its order:
    remote RPC devices first, then this machine's GPUs (src/llama.cpp device selection);
    the free bytes are what llama.cpp splits the offloaded layers by."""
    remote = tuple((d.name, d.split_bytes) for d in remote_devices(hardware))
    local = tuple((gpu_name(g.index), g.free_bytes) for g in hardware.offload_gpus)
    return remote + local


def has_offload_devices(hardware: HardwareProfile) -> bool:
    return bool(offload_devices(hardware))


def layer_devices(
    n_layer: int,
    n_gpu_layers: int,
    hardware: HardwareProfile,
    tensor_split: tuple[float, ...] | None = None,
) -> list[str]:
    """Device of blocks 0..n_layer-1 and, at index n_layer, of the output layer."""
    # the planner asks for the same few placements many times (each GPU-layer count it
    # tries, for every quant of a model): remember them
    return list(_layer_devices(n_layer, n_gpu_layers, hardware, tensor_split))


@functools.lru_cache(maxsize=1024)
def _layer_devices(
    n_layer: int,
    n_gpu_layers: int,
    hardware: HardwareProfile,
    tensor_split: tuple[float, ...] | None,
) -> tuple[str, ...]:
    gpus = offload_devices(hardware)
    if not gpus or n_gpu_layers <= 0:
        return (CPU,) * (n_layer + 1)
    weights = list(tensor_split) if tensor_split else [float(free) for _, free in gpus]
    if sum(weights) <= 0:
        weights = [1.0] * len(gpus)
    total = sum(weights)
    splits, acc = [], 0.0
    for w in weights:
        acc += w
        splits.append(acc / total)
    i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0)
    act_gpu_layers = min(n_gpu_layers, n_layer + 1)
    devices = []
    for il in range(n_layer + 1):
        if il < i_gpu_start or (il - i_gpu_start) >= act_gpu_layers:
            devices.append(CPU)
            continue
        # std::upper_bound over the cumulative split points
        k = bisect.bisect_right(splits, (il - i_gpu_start) / act_gpu_layers)
        devices.append(gpus[min(k, len(gpus) - 1)][0])
    return tuple(devices)


@functools.lru_cache(maxsize=4096)
def device_runs(devices: tuple[str, ...]) -> tuple[tuple[str, int, int], ...]:
    """(device, first layer, end) for each run of consecutive layers on one device.

    Placement gives each device one contiguous range, so per-device sums of per-layer
    figures are a few slice sums instead of a Python loop over every layer; summing a
    slice in order (sum(values, start)) adds exactly as that loop did."""
    runs, start = [], 0
    for dev, run in itertools.groupby(devices):
        end = start + sum(1 for _ in run)
        runs.append((dev, start, end))
        start = end
    return tuple(runs)
