"""The GPU half of the machine probe: this machine's GPUs' own roofline constants.

The table prices a GPU by its backend's constants (backend_constants.py), fitted on other
devices: decode efficiency against the GPU's bandwidth figure, a cost per layer per token,
and prefill efficiencies against the matrix rate llama.cpp's kernels use. The probe
(runtime/probe_gpu.py) times generated models on each GPU with the installed llama.cpp;
here those times become the same constants for that GPU, by solving the estimator itself
for them (perf.estimate_performance with the candidate constants swapped in), so a
measured constant means exactly what the table's does and one formula prices both:

- the cost per layer: from two tiny models of 1 and many layers (their weights are
  negligible), the difference of their token times, which cancels every per-token cost;
- the decode efficiency: from a model of real layer width (an 8B model's) and about 1 GiB,
  with that layer cost, against the 1-layer tiny model (the difference cancels what every
  token pays besides layers and weights, as the cost per layer's does);
- the prefill efficiencies: one micro-batch prompt on the same models, F16 (the float
  efficiency) and Q4_K (the quantized one), with the decode constants in place, less the
  same prompt on the 1-layer tiny model;
- the host-to-device copy rate partial offload pays for prompts: a short prompt on the Q4_K
  model with no layer on the GPU, which llama.cpp's op_offload runs on the GPU by copying
  every weight matrix over (GPU 0, the one op_offload uses), with the other constants in place;
- what a block with routed experts costs beyond a dense one: two tiny MoE models of 1 and
  many layers, the dense blocks' cost in place (the table has no such cost: its published
  rows disagree by backend, so the GPU's own figure is the one to use);
- what a MoE prompt's expert matmuls cost beyond their multiply-adds (the table's
  moe_expert_overhead_tokens, fitted per backend on a few devices' runs): one micro-batch on
  a block of Qwen3-30B-A3B's proportions, the quantized efficiency in place, less the tiny
  model's prompt.

Each solve is a bisection on a monotone function of one constant (the estimator has caps and
maxima, so it is not assumed linear).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rooflight.estimate.backend_constants import BACKENDS, BackendConstants
from rooflight.estimate.config import RunConfig
from rooflight.estimate.placement import gpu_name
from rooflight.gguf.spec import ModelSpec

PROBE_SOURCE = "measured by this machine's probe (rooflight probe: generated models on this GPU)"
# what the solves may return: outside these the measurement says more about the run
# (a stall, a model that did not reach the GPU) than about the GPU
LAYER_S_LIMITS = (0.0, 0.05)
MOE_TOKENS_LIMITS = (0.0, 5000.0)  # moe_expert_overhead_tokens: the published fits span 19-108
EFFICIENCY_LIMITS = (0.005, 2.0)
H2D_GBS_LIMITS = (0.05, 1000.0)


@dataclass(frozen=True)
class GpuFigures:
    """One GPU's constants as the probe measured them (GPUs the plan names "gpu0", "gpu1"...)."""

    device: str  # the plan's device name, "gpu0"
    name: str  # the GPU's name as detected: the figures apply to that GPU only
    backend: str  # the llama.cpp backend measured (cuda, rocm, vulkan, sycl, metal)
    decode_efficiency: float  # of the GPU's bandwidth figure, on the quantized (Q4_K) model
    layer_overhead_s: float
    prefill_efficiency_float: float | None  # None: not measured (the table's stands)
    prefill_efficiency_quant: float | None
    spread: float  # the largest run-to-run spread of the timings these stand on
    disturbed: bool = False
    # every decode efficiency measured, per weight type (the constant takes Q4_K's)
    decode_by_type: tuple[tuple[str, float], ...] = ()
    # host-to-device copy rate (GB/s) of op_offload's prompts; None: not measured (the link's figure)
    h2d_gbs: float | None = None
    # a block with routed experts beyond a dense block, per token; None: not measured (the table's 0)
    moe_layer_overhead_s: float | None = None
    # a MoE prompt's cost per expert touched, in tokens (BackendConstants.moe_expert_overhead_tokens);
    # None: not measured (the table's)
    moe_expert_overhead_tokens: float | None = None

    def constants(self, table: BackendConstants) -> BackendConstants:
        """The table's constants with what the probe measured in their place."""
        return replace(
            table, decode_efficiency=self.decode_efficiency, layer_overhead_s=self.layer_overhead_s,
            prefill_efficiency_float=self.prefill_efficiency_float or table.prefill_efficiency_float,
            prefill_efficiency_quant=self.prefill_efficiency_quant or table.prefill_efficiency_quant,
            moe_layer_overhead_s=(table.moe_layer_overhead_s if self.moe_layer_overhead_s is None
                                  else self.moe_layer_overhead_s),
            moe_expert_overhead_tokens=(table.moe_expert_overhead_tokens if self.moe_expert_overhead_tokens is None
                                        else self.moe_expert_overhead_tokens),
            source=PROBE_SOURCE)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["decode_by_type"] = dict(self.decode_by_type)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> GpuFigures:
        def opt(key: str) -> float | None:
            return None if d.get(key) is None else float(d[key])

        return cls(device=str(d["device"]), name=str(d["name"]), backend=str(d["backend"]),
                   decode_efficiency=float(d["decode_efficiency"]), layer_overhead_s=float(d["layer_overhead_s"]),
                   prefill_efficiency_float=opt("prefill_efficiency_float"),
                   prefill_efficiency_quant=opt("prefill_efficiency_quant"),
                   spread=float(d["spread"]), disturbed=bool(d.get("disturbed", False)),
                   decode_by_type=tuple((str(k), float(v)) for k, v in dict(d.get("decode_by_type", {})).items()),
                   h2d_gbs=opt("h2d_gbs"), moe_layer_overhead_s=opt("moe_layer_overhead_s"),
                   moe_expert_overhead_tokens=opt("moe_expert_overhead_tokens"))


