"""MoE experts kept in RAM (llama.cpp's --n-cpu-moe N): what moves, and what it costs.

llama.cpp places whole blocks (placement.py); --n-cpu-moe N then overrides the buffer type
of the routed-expert tensors of blocks 0..N-1 to the CPU (common/arg.cpp, one pattern per
block, runtime/tensor_overrides.py), while their attention, norms, router, shared experts
and KV cache stay where the block is. So:

- memory: exactly those tensors' bytes leave the block's device and land in RAM;
- decode: the CPU reads the routed experts' share (n_expert_used / n_expert) of them per
  token and multiplies with them (its dot-product cycles, as for any CPU-held weight), and
  each such block hands its activations GPU -> CPU -> GPU once (one fixed per-layer cost of
  the GPU backend: an assumption, not fitted);
- prefill: for micro-batches of 32 tokens and more llama.cpp runs the expert matmuls on
  the GPU and copies the whole expert tensors over PCIe each micro-batch (op_offload, the
  rule perf.py applies to every CPU-held weight); smaller batches compute them on the CPU.

memory.py, perf.py and plan.py call the few functions here; nothing else knows about it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rooflight.errors import BadInputError
from rooflight.estimate.layers import cpu_cycles_per_weight
from rooflight.estimate.placement import CPU
from rooflight.gguf.derived import derived
from rooflight.gguf.spec import ModelSpec

# common/common.h LLM_FFN_EXPS_REGEX, matched with regex_search as llama-model-loader.cpp does
# (so an expert's bias, e.g. gpt-oss's blk.N.ffn_up_exps.bias, moves with its matrix)
EXPERT_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
_EXPERT_RE = re.compile(EXPERT_REGEX)


def is_moved_by_n_cpu_moe(name: str) -> bool:
    return _EXPERT_RE.search(name) is not None


@dataclass(frozen=True)
class ExpertTable:
    """Per block: the routed-expert tensors --n-cpu-moe moves."""

    bytes: tuple[int, ...]  # in the file (= in the buffer)
    active_bytes: tuple[float, ...]  # read per token (n_expert_used of n_expert)
    active_params: tuple[float, ...]  # multiply-adds per token
    cpu_cycles: tuple[float, ...]  # CPU cycles per token (layers.cpu_cycles_per_weight)
    by_type: tuple[dict[str, float], ...] = ()  # active matrix elements per weight type (a probe prices these)

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes)


def expert_table(spec: ModelSpec) -> ExpertTable:
    """Per block, the tensors --n-cpu-moe moves; computed once per spec (gguf/derived.py)."""
    return derived(spec, "expert_table", _build_expert_table)


def _build_expert_table(spec: ModelSpec) -> ExpertTable:
    n = spec.n_layer
    b, ab, ap, cy = [0] * n, [0.0] * n, [0.0] * n, [0.0] * n
    by_type: list[dict[str, float]] = [{} for _ in range(n)]
    moe_ratio = spec.n_expert_used / spec.n_expert if spec.n_expert else 1.0
    for t in spec.tensors:
        if t.layer is not None and 0 <= t.layer < n and is_moved_by_n_cpu_moe(t.name):
            ratio = moe_ratio if t.is_expert else 1.0  # as layers.py counts them, to move exactly that
            b[t.layer] += t.n_bytes
            ab[t.layer] += t.n_bytes * ratio
            ap[t.layer] += t.n_elements * ratio
            cy[t.layer] += t.n_elements * ratio * cpu_cycles_per_weight(t.ggml_type)
            if len(t.shape) >= 2:
                kind = t.ggml_type.upper()
                by_type[t.layer][kind] = by_type[t.layer].get(kind, 0.0) + t.n_elements * ratio
    return ExpertTable(tuple(b), tuple(ab), tuple(ap), tuple(cy), tuple(by_type))


def has_experts(spec: ModelSpec) -> bool:
    return spec.is_moe and expert_table(spec).total_bytes > 0


def parse_wish(text: int | str) -> int | str:
    """A --n-cpu-moe value: an int, "auto" or "all" (checked against a model by resolve())."""
    v = str(text).strip().lower()
    if v in ("auto", "all"):
        return v
    try:
        n = int(v)
    except ValueError:
        raise BadInputError(f"--n-cpu-moe must be a number, auto or all, not {text!r}.") from None
    if n < 0:
        raise BadInputError("--n-cpu-moe must be 0 or more, auto or all.")
    return n


def resolve(value: int | str, spec: ModelSpec) -> int | str:
    """A --n-cpu-moe wish as a block count (or "auto"): "all" is every block; counts beyond
    the model's blocks mean all of them (llama.cpp adds patterns no tensor matches); a model
    without routed experts has nothing to move (0)."""
    value = parse_wish(value)
    if not has_experts(spec):
        return 0
    if value == "all":
        return spec.n_layer
    return value if value == "auto" else min(value, spec.n_layer)


def _moved_runs(devices, n_cpu_moe: int):
    """(device, start, end) runs of blocks < n_cpu_moe that are not already on the CPU."""
    start = 0
    n = min(n_cpu_moe, len(devices) - 1)
    while start < n:
        dev, end = devices[start], start
        while end < n and devices[end] == dev:
            end += 1
        if dev != CPU:
            yield dev, start, end
        start = end


# ---- hooks for memory.py / perf.py --------------------------------------------------------


def shift_weights(out: dict[str, int], spec: ModelSpec, devices, n_cpu_moe: int) -> None:
    """Memory: move the expert bytes of blocks < n_cpu_moe from their block's device to RAM."""
    if not n_cpu_moe:
        return
    table = expert_table(spec)
    for dev, start, end in _moved_runs(devices, n_cpu_moe):
        moved = sum(table.bytes[start:end])
        out[dev] -= moved
        out[CPU] = out.get(CPU, 0) + moved


