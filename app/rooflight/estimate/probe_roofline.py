"""The CPU roofline with a machine probe's figures in place of table constants.

perf.py calls these for the work a plan leaves on the CPU when this machine has a probe
taken at the plan's thread count (Calibration.probe_for). Weight types the probe did not
measure are priced by the table roofline (the caller's fallback), so a model with one
unmeasured tensor type still gets the probe for the rest; where the measured types show the
table's level is off on this machine past its band, the fallback takes their level
(table_level).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable

from rooflight.estimate.kernel_calibration import tally
from rooflight.estimate.probe import KernelFigure, MachineProbe
from rooflight.estimate.ranges import TABLE_SUFFIX


def table_kernel(kind: str) -> str:
    """The name table-priced work of a type goes by in a measurement's kernel shares."""
    return f"{kind.upper()}{TABLE_SUFFIX}"


def table_anchor(kernels: Iterable[KernelFigure], table_s: Callable[[str, float], float], *, prompt: bool) -> float:
    """The median over these measured kernels of measured / table seconds per weight (decode,
    or prompt per multiply-add at the probe's shape); 1.0 without any."""
    ratios = []
    for k in kernels:
        table = table_s(k.weight_type, 1.0)
        measured = k.prefill_s_per_weight if prompt else k.decode_s_per_weight
        if table > 0 and measured > 0:
            ratios.append(measured / table)
    return statistics.median(ratios) if ratios else 1.0


def table_level(
    kernels: Iterable[KernelFigure], table_s: Callable[[str, float], float], band: tuple[float, float], *,
    prompt: bool,
) -> float:
    """The factor on the table's price of a type the probe did not measure: 1.0 while the
    measured types run as the table says within its out-of-sample band (band: measured /
    predicted speed, backend_constants.CPU), else their median measured / table time
    (table_anchor). Past its band the table is wrong about this machine as a whole (a core
    generation it was not fitted on: a 2-core Zen-1-era EPYC VM ran every measured type
    2.8x (decode) and 9x (prompts) slower than the table), and its level would carry to the
    unmeasured type; inside it, the types' own errors scatter more than they share a level,
    and anchoring made them worse (docs/DECISIONS.md, "Unmeasured weight types")."""
    anchor = table_anchor(kernels, table_s, prompt=prompt)
    low, high = band
    return anchor if not 1 / high <= anchor <= 1 / low else 1.0


def level_table(table_s: Callable[[str, float], float], factor: float) -> Callable[[str, float], float]:
    """table_s with its prices times factor (table_level)."""
    return table_s if factor == 1.0 else (lambda kind, n: factor * table_s(kind, n))


def decode_weights_s(
    probe: MachineProbe, by_type: Iterable[dict[str, float]], table_s: Callable[[str, float], float],
    by_kernel: dict[str, float] | None = None,
) -> dict[str, float]:
    """Seconds one token's matrix-vector products take, split by bound ("memory" |
    "compute"): elements of each type x the probe's seconds per weight; table_s(type,
    elements) for types it has no figure for (counted as memory-bound, as the table's
    bandwidth term usually is). by_kernel, if given, gathers the seconds each of the
    probe's kernels takes, and the table's under table_kernel(type)
    (estimate/kernel_calibration.py)."""
    out = {"memory": 0.0, "compute": 0.0}
    for counts in by_type:
        for kind, n in counts.items():
            k = probe.kernel(kind)
            if k is None:
                seconds = table_s(kind, n)
                out["memory"] += seconds
                tally(by_kernel, table_kernel(kind), seconds)
            else:
                out[k.bound] += n * k.decode_s_per_weight
                tally(by_kernel, k.weight_type, n * k.decode_s_per_weight)
    return out


