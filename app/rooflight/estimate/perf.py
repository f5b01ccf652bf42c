"""Roofline speed estimate: decode is bandwidth-bound, prefill compute-bound.

Decode (one token): each device reads its share of the active weights plus its KV cache
up to the current position; time = sum over devices of bytes / (bandwidth x efficiency),
plus a fixed cost per layer (kernel launches, graph work) and per vocabulary entry
(logits copy and sampling on the CPU). Partial offload adds, it does not blend
(REFERENCE.md §4).

Prefill (a prompt, in micro-batches of n_ubatch): each device needs
2 x active-params x T FLOPs plus attention, at its peak x efficiency, and never less than
the time to read its weights once; weights left on the CPU are copied to the GPU per
micro-batch (llama.cpp's op_offload for batches >= 32), so PCIe bounds that part.

Every constant says where it comes from. Where this machine has a probe of its llama.cpp
kernels (runtime/probe.py), the CPU's share is priced by the measured figures instead
(probe_roofline.py; `basis: probe`). Measurements of real models on this machine
(store/calibration) then scale the result (`calibrated`); the range says what it is
(ranges.py, `range_basis`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from rooflight.estimate import backend_constants as _bc
from rooflight.estimate import (
    experts,
    matmul_shape,
    moe_prompt,
    output_rows,
    probe_roofline,
    ranges,
    recurrent_work,
    sycl_attention,
    weight_passes,
)
from rooflight.estimate.backend_constants import BACKENDS, DEFAULT_CPU_MHZ, BackendConstants  # noqa: F401 (re-exported)
from rooflight.estimate.calibration import Calibration, Ratio
from rooflight.estimate.compute import micro_batch
from rooflight.estimate.config import RunConfig
from rooflight.estimate.cpu_attention import cpu_attention_cycles, cpu_attention_parts
from rooflight.estimate.fp4 import prefill_speed_factor
from rooflight.estimate.kernel_calibration import (
    ATTENTION_KERNEL,
    FIXED_KERNEL,
    KernelShares,
    shares_of,
    tally,
)
from rooflight.estimate.kv import kv_reads_by_layer
from rooflight.estimate.layers import cpu_cycles_per_weight, layer_table
from rooflight.estimate.memory import MemoryPlan
from rooflight.estimate.network import step_cost
from rooflight.estimate.placement import CPU, device_runs, gpu_name, offload_devices
from rooflight.estimate.probe import MachineProbe
from rooflight.estimate.tensor_rates import (
    amd_gfx,
    attention_tflops,
    dequantizes_for_gemm,
    main_weight_type,
    matmul_tflops,
)
from rooflight.gguf.quant_recipe import type_block_size
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import PEAK_BANDWIDTH_SOURCE, HardwareProfile
from rooflight.hardware.remote import is_remote, remote_device

# The table constants per backend live in backend_constants.py (re-exported here).
_CUDA, _METAL, _ROCM, _VULKAN, _CPU = _bc.CUDA, _bc.METAL, _bc.ROCM, _bc.VULKAN, _bc.CPU

# CPU prefill efficiency against cpu_peak_flops by the model's main weight type, fitted on
# the 2-core EPYC VM (bench/accuracy.py): F16 0.38, Q8_0 0.33, Q4_K 0.42, Q4_0 0.58 (its
# weights are repacked into 8x8 interleaved blocks for the GEMM kernels).
CPU_PREFILL_EFFICIENCY = {"F16": 0.38, "BF16": 0.38, "F32": 0.3, "Q8_0": 0.33, "Q4_0": 0.58, "IQ4_NL": 0.58}
CPU_PREFILL_EFFICIENCY_DEFAULT = 0.42  # K-quants and the rest


# CPU attention FLOPs cost this many GEMM FLOPs: fitted so that Gemma-3-270M (wide
# 4 x 256 attention on a 640-wide model) and the narrow-attention llama models agree.
CPU_ATTENTION_SLOWDOWN = 3.0


# the recurrent state scans' share in a measurement's kernel shares: table-priced work
# (recurrent_work.py), so a bench of a hybrid corrects it apart from the probe's kernels
SCAN_KERNEL = probe_roofline.table_kernel("recurrent_scan")


def cpu_prefill_efficiency(file_type: str) -> float:
    return CPU_PREFILL_EFFICIENCY.get(file_type.upper(), CPU_PREFILL_EFFICIENCY_DEFAULT)


# Per-token cost of copying the logits out and sampling from them on the CPU
# (llama-cpp-python's sampler chain), per vocabulary entry. Fitted with the CPU constants
# (the F16 pair: ~0.1 ms fixed with an 8k and a 32k vocabulary).
SAMPLING_S_PER_VOCAB = 1e-9

# CPU arithmetic: llama.cpp multiplies quantized weights by int8-quantized activations
# (AVX2 maddubs / AVX512-VNNI / NEON dotprod). Multiply-adds per cycle per core by ISA,
# counted as 2 FLOPs each; prefill efficiency above is relative to this rate. One rate for
# every ISA with a wide int8 dot product: the published CPUs (bench/data/llama_bench_rows.json,
# 2024-2026 builds) run prompts at 5-17 multiply-adds per core-GHz whether AVX2 (a
# Threadripper PRO 5975WX: 8-10), AVX-512 VNNI (Ryzen 7950X / HX 370, a Xeon with AMX:
# 5-12) or NEON dotprod (Apple M2/M4 Max, Grace: 6-28): the nominal issue widths (4x
# between AVX2 and VNNI) are not what llama.cpp's kernels reach. NEON without dotprod (a
# Raspberry Pi 4: ~1.3) a quarter of it (one multiply-add per lane, not four). The clock:
# _cpu_hz. A probe of the machine (estimate/probe.py) replaces this with measured kernel rates.
def cpu_peak_flops(hardware: HardwareProfile, n_threads: int) -> float:
    isa = set(hardware.cpu.isa)
    if isa & {"avx512_vnni", "avx_vnni", "i8mm", "avx512f", "avx2", "dotprod"}:
        per_cycle = 128  # int8 dot-product instructions
    elif "neon" in isa:
        per_cycle = 32
    else:
        per_cycle = 8
    cores = max(1, min(n_threads, hardware.cpu.cores or 1))
    return cores * _cpu_hz(hardware, matmul=True) * per_cycle


@dataclass(frozen=True)
class PerfEstimate:
    decode_tok_s: float
    prefill_tok_s: float
    decode_tok_s_range: tuple[float, float]
    prefill_tok_s_range: tuple[float, float]
    time_to_first_token_s: float
    bound: str  # decode bound: memory | compute | overhead
    prefill_bound: str  # compute | memory | pcie
    calibrated: bool
    basis: str = "table"  # what the speed stands on: probe | table | calibrated
    range_basis: str = ""  # what the ranges are (estimate/ranges.py)
    # set when layers run on remote RPC machines (network.py): see network_summary()
    network: dict | None = None
    # with a probe: how its kernel time splits over the probe's kernels, stored with a
    # measurement so that it corrects those kernels (kernel_calibration.py); not in to_dict
    kernels: KernelShares | None = None

    def to_dict(self) -> dict:
        d = {
            "decode_tok_s": round(self.decode_tok_s, 3),
            "prefill_tok_s": round(self.prefill_tok_s, 3),
            "decode_tok_s_range": [round(x, 3) for x in self.decode_tok_s_range],
            "prefill_tok_s_range": [round(x, 3) for x in self.prefill_tok_s_range],
            "time_to_first_token_s": round(self.time_to_first_token_s, 4),
            "bound": self.bound,
            "prefill_bound": self.prefill_bound,
            "calibrated": self.calibrated,
            "basis": self.basis,
            "range_basis": self.range_basis,
        }
        if self.network is not None:
            d["network"] = self.network
        return d


def _device_bandwidth_gbs(hardware: HardwareProfile, device: str) -> float:
    if is_remote(device):  # an RPC device is priced as a device of its own machine
        return _device_bandwidth_gbs(*remote_device(hardware, device).local_view())
    if device == CPU:
        return hardware.cpu.ram_bandwidth_gbs or 20.0
    gpu = next(g for g in hardware.gpus if gpu_name(g.index) == device)
    return gpu.bandwidth_gbs or 100.0


def _read_bytes_s(hardware: HardwareProfile, device: str) -> float:
    """Bytes per second a device reads weights at by the table (decode, and the prompt's
    memory floor): its bandwidth figure x its backend's decode efficiency."""
    if is_remote(device):
        return _read_bytes_s(*remote_device(hardware, device).local_view())
    if device == CPU:
        return cpu_bandwidth_bytes_s(hardware)
    return _device_bandwidth_gbs(hardware, device) * 1e9 * _device_constants(hardware, device).decode_efficiency


