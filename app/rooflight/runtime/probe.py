"""`rooflight probe`: measure this machine's llama.cpp CPU kernels with generated models.

The estimator's CPU constants were fitted on one machine; on another (another core
generation, ISA, memory system) they are off by tens of percent. So we measure the kernels
themselves, briefly, with the llama.cpp build that will run the models, at the thread
count plans use:

1. fixed costs: tiny models (weights negligible) with 1 and 8 layers, and with a 260- and a
   32000-entry vocabulary: per token, per layer, per vocabulary entry;
2. attention: a small model with wide attention, decode at a short and a long cache and a
   1024-token prompt, flash attention on (off comes last: plans use it only when told to);
   then the same on a GQA model, which prices the query heads' work apart from the K/V reads;
3. per weight type: decode on a model several times the last-level cache (so the figure
   is what large models pay, bound by bandwidth or by arithmetic as the type is here) and
   a one-micro-batch prompt on a smaller one (prompt processing is compute-bound);
4. image encode: a generated vision projector encodes one image a few times (probe_vision.py):
   the FLOP/s its encoder graph reaches prices the image before a vision model's first token.
5. attention again with flash attention off, if the budget lasts.

Each run is timed under a busy watch (runtime/busy.py). A run during which the rest of the
machine used more than `busy_threshold` of the CPU is repeated while the time budget
lasts; a figure without two clean runs that agree is disturbed, and a probe with disturbed
figures is not stored unless the caller asks for it (then it is stored marked disturbed,
and estimates say so). The models are written with the project's writer (gguf/synthetic.py,
tiled weights: fast to write, read like random ones) into a temporary folder.
"""

from __future__ import annotations

import contextlib
import functools
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rooflight.errors import OperationFailedError, RooflightError
from rooflight.estimate.matmul_shape import PROBE_PROMPT_SHAPE
from rooflight.estimate.probe import (
    MAX_CLEAN_SPREAD,
    MAX_STORED_SPREAD,
    VOCAB_HUGE,
    VOCAB_KNEE,
    VOCAB_SMALL,
    AttentionCost,
    EncodeFigure,
    FixedCosts,
    KernelFigure,
    MachineProbe,
    Repeats,
    attention_cost,
    classify_bounds,
    encode_figure,
    fixed_costs,
    kernel_figure,
    split_decode_cost,
)
from rooflight.runtime import amx
from rooflight.runtime.build import llama_build
from rooflight.runtime.busy import DEFAULT_BUSY_THRESHOLD, Watch, load_now
from rooflight.runtime.probe_defaults import ALL_TYPES, BUDGET_S

MIN_RUN_S = 0.15  # shorter runs are dominated by the 10 ms ticks of the busy watch
# tokens a decode run has at least, whatever MIN_RUN_S asks: 4, not 8. On a 260 MiB-L3 Xeon
# the decode models are 512 MiB (35 ms a token), where 8 doubled every run MIN_RUN_S asks
# for; alternated whole probes there (2026-12-03) measured 7-9 weight types at 4 tokens, 6 at
# 8 (BF16, Q4_0, Q5_0 left to the table), decode spreads 2-24% against 0.2-6%
DECODE_MIN_TOKENS = 4
DECODE_WINDOW = 256  # a decode run's positions stay within this many of its start (_Model.decode)
REPEATS = 3  # clean runs wanted per figure
VOCAB_LARGE = VOCAB_KNEE  # the second vocabulary: the slope of small ones ends there
ATTN_PROMPT = 1024  # cached positions for the long-cache decode and the attention prompt
DECODE_MIN_BYTES = 64 << 20
# and at most this: a CPU with a very large last-level cache (96 MiB on an X3D part) would
# otherwise write and read ~10 decode models of 768 MiB each inside the probe's 30 s
DECODE_MAX_BYTES = 512 << 20

# shapes (write_model arguments): the decode model's layers are repeated until its weights
# are DECODE_CACHE_FACTOR x the last-level cache; the prompt model has prefill_layers() layers
_DECODE_SHAPE = dict(n_embd=2048, n_head=16, n_head_kv=4, head_dim=128, n_ff=5632)
_PREFILL_SHAPE = PROBE_PROMPT_SHAPE  # estimate/matmul_shape.py prices other shapes against it
_TINY_SHAPE = dict(n_embd=64, n_head=2, n_head_kv=2, head_dim=32, n_ff=64)
# The attention model: wide attention, tiny weights, and layers enough that its KV cache at
# ATTN_PROMPT positions is ATTN_CACHE_FACTOR x the last-level cache (attention_shape). In a
# real model the weights evict each layer's cache between tokens, so attention reads it from
# RAM; a 2-layer model's 4 MiB cache stayed in the caches and its figure priced the attention
# of generated 450M-1.5B models at 512 positions 1.4-1.7x too fast here (Zen 5 EPYC, 32 MiB
# L3). MHA rather than GQA: four times the cache per layer for the same prompt FLOPs, so the
# 1024-token prompt that fills it costs a quarter of what as many GQA layers would.
_ATTN_HEADS = dict(n_embd=256, n_head=16, n_head_kv=16, head_dim=128, n_ff=256)
ATTN_CACHE_FACTOR = 2
# ...and a GQA model beside it, 8 query heads per KV head: its per-query-head work outweighs
# its K/V reads, where the MHA model's reads weigh as much as its work, so the two give the
# attention model's two parts a figure each (estimate/probe.split_decode_cost). Without it
# one figure priced a GQA model's decode attention at 0.3-0.4 of its time on the 480 MiB AMX
# Xeon VM (2026-12-07, bench/attention_heads.py: 32 query heads on 8 KV heads, 28 on 4 and 16
# on 4 after 4096 positions, 2.5-3.0x the MHA model's cost per unit). Four layers: its token
# costs about what the MHA model's 8 do at 1024 positions.
_ATTN_GQA_SHAPE = dict(n_layer=4, n_embd=256, n_head=32, n_head_kv=4, head_dim=128, n_ff=256)
# At most 8 layers (64 MiB of cache at ATTN_PROMPT positions): a larger last-level cache gets
# less than 2x. On a 260 MiB-L3 Xeon VM (2026-12-03, bench/probe_attention.py --also-layers,
# best of 3, two runs) the 8-layer model measured x1.04 and x1.07 of the 16-layer one (4
# layers: x0.60, cached), generated 300M-1B models x0.65-1.10; 16 layers cost 2.4 s more of
# the probe's 30 s there, and Q4_0 went unmeasured.
ATTN_MAX_LAYERS = 8


def attention_shape(llc: int) -> dict:
    """write_model arguments of the attention model for a last-level cache of llc bytes."""
    h = _ATTN_HEADS
    per_layer = ATTN_PROMPT * h["n_head_kv"] * 2 * h["head_dim"] * 2  # K and V, f16
    n_layer = min(ATTN_MAX_LAYERS, max(2, math.ceil(ATTN_CACHE_FACTOR * llc / per_layer)))
    return dict(n_layer=n_layer, **h)
# 8, not 2: at twice the cache part of the decode model stayed cached here (a 32 MiB L3):
# its per-weight figures came out 16-34% faster than at 8x, and the probe-based decode of
# nine generated and real models 0.65-0.90x of measured (median error 20.5%); at 8x, three
# minutes later, 0.72-1.37x (median 12.7%, five of nine within 3%). The probe then takes
# ~24 s here.
DECODE_CACHE_FACTOR = 8
# MoE prompts: routed experts go through MUL_MAT_ID, not the dense kernels above; the types
# MoE downloads carry (Q4_K_M files' experts, Q8_0, gpt-oss's MXFP4) get a prompt of their own
# on a small Qwen3-MoE (32 experts, 4 used: 64 tokens per expert at a 512-token micro-batch),
# right after the dense kernels of their types (ALL_TYPES: the rarer types come after). The
# cost per routed multiply-add moved from 1.41-1.65 on the Zen 4 VM the table's figures were
# fitted on to 1.94-2.86 on a Zen 5 one (bench/moe_prompt_cpu.py --fit): a machine's own
# figure, not a constant.
EXPERT_TYPES = ("Q4_K", "Q8_0", "MXFP4")
_EXPERT_SHAPE = dict(arch="qwen3moe", n_layer=2, n_embd=1024, n_head=8, n_head_kv=4, n_ff=768,
                     n_expert=32, n_expert_used=4)
