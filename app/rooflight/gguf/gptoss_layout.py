"""gpt-oss's tensor layout and header keys, for the synthetic writer and spec_from_hparams.

From llama.cpp's loader (src/models/openai-moe.cpp, llama.cpp 0.3.36's vendored copy): per
block an RMS norm before attention and one after (post_attention_norm), Q/K/V/O projections
with biases, one attention-sink logit per head (attn_sinks, F32, [n_head]), a router with a
bias, and routed experts (gate, up, down) each with a per-expert bias. Attention alternates a
128-token sliding window (even layers) with full attention (load_swa_pattern(ml, 2)).

Weight types follow llama-quant.cpp: in an MXFP4_MOE file (the form OpenAI released and
ggml-org converts) the 3-D expert matrices are MXFP4 (32-element blocks of 4-bit E2M1
values with one shared E8M0 scale: 17 bytes per 32 weights, 4.25 bits per weight) and every
other matrix Q8_0 (quant_recipe.tensor_rows picks that by shape, as llama-quant does by
ne[2]); in other file types every matrix follows the file type's recipe by its role.
"""

from __future__ import annotations

ARCH = "gpt-oss"


def tensors(weight, norm, f32, *, n_layer: int, n_embd: int, n_head: int, n_head_kv: int,
            head_dim: int, n_ff: int, n_expert: int) -> list:
    """The per-block tensors (token_embd, output_norm and output come from the caller).

    weight(name, numpy_shape, role, layer), norm(name, size, layer) and f32(name, shape,
    layer) are quant_recipe.tensor_rows' own helpers, so the file type's recipe applies."""
    q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim
    out = []
    for i in range(n_layer):
        b = f"blk.{i}."
        out += [
            norm(b + "attn_norm.weight", n_embd, i),
            norm(b + "post_attention_norm.weight", n_embd, i),
            weight(b + "attn_q.weight", (q_dim, n_embd), "attn_q", i), f32(b + "attn_q.bias", (q_dim,), i),
            weight(b + "attn_k.weight", (kv_dim, n_embd), "attn_k", i), f32(b + "attn_k.bias", (kv_dim,), i),
            weight(b + "attn_v.weight", (kv_dim, n_embd), "attn_v", i), f32(b + "attn_v.bias", (kv_dim,), i),
            weight(b + "attn_output.weight", (n_embd, q_dim), "attn_output", i),
            f32(b + "attn_output.bias", (n_embd,), i),
            f32(b + "attn_sinks.weight", (n_head,), i),
            f32(b + "ffn_gate_inp.weight", (n_expert, n_embd), i), f32(b + "ffn_gate_inp.bias", (n_expert,), i),
            weight(b + "ffn_gate_exps.weight", (n_expert, n_ff, n_embd), "ffn_gate", i),
            f32(b + "ffn_gate_exps.bias", (n_expert, n_ff), i),
            weight(b + "ffn_up_exps.weight", (n_expert, n_ff, n_embd), "ffn_up", i),
            f32(b + "ffn_up_exps.bias", (n_expert, n_ff), i),
            weight(b + "ffn_down_exps.weight", (n_expert, n_embd, n_ff), "ffn_down", i),
            f32(b + "ffn_down_exps.bias", (n_expert, n_embd), i),
        ]
    return out


def add_header(writer, *, n_ff: int, sliding_window: int) -> None:
    writer.add_expert_feed_forward_length(n_ff)
    writer.add_sliding_window(sliding_window or 128)  # gpt-oss's window (config.json sliding_window)
    writer.add_rope_freq_base(150_000.0)
