"""The RAM llama.cpp's AMX buffer holds a weight in, where the CPU has AMX and the build uses it.

On a Xeon with AMX (Sapphire Rapids and later), a llama.cpp built for the machine keeps every
weight its AMX kernels take in an "AMX" buffer, converted to their packed layout
(ggml-cpu/amx/mmq.cpp `ggml_backend_amx_get_alloc_size`): per row of K weights, the type's
blocks plus, for Q8_0, an int32 compensation per block (38 bytes for 34: +11.8%), for Q4_K and
Q5_K 4 bytes per block (+2.8%, +2.3%), for IQ4_XS 2 (+1.5%); Q4_0, Q4_1 and Q6_K keep their
size, and F16 is copied as it is. So a Q8_0 model needs about an eighth more RAM there than its
file. Which weights: the matrices of a plain matrix multiply (`supports_op` in amx.cpp:
GGML_OP_MUL_MAT, output rows a multiple of 32, rows a multiple of the type's alignment), so not
token_embd's row lookups, nor routed experts (MUL_MAT_ID), nor vectors; a tied output gets an
AMX copy of its own (llama-model-loader.cpp TENSOR_DUPLICATED), the plan's one count of it.
Checked against llama.cpp's own report with an AMX build that runs (README, "Intel CPUs with AMX").
"""

from __future__ import annotations

from rooflight.gguf.derived import derived
from rooflight.gguf.quant_recipe import type_block_size
from rooflight.gguf.spec import ModelSpec, TensorInfo
from rooflight.hardware.profile import CPUInfo

# what the layout costs, in the words the CLI and the app show (4 bytes on Q8_0's 34: +11.8%)
LAYOUT_COST_WORDS = "Q8_0 rows 12% larger than in the file"
# type: (bytes the AMX layout adds per block, the row alignment supports_op asks for)
_AMX_TYPES = {
    "Q4_0": (0, 32),
    "Q4_1": (0, 32),
    "Q8_0": (4, 32),  # an int32 compensation per block (do_compensate)
    "Q4_K": (4, 256),
    "Q5_K": (4, 256),
    "Q6_K": (0, 256),
    "IQ4_XS": (2, 256),
    "F16": (0, 16),
}
_OUTPUT_ROWS_MULTIPLE = 32  # amx.cpp: op->ne[0] % (TILE_N * 2)
# matrices llama.cpp reads rows of (GET_ROWS) or convolves, never multiplies by
_NOT_MULTIPLIED = ("token_embd.", "per_layer_token_embd.", "pos_embd.", "token_types.")


def keeps_amx_weights(cpu: CPUInfo) -> bool:
    """Whether llama.cpp keeps weights in its AMX buffer on this CPU: as detected
    (CPUInfo.amx_weights), else as a build for the machine would (ggml-cpu compiles the AMX
    buffer in with AMX-INT8 and AVX512-VNNI)."""
    if cpu.amx_weights is not None:
        return cpu.amx_weights
    return "amx_int8" in cpu.isa and "avx512_vnni" in cpu.isa


def amx_extra_bytes(t: TensorInfo, *, as_output: bool = False) -> int:
    """What the AMX buffer adds to this tensor's file bytes, 0 where AMX does not take it.
    as_output: token_embd as a tied model's output matrix (then it is multiplied)."""
    fmt = _AMX_TYPES.get(t.ggml_type.upper())
    if fmt is None or len(t.shape) != 2 or "conv1d" in t.name:
        return 0
    if t.name.startswith(_NOT_MULTIPLIED) and not as_output:
        return 0
    extra, alignment = fmt
    k, n = t.shape
    if not extra or n % _OUTPUT_ROWS_MULTIPLE or k % alignment:
        return 0
    return n * (k // type_block_size(t.ggml_type)[0]) * extra


def amx_padding(spec: ModelSpec) -> tuple[tuple[int, ...], int]:
    """(bytes the AMX layout adds per block, to the output layer), computed once per spec."""
    return derived(spec, "amx_padding", _build)


def _build(spec: ModelSpec) -> tuple[tuple[int, ...], int]:
    from rooflight.estimate.layers import OUTPUT, tensor_slot

    slot = tensor_slot(spec)  # the blocks and output layer the memory plan counts tensors in
    per_layer = [0] * spec.n_layer
    output = 0
    for t in spec.tensors:
        extra = amx_extra_bytes(t)
        if not extra:
            continue
        where = slot(t)
        if isinstance(where, int):
            per_layer[where] += extra
        elif where == OUTPUT:
            output += extra
    if spec.tied_embeddings and (embd := spec.tensor("token_embd.weight")) is not None:
        output += amx_extra_bytes(embd, as_output=True)
    return tuple(per_layer), output
