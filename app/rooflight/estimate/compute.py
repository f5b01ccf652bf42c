"""Compute (graph) buffer size: the peak of llama.cpp's graph allocator.

llama.cpp reserves its compute buffer by allocating the worst-case graph: a micro-batch of
T = min(n_ctx, n_ubatch) tokens with T outputs (llama-context.cpp sched_reserve), the whole
KV cache in view. ggml-alloc frees each intermediate after its last use and lets
element-wise ops work in place, so the buffer is the largest set of tensors alive at one
time, which in practice is one of three moments:

- attention: the KQ scores of one layer, [n_kv, T, n_head] f32 (softmax runs in place),
  or with flash attention only Q and the output, [head_dim, n_head, T] f32;
- the feed-forward block: gate and up projections, [n_ff, T] f32 each;
- the output: the logits [n_vocab, T] f32 (not the output buffer: the graph's own tensor).

Plus a few residual-stream tensors [n_embd, T] f32 alive around each, and the KQ masks
[n_kv, T] (alive from the first attention to the last). The coefficients (how many
residual-sized tensors are alive at each moment: 3 + 2 Q-sized + K/V at attention, 3 n_ff
+ 4 or 5 residuals at the feed-forward block, 2 at the output) were fitted against
llama.cpp 0.3.36's reported "compute buffer size" on the CPU backend for generated
llama, gemma3 and qwen3moe models over n_ctx 512..32768, n_ubatch 128..512 and flash
attention on and off; they reproduce it within 0.1% (tests/test_integration_plan_vs_llama.py,
bench/accuracy.py), but where two moments nearly tie: ggml-alloc then places them side by
side in part, which the largest-moment rule does not follow (bench/accuracy.py's 100M shapes
at n_ctx 2048 without flash attention, attention scores 48 MiB and logits 62.5 MiB: 65.6 MiB
planned, 67.0 allocated). GPU backends allocate the same graph; not verified on a GPU here.
"""

from __future__ import annotations

import weakref

from rooflight.estimate import ple_compute
from rooflight.estimate.config import RunConfig, padded_ctx
from rooflight.estimate.kv import swa_cells
from rooflight.estimate.recurrent_compute import output_extra_residuals, recurrent_peak_bytes
from rooflight.gguf.derived import derived
from rooflight.gguf.spec import ModelSpec

F32 = 4
F16 = 2


def micro_batch(cfg: RunConfig) -> int:
    """Tokens in the reserved worst-case graph: min(n_ctx, n_ubatch) after llama-cpp-python
    clamps n_batch to n_ctx and n_ubatch to n_batch."""
    n_batch = min(cfg.n_batch, cfg.n_ctx)
    return max(1, min(padded_ctx(cfg.n_ctx), cfg.n_ubatch, n_batch))


def attention_kv_span(spec: ModelSpec, cfg: RunConfig, position: int | None = None) -> tuple[int, int]:
    """(cells seen by full-attention layers, cells seen by sliding-window layers): the whole
    caches (the reserved graph), or at `position` cells in use, padded to 256 as llama.cpp's
    get_n_kv pads them."""
    full = padded_ctx(cfg.n_ctx)
    swa = swa_cells(spec, cfg) if spec.sliding_window and any(spec.swa_layers) else 0
    if position is not None:
        used = padded_ctx(max(1, position))
        full, swa = min(full, used), min(swa, used)
    return full, swa


def mask_bytes(spec: ModelSpec, cfg: RunConfig, n_tokens: int | None = None, position: int | None = None) -> int:
    """KQ masks [n_kv, T], one per cache kind (full and sliding-window); f16 with flash
    attention, f32 without. They live from the first layer's attention to the last. T and
    n_kv are the reserved graph's unless n_tokens and the position after them are given."""
    t = micro_batch(cfg) if n_tokens is None else n_tokens
    full, swa = attention_kv_span(spec, cfg, position)
    el = F16 if cfg.flash_attn else F32
    all_swa = bool(spec.swa_layers) and all(spec.swa_layers)
    return (0 if all_swa else full * t * el) + swa * t * el


def _residual(spec: ModelSpec, t: int) -> int:
    return spec.n_embd * t * F32


def attention_peak(spec: ModelSpec, cfg: RunConfig) -> int:
    """One layer's attention: KQ scores (without flash attention), Q, K, V and residuals."""
    t = micro_batch(cfg)
    full, swa = attention_kv_span(spec, cfg)
    all_swa = bool(spec.swa_layers) and all(spec.swa_layers)
    n_kv = swa if all_swa else max(full, swa)
    n_head = max(spec.n_head) if spec.n_head else 1
    # the widest layer's (Gemma 4's full-attention heads are twice its window layers')
    e_q = max(spec.head_dims(il)[0] for il in range(spec.n_layer)) * n_head * t * F32 if spec.n_layer else 0
    scores = 0 if cfg.flash_attn else n_kv * t * n_head * F32
    return scores + 3 * _residual(spec, t) + 2 * e_q + kv_row_bytes(spec, cfg) + mask_bytes(spec, cfg)


