"""MoE prompts: what a micro-batch's routed-expert matmuls cost beyond their multiply-adds.

In a micro-batch of T tokens each of a model's n_expert routed experts multiplies only the
tokens routed to it, about T x n_expert_used / n_expert (Qwen3-30B-A3B at T=512: 32 of 512;
gpt-oss-20b at T=2048: 256). llama.cpp's expert matmuls (MUL_MAT_ID) run one matmul per
expert on so few columns that their tiles are part empty, plus a fixed cost per expert; the
published prompt rows show it: the same GPU runs MoE prompts at half its dense rate at
T=512 and near it at T=2048 (bench/data/llama_bench_rows.json). The model here: each expert
touched costs as if it multiplied `overhead_tokens` more tokens (BackendConstants
.moe_expert_overhead_tokens, fitted per backend by bench/fit_constants.py).
"""

from __future__ import annotations

from rooflight.gguf.spec import ModelSpec


def experts_touched(spec: ModelSpec, n_tokens: int) -> float:
    """Expected distinct routed experts a micro-batch of n_tokens reaches (uniform routing)."""
    if spec.n_expert <= 0 or spec.n_expert_used <= 0:
        return 0.0
    miss = 1.0 - min(1.0, spec.n_expert_used / spec.n_expert)  # a file may claim more used than there are
    return spec.n_expert * (1.0 - miss ** max(0, n_tokens))


def overhead_multiply_adds(spec: ModelSpec, routed_params: float, n_tokens: int, overhead_tokens: float) -> float:
    """Multiply-adds a micro-batch of n_tokens pays beyond its routed-expert work.
    routed_params: the routed experts' multiply-adds per token (n_expert_used experts)."""
    if not spec.n_expert or not spec.n_expert_used or routed_params <= 0 or overhead_tokens <= 0:
        return 0.0
    per_expert = routed_params / spec.n_expert_used
    return experts_touched(spec, n_tokens) * per_expert * overhead_tokens