def _device_constants(hardware: HardwareProfile, device: str) -> BackendConstants:
    if is_remote(device):
        return _device_constants(*remote_device(hardware, device).local_view())
    if device == CPU:
        return _CPU
    for measured_on, constants in hardware.gpu_constants:  # this machine's probe (probe_gpu.py)
        if measured_on == device:
            return constants
    return BACKENDS.get(hardware.backend, _VULKAN)


def moe_blocks(spec: ModelSpec, start: int, end: int) -> int:
    """Blocks in [start, end) with routed experts (a model's dense leading blocks have none)."""
    if not spec.n_expert:
        return 0
    return sum(1 for n in experts.expert_table(spec).bytes[start:end] if n)


def _blocks_fixed_s(c: BackendConstants, spec: ModelSpec, start: int, end: int) -> float:
    """The fixed cost per token (or micro-batch) of blocks [start, end) on a device with
    constants c: per block, and per block with routed experts its extra kernels."""
    return c.layer_overhead_s * (end - start) + c.moe_layer_overhead_s * moe_blocks(spec, start, end)


def _weight_reads_per_token(spec: ModelSpec, devices: tuple[str, ...]) -> dict[str, float]:
    """Bytes of weights each device reads to generate one token."""
    table = layer_table(spec)
    reads: dict[str, float] = {}
    for dev, start, end in device_runs(devices[: spec.n_layer]):
        reads[dev] = sum(table.active_bytes[start:end], reads.get(dev, 0.0))
    out_dev = devices[spec.n_layer]
    reads[out_dev] = reads.get(out_dev, 0.0) + table.output_bytes
    return reads


def _is_float_model(spec: ModelSpec) -> bool:
    return spec.file_type.upper() in ("F16", "BF16", "F32", "ALL_F32", "MOSTLY_F16")


@dataclass(frozen=True)
class _DecodeFixed:
    """The position-independent part of decode_parts_s for one plan."""

    reads: dict[str, float]  # weight bytes read per token, per device priced by the table
    cpu_cycles: float  # table CPU dot-product cycles per token
    overhead: float  # fixed seconds per token
    cpu_weights: dict[str, float] | None = None  # with a probe: the CPU's weight time by bound
    cpu_kernels: dict[str, float] | None = None  # with a probe: its seconds per kernel (weight type)
    recurrent_cycles: float = 0.0  # CPU cycles scanning recurrent states (recurrent_work.py)


def _handover_s(devices, mem: MemoryPlan, overhead_per_layer: dict[str, float]) -> float:
    """Experts in RAM: each such block hands its activations GPU -> CPU -> GPU once per token,
    taken as one more fixed per-layer cost of its GPU (an assumption, not fitted)."""
    return sum(n * overhead_per_layer[dev] for dev, n in experts.handovers(devices, mem.n_cpu_moe).items())


def _decode_fixed(
    spec: ModelSpec, hardware: HardwareProfile, mem: MemoryPlan, cfg: RunConfig | None = None,
    probe: MachineProbe | None = None,
) -> _DecodeFixed:
    devices = mem.layer_devices
    overhead_per_layer = {dev: _device_constants(hardware, dev).layer_overhead_s for dev in set(devices)}
    reads = _weight_reads_per_token(spec, devices)
    experts.shift_reads(reads, spec, devices, mem.n_cpu_moe)  # experts in RAM are read from RAM
    cpu_recurrent = sum(recurrent_work.recurrent_layers(spec, s0, s1)
                        for dev, s0, s1 in device_runs(devices[: spec.n_layer]) if dev == CPU)
    scan_cycles = recurrent_work.decode_cycles_per_token(spec, cpu_recurrent)
    if probe is not None and cfg is not None and CPU in reads:
        table = layer_table(spec)
        by_type = [table.active_by_type[i] for dev, s0, s1 in device_runs(devices[: spec.n_layer])
                   if dev == CPU for i in range(s0, s1)]
        if devices[spec.n_layer] == CPU:
            by_type.append(table.output_by_type or {})
        by_type += experts.cpu_by_type(spec, devices, mem.n_cpu_moe)
        cpu_layers = sum(e - s0 for dev, s0, e in device_runs(devices[: spec.n_layer]) if dev == CPU)
        overhead = probe_roofline.fixed_s(probe, cpu_layers, spec.n_vocab)
        for dev, start, end in device_runs(devices[: spec.n_layer]):
            if dev != CPU:
                overhead += _blocks_fixed_s(_device_constants(hardware, dev), spec, start, end)
        kernels: dict[str, float] = {}
        weights = probe_roofline.decode_weights_s(probe, by_type, _probe_table_matvec(hardware, cfg, probe), kernels)
        del reads[CPU]
        return _DecodeFixed(reads, 0.0, overhead + _handover_s(devices, mem, overhead_per_layer), weights, kernels,
                            scan_cycles)
    overhead = SAMPLING_S_PER_VOCAB * spec.n_vocab
    for dev, start, end in device_runs(devices[: spec.n_layer]):
        overhead += _blocks_fixed_s(_device_constants(hardware, dev), spec, start, end)
    cycles = _cpu_cycles_per_token(spec, devices)
    if mem.n_cpu_moe:  # experts in RAM (estimate/experts.py): the CPU multiplies them too
        cycles += experts.cpu_cycles(spec, devices, mem.n_cpu_moe)
    return _DecodeFixed(reads, cycles, overhead + _handover_s(devices, mem, overhead_per_layer),
                        recurrent_cycles=scan_cycles)


