"""How many times a GPU's quantized prompt matmuls read their weights per micro-batch.

llama.cpp's quantized matrix-matrix kernels tile the output: a block multiplies a tile of
weight rows with a tile of J token columns, loading both into shared memory, so the weights
are read once per column tile, ceil(T / J) times for a micro-batch of T tokens (ggml-cuda
mmq.cuh: J up to 128, picked in mul_mat_q_switch_J; ggml-vulkan: the large tile, 128 columns,
from 65 tokens on). A routed expert's weights are read once per tile of its own tokens
(gpu_tiles.expected_tiles), not at all when no token reaches it.

The estimate adds that reading to the kernels' arithmetic instead of taking the longer of
the two: MMQ loads each tile into shared memory and then multiplies it, with a barrier
between (mmq.cuh mul_mat_q_process_tile: load_tiles, __syncthreads, vec_dot; no
asynchronous copies), and the reading is priced at the table's peak bandwidth, as if no
re-read were served by the L2. The term is llama.cpp's
tiling, not a fitted constant; checked leave-one-device-out on the published rows
(bench/fit_constants.py, README "Accuracy"): prompt median error CUDA 25% -> 13%, ROCm 24%
-> 19%, Vulkan 13% -> 13% (p90 33% -> 27%), the GPU backends 18.5% -> 14.5%. Not applied
where it priced worse when tried: cuBLAS's F16 GEMMs (F16 weights, and quantized weights
dequantized for it), which overlap their loads, and Metal (at 32-column tiles its prompts
went from 7% to 10% median error: Apple's system-level cache serves the re-reads).
"""

from __future__ import annotations

from dataclasses import dataclass

from rooflight.estimate import gpu_tiles, moe_prompt
from rooflight.estimate.tensor_rates import MMVQ_MAX_BATCH_SIZE
from rooflight.gguf.spec import ModelSpec

# backends whose quantized prompt matmuls are tiled this way
TILED_BACKENDS = frozenset({"cuda", "rocm", "vulkan"})


@dataclass(frozen=True)
class WeightPasses:
    """Reads of each weight per micro-batch: a dense one's and a routed expert's (the
    expected value over the routing)."""

    dense: float
    expert: float


def weight_passes(backend: str, gfx: str | None, n_tokens: int, spec: ModelSpec) -> WeightPasses | None:
    """How many times the tiled kernels read each weight for a micro-batch of n_tokens, or
    None where the weights are not multiplied by such kernels (see the module docstring;
    the caller knows whether MMQ runs them on CUDA and ROCm): below MMVQ's batch sizes each
    weight is read once by the matrix-vector kernels."""
    if backend not in TILED_BACKENDS or n_tokens <= MMVQ_MAX_BATCH_SIZE:
        return None
    dense = -(-n_tokens // gpu_tiles.tile_columns(backend, n_tokens))
    expert = 0.0
    if spec.n_expert and spec.n_expert_used:
        tile = moe_prompt.expert_tile_columns(backend, gfx, n_tokens, spec)
        if tile:
            expert = gpu_tiles.expected_tiles(spec.n_expert, spec.n_expert_used, n_tokens, tile)
    return WeightPasses(float(dense), expert)
