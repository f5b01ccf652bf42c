"""Memory plan: what llama.cpp allocates on each device for one RunConfig.

Weights by layer placement (placement.py), KV cache by layer (kv.py), compute buffers
(compute.py; split_compute.py where the graph is split across devices) and a per-GPU runtime
overhead; then the fit state (CONTRACT.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from rooflight.estimate import experts
from rooflight.estimate.amx_layout import amx_padding, keeps_amx_weights
from rooflight.estimate.compute import compute_bytes, ffn_peak, output_buffer_bytes
from rooflight.estimate.config import RunConfig
from rooflight.estimate.fit import Fit
from rooflight.estimate.kv import kv_bytes_by_layer
from rooflight.estimate.layers import layer_table
from rooflight.estimate.placement import CPU, device_runs, gpu_name, layer_devices, offload_devices
from rooflight.estimate.split_compute import (
    pipeline_cpu_bytes,
    pipeline_device_bytes,
    pipeline_parallel,
    remote_compute_bytes,
)
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile
from rooflight.hardware.remote import is_remote, remote_device, remote_devices

MIB = 1024 * 1024

# Runtime overhead per GPU that no llama.cpp buffer reports: the driver context, cuBLAS /
# hipBLAS workspaces, the kernels' own scratch. Ollama reserves 457 MiB per CUDA/ROCm GPU
# for this (REFERENCE.md §3, llm/memory.go); Vulkan and SYCL contexts are smaller but not
# published, so we use the same figure as a cautious bound. Metal's command buffers live
# in the unified memory already counted as used by the process: 0.
GPU_OVERHEAD_BYTES = {"cuda": 457 * MIB, "rocm": 457 * MIB, "vulkan": 457 * MIB, "sycl": 457 * MIB, "metal": 0}

# Memory kept free for everything else. GPUs: max(256 MiB, 3% of the card) - llama.cpp's
# own --fit keeps 1 GiB but already counts its overhead inside that margin, we count ours
# above. CPU: 5% of RAM (min 512 MiB) for the OS, the app and file cache churn.
def gpu_margin(total_bytes: int) -> int:
    return max(256 * MIB, int(0.03 * total_bytes))


def cpu_margin(total_bytes: int) -> int:
    return max(512 * MIB, int(0.05 * total_bytes))


FITS = tuple(Fit)  # best first


@dataclass(frozen=True)
class DeviceMemory:
    device: str  # "cpu" | "gpu0" ...
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    overhead_bytes: int
    available_bytes: int  # what this plan may use on the device (free minus margin)

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes + self.overhead_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.available_bytes

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "weights_bytes": self.weights_bytes,
            "kv_bytes": self.kv_bytes,
            "compute_bytes": self.compute_bytes,
            "overhead_bytes": self.overhead_bytes,
            "total_bytes": self.total_bytes,
            "available_bytes": self.available_bytes,
        }


@dataclass(frozen=True)
class MemoryPlan:
    fit: str
    devices: tuple[DeviceMemory, ...]
    layer_devices: tuple[str, ...]  # device of each block, then of the output layer
    n_cpu_moe: int = 0  # routed experts of blocks 0..n-1 in RAM whatever their block's device
    # of the RAM weights, what the AMX buffer's packed layout adds to the file's bytes
    # (estimate/amx_layout.py; 0 where the CPU keeps no weights there)
    amx_layout_bytes: int = 0

    @property
    def fits(self) -> bool:
        return self.fit != "too_large"

    def device(self, name: str) -> DeviceMemory | None:
        return next((d for d in self.devices if d.device == name), None)

    @property
    def total_bytes(self) -> int:
        return sum(d.total_bytes for d in self.devices)

    def to_dict(self) -> dict:
        d: dict = {"fit": self.fit, "devices": [dev.to_dict() for dev in self.devices]}
        if self.amx_layout_bytes:
            d["amx_layout_bytes"] = self.amx_layout_bytes
        return d


def _add_by_device(out: dict[str, int], devices: list[str], per_layer: tuple[int, ...]) -> None:
    """out[device] += the per-layer figures of the layers on it. Devices hold contiguous
    runs of layers, so each run is one C-level sum (exact: the figures are integers)."""
    for dev, start, end in device_runs(tuple(devices[: len(per_layer)])):
        out[dev] += sum(per_layer[start:end])


def _weights_by_device(spec: ModelSpec, devices: list[str]) -> dict[str, int]:
    table = layer_table(spec)
    out = {d: 0 for d in set(devices) | {CPU}}
    _add_by_device(out, devices, table.bytes)
    # token_embd and other input-side tensors stay on the CPU
    out[CPU] += table.input_bytes
    output_dev = devices[spec.n_layer]
    output = table.output_bytes
    if output_dev == CPU:
        # a tied output shares token_embd's CPU copy; on a GPU llama.cpp loads a second
        # copy (TENSOR_DUPLICATED in llama-model-loader.cpp). Where the CPU's kernels convert
        # it (repack, AMX) llama.cpp loads a second copy in RAM too, but the mapped original
        # is then page cache of which the lookups use a few rows (runtime/confirm.py)
        output -= table.tied_output_bytes
    out[output_dev] += output
    return out


def _amx_layout_bytes(spec: ModelSpec, devices: list[str], hardware: HardwareProfile) -> int:
    """What the AMX buffer's packed layout adds to the weights the CPU runs, where it keeps them."""
    if not keeps_amx_weights(hardware.cpu):
        return 0
    per_layer, output_extra = amx_padding(spec)
    on_cpu = sum(extra for dev, extra in zip(devices[: spec.n_layer], per_layer, strict=True) if dev == CPU)
    return on_cpu + (output_extra if devices[spec.n_layer] == CPU else 0)


