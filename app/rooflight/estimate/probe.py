"""What a machine probe measured (runtime/probe.py), and the arithmetic that turns timings
into the figures the roofline uses in place of table constants.

Everything here is pure: timings in, figures out, so the arithmetic is tested from
synthetic timings (tests/test_probe.py) without llama.cpp.

The figures, all at the probe's thread count on the CPU backend:
- per weight type, seconds per weight element for one token's matrix-vector product, on
  a model several times the last-level cache (so it is what a real model pays), and the
  bytes per second that reached; and seconds per weight element per prompt token for the
  matrix-matrix product at the planned micro-batch;
- attention: seconds per unit of cpu_attention.py's attention model (decode: its cycle count over
  the cached positions, the K/V reads and the per-query-head work priced apart where a GQA
  model was measured beside the MHA one; prefill: its FLOPs), flash attention on and off;
- fixed: seconds per token (graph, Python, sampler), per layer, per vocabulary entry;
- image encode: the FLOP/s a vision projector's encoder graph (mtmd) reached, FLOPs counted
  by estimate/vision.encode_flops, so an estimate divides its projector's FLOPs by it.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property

from rooflight.estimate.cpu_attention import AttentionUnits
from rooflight.estimate.probe_gpu import GpuFigures
from rooflight.estimate.ranges import max_stored_spread

# A figure's repeats may disagree by this much (max - min over median) and still count as
# one steady measurement; beyond it the probe measures on (runtime/probe._Runner).
MAX_CLEAN_SPREAD = 0.25
# Clean runs (nothing else used the CPU) that still disagree after that show the machine's
# own speed drifting: a shared VM's memory, a CPU changing clocks. That is the machine the
# user's chats will run on, so the figure is stored with its spread, which widens every
# range that stands on it (ranges.probe_band), up to the spread where that range would be
# as wide as the table's: past it the figure says nothing the table does not (102% since the CPU
# rows of 2026-12-06 widened the table's band; 84% before).
MAX_STORED_SPREAD = max_stored_spread()
# A type is memory-bound when its achieved bytes/s is within this factor of the observed
# bandwidth roof (classify_bounds): it reads as fast as the machine delivers.
MEMORY_BOUND_WITHIN = 0.8


# The clean runs a figure stands on, at most (Repeats.used).
KEEP = 3



# How a stored probe's figures were measured and derived. 2: a prompt's weights exclude the
# last block's FFN, which llama.cpp multiplies for the output rows only (output_rows.py);
# figures of method 1 price prompts about a fifth fast. 3: attention measured with a KV cache
# twice the last-level cache (runtime/probe.attention_shape); method 2's cache-resident
# figure priced real models' decode attention 1.2-1.8x fast. 4: the models load with
# op_offload off; on a GPU build, method 3's prompt figures had the GPU's matmuls in them
# (its CPU-only machines measure the same again, once). 5: decode attention units count the
# cells of the busiest thread's chunk of the cache view (cpu_attention.cpu_attention_cells); with 2 or
# more threads, method 4's long-cache figure was per 1040-1170 positions where the kernel
# walked a 1280-cell view, and priced attention 11-22% dear under the new units. 6: decode
# attention has a second figure, the price of its per-query-head part, from a GQA model beside
# the MHA one (AttentionCost.decode_s); one figure priced a GQA model's attention on the 480
# MiB AMX Xeon VM at 0.3-0.4 of what it took, and a whole 32/8-head model's decode after 4096
# positions 2.35x fast. Older probes are measured again.
PROBE_METHOD = 6

@dataclass(frozen=True)
class Repeats:
    """The runs of one measurement: durations (s), and for each whether the machine was
    quiet enough during it (runtime/busy.py)."""

    seconds: tuple[float, ...]
    clean: tuple[bool, ...]

    @property
    def used(self) -> tuple[float, ...]:
        """The clean runs (the KEEP closest of them when there are more), or all runs when
        none was clean. A hiccup of the machine makes a run slow, so of more than KEEP clean
        runs the tightest KEEP are the undisturbed figure and the others are left out."""
        kept = [(s, i) for i, (s, ok) in enumerate(zip(self.seconds, self.clean, strict=True)) if ok]
        if not kept:
            return self.seconds
        if len(kept) > KEEP:
            kept.sort()
            start = min(range(len(kept) - KEEP + 1),
                        key=lambda j: (kept[j + KEEP - 1][0] - kept[j][0]) / kept[j + KEEP // 2][0])
            kept = sorted(kept[start:start + KEEP], key=lambda x: x[1])
        return tuple(s for s, _ in kept)

    @property
    def value(self) -> float:
        return statistics.median(self.used)

    @property
    def spread(self) -> float:
        """(max - min) / median of the runs used: the run-to-run spread."""
        used = self.used
        return (max(used) - min(used)) / statistics.median(used) if len(used) > 1 else 0.0

    @property
    def disturbed(self) -> bool:
        """Not a figure to store: fewer than two clean runs (other programs used the CPU),
        or clean runs that disagree by more than MAX_STORED_SPREAD."""
        return sum(self.clean) < 2 or self.spread > MAX_STORED_SPREAD

    @property
    def drifted(self) -> bool:
        """Clean runs that disagree by more than MAX_CLEAN_SPREAD, yet few enough to store."""
        return not self.disturbed and self.spread > MAX_CLEAN_SPREAD


def slope_intercept(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares line through (x, y): (slope, intercept)."""
    if len(xs) < 2 or len(set(xs)) < 2:
        raise ValueError("a line needs two distinct x values")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, my - slope * mx


