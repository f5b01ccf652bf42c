"""The compute buffer llama.cpp reserves on an RPC device (issue 20).

Measured with llama.cpp 0.3.36's RPC backend (bench/rpc_split.py, two servers on
127.0.0.1, generated llama models, n_embd 256/512, n_ff 1024/2048, n_ctx 512/1024,
n_ubatch 256/512, flash attention on and off): when this machine's CPU runs the first
layers, a remote device's split starts mid-graph and keeps fewer residual-stream tensors
alive than the single-device graph of compute.py — one fewer at the attention peak, two
fewer at the feed-forward peak — and a device that holds only the output layer needs the
logits plus one residual. The KQ mask lives from a device's first attention to its last,
so on a device with a single block it is gone by the feed-forward peak. These reproduced
every measured case to 0.02 MiB.
When every layer is remote (the CPU runs none) llama.cpp reserved more on each device
than compute.py's single-device graph (3-5 MiB more at these sizes, growing with n_ctx x
n_ubatch and n_embd); that case is planned with compute.py unchanged, and README says so.
"""

from __future__ import annotations

from rooflight.estimate.compute import (
    attention_peak,
    compute_bytes,
    ffn_peak,
    mask_bytes,
    micro_batch,
    output_peak,
)
from rooflight.estimate.config import RunConfig
from rooflight.gguf.spec import ModelSpec

F32 = 4


def remote_compute_bytes(spec: ModelSpec, cfg: RunConfig, *, n_blocks: int, runs_output: bool,
                         cpu_runs_layers: bool) -> int:
    """Compute buffer of an RPC device holding `n_blocks` repeating blocks (and the output
    layer if `runs_output`)."""
    if not cpu_runs_layers:
        return compute_bytes(spec, cfg, runs_layers=n_blocks > 0, runs_output=runs_output)
    residual = spec.n_embd * micro_batch(cfg) * F32
    peaks = []
    if n_blocks:
        ffn = ffn_peak(spec, cfg) - 2 * residual - (mask_bytes(spec, cfg) if n_blocks == 1 else 0)
        peaks += [attention_peak(spec, cfg) - residual, ffn]
    if runs_output:
        peaks.append(output_peak(spec, cfg) - residual)
    return max(peaks) if peaks else 2 * residual
