"""Compute buffers of devices that each run one part of a graph split across devices.

compute.py gives the buffer of a device that runs the whole graph. When llama.cpp's
scheduler splits the graph over several devices (ggml-backend.cpp), two things change it,
both measured with llama.cpp 0.3.36's RPC backend (bench/rpc_split.py: two servers on
127.0.0.1, generated llama models; the scheduler and allocator are the same for every
backend):

- **A split that starts mid-graph** (this machine's CPU runs the first layers) keeps fewer
  residual-stream tensors alive than the whole graph: one fewer at the attention peak, two
  fewer at the feed-forward peak; a device that holds only the output layer needs the
  logits plus one residual, and on a device with a single block the KQ mask is gone by the
  feed-forward peak. This reproduced every measured case to 0.02 MiB (n_embd 256/512, n_ff
  1024/2048, n_ctx 512/1024, n_ubatch 256/512, flash attention on and off). It is applied to
  RPC devices only: a local GPU also runs the CPU layers' large matrix products (llama.cpp's
  op offload), so its buffer stays the whole graph's.
- **Pipeline parallelism.** When every layer and the output are offloaded to more than one
  device, the KV cache too, and no tensor is overridden (llama-context.cpp
  `pipeline_parallel`; every backend Rooflight plans for reports the async compute and events
  it needs), the scheduler keeps GGML_SCHED_MAX_COPIES = 4 copies of each split's inputs so
  that micro-batches can overlap. Each copy is allocated first and never freed: every device
  holds 4 x its split's inputs (the residual stream coming in, the KQ masks, positions, the
  KV cache's row indices, the output row ids on the last layer's device), and this machine's
  CPU 4 x every graph input. The rest of a device's graph then peaks a few residuals below
  the whole graph's (`_pipeline_rest`, set on 30 measured cases: n_embd 256-1024, n_ff
  512-4864, 1-8 KV heads, n_ctx 512-4096, n_ubatch 128/256/512, flash attention on and off,
  1-8 blocks per device). Checked on 8 more shapes not used to set it (bench/rpc_split.py
  --cpu-blocks 0, 2026-12-06): 22 of 24 compute buffers, this CPU's included, within 0.005
  MiB; the two misses, by one residual each way (2 MiB), a model whose feed-forward is no
  wider than n_embd, where compute.py's own feed-forward peak was not fitted either. Local
  GPUs take the same rule (the scheduler and allocator are backend-independent); not yet
  measured on two GPUs.
"""

from __future__ import annotations

from rooflight.estimate.compute import (
    attention_peak,
    compute_bytes,
    ffn_peak,
    kv_row_bytes,
    mask_bytes,
    micro_batch,
    output_peak,
)
from rooflight.estimate.config import RunConfig
from rooflight.estimate.placement import CPU
from rooflight.gguf.spec import ModelSpec

F32 = 4
I32 = 4
I64 = 8
# ggml/CMakeLists.txt GGML_SCHED_MAX_COPIES (the release builds keep the default)
PIPELINE_COPIES = 4


def pipeline_parallel(devices: list[str], n_offload_devices: int, cfg: RunConfig) -> bool:
    """Whether llama.cpp enables pipeline parallelism for this placement: more than one
    offload device in its list (GPUs and RPC servers, whether they get layers or not), every
    block and the output offloaded, the KV cache offloaded, and no tensor overrides (Rooflight
    sets them only for --n-cpu-moe)."""
    return n_offload_devices > 1 and CPU not in devices and cfg.offload_kqv and not cfg.n_cpu_moe


def remote_compute_bytes(spec: ModelSpec, cfg: RunConfig, *, n_blocks: int, runs_output: bool,
                         cpu_runs_layers: bool) -> int:
    """Compute buffer of an RPC device holding `n_blocks` repeating blocks (and the output
    layer if `runs_output`), without pipeline parallelism."""
    if not cpu_runs_layers:
        return compute_bytes(spec, cfg, runs_layers=n_blocks > 0, runs_output=runs_output)
    residual = _residual(spec, cfg)
    peaks = []
    if n_blocks:
        ffn = ffn_peak(spec, cfg) - 2 * residual - (mask_bytes(spec, cfg) if n_blocks == 1 else 0)
        peaks += [attention_peak(spec, cfg) - residual, ffn]
    if runs_output:
        peaks.append(output_peak(spec, cfg) - residual)
    return max(peaks) if peaks else 2 * residual