def with_gpu_figures(hardware, figures: tuple[GpuFigures, ...]):
    """The profile with the probe's constants on the GPUs they were measured on (same plan
    name, same detected name, same backend); a what-if GPU, or another backend, keeps the
    table's."""
    table = BACKENDS.get(hardware.backend)
    names = {gpu_name(g.index): g.name for g in hardware.gpus}
    same = [f for f in figures if f.backend == hardware.backend and names.get(f.device) == f.name]
    if table is None or not same:
        return hardware
    copy_rate = {f.device: f.h2d_gbs for f in same if f.h2d_gbs}
    gpus = tuple(replace(g, pcie_gbs=copy_rate[gpu_name(g.index)]) if gpu_name(g.index) in copy_rate else g
                 for g in hardware.gpus)
    return replace(hardware, gpus=gpus, gpu_constants=tuple((f.device, f.constants(table)) for f in same))


def with_constants(hardware, device: str, constants: BackendConstants):
    """The profile with these constants on one GPU (what the solves try)."""
    others = tuple((d, c) for d, c in hardware.gpu_constants if d != device)
    return replace(hardware, gpu_constants=(*others, (device, constants)))


def bisect(f: Callable[[float], float], target: float, lo: float, hi: float, *, increasing: bool,
           rel_tol: float = 1e-6) -> float | None:
    """x in [lo, hi] with f(x) = target for a monotone f; None when target is outside f's
    range there (the measurement cannot be explained by this constant)."""
    f_lo, f_hi = f(lo), f(hi)
    if increasing and not f_lo <= target <= f_hi or not increasing and not f_hi <= target <= f_lo:
        return None
    for _ in range(200):
        mid = (lo + hi) / 2
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
        if hi - lo <= rel_tol * max(abs(hi), 1e-12):
            break
    return (lo + hi) / 2


@dataclass(frozen=True)
class Timed:
    """One measured run of a probe model on the GPU, and what the estimator needs to price it."""

    spec: ModelSpec  # the model run
    cfg: RunConfig  # the config it was loaded with (all layers on the GPU measured)
    seconds: float  # per token (decode) or per prompt (prefill)
    prompt_tokens: int  # decode: tokens before the timed ones; prefill: the prompt's length
    gen_tokens: int = 0  # decode: tokens timed; 0 for a prompt


