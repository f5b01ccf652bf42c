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

Every constant says where it comes from. Measurements on this machine (store/calibration)
then scale the result; the JSON says so with `calibrated`.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

from rooflight.estimate.compute import micro_batch
from rooflight.estimate.config import RunConfig
from rooflight.estimate.kv import kv_cells_seen, kv_reads_by_layer
from rooflight.estimate.layers import layer_table
from rooflight.estimate.memory import MemoryPlan
from rooflight.estimate.placement import CPU, device_runs, gpu_name
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile


@dataclass(frozen=True)
class BackendConstants:
    decode_efficiency: float  # achieved / peak memory bandwidth during decode
    layer_overhead_s: float  # fixed time per layer per token (launches, graph, sync)
    prefill_efficiency_float: float  # achieved / peak FP16 FLOPs, F16/BF16/F32 weights
    prefill_efficiency_quant: float  # same, quantized weights (MMQ / dequant kernels)
    source: str


# GPU figures fitted on published llama-bench results (REFERENCE.md §4): decode efficiency
# and per-layer cost solve the RTX 3090 / RTX 3060 Q4_0 pair (158.2 and 75.6 t/s at 936 and
# 360 GB/s: 0.88 and 63 us/layer), and reproduce RTX 4090 F16/Q8_0 within 5%; prefill from
# RTX 4090 F16 pp512 (0.90 of 165 TFLOPS) and the quantized 4090/3090/3060 spread (0.62 to
# 1.1 of the FP16 figure: int8 MMQ kernels): 0.8.
_CUDA = BackendConstants(0.88, 63e-6, 0.90, 0.80, "llama-bench, REFERENCE.md §4 (RTX 3090/3060/4090)")
# Apple: M2 and M2 Max F16/Q8_0 pairs give 0.95 and ~195 us/layer; pp512 F16 0.75, Q4_0 0.67.
_METAL = BackendConstants(0.95, 195e-6, 0.75, 0.67, "llama.cpp discussion #4167, REFERENCE.md §4 (M2, M2 Max)")
# ROCm, Vulkan, SYCL: no published pairs in REFERENCE.md; assume CUDA-like kernels with
# lower efficiency. Marked as assumptions in the output range (wider).
_ROCM = BackendConstants(0.75, 80e-6, 0.6, 0.5, "assumed from CUDA, lower kernel efficiency")
_VULKAN = BackendConstants(0.70, 90e-6, 0.5, 0.45, "assumed from CUDA, lower kernel efficiency")
# CPU: fitted on this project's 2-core AMD EPYC VM with llama.cpp 0.3.36 against the
# measured copy bandwidth (hardware/bandwidth.py) over generated llama models of 10-400 MB
# and Gemma-3-270M (bench/accuracy.py prints the check).
# Decode efficiency > 1: decode only reads, and the measured figure is a copy (read+write);
# F16 models (bandwidth-bound) read at 42.5 GB/s against a measured 37.1 here. The fixed
# cost (about 0.1 ms per token for 4-18 layers) is from the intercept of the same fit.
# Prefill efficiencies are per weight type, below.
_CPU = BackendConstants(1.15, 10e-6, 0.38, 0.42, "fitted on a 2-core EPYC VM, bench/accuracy.py")

BACKENDS = {"cuda": _CUDA, "metal": _METAL, "rocm": _ROCM, "vulkan": _VULKAN, "sycl": _VULKAN, "cpu": _CPU}

# Clock when the OS does not report one (VMs often don't): a typical all-core turbo.
DEFAULT_CPU_MHZ = 3000.0

# CPU prefill efficiency against cpu_peak_flops by the model's main weight type, fitted on
# the 2-core EPYC VM (bench/accuracy.py): F16 0.38, Q8_0 0.33, Q4_K 0.42, Q4_0 0.58 (its
# weights are repacked into 8x8 interleaved blocks for the GEMM kernels).
CPU_PREFILL_EFFICIENCY = {"F16": 0.38, "BF16": 0.38, "F32": 0.3, "Q8_0": 0.33, "Q4_0": 0.58, "IQ4_NL": 0.58}
CPU_PREFILL_EFFICIENCY_DEFAULT = 0.42  # K-quants and the rest


# CPU attention FLOPs cost this many GEMM FLOPs: fitted so that Gemma-3-270M (wide
# 4 x 256 attention on a 640-wide model) and the narrow-attention llama models agree.
CPU_ATTENTION_SLOWDOWN = 3.0