def _probe_table_matvec(hardware: HardwareProfile, cfg: RunConfig, probe: MachineProbe) -> Callable[[str, float], float]:
    """The table's matrix-vector price of the types a probe did not measure, at the level its
    measured types show where that is past the table's band (probe_roofline.table_level)."""
    def table(kind: str, n: float) -> float:
        return cpu_table_matvec_s(hardware, cfg, kind, n)

    return probe_roofline.level_table(
        table, probe_roofline.table_level(probe.kernels, table, _CPU.decode_band, prompt=False))


def _probe_table_matmul(
    hardware: HardwareProfile, cfg: RunConfig, probe: MachineProbe, file_type: str,
) -> Callable[[str, float], float]:
    """The same for prompts: the table prices a model's matmuls by its file type, and its level
    is read type by type on the measured ones."""
    def per_type(kind: str, n: float) -> float:
        return cpu_table_matmul_s(hardware, cfg, kind, n)

    level = probe_roofline.table_level(probe.kernels, per_type, _CPU.prefill_band, prompt=True)
    return probe_roofline.level_table(lambda kind, n: cpu_table_matmul_s(hardware, cfg, file_type, n), level)


def cpu_table_matvec_s(hardware: HardwareProfile, cfg: RunConfig, ggml_type: str, elements: float) -> float:
    """The table roofline for one CPU matrix-vector product over `elements` weights of a
    type: the longer of reading them and multiplying them."""
    block, size = type_block_size(ggml_type)
    t_mem = elements * size / block / cpu_bandwidth_bytes_s(hardware)
    t_cmp = elements * cpu_cycles_per_weight(ggml_type) / (_cpu_threads(hardware, cfg) * _cpu_hz(hardware))
    return max(t_mem, t_cmp)


def decode_parts_s(
    spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig, mem: MemoryPlan, position: int,
    _fixed: _DecodeFixed | None = None, probe: MachineProbe | None = None,
    kernels: dict[str, float] | None = None,
) -> dict[str, float]:
    """Seconds for one token at `position`, split by what bounds each part:
    {"memory": bytes over bandwidth, "compute": CPU dot products, "overhead": fixed}.

    probe: this machine's probe (Calibration.probe_for): the CPU's share is then priced by
    its measured kernels, attention and fixed costs. _fixed: _decode_fixed(...) for this
    plan, when the caller asks for several positions. kernels, if given, gathers the
    seconds the probe's attention figure prices at this position (kernel_calibration.py)."""
    devices = mem.layer_devices
    fixed = _fixed or _decode_fixed(spec, hardware, mem, cfg, probe)
    reads = dict(fixed.reads)
    kv_reads = kv_reads_by_layer(spec, cfg, position)
    # the CPU's flash attention reads only the cells the mask leaves (kv_cells_attended);
    # computed once, where the table prices a CPU run
    cpu_kv_reads: tuple[float, ...] | None = None
    kv_runs = device_runs(devices[: spec.n_layer]) if cfg.offload_kqv else ((CPU, 0, spec.n_layer),)
    attention_cycles = 0.0
    parts = {"memory": 0.0, "compute": 0.0, "overhead": fixed.overhead}
    for dev, start, end in kv_runs:
        if dev == CPU and fixed.cpu_weights is not None:
            # the probe measured attention as time per modelled cycle (cache reads included),
            # its K/V reads and per-query-head work apart where it ran a GQA model too
            assert probe is not None  # cpu_weights come from a probe
            att = probe.attention_for(cfg.flash_attn)
            units = cpu_attention_parts(spec, cfg, position, start, end, hardware.cpu.isa)
            if att is not None:
                parts["compute"] += att.decode_s(units)
                tally(kernels, ATTENTION_KERNEL, att.decode_s(units))
            else:
                parts["compute"] += units.total / (_cpu_threads(hardware, cfg) * _cpu_hz(hardware))
            continue
        run_reads = kv_reads
        if dev == CPU and cfg.flash_attn:
            if cpu_kv_reads is None:
                cpu_kv_reads = kv_reads_by_layer(spec, cfg, position, attended=True)
            run_reads = cpu_kv_reads
        reads[dev] = sum(run_reads[start:end], reads.get(dev, 0.0))
        if dev == CPU:
            attention_cycles += cpu_attention_cycles(spec, cfg, position, start, end, hardware.cpu.isa)
    if fixed.cpu_weights is not None:
        parts["memory"] += fixed.cpu_weights["memory"]
        parts["compute"] += fixed.cpu_weights["compute"]
    # the recurrent layers' state scans: an op of their own, after the projections
    parts["compute"] += fixed.recurrent_cycles / cpu_matvec_hz(hardware, cfg)
    for dev, nbytes in reads.items():
        t_mem = nbytes / _read_bytes_s(hardware, dev)
        # few CPU cores cannot dequantize and multiply as fast as RAM delivers, nor walk a
        # long cache one row at a time
        t_cmp = ((fixed.cpu_cycles + attention_cycles) / (_cpu_threads(hardware, cfg) * _cpu_hz(hardware))
                 if dev == CPU else 0.0)
        if t_cmp > t_mem:
            parts["compute"] += t_cmp
        else:
            parts["memory"] += t_mem
    if hardware.remotes:  # layers on RPC machines: activations cross the network per token
        parts["network"] = step_cost(spec, hardware, cfg, devices, 1, position + 1).total_s
    return parts


def decode_time_s(
    spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig, mem: MemoryPlan, position: int,
    probe: MachineProbe | None = None,
) -> tuple[float, float]:
    """(seconds for one token at `position`, of which fixed overhead)."""
    parts = decode_parts_s(spec, hardware, cfg, mem, position, probe=probe)
    return sum(parts.values()), parts["overhead"]


