"""MoE prompts: what a micro-batch's routed-expert matmuls cost beyond their multiply-adds.

In a micro-batch of T tokens each of a model's n_expert routed experts multiplies only the
tokens routed to it, about T x n_expert_used / n_expert (Qwen3-30B-A3B at T=512: 32 of 512;
gpt-oss-20b at T=2048: 256). llama.cpp's expert matmuls (MUL_MAT_ID) run one matmul per
expert on so few columns that their tiles are part empty, plus a fixed cost per expert; the
published prompt rows show it: the same GPU runs MoE prompts at half its dense rate at
T=512 and near it at T=2048 (bench/data/llama_bench_rows.json). The model here: each expert
touched costs as if it multiplied `overhead_tokens` more tokens (BackendConstants
.moe_expert_overhead_tokens, fitted per backend by bench/fit_constants.py).

On a CPU the routed experts go through MUL_MAT_ID (ggml-cpu: vec_dot in 16x16 blocks, or the
repacked GEMM for the types repack.cpp handles), not the MUL_MAT kernels a probe measures on
dense models and the CPU tables were fitted on: each routed multiply-add costs
cpu_expert_cost(type) dense ones.
"""

from __future__ import annotations

from collections.abc import Mapping

from rooflight.estimate import gpu_tiles
from rooflight.estimate.tensor_rates import FLOAT_TYPES
from rooflight.gguf.spec import ModelSpec


def experts_touched(spec: ModelSpec, n_tokens: int) -> float:
    """Expected distinct routed experts a micro-batch of n_tokens reaches (uniform routing)."""
    if spec.n_expert <= 0 or spec.n_expert_used <= 0:
        return 0.0
    miss = 1.0 - min(1.0, spec.n_expert_used / spec.n_expert)  # a file may claim more used than there are
    return spec.n_expert * (1.0 - miss ** max(0, n_tokens))


def overhead_multiply_adds(spec: ModelSpec, routed_params: float, n_tokens: int, overhead_tokens: float,
                           tile: int | None = None) -> float:
    """Multiply-adds a micro-batch of n_tokens pays beyond its routed-expert work.
    routed_params: the routed experts' multiply-adds per token (n_expert_used experts).
    tile: the columns each expert's tiles hold (expert_tile_columns), whose empty part is
    multiplied too; None: no tiling known for the kernel (only the fitted overhead)."""
    touched = experts_touched(spec, n_tokens)  # 0 for a dense model
    if not touched or routed_params <= 0:
        return 0.0
    per_expert = routed_params / spec.n_expert_used
    columns = touched * max(0.0, overhead_tokens)
    if tile:
        columns += padding_columns(spec.n_expert, spec.n_expert_used, n_tokens, tile)
    return per_expert * columns


def expert_tile_columns(backend: str | None, gfx: str | None, n_tokens: int, spec: ModelSpec) -> int | None:
    """The column width of the tiles a GPU's expert matmuls multiply a micro-batch of
    n_tokens in (gpu_tiles.py; on CUDA and ROCm: MMQ's, for quantized experts; the caller
    knows whether MMQ runs them), or None where the kernel's tiling is not modelled (SYCL,
    CPUs).

    CUDA and ROCm (ggml-cuda/mmq.cu ggml_cuda_mul_mat_q with ids): the tile width J is picked
    to cover `ncols_opt` columns in the fewest tiles, ncols_opt being the whole micro-batch,
    except on RDNA3/RDNA4, where it is the tokens an expert gets on average, as on Vulkan.
    Every expert's tokens are then multiplied in whole tiles: with J = 128 and Qwen3-30B-A3B's
    32 tokens per expert at T = 512, four times its work."""
    if n_tokens <= 0 or spec.n_expert <= 0:
        return None
    if backend == "metal":
        return gpu_tiles.METAL_ID_TILE if n_tokens >= gpu_tiles.METAL_ID_MIN_TOKENS else None
    if backend not in ("cuda", "rocm", "vulkan"):
        return None
    per_expert_average = backend == "vulkan" or (
        backend == "rocm" and bool(gfx) and str(gfx).lower().startswith(("gfx11", "gfx12")))
    cols = -(-n_tokens * spec.n_expert_used // spec.n_expert) if per_expert_average else n_tokens
    return gpu_tiles.tile_columns(backend, cols)


def padding_columns(n_expert: int, n_expert_used: int, n_tokens: int, tile: int) -> float:
    """Expected columns all experts' tiles hold beyond their tokens in a micro-batch of
    n_tokens, each expert getting Binomial(n_tokens, used / experts) of them (uniform routing):
    n_expert x tile x E[ceil(X / tile)] - n_tokens x used."""
    used = min(n_expert_used, n_expert)
    return max(0.0, n_expert * tile * gpu_tiles.expected_tiles(n_expert, used, n_tokens, tile) - n_tokens * used)


# CPU MUL_MAT_ID cost per multiply-add against the dense kernels, by expert weight type: fitted
# by bench/moe_prompt_cpu.py --fit on one generated Qwen3-MoE shape (32 experts, 4 used) on
# the project's 2-core Zen 4 VM, checked on another (128 experts, 8 used). Types not measured
# take the value of their class (an assumption: float types F16's, quantized the mean of Q8_0
# and Q4_0's). Machine-specific: the same fit on a Zen 5 VM gave F16 2.38, Q8_0 1.94, Q4_0
# 2.86, so a probe measures this machine's (MachineProbe.expert_costs), and these price only
# machines without one.
CPU_EXPERT_COST = {"F16": 2.71, "Q8_0": 1.41, "Q4_0": 1.65}


def cpu_expert_cost(ggml_type: str, measured: Mapping[str, float] | None = None) -> float:
    """MUL_MAT_ID cost per routed multiply-add of this type, in dense ones. measured: a probe's
    figures for this machine (MachineProbe.expert_costs), which stand before the table's; a
    type the probe did not measure takes the mean of the measured types of its class (float
    or quantized), else the table's."""
    kind = ggml_type.upper()
    if measured:
        if kind in measured:
            return measured[kind]
        alike = [v for k, v in measured.items() if (k in FLOAT_TYPES) == (kind in FLOAT_TYPES)]
        if alike:
            return sum(alike) / len(alike)
    if kind in CPU_EXPERT_COST:
        return CPU_EXPERT_COST[kind]
    if kind in FLOAT_TYPES:
        return CPU_EXPERT_COST["F16"]
    return (CPU_EXPERT_COST["Q8_0"] + CPU_EXPERT_COST["Q4_0"]) / 2


def cpu_extra_by_type(routed_by_type: dict[str, float], measured: Mapping[str, float] | None = None) -> dict[str, float]:
    """The multiply-adds a CPU pays beyond the dense price of these routed-expert elements
    (measured: as cpu_expert_cost)."""
    return {k: n * (cpu_expert_cost(k, measured) - 1.0) for k, n in routed_by_type.items() if n > 0}