PREFILL_LAYERS = 3  # ~38M weights: a 512-token prompt takes ~0.1 s here, long enough to watch
# ...and ~1 s on a Zen-1-era 2-core VM, where the prompt runs (3 per type) took most of the
# kernels' time and the 30 s ran out after 6 of 11 types. Where the first type's prompt runs
# take longer than PREFILL_SLOW_S the later types' prompt models have 2 layers (~0.6 s there):
# a weight costs the same (the last layer's FFN serves only the last token at any depth, so
# the mix of matrices moves 0.4% by estimate/matmul_shape.py), and attention, which the
# derivation subtracts, goes from 16% to 18% of the prompt (bench/probe_prompt_layers.py).
PREFILL_LAYERS_SLOW = 2
PREFILL_SLOW_S = 0.5


def prefill_layers(first_prompt_runs: tuple[float, ...] | None) -> int:
    """Layers of a prompt model, given the first measured type's prompt runs (None: none yet)."""
    if first_prompt_runs and min(first_prompt_runs) > PREFILL_SLOW_S:
        return PREFILL_LAYERS_SLOW
    return PREFILL_LAYERS


# the image part (writing, loading, a warm-up and 2-3 runs of encodes) takes about 1 s here:
# the kernels begin no new weight type in the budget's last IMAGE_RESERVE_S, and the image
# part begins only with IMAGE_MIN_LEFT_S left
IMAGE_RESERVE_S, IMAGE_MIN_LEFT_S = 2.0, 1.0
IMAGE_BUDGET_S = 8.0  # the image part alone (probe_image_encode)


# why a part has no figure when the budget ran out before it (ProbeRun.skipped, notes); every
# such reason says _RAN_OUT, a figure the budget cut to one run too (_disturbance)
_RAN_OUT = "the time budget ran out"
OUT_OF_TIME = f"not measured: {_RAN_OUT} (the machine was busy or slow)"


def _out_of_time(skipped: dict[str, str], image_note: str | None, profile) -> tuple[str, ...]:
    """The CPU half's parts its time budget left to the table (MachineProbe.out_of_time), the
    image encode among them (its reason is the image note): what a longer budget_s measures
    (a GPU's half has a budget of its own, GPU_BUDGET_S)."""
    from rooflight.estimate.placement import gpu_name

    gpus = {gpu_name(g.index) for g in profile.gpus}
    reasons = {**skipped, "image encode": image_note or ""}
    return tuple(part for part, why in reasons.items() if _RAN_OUT in why and part not in gpus)


def budget_left_parts_out(run: ProbeRun) -> bool:
    """Whether the time budget left parts of a stored probe to the table (one run of a
    figure, or none), which a probe with more time would measure."""
    return run.stored and bool(run.probe.out_of_time)


class ProbeCancelled(OperationFailedError):
    """The user stopped the probe; nothing was stored."""


class _OutOfTime(Exception):
    """The budget ran out before a figure had a single run."""


def last_level_cache_bytes() -> int:
    """The CPU's last-level cache per core complex, from sysfs; 32 MiB when unknown."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    best = 0
    for idx in sorted(base.glob("index*")) if base.is_dir() else ():
        try:
            text = (idx / "size").read_text().strip().upper()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        try:
            best = max(best, int(text.rstrip("KMG")) * mult)
        except ValueError:
            continue
    return best or 32 << 20


@dataclass
class ProbeRun:
    """What one probe did: the probe (stored only if `stored`), why not, and every figure's
    raw runs for the report."""

    probe: MachineProbe
    stored: bool = False
    refused: str | None = None  # one sentence: why it was not stored
    load_before: tuple[float, int] = (0.0, 1)
    runs: dict[str, dict] = field(default_factory=dict)  # figure -> seconds, clean, spread
    skipped: dict[str, str] = field(default_factory=dict)  # weight type -> why not measured
    image_note: str | None = None  # why the image encode was not measured or not stored

    def to_dict(self) -> dict:
        p = self.probe
        return {
            "machine": p.machine,
            "build": p.build,
            "stored": self.stored,
            "refused": self.refused,
            "disturbed": p.disturbed,
            "duration_s": round(p.duration_s, 2),
            "spread": round(p.spread, 4),
            "load_before": {"load_1min": round(self.load_before[0], 2), "cpus": self.load_before[1]},
            "devices": [{
                "device": "cpu",
                "n_threads": p.n_threads,
                "n_ubatch": p.n_ubatch,
                "weight_types": {
                    k.weight_type: {
                        "decode_ns_per_weight": round(k.decode_s_per_weight * 1e9, 6),
                        "prefill_ns_per_weight": round(k.prefill_s_per_weight * 1e9, 6),
                        "decode_gbs": round(k.decode_gbs, 2),
                        "bound": k.bound,
                        "decode_spread": round(k.decode_spread, 4),
                        "prefill_spread": round(k.prefill_spread, 4),
                        "disturbed": k.disturbed,
                    } for k in p.kernels},
                "attention": [{
                    "flash_attn": a.flash_attn,
                    "decode_ns_per_unit": round(a.decode_s_per_unit * 1e9, 6),
                    "decode_ns_per_compute_unit": (None if a.decode_s_per_compute_unit is None
                                                   else round(a.decode_s_per_compute_unit * 1e9, 6)),
                    "prefill_ns_per_flop": round(a.prefill_s_per_flop * 1e9, 6),
                    "spread": round(a.spread, 4),
                } for a in p.attention],
                "fixed": {"token_us": round(p.fixed.token_s * 1e6, 3), "layer_us": round(p.fixed.layer_s * 1e6, 3),
                          "vocab_ns": round(p.fixed.vocab_s * 1e9, 4),
                          "vocab_large_ns": (None if p.fixed.vocab_large_s is None
                                             else round(p.fixed.vocab_large_s * 1e9, 4)),
                          "spread": round(p.fixed.spread, 4)},
                "not_measured": self.skipped,
                # MoE prompts: MUL_MAT_ID's cost per routed multiply-add, in dense ones
                "expert_costs": dict(p.expert_costs),
                # llama.cpp's repack/AMX buffers in use (false where runtime/amx.py turned them off)
                "extra_buffers": p.extra_buffers,
                "image_encode": _encode_dict(p.encode),
            }, *(_gpu_dict(g) for g in p.gpus)],
            "runs": self.runs,
            "notes": list(p.notes),
        }


def _gpu_dict(g) -> dict:
    """A GPU's entry of `rooflight probe --json`'s devices: the constants it measured."""
    def eff(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    return {"device": g.device, "name": g.name, "backend": g.backend,
            "decode_efficiency": eff(g.decode_efficiency), "layer_overhead_us": round(g.layer_overhead_s * 1e6, 3),
            "prefill_efficiency_float": eff(g.prefill_efficiency_float),
            "prefill_efficiency_quant": eff(g.prefill_efficiency_quant),
            "weight_types": {wt: {"decode_efficiency": eff(e)} for wt, e in g.decode_by_type},
            "h2d_gbs": None if g.h2d_gbs is None else round(g.h2d_gbs, 2),
            "moe_layer_overhead_us": None if g.moe_layer_overhead_s is None else round(g.moe_layer_overhead_s * 1e6, 3),
            "moe_expert_overhead_tokens": (None if g.moe_expert_overhead_tokens is None
                                           else round(g.moe_expert_overhead_tokens, 1)),
            "spread": round(g.spread, 4), "disturbed": g.disturbed}


def _encode_dict(e: EncodeFigure | None) -> dict | None:
    if e is None:
        return None
    return {"file_type": e.file_type, "gflops": round(e.flops_per_s / 1e9, 3), "encode_ms": round(e.encode_s * 1e3, 3),
            "encode_gflop": round(e.encode_flops / 1e9, 4), "spread": round(e.spread, 4), "disturbed": e.disturbed}


class _Clock:
    """The probe's time budget and progress (fraction done, message, seconds left)."""

    def __init__(self, budget_s: float, steps: int, progress, check_cancel) -> None:
        self.t0 = time.perf_counter()
        self.budget_s = budget_s
        self.steps, self.done = steps, 0
        self._progress = progress
        self._check = check_cancel

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def left(self) -> float:
        return self.budget_s - self.elapsed

    def check(self) -> None:
        if self._check is not None:
            self._check()

    def step(self, message: str) -> None:
        self.check()
        frac = self.done / max(self.steps, 1)
        # time left: the pace so far, never past the budget
        eta = self.elapsed / frac * (1 - frac) if frac > 0 else self.budget_s
        if self._progress is not None:
            self._progress(frac, message, max(0.0, min(eta, self.left)))
        self.done += 1