@dataclass(frozen=True)
class FixedCosts:
    token_s: float  # per generated token, whatever the model (Python, graph build, sampler)
    layer_s: float  # per layer per token (kernel launches, thread barriers)
    vocab_s: float  # per vocabulary entry per token up to VOCAB_KNEE (logits copy-out and sampling)
    spread: float = 0.0
    # per entry beyond VOCAB_KNEE: the logits and the sampler's candidates leave the caches
    # there (measured 9-14 ns at 262144 entries against 2-3 ns up to 32000 on the project's
    # VM); None for a probe taken before it was measured: vocab_s throughout
    vocab_large_s: float | None = None

    def vocab_cost_s(self, n_vocab: int) -> float:
        """Per-token cost of a vocabulary of n_vocab entries."""
        large = self.vocab_s if self.vocab_large_s is None else self.vocab_large_s
        return self.vocab_s * min(n_vocab, VOCAB_KNEE) + large * max(0, n_vocab - VOCAB_KNEE)


# The probe's vocabularies: 260 (specials and bytes) and 32000 give the slope of small
# vocabularies; 262144 (Gemma 3 / 3n / 4, the largest the catalog holds) the slope beyond 32000.
VOCAB_SMALL, VOCAB_KNEE, VOCAB_HUGE = 260, 32000, 262144


def fixed_costs(
    layers: tuple[int, int], per_token_s: tuple[float, float], vocab: tuple[int, int],
    per_token_vocab_s: tuple[float, float], output_s: float = 0.0, spread: float = 0.0,
    huge: tuple[int, float, float] | None = None,
) -> FixedCosts:
    """From two tiny models that differ only in layer count (per-token times) and two that
    differ only in vocabulary size; output_s: the larger vocabulary's extra output-matrix
    time (from the kernel figures), which is not a fixed cost. huge: (vocabulary,
    per-token seconds, extra output-matrix seconds over the larger one) of a third model
    with a much larger vocabulary, for the slope beyond it."""
    layer_s, token_s = slope_intercept([float(n) for n in layers], list(per_token_s))
    vocab_s = (per_token_vocab_s[1] - per_token_vocab_s[0] - output_s) / (vocab[1] - vocab[0])
    large = None
    if huge is not None:  # (vocabulary, per-token seconds, its extra output-matrix seconds)
        n_huge, t_huge, out_huge = huge
        large = max((t_huge - per_token_vocab_s[1] - out_huge) / (n_huge - vocab[1]), 0.0)
    # noise can push a tiny difference below zero; a cost is never negative
    return FixedCosts(max(token_s, 0.0), max(layer_s, 0.0), max(vocab_s, 0.0), spread, large)


@dataclass(frozen=True)
class AttentionCost:
    flash_attn: bool
    # seconds per cpu_attention.cpu_attention_cycles unit; with decode_s_per_compute_unit, per
    # unit of its memory part (AttentionUnits.memory) only
    decode_s_per_unit: float
    prefill_s_per_flop: float  # seconds per attention FLOP in prompt processing
    spread: float = 0.0
    # seconds per unit of the per-query-head part (AttentionUnits.compute), where the probe
    # measured a GQA model beside the MHA one (split_decode_cost); None: one figure for both
    decode_s_per_compute_unit: float | None = None

    def decode_s(self, units: AttentionUnits) -> float:
        """Seconds for these decode attention units."""
        compute = self.decode_s_per_unit if self.decode_s_per_compute_unit is None else self.decode_s_per_compute_unit
        return units.memory * self.decode_s_per_unit + units.compute * compute