# Prompt kernels shared between weight types: on x86 with AVX, llama.cpp's llamafile_sgemm
# multiplies Q5_0 weights with the same tinyBLAS_Q0_AVX template as Q8_0 (ggml-cpu/
# llamafile/sgemm.cpp, llama-cpp-python 0.3.36), so a probe's Q8_0 prompt figure stands for
# Q5_0 where the probe has no Q5_0 figure of its own (a reduced probe, or one whose budget ran
# out; probes before Q5_0 was measured), times what the fifth bit's unpacking costs: the mean
# over the machines measured at the probe's 1024-wide shape (bench/probe_width.py --types
# Q8_0,Q5_0): x1.19 (Emerald Rapids Xeon VM, two runs 2026-12-04), x1.42 (Zen 5 EPYC VM,
# 2026-12-01), x1.19 (an AMX Xeon VM, three runs 2026-12-05). Leave one machine out, the
# mean of the other two prices each machine within 10-16% against 16-30% with Q8_0's figure
# alone (docs/DECISIONS.md). On ARM, Q5_0 has no tinyBLAS path: the table prices it.
_X86_PROMPT_STAND_IN = {"Q5_0": ("Q8_0", 1.26)}
# Q4_0 and IQ4_NL go to the CPU repack buffer where llama.cpp loads with its extra buffers
# (their own GEMM kernels, which the table's Q4_0 figure is); where runtime/amx.py turned
# those off they reach the same tinyBLAS_Q0_AVX template as Q8_0 (sgemm.cpp). Their cost
# against Q8_0's there is taken as 1: one machine measured it (the AMX Xeon VM, 2026-12-05:
# x1.02 and x1.16 in two probes), too few to carry a factor.
_X86_PLAIN_PROMPT_STAND_IN = {**_X86_PROMPT_STAND_IN, "Q4_0": ("Q8_0", 1.0), "IQ4_NL": ("Q8_0", 1.0)}


def prompt_stand_in(kind: str, isa: Iterable[str], extra_buffers: bool = True) -> tuple[str, float] | None:
    """The measured weight type whose prompt kernel a type shares on this CPU, and what a
    weight of this type costs against one of that type there, if any. extra_buffers: whether
    llama.cpp loads with its repack/AMX buffers (MachineProbe.extra_buffers)."""
    if "avx" not in set(isa):
        return None
    return (_X86_PROMPT_STAND_IN if extra_buffers else _X86_PLAIN_PROMPT_STAND_IN).get(kind)


def prefill_weights_s(
    probe: MachineProbe, counts: dict[str, float], n_tokens: int, table_s: Callable[[str, float], float],
    isa: Iterable[str] = (), shape_cost: float = 1.0, by_kernel: dict[str, float] | None = None,
) -> float:
    """Seconds a micro-batch of n_tokens spends in matrix-matrix products: per type,
    elements x tokens x the probe's per-weight figure (or that of the type whose kernel it
    shares on a CPU of this isa: prompt_stand_in) x shape_cost (what this model's matrix
    shapes cost per weight against the probe's: matmul_shape.relative_cost), never less
    than one matrix-vector pass over the weights (a small batch still reads them all
    once); table_s(type, elements x tokens) for types without a figure. by_kernel, if
    given, gathers the seconds each of the probe's kernels takes (the table's under
    table_kernel(type))."""
    isa = tuple(isa)
    total = 0.0
    for kind, n in counts.items():
        k, cost = probe.kernel(kind), 1.0
        if k is None and (stand_in := prompt_stand_in(kind, isa, probe.extra_buffers)) is not None:
            k, cost = probe.kernel(stand_in[0]), stand_in[1]
        if k is None:
            seconds = table_s(kind, n * n_tokens)
            tally(by_kernel, table_kernel(kind), seconds)
        else:
            seconds = max(n * n_tokens * k.prefill_s_per_weight * shape_cost * cost, n * k.decode_s_per_weight)
            tally(by_kernel, k.weight_type, seconds)
        total += seconds
    return total


def covered_share(probe: MachineProbe, by_type: Iterable[dict[str, float]]) -> float:
    """Share of the weight elements whose type the probe measured (1.0: all)."""
    total = known = 0.0
    for counts in by_type:
        for kind, n in counts.items():
            total += n
            if probe.kernel(kind) is not None:
                known += n
    return known / total if total else 1.0


def fixed_s(probe: MachineProbe, n_layers: int, n_vocab: int) -> float:
    """Per-token fixed cost: graph and Python per token, per layer, per vocabulary entry."""
    f = probe.fixed
    return f.token_s + f.layer_s * n_layers + f.vocab_cost_s(n_vocab)