def pipeline_device_bytes(spec: ModelSpec, cfg: RunConfig, *, n_blocks: int, runs_last_block: bool,
                          runs_output: bool) -> int:
    """Compute buffer of an offload device (a GPU or an RPC device) under pipeline parallelism."""
    inputs = _residual(spec, cfg)  # the embeddings or the previous device's residual stream
    if n_blocks:
        inputs += attention_input_bytes(spec, cfg) + (_output_ids(cfg) if runs_last_block else 0)
    return PIPELINE_COPIES * inputs + _pipeline_rest(spec, cfg, n_blocks, runs_last_block, runs_output)


def pipeline_cpu_bytes(spec: ModelSpec, cfg: RunConfig) -> int:
    """This machine's CPU under pipeline parallelism: every graph input is assigned to it
    (ggml-backend.cpp: "graph input" -> the last backend), each kept in 4 copies, plus the
    token embeddings it looks up. The embeddings input of a text batch is among them though
    unused (llm_graph_context::build_inp_embd makes both)."""
    t = micro_batch(cfg)
    tokens = t * I32
    embeddings = spec.n_embd * t * F32
    graph_inputs = tokens + embeddings + attention_input_bytes(spec, cfg) + _output_ids(cfg)
    return PIPELINE_COPIES * graph_inputs + _residual(spec, cfg)


def _pipeline_rest(spec: ModelSpec, cfg: RunConfig, n_blocks: int, runs_last_block: bool,
                   runs_output: bool) -> int:
    """The device's graph beside its input copies: the whole graph's peaks less the masks
    (now among the inputs) and fewer residual-stream tensors. Set on the 30 measured
    cases (module doc)."""
    residual = _residual(spec, cfg)
    masks = mask_bytes(spec, cfg)
    peaks = []
    if n_blocks:
        if cfg.flash_attn:
            fewer_at_ffn = 2 if runs_last_block and n_blocks <= 2 else 1
        else:
            fewer_at_ffn = 2 if runs_last_block else 3
        fewer_at_attention = residual + kv_row_bytes(spec, cfg) + (residual if runs_last_block and n_blocks == 1 else 0)
        peaks += [ffn_peak(spec, cfg) - masks - fewer_at_ffn * residual,
                  attention_peak(spec, cfg) - masks - fewer_at_attention]
    if runs_output:
        peaks.append(output_peak(spec, cfg) - residual)
    return max(peaks) if peaks else residual


def attention_input_bytes(spec: ModelSpec, cfg: RunConfig, n_tokens: int | None = None,
                          position: int | None = None) -> int:
    """What a device's blocks need from the host for a step: token positions, the KV cache's
    row indices (for a transposed V cache, without flash attention, one per element) and the
    KQ masks; one index set per cache kind (full, sliding-window). The reserved graph's (a
    micro-batch, the whole cache), or a step of n_tokens with `position` cells in use after it
    (what an RPC server is sent each step: network.py)."""
    t = micro_batch(cfg) if n_tokens is None else n_tokens
    kinds = 2 if spec.sliding_window and any(spec.swa_layers) and not all(spec.swa_layers) else 1
    v_width = 1 if cfg.flash_attn else max(
        (spec.head_dims(il)[1] * (spec.n_head_kv[il] or 1) for il in range(spec.n_layer)), default=1)
    return t * I32 + kinds * (t * I64 + v_width * t * I64) + mask_bytes(spec, cfg, n_tokens, position)


def _output_ids(cfg: RunConfig) -> int:
    return micro_batch(cfg) * I32


def _residual(spec: ModelSpec, cfg: RunConfig) -> int:
    return spec.n_embd * micro_batch(cfg) * F32