def split_decode_cost(cost: AttentionCost, mha: tuple[float, AttentionUnits],
                      gqa: tuple[float, AttentionUnits]) -> AttentionCost:
    """The decode figure in two parts from two models' (seconds, units) between a long and a
    short cache: an MHA model, whose K/V reads weigh as much as its per-query-head work, and a
    GQA model with many query heads per KV head, whose work outweighs its reads. Why two: a
    CPU whose memory is slow beside its cores pays for MHA mostly in reads, and one figure from
    it prices a GQA model's per-head work far too cheap (the 480 MiB AMX Xeon VM: 32 query heads
    on 8 KV heads cost 2.5x per unit what 16 on 16 did). Two equations, two unknowns; a part
    that solves below zero (noise, when the two models disagree little) is 0 and the other is
    fitted to both. Where the two models do not tell the parts apart, `cost` stays as it is."""
    (t1, u1), (t2, u2) = mha, gqa
    det = u1.memory * u2.compute - u2.memory * u1.compute
    if t1 <= 0 or t2 <= 0 or abs(det) < 1e-9 * max(u1.total * u2.total, 1e-30):
        return cost
    memory = (t1 * u2.compute - t2 * u1.compute) / det
    compute = (u1.memory * t2 - u2.memory * t1) / det
    if memory < 0 or compute < 0:  # least squares with the negative part held at 0
        if memory < 0:
            memory = 0.0
            compute = (t1 * u1.compute + t2 * u2.compute) / (u1.compute ** 2 + u2.compute ** 2)
        else:
            compute = 0.0
            memory = (t1 * u1.memory + t2 * u2.memory) / (u1.memory ** 2 + u2.memory ** 2)
    return replace(cost, decode_s_per_unit=memory, decode_s_per_compute_unit=compute)


def attention_cost(
    flash_attn: bool, *, decode_short_s: float, decode_long_s: float, units_short: float,
    units_long: float, prefill_s: float, prefill_other_s: float, prefill_flops: float,
    spread: float = 0.0,
) -> AttentionCost:
    """Decode: per-token time at a long and a short cache, over the difference in modelled
    attention units. Prefill: the prompt's time less what its weights and fixed costs take
    (prefill_other_s), over its attention FLOPs."""
    decode = max(decode_long_s - decode_short_s, 0.0) / max(units_long - units_short, 1.0)
    prefill = max(prefill_s - prefill_other_s, 0.0) / max(prefill_flops, 1.0)
    return AttentionCost(flash_attn, decode, prefill, spread)


@dataclass(frozen=True)
class KernelFigure:
    """One weight type's matrix kernels on this machine."""

    weight_type: str  # ggml type name: F16, Q8_0, Q4_K, ...
    decode_s_per_weight: float  # one token, matrix-vector, weights out of cache
    prefill_s_per_weight: float  # per prompt token, matrix-matrix at the probe's micro-batch
    decode_gbs: float  # weight bytes per second the decode kernel reached
    bound: str = "memory"  # memory | compute (decode)
    decode_spread: float = 0.0
    prefill_spread: float = 0.0
    disturbed: bool = False


# The largest share of a kernel model's time the probe's other figures may explain (see kernel_figure).
MAX_OTHER_SHARE = 0.5