def _cpu_hz(hardware: HardwareProfile, matmul: bool = False) -> float:
    """The clock the CPU tables' cycles are counted at: DEFAULT_CPU_MHZ where the OS reports
    none (the clock the tables were fitted at, on a VM that reports none), else the reported
    maximum (boost) clock x the share of it the published CPUs of its ISA family reach for
    matrix-vector work (decode) or, matmul, matrix-matrix work (prompts; bench/fit_cpu.py)."""
    if hardware.cpu.max_freq_mhz:
        shares = _cpu_shares(hardware)
        return hardware.cpu.max_freq_mhz * 1e6 * (shares.matmul_clock if matmul else shares.clock)
    return DEFAULT_CPU_MHZ * 1e6


def _cpu_shares(hardware: HardwareProfile) -> _bc.CpuShares:
    """The datasheet shares of this CPU's ISA family (backend_constants.CPU_SHARES)."""
    return _bc.CPU_SHARES[_bc.cpu_family(hardware.cpu.isa, hardware.cpu.arch)]


def _cpu_threads(hardware: HardwareProfile, cfg: RunConfig) -> int:
    return max(1, min(cfg.n_threads, hardware.cpu.cores or 1))


def _cpu_cycles_per_token(spec: ModelSpec, devices: tuple[str, ...]) -> float:
    table = layer_table(spec)
    cycles = 0.0
    for dev, start, end in device_runs(devices[: spec.n_layer]):
        if dev == CPU:
            cycles = sum(table.active_cpu_cycles[start:end], cycles)
    if devices[spec.n_layer] == CPU:
        cycles += table.output_cpu_cycles
    return cycles


def _runs_on_cpu(hardware: HardwareProfile, device: str) -> bool:
    """Whether the device is a CPU: this machine's, or a remote rpc-server's."""
    return device == CPU or (is_remote(device) and remote_device(hardware, device).is_cpu)


def _device_flops(hardware: HardwareProfile, device: str, cfg: RunConfig, quantized: bool = False) -> float:
    if is_remote(device):
        view, local = remote_device(hardware, device).local_view()
        return _device_flops(view, local, replace(cfg, n_threads=view.cpu.cores), quantized)
    if device == CPU:
        return cpu_peak_flops(hardware, cfg.n_threads)
    view, gpu = _gpu_of(hardware, device)
    return matmul_tflops(gpu, quantized, view.backend, view.fp32_gemm) * 1e12  # the rate llama.cpp's kernels use (tensor_rates.py)


def _device_attention_flops(hardware: HardwareProfile, device: str, spec: ModelSpec, flash_attn: bool,
                            n_tokens: int, n_kv: int) -> float:
    """Peak FLOP/s of a GPU device's prompt attention (FP16 products, tensor_rates.py; on
    SYCL, the vector units where its kernels fall to the tile kernel: sycl_attention.py)."""
    view, gpu = _gpu_of(hardware, device)
    vector = view.backend == "sycl" and sycl_attention.on_vector_units(spec, gpu.name, flash_attn, n_tokens, n_kv)
    return attention_tflops(gpu, view.backend, vector, view.fp32_gemm) * 1e12


def _gpu_of(hardware: HardwareProfile, device: str):
    """(the profile it belongs to, its GPUInfo) for a GPU device, an RPC machine's included."""
    if is_remote(device):
        view, local = remote_device(hardware, device).local_view()
        return _gpu_of(view, local)
    return hardware, next(g for g in hardware.gpus if gpu_name(g.index) == device)


@dataclass
class _PrefillWork:
    """What one device's share of the blocks costs per prompt token (prefill_time_s)."""

    weight_bytes: float = 0.0  # all its weights: read once per micro-batch at least
    params: float = 0.0  # multiply-adds per token
    # weight elements behind weight_bytes (all experts', not the active share): what a GPU
    # that multiplies quantized weights as F16 converts per micro-batch
    elements: float = 0.0
    attn_width: float = 0.0  # sum of head_dim x n_head over full-context layers
    n_layers: int = 0
    moe_layers: int = 0  # of n_layers, those with routed experts (moe_blocks)
    recurrent_layers: int = 0  # of n_layers, those keeping a recurrent state (recurrent_work.py)
    swa_width: float = 0.0  # the same over sliding-window layers (they see at most the window)
    params_by_type: dict[str, float] = field(default_factory=dict)  # active elements per weight type (a probe prices these)
    # the routed experts' share of params_by_type (moe_prompt.py prices their overhead, and
    # a CPU's MUL_MAT_ID)
    routed_by_type: dict[str, float] = field(default_factory=dict)
    # the last block's FFN: multiplied for the prompt's output rows only (output_rows.py)
    out_params: float = 0.0
    out_by_type: dict[str, float] = field(default_factory=dict)

    @property
    def routed_params(self) -> float:
        return sum(self.routed_by_type.values())


def _prefill_work(spec: ModelSpec, devices: tuple[str, ...]) -> dict[str, _PrefillWork]:
    table = layer_table(spec)
    swa = spec.swa_layers if spec.sliding_window and spec.swa_layers else (False,) * spec.n_layer
    per_dev: dict[str, _PrefillWork] = {}
    for dev, start, end in device_runs(devices[: spec.n_layer]):
        w = per_dev.setdefault(dev, _PrefillWork(params_by_type={}))
        w.weight_bytes = sum(table.bytes[start:end], w.weight_bytes)
        w.params = sum(table.active_params[start:end], w.params)
        w.elements = sum((p * b / a if a else 0.0 for p, b, a in zip(
            table.active_params[start:end], table.bytes[start:end], table.active_bytes[start:end], strict=True)),
            w.elements)
        if spec.n_expert:
            for by_type in experts.expert_table(spec).by_type[start:end]:
                for kind, n in by_type.items():
                    w.routed_by_type[kind] = w.routed_by_type.get(kind, 0.0) + n
        for il in range(start, end):
            # a hybrid's recurrent and MLP-only layers attend to nothing (no KV heads)
            no_attention = bool(spec.recurrent_layers) and not spec.n_head_kv[il]
            width = 0 if no_attention else spec.head_dims(il)[0] * max(spec.n_head[il], 1)
            if swa[il]:
                w.swa_width += width
            else:
                w.attn_width += width
            for kind, n in (table.active_by_type[il] if table.active_by_type else {}).items():
                w.params_by_type[kind] = w.params_by_type.get(kind, 0.0) + n
        w.n_layers += end - start
        w.moe_layers += moe_blocks(spec, start, end)
        w.recurrent_layers += recurrent_work.recurrent_layers(spec, start, end)
    return per_dev


def _attention_flops_per_token(spec: ModelSpec, w: _PrefillWork, ctx_seen: float) -> float:
    """QK^T and softmax x V over the context seen so far (4 FLOPs per position and width)."""
    seen = w.attn_width * ctx_seen + w.swa_width * min(ctx_seen, spec.sliding_window or ctx_seen)
    return 4 * seen


