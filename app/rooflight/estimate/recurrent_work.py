"""The CPU's work in the recurrent layers of hybrid models, per token.

A recurrent layer (gguf/recurrent.py) keeps no KV cache: each token updates a fixed state
of n_embd_s f32 values (d_state x inner: a delta-net's value heads x head size squared, a
Mamba layer's d_state x d_inner) and reads its output from it. The roofline prices the
layer's projections as any matmul and the state's trip to and from RAM in decode
(kv.kv_reads_by_layer); this module prices the scan itself on a CPU, which neither of
those covers, from llama.cpp's CPU kernels (ggml-cpu/ops.cpp, llama-cpp-python 0.3.36):

- Gated delta-net (qwen3next, qwen35, qwen35moe: the fused GATED_DELTA_NET op, the default
  since llama_context sets fused_gdn_ar / fused_gdn_ch): per token and value head it walks
  the head's S x S state four times (ggml_compute_forward_gated_delta_net_one_chunk: decay
  with vec_scale, S^T k with vec_dot, the outer-product update with vec_mad, S^T q with
  vec_dot).
- Mamba-1 and Mamba-2 (ggml_compute_forward_ssm_scan_f32): one fused loop per state
  element (decay, input, output dot), one walk.
- LFM2's short convolutions keep no scanned state (n_embd_s = 0): nothing here.

Cost = walks x state elements x cycles per element walk, on the plan's threads at the CPU
table's clock (the op splits heads among the threads). A prompt's walks stay in the
cache (one head's state, token after token); decode walks a state that comes from RAM
each token, at a higher price per element.

The two constants are fitted on generated hybrid models against llama.cpp on this
project's VM, each run checked with the constants fitted on the others
(bench/recurrent_cost.py). GPUs: not priced (their scan kernels were never measured here;
a hybrid's range on a GPU is widened instead: ranges.for_hybrid_gpu).
"""

from __future__ import annotations

from rooflight.estimate.kv import is_recurrent
from rooflight.gguf.recurrent import state_elements
from rooflight.gguf.spec import ModelSpec

# walks over the state per token, by the kernel each architecture's layers run
DELTA_NET = frozenset({"qwen3next", "qwen35", "qwen35moe"})
STATE_WALKS = {**dict.fromkeys(DELTA_NET, 4),
               **dict.fromkeys(("mamba", "mamba2", "jamba", "granitehybrid", "nemotron_h",
                                "nemotron_h_moe", "falcon-h1"), 1)}

# CPU cycles per state element and walk, in prompts and in decode: fitted by
# bench/recurrent_cost.py on 13 runs of generated hybrids (delta-net with 8-16 heads of 64-128,
# with and without experts, Qwen3.5-0.8B's own shape; Mamba-2, Nemotron-H, Jamba's Mamba-1,
# LFM2; Q8_0 and Q4_0; 2 threads and 1) against llama.cpp on the project's 2-core AMX Xeon VM
# (bench/results/recurrent_cost-20261206T1249Z.txt). Each run left out of the fit and
# predicted, its miss beyond its dense reference's: prompts median 4.3% (max 8.5%; 17.7% and
# 34.4% without this module), decode 5.0% (max 14.3%; 7.9% and 22.4% without).
PREFILL_CYCLES_PER_ELEMENT = 0.47
DECODE_CYCLES_PER_ELEMENT = 1.44


def element_walks(spec: ModelSpec) -> float:
    """State elements walked per token in one recurrent layer (0 for an architecture whose
    layers scan no state, or a plain transformer)."""
    walks = STATE_WALKS.get(spec.architecture, 0)
    if not walks or not spec.recurrent_layers:
        return 0.0
    return float(walks * state_elements(spec.architecture, spec.metadata, spec.n_embd)[1])


def recurrent_layers(spec: ModelSpec, start: int, end: int) -> int:
    """How many of layers [start, end) keep a recurrent state."""
    return sum(1 for il in range(start, end) if is_recurrent(spec, il))


def prefill_cycles_per_token(spec: ModelSpec, n_layers: int) -> float:
    """CPU cycles one prompt token spends scanning the state of n_layers recurrent layers."""
    return n_layers * element_walks(spec) * PREFILL_CYCLES_PER_ELEMENT


def decode_cycles_per_token(spec: ModelSpec, n_layers: int) -> float:
    """CPU cycles one generated token spends scanning the state of n_layers recurrent layers."""
    return n_layers * element_walks(spec) * DECODE_CYCLES_PER_ELEMENT
