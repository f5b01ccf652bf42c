"""CPU prompts: what a weight costs depends on its matrix's shape, not on its count alone.

A probe measures each weight type's prompt (matrix-matrix) rate on one model 1024 wide, and
a model of another width was priced per weight at that rate. On this project's VM a weight
costs more on narrow models and less on wide ones, for every type (bench/probe_width.py:
x1.15-1.24 at 512 wide, x0.79-0.92 at 2048-3072, against 1024): besides its multiply-adds,
a matmul does work per row and per column (quantizing the activations it multiplies, per
input element and token; accumulating and storing each output, per output element and
token; splitting the rows among the threads and joining them). So each [n_in x n_out]
matrix costs as if it had EDGE_ELEMENTS more rows and more columns: n_in x n_out +
EDGE_ELEMENTS x (n_in + n_out). EDGE_ELEMENTS is fitted on the sweep's shapes
(`python bench/probe_width.py --fit-edges`), never on the shapes bench/accuracy_probe.py
checks the estimate on.
"""

from __future__ import annotations

from rooflight.gguf.derived import derived
from rooflight.gguf.spec import ModelSpec

# Fitted by bench/probe_width.py --fit-edges on the project's 2-core VM (README "This machine
# after a probe"); assumed for other probed machines, whose probe measures one width.
EDGE_ELEMENTS = 90.0

# The probe's prompt model (runtime/probe.py): one block's matrices as (n_in, n_out).
PROBE_PROMPT_SHAPE = dict(n_embd=1024, n_head=8, n_head_kv=8, head_dim=128, n_ff=2816)


def _block_matrices(n_embd: int, n_head: int, n_head_kv: int, head_dim: int, n_ff: int) -> list[tuple[int, int]]:
    q, kv = n_head * head_dim, n_head_kv * head_dim
    return [(n_embd, q), (n_embd, kv), (n_embd, kv), (q, n_embd), (n_embd, n_ff), (n_embd, n_ff), (n_ff, n_embd)]


def _factor(matrices: list[tuple[int, int]], edge: float) -> float:
    """Cost of these matrices with the edge term, per multiply-add without it."""
    elements = sum(a * b for a, b in matrices)
    return (elements + edge * sum(a + b for a, b in matrices)) / elements if elements else 1.0


def _spec_sums(spec: ModelSpec) -> tuple[float, float]:
    """(multiply-adds, rows + columns) summed over a model's dense block matrices (routed
    experts left out: each multiplies only its share of the tokens, which moe_prompt.py
    prices on GPUs)."""
    mats = [(t.shape[0], t.shape[1]) for t in spec.tensors
            if t.layer is not None and len(t.shape) == 2 and not t.is_expert and min(t.shape) > 1]
    return float(sum(a * b for a, b in mats)), float(sum(a + b for a, b in mats))


def relative_cost(spec: ModelSpec, edge: float | None = None) -> float:
    """What a prompt weight of this model costs against one of the probe's prompt model:
    1.0 at the probe's shape, above 1 for narrower models, below for wider."""
    edge = EDGE_ELEMENTS if edge is None else edge
    elements, edges = derived(spec, "matrix_sums", _spec_sums)
    if not edge or not elements:
        return 1.0
    return (1.0 + edge * edges / elements) / _factor(_block_matrices(**PROBE_PROMPT_SHAPE), edge)