def kernel_figure(
    weight_type: str, *, decode_token_s: float, decode_other_s: float, decode_weights: int,
    decode_bytes: int, prefill_s: float, prefill_other_s: float, prefill_weights: int,
    prompt_tokens: int, decode_spread: float = 0.0, prefill_spread: float = 0.0,
    disturbed: bool = False,
) -> KernelFigure:
    """decode_token_s: seconds per generated token on the decode model; decode_other_s:
    the fixed and attention part of it (known from the other figures); likewise for the
    prompt. *_weights: weight elements of that type the token or prompt token multiplies."""
    # In a clean probe the fixed and attention part is a few percent of the kernel models'
    # times; more than MAX_OTHER_SHARE means those figures were timed during stalls, and the
    # difference (down to zero) would price the weights as free: keep the share at most that,
    # and mark the figure disturbed (a probe keeps it only when asked to).
    inseparable = (decode_other_s > MAX_OTHER_SHARE * decode_token_s
                   or prefill_other_s > MAX_OTHER_SHARE * prefill_s)
    t_dec = max(decode_token_s - decode_other_s, (1 - MAX_OTHER_SHARE) * decode_token_s, 1e-9)
    t_pp = max(prefill_s - prefill_other_s, (1 - MAX_OTHER_SHARE) * prefill_s, 1e-9)
    disturbed = disturbed or inseparable
    return KernelFigure(
        weight_type=weight_type,
        decode_s_per_weight=t_dec / decode_weights,
        prefill_s_per_weight=t_pp / (prefill_weights * prompt_tokens),
        decode_gbs=decode_bytes / t_dec / 1e9,
        decode_spread=decode_spread, prefill_spread=prefill_spread, disturbed=disturbed,
    )


def classify_bounds(kernels: tuple[KernelFigure, ...]) -> tuple[KernelFigure, ...]:
    """Mark each type memory- or compute-bound against the bandwidth roof as the kernels
    see it: the second-fastest bytes/s any type reached here, so that one figure timed in a
    fast spell of a drifting machine (BF16 at 46 GB/s beside F16 at 28, on the project's VM)
    does not make every other type compute-bound; the fastest where fewer than three types
    were measured (of two, the second would make both memory-bound)."""
    if not kernels:
        return kernels
    roof = sorted((k.decode_gbs for k in kernels), reverse=True)[1 if len(kernels) >= 3 else 0]
    return tuple(replace(k, bound="memory" if k.decode_gbs >= MEMORY_BOUND_WITHIN * roof else "compute")
                 for k in kernels)


@dataclass(frozen=True)
class EncodeFigure:
    """How fast this machine's CPU encodes an image through a projector (mtmd's ViT graph)."""

    file_type: str  # the projector's weight type measured (F16): its kernels set the rate
    flops_per_s: float  # estimate/vision.encode_flops of the probe's projector / seconds per encode
    encode_s: float  # seconds per encode of the probe's projector (median of the runs used)
    encode_flops: float  # FLOPs of that one encode, by the same formula
    spread: float = 0.0
    disturbed: bool = False


def encode_figure(file_type: str, encode_flops: float, runs: Repeats) -> EncodeFigure:
    """runs: seconds per encode of one image, repeated; the rate is FLOPs over their median."""
    t = max(runs.value, 1e-9)
    return EncodeFigure(file_type.upper(), encode_flops / t, t, encode_flops, runs.spread, runs.disturbed)


def expert_cost(measured_s: float, priced_at_1_s: float, priced_at_2_s: float) -> float:
    """The MUL_MAT_ID cost per routed multiply-add (in dense ones) that prices a MoE prompt
    as measured: the estimate is linear in it (t(c) = t(1) + (c - 1) x (t(2) - t(1))), so c
    follows from the estimate at 1 and 2 and the measured seconds. Kept within 0.5-10: beyond,
    the measurement or the dense figures it stands on are wrong, not the kernel."""
    slope = priced_at_2_s - priced_at_1_s
    if slope <= 0:
        raise ValueError("an estimate whose routed experts cost nothing cannot price them")
    return min(10.0, max(0.5, 1.0 + (measured_s - priced_at_1_s) / slope))