@functools.cache
def _has_op_offload() -> bool:
    import inspect

    import llama_cpp

    return "op_offload" in inspect.signature(llama_cpp.Llama.__init__).parameters


class _Model:
    """A loaded probe model: the Llama object and what its weights are."""

    def __init__(self, path: Path, n_threads: int, n_ctx: int, flash_attn: bool, n_ubatch: int,
                 load_kwargs: dict | None = None) -> None:
        """load_kwargs: Llama() arguments that replace the CPU's (the GPU half: a RunConfig's,
        all layers on one GPU; runtime/probe_gpu.py)."""
        import contextlib
        import io

        from rooflight.gguf import load_model_spec

        self.spec = load_model_spec(str(path))
        self._closed = False
        # the CPU's kernels: on a GPU build llama.cpp would otherwise run the prompts' matmuls
        # on the GPU (op_offload works with no layers there); a llama-cpp-python older than the
        # option has no op_offload either
        no_offload: dict[str, Any] = {"op_offload": False} if _has_op_offload() else {}
        with contextlib.redirect_stderr(io.StringIO()):
            try:
                args: dict[str, Any] = dict(
                    n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, n_batch=n_ubatch,
                    n_ubatch=n_ubatch, n_gpu_layers=0, flash_attn=flash_attn, **no_offload)
                args.update(load_kwargs or {})
                self.llm = amx.llama_class()(model_path=str(path), verbose=False, seed=0, **args)
            except (ValueError, RuntimeError) as exc:
                raise OperationFailedError(f"llama.cpp could not load the probe model {path.name}: {exc}") from exc

    def close(self) -> None:
        # idempotent: a deferred part may be closed by its finish and by the loop's cleanup
        if not self._closed:
            self._closed = True
            self.llm.close()

    def tokens(self, n: int, offset: int = 0) -> list[int]:
        # ordinary tokens (the byte range), cycled: the text does not matter, the count does
        return [3 + (offset + i) % 250 for i in range(n)]

    def decode(self, n: int, max_s: float = 2 * MIN_RUN_S) -> float:
        """Seconds per token for n tokens, generated as measure() and chats do: eval one
        token, sample from its logits. Near the end of the context the cache is rolled
        back to where the run began (llama-cpp-python drops cells past n_tokens), so the
        positions stay within a window of the start."""
        llm = self.llm
        base = llm.n_tokens
        limit = min(llm.n_ctx() - 1, base + DECODE_WINDOW)
        token = 3
        t0 = time.perf_counter()
        done = 0
        # a stalled machine can make a token take 50x its time: stop at max_s, not at n
        while done < n and (done < 4 or time.perf_counter() - t0 < max_s):
            if llm.n_tokens >= limit:
                llm.n_tokens = base
            llm.eval([token])
            token = llm.sample(temp=0.8, top_k=40, top_p=0.95, min_p=0.05)
            done += 1
        return (time.perf_counter() - t0) / done


@dataclass
class _Runner:
    clock: _Clock
    threshold: float
    runs: dict[str, dict]
    repeats: int = REPEATS
    figures: int = 1  # how many figures the probe measures in all (for budget shares)
    measured: int = 0
    # wall time of the last run: a run that would end past the budget is not begun (the
    # budget is the whole probe's: one last run begun with 0.1 s left made it 30.3 s)
    last_run_s: float = 0.0

    def measure(self, name: str, fn: Callable[[], float], repeats: int | None = None,
                prior: Repeats | None = None, expect_s: float = 0.0, continued: bool = False) -> Repeats:
        """Run fn until `repeats` (default: the runner's) clean runs agree (Repeats: the
        closest of them within MAX_CLEAN_SPREAD), at most 3 x repeats tries. Each figure gets
        an equal share of the budget still left, so a busy machine cannot spend it all on the
        first figures: past two runs (one when far over its share, if continued) it stops at its share.
        prior: runs of the same figure measured earlier, which these continue (a deferred
        part: _Deferred); then at least one more run is tried, and the budget running out
        leaves the figure on the prior runs. expect_s: how long a first run will take, where
        a like figure says (else the last run's time stands for it). continued: the figure's
        last runs come later (a _Deferred part), so its own slot may stop at one run when far
        over its share; a figure nothing continues takes a second run while the budget lasts,
        as one run is no figure (on a slow 2-core VM the MoE prompts were each cut to one run
        by shares counted for types the budget never reached, and all three were dropped)."""
        secs: list[float] = list(prior.seconds) if prior else []
        clean: list[bool] = list(prior.clean) if prior else []
        shares: list[float] = list(self.runs[name]["others_cpu_share"]) if prior else []
        repeats = repeats or self.repeats
        share = self.clock.left / max(1, self.figures - self.measured)
        t0 = time.perf_counter()
        fresh = 0
        while (sum(clean) < repeats or Repeats(tuple(secs), tuple(clean)).spread > MAX_CLEAN_SPREAD
               or (prior is not None and not fresh)) and len(secs) < 3 * repeats:
            spent = time.perf_counter() - t0
            if self.clock.left <= (self.last_run_s if secs else max(self.last_run_s, expect_s)):
                if not secs:
                    raise _OutOfTime(name)
                break
            if fresh and ((len(secs) >= 2 and spent >= share) or (continued and spent >= 2 * share)):
                break
            self.clock.check()
            began = time.perf_counter()
            with Watch() as w:
                value = fn()
            self.last_run_s = time.perf_counter() - began
            window = w.window
            assert window is not None  # set on leaving the with block
            secs.append(value)
            clean.append(window.clean(self.threshold))
            shares.append(window.others_share)
            fresh += 1
        self.measured += 1
        r = Repeats(tuple(secs), tuple(clean))
        self.runs[name] = {"seconds": [round(s, 6) for s in secs], "clean": clean,
                           "others_cpu_share": [round(s, 3) for s in shares],
                           "spread": round(r.spread, 4), "disturbed": r.disturbed, "drifted": r.drifted}
        return r


def _measure_encode(runner: _Runner, folder: Path, n_threads: int, n_ubatch: int) -> tuple[Repeats, float] | str:
    """The image part: (seconds per encode, FLOPs of one encode by estimate/vision.py's
    formula), or why it was not measured."""
    from rooflight.estimate.vision import encode_flops
    from rooflight.runtime.probe_vision import EncodeBench, write_probe_pair

    try:
        lm, proj = write_probe_pair(folder)
        m = _Model(lm, n_threads, 512, True, n_ubatch)
    except (OperationFailedError, ValueError, OSError) as exc:
        return f"not measured: the probe's vision model could not be written or loaded ({exc})"
    try:
        bench = EncodeBench(m.llm, proj)
    except (OperationFailedError, ImportError, AttributeError) as exc:  # a build without mtmd
        m.close()
        return f"not measured: this llama.cpp build could not encode an image ({exc})"
    try:
        n = bench.encodes_for(MIN_RUN_S)
        return runner.measure("image/encode", bench.run(n)), encode_flops(bench.spec)
    except _OutOfTime:
        return OUT_OF_TIME
    except ProbeCancelled:
        raise
    except OperationFailedError as exc:  # an encode mtmd refused: the rest of the probe stands
        return f"not measured: {exc}"
    finally:
        bench.close()
        m.close()


def _encode_result(raw: tuple[Repeats, float] | str | None, keep_disturbed: bool,
                   threshold: float) -> tuple[EncodeFigure | None, str | None]:
    """The figure to store and, when there is none (or it is disturbed), one note why."""
    from rooflight.runtime.probe_vision import PROJECTOR_TYPE

    if raw is None or isinstance(raw, str):
        why = raw or OUT_OF_TIME
        return None, f"Image encode {why}; vision estimates count the encoder's FLOPs."
    runs, flops = raw
    fig = encode_figure(PROJECTOR_TYPE, flops, runs)
    if fig.disturbed and not keep_disturbed:
        return None, (f"Image encode measured, not stored: {_disturbance([runs], threshold)[0]}; "
                      "vision estimates count the encoder's FLOPs.")
    return fig, ("Image encode stored although disturbed (asked for)." if fig.disturbed else None)


@dataclass
class ImageEncodeRun:
    """The image part run alone (probe_image_encode): its figure, why none, its runs."""

    encode: EncodeFigure | None
    note: str | None
    runs: dict[str, dict]