def cpu_prefill_efficiency(file_type: str) -> float:
    return CPU_PREFILL_EFFICIENCY.get(file_type.upper(), CPU_PREFILL_EFFICIENCY_DEFAULT)


# Per-token cost of copying the logits out and sampling from them on the CPU
# (llama-cpp-python's sampler chain), per vocabulary entry. Fitted with the CPU constants
# (the F16 pair: ~0.1 ms fixed with an 8k and a 32k vocabulary).
SAMPLING_S_PER_VOCAB = 1e-9

# CPU arithmetic: llama.cpp multiplies quantized weights by int8-quantized activations
# (AVX2 maddubs / AVX512-VNNI / NEON dotprod). Multiply-adds per cycle per core by ISA,
# counted as 2 FLOPs each; prefill efficiency above is relative to this peak.
def cpu_peak_flops(hardware: HardwareProfile, n_threads: int) -> float:
    isa = set(hardware.cpu.isa)
    if "avx512_vnni" in isa or "avx_vnni" in isa or "i8mm" in isa:
        per_cycle = 128  # int8 dot-product instructions
    elif "avx512f" in isa:
        per_cycle = 64
    elif "avx2" in isa or "dotprod" in isa or "neon" in isa:
        per_cycle = 32
    else:
        per_cycle = 8
    ghz = (hardware.cpu.max_freq_mhz or DEFAULT_CPU_MHZ) / 1000.0
    cores = max(1, min(n_threads, hardware.cpu.cores or 1))
    return cores * ghz * 1e9 * per_cycle


@dataclass(frozen=True)
class Calibration:
    """Measured / predicted ratios on this machine (median of stored measurements).

    Why one model's ratio corrects another's: what the constants above cannot know about
    a machine (how many cycles its cores really spend per quantized weight, what thread
    synchronisation costs, how much of the measured bandwidth decode reaches, whether the
    OS or a hypervisor takes time away) scales the time of every model run the same way
    on that machine, so the ratio carries over to other sizes of the same kind of model.
    It carries over less well across thread counts (a 1-thread run pays no
    synchronisation), across sizes far apart (a model that fits the CPU caches decodes
    from cache, one ten times larger from RAM) and across weight types (other kernels),
    so `ratios` keeps each measurement's thread count, size and type, and factors()
    uses the measurements that match best.
    """

    decode_factor: float = 1.0  # median over all measurements: the fallback
    prefill_factor: float = 1.0
    samples: int = 0
    # Thread counts a sweep found fastest here (runtime/threads.py): (model bytes, n_threads)
    threads: tuple[tuple[int, int], ...] = ()
    # Per measurement: (weight type, n_threads, model bytes, decode ratio, prefill ratio);
    # 0 threads or bytes: not recorded
    ratios: tuple[tuple[str, int, int, float, float], ...] = ()

    @property
    def active(self) -> bool:
        return self.samples > 0

    def factors(self, file_type: str, n_threads: int, model_bytes: int = 0) -> tuple[float, float]:
        """(decode, prefill) factors for a run: the median over the measurements at the
        same thread count, narrowed to those within 4x in size and then of the same
        weight type where there are any; all measurements when none has the count."""
        chosen = [r for r in self.ratios if r[1] == n_threads]
        if not chosen:
            return _bounded(self.decode_factor), _bounded(self.prefill_factor)
        for keep in (lambda r: r[2] > 0 and abs(math.log(max(model_bytes, 1) / r[2])) <= math.log(4),
                     lambda r: r[0] == file_type.upper()):
            chosen = [r for r in chosen if keep(r)] or chosen
        return (_bounded(statistics.median(r[3] for r in chosen)),
                _bounded(statistics.median(r[4] for r in chosen)))

    def preferred_threads(self, model_bytes: int) -> int | None:
        """The fastest thread count measured for the model nearest in size, if within 8x.

        Size matters: small models are bound by per-token synchronisation (fewer threads
        can win), large ones by memory bandwidth, which saturates before all cores do.
        """
        best, best_dist = None, math.log(THREAD_SIZE_REACH)
        for nbytes, n_threads in self.threads:
            dist = abs(math.log(max(model_bytes, 1) / max(nbytes, 1)))
            if dist <= best_dist:
                best, best_dist = n_threads, dist
        return best


def _bounded(factor: float) -> float:
    """Calibration corrects the roofline, it does not replace it: a factor beyond 4x either
    way says more about the measurements (a busy machine) than about the hardware."""
    return min(4.0, max(0.25, factor))