def prefill_attention_flops(spec: ModelSpec, start: int, n_tokens: int, n_ubatch: int = 512) -> float:
    """Attention FLOPs of a prompt of n_tokens after `start` cached positions, all layers on
    one device, in micro-batches of n_ubatch (what a probe's prefill attention figure is
    seconds per)."""
    w = _prefill_work(spec, (CPU,) * (spec.n_layer + 1))[CPU]
    total, done = 0.0, 0
    while done < n_tokens:
        t = min(n_ubatch, n_tokens - done)
        total += t * _attention_flops_per_token(spec, w, start + done + t / 2)
        done += t
    return total


def prefill_time_s(
    spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig, mem: MemoryPlan, n_tokens: int,
    probe: MachineProbe | None = None, start: int = 0, kernels: dict[str, float] | None = None,
) -> tuple[float, str]:
    """Seconds to process an n_tokens prompt, and which bound dominated. probe: the CPU's
    matrix products, attention and per-layer cost come from its measurements. start: the
    positions already in the cache (a later turn of a chat, llama-bench's -d), which every
    prompt token attends to. kernels, if given, gathers the seconds each of the probe's
    matrix kernels takes (estimate/kernel_calibration.py)."""
    devices = mem.layer_devices
    table = layer_table(spec)
    float_model = _is_float_model(spec)
    # op offload targets this machine's GPUs only (RPC devices implement no offload_op): the
    # first that holds layers, else the first of the build's GPUs, which llama.cpp's context
    # starts whatever n_gpu_layers is (llama-context.cpp: a backend per model device; the
    # scheduler offloads a host weight's op to the first that takes it, ggml-backend.cpp)
    gpu_devs = [d for d in devices if d != CPU and not is_remote(d)]
    local_gpus = [name for name, _ in offload_devices(hardware) if not is_remote(name)]
    main_gpu = gpu_devs[0] if gpu_devs else (local_gpus[0] if local_gpus else None)
    t_ubatch = micro_batch(cfg)
    per_dev = _prefill_work(spec, devices)
    experts.shift_prefill(per_dev, spec, devices, mem.n_cpu_moe, lambda: _PrefillWork(params_by_type={}))
    output_rows.crop_last_ffn(per_dev, spec, devices, mem.n_cpu_moe)
    att = probe.attention_for(cfg.flash_attn) if probe is not None else None
    if probe is not None:  # the table's prices of types the probe did not measure
        table_matmul = _probe_table_matmul(hardware, cfg, probe, spec.file_type)
        table_matvec = _probe_table_matvec(hardware, cfg, probe)
    weight_type = None if float_model else main_weight_type(spec)  # MMQ or hipBLAS/cuBLAS (tensor_rates)

    total, bound_times = 0.0, {"compute": 0.0, "memory": 0.0, "pcie": 0.0, "network": 0.0}
    layer_runs = device_runs(devices[: spec.n_layer])
    done = 0
    while done < n_tokens:
        t = min(t_ubatch, n_tokens - done)
        ctx_seen = start + done + t / 2
        # a micro-batch reads its layers' KV cache once, as a decode step does (a read its
        # arithmetic hides at hundreds of tokens, not at a few after a long cache)
        kv_reads = kv_reads_by_layer(spec, cfg, start + done + t) if cfg.offload_kqv else None
        # llama.cpp runs big CPU-side matmuls on the GPU (op_offload) for batches >= 32,
        # copying those weights over PCIe each micro-batch
        offload_cpu = op_offload(main_gpu is not None, t)
        flops: dict[str, float] = {}
        attention: dict[str, float] = {}  # GPU devices' attention FLOPs (CPUs': in flops)
        reads: dict[str, float] = {}
        cache: dict[str, float] = {}  # a GPU's KV cache bytes the micro-batch reads
        elements: dict[str, float] = {}
        layers: dict[str, int] = {}
        moe_layers: dict[str, int] = {}
        tiled: dict[str, float] = {}  # weight bytes tiled kernels read, every pass (weight_passes.py)
        probe_s = 0.0  # the CPU's share priced by the probe
        scan_s = 0.0  # the CPU-held recurrent layers' state scans (recurrent_work.py)
        pcie_bytes = 0.0
        for dev, w in per_dev.items():
            run_on = main_gpu if (dev == CPU and offload_cpu and main_gpu is not None) else dev
            if run_on != dev:
                pcie_bytes += w.weight_bytes
            attn_flops = _attention_flops_per_token(spec, w, ctx_seen)
            # a CPU multiplies routed experts with MUL_MAT_ID, dearer than the dense kernels
            cpu_extra = (moe_prompt.cpu_extra_by_type(w.routed_by_type, probe.expert_cost_by_type if probe else None)
                         if _runs_on_cpu(hardware, run_on) else {})
            if dev == CPU and w.recurrent_layers:  # scanned where the state lives, op offload or not
                t_scan = t * recurrent_work.prefill_cycles_per_token(spec, w.recurrent_layers) / cpu_matvec_hz(
                    hardware, cfg)
                scan_s += t_scan
                tally(kernels, SCAN_KERNEL, t_scan)
            if run_on == CPU and probe is not None:
                counts = dict(w.params_by_type or {})
                for kind, n in cpu_extra.items():
                    counts[kind] = counts.get(kind, 0.0) + n
                probe_s += probe_roofline.prefill_weights_s(
                    probe, counts, t, table_matmul, hardware.cpu.isa, matmul_shape.relative_cost(spec),
                    by_kernel=kernels)
                t_attn = (t * attn_flops * att.prefill_s_per_flop if att is not None
                          else cpu_table_matmul_s(hardware, cfg, spec.file_type,
                                                  t * attn_flops * CPU_ATTENTION_SLOWDOWN / 2))
                t_layers = probe.fixed.layer_s * w.n_layers
                probe_s += t_attn + t_layers
                tally(kernels, ATTENTION_KERNEL, t_attn)
                tally(kernels, FIXED_KERNEL, t_layers)
                continue
            # attention (QK^T and softmax*V over the context so far) runs well below GEMM
            # speed on CPUs; on GPUs it runs FP16 products, priced apart (tensor_rates.py)
            if _runs_on_cpu(hardware, run_on):
                flops[run_on] = flops.get(run_on, 0.0) + t * (
                    2 * (w.params + sum(cpu_extra.values())) + attn_flops * CPU_ATTENTION_SLOWDOWN)
            else:
                flops[run_on] = flops.get(run_on, 0.0) + t * 2 * w.params
                attention[run_on] = attention.get(run_on, 0.0) + t * attn_flops
            flops[run_on] += 2 * moe_prompt.overhead_multiply_adds(
                spec, w.routed_params, t, _device_constants(hardware, run_on).moe_expert_overhead_tokens,
                _expert_tile(hardware, run_on, t, spec, weight_type))
            reads[run_on] = reads.get(run_on, 0.0) + w.weight_bytes
            if kv_reads is not None and run_on == dev and not _runs_on_cpu(hardware, dev):
                cache[dev] = sum(sum(kv_reads[s0:s1]) for d, s0, s1 in layer_runs if d == dev)
            passes = _tiled_reads(hardware, run_on, t, spec, w, weight_type)
            if passes is not None:
                tiled[run_on] = tiled.get(run_on, 0.0) + passes
            elements[run_on] = elements.get(run_on, 0.0) + w.elements
            layers[run_on] = layers.get(run_on, 0) + int(w.n_layers)
            moe_layers[run_on] = moe_layers.get(run_on, 0) + w.moe_layers
        if done + t >= n_tokens:
            # the prompt's output rows, in its last micro-batch: the last block's FFN and the
            # output layer multiply the last token only (output_rows.py)
            out_work = [(dev, w.out_params, w.out_by_type) for dev, w in per_dev.items() if w.out_params]
            out_work.append((devices[spec.n_layer], table.output_params, table.output_by_type or {}))
            for dev, params, by_type in out_work:
                if dev == CPU and probe is not None:
                    probe_s += output_rows.OUTPUT_ROWS * sum(probe_roofline.decode_weights_s(
                        probe, [by_type], table_matvec).values())
                else:
                    flops[dev] = flops.get(dev, 0.0) + 2 * params * output_rows.OUTPUT_ROWS
            reads[devices[spec.n_layer]] = reads.get(devices[spec.n_layer], 0.0) + table.output_bytes
        step = probe_s + scan_s
        bound_times["compute"] += probe_s + scan_s
        for dev, f in flops.items():
            c = _device_constants(hardware, dev)
            as_float = float_model
            fp32 = False  # an FP32 GEMM build (HardwareProfile.fp32_gemm): F16 weights converted too
            if _runs_on_cpu(hardware, dev):
                eff = cpu_prefill_efficiency(spec.file_type)
            else:
                gpu = next((g for g in hardware.gpus if gpu_name(g.index) == dev), None)
                fp32 = _gpu_of(hardware, dev)[0].fp32_gemm
                as_float = float_model or fp32 or dequantizes_for_gemm(gpu, hardware.backend, t, weight_type,
                                                                       spec.n_expert)
                # a vendor library's GEMM on converted weights: the float efficiency, FP32 ones too
                eff = c.prefill_efficiency_float if as_float else c.prefill_efficiency_quant
                # NVFP4 / MXFP4 weights on FP4 tensor cores (Blackwell CC 12.x): estimate/fp4.py
                eff *= prefill_speed_factor(spec, gpu, hardware.backend)
            t_compute = f / (_device_flops(hardware, dev, cfg, not as_float) * eff)
            if attention.get(dev):  # FP16 products, at the FP16 GEMM efficiency
                rate = _device_attention_flops(hardware, dev, spec, cfg.flash_attn, t, start + done + t)
                t_compute += attention[dev] / (rate * c.prefill_efficiency_float)
            t_mem = reads.get(dev, 0.0) / _read_bytes_s(hardware, dev)
            if as_float and (fp32 or not float_model):
                # cuBLAS/hipBLAS multiply F16: each quantized weight is first converted into an
                # F16 buffer (ggml-cuda.cu ggml_cuda_mul_mat_cublas_impl: convert_func, then
                # cublasGemmEx), a memory-bound pass before the GEMM, which then reads F16; an
                # FP32 SYCL build converts every weight, F16 ones too, into an FP32 buffer
                # (ggml-sycl.cpp ggml_sycl_op_mul_mat_sycl: to_fp32_sycl, then oneDNN)
                width = 4 if fp32 else 2
                t_convert = (reads.get(dev, 0.0) + width * elements.get(dev, 0.0)) / _read_bytes_s(hardware, dev)
                t_mem = width * elements.get(dev, 0.0) / _read_bytes_s(hardware, dev)
                step += t_convert
                bound_times["memory"] += t_convert
            t_mem += cache.get(dev, 0.0) / _read_bytes_s(hardware, dev)
            if dev in tiled:
                # tiled kernels read the weights once per column tile, then multiply them
                t_compute += tiled[dev] / (_device_bandwidth_gbs(hardware, dev) * 1e9)
            step += (max(t_compute, t_mem) + c.layer_overhead_s * layers.get(dev, 0)
                     + c.moe_layer_overhead_s * moe_layers.get(dev, 0))
            bound_times["compute" if t_compute >= t_mem else "memory"] += max(t_compute, t_mem)
        if pcie_bytes:
            t_pcie = pcie_bytes / (pcie_gbs(hardware, main_gpu) * 1e9)
            step += t_pcie
            bound_times["pcie"] += t_pcie
        if hardware.remotes:
            t_net = step_cost(spec, hardware, cfg, devices, t, start + done + t).total_s
            step += t_net
            bound_times["network"] += t_net
        total += step
        done += t
    return total, max(bound_times, key=lambda k: bound_times[k])


