"""Tensor lists and header keys of the architectures beyond the plain transformer.

Pure Python (no numpy, no gguf package): the catalog sizes these models from their
config.json fields (gguf/from_config.py) while ranking, which imports neither; the writers
of random-weight test files (gguf/synthetic_hybrid.py, gguf/synthetic_gemma3n.py) write
exactly these tensors and keys. Each list and key is what that architecture's
`load_arch_hparams` / `load_arch_tensors` in the llama.cpp vendored by llama-cpp-python
0.3.36 (src/models/<arch>.cpp) requires:

- hybrids with a recurrent state: LFM2 / LFM2-MoE (short convolutions), Granite 4 H and
  Nemotron-H (Mamba-2), Jamba (Mamba-1, interleaved experts), Qwen3-Next / Qwen3.5 /
  Qwen3.5-MoE (gated delta-net). The per-layer layout is given as arrays (`n_head_kv`,
  `n_ff`), as their converters write them.
- Gemma 3n: per-layer embeddings, AltUp and LAuReL, a KV cache shared after layer 20.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rooflight.gguf.quant_recipe import GGMLType as Q
from rooflight.gguf.quant_recipe import TensorPlan, _weight_type
from rooflight.gguf.quant_recipe import normalize_ftype as _normalize_ftype


def weight_planner(ftype: str, n_layer: int, n_expert: int = 0) -> Callable[..., TensorPlan]:
    """w(name, shape, role="other", il=0): a matrix of the file type's weight type with
    llama-quant's adjustments for its role and block (quant_recipe._weight_type)."""
    def w(name: str, shape: tuple[int, ...], role: str = "other", il: int = 0) -> TensorPlan:
        qtype = _weight_type(ftype, role, shape[-1], il, n_layer, n_expert)
        return TensorPlan(name, shape, qtype, "output" if role == "output" else "normal")
    return w


def f32_plan(name: str, shape: tuple[int, ...], init: str = "normal") -> TensorPlan:
    """A tensor llama-quant keeps in F32 (norms, routers, small kernels)."""
    return TensorPlan(name, shape, Q.F32, init)


MINIMAL_VOCAB_SIZE = 260  # synthetic.MINIMAL_VOCAB_SIZE: specials, 256 bytes, "▁"
EXPERT_GATING_SIGMOID = 2  # gguf.ExpertGatingFuncType.SIGMOID (llama_expert_gating_func_type)


HYBRID_ARCHITECTURES = ("lfm2", "lfm2moe", "granitehybrid", "nemotron_h", "nemotron_h_moe", "jamba", "qwen3next",
                        "qwen35", "qwen35moe")
NEMOTRON_H = ("nemotron_h", "nemotron_h_moe")  # Mamba-2, attention and MLP (or expert) layers in one stack
DELTA_NET = ("qwen3next", "qwen35", "qwen35moe")  # gated delta-net layers, attention every Nth


@dataclass(frozen=True)
class HybridShape:
    """Hyper-parameters of a hybrid model, per layer where llama.cpp reads them per layer.

    n_head_kv[il] == 0 marks a recurrent layer (lfm2, granitehybrid, jamba); nemotron_h
    layers are recurrent when both n_head_kv and n_ff are 0, MLP-only when n_ff > 0
    (nemotron_h_moe: routed experts of n_ff_exp and a shared expert of n_ff_shexp there);
    qwen3next layers are recurrent unless (il + 1) % full_attention_interval == 0.
    """

    arch: str
    n_embd: int
    n_head: int
    head_dim: int
    n_head_kv: tuple[int, ...]
    n_ff: tuple[int, ...]
    n_vocab: int = MINIMAL_VOCAB_SIZE
    context_length: int = 4096
    # Mamba (ssm.*): conv kernel, inner size, state size, time-step rank (Mamba-2: heads;
    # delta-net: value heads), groups (delta-net: key heads)
    ssm_d_conv: int = 4
    ssm_d_inner: int = 0
    ssm_d_state: int = 0
    ssm_dt_rank: int = 0
    ssm_n_group: int = 0
    l_cache: int = 3  # lfm2 shortconv.l_cache
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    full_attention_interval: int = 4
    # per layer: True where the feed-forward is routed experts (Jamba interleaves them);
    # () = every layer when n_expert > 0
    moe_layers: tuple[bool, ...] = ()
    # nemotron_h_moe routing (config.json n_shared_experts, norm_topk_prob, routed_scaling_factor, n_group)
    n_expert_shared: int = 0
    expert_weights_norm: bool = False
    expert_weights_scale: float = 1.0
    n_expert_group: int = 1
    sliding_window: int = 0  # lfm2: window of its attention layers (LFM2 2.x configs)
    tie_embeddings: bool = True

    @property
    def n_layer(self) -> int:
        return len(self.n_head_kv)

    def is_moe(self, il: int) -> bool:
        return bool(self.n_expert) and (not self.moe_layers or self.moe_layers[il])

    def is_recurrent(self, il: int) -> bool:
        if self.arch in DELTA_NET:
            return (il + 1) % self.full_attention_interval != 0
        if self.arch in NEMOTRON_H:
            return self.n_head_kv[il] == 0 and self.n_ff[il] == 0
        return self.n_head_kv[il] == 0