# A thread preference measured on one model applies to models within this size factor.
THREAD_SIZE_REACH = 8.0


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

    def to_dict(self) -> dict:
        return {
            "decode_tok_s": round(self.decode_tok_s, 3),
            "prefill_tok_s": round(self.prefill_tok_s, 3),
            "decode_tok_s_range": [round(x, 3) for x in self.decode_tok_s_range],
            "prefill_tok_s_range": [round(x, 3) for x in self.prefill_tok_s_range],
            "time_to_first_token_s": round(self.time_to_first_token_s, 4),
            "bound": self.bound,
            "prefill_bound": self.prefill_bound,
            "calibrated": self.calibrated,
        }


def _device_bandwidth_gbs(hardware: HardwareProfile, device: str) -> float:
    if device == CPU:
        return hardware.cpu.ram_bandwidth_gbs or 20.0
    gpu = next(g for g in hardware.gpus if gpu_name(g.index) == device)
    return gpu.bandwidth_gbs or 100.0


def _device_constants(hardware: HardwareProfile, device: str) -> BackendConstants:
    return _CPU if device == CPU else BACKENDS.get(hardware.backend, _VULKAN)


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


def _decode_fixed(
    spec: ModelSpec, hardware: HardwareProfile, mem: MemoryPlan
) -> tuple[dict[str, float], float, float]:
    """The position-independent part of decode_parts_s: (weight bytes read per device,
    CPU cycles per token, fixed overhead seconds)."""
    devices = mem.layer_devices
    overhead_per_layer = {dev: _device_constants(hardware, dev).layer_overhead_s for dev in set(devices)}
    overhead = SAMPLING_S_PER_VOCAB * spec.n_vocab
    for dev, start, end in device_runs(devices[: spec.n_layer]):
        overhead = sum(itertools.repeat(overhead_per_layer[dev], end - start), overhead)
    return _weight_reads_per_token(spec, devices), _cpu_cycles_per_token(spec, devices), overhead


def decode_parts_s(
    spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig, mem: MemoryPlan, position: int,
    _fixed: tuple[dict[str, float], float, float] | None = None,
) -> dict[str, float]:
    """Seconds for one token at `position`, split by what bounds each part:
    {"memory": bytes over bandwidth, "compute": CPU dot products, "overhead": fixed}.

    _fixed: _decode_fixed(...) for this plan, when the caller asks for several positions."""
    devices = mem.layer_devices
    weight_reads, cycles, overhead = _fixed or _decode_fixed(spec, hardware, mem)
    reads = dict(weight_reads)
    kv_reads = kv_reads_by_layer(spec, cfg, position)
    kv_runs = device_runs(devices[: spec.n_layer]) if cfg.offload_kqv else ((CPU, 0, spec.n_layer),)
    attention_cycles = 0.0
    for dev, start, end in kv_runs:
        reads[dev] = sum(kv_reads[start:end], reads.get(dev, 0.0))
        if dev == CPU:
            attention_cycles += _cpu_attention_cycles(spec, cfg, position, start, end)
    parts = {"memory": 0.0, "compute": 0.0, "overhead": overhead}
    for dev, nbytes in reads.items():
        c = _device_constants(hardware, dev)
        t_mem = nbytes / (_device_bandwidth_gbs(hardware, dev) * 1e9 * c.decode_efficiency)
        # few CPU cores cannot dequantize and multiply as fast as RAM delivers, nor walk a
        # long cache one row at a time
        t_cmp = ((cycles + attention_cycles) / (_cpu_threads(hardware, cfg) * _cpu_hz(hardware))
                 if dev == CPU else 0.0)
        if t_cmp > t_mem:
            parts["compute"] += t_cmp
        else:
            parts["memory"] += t_mem
    return parts


def decode_time_s(
    spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig, mem: MemoryPlan, position: int
) -> tuple[float, float]:
    """(seconds for one token at `position`, of which fixed overhead)."""
    parts = decode_parts_s(spec, hardware, cfg, mem, position)
    return sum(parts.values()), parts["overhead"]


# CPU cycles for decode attention (one query row against the cache), by flash attention
# on/off: per cached K/V element visited, and per multiply-add. llama.cpp's CPU flash-attention
# kernel walks the cache one K/V row at a time (vec_dot, online softmax, vec_mad); the cost
# follows the rows it streams more than the arithmetic, so query heads sharing a KV head
# (GQA) add little. Without flash attention K and V go through two batched mat-muls, about
# half the cost. Fitted here (2-core AVX-512 EPYC, f16 cache, 4 layers, positions 256-12k,
# 1 and 2 threads): 16 query / 16 KV heads cost ~1.0 cycle per element, 16 / 4 heads ~1.3
# per element -> 0.9 per element + 0.1 per multiply-add; flash attention off ~0.55 per
# multiply-add without GQA, split the same way.
_ATTENTION_CYCLES = {True: (0.9, 0.1), False: (0.5, 0.05)}  # (per KV element, per MAC)