def probe_image_encode(
    n_threads: int, *, n_ubatch: int = 512, busy_threshold: float = DEFAULT_BUSY_THRESHOLD,
    budget_s: float = IMAGE_BUDGET_S, repeats: int = REPEATS, keep_disturbed: bool = False,
) -> ImageEncodeRun:
    """Only the probe's image part, with the same repeats and busy watch (a stored probe
    gains it with dataclasses.replace(probe, encode=...); bench/vision_encode.py uses it)."""
    runs: dict[str, dict] = {}
    runner = _Runner(_Clock(budget_s, 1, None, None), busy_threshold, runs, max(2, repeats))
    with tempfile.TemporaryDirectory(prefix="rooflight-probe-") as tmp:
        raw = _measure_encode(runner, Path(tmp), n_threads, n_ubatch)
    fig, note = _encode_result(raw, keep_disturbed, busy_threshold)
    return ImageEncodeRun(fig, note, runs)


# A 1024-token prompt without flash attention took x1.7-1.85 of one with it on the attention
# model (a 260 MiB-L3 Xeon VM, 2026-12-03: 2.48 / 1.45 s at 16 layers, 1.39 / 0.75 s at 8)
FLASH_OFF_SLOWDOWN = 2.0


def next_step(left_s: float, reserve_s: float, type_s: list[float]) -> str:
    """Whether the next weight type is begun ("type"), left out ("skip"), or begun after the
    image part ("image first"), with left_s of the budget left, reserve_s held for the image
    part (0 once it is measured or not wanted) and type_s the measured types' durations.

    A type takes about what the measured ones took, their lower median (with two, the
    faster: one stall is not the typical type): it is begun only if that much is left before
    the reserve (on a 260 MiB-L3 Xeon a type took 2-4 s, and one begun
    with 2.1 s left ate the image part's slot). The median, not the last type's time: on the
    AMX Xeon VM (2026-12-06) Q4_K's repacked decode model took 5-8 s to load (the VM's first
    touch of fresh memory), its type 10 s against F16's 2, and by the last type's time every
    later type was skipped with 5 s of the budget unused (two types of eleven measured; with
    the plain median of those two, 6.7 s, still two).
    A type may still take what the slowest one took: once that much would reach into the
    reserve, the image part comes first (the caller then asks again with no reserve) and the
    types go on with what is left (MXFP4's load once stalled 4.3 s there with 4.8 s left, and
    the image went unmeasured). The first type is always begun: a probe without one is not
    stored."""
    if not type_s:
        return "type"
    if reserve_s and left_s <= reserve_s + max(type_s):
        return "image first"
    if left_s <= reserve_s + statistics.median_low(type_s):
        return "skip"
    return "type"


def _image_part(runner: _Runner, clock: _Clock, folder: Path, n_threads: int, n_ubatch: int):
    clock.step("image encode (vision projector)")
    return _measure_encode(runner, folder, n_threads, n_ubatch)


def _measure_attention(runner: _Runner, clock: _Clock, path: Path, fa: bool, n_threads: int, n_ubatch: int,
                       repeats: int | None = None, like: list | None = None, tag: str = "") -> tuple[list, list, _Model]:
    """The attention model's decode at a short and a long cache and its ATTN_PROMPT-token
    prompt, flash attention on or off: ([fa, spec, tokens, short, long, prompt] Repeats,
    [(slot, figure, run)] for deferred parts, the open model). repeats: clean runs wanted
    now (default: all but one, the last deferred by the caller). like: flash attention on's
    entry when measuring off: its runs x FLASH_OFF_SLOWDOWN say how long these will take (a
    prompt begun with too little budget left would end past it). tag: the model's name in the
    figures' names and the progress ("gqa": the GQA model)."""
    clock.step(f"attention{' (' + tag.upper() + ')' if tag else ''}, flash attention {'on' if fa else 'off'}")
    m = _Model(path, n_threads, 2048, fa, n_ubatch)
    try:
        n = _tokens_for(m, MIN_RUN_S / 2)

        def prompt() -> float:
            m.llm.reset()
            m.llm.eval(m.tokens(16))
            t0 = time.perf_counter()
            m.llm.eval(m.tokens(ATTN_PROMPT, 16))
            return time.perf_counter() - t0

        def long_decode() -> float:
            m.llm.n_tokens = 16 + ATTN_PROMPT  # back to the end of the prompt (it must come first)
            return m.decode(n)

        name = f"attention{'-' + tag if tag else ''}/fa-{'on' if fa else 'off'}"
        # short resets the cache and prompt fills it for long: deferred in this order too
        parts = [(3, f"{name}/decode-short", _decode_run(m, n)),
                 (5, f"{name}/prompt-{ATTN_PROMPT}", prompt),
                 (4, f"{name}/decode-long", long_decode)]
        entry: list = [fa, m.spec, n, None, None, None]
        for slot, name, run in parts:
            expect = FLASH_OFF_SLOWDOWN * like[slot].value if like is not None else 0.0
            entry[slot] = runner.measure(name, run, repeats=repeats or runner.repeats - 1, expect_s=expect,
                                         continued=repeats is None)
    except BaseException:
        m.close()
        raise
    return entry, parts, m


def decode_layers(ftype: str, llc: int) -> int:
    """Layers of the decode model of a weight type's pure file: its blocks' weights
    DECODE_CACHE_FACTOR x the last-level cache (within DECODE_MIN_BYTES..DECODE_MAX_BYTES)."""
    from rooflight.gguf.synthetic import plan_tensors, tensor_nbytes

    layer_bytes = sum(tensor_nbytes(p.n_elements, p.qtype)
                      for p in plan_tensors(arch="llama", ftype=ftype, n_layer=1, n_vocab=VOCAB_SMALL, pure=True,
                                            **_DECODE_SHAPE)
                      if p.name.startswith("blk."))
    target = min(max(DECODE_MIN_BYTES, DECODE_CACHE_FACTOR * llc), DECODE_MAX_BYTES)
    return max(1, math.ceil(target / layer_bytes))


def _tokens_for(model: _Model, target_s: float = MIN_RUN_S) -> int:
    """Tokens per decode run so a run lasts about target_s, timed on 2 tokens after a 4-token
    prompt that first touches the weights (4 timed tokens cost the whole probe x1.07 of the
    time for the same figures: docs/PROBE_NOTES.md)."""
    model.llm.reset()
    model.llm.eval(model.tokens(4))
    per = model.decode(2)
    return max(DECODE_MIN_TOKENS, min(4096, math.ceil(target_s / max(per, 1e-5))))


def _decode_run(model: _Model, n: int, prefix: int = 4) -> Callable[[], float]:
    """n tokens decoded after `prefix` cached positions. Where the cache already begins with
    the prefix (a run before, _tokens_for's warm-up, an attention prompt), it is rolled back
    to it, as decode() does at the end of its window, instead of evaluated again: that pass
    over the weights took 0.04-0.13 s of a 0.2-0.4 s run of a 512 MiB decode model on the
    project's VM, a tenth of the probe's budget over its types (docs/PROBE_NOTES.md)."""
    wanted = model.tokens(prefix)

    def run() -> float:
        llm = model.llm
        if llm.n_tokens >= prefix and list(llm.input_ids[:prefix]) == wanted:
            llm.n_tokens = prefix  # llama-cpp-python drops the cells past it on the next eval
        else:
            llm.reset()
            llm.eval(wanted)
        return model.decode(n)
    return run


def _prompt_run(model: _Model, n_tokens: int) -> Callable[[], float]:
    """Seconds for one prompt of n_tokens from an empty cache (one micro-batch)."""
    def run() -> float:
        model.llm.reset()
        t0 = time.perf_counter()
        model.llm.eval(model.tokens(n_tokens))
        return time.perf_counter() - t0
    return run


def _measure_prompt(runner: _Runner, name: str, model: _Model, n_tokens: int,
                    repeats: int | None = None, continued: bool = False) -> tuple[Callable[[], float], Repeats]:
    """A one-micro-batch prompt's runs, after a warm-up (first touch of the weights, and the
    repacking of the types ggml-cpu repacks): (the run, for a deferred part, and its Repeats)."""
    model.llm.eval(model.tokens(8))
    run = _prompt_run(model, n_tokens)
    return run, runner.measure(name, run, repeats=repeats, continued=continued)