def _gpu_matmuls(hardware: HardwareProfile, device: str, n_tokens: int, spec: ModelSpec,
                 weight_type: str | None) -> tuple[str, str | None, bool] | None:
    """For a GPU (an RPC one as its own machine runs it): its backend, its AMD gfx target and
    whether llama.cpp's own tiled kernels multiply a micro-batch of n_tokens there (not on
    CUDA and ROCm where cuBLAS/hipBLAS does: F16 weights, or quantized ones dequantized for
    it); None for a CPU."""
    if _runs_on_cpu(hardware, device):
        return None
    view, gpu = _gpu_of(hardware, device)
    blas = view.backend in ("cuda", "rocm") and (
        weight_type is None or dequantizes_for_gemm(gpu, view.backend, n_tokens, weight_type, spec.n_expert))
    return view.backend, amd_gfx(gpu.name), not blas


def _tiled_reads(hardware: HardwareProfile, device: str, n_tokens: int, spec: ModelSpec, w: _PrefillWork,
                 weight_type: str | None) -> float | None:
    """Bytes a GPU's tiled quantized matmul kernels read for this device's weights in a
    micro-batch of n_tokens, every pass counted (weight_passes.py); None where such kernels
    do not multiply them (a CPU, F16 weights, weights dequantized for cuBLAS)."""
    kernels = _gpu_matmuls(hardware, device, n_tokens, spec, weight_type)
    if weight_type is None or kernels is None or not kernels[2]:
        return None
    passes = weight_passes.weight_passes(kernels[0], kernels[1], n_tokens, spec)
    if passes is None:
        return None
    routed = _routed_weight_bytes(spec, w)
    return (w.weight_bytes - routed) * passes.dense + routed * passes.expert