def _cpu_attention_cycles(spec: ModelSpec, cfg: RunConfig, position: int, start: int, end: int) -> float:
    """Cycles for attention over the cached positions of layers [start, end) for one token."""
    # the kernel skips masked cells (padding, positions not yet written) before any work
    seen = kv_cells_seen(spec, cfg, position, padded=False)
    per_position = spec.head_dim_k + spec.head_dim_v
    per_element, per_mac = _ATTENTION_CYCLES[bool(cfg.flash_attn)]
    cycles = 0.0
    for il in range(start, end):
        if seen[il]:
            n_kv = spec.n_head_kv[il] or spec.n_head[il]
            cycles += seen[il] * per_position * (n_kv * per_element + spec.n_head[il] * per_mac)
    return cycles


def _cpu_hz(hardware: HardwareProfile) -> float:
    return (hardware.cpu.max_freq_mhz or DEFAULT_CPU_MHZ) * 1e6


def _cpu_threads(hardware: HardwareProfile, cfg: RunConfig) -> int:
    return max(1, min(cfg.n_threads, hardware.cpu.cores or 1))


def _cpu_cycles_per_token(spec: ModelSpec, devices: tuple[str, ...]) -> float:
    table = layer_table(spec)
    cycles = 0
    for dev, start, end in device_runs(devices[: spec.n_layer]):
        if dev == CPU:
            cycles = sum(table.active_cpu_cycles[start:end], cycles)
    if devices[spec.n_layer] == CPU:
        cycles += table.output_cpu_cycles
    return cycles


def _device_flops(hardware: HardwareProfile, device: str, cfg: RunConfig) -> float:
    if device == CPU:
        return cpu_peak_flops(hardware, cfg.n_threads)
    gpu = next(g for g in hardware.gpus if gpu_name(g.index) == device)
    return (gpu.fp16_tflops or 10.0) * 1e12


def prefill_time_s(
    spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig, mem: MemoryPlan, n_tokens: int
) -> tuple[float, str]:
    """Seconds to process an n_tokens prompt, and which bound dominated."""
    devices = mem.layer_devices
    table = layer_table(spec)
    float_model = _is_float_model(spec)
    gpu_devs = [d for d in devices if d != CPU]
    main_gpu = gpu_devs[0] if gpu_devs else None
    t_ubatch = micro_batch(cfg)

    # per device: weight bytes, multiply-adds per token, attention width of full-context
    # layers, layer count, attention width of sliding-window layers (they attend to at most
    # the window, however long the prompt)
    swa = spec.swa_layers if spec.sliding_window and spec.swa_layers else (False,) * spec.n_layer
    per_dev: dict[str, list[float]] = {}
    for dev, start, end in device_runs(devices[: spec.n_layer]):
        acc = per_dev.setdefault(dev, [0.0, 0.0, 0.0, 0, 0.0])
        acc[0] = sum(table.bytes[start:end], acc[0])
        acc[1] = sum(table.active_params[start:end], acc[1])
        for il in range(start, end):
            acc[4 if swa[il] else 2] += spec.head_dim_k * max(spec.n_head[il], 1)
        acc[3] += end - start

    total, bound_times = 0.0, {"compute": 0.0, "memory": 0.0, "pcie": 0.0}
    done = 0
    while done < n_tokens:
        t = min(t_ubatch, n_tokens - done)
        ctx_seen = done + t / 2
        # llama.cpp runs big CPU-side matmuls on the GPU (op_offload) for batches >= 32,
        # copying those weights over PCIe each micro-batch
        offload_cpu = main_gpu is not None and t >= 32
        flops: dict[str, float] = {}
        reads: dict[str, float] = {}
        layers: dict[str, int] = {}
        pcie_bytes = 0.0
        for dev, (nbytes, params, attn_width, n_layers, swa_width) in per_dev.items():
            run_on = main_gpu if (dev == CPU and offload_cpu) else dev
            if run_on != dev:
                pcie_bytes += nbytes
            # attention (QK^T and softmax*V over the context so far) runs well below GEMM
            # speed on CPUs; on GPUs its kernels keep up
            attn_cost = CPU_ATTENTION_SLOWDOWN if run_on == CPU else 1.0
            seen = attn_width * ctx_seen + swa_width * min(ctx_seen, spec.sliding_window or ctx_seen)
            attn_flops = 4 * seen * attn_cost
            flops[run_on] = flops.get(run_on, 0.0) + t * (2 * params + attn_flops)
            reads[run_on] = reads.get(run_on, 0.0) + nbytes
            layers[run_on] = layers.get(run_on, 0) + int(n_layers)
        # the output layer computes logits for the last token only
        out_dev = devices[spec.n_layer]
        flops[out_dev] = flops.get(out_dev, 0.0) + 2 * table.output_params
        reads[out_dev] = reads.get(out_dev, 0.0) + table.output_bytes
        step = 0.0
        for dev, f in flops.items():
            c = _device_constants(hardware, dev)
            if dev == CPU:
                eff = cpu_prefill_efficiency(spec.file_type)
            else:
                eff = c.prefill_efficiency_float if float_model else c.prefill_efficiency_quant
            t_compute = f / (_device_flops(hardware, dev, cfg) * eff)
            t_mem = reads[dev] / (_device_bandwidth_gbs(hardware, dev) * 1e9 * c.decode_efficiency)
            step += max(t_compute, t_mem) + c.layer_overhead_s * layers.get(dev, 0)
            bound_times["compute" if t_compute >= t_mem else "memory"] += max(t_compute, t_mem)
        if pcie_bytes:
            gpu = next(g for g in hardware.gpus if gpu_name(g.index) == main_gpu)
            t_pcie = pcie_bytes / ((gpu.pcie_gbs or 25.0) * 1e9)
            step += t_pcie
            bound_times["pcie"] += t_pcie
        total += step
        done += t
    return total, max(bound_times, key=bound_times.get)


