"""Tensor list and header keys of Gemma 4 (gemma4): the 31B's layout, the 26B-A4B's, whose
every block routes to experts beside its dense FFN, and the E2B's and E4B's, with per-layer
embeddings and a KV cache the last layers share.

What llama.cpp 0.3.36's src/models/gemma4.cpp loads and conversion/gemma.py Gemma4Model
writes, for the models without per-layer embeddings or a shared KV cache: window
layers and full-attention layers with heads of their own size and KV-head count
(`key_length_swa` against `key_length`; `head_count_kv` per layer), full layers whose
values are their keys (`attention_k_eq_v`: no attn_v, the cache still holds V), one
`rope_freqs` for the full layers' proportional rope, a scalar per layer, and with experts
a router with its scale, three more norms and a per-expert output scale; with per-layer
embeddings a [n_vocab x n_layer*n_embd_per_layer] table read by token, its projection (kept
in the source's 16-bit type, F16: llama-quant never quantizes per_layer_model_proj) and a gate,
projection and norm per block. The last `shared_kv_layers` blocks keep no cache of their own
(they attend to the last window / full layer before them: gguf/build.py kv_reuse) but keep
their K projections, as the checkpoints do; with `use_double_wide_mlp` their FFN is twice as
wide.

Pure Python, like arch_recipe.py: the catalog sizes these models while ranking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rooflight.gguf.arch_recipe import f32_plan, weight_planner
from rooflight.gguf.quant_recipe import GGMLType as Q
from rooflight.gguf.quant_recipe import TensorPlan
from rooflight.gguf.quant_recipe import normalize_ftype as _normalize_ftype

ARCH = "gemma4"


@dataclass(frozen=True)
class Gemma4Shape:
    n_embd: int
    n_head: int
    n_ff: int
    n_vocab: int
    swa_layers: tuple[bool, ...]  # per layer: True for a sliding-window layer
    head_dim_swa: int  # config.json head_dim
    head_dim_full: int  # global_head_dim
    n_head_kv_swa: int  # num_key_value_heads
    n_head_kv_full: int  # num_global_key_value_heads
    sliding_window: int
    k_eq_v: bool = False  # attention_k_eq_v: full layers have no V projection
    context_length: int = 4096
    tie_embeddings: bool = True
    # enable_moe_block: every block routes to n_expert experts of n_ff_exp (top n_expert_used)
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_embd_per_layer: int = 0  # hidden_size_per_layer_input
    n_kv_shared: int = 0  # num_kv_shared_layers
    double_wide_mlp: bool = False  # use_double_wide_mlp: the shared layers' FFN is 2 x n_ff

    @property
    def n_layer(self) -> int:
        return len(self.swa_layers)

    def head_dim(self, il: int) -> int:
        return self.head_dim_swa if self.swa_layers[il] else self.head_dim_full

    def n_head_kv(self, il: int) -> int:
        return self.n_head_kv_swa if self.swa_layers[il] else self.n_head_kv_full

    def n_ff_at(self, il: int) -> int:
        shared = il >= self.n_layer - self.n_kv_shared
        return 2 * self.n_ff if self.double_wide_mlp and shared else self.n_ff


def plan_gemma4_tensors(s: Gemma4Shape, ftype: str) -> list[TensorPlan]:
    """Every tensor llama.cpp's gemma4 loader reads for this dense shape, with llama-quant's
    types (norms, the per-layer scalar and rope_freqs F32)."""
    ftype = _normalize_ftype(ftype)
    e, n_layer = s.n_embd, s.n_layer

    w = weight_planner(ftype, n_layer, s.n_expert)

    def f32(name: str, shape: tuple[int, ...]) -> TensorPlan:  # norms and scales: ones
        return f32_plan(name, shape, "ones")

    plans = [w("token_embd.weight", (s.n_vocab, e), "output" if s.tie_embeddings else "token_embd"),
             f32("output_norm.weight", (e,))]
    if not s.tie_embeddings:
        plans.append(w("output.weight", (s.n_vocab, e), "output"))
    # the full layers' proportional rope: one tensor, the first full layer's (the others
    # reuse it, TENSOR_DUPLICATED)
    plans.append(f32("rope_freqs.weight", (s.head_dim_full // 2,)))
    pl = s.n_embd_per_layer
    if pl:
        plans += [w("per_layer_token_embd.weight", (s.n_vocab, pl * n_layer), "token_embd"),
                  # F16 in a gemma4-e2b Q4_K_M file (find_string hit 55673374036)
                  TensorPlan("per_layer_model_proj.weight", (pl * n_layer, e), Q.F16, "normal"),
                  f32("per_layer_proj_norm.weight", (pl,))]
    for il in range(n_layer):
        b = f"blk.{il}."
        hd, kv = s.head_dim(il), s.n_head_kv(il) * s.head_dim(il)
        q = s.n_head * hd
        plans += [f32(b + "attn_norm.weight", (e,)),
                  w(b + "attn_q.weight", (q, e), "attn_q", il),
                  w(b + "attn_k.weight", (kv, e), "attn_k", il)]
        if not (s.k_eq_v and not s.swa_layers[il]):
            plans.append(w(b + "attn_v.weight", (kv, e), "attn_v", il))
        plans += [w(b + "attn_output.weight", (e, q), "attn_output", il),
                  f32(b + "attn_q_norm.weight", (hd,)), f32(b + "attn_k_norm.weight", (hd,)),
                  f32(b + "post_attention_norm.weight", (e,)),
                  f32(b + "layer_output_scale.weight", (1,)),
                  f32(b + "ffn_norm.weight", (e,)),
                  w(b + "ffn_gate.weight", (s.n_ff_at(il), e), "ffn_gate", il),
                  w(b + "ffn_up.weight", (s.n_ff_at(il), e), "ffn_up", il),
                  w(b + "ffn_down.weight", (e, s.n_ff_at(il)), "ffn_down", il),
                  f32(b + "post_ffw_norm.weight", (e,))]
        if pl:
            plans += [w(b + "inp_gate.weight", (pl, e), "other", il), w(b + "proj.weight", (e, pl), "other", il),
                      f32(b + "post_norm.weight", (e,))]
        if s.n_expert:  # the router stays F32 (llama-quant never quantizes ffn_gate_inp)
            x = s.n_expert
            plans += [TensorPlan(b + "ffn_gate_inp.weight", (x, e), Q.F32, "normal"),
                      f32(b + "ffn_gate_inp.scale", (e,)),
                      f32(b + "pre_ffw_norm_2.weight", (e,)), f32(b + "post_ffw_norm_1.weight", (e,)),
                      f32(b + "post_ffw_norm_2.weight", (e,)),
                      w(b + "ffn_gate_exps.weight", (x, s.n_ff_exp, e), "ffn_gate", il),
                      w(b + "ffn_up_exps.weight", (x, s.n_ff_exp, e), "ffn_up", il),
                      w(b + "ffn_down_exps.weight", (x, e, s.n_ff_exp), "ffn_down", il),
                      f32(b + "ffn_down_exps.scale", (x,))]
    return plans


def gemma4_metadata(s: Gemma4Shape) -> dict[str, Any]:
    """The keys Gemma4Model.set_gguf_parameters writes and gemma4.cpp reads."""
    a = ARCH
    experts = ({f"{a}.expert_count": s.n_expert, f"{a}.expert_used_count": s.n_expert_used,
                f"{a}.expert_feed_forward_length": s.n_ff_exp} if s.n_expert else {})
    return {**experts,
        f"{a}.context_length": s.context_length,
        f"{a}.embedding_length": s.n_embd,
        f"{a}.block_count": s.n_layer,
        f"{a}.feed_forward_length": ([s.n_ff_at(il) for il in range(s.n_layer)] if s.double_wide_mlp
                                     else s.n_ff),
        f"{a}.attention.head_count": s.n_head,
        f"{a}.attention.head_count_kv": [s.n_head_kv(il) for il in range(s.n_layer)],
        f"{a}.attention.key_length": s.head_dim_full,
        f"{a}.attention.value_length": s.head_dim_full,
        f"{a}.attention.key_length_swa": s.head_dim_swa,
        f"{a}.attention.value_length_swa": s.head_dim_swa,
        f"{a}.rope.dimension_count": s.head_dim_full,
        f"{a}.rope.dimension_count_swa": s.head_dim_swa,
        f"{a}.rope.freq_base": 1_000_000.0,
        f"{a}.rope.freq_base_swa": 10_000.0,
        f"{a}.attention.sliding_window": s.sliding_window,
        f"{a}.attention.sliding_window_pattern": list(s.swa_layers),
        f"{a}.attention.shared_kv_layers": s.n_kv_shared,
        f"{a}.embedding_length_per_layer_input": s.n_embd_per_layer,
        f"{a}.attention.layer_norm_rms_epsilon": 1e-6,
        f"{a}.final_logit_softcapping": 30.0,
    }