# the ftype that writes a pure file of a weight type (a K type's _M mix, pure=True)
PURE_FTYPE = {"Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}


def _weights_of(spec, weight_type: str, *, prompt: bool) -> tuple[int, int]:
    """(elements, bytes) of the 2-D weights of one type that a token multiplies; a prompt
    token skips the output matrix and the last block's FFN (both for the last token only:
    estimate/output_rows.py)."""
    from rooflight.estimate.output_rows import multiplies_every_prompt_token

    n = b = 0
    for t in spec.tensors:
        if t.ggml_type.upper() != weight_type or len(t.shape) < 2 or t.name == "token_embd.weight":
            continue
        if prompt and (t.name.startswith("output.") or not multiplies_every_prompt_token(spec, t.name, t.layer)):
            continue
        n += t.n_elements
        b += t.n_bytes
    return n, b


def probe_machine(
    profile,
    *,
    weight_types: tuple[str, ...] | None = None,
    n_threads: int | None = None,
    n_ubatch: int = 512,
    busy_threshold: float = DEFAULT_BUSY_THRESHOLD,
    budget_s: float = BUDGET_S,
    keep_disturbed: bool = False,
    repeats: int = REPEATS,
    progress: Callable[[float, str, float], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
    store=None,
    image: bool = True,
    gpus: bool = True,
) -> ProbeRun:
    """Measure, and store the probe (store/probes.py) when it was measured cleanly or
    keep_disturbed is set. weight_types: a subset of ALL_TYPES (a reduced probe), or all of
    them in another order (probe_defaults.installed_order), measured in the order given;
    repeats: clean runs wanted per figure (at least 2: a spread needs two); store: a
    ProbeStore, None for the user's, False to store nothing. progress(fraction, message,
    seconds left); check_cancel: called between runs, raises to stop (the GUI passes
    Task.raise_if_cancelled); image: measure the image encode too (a second or two);
    gpus: measure each GPU too where the build offloads (runtime/probe_gpu.py, its own budget)."""
    from rooflight.gguf.synthetic import write_model
    from rooflight.store.calibration import machine_key

    types = tuple(t.upper() for t in (weight_types or ALL_TYPES))
    unknown = [t for t in types if t not in ALL_TYPES]
    if unknown:
        from rooflight.errors import BadInputError

        raise BadInputError(f"The probe measures {', '.join(ALL_TYPES)}; not {', '.join(unknown)}.")
    if store is None:  # where it will be stored, before the measuring: a bad folder costs 0 s
        from rooflight.store.paths import data_dir

        data_dir()
    n_threads = n_threads or max(1, profile.cpu.cores or 1)
    load_before = load_now()
    expert_types = [t for t in EXPERT_TYPES if t in types]
    # steps: 4 fixed, 3 attention (MHA, GQA, flash off), 2 per type, the expert prompts, the image
    clock = _Clock(budget_s, 7 + 2 * len(types) + len(expert_types) + image, progress, check_cancel)
    runs: dict[str, dict] = {}
    # figures for the budget shares: 4 fixed, 3 MHA and 3 GQA attention with flash on and 2
    # per type, each measured in two parts (_Deferred), and 3 attention with flash off in one
    runner = _Runner(clock, busy_threshold, runs, max(2, repeats),
                     figures=2 * 4 + 2 * 6 + 3 + 4 * len(types) + len(expert_types) + image)
    skipped: dict[str, str] = {}
    notes: list[str] = []
    llc = last_level_cache_bytes()
    with tempfile.TemporaryDirectory(prefix="rooflight-probe-") as tmp:
        d = Path(tmp)

        def write(name: str, **kw) -> Path:
            return write_model(d / f"{name}.gguf", tiled=True, context_length=4096, **kw)

        fixed_deferred: list[_Deferred] = []
        attn_deferred: list[_Deferred] = []
        try:
            # 1. fixed costs: each figure's last run comes after attention's (_Deferred), its
            # tiny model kept open till then
            fixed_raw: list = [None] * 4  # Repeats of the 1- and 8-layer models, the two vocabularies
            layer_counts = (1, 8)
            tiny = [(f"fixed/{n}-layer", f"tiny{n}", dict(n_layer=n)) for n in layer_counts]
            tiny += [(f"fixed/vocab-{v}", name, dict(n_layer=1, n_vocab=v))
                     for v, name in ((VOCAB_LARGE, "vocab"), (VOCAB_HUGE, "vocab-huge"))]
            vocab_out_weights = VOCAB_LARGE * _TINY_SHAPE["n_embd"]
            for slot, (figure, file_name, shape) in enumerate(tiny):
                clock.step("fixed cost per token and layer" if slot < 2 else "fixed cost per vocabulary entry")
                m = _Model(write(file_name, ftype="F16", **shape, **_TINY_SHAPE), n_threads, 512, True, n_ubatch)
                try:
                    run = _decode_run(m, _tokens_for(m))
                    fixed_raw[slot] = runner.measure(figure, run, repeats=runner.repeats - 1, continued=True)
                except BaseException:
                    m.close()
                    raise
                fixed_deferred.append(_Deferred(fixed_raw, slot, figure, run, m))

            # 2. attention with flash attention on, what every plan uses unless told otherwise
            # (decode short/long, a long prompt); off comes last (4b), after the kernels: on a
            # 260 MiB-L3 Xeon its 1024-token prompts over 16 layers (the cap then) took 8 s of
            # the 30, and Q4_0 and BF16 went unmeasured
            attn_raw: list[list] = []  # [flash_attn, spec, tokens, short, long, prompt]
            attn_path = write("attention", ftype="F16", **attention_shape(llc))
            entry, parts, m = _measure_attention(runner, clock, attn_path, True, n_threads, n_ubatch)
            attn_raw.append(entry)
            attn_deferred += [_Deferred(entry, slot, name, run, m) for slot, name, run in parts]
            gqa_path = write("attention-gqa", ftype="F16", **_ATTN_GQA_SHAPE)
            gqa_raw, parts, m = _measure_attention(runner, clock, gqa_path, True, n_threads, n_ubatch, tag="gqa")
            attn_deferred += [_Deferred(gqa_raw, slot, name, run, m) for slot, name, run in parts]
            _finish_deferred(runner, fixed_deferred)
            _finish_deferred(runner, attn_deferred)  # a slot after their own runs

        except _OutOfTime as exc:
            probe = _empty_probe(profile, n_threads, n_ubatch, clock, notes)
            return _finish(ProbeRun(probe, load_before=load_before, runs=runs, refused=(
                f"Not stored: the {budget_s:.0f} s budget ran out before {exc} could be measured once; "
                "the machine is too busy. Close other programs and measure again.")), progress)
        finally:  # a cancel or error in the fixed costs or attention: their models too
            for part in (*attn_deferred, *fixed_deferred):
                part.model.close()

        # 3. kernels per weight type (a new type is not begun in the image part's last seconds).
        # Each figure's runs are split: all but one in its own slot, the rest in the next
        # type's slot, a second or two later (_Deferred). A slow spell of the machine's memory
        # (shared with other virtual machines) is invisible to the busy watch and slows
        # back-to-back runs alike: on the project's VM it once made one type's decode figure
        # 2x slow with its three runs agreeing. Runs a slot apart disagree instead, and the
        # runner measures on until the runs that agree are the undisturbed ones.
        kernel_raw: list[list] = []  # [type, decode spec, decode Repeats, tokens, prompt spec, prompt Repeats]
        reserve = IMAGE_RESERVE_S if image else 0.0  # 0 once the image part is measured
        encode_raw = None  # the image part's result, once measured
        deferred: list[_Deferred] = []
        expert_raw: list[tuple] | None = None
        # 3b. the MoE prompts come as soon as the dense kernels of their types are measured,
        # before the types that follow them in ALL_TYPES (fewer files use those)
        experts_after = max((types.index(t) for t in expert_types), default=-1)
        type_s: list[float] = []  # how long each measured type took (its slot: models, runs)
        first_prompt: tuple[float, ...] | None = None  # the first measured type's prompt runs

        def experts() -> list[tuple]:
            return _measure_experts(runner, clock, write, expert_types, {r[0] for r in kernel_raw}, n_threads,
                                    n_ubatch, reserve, skipped)
        try:
            for i, wt in enumerate(types):
                if expert_raw is None and i > experts_after:
                    deferred = _finish_decode_part(runner, deferred)  # their models' memory, as below
                    expert_raw = experts()
                ftype = PURE_FTYPE.get(wt, wt)
                step = next_step(clock.left, reserve, type_s)
                if step == "image first":
                    encode_raw = _image_part(runner, clock, d, n_threads, n_ubatch)
                    reserve = 0.0
                    step = next_step(clock.left, reserve, type_s)
                if step == "skip":
                    skipped[wt] = OUT_OF_TIME
                    clock.done += 2
                    continue
                type_began = clock.elapsed
                clock.step(f"{wt} matrix-vector (decode)")
                # The previous type's last runs (_Deferred) come before this type's model is
                # written (decode: its prompt's runs came between) and loaded (prompt: the write
                # comes between), and each closes its model: this type's write and load then
                # take the memory those held. On the AMX Xeon VM (2026-12-06) touching fresh
                # memory cost 5-8 s for a repacked 533 MiB decode model, its load after a close
                # 0.4 s; a 533 MiB write after one 0.3-1.3 s, beside the open models up to 3.2
                deferred = _finish_decode_part(runner, deferred)
                try:
                    dec_path = write(f"decode-{wt}", n_layer=decode_layers(ftype, llc), ftype=ftype, pure=True,
                                     **_DECODE_SHAPE)
                    _finish_deferred(runner, deferred)
                    dec_model = _Model(dec_path, n_threads, 512, True, n_ubatch)
                except (OperationFailedError, ValueError, OSError) as exc:
                    skipped[wt] = f"not measured: its model could not be written or loaded (the build or the writer may not support the type): {exc}"
                    clock.done += 1
                    continue
                _unlink_mapped(dec_path)
                open_models = [dec_model]
                try:
                    n = _tokens_for(dec_model)
                    dec_run = _decode_run(dec_model, n)
                    dec = runner.measure(f"kernel/{wt}/decode", dec_run, repeats=runner.repeats - 1, continued=True)
                    clock.step(f"{wt} matrix-matrix (prompt)")
                    pp_path = write(f"prefill-{wt}", n_layer=prefill_layers(first_prompt), ftype=ftype, pure=True,
                                    **_PREFILL_SHAPE)
                    pp_model = _Model(pp_path, n_threads, 2 * n_ubatch, True, n_ubatch)
                    open_models.append(pp_model)
                    _unlink_mapped(pp_path)
                    pp_run, pp = _measure_prompt(runner, f"kernel/{wt}/prefill-{n_ubatch}", pp_model, n_ubatch,
                                                 repeats=runner.repeats - 1, continued=True)
                except BaseException as exc:  # out of time, or cancelled: this type's models go
                    for model in open_models:
                        model.close()
                    if not isinstance(exc, _OutOfTime):
                        raise
                    skipped[wt] = OUT_OF_TIME
                    clock.done += 2 - len(open_models)  # the prompt step, if it was not reached
                    continue
                type_s.append(clock.elapsed - type_began)
                first_prompt = first_prompt or pp.seconds
                entry = [wt, dec_model.spec, dec, n, pp_model.spec, pp]
                kernel_raw.append(entry)
                deferred = [_Deferred(entry, _DECODE_SLOT, f"kernel/{wt}/decode", dec_run, dec_model),
                            _Deferred(entry, 5, f"kernel/{wt}/prefill-{n_ubatch}", pp_run, pp_model)]

            if expert_raw is None:  # the expert types were the last ones
                deferred = _finish_decode_part(runner, deferred)
                expert_raw = experts()
            _finish_deferred(runner, deferred)  # the last type's, a slot later
        finally:
            for part in deferred:
                part.model.close()

        # 4. image encode through a generated projector (last, unless the types' durations
        # made it come earlier: the estimates of text models, which every user has, come
        # first when time is short)
        if image and encode_raw is None and clock.left >= IMAGE_MIN_LEFT_S:
            encode_raw = _image_part(runner, clock, d, n_threads, n_ubatch)

        # 4b. attention with flash attention off: only plans told "off" use it (the table
        # prices their attention when the budget ran out first). Its figure is kept only if
        # measured cleanly: a part the budget cut short, or a busy spell, leaves it to the
        # table rather than refusing the whole probe
        off = "attention (flash attention off)"
        try:
            # its runs take up to FLASH_OFF_SLOWDOWN x what flash attention on's took: not
            # begun if they cannot end in time
            if clock.left <= FLASH_OFF_SLOWDOWN * runner.repeats * sum(r.value for r in attn_raw[0][3:]):
                raise _OutOfTime(off)
            entry, _, m = _measure_attention(runner, clock, attn_path, False, n_threads, n_ubatch,
                                             repeats=runner.repeats, like=attn_raw[0])
            m.close()
            if any(r.disturbed for r in entry[3:]) and not keep_disturbed:
                short = any(len(r.seconds) < 2 for r in entry[3:])
                skipped[off] = OUT_OF_TIME if short else (
                    f"measured, not stored: {_disturbance(list(entry[3:]), busy_threshold)[0]}")
            else:
                attn_raw.append(entry)
        except _OutOfTime:
            skipped[off] = OUT_OF_TIME

        # 5. the GPU half, on a clock of its own (the CPU's 30 s are the CPU's)
        gpu_figures, gpu_notes = _gpu_half(profile, gpus, write, n_threads, n_ubatch, busy_threshold, runs, skipped,
                                           clock, progress, check_cancel)
        notes += gpu_notes or []
        gpu_half = gpu_notes is not None

    # ---- arithmetic (pure; estimate/probe.py) ----
    per_layers, (vocab_run, huge_run) = fixed_raw[:2], fixed_raw[2:]
    attn_runs = [r for raw in (*attn_raw, gqa_raw) for r in raw[3:]]

    def fixed_with(s_per_weight: float) -> FixedCosts:
        # the vocabularies' output matrices are weights, not fixed cost: priced with the F16
        # decode figure once known (tiny: 2M and 17M elements), a first pass without
        return fixed_costs(
            layer_counts, (per_layers[0].value, per_layers[1].value), (VOCAB_SMALL, VOCAB_LARGE),
            (per_layers[0].value, vocab_run.value), output_s=s_per_weight * vocab_out_weights,
            spread=max(r.spread for r in fixed_raw),
            huge=(VOCAB_HUGE, huge_run.value, s_per_weight * (VOCAB_HUGE - VOCAB_LARGE) * _TINY_SHAPE["n_embd"]))

    fixed = fixed_with(0.0)
    kernels, attention = _derive(fixed, attn_raw, kernel_raw, n_ubatch, n_threads, profile.cpu.isa, gqa_raw)
    f16 = next((k for k in kernels if k.weight_type == "F16"), None)
    if f16 is not None:
        fixed = fixed_with(f16.decode_s_per_weight)
        kernels, attention = _derive(fixed, attn_raw, kernel_raw, n_ubatch, n_threads, profile.cpu.isa, gqa_raw)

    fixed_disturbed = any(r.disturbed for r in fixed_raw)
    attn_disturbed = any(r.disturbed for r in attn_runs)
    disturbed_types = [k.weight_type for k in kernels if k.disturbed]

    def runs_of(weight_types) -> list[Repeats]:  # the decode and prompt runs of these types
        return [r for raw in kernel_raw if raw[0] in weight_types for r in (raw[2], raw[5])]
    kernel_runs = runs_of(disturbed_types)
    refused = _refusal([("the fixed costs", fixed_raw), ("attention", attn_runs)], busy_threshold)
    if disturbed_types and not keep_disturbed and refused is None:
        # what was measured cleanly is kept; the disturbed kernels fall back to the table
        cause = _disturbance(kernel_runs, busy_threshold)
        for wt in disturbed_types:
            skipped[wt] = f"measured, not stored: {cause[0]}"
        notes.append(f"Not stored: {', '.join(disturbed_types)}, because {cause[0]}.")
        kernels = tuple(k for k in kernels if not k.disturbed)
        if not kernels:
            refused = _refusal([("every weight type's kernels", kernel_runs)], busy_threshold)
    # priced on the dense figures kept (an expert type whose dense kernel was dropped is too)
    expert_costs = _expert_costs([r for r in expert_raw if any(k.weight_type == r[0] for k in kernels)],
                                 profile, kernels, attention, fixed, n_threads, n_ubatch, keep_disturbed, skipped,
                                 busy_threshold)
    no_kernels = not kernels
    if no_kernels and not disturbed_types:
        # fixed costs alone price nothing: not a probe to stand on, even if asked
        refused = ("Not stored: no weight type was measured (the time budget ran out; the machine was busy). "
                   "Close other programs and measure again.")
    encode, image_note = _encode_result(encode_raw, keep_disturbed, busy_threshold) if image else (None, None)
    if image_note:
        notes.append(image_note)
    # the encode figure carries its own disturbed mark: it prices no text model's tokens
    disturbed = fixed_disturbed or attn_disturbed or any(k.disturbed for k in kernels)
    drift_note = _drift_note([*fixed_raw, *attn_runs, *runs_of({k.weight_type for k in kernels})])
    if drift_note and not refused:
        notes.append(drift_note)
    if (busy_note := _others_note(runs, busy_threshold)) is not None:
        notes.append(busy_note)
    if refused and keep_disturbed and not no_kernels:
        notes.append(f"Stored although disturbed (asked for): {refused.removeprefix('Not stored: ')}")
    elif disturbed and keep_disturbed:
        notes.append(f"Stored although disturbed (asked for): the {', '.join(disturbed_types)} kernels, because "
                     f"{_disturbance(kernel_runs, busy_threshold)[0]}.")
    spreads = [fixed.spread] + [a.spread for a in attention] + [max(k.decode_spread, k.prefill_spread) for k in kernels]
    probe = MachineProbe(
        machine=machine_key(profile), build=llama_build(), n_threads=n_threads, n_ubatch=n_ubatch,
        kernels=kernels, attention=attention, fixed=fixed, spread=max(spreads),
        disturbed=disturbed, created_at=time.time(), duration_s=clock.elapsed, notes=tuple(notes), encode=encode,
        expert_costs=expert_costs, extra_buffers=amx.loads_use_extra_buffers(), gpus=gpu_figures, gpu_half=gpu_half,
        out_of_time=_out_of_time(skipped, image_note, profile),
    )
    result = ProbeRun(probe, load_before=load_before, runs=runs, skipped=skipped, image_note=image_note)
    if refused and (no_kernels or not keep_disturbed):
        result.refused = refused
    elif store is not False:
        from rooflight.store.probes import ProbeStore

        s = store or ProbeStore()
        try:
            s.put(probe)
        finally:
            if store is None:
                s.close()
        result.stored = True
    return _finish(result, progress)


# why a GPU has no figures on a build that cannot offload (ProbeRun.skipped["GPU"])
NO_GPU_BUILD = ("not measured: the installed llama.cpp build runs on the CPU only; with the GPU build "
                "(This machine, Get the GPU build) the probe measures each GPU too")


def _gpu_half(profile, wanted: bool, write, n_threads: int, n_ubatch: int, threshold: float, runs: dict,
              skipped: dict[str, str], clock: _Clock, progress, check_cancel) -> tuple[tuple, list[str] | None]:
    """Each GPU's figures where the build offloads (runtime/probe_gpu.py), on GPU_BUDGET_S of
    its own, and its notes (None: the GPU half did not run); its progress fills what the CPU
    half left of the bar."""
    if not wanted or not profile.gpus:
        return (), None
    from rooflight.runtime.loader import gpu_offload_supported
    from rooflight.runtime.probe_gpu import GPU_BUDGET_S, GPU_TYPES, probe_gpus

    if profile.backend == "cpu" or not gpu_offload_supported():
        skipped["GPU"] = NO_GPU_BUILD
        return (), None
    base = clock.done / max(clock.steps, 1)

    def gpu_progress(frac: float, message: str, left: float) -> None:
        if progress is not None:
            progress(base + (1 - base) * frac, message, left)

    # per GPU: the tiny pair, each type, the MoE pair, the MoE prompt; and the copy rate, on the first GPU
    steps = len(profile.offload_gpus) * (3 + len(GPU_TYPES)) + 1
    gpu_clock = _Clock(GPU_BUDGET_S * len(profile.offload_gpus), steps, gpu_progress, check_cancel)
    # figures for the budget shares: 2 tiny decodes and a tiny prompt, a decode and a prompt per
    # type, 2 tiny MoE decodes and a MoE prompt, per GPU; the copy rate's prompt
    runner = _Runner(gpu_clock, threshold, runs, figures=len(profile.offload_gpus) * (6 + 2 * len(GPU_TYPES)) + 1)
    return probe_gpus(profile, runner, write, n_threads, n_ubatch, skipped)


def _finish(result: ProbeRun, progress) -> ProbeRun:
    if progress is not None:
        progress(1.0, "done" if result.stored else "not stored", 0.0)
    return result


def _empty_probe(profile, n_threads: int, n_ubatch: int, clock: _Clock, notes: list[str]) -> MachineProbe:
    from rooflight.store.calibration import machine_key

    return MachineProbe(machine=machine_key(profile), build=llama_build(), n_threads=n_threads, n_ubatch=n_ubatch,
                        kernels=(), attention=(), fixed=FixedCosts(0.0, 0.0, 0.0), spread=0.0, disturbed=True,
                        created_at=time.time(), duration_s=clock.elapsed, notes=tuple(notes))


def _disturbance(runs: list[Repeats], threshold: float) -> tuple[str, str]:
    """(what disturbed these runs, what to do): other programs' CPU use, which the busy watch
    sees, or, with every run clean, the machine's own speed drifting between runs (a shared
    VM's memory, a CPU changing clocks), which closing programs does not help; or, with one
    clean run and no other, the budget running out before a second (a figure stands on two:
    on a slow 2-core VM the MoE prompts got one run each, which had been blamed on others)."""
    if any(sum(r.clean) < 2 and not all(r.clean) for r in runs):
        return (f"other programs used more than {threshold:.0%} of the CPU during the runs",
                "Close other programs and measure again.")
    if any(sum(r.clean) < 2 for r in runs):
        return (f"{_RAN_OUT} after one run (a figure stands on two that agree)",
                "Measure again in a quieter minute.")
    worst = max((r.spread for r in runs if r.disturbed), default=0.0)
    return (f"the runs disagreed by up to {worst:.0%} (more than the {MAX_STORED_SPREAD:.0%} a stored figure may) "
            "with nothing else running: this machine's speed drifted between runs", "Measure again in a quieter minute.")


def _others_note(runs: dict[str, dict], threshold: float) -> str | None:
    """One sentence when other programs used the CPU during a typical run (the median of
    every run's share, as the busy watch measured it): more than half of what a clean run
    allows. Measured during the runs, not read off the load average, which still counts
    a chat or a probe of this app that ended a minute before."""
    shares = [s for r in runs.values() for s in r["others_cpu_share"]]
    if not shares or statistics.median(shares) <= threshold / 2:
        return None
    return (f"Other programs used {statistics.median(shares):.0%} of the CPU during a typical run of the probe "
            f"(a clean run allows {threshold:.0%}).")


def _drift_note(runs: list[Repeats]) -> str | None:
    """One sentence for the figures stored although their clean runs disagreed (the
    machine's own drift, Repeats.drifted), or None."""
    drifted = [r for r in runs if r.drifted]
    if not drifted:
        return None
    return (f"This machine's speed drifted between runs with nothing else running: {len(drifted)} of the "
            f"{len(runs)} figures' runs disagreed by up to {max(r.spread for r in drifted):.0%}, so they are "
            "stored with that spread, which widens every range that stands on them.")


def _refusal(groups: list[tuple[str, list[Repeats]]], threshold: float) -> str | None:
    """Why the probe cannot be stored, from the parts that spoil it (the fixed costs and
    attention, which every kernel figure is derived from; or every kernel), each with its runs;
    None when none of them was disturbed."""
    bad = [(name, [r for r in runs if r.disturbed]) for name, runs in groups]
    bad = [(name, runs) for name, runs in bad if runs]
    if not bad:
        return None
    why, advice = _disturbance([r for _, runs in bad for r in runs], threshold)
    return f"Not stored: {' and '.join(name for name, _ in bad)} could not be measured cleanly: {why}. {advice}"


def _unlink_mapped(path: Path) -> None:
    """Remove a model file llama.cpp has mapped: the mapping stays valid (POSIX), so the disk
    holds no more than the models in use. Windows refuses while it is mapped: the file then
    goes with the probe's temporary folder."""
    with contextlib.suppress(OSError):
        path.unlink()


@dataclass
class _Deferred:
    """The rest of a figure's runs, taken a slot later: entry[slot] holds its Repeats so far."""

    entry: list
    slot: int
    name: str
    run: Callable[[], float]
    model: _Model


_DECODE_SLOT = 2  # a weight type's decode Repeats in its kernel_raw entry


def _finish_decode_part(runner: _Runner, parts: list[_Deferred]) -> list[_Deferred]:
    """The deferred decode part's runs (its model closed: its memory goes to what is loaded
    next); the other parts, still to be finished."""
    _finish_deferred(runner, [p for p in parts if p.slot == _DECODE_SLOT])
    return [p for p in parts if p.slot != _DECODE_SLOT]


def _finish_deferred(runner: _Runner, parts: list[_Deferred]) -> None:
    """Each part's remaining runs (at least one), then its model is closed; the budget running
    out leaves a figure on the runs of its own slot."""
    try:
        for part in parts:
            part.entry[part.slot] = runner.measure(part.name, part.run, prior=part.entry[part.slot])
    finally:
        for part in parts:
            part.model.close()
        parts.clear()


def _measure_experts(runner: _Runner, clock: _Clock, write, expert_types, measured: set[str],
                     n_threads: int, n_ubatch: int, reserve: float, skipped: dict[str, str]) -> list[tuple]:
    """One micro-batch's prompt through a small MoE model of each expert type whose dense
    kernels were measured: [(type, spec, Repeats)]."""
    out: list[tuple] = []
    for wt in expert_types:
        key = f"{wt} experts"
        if wt not in measured:
            clock.done += 1
            continue
        if clock.left <= reserve:
            skipped[key] = OUT_OF_TIME
            clock.done += 1
            continue
        clock.step(f"{wt} MoE experts (prompt)")
        ftype = PURE_FTYPE.get(wt, wt)
        try:
            path = write(f"experts-{wt}", ftype=ftype, pure=True, **_EXPERT_SHAPE)
            m = _Model(path, n_threads, 2 * n_ubatch, True, n_ubatch)
        except (OperationFailedError, ValueError, OSError) as exc:
            skipped[key] = f"not measured: its model could not be written or loaded (the build or the writer may not support the type): {exc}"
            continue
        try:
            out.append((wt, m.spec, _measure_prompt(runner, f"experts/{wt}/prefill-{n_ubatch}", m, n_ubatch)[1]))
        except _OutOfTime:
            skipped[key] = OUT_OF_TIME
        finally:
            m.close()
            path.unlink(missing_ok=True)
    return out


def _expert_costs(expert_raw, profile, kernels, attention, fixed, n_threads: int, n_ubatch: int,
                  keep_disturbed: bool, skipped: dict[str, str], threshold: float) -> tuple[tuple[str, float], ...]:
    """Each measured MoE prompt's MUL_MAT_ID cost (estimate/probe.expert_cost), priced by the
    estimator itself on this probe's dense figures, as every estimate will be."""
    from rooflight.estimate import Calibration, Wishes, plan
    from rooflight.estimate.probe import expert_cost

    costs: list[tuple[str, float]] = []
    for wt, spec, runs in expert_raw:
        if runs.disturbed and not keep_disturbed:
            skipped[f"{wt} experts"] = f"measured, not stored: {_disturbance([runs], threshold)[0]}"
            continue

        def priced_s(cost: float, wt=wt, spec=spec) -> float:
            provisional = MachineProbe(machine="", build="", n_threads=n_threads, n_ubatch=n_ubatch, kernels=kernels,
                                       attention=attention, fixed=fixed, spread=0.0, disturbed=False,
                                       expert_costs=((wt, cost),))
            w = Wishes(n_ctx=2 * n_ubatch, n_gpu_layers=0, n_threads=n_threads, flash_attn="on", n_batch=n_ubatch,
                       n_ubatch=n_ubatch, prompt_tokens=n_ubatch, gen_tokens=1)
            perf = plan(spec, profile, w, calibration=Calibration(probe=provisional)).performance
            return n_ubatch / perf.prefill_tok_s

        try:
            costs.append((wt, round(expert_cost(runs.value, priced_s(1.0), priced_s(2.0)), 3)))
        except (ValueError, RooflightError) as exc:  # the rest of the probe stands without it
            skipped[f"{wt} experts"] = f"measured, not priced: {exc}"
    return tuple(costs)


def _derive(fixed: FixedCosts, attn_raw, kernel_raw, n_ubatch: int, n_threads: int, isa: tuple[str, ...],
            gqa_raw: list | None = None):
    """Figures from the raw runs: attention needs the F16 prompt kernel to subtract the
    attention model's weights, the kernels need attention and fixed costs to subtract theirs;
    one pass with attention taken as zero for the kernels' tiny share, then the real one.
    gqa_raw: the GQA model's runs, which split flash attention's decode figure in two
    (split_decode_cost)."""
    from rooflight.estimate.config import RunConfig
    from rooflight.estimate.cpu_attention import AttentionUnits, cpu_attention_split
    from rooflight.estimate.perf import prefill_attention_flops

    def cfg(fa: bool) -> RunConfig:
        return RunConfig(n_ctx=2048, n_gpu_layers=0, n_threads=n_threads, flash_attn=fa,
                         n_batch=n_ubatch, n_ubatch=n_ubatch)

    def other_decode(spec, n_tokens_before: float, att: AttentionCost | None) -> float:
        units = cpu_attention_split(spec, cfg(True), n_tokens_before, isa)
        return (fixed.token_s + fixed.layer_s * spec.n_layer + fixed.vocab_cost_s(spec.n_vocab)
                + (att.decode_s(units) if att else 0.0))

    def decode_span(fa: bool, spec, n: int, short, long) -> tuple[float, AttentionUnits]:
        """An attention model's seconds and units between its long and its short cache."""
        units = (cpu_attention_split(spec, cfg(fa), 16 + ATTN_PROMPT + min(n, 256) / 2, isa)
                 - cpu_attention_split(spec, cfg(fa), 4 + min(n, 256) / 2, isa))
        return long.value - short.value, units

    def kernels_with(att_on: AttentionCost | None) -> tuple[KernelFigure, ...]:
        out = []
        for wt, dspec, dec, dec_n, pspec, pp in kernel_raw:
            dw, db = _weights_of(dspec, wt, prompt=False)
            pw, _ = _weights_of(pspec, wt, prompt=True)
            pp_attn = (att_on.prefill_s_per_flop * prefill_attention_flops(pspec, 0, n_ubatch, n_ubatch)) if att_on else 0.0
            out.append(kernel_figure(
                wt, decode_token_s=dec.value, decode_other_s=other_decode(dspec, 4 + min(dec_n, 256) / 2, att_on),
                decode_weights=dw, decode_bytes=db, prefill_s=pp.value,
                prefill_other_s=fixed.layer_s * pspec.n_layer + pp_attn, prefill_weights=pw,
                prompt_tokens=n_ubatch, decode_spread=dec.spread, prefill_spread=pp.spread,
                disturbed=dec.disturbed or pp.disturbed))
        return classify_bounds(tuple(out))

    kernels = kernels_with(None)
    f16 = next((k for k in kernels if k.weight_type == "F16"), None)
    costs: list[AttentionCost] = []
    for fa, spec, n, short, long, pp in attn_raw:
        pw, _ = _weights_of(spec, "F16", prompt=True)
        weights_s = (f16.prefill_s_per_weight * pw * ATTN_PROMPT) if f16 else 0.0
        n_ub = -(-ATTN_PROMPT // n_ubatch)
        span = decode_span(fa, spec, n, short, long)
        cost = attention_cost(
            fa, decode_short_s=0.0, decode_long_s=span[0], units_short=0.0, units_long=span[1].total,
            prefill_s=pp.value, prefill_other_s=weights_s + fixed.layer_s * spec.n_layer * n_ub,
            prefill_flops=prefill_attention_flops(spec, 16, ATTN_PROMPT, n_ubatch),
            spread=max(short.spread, long.spread, pp.spread))
        if fa and gqa_raw is not None:
            _, gspec, gn, gshort, glong, _ = gqa_raw
            cost = split_decode_cost(cost, span, decode_span(fa, gspec, gn, gshort, glong))
            cost = replace(cost, spread=max(cost.spread, gshort.spread, glong.spread))
        costs.append(cost)
    attention = tuple(costs)
    att_on = next((a for a in attention if a.flash_attn), None)
    return kernels_with(att_on), attention
