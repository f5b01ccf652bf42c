"""The GPU half of `rooflight probe`: time generated models on each GPU, all layers offloaded.

On a build that offloads (CUDA, ROCm, Vulkan, SYCL, Metal), for each GPU the plan can name:
two tiny models of 1 and TINY_DEEP_LAYERS layers (the cost per layer), and per weight type
of GPU_TYPES a model of an 8B model's layer width and about GPU_MODEL_BYTES (decode, and one
micro-batch prompt); last, if the budget leaves time, the tiny pair again with routed experts
(what a MoE block costs beyond a dense one) and a micro-batch on blocks of Qwen3-30B-A3B's
proportions (what a MoE prompt's expert matmuls cost beyond their multiply-adds). The models
are loaded as a plan loads them (RunConfig.runtime_kwargs through runtime/device_map.py: every
layer on that GPU) and timed with the CPU half's runner (repeats, the busy watch, the time
budget: runtime/probe.py). estimate/probe_gpu.py turns the times into the GPU's roofline
constants by solving the estimator for them.

Not yet run on a real GPU by this project (no GPU was lent to it): bench/gpu_check.py runs it
first when one is (README, "The GPU half of the probe").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rooflight.errors import OperationFailedError
from rooflight.estimate.config import RunConfig
from rooflight.estimate.placement import gpu_name
from rooflight.estimate.probe import Repeats
from rooflight.estimate.probe_gpu import GpuFigures, Timed, derive

GPU_TYPES = ("Q4_K", "F16")  # the quantized figure first: it is the decode constant
GPU_BUDGET_S = 30.0  # the GPU half, each GPU alike, beside the CPU half's 30 s
# An 8B model's layer (Llama 3: 4096 wide, 32 heads on 8 KV heads, 14336 FFN): ~218M weights,
# 123 MB in Q4_K, 436 MB in F16; big enough that a token's reads outweigh its launches
_GPU_SHAPE = dict(n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=14336)
# weights per model: at most this, and a quarter of the GPU's free memory (a 4 GB card: 1 GB)
GPU_MODEL_BYTES = 1 << 30
TINY_DEEP_LAYERS = 32
_TINY_SHAPE = dict(n_embd=64, n_head=2, n_head_kv=2, head_dim=32, n_ff=64)
# The same blocks with routed experts (llama's Mixtral layout: a router, then MUL_MAT_ID over
# the experts chosen): their token-time difference over the dense pair's is the MoE block's
# own fixed cost, which the table cannot give a GPU (published rows disagree by backend)
_TINY_MOE = dict(n_expert=8, n_expert_used=2)
# A MoE prompt: Qwen3-30B-A3B's block (2048 wide, 128 experts of 768, 8 used: 32 tokens per
# expert in a 512-token micro-batch), ~385 MB a block in Q4_K, as many blocks as fit this and
# at least two: llama.cpp runs the last block's FFN for the output rows only, so a one-block
# model's prompt multiplies no expert by the micro-batch (estimate/output_rows.py)
GPU_MOE_SHAPE = dict(arch="qwen3moe", n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_ff=768,
                     n_expert=128, n_expert_used=8)
GPU_MOE_BYTES = 512 << 20
DECODE_PREFIX = 4  # tokens in the cache before a decode run (runtime/probe.py _decode_run)
# The copy rate: a prompt this long on the Q4_K model with no layer on the GPU. Past
# op_offload's 32 tokens every weight matrix is copied to the GPU once per micro-batch, and at
# 128 tokens the copy (1 GiB at PCIe speeds: ~40 ms) outweighs the attention and the other
# work that stays on the CPU, which the table prices there
H2D_PROMPT = 128


def gpu_layers(ftype: str, free_bytes: int, shape: dict | None = None, model_bytes: int | None = None) -> int:
    """Layers of a GPU probe model of this type and shape (default: the dense _GPU_SHAPE, a
    llama): model_bytes (default GPU_MODEL_BYTES) or a quarter of free memory, at least one."""
    from rooflight.gguf.synthetic import MINIMAL_VOCAB_SIZE, plan_tensors, tensor_nbytes

    shape = shape or dict(arch="llama", **_GPU_SHAPE)
    model_bytes = GPU_MODEL_BYTES if model_bytes is None else model_bytes
    # the tensors' sizes (n_expert_used chooses among them, it adds none)
    sized = {k: v for k, v in shape.items() if k != "n_expert_used"}
    per_layer = sum(tensor_nbytes(p.n_elements, p.qtype)
                    for p in plan_tensors(ftype=ftype, n_layer=1, n_vocab=MINIMAL_VOCAB_SIZE, pure=True, **sized)
                    if p.name.startswith("blk."))
    target = min(model_bytes, free_bytes // 4) if free_bytes else model_bytes
    return max(1, math.floor(target / per_layer))


def gpu_config(profile, index: int, n_layer: int, n_threads: int, n_ubatch: int) -> RunConfig:
    """Every layer and the output on GPU `index` (a one-hot tensor split where there are more)."""
    split = None
    if len(profile.offload_gpus) > 1:  # in the plan's GPU order (runtime/device_map.py maps it to llama.cpp's)
        split = tuple(1.0 if g.index == index else 0.0 for g in profile.offload_gpus)
    return RunConfig(n_ctx=2048, n_gpu_layers=n_layer + 1, n_threads=n_threads, flash_attn=True,
                     n_batch=n_ubatch, n_ubatch=n_ubatch, tensor_split=split)


def _prompts_run(model, n_tokens: int) -> Callable[[], float]:
    """Seconds per prompt of n_tokens from an empty cache, averaged over as many prompts as
    make a run last MIN_RUN_S (after a warm-up): a GPU takes a micro-batch in milliseconds,
    shorter than the busy watch's ticks (runtime/probe.py MIN_RUN_S)."""
    from rooflight.runtime.probe import MIN_RUN_S, _prompt_run

    one = _prompt_run(model, n_tokens)
    one()  # warm-up: the first use of the prompt kernels
    count = max(1, math.ceil(MIN_RUN_S / max(one(), 1e-6)))

    def run() -> float:
        return sum(one() for _ in range(count)) / count

    return run