def _routed_weight_bytes(spec: ModelSpec, w: _PrefillWork) -> float:
    """The bytes of all routed experts behind a device's active routed elements."""
    if not spec.n_expert or not spec.n_expert_used:
        return 0.0
    total = 0.0
    for kind, n in w.routed_by_type.items():
        block, size = type_block_size(kind)
        total += n * size / block
    return min(w.weight_bytes, total * spec.n_expert / spec.n_expert_used)


def _expert_tile(hardware: HardwareProfile, device: str, n_tokens: int, spec: ModelSpec,
                 weight_type: str | None) -> int | None:
    """The tile width this GPU's expert matmuls multiply a micro-batch in (moe_prompt
    .expert_tile_columns): on CUDA and ROCm only where MMQ multiplies them, on Metal and
    Vulkan always; None on a CPU."""
    kernels = _gpu_matmuls(hardware, device, n_tokens, spec, weight_type)
    if not spec.n_expert or kernels is None or not kernels[2]:
        return None
    return moe_prompt.expert_tile_columns(kernels[0], kernels[1], n_tokens, spec)


# llama.cpp's scheduler runs a CPU-held weight's matmul on the GPU when the batch has at
# least this many tokens (ggml-backend.cpp op_offload, GGML_OP_OFFLOAD_MIN_BATCH), copying
# the weight over PCIe each micro-batch.
OP_OFFLOAD_MIN_BATCH = 32


def op_offload(has_gpu: bool, batch_tokens: int) -> bool:
    """Whether CPU-held weights are multiplied on the GPU for a batch of this size."""
    return has_gpu and batch_tokens >= OP_OFFLOAD_MIN_BATCH


def pcie_gbs(hardware: HardwareProfile, device: str | None = None) -> float:
    """Host-to-device copy rate (GB/s) of a GPU, or of the first GPU that reports one;
    25 GB/s (PCIe 4.0 x16 in practice) when none does."""
    gpus = [g for g in hardware.offload_gpus if device is None or gpu_name(g.index) == device]
    return next((g.pcie_gbs for g in gpus if g.pcie_gbs), None) or 25.0


def cpu_bandwidth_bytes_s(hardware: HardwareProfile) -> float:
    """Bytes per second the CPU's decode reaches by the table: a measured RAM bandwidth (a
    copy) x the CPU backend's decode efficiency, or a datasheet peak (ram_bandwidth_source
    "peak": channels x 8 B x MT/s) x the share of it the published CPUs of its ISA family
    read at."""
    gbs = _device_bandwidth_gbs(hardware, CPU)
    if hardware.cpu.ram_bandwidth_source == PEAK_BANDWIDTH_SOURCE:
        return gbs * 1e9 * _cpu_shares(hardware).peak_read
    return gbs * 1e9 * _CPU.decode_efficiency


def cpu_matvec_hz(hardware: HardwareProfile, cfg: RunConfig) -> float:
    """CPU cycles per second available to a plan's threads (the decode compute roof)."""
    return _cpu_threads(hardware, cfg) * _cpu_hz(hardware)


def cpu_table_matmul_s(hardware: HardwareProfile, cfg: RunConfig, file_type: str, multiply_adds: float) -> float:
    """The table's CPU prompt-processing time for this many multiply-adds."""
    return 2 * multiply_adds / (cpu_peak_flops(hardware, cfg.n_threads) * cpu_prefill_efficiency(file_type))


def estimate_performance(
    spec: ModelSpec,
    hardware: HardwareProfile,
    cfg: RunConfig,
    mem: MemoryPlan,
    *,
    prompt_tokens: int = 512,
    gen_tokens: int = 128,
    calibration: Calibration | None = None,
    prompt_start: int = 0,
) -> PerfEstimate:
    """prompt_start: positions already in the cache when the prompt comes (a later chat turn
    prefills its new tokens after the conversation so far); they cost the prompt attention."""
    cal = calibration or Calibration()
    # the probe measured the CPU backend's kernels: it prices the CPU's share of a plan
    # wherever the CPU has one (blocks or the output on the CPU, MoE experts in RAM); the
    # GPUs' share stands on the table (a mixed plan: its band combines both bands by share),
    # or on the GPU constants the probe measured on this machine's GPUs (probe_gpu.py)
    hardware = _with_probed_gpus(hardware, cal.probe)
    cpu_only = all(d == CPU for d in mem.layer_devices)
    probe = cal.probe_for(cfg) if CPU in mem.layer_devices or mem.n_cpu_moe > 0 else None
    mixed = probe is not None and not cpu_only
    gpus_probed = {d for d, _ in hardware.gpu_constants} & set(mem.layer_devices)
    basis = "probe" if probe is not None or gpus_probed else "table"
    # mean decode rate over gen_tokens after the prompt (llama-bench tg semantics):
    # integrate the per-token time at a few positions (KV reads grow linearly)
    positions = [prompt_start + prompt_tokens + (i + 0.5) * gen_tokens / 4 for i in range(4)]
    fixed = _decode_fixed(spec, hardware, mem, cfg, probe)
    decode_attention: dict[str, float] = {}
    parts = [decode_parts_s(spec, hardware, cfg, mem, int(p), fixed, probe, decode_attention) for p in positions]
    share = {k: sum(p[k] for p in parts) / len(parts) for k in parts[0]}
    t_token = sum(share.values())
    prefill_kernels: dict[str, float] = {}
    t_prefill, prefill_bound = prefill_time_s(spec, hardware, cfg, mem, max(1, prompt_tokens), probe,
                                              start=max(0, prompt_start), kernels=prefill_kernels)
    kernels = None
    if probe is not None:
        # what the probe priced, per figure: weight kernels, attention, fixed costs; in a
        # mixed plan the GPUs' share too, under a kernel of its own (table_kernel), so that
        # a measurement corrects the CPU's kernels and the GPUs' share apart
        decode_kernels = dict(fixed.cpu_kernels or {})
        decode_kernels.update({k: v / len(positions) for k, v in decode_attention.items()})
        decode_kernels[FIXED_KERNEL] = fixed.overhead
        if fixed.recurrent_cycles:
            decode_kernels[SCAN_KERNEL] = fixed.recurrent_cycles / cpu_matvec_hz(hardware, cfg)
        if mixed:
            gpu_kernel = probe_roofline.table_kernel(hardware.backend)
            decode_kernels[gpu_kernel] = max(0.0, t_token - sum(decode_kernels.values()))
            prefill_kernels[gpu_kernel] = max(0.0, t_prefill - sum(prefill_kernels.values()))
        kernels = KernelShares(shares_of(decode_kernels), shares_of(prefill_kernels))
    c = cal.correction(spec.file_type, cfg.n_threads, spec.file_bytes, basis, kernels)
    decode_factor, prefill_factor, matched, calibrated = c.decode, c.prefill, c.matched, c.calibrated
    decode = decode_factor / t_token
    prefill = prefill_factor * max(1, prompt_tokens) / t_prefill

    recurrent_on_gpu = any(recr and dev != CPU for recr, dev in zip(spec.recurrent_layers, mem.layer_devices, strict=False))
    band = _band(hardware, basis, probe, c.residuals, kernels, cfg.flash_attn, recurrent_on_gpu)
    (d_lo, d_hi), (p_lo, p_hi) = band.decode, band.prefill
    return PerfEstimate(
        decode_tok_s=decode,
        prefill_tok_s=prefill,
        decode_tok_s_range=(decode * d_lo, decode * d_hi),
        prefill_tok_s_range=(prefill * p_lo, prefill * p_hi),
        # a vision model's first token also waits for one image: encoded, then its
        # tokens prefilled like the prompt's (estimate/vision.py)
        time_to_first_token_s=prompt_tokens / prefill + 1 / decode
        + image_first_token_s(spec, hardware, cfg, prefill, cal.probe_for(cfg)),
        bound=max(share, key=lambda k: share[k]),
        prefill_bound=prefill_bound,
        calibrated=calibrated,
        basis="calibrated" if calibrated else basis,
        range_basis=band.basis + _partial_note(basis, calibrated, matched, decode_factor, prefill_factor)
        + (GPU_PROBE_RANGE_NOTE if gpus_probed and not calibrated else ""),
        kernels=kernels,
        network=(network_summary(spec, hardware, cfg, mem, share, decode_factor,
                                 int(sum(positions) / len(positions)) + 1) if hardware.remotes else None),
    )