def priced_s(hardware, run: Timed) -> float:
    """The estimator's time for one probe run: seconds per token for a decode run (the mean
    over its positions), seconds for a prompt."""
    from rooflight.estimate.memory import plan_memory
    from rooflight.estimate.perf import estimate_performance

    mem = plan_memory(run.spec, hardware, run.cfg)
    p = estimate_performance(run.spec, hardware, run.cfg, mem, prompt_tokens=max(1, run.prompt_tokens),
                             gen_tokens=max(1, run.gen_tokens))
    return 1 / p.decode_tok_s if run.gen_tokens else max(1, run.prompt_tokens) / p.prefill_tok_s


def _solve_constant(hardware, device: str, base: BackendConstants, field: str, run: Timed, short: Timed | None,
                    limits: tuple[float, float], *, increasing: bool) -> float | None:
    """The value of one of base's constants (`field`) that makes the estimator's time for `run`,
    less its time for `short` (None: nothing), equal the measured difference: what both runs
    pay besides the part the constant prices cancels."""
    def t(x: float) -> float:
        changes: dict[str, Any] = {field: x}  # one float field of BackendConstants
        hw = with_constants(hardware, device, replace(base, **changes))
        return priced_s(hw, run) - (priced_s(hw, short) if short else 0.0)

    return bisect(t, run.seconds - (short.seconds if short else 0.0), *limits, increasing=increasing)


def solve_layer_s(hardware, device: str, table: BackendConstants, short: Timed, deep: Timed) -> float | None:
    """The cost per layer that makes the estimator's token-time difference between the deep and
    the short tiny model equal the measured one."""
    return _solve_constant(hardware, device, table, "layer_overhead_s", deep, short, LAYER_S_LIMITS, increasing=True)


def solve_moe_layer_s(hardware, device: str, base: BackendConstants, short: Timed, deep: Timed) -> float | None:
    """What a block with routed experts costs beyond a dense one (base holds the dense blocks'
    measured cost): the figure that makes the estimator's token-time difference between the
    deep and the short tiny MoE model equal the measured one."""
    return _solve_constant(hardware, device, base, "moe_layer_overhead_s", deep, short, LAYER_S_LIMITS,
                           increasing=True)


def solve_moe_expert_tokens(hardware, device: str, base: BackendConstants, run: Timed,
                            short: Timed | None = None) -> float | None:
    """The cost per expert touched, in tokens (moe_expert_overhead_tokens), that prices this MoE
    prompt as measured, base holding the GPU's measured efficiencies; short: the tiny 1-layer
    model's prompt, taken off both sides as for the efficiencies."""
    return _solve_constant(hardware, device, base, "moe_expert_overhead_tokens", run, short, MOE_TOKENS_LIMITS,
                           increasing=True)


def solve_decode_efficiency(hardware, device: str, base: BackendConstants, run: Timed, short: Timed) -> float | None:
    """The efficiency that makes the estimator's token-time difference between this model and
    the 1-layer tiny one equal the measured one: what every token pays besides its layers and
    weights (llama-cpp-python's eval and sampling, the graph's launch) cancels, as it is not in
    the table's constants either (they were fitted on llama-bench, which has no Python)."""
    return _solve_constant(hardware, device, base, "decode_efficiency", run, short, EFFICIENCY_LIMITS,
                           increasing=False)


def solve_prefill_efficiency(hardware, device: str, base: BackendConstants, run: Timed, *,
                             quantized: bool, short: Timed | None = None) -> float | None:
    """The prompt efficiency (quantized or float) that prices this prompt as measured; short:
    the same prompt on the 1-layer tiny model, whose time is taken off both sides (what a
    prompt pays besides its layers and weights, as for decode)."""
    field = "prefill_efficiency_quant" if quantized else "prefill_efficiency_float"
    return _solve_constant(hardware, device, base, field, run, short, EFFICIENCY_LIMITS, increasing=False)


def solve_h2d_gbs(hardware, device: str, constants: BackendConstants, run: Timed) -> float | None:
    """The copy rate that makes the estimator's op_offload prompt (no layer on the GPU) take
    the measured time, the GPU's other constants in place."""
    base = with_constants(hardware, device, constants)

    def t(gbs: float) -> float:
        gpus = tuple(replace(g, pcie_gbs=gbs) if gpu_name(g.index) == device else g for g in base.gpus)
        return priced_s(replace(base, gpus=gpus), run)

    return bisect(t, run.seconds, *H2D_GBS_LIMITS, increasing=False)