def shift_reads(reads: dict[str, float], spec: ModelSpec, devices, n_cpu_moe: int) -> None:
    """Decode: the routed experts' bytes of those blocks are read from RAM, not VRAM."""
    if not n_cpu_moe:
        return
    table = expert_table(spec)
    for dev, start, end in _moved_runs(devices, n_cpu_moe):
        moved = sum(table.active_bytes[start:end])
        reads[dev] = reads.get(dev, 0.0) - moved
        reads[CPU] = reads.get(CPU, 0.0) + moved


def cpu_cycles(spec: ModelSpec, devices, n_cpu_moe: int) -> float:
    """Decode: CPU dot-product cycles per token for the experts it now holds."""
    table = expert_table(spec)
    return sum(sum(table.cpu_cycles[s:e]) for _, s, e in _moved_runs(devices, n_cpu_moe)) if n_cpu_moe else 0.0


def cpu_by_type(spec: ModelSpec, devices, n_cpu_moe: int) -> list[dict[str, float]]:
    """Decode with a measured probe: the moved experts' active elements per weight type."""
    table = expert_table(spec)
    return [table.by_type[i] for _, s, e in (_moved_runs(devices, n_cpu_moe) if n_cpu_moe else ()) for i in range(s, e)]


def handovers(devices, n_cpu_moe: int) -> dict[str, int]:
    """Blocks per GPU whose experts run on the CPU: each is one GPU -> CPU -> GPU round trip."""
    out: dict[str, int] = {}
    for dev, s, e in _moved_runs(devices, n_cpu_moe) if n_cpu_moe else ():
        out[dev] = out.get(dev, 0) + e - s
    return out


def shift_prefill(per_dev: dict, spec: ModelSpec, devices, n_cpu_moe: int, new) -> None:
    """Prefill: per_dev[dev] is perf.py's _PrefillWork (weight_bytes, params, params_by_type, routed_by_type);
    the experts' bytes and work go to the CPU's entry (new() makes one), which perf.py copies
    over PCIe to the GPU for micro-batches of 32+ tokens (op_offload) or runs on the CPU."""
    if not n_cpu_moe:
        return
    table = expert_table(spec)
    for dev, start, end in _moved_runs(devices, n_cpu_moe):
        src = per_dev[dev]
        cpu = per_dev.get(CPU)
        if cpu is None:
            cpu = per_dev[CPU] = new()
        b, p = sum(table.bytes[start:end]), sum(table.active_params[start:end])
        src.weight_bytes -= b
        src.params -= p
        cpu.weight_bytes += b
        cpu.params += p
        for i in range(start, end):
            for kind, n in table.by_type[i].items():
                if src.params_by_type is not None:
                    src.params_by_type[kind] = src.params_by_type.get(kind, 0.0) - n
                if cpu.params_by_type is None:
                    cpu.params_by_type = {}
                cpu.params_by_type[kind] = cpu.params_by_type.get(kind, 0.0) + n
                src.routed_by_type[kind] = src.routed_by_type.get(kind, 0.0) - n
                cpu.routed_by_type[kind] = cpu.routed_by_type.get(kind, 0.0) + n
