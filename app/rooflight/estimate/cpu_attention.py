"""The CPU decode attention model: the cycles one token's attention over the cache costs in
llama.cpp's CPU kernels (flash attention on or off), counted per cached cell the busiest
thread visits, in two parts: the cached K/V elements the token reads (per KV head) and the
work each query head does on them (per query head). A probe prices each part by its own
figure where it measured both (probe.AttentionCost.decode_s: an MHA model and a GQA one),
else both by one; without a probe they are cycles at the CPU's clock (perf.decode_parts_s)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rooflight.estimate.config import RunConfig
from rooflight.estimate.kv import kv_cells_attended, kv_cells_seen
from rooflight.gguf.spec import ModelSpec


@dataclass(frozen=True)
class AttentionUnits:
    """One token's decode attention in the model's cycles: `memory`, per cached K/V element
    read (once per KV head: the query heads that share it find it in the core's caches), and
    `compute`, per element and query head (the dot product, the softmax step, the V
    accumulation, and its scalar remainder on narrow heads)."""

    memory: float = 0.0
    compute: float = 0.0

    @property
    def total(self) -> float:
        return self.memory + self.compute

    def __sub__(self, other: AttentionUnits) -> AttentionUnits:
        return AttentionUnits(self.memory - other.memory, self.compute - other.compute)


def cpu_attention_units(spec: ModelSpec, cfg: RunConfig, position: float, isa: Iterable[str] = ()) -> float:
    """The decode attention model's cycles for one token at `position`, all layers (what a
    probe's attention figure is seconds per), on a CPU with these ISA flags (f16_simd_block)."""
    return cpu_attention_cycles(spec, cfg, int(position), 0, spec.n_layer, isa)


def cpu_attention_split(spec: ModelSpec, cfg: RunConfig, position: float, isa: Iterable[str] = ()) -> AttentionUnits:
    """cpu_attention_units in its two parts (AttentionUnits)."""
    return cpu_attention_parts(spec, cfg, int(position), 0, spec.n_layer, isa)


# CPU cycles for decode attention (one query row against the cache), by flash attention
# on/off: per cached K/V element visited, and per multiply-add. llama.cpp's CPU flash-attention
# kernel walks the cache one K/V row at a time (vec_dot, online softmax, vec_mad). Without
# flash attention K and V go through two batched mat-muls, about half the cost. Fitted on the
# 2-core AVX-512 Zen 4 EPYC VM (f16 cache, 4 layers, positions 256-12k, 1 and 2 threads): 16
# query / 16 KV heads cost ~1.0 cycle per element, 16 / 4 heads ~1.3 per element -> 0.9 per
# element + 0.1 per multiply-add; flash attention off ~0.55 per multiply-add without GQA,
# split the same way. There the rows a token streams cost more than the query heads' work on
# them; on the 480 MiB AMX Xeon VM a query head's work cost about what an MHA row's read did,
# so a probe prices the two parts by a figure each (probe.split_decode_cost) and these
# weights only say which part a cycle belongs to.
_ATTENTION_CYCLES = {True: (0.9, 0.1), False: (0.5, 0.05)}  # (per KV element, per MAC)

# With flash attention, each query head adds every cached V row into an F16 accumulator with
# ggml_vec_mad_f16 (ggml-cpu/ops.cpp flash_attn_ext_f16_one_chunk, the decode path, F16
# cache; vec.h), whose SIMD loop covers the head width in blocks of GGML_F16_STEP elements and
# leaves the rest to a scalar loop converting each element F16 -> F32 -> F16
# (simd-mappings.h): blocks of 128 with AVX512-FP16 (a native build on Sapphire Rapids and
# later), 64 with AVX-512 otherwise, 32 with AVX/AVX2 and with NEON's FP16 arithmetic, 16
# with NEON without it; SVE's loop is predicated. So a 64-wide head (gpt-oss, Llama 3.2 1B,
# Qwen2.5 0.5B...) on an AVX512-FP16 CPU accumulates V entirely in scalar code. A scalar
# element costs this many of the cycles above: fitted on one attention-only shape (MHA 16/16,
# 64 against 128 wide: bench/attention_heads.py on an AMX Xeon VM, 2026-12-06: 2.95). Held
# out on that VM: eleven other shapes of 64-192 wide heads at x0.73-1.34 of the probe shape's
# cost per unit (the narrow ones x1.3-6.5 without it); the attention of three 64-wide models,
# gpt-oss-20b's layout among them, measured x0.58-1.96 of the estimate over five runs, x1.7-9.3
# without it (bench/attention_delta.py; docs/DECISIONS.md, "Narrow heads").
SCALAR_V_CYCLES = 3.0


def f16_simd_block(isa: Iterable[str]) -> int | None:
    """GGML_F16_STEP of a native llama.cpp build on a CPU with these flags: the elements
    ggml_vec_mad_f16's SIMD loop takes at a time; None where no remainder is left scalar
    (SVE) or the flags say nothing."""
    flags = set(isa)
    if "sve" in flags:
        return None
    if "avx512_fp16" in flags:
        return 128
    if "avx512f" in flags:
        return 64
    if flags & {"avx", "avx2"}:
        return 32
    if "neon" in flags:
        return 32 if "fp16_va" in flags else 16
    return None


# llama.cpp's CPU flash attention gives each thread one contiguous chunk of a token's cache
# view when the view holds this many cells or more (ggml-cpu/ops.cpp, use_split_kv_path: one
# query row, K and V both F16 or F32), and a thread skips the masked cells of its chunk; the
# token waits for the thread whose chunk holds the most cells it must visit. Below it, or
# with a quantized cache, the threads share the query heads and each visits every unmasked
# cell. Measured on the 2-core Zen 4 VM (2026-12-06, an attention-only model, 16 heads of
# 128): with 2 threads, decode after 530 cached positions cost what it cost after 740, and
# after 790 what after 1000 (the view steps at 768 and 1024 cells); with 1 thread it grew
# with the positions (bench/attention_split.py); bench/swa_attention.py checks windows.
SPLIT_KV_MIN_CELLS = 512


def cpu_attention_cells(spec: ModelSpec, cfg: RunConfig, position: int) -> tuple[int, ...]:
    """Per layer, the cached cells one token's CPU decode attention costs at `position`,
    counted as if its threads shared them evenly (what _ATTENTION_CYCLES are per).

    Flash attention on: the cells the mask leaves (kv.kv_cells_attended: a sliding-window
    layer's window, not its window + n_ubatch cache), except on the split path, where the
    busiest thread's chunk sets the time: threads x min(chunk, cells visited), taking a
    window as lying within one chunk. So with 2 threads a Gemma 3 layer's 512-token window in
    its 1024-cell cache costs the whole cache, with 1 thread the window; and a full layer
    costs its view padded to 256 cells (llama_kv_cache::get_n_kv), not its positions. Off:
    the two mat-muls run over every cell of the view, masked or not."""
    views = kv_cells_seen(spec, cfg, position + 1)  # the cache holds the token being generated
    if not cfg.flash_attn:
        return views
    visited = kv_cells_attended(spec, cfg, position)
    if cfg.kv_type != "f16":
        return visited
    threads = max(1, cfg.n_threads)
    return tuple(threads * min(-(-view // threads), cells) if view >= SPLIT_KV_MIN_CELLS else cells
                 for cells, view in zip(visited, views, strict=True))


def cpu_attention_cycles(spec: ModelSpec, cfg: RunConfig, position: int, start: int, end: int,
                          isa: Iterable[str] = ()) -> float:
    """Cycles for attention over the cached positions of layers [start, end) for one token."""
    return cpu_attention_parts(spec, cfg, position, start, end, isa).total


def cpu_attention_parts(spec: ModelSpec, cfg: RunConfig, position: int, start: int, end: int,
                        isa: Iterable[str] = ()) -> AttentionUnits:
    """cpu_attention_cycles in its two parts (AttentionUnits)."""
    seen = cpu_attention_cells(spec, cfg, position)
    per_element, per_mac = _ATTENTION_CYCLES[bool(cfg.flash_attn)]
    block = f16_simd_block(isa) if cfg.flash_attn and cfg.kv_type == "f16" else None
    memory = compute = 0.0
    for il in range(start, end):
        if seen[il]:
            n_kv = spec.n_head_kv[il] or spec.n_head[il]
            dk, dv = spec.head_dims(il)
            scalar = dv % block if block else 0  # V elements past the SIMD loop's last block
            memory += seen[il] * (dk + dv) * n_kv * per_element
            compute += seen[il] * spec.n_head[il] * ((dk + dv) * per_mac + scalar * SCALAR_V_CYCLES)
    return AttentionUnits(memory, compute)