def _available(hardware: HardwareProfile, device: str, gpu_used_unified: int) -> int:
    if is_remote(device):
        # what its rpc-server reports free, less the same margin a local device keeps
        rd = remote_device(hardware, device)
        margin = cpu_margin(rd.total_bytes) if rd.is_cpu else gpu_margin(rd.total_bytes)
        return max(0, rd.free_bytes - margin)
    if device == CPU:
        ram = hardware.cpu.ram_available_bytes
        return max(0, ram - cpu_margin(hardware.cpu.ram_total_bytes) - gpu_used_unified)
    gpu = next(g for g in hardware.gpus if gpu_name(g.index) == device)
    return max(0, gpu.free_bytes - gpu_margin(gpu.vram_total_bytes or gpu.free_bytes))


def _overhead_bytes(hardware: HardwareProfile, device: str) -> int:
    if device == CPU:
        return 0
    if is_remote(device):  # the driver context lives on the remote machine's GPU, if any
        rd = remote_device(hardware, device)
        return 0 if rd.is_cpu else GPU_OVERHEAD_BYTES.get(rd.backend, 457 * MIB)
    return GPU_OVERHEAD_BYTES.get(hardware.backend, 457 * MIB)


def plan_memory(spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig) -> MemoryPlan:
    devices = layer_devices(spec.n_layer, cfg.n_gpu_layers, hardware, cfg.tensor_split)
    weights = _weights_by_device(spec, devices)
    amx_layout = _amx_layout_bytes(spec, devices, hardware)
    weights[CPU] += amx_layout
    experts.shift_weights(weights, spec, devices, cfg.n_cpu_moe)  # --n-cpu-moe: exact tensor bytes

    kv = {d: 0 for d in weights}
    _add_by_device(kv, devices if cfg.offload_kqv else [CPU] * len(devices), kv_bytes_by_layer(spec, cfg))

    names = [CPU] + sorted(d for d in weights if d != CPU)
    output_dev = devices[spec.n_layer]
    unified = {gpu_name(g.index) for g in hardware.gpus if g.unified_memory}
    usage = []  # (device, weights, kv, compute, overhead)
    pipeline = pipeline_parallel(devices, len(offload_devices(hardware)), cfg)
    blocks = devices[: spec.n_layer]
    for name in names:
        if pipeline:
            compute = (pipeline_cpu_bytes(spec, cfg) if name == CPU else
                       pipeline_device_bytes(spec, cfg, n_blocks=blocks.count(name),
                                             runs_last_block=bool(blocks) and blocks[-1] == name,
                                             runs_output=name == output_dev))
        elif is_remote(name):
            compute = remote_compute_bytes(spec, cfg, n_blocks=blocks.count(name), runs_output=name == output_dev,
                                           cpu_runs_layers=CPU in blocks)
        else:
            compute = compute_bytes(spec, cfg, runs_layers=name in blocks, runs_output=name == output_dev)
        if name == CPU:
            if experts.handovers(devices, cfg.n_cpu_moe):
                # the CPU now runs expert feed-forwards: at least one layer's FFN intermediates
                # (a cautious bound; not measured on a GPU build)
                compute = max(compute, ffn_peak(spec, cfg))
            compute += output_buffer_bytes(spec)
        overhead = _overhead_bytes(hardware, name)
        usage.append((name, weights[name], kv[name], compute, overhead))
    if spec.projector is not None:  # a vision model: the projector beside the model
        from rooflight.estimate.vision import add_projector_usage

        usage = add_projector_usage(usage, spec.projector, hardware, cfg)
    # a unified-memory GPU (Apple) takes its share out of the same RAM the CPU side uses
    gpu_used_unified = sum(sum(u[1:]) for u in usage if u[0] in unified)
    result = [DeviceMemory(*u, _available(hardware, u[0], gpu_used_unified)) for u in usage]
    # GPUs that got no layers still appear, empty, so the GUI can show their capacity
    for g in hardware.offload_gpus:
        if gpu_name(g.index) not in names:
            result.append(DeviceMemory(gpu_name(g.index), 0, 0, 0, 0, _available(hardware, gpu_name(g.index), 0)))
    for rd in remote_devices(hardware):
        if rd.name not in names:
            result.append(DeviceMemory(rd.name, 0, 0, 0, 0, _available(hardware, rd.name, 0)))
    fit = _fit_state(result, devices, spec.n_layer)
    if fit == Fit.FULL_GPU and experts.handovers(devices, cfg.n_cpu_moe):
        fit = Fit.PARTIAL_GPU  # every block is offloaded, but some experts run from RAM
    return MemoryPlan(fit=fit, devices=tuple(result), layer_devices=tuple(devices), n_cpu_moe=cfg.n_cpu_moe,
                      amx_layout_bytes=amx_layout)


def _fit_state(mems: list[DeviceMemory], devices: list[str], n_layer: int) -> Fit:
    if not all(m.fits for m in mems):
        return Fit.TOO_LARGE
    on_gpu = len(devices) - devices.count(CPU)
    if on_gpu == 0:
        return Fit.CPU_ONLY
    if on_gpu == n_layer + 1:
        return Fit.FULL_GPU
    return Fit.PARTIAL_GPU