def estimate_performance(
    spec: ModelSpec,
    hardware: HardwareProfile,
    cfg: RunConfig,
    mem: MemoryPlan,
    *,
    prompt_tokens: int = 512,
    gen_tokens: int = 128,
    calibration: Calibration | None = None,
) -> PerfEstimate:
    cal = calibration or Calibration()
    # mean decode rate over gen_tokens after the prompt (llama-bench tg semantics):
    # integrate the per-token time at a few positions (KV reads grow linearly)
    positions = [prompt_tokens + (i + 0.5) * gen_tokens / 4 for i in range(4)]
    fixed = _decode_fixed(spec, hardware, mem)
    parts = [decode_parts_s(spec, hardware, cfg, mem, int(p), fixed) for p in positions]
    share = {k: sum(p[k] for p in parts) / len(parts) for k in parts[0]}
    t_token = sum(share.values())
    decode_factor, prefill_factor = cal.factors(spec.file_type, cfg.n_threads, spec.file_bytes)
    decode = decode_factor / t_token
    t_prefill, prefill_bound = prefill_time_s(spec, hardware, cfg, mem, max(1, prompt_tokens))
    prefill = prefill_factor * max(1, prompt_tokens) / t_prefill

    known = hardware.backend in ("cuda", "metal", "cpu")
    if cal.active:
        d_lo, d_hi, p_lo, p_hi = 0.9, 1.1, 0.85, 1.15
    elif known:
        d_lo, d_hi, p_lo, p_hi = 0.8, 1.15, 0.7, 1.3
    else:
        d_lo, d_hi, p_lo, p_hi = 0.6, 1.3, 0.5, 1.5
    return PerfEstimate(
        decode_tok_s=decode,
        prefill_tok_s=prefill,
        decode_tok_s_range=(decode * d_lo, decode * d_hi),
        prefill_tok_s_range=(prefill * p_lo, prefill * p_hi),
        # a vision model's first token also waits for one image: encoded, then its
        # tokens prefilled like the prompt's (estimate/vision.py)
        time_to_first_token_s=prompt_tokens / prefill + 1 / decode
        + image_first_token_s(spec, hardware, cfg, prefill),
        bound=max(share, key=share.get),
        prefill_bound=prefill_bound,
        calibrated=cal.active,
    )


def image_first_token_s(spec: ModelSpec, hardware: HardwareProfile, cfg: RunConfig,
                        prefill_tok_s: float) -> float:
    """Seconds one image adds before the first token (0 without a projector)."""
    if spec.projector is None:
        return 0.0
    from rooflight.estimate.vision import vision_for_plan

    vp = vision_for_plan(spec.projector, hardware, cfg)
    return vp.encode_s + vp.image_tokens / prefill_tok_s