def kv_row_bytes(spec: ModelSpec, cfg: RunConfig) -> int:
    """One micro-batch's K and V rows of the widest layer, [head_dim, n_head_kv, T] f32 each."""
    return max((sum(spec.head_dims(il)) * (spec.n_head_kv[il] or 1) for il in range(spec.n_layer)),
               default=(spec.head_dim_k + spec.head_dim_v)) * micro_batch(cfg) * F32


def ffn_peak(spec: ModelSpec, cfg: RunConfig) -> int:
    """One layer's feed-forward: gate, up and activation [n_ff, T] plus residuals; the
    non-flash path keeps one more residual-sized tensor alive (fitted, see module doc)."""
    t = micro_batch(cfg)
    n_residual = 4 if cfg.flash_attn else 5
    if spec.n_expert and spec.n_expert_used:
        # MoE: gate, up and activation for each of the n_expert_used experts a token is
        # routed to; the router's own tensors are negligible (measured)
        hidden = 3 * _expert_ff(spec) * spec.n_expert_used * t * F32
        # leading dense layers (LFM2-MoE, DeepSeek, GLM) may hold the larger one
        hidden = max(hidden, 3 * dense_ff_in_moe(spec) * t * F32)
        return hidden + n_residual * _residual(spec, t) + mask_bytes(spec, cfg)
    n_ff = max(spec.n_ff) if spec.n_ff else 4 * spec.n_embd
    return 3 * n_ff * t * F32 + n_residual * _residual(spec, t) + mask_bytes(spec, cfg)


def output_peak(spec: ModelSpec, cfg: RunConfig) -> int:
    """Final norm and logits for T outputs; the masks are freed by then."""
    t = micro_batch(cfg)
    residuals = 2 + output_extra_residuals(spec)  # + a kept hidden state (recurrent_compute.py)
    return spec.n_vocab * t * F32 + residuals * _residual(spec, t)


def dense_ff_in_moe(spec: ModelSpec) -> int:
    """FFN width of an MoE model's dense layers (ffn_up without experts), 0 if it has none."""
    return derived(spec, "dense_ff", lambda s: _first_width(s, ".ffn_up.weight", 0))


def _expert_ff(spec: ModelSpec) -> int:
    fallback = max(spec.n_ff) if spec.n_ff else 4 * spec.n_embd
    return derived(spec, "expert_ff", lambda s: _first_width(s, "ffn_up_exps.weight", fallback))


def _first_width(spec: ModelSpec, suffix: str, default: int) -> int:
    """ne1 of the first matrix whose name ends with suffix."""
    for tensor in spec.tensors:
        if tensor.name.endswith(suffix) and len(tensor.shape) >= 2:
            return tensor.shape[1]
    return default


# Per spec (by identity) and per the config fields the buffers depend on: the planner asks
# for the same buffers for every GPU-layer count it tries.
_peaks: dict[int, dict[tuple, int]] = {}


def compute_bytes(spec: ModelSpec, cfg: RunConfig, *, runs_layers: bool, runs_output: bool) -> int:
    """Compute buffer of one device that runs some blocks and/or the output layer."""
    per_spec = _peaks.get(id(spec))
    if per_spec is None:
        per_spec = _peaks[id(spec)] = {}
        weakref.finalize(spec, _peaks.pop, id(spec), None)
    key = (cfg.n_ctx, cfg.n_ubatch, cfg.n_batch, cfg.flash_attn, cfg.swa_full, runs_layers, runs_output)
    value = per_spec.get(key)
    if value is None:
        value = per_spec[key] = _compute_bytes(spec, cfg, runs_layers, runs_output)
    return value


def _compute_bytes(spec: ModelSpec, cfg: RunConfig, runs_layers: bool, runs_output: bool) -> int:
    peaks = []
    if runs_layers:
        peaks += [attention_peak(spec, cfg), ffn_peak(spec, cfg)]
        if spec.recurrent_layers and any(spec.recurrent_layers):
            # a hybrid's recurrent mixer (estimate/recurrent_compute.py), masks alive
            peaks.append(recurrent_peak_bytes(spec, micro_batch(cfg), cfg.flash_attn) + mask_bytes(spec, cfg))
        if extra := ple_compute.layer_extra_bytes(spec, micro_batch(cfg)):
            # Gemma 3n: per-layer inputs and AltUp streams (estimate/ple_compute.py)
            peaks = [p + extra for p in peaks]
            peaks.append(ple_compute.start_peak_bytes(spec, micro_batch(cfg)) + mask_bytes(spec, cfg))
    if runs_output:
        peaks.append(output_peak(spec, cfg))
    if not peaks:
        # a device that only embeds the input tokens (the CPU under full offload)
        return 2 * _residual(spec, micro_batch(cfg))
    return max(peaks)


def output_buffer_bytes(spec: ModelSpec) -> int:
    """llama_context's host output buffer: logits for n_seq_max (= 1) outputs, reserved at
    creation (llama-context.cpp output_reserve); llama-cpp-python asks for no more unless
    logits_all is set."""
    return spec.n_vocab * F32