@dataclass(frozen=True)
class MachineProbe:
    """One probe of this machine's llama.cpp CPU kernels."""

    machine: str  # store.calibration.machine_key of the machine measured
    build: str  # runtime/probe.py llama_build(): llama.cpp version and compiled features
    n_threads: int
    n_ubatch: int  # micro-batch the prefill figures are for
    kernels: tuple[KernelFigure, ...]
    attention: tuple[AttentionCost, ...]
    fixed: FixedCosts
    spread: float  # the largest run-to-run spread of the token figures kept (the encode keeps its own)
    disturbed: bool  # some figure could not be measured on a quiet machine (kept on request)
    created_at: float = 0.0
    duration_s: float = 0.0
    notes: tuple[str, ...] = field(default=())
    # image encode through a projector; None when not measured (or a probe stored before
    # the probe measured it): estimates then count the encoder's FLOPs at table efficiency
    encode: EncodeFigure | None = None
    method: int = PROBE_METHOD  # the arithmetic that derived the figures (from_dict refuses others)
    # MoE prompts: what a routed expert's multiply-add costs through MUL_MAT_ID against the
    # dense kernel of its weight type (moe_prompt.cpu_expert_cost), per type measured
    expert_costs: tuple[tuple[str, float], ...] = ()
    # whether llama.cpp loaded the probe's models with its extra buffers (repack, AMX); False
    # where runtime/amx.py turned them off: Q4_0 and IQ4_NL prompts then run tinyBLAS, like
    # Q8_0's (probe_roofline.prompt_stand_in). A probe stored before the field: True.
    extra_buffers: bool = True
    # the GPU half (estimate/probe_gpu.py): each GPU's roofline constants as measured here;
    # () where the build runs on the CPU only, the machine has no GPU, or a probe predates it
    gpus: tuple[GpuFigures, ...] = ()
    # whether the GPU half ran (on a build that offloads to a GPU): a probe stored before it
    # existed, on such a machine, asks to be measured again (store/probes.probe_status)
    gpu_half: bool = False
    # the parts the CPU half's time budget left to the table (weight types, an attention
    # setting, the image): a probe given more time measures them. () where none, or in a probe
    # stored before the field
    out_of_time: tuple[str, ...] = ()

    def kernel(self, weight_type: str) -> KernelFigure | None:
        return self._kernels_by_type.get(weight_type.upper())

    @cached_property
    def _kernels_by_type(self) -> dict[str, KernelFigure]:
        # asked per weight type of every layer of every plan: tens of thousands per ranking
        by_type: dict[str, KernelFigure] = {}
        for k in self.kernels:
            by_type.setdefault(k.weight_type, k)
        return by_type

    @cached_property
    def expert_cost_by_type(self) -> dict[str, float]:
        return dict(self.expert_costs)

    def attention_for(self, flash_attn: bool) -> AttentionCost | None:
        return next((a for a in self.attention if a.flash_attn == bool(flash_attn)), None)

    def spread_of(self, shares: tuple[tuple[str, float], ...], *, prefill: bool, flash_attn: bool) -> float:
        """The run-to-run spread of the figures one estimate stands on: each figure's spread
        weighted by its share of the estimate's time (kernel_calibration.KernelShares: a
        weight type, "attention", "fixed"), the figures' errors taken to move together (the
        cautious sum); work no figure prices (the table's) at this probe's widest spread.
        No shares: the widest spread."""
        attention = self.attention_for(flash_attn)

        def spread(name: str) -> float:
            k = self.kernel(name)
            if k is not None:
                return k.prefill_spread if prefill else k.decode_spread
            if name == "attention" and attention is not None:
                return attention.spread
            if name == "fixed":
                return self.fixed.spread
            return self.spread
        total = sum(share for _, share in shares)
        return sum(share * spread(name) for name, share in shares) / total if total > 0 else self.spread

    def to_dict(self) -> dict:
        d = asdict(self)
        d["gpus"] = [g.to_dict() for g in self.gpus]
        return d

    @classmethod
    def from_dict(cls, d: dict, *, any_method: bool = False) -> MachineProbe:
        """any_method: read a probe of an older PROBE_METHOD as it is (bench tools reading
        the kept accuracy records; the app measures such a probe again instead)."""
        method = int(d.get("method", 1))
        if method != PROBE_METHOD and not any_method:
            raise ValueError("a probe derived by other arithmetic than this version's: measure again")
        return cls(
            machine=d["machine"], build=d["build"], n_threads=int(d["n_threads"]),
            n_ubatch=int(d["n_ubatch"]),
            kernels=tuple(KernelFigure(**k) for k in d["kernels"]),
            attention=tuple(AttentionCost(**a) for a in d["attention"]),
            fixed=FixedCosts(**d["fixed"]), spread=float(d["spread"]),
            disturbed=bool(d["disturbed"]), created_at=float(d.get("created_at", 0.0)),
            duration_s=float(d.get("duration_s", 0.0)), notes=tuple(d.get("notes", ())),
            encode=EncodeFigure(**d["encode"]) if d.get("encode") else None, method=method,
            expert_costs=tuple((str(k), float(v)) for k, v in d.get("expert_costs", ())),
            extra_buffers=bool(d.get("extra_buffers", True)),
            gpus=tuple(GpuFigures.from_dict(g) for g in d.get("gpus", ())),
            gpu_half=bool(d.get("gpu_half", False)),
            out_of_time=tuple(str(part) for part in d.get("out_of_time", ())),
        )