# A GPU's probed constants have not been checked out of sample on any GPU yet (README, "The GPU
# half of the probe"): its share keeps the backend's band, and says so.
GPU_PROBE_RANGE_NOTE = ("; the GPU's constants measured by this machine's probe, its range still the backend's "
                        "out-of-sample band")


def _with_probed_gpus(hardware: HardwareProfile, probe: MachineProbe | None) -> HardwareProfile:
    """The profile with the GPU constants this machine's probe measured (not those a caller
    set already: probe_gpu's solves try their own)."""
    if probe is None or not probe.gpus or hardware.gpu_constants:
        return hardware
    from rooflight.estimate.probe_gpu import with_gpu_figures

    return with_gpu_figures(hardware, probe.gpus)


def image_first_token_s(spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig,
                        prefill_tok_s: float, probe: MachineProbe | None = None) -> float:
    """Seconds one image adds before the first token (0 without a projector); probe: its
    measured encode rate prices a CPU encode (estimate/vision.vision_for_plan)."""
    if spec.projector is None:
        return 0.0
    from rooflight.estimate.vision import vision_for_plan

    vp = vision_for_plan(spec.projector, hardware, cfg, probe)
    return vp.encode_s + vp.image_tokens / prefill_tok_s


def _partial_note(basis: str, calibrated: bool, matched: tuple[Ratio, ...], decode_factor: float,
                  prefill_factor: float) -> str:
    """What a probe-based estimate took from measurements of the few kernels it shares with
    benched models (too few of its own to count as calibrated): said, not hidden."""
    if basis != "probe" or calibrated or not matched or (round(decode_factor, 2), round(prefill_factor, 2)) == (1, 1):
        return ""
    return (f"; partly corrected (decode x{decode_factor:.2f}, prompt x{prefill_factor:.2f}) by measurements"
            " of the kernels it shares with benched models")


def _band(hardware: HardwareProfile, basis: str, probe: MachineProbe | None,
          residuals: tuple[list[float], list[float]], kernels: KernelShares | None, flash_attn: bool,
          recurrent_on_gpu: bool = False) -> ranges.Band:
    """The range's band: this machine's measurements where there are enough (their ratios
    to the estimate as it now stands: Calibration.residuals), else the probe's (widened by
    the spread of the figures this estimate's kernels stand on) or the backend's
    out-of-sample band, joined with the hybrid band where a hybrid's recurrent layers run on
    a GPU (ranges.for_hybrid_gpu); a mixed plan (the CPU's share on the probe, the GPUs' on
    the table) and an estimate with weight types the probe did not measure combine the
    probe's band and the table's by the table-priced share of the time (ranges.combined)."""
    if residuals[0]:
        measured = ranges.measured_band(*residuals)
        if measured is not None:
            return measured
    table = ranges.table_band(hardware.backend, BACKENDS.get(hardware.backend, _VULKAN))
    if recurrent_on_gpu:
        table = ranges.for_hybrid_gpu(table)
    if basis == "probe" and probe is not None:
        own = ranges.probe_band(probe.spread_of(kernels.decode if kernels else (), prefill=False, flash_attn=flash_attn),
                                probe.spread_of(kernels.prefill if kernels else (), prefill=True, flash_attn=flash_attn),
                                probe.disturbed)
        return ranges.combined(own, table, ranges.table_share(kernels.decode if kernels else ()),
                               ranges.table_share(kernels.prefill if kernels else ()))
    return table


# How much faster a link network_summary prices, for "how much would a faster link help"
FASTER_LINK = 10.0


def network_summary(
    spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig, mem: MemoryPlan, share: dict[str, float],
    decode_factor: float, position: int,
) -> dict:
    """The network's part of a decoded token at `position`, and the decode rate with 10x
    faster links (1 GbE -> 10 GbE) and with no network cost at all."""
    t_token = sum(share.values())
    t_net = share.get("network", 0.0)
    now = step_cost(spec, hardware, cfg, mem.layer_devices, 1, position)
    faster = step_cost(spec, hardware, cfg, mem.layer_devices, 1, position, link_scale=FASTER_LINK)
    return {
        "decode_share": round(t_net / t_token, 4) if t_token else 0.0,
        "crossings_per_token": now.crossings,
        "latency_s_per_token": round(now.latency_s, 6),
        "transfer_s_per_token": round(now.transfer_s, 6),
        "decode_tok_s_faster_link": round(decode_factor / (t_token - now.total_s + faster.total_s), 3),
        "decode_tok_s_no_network": round(decode_factor / (t_token - t_net), 3) if t_token > t_net else None,
        "faster_link_factor": FASTER_LINK,
        "bound": t_net >= t_token / 2,
        # README "Across machines": RPC's per-call work is not priced yet
        "note": "an upper bound: RPC's per-call overhead (graph serialisation, server wake-up) is not modelled",
    }