@dataclass
class _GpuRuns:
    """One GPU's timed runs (_measure_gpu), what estimate/probe_gpu.derive solves."""

    tiny: dict[int, Timed] = field(default_factory=dict)  # {layers: tiny model's decode}
    decode: dict[str, Timed] = field(default_factory=dict)  # {type: decode}
    prefill: dict[str, Timed] = field(default_factory=dict)  # {type: prompt}
    offload: Timed | None = None  # the op_offload prompt (the first GPU only)
    short_prompt: Timed | None = None  # the tiny 1-layer model's prompt
    moe: tuple[Timed, Timed] | None = None  # the tiny MoE models' decodes, 1 layer and deep
    moe_prompt: Timed | None = None  # a micro-batch on GPU_MOE_SHAPE's blocks
    repeats: list[Repeats] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why an optional figure was not measured


def probe_gpus(profile, runner, write: Callable[..., Path], n_threads: int, n_ubatch: int,
               skipped: dict[str, str]) -> tuple[tuple[GpuFigures, ...], list[str]]:
    """Each GPU's figures (those the budget reached) and notes on what could not be solved.
    runner: runtime/probe.py's _Runner on the GPU half's clock; write: write_model into the
    probe's folder. A GPU that cannot be measured is named in skipped, with why."""
    from rooflight.runtime.probe import OUT_OF_TIME, _OutOfTime

    figures: list[GpuFigures] = []
    notes: list[str] = []
    for gpu in profile.offload_gpus:
        device = gpu_name(gpu.index)
        try:
            got = _measure_gpu(profile, gpu, runner, write, n_threads, n_ubatch)
        except _OutOfTime:
            skipped[device] = OUT_OF_TIME
            continue
        except (OperationFailedError, ValueError, OSError) as exc:  # a load llama.cpp refused, a write that failed
            skipped[device] = f"not measured: {exc}"
            continue
        fig, why = derive(profile, device, short=got.tiny[1], deep=got.tiny[TINY_DEEP_LAYERS], decode=got.decode,
                          prefill=got.prefill, spread=max(r.spread for r in got.repeats),
                          disturbed=any(r.disturbed for r in got.repeats), offload=got.offload,
                          short_prompt=got.short_prompt, moe=got.moe, moe_prompt=got.moe_prompt)
        notes += got.notes + why
        if fig is None:
            skipped[device] = "not measured: " + (why[-1] if why else "its figures could not be solved")
        else:
            figures.append(fig)
    return tuple(figures), notes