def _check(shape: HybridShape) -> None:
    if shape.arch not in HYBRID_ARCHITECTURES:
        raise ValueError(f"unsupported arch {shape.arch!r}; choose one of {', '.join(HYBRID_ARCHITECTURES)}")
    if len(shape.n_ff) != shape.n_layer:
        raise ValueError("n_ff needs one value per layer")
    if shape.arch in ("granitehybrid", "jamba") and shape.ssm_d_inner != 2 * shape.n_embd:
        raise ValueError(f"{shape.arch} needs ssm_d_inner == 2 * n_embd (llama.cpp asserts it)")
    if shape.arch in ("lfm2", "lfm2moe", "jamba") and shape.n_head * shape.head_dim != shape.n_embd:
        raise ValueError(f"{shape.arch} needs n_head * head_dim == n_embd (its attention is n_embd wide)")
    if shape.arch in ("qwen3next", "qwen35moe") and not (shape.n_expert and shape.n_expert_used):
        raise ValueError(f"{shape.arch} needs experts (llama.cpp refuses zero experts)")
    if shape.n_vocab < MINIMAL_VOCAB_SIZE:
        raise ValueError(f"n_vocab must be at least {MINIMAL_VOCAB_SIZE}")


def plan_hybrid_tensors(shape: HybridShape, ftype: str) -> list[TensorPlan]:
    """Every tensor llama.cpp's loader requires for this hybrid, with its file type.

    Types follow llama-quant's rules: 1-D tensors, norms, routers and the small conv1d /
    shortconv kernels stay F32; ssm_a / ssm_d (no ".weight" suffix) stay F32; every other
    matrix gets the file type's weight type with llama-quant's adjustments and fallbacks.
    """
    ftype = _normalize_ftype(ftype)
    s = shape
    n_layer, e = s.n_layer, s.n_embd

    w, f32 = weight_planner(ftype, n_layer, s.n_expert), f32_plan

    def norm(name: str, size: int) -> TensorPlan:
        return f32(name, (size,), "ones")

    out_norm = "token_embd_norm.weight" if s.arch in ("lfm2", "lfm2moe") else "output_norm.weight"
    plans = [w("token_embd.weight", (s.n_vocab, e), "output" if s.tie_embeddings else "token_embd"),
             norm(out_norm, e)]
    if not s.tie_embeddings:
        plans.append(w("output.weight", (s.n_vocab, e), "output"))

    d_conv, d_inner, d_state = s.ssm_d_conv, s.ssm_d_inner, s.ssm_d_state
    for il in range(n_layer):
        b = f"blk.{il}."
        recr = s.is_recurrent(il)
        n_kv = s.n_head_kv[il]
        q_dim, kv_dim = s.n_head * s.head_dim, n_kv * s.head_dim
        plans.append(norm(b + "attn_norm.weight", e))

        def attention(q_rows: int) -> list[TensorPlan]:
            return [w(b + "attn_q.weight", (q_rows, e), "attn_q", il),  # noqa: B023
                    w(b + "attn_k.weight", (kv_dim, e), "attn_k", il),  # noqa: B023
                    w(b + "attn_v.weight", (kv_dim, e), "attn_v", il),  # noqa: B023
                    w(b + "attn_output.weight", (e, q_dim), "attn_output", il)]  # noqa: B023

        def dense_ffn(n_ff: int, gate: bool = True) -> list[TensorPlan]:
            out = [w(b + "ffn_up.weight", (n_ff, e), "ffn_up", il),  # noqa: B023
                   w(b + "ffn_down.weight", (e, n_ff), "ffn_down", il)]  # noqa: B023
            if gate:
                out.insert(0, w(b + "ffn_gate.weight", (n_ff, e), "ffn_gate", il))  # noqa: B023
            return out

        def mamba2() -> list[TensorPlan]:
            n_head, groups = s.ssm_dt_rank, s.ssm_n_group
            return [w(b + "ssm_in.weight", (2 * d_inner + 2 * groups * d_state + n_head, e), "ssm_in", il),  # noqa: B023
                    f32(b + "ssm_conv1d.weight", (d_inner + 2 * groups * d_state, d_conv)),  # noqa: B023
                    f32(b + "ssm_conv1d.bias", (d_inner + 2 * groups * d_state,)),  # noqa: B023
                    f32(b + "ssm_dt.bias", (n_head,)),  # noqa: B023
                    f32(b + "ssm_a", (n_head, 1)),  # noqa: B023
                    f32(b + "ssm_d", (n_head, 1), "ones"),  # noqa: B023
                    f32(b + "ssm_norm.weight", (groups, d_inner // groups), "ones"),  # noqa: B023
                    w(b + "ssm_out.weight", (e, d_inner), "ssm_out", il)]  # noqa: B023

        if s.arch in ("lfm2", "lfm2moe"):
            plans.append(norm(b + "ffn_norm.weight", e))
            if s.is_moe(il):  # LFM2-MoE: experts after the leading dense layers, a routing bias
                plans += _experts(b, s, s.n_ff_exp, w, f32, il)
                plans.append(f32(b + "exp_probs_b.bias", (s.n_expert,)))
            else:
                plans += dense_ffn(s.n_ff[il])
            if recr:
                plans += [f32(b + "shortconv.conv.weight", (e, s.l_cache)),
                          w(b + "shortconv.in_proj.weight", (3 * e, e), "ssm_in", il),
                          w(b + "shortconv.out_proj.weight", (e, e), "ssm_out", il)]
            else:
                plans += [norm(b + "attn_q_norm.weight", s.head_dim), norm(b + "attn_k_norm.weight", s.head_dim)]
                plans += attention(q_dim)
        elif s.arch == "granitehybrid":
            plans += mamba2() if recr else attention(q_dim)
            plans.append(norm(b + "ffn_norm.weight", e))
            if s.is_moe(il):  # Granite 4 H Tiny / Small: routed experts plus a shared one
                plans += _experts(b, s, s.n_ff[il], w, f32, il)
                if s.n_ff_shexp:
                    plans += [w(b + "ffn_gate_shexp.weight", (s.n_ff_shexp, e), "ffn_gate", il),
                              w(b + "ffn_up_shexp.weight", (s.n_ff_shexp, e), "ffn_up", il),
                              w(b + "ffn_down_shexp.weight", (e, s.n_ff_shexp), "ffn_down", il)]
            else:
                plans += dense_ffn(s.n_ff[il])
        elif s.arch in NEMOTRON_H:
            if recr:
                plans += mamba2()
            elif s.n_ff[il] == 0:
                plans += attention(q_dim)
            elif s.arch == "nemotron_h_moe":
                # routed experts (squared-ReLU, no gate) with a sigmoid router's bias, and a shared
                # expert (src/models/nemotron-h.cpp load_arch_tensors)
                plans += [f32(b + "ffn_gate_inp.weight", (s.n_expert, e)),
                          f32(b + "exp_probs_b.bias", (s.n_expert,)),
                          w(b + "ffn_down_exps.weight", (s.n_expert, e, s.n_ff_exp), "ffn_down", il),
                          w(b + "ffn_up_exps.weight", (s.n_expert, s.n_ff_exp, e), "ffn_up", il),
                          w(b + "ffn_down_shexp.weight", (e, s.n_ff_shexp), "ffn_down", il),
                          w(b + "ffn_up_shexp.weight", (s.n_ff_shexp, e), "ffn_up", il)]
            else:  # MLP-only layer: up and down, squared-ReLU, no gate
                plans += dense_ffn(s.n_ff[il], gate=False)
        elif s.arch == "jamba":
            if recr:
                dt_rank = s.ssm_dt_rank
                plans += [w(b + "ssm_in.weight", (2 * d_inner, e), "ssm_in", il),
                          f32(b + "ssm_conv1d.weight", (d_inner, d_conv)),
                          f32(b + "ssm_conv1d.bias", (d_inner,)),
                          w(b + "ssm_x.weight", (dt_rank + 2 * d_state, d_inner), "ssm_x", il),
                          norm(b + "ssm_dt_norm.weight", dt_rank),
                          w(b + "ssm_dt.weight", (d_inner, dt_rank), "ssm_dt", il),
                          f32(b + "ssm_dt.bias", (d_inner,)),
                          norm(b + "ssm_b_norm.weight", d_state),
                          norm(b + "ssm_c_norm.weight", d_state),
                          f32(b + "ssm_a", (d_inner, d_state)),
                          f32(b + "ssm_d", (d_inner,), "ones"),
                          w(b + "ssm_out.weight", (e, d_inner), "ssm_out", il)]
            else:
                plans += attention(q_dim)
            plans.append(norm(b + "ffn_norm.weight", e))
            if s.is_moe(il):
                plans += _experts(b, s, s.n_ff[il], w, f32, il)
            else:
                plans += dense_ffn(s.n_ff[il])
        else:  # qwen3next, qwen35, qwen35moe
            plans.append(norm(b + "post_attention_norm.weight", e))
            if recr:
                key_dim, value_dim = d_state * s.ssm_n_group, d_state * s.ssm_dt_rank
                plans += [w(b + "attn_qkv.weight", (2 * key_dim + value_dim, e), "attn_qkv", il),
                          w(b + "attn_gate.weight", (value_dim, e), "attn_gate", il),
                          f32(b + "ssm_conv1d.weight", (2 * key_dim + value_dim, d_conv)),
                          f32(b + "ssm_dt.bias", (s.ssm_dt_rank,)),
                          f32(b + "ssm_a", (s.ssm_dt_rank,))]
                if s.arch == "qwen3next":  # beta and alpha in one projection
                    plans.append(w(b + "ssm_ba.weight", (2 * s.ssm_dt_rank, e), "ssm_ba", il))
                else:
                    plans += [w(b + "ssm_beta.weight", (s.ssm_dt_rank, e), "ssm_beta", il),
                              w(b + "ssm_alpha.weight", (s.ssm_dt_rank, e), "ssm_alpha", il)]
                plans += [norm(b + "ssm_norm.weight", d_state),
                          w(b + "ssm_out.weight", (e, value_dim), "ssm_out", il)]
            else:
                plans += attention(2 * q_dim)  # the query projection carries its gate
                plans += [norm(b + "attn_q_norm.weight", s.head_dim), norm(b + "attn_k_norm.weight", s.head_dim)]
            if s.arch == "qwen35":
                plans += dense_ffn(s.n_ff[il])
            else:
                plans += _experts(b, s, s.n_ff_exp, w, f32, il)
                plans += [f32(b + "ffn_gate_inp_shexp.weight", (e,)),
                          w(b + "ffn_gate_shexp.weight", (s.n_ff_shexp, e), "ffn_gate", il),
                          w(b + "ffn_up_shexp.weight", (s.n_ff_shexp, e), "ffn_up", il),
                          w(b + "ffn_down_shexp.weight", (e, s.n_ff_shexp), "ffn_down", il)]
    return plans


def _experts(b: str, s: HybridShape, n_ff: int, w, f32, il: int) -> list[TensorPlan]:
    # the router stays F32 in every file type (llama-quant never quantizes ffn_gate_inp)
    return [f32(b + "ffn_gate_inp.weight", (s.n_expert, s.n_embd)),
            w(b + "ffn_gate_exps.weight", (s.n_expert, n_ff, s.n_embd), "ffn_gate", il),
            w(b + "ffn_up_exps.weight", (s.n_expert, n_ff, s.n_embd), "ffn_up", il),
            w(b + "ffn_down_exps.weight", (s.n_expert, s.n_embd, n_ff), "ffn_down", il)]


def hybrid_metadata(s: HybridShape) -> dict[str, Any]:
    """The keys llama.cpp's loader reads for this hybrid, as its converter writes them
    (ints are uint32, floats float32, lists arrays: what GGUFWriter's add_* write)."""
    a = s.arch
    m: dict[str, Any] = {}
    m[f"{a}.context_length"] = s.context_length
    m[f"{a}.embedding_length"] = s.n_embd
    m[f"{a}.block_count"] = s.n_layer
    m[f"{a}.feed_forward_length"] = list(s.n_ff) if a in NEMOTRON_H else max(s.n_ff)
    m[f"{a}.attention.head_count"] = s.n_head
    if a in DELTA_NET:
        m[f"{a}.attention.head_count_kv"] = max(s.n_head_kv)
    else:
        m[f"{a}.attention.head_count_kv"] = list(s.n_head_kv)
    m[f"{a}.attention.key_length"] = s.head_dim
    m[f"{a}.attention.value_length"] = s.head_dim
    m[f"{a}.rope.dimension_count"] = s.head_dim
    m[f"{a}.rope.freq_base"] = 10_000.0
    m[f"{a}.attention.layer_norm_rms_epsilon"] = 1e-5
    if a in NEMOTRON_H:
        m[f"{a}.attention.layer_norm_epsilon"] = 1e-5
    if a in ("lfm2", "lfm2moe"):
        m[f"{a}.shortconv.l_cache"] = s.l_cache
        if s.sliding_window:
            m[f"{a}.attention.sliding_window"] = s.sliding_window
    else:
        m[f"{a}.ssm.conv_kernel"] = s.ssm_d_conv
        m[f"{a}.ssm.inner_size"] = s.ssm_d_inner
        m[f"{a}.ssm.state_size"] = s.ssm_d_state
        m[f"{a}.ssm.time_step_rank"] = s.ssm_dt_rank
        if a != "jamba":
            m[f"{a}.ssm.group_count"] = s.ssm_n_group
    if s.n_expert:
        m[f"{a}.expert_count"] = s.n_expert
        m[f"{a}.expert_used_count"] = s.n_expert_used
        if a == "lfm2moe":
            m[f"{a}.expert_feed_forward_length"] = s.n_ff_exp
            m[f"{a}.leading_dense_block_count"] = next(il for il in range(s.n_layer) if s.is_moe(il))
            m[f"{a}.expert_gating_func"] = EXPERT_GATING_SIGMOID
        if a == "granitehybrid" and s.n_ff_shexp:
            m[f"{a}.expert_shared_feed_forward_length"] = s.n_ff_shexp
        if a in DELTA_NET:
            m[f"{a}.expert_feed_forward_length"] = s.n_ff_exp
            m[f"{a}.expert_shared_feed_forward_length"] = s.n_ff_shexp
        if a == "nemotron_h_moe":  # conversion/nemotron.py NemotronHModel.set_gguf_parameters
            m[f"{a}.expert_feed_forward_length"] = s.n_ff_exp
            m[f"{a}.expert_shared_feed_forward_length"] = s.n_ff_shexp
            m[f"{a}.expert_shared_count"] = s.n_expert_shared
            m[f"{a}.expert_weights_norm"] = s.expert_weights_norm
            m[f"{a}.expert_weights_scale"] = float(s.expert_weights_scale)
            m[f"{a}.expert_group_count"] = s.n_expert_group
    if a in DELTA_NET:
        m[f"{a}.full_attention_interval"] = s.full_attention_interval
    if a in ("qwen35", "qwen35moe"):
        # multi-axis rope sections (llama.cpp requires 4); text-only use sees the first
        quarter = s.head_dim // 2
        m[f"{a}.rope.dimension_sections"] = [quarter - quarter // 3 * 2, quarter // 3, quarter // 3, 0]
    return m


N_ALTUP = 4
LAUREL_RANK = 64
N_EMBD_ALTUP = 256
KV_FROM_START = 20  # hparams.n_layer_kv_from_start for gemma3n


def plan_gemma3n_tensors(
    *, ftype: str, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, head_dim: int,
    n_ff: int, n_vocab: int,
) -> list[TensorPlan]:
    """Every tensor llama.cpp's gemma3n loader requires, with llama-quant's types (altup*,
    laurel* and per_layer_model_proj are never quantized; per_layer_token_embd follows the
    token embedding)."""
    ftype = _normalize_ftype(ftype)
    e = n_embd

    w, f32 = weight_planner(ftype, n_layer), f32_plan

    def norm(name: str, size: int) -> TensorPlan:
        return f32(name, (size,), "ones")

    plans = [
        w("token_embd.weight", (n_vocab, e), "output"),  # tied: it is the output too
        f32("altup_proj.weight", (N_ALTUP - 1, e, e)),
        f32("altup_unembd_proj.weight", (N_ALTUP - 1, e, e)),
        w("per_layer_token_embd.weight", (n_vocab, N_EMBD_ALTUP * n_layer), "token_embd"),
        f32("per_layer_model_proj.weight", (N_EMBD_ALTUP * n_layer, e)),
        norm("per_layer_proj_norm.weight", N_EMBD_ALTUP),
        norm("output_norm.weight", e),
    ]
    q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim
    for il in range(n_layer):
        b = f"blk.{il}."
        plans += [
            norm(b + "attn_norm.weight", e),
            w(b + "attn_q.weight", (q_dim, e), "attn_q", il),
            w(b + "attn_k.weight", (kv_dim, e), "attn_k", il),
            w(b + "attn_v.weight", (kv_dim, e), "attn_v", il),
            w(b + "attn_output.weight", (e, q_dim), "attn_output", il),
            norm(b + "attn_q_norm.weight", head_dim),
            norm(b + "attn_k_norm.weight", head_dim),
            norm(b + "post_attention_norm.weight", e),
            norm(b + "ffn_norm.weight", e),
            w(b + "ffn_gate.weight", (n_ff, e), "ffn_gate", il),
            w(b + "ffn_up.weight", (n_ff, e), "ffn_up", il),
            w(b + "ffn_down.weight", (e, n_ff), "ffn_down", il),
            norm(b + "post_ffw_norm.weight", e),
            w(b + "inp_gate.weight", (N_EMBD_ALTUP, e), "other", il),
            w(b + "proj.weight", (e, N_EMBD_ALTUP), "other", il),
            norm(b + "post_norm.weight", e),
            f32(b + "altup_correct_coef.weight", (N_ALTUP, N_ALTUP)),
            norm(b + "altup_correct_scale.weight", e),
            f32(b + "altup_predict_coef.weight", (N_ALTUP * N_ALTUP, N_ALTUP)),
            f32(b + "altup_router.weight", (N_ALTUP, e)),
            norm(b + "altup_router_norm.weight", e),
            f32(b + "laurel_l.weight", (LAUREL_RANK, e)),
            f32(b + "laurel_r.weight", (e, LAUREL_RANK)),
            norm(b + "laurel_post_norm.weight", e),
        ]
    return plans


def gemma3n_metadata(
    *, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, head_dim: int, n_ff: int,
    context_length: int, sliding_window: int, swa_pattern: list[bool] | None = None,
) -> dict[str, Any]:
    """The keys llama.cpp's gemma3n loader reads; swa_pattern (one bool per layer, from
    config.json's layer_types as the converter writes it) or llama.cpp's default of 5."""
    m: dict[str, Any] = {}
    m["gemma3n.context_length"] = context_length
    m["gemma3n.embedding_length"] = n_embd
    m["gemma3n.block_count"] = n_layer
    m["gemma3n.feed_forward_length"] = n_ff
    m["gemma3n.attention.head_count"] = n_head
    m["gemma3n.attention.head_count_kv"] = n_head_kv
    m["gemma3n.attention.key_length"] = head_dim
    m["gemma3n.attention.value_length"] = head_dim
    m["gemma3n.rope.dimension_count"] = head_dim
    m["gemma3n.attention.layer_norm_rms_epsilon"] = 1e-6
    m["gemma3n.rope.freq_base"] = 1_000_000.0
    m["gemma3n.rope.freq_base_swa"] = 10_000.0
    m["gemma3n.attention.sliding_window"] = sliding_window
    m["gemma3n.final_logit_softcapping"] = 30.0
    if swa_pattern is not None:
        m["gemma3n.attention.sliding_window_pattern"] = list(swa_pattern)
    return m
