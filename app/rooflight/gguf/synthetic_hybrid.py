"""Tiny random-weight GGUF files of hybrid recurrent/attention architectures.

Like synthetic.py (whose vocabulary, quantization and streaming writer this reuses), but
for the architectures whose layers keep a recurrent state: LFM2 (short convolutions),
Granite 4 (granitehybrid) and Nemotron-H (Mamba-2 mixers), Jamba (Mamba-1 mixers with
MoE), Qwen3-Next (gated delta-net). Each tensor list and each metadata key is the one that
architecture's `load_arch_hparams` / `load_arch_tensors` in the llama.cpp vendored by
llama-cpp-python 0.3.36 (src/models/<arch>.cpp) requires, so llama.cpp loads these files
and allocates for them what it would for a real model of that shape. The per-layer
layout is given as arrays (`n_head_kv`, `n_ff`), exactly as the converters write them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import ExpertGatingFuncType, GGUFWriter
from gguf import quants as gguf_quants

from rooflight.gguf.synthetic import (
    BOS_ID,
    EOS_ID,
    FILE_TYPES,
    MINIMAL_VOCAB_SIZE,
    UNK_ID,
    WEIGHT_STD,
    Q,
    TensorPlan,
    _normalize_ftype,
    _tensor_bytes,
    _vocab,
    _weight_type,
)

HYBRID_ARCHITECTURES = ("lfm2", "lfm2moe", "granitehybrid", "nemotron_h", "jamba", "qwen3next", "qwen35", "qwen35moe")
DELTA_NET = ("qwen3next", "qwen35", "qwen35moe")  # gated delta-net layers, attention every Nth


@dataclass(frozen=True)
class HybridShape:
    """Hyper-parameters of a hybrid model, per layer where llama.cpp reads them per layer.

    n_head_kv[il] == 0 marks a recurrent layer (lfm2, granitehybrid, jamba); nemotron_h
    layers are recurrent when both n_head_kv and n_ff are 0, MLP-only when n_ff > 0;
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
        if self.arch == "nemotron_h":
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

    def w(name: str, shape_np: tuple[int, ...], role: str = "other", il: int = 0) -> TensorPlan:
        qtype = _weight_type(ftype, role, shape_np[-1], il, n_layer, s.n_expert)
        return TensorPlan(name, shape_np, qtype, "output" if role == "output" else "normal")

    def f32(name: str, shape_np: tuple[int, ...], init: str = "normal") -> TensorPlan:
        return TensorPlan(name, shape_np, Q.F32, init)

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
        elif s.arch == "nemotron_h":
            if recr:
                plans += mamba2()
            elif s.n_ff[il] == 0:
                plans += attention(q_dim)
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


def add_hybrid_metadata(writer: GGUFWriter, s: HybridShape) -> None:
    """The keys llama.cpp's loader reads for this hybrid, as its converter writes them."""
    a = s.arch
    writer.add_context_length(s.context_length)
    writer.add_embedding_length(s.n_embd)
    writer.add_block_count(s.n_layer)
    writer.add_feed_forward_length(list(s.n_ff) if a in ("nemotron_h",) else max(s.n_ff))
    writer.add_head_count(s.n_head)
    if a in DELTA_NET:
        writer.add_head_count_kv(max(s.n_head_kv))
    else:
        writer.add_head_count_kv(list(s.n_head_kv))
    writer.add_key_length(s.head_dim)
    writer.add_value_length(s.head_dim)
    writer.add_rope_dimension_count(s.head_dim)
    writer.add_rope_freq_base(10_000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    if a == "nemotron_h":
        writer.add_layer_norm_eps(1e-5)
    if a in ("lfm2", "lfm2moe"):
        writer.add_uint32(f"{a}.shortconv.l_cache", s.l_cache)
        if s.sliding_window:
            writer.add_sliding_window(s.sliding_window)
    else:
        writer.add_ssm_conv_kernel(s.ssm_d_conv)
        writer.add_ssm_inner_size(s.ssm_d_inner)
        writer.add_ssm_state_size(s.ssm_d_state)
        writer.add_ssm_time_step_rank(s.ssm_dt_rank)
        if a != "jamba":
            writer.add_ssm_group_count(s.ssm_n_group)
    if s.n_expert:
        writer.add_expert_count(s.n_expert)
        writer.add_expert_used_count(s.n_expert_used)
        if a == "lfm2moe":
            writer.add_expert_feed_forward_length(s.n_ff_exp)
            writer.add_leading_dense_block_count(next(il for il in range(s.n_layer) if s.is_moe(il)))
            writer.add_expert_gating_func(ExpertGatingFuncType.SIGMOID)
        if a == "granitehybrid" and s.n_ff_shexp:
            writer.add_expert_shared_feed_forward_length(s.n_ff_shexp)
        if a in DELTA_NET:
            writer.add_expert_feed_forward_length(s.n_ff_exp)
            writer.add_expert_shared_feed_forward_length(s.n_ff_shexp)
    if a in DELTA_NET:
        writer.add_full_attention_interval(s.full_attention_interval)
    if a in ("qwen35", "qwen35moe"):
        # multi-axis rope sections (llama.cpp requires 4); text-only use sees the first
        quarter = s.head_dim // 2
        writer.add_rope_dimension_sections([quarter - quarter // 3 * 2, quarter // 3, quarter // 3, 0])


def write_hybrid_model(
    path: str | os.PathLike[str],
    shape: HybridShape,
    *,
    ftype: str = "F16",
    seed: int = 0,
    name: str | None = None,
) -> Path:
    """Write a random-weight hybrid model that llama.cpp can load and run; return its path."""
    _check(shape)
    plans = plan_hybrid_tensors(shape, ftype)
    return write_plans(path, shape.arch, plans, lambda w: add_hybrid_metadata(w, shape), ftype=ftype,
                       n_vocab=shape.n_vocab, seed=seed, name=name)


def write_plans(
    path: str | os.PathLike[str],
    arch: str,
    plans: Sequence[TensorPlan],
    add_metadata,
    *,
    ftype: str,
    n_vocab: int,
    seed: int = 0,
    name: str | None = None,
) -> Path:
    """Write the tensors `plans` and the architecture's keys (add_metadata(writer)) with the
    synthetic SPM vocabulary, streaming one tensor at a time; nothing half-written is left."""
    ftype = _normalize_ftype(ftype)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(path, arch)
    try:
        writer.add_type("model")
        writer.add_name(name or f"synthetic-{arch}-{ftype}")
        writer.add_file_type(int(FILE_TYPES[ftype][0]))
        writer.add_quantization_version(2)
        add_metadata(writer)
        tokens, scores, types = _vocab(n_vocab)
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        writer.add_bos_token_id(BOS_ID)
        writer.add_eos_token_id(EOS_ID)
        writer.add_unk_token_id(UNK_ID)
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(False)
        for plan in plans:
            byte_shape = gguf_quants.quant_shape_to_byte_shape(plan.shape, plan.qtype)
            writer.add_tensor_info(plan.name, byte_shape, np.dtype(np.uint8), plan.n_bytes, raw_dtype=plan.qtype)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for plan in plans:
            writer.write_tensor_data(_tensor_bytes(plan, seed, WEIGHT_STD))
    except BaseException:
        writer.close()
        path.unlink(missing_ok=True)  # never leave a half-written model behind
        raise
    writer.close()
    return path


def layer_pattern(n_layer: int, attention_every: int, offset: int = 0) -> Sequence[bool]:
    """True where a layer is an attention layer: every `attention_every`-th from `offset`."""
    return [(il - offset) % attention_every == 0 for il in range(n_layer)]