def derive(hardware, device: str, *, short: Timed, deep: Timed, decode: dict[str, Timed],
           prefill: dict[str, Timed], spread: float, disturbed: bool = False,
           quant_type: str = "Q4_K", offload: Timed | None = None,
           short_prompt: Timed | None = None,
           moe: tuple[Timed, Timed] | None = None,
           moe_prompt: Timed | None = None) -> tuple[GpuFigures | None, list[str]]:
    """The GPU's figures from its timed runs (decode and prefill keyed by weight type: F16 is
    the float figure, quant_type the quantized one and the decode constant; offload: the
    op_offload prompt, for the copy rate; short_prompt: the tiny 1-layer model's prompt, taken
    off the prompts'; moe: the tiny MoE models' decodes, 1 layer and deep; moe_prompt: a
    micro-batch on a block with routed experts), and a note per figure that could not be
    solved (kept at the table's value)."""
    table = BACKENDS[hardware.backend]
    gpu = next(g for g in hardware.gpus if gpu_name(g.index) == device)
    notes: list[str] = []
    layer_s = solve_layer_s(hardware, device, table, short, deep)
    if layer_s is None:
        notes.append(f"{device}: the cost per layer could not be solved from the tiny models "
                     f"({short.seconds * 1e3:.3f} / {deep.seconds * 1e3:.3f} ms a token): the table's kept")
        layer_s = table.layer_overhead_s
    base = replace(table, layer_overhead_s=layer_s)
    by_type: dict[str, float] = {}
    for wt, run in decode.items():
        eff = solve_decode_efficiency(hardware, device, base, run, short)
        if eff is None:
            notes.append(f"{device}: {wt} decode ({run.seconds * 1e3:.3f} ms a token) is outside what any "
                         "efficiency prices: not used")
        else:
            by_type[wt] = eff
    decode_eff = by_type.get(quant_type, next(iter(by_type.values()), None))
    if decode_eff is None:
        return None, [*notes, f"{device}: no decode figure: the GPU keeps the table's constants"]
    base = replace(base, decode_efficiency=decode_eff)
    pf = {wt: solve_prefill_efficiency(hardware, device, base, run, quantized=wt != "F16", short=short_prompt)
          for wt, run in prefill.items()}
    for wt, eff in pf.items():
        if eff is None:
            notes.append(f"{device}: the {wt} prompt is outside what any efficiency prices: not used")
    fig = GpuFigures(device=device, name=gpu.name, backend=hardware.backend, decode_efficiency=decode_eff,
                     layer_overhead_s=layer_s, prefill_efficiency_float=pf.get("F16"),
                     prefill_efficiency_quant=pf.get(quant_type), spread=spread, disturbed=disturbed,
                     decode_by_type=tuple(sorted(by_type.items())))
    if moe is not None:
        extra = solve_moe_layer_s(hardware, device, base, *moe)
        if extra is None:
            notes.append(f"{device}: a block with routed experts could not be priced from the tiny MoE models "
                         f"({moe[0].seconds * 1e3:.3f} / {moe[1].seconds * 1e3:.3f} ms a token): the table's kept")
        fig = replace(fig, moe_layer_overhead_s=extra)
    if moe_prompt is not None:
        tokens = solve_moe_expert_tokens(hardware, device, fig.constants(table), moe_prompt, short_prompt)
        if tokens is None:
            notes.append(f"{device}: the MoE prompt ({moe_prompt.seconds * 1e3:.1f} ms) is outside what any cost "
                         "per expert prices: the table's kept")
        fig = replace(fig, moe_expert_overhead_tokens=tokens)
    if offload is not None:
        h2d = solve_h2d_gbs(hardware, device, fig.constants(table), offload)
        if h2d is None:
            notes.append(f"{device}: the prompt with its weights in RAM ({offload.seconds * 1e3:.1f} ms) is outside "
                         "what any copy rate prices: the link's figure kept")
        fig = replace(fig, h2d_gbs=h2d)
    return fig, notes