def _measure_gpu(profile, gpu, runner, write: Callable[..., Path], n_threads: int, n_ubatch: int) -> _GpuRuns:
    """One GPU's timed runs. The MoE figures come last and are optional: a budget that runs
    out, or a MoE model llama.cpp will not load there, leaves them None (the latter with a
    note) and the GPU's other figures stand."""
    from rooflight.runtime.device_map import plan_load_kwargs
    from rooflight.runtime.probe import (
        DECODE_WINDOW,
        PURE_FTYPE,
        _decode_run,
        _has_op_offload,
        _Model,
        _OutOfTime,
        _tokens_for,
    )

    device = gpu_name(gpu.index)
    opened: list[_Model] = []

    def load(path: Path, n_layer: int) -> tuple[_Model, RunConfig]:
        cfg = gpu_config(profile, gpu.index, n_layer, n_threads, n_ubatch)
        m = _Model(path, n_threads, cfg.n_ctx, True, n_ubatch, load_kwargs=plan_load_kwargs(cfg, profile))
        opened.append(m)
        return m, cfg

    def decode(name: str, m: _Model, cfg: RunConfig) -> tuple[Timed, Repeats]:
        n = _tokens_for(m)
        r = runner.measure(f"{device}/{name}/decode", _decode_run(m, n, DECODE_PREFIX))
        # priced over the positions the run went through (it rolls back past DECODE_WINDOW)
        return Timed(m.spec, cfg, r.value, DECODE_PREFIX, min(n, DECODE_WINDOW)), r

    got = _GpuRuns()
    tiny, dec, pre, runs = got.tiny, got.decode, got.prefill, got.repeats
    files: dict[str, Path] = {}
    try:
        runner.clock.step(f"{device}: fixed cost per layer")
        for n_layer in (1, TINY_DEEP_LAYERS):
            path = write(f"{device}-tiny{n_layer}", ftype="F16", n_layer=n_layer, **_TINY_SHAPE)
            m, cfg = load(path, n_layer)
            tiny[n_layer], r = decode(f"tiny{n_layer}", m, cfg)
            runs.append(r)
            if n_layer == 1:  # its prompt: what a prompt pays besides layers and weights
                r = runner.measure(f"{device}/tiny1/prefill-{n_ubatch}", _prompts_run(m, n_ubatch))
                runs.append(r)
                got.short_prompt = Timed(m.spec, cfg, r.value, n_ubatch)
        for wt in GPU_TYPES:
            runner.clock.step(f"{device}: {wt} decode and prompt")
            ftype = PURE_FTYPE.get(wt, wt)
            n_layer = gpu_layers(ftype, gpu.free_bytes)
            files[wt] = write(f"{device}-{wt}", ftype=ftype, n_layer=n_layer, pure=True, **_GPU_SHAPE)
            m, cfg = load(files[wt], n_layer)
            dec[wt], r = decode(wt, m, cfg)
            runs.append(r)
            r = runner.measure(f"{device}/{wt}/prefill-{n_ubatch}", _prompts_run(m, n_ubatch))
            runs.append(r)
            pre[wt] = Timed(m.spec, cfg, r.value, n_ubatch)
            m.close()  # ~1 GiB of the GPU's memory, before the next type's
        if gpu.index == profile.offload_gpus[0].index and _has_op_offload() and GPU_TYPES[0] in files:
            runner.clock.step(f"{device}: copy rate of prompts with the weights in RAM")
            cfg = RunConfig(n_ctx=2048, n_gpu_layers=0, n_threads=n_threads, flash_attn=True, n_batch=n_ubatch,
                            n_ubatch=n_ubatch)
            m = _Model(files[GPU_TYPES[0]], n_threads, cfg.n_ctx, True, n_ubatch,
                       load_kwargs={**plan_load_kwargs(cfg, profile), "op_offload": True})
            opened.append(m)
            r = runner.measure(f"{device}/{GPU_TYPES[0]}/offload-prefill-{H2D_PROMPT}", _prompts_run(m, H2D_PROMPT))
            runs.append(r)
            got.offload = Timed(m.spec, cfg, r.value, H2D_PROMPT)
        try:  # last and optional: the GPU's other figures stand without it
            runner.clock.step(f"{device}: fixed cost of a block with experts")
            timed_moe: dict[int, Timed] = {}
            for n_layer in (1, TINY_DEEP_LAYERS):
                path = write(f"{device}-moe{n_layer}", ftype="F16", n_layer=n_layer, **_TINY_SHAPE, **_TINY_MOE)
                m, cfg = load(path, n_layer)
                timed_moe[n_layer], r = decode(f"moe{n_layer}", m, cfg)
                runs.append(r)
            got.moe = (timed_moe[1], timed_moe[TINY_DEEP_LAYERS])
            runner.clock.step(f"{device}: MoE prompt")
            quant = GPU_TYPES[0]
            n_layer = max(2, gpu_layers(PURE_FTYPE.get(quant, quant), gpu.free_bytes, GPU_MOE_SHAPE, GPU_MOE_BYTES))
            path = write(f"{device}-moe-{quant}", ftype=PURE_FTYPE.get(quant, quant), n_layer=n_layer, pure=True,
                         **GPU_MOE_SHAPE)
            m, cfg = load(path, n_layer)
            r = runner.measure(f"{device}/moe-{quant}/prefill-{n_ubatch}", _prompts_run(m, n_ubatch))
            runs.append(r)
            got.moe_prompt = Timed(m.spec, cfg, r.value, n_ubatch)
            m.close()
        except _OutOfTime:
            pass
        except (OperationFailedError, ValueError, OSError) as exc:  # a MoE load this build refuses there
            got.notes.append(f"{device}: its MoE figures not measured ({exc}): the table's kept")
    finally:
        for m in opened:
            m.close()
    return got
