"""The quantization recipe: which tensors a GGUF file of an architecture holds and which
type llama.cpp's quantizer (src/llama-quant.cpp) gives each for a file type, with its
fallbacks for rows a 256-wide K-quant block does not divide. It sizes every catalog file
before a download (gguf/from_hparams.py) and lays out the random-weight test models
(gguf/synthetic.py), so both follow one recipe.

Pure Python on purpose: no numpy and no gguf package, which `rooflight rank` would
otherwise import (a third of its start-up) only to multiply a few shapes. The type ids
and block sizes below are ggml's (ggml.h, as the gguf package's GGMLQuantizationType,
GGML_QUANT_SIZES and LlamaFileType carry them); tests/test_quant_recipe.py checks every
one against the gguf package.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from rooflight.gguf import gptoss_layout

ARCHITECTURES = ("llama", "gemma3", "qwen3moe", "gpt-oss", "llama4")


class GGMLType(IntEnum):
    """The ggml tensor types the recipe uses (values: enum ggml_type in ggml.h)."""

    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    IQ4_XS = 23
    BF16 = 30
    MXFP4 = 39
    NVFP4 = 40


# (elements per block, bytes per block): ggml's type traits
GGML_BLOCK_SIZES: dict[GGMLType, tuple[int, int]] = {
    GGMLType.F32: (1, 4),
    GGMLType.F16: (1, 2),
    GGMLType.Q4_0: (32, 18),
    GGMLType.Q4_1: (32, 20),
    GGMLType.Q5_0: (32, 22),
    GGMLType.Q5_1: (32, 24),
    GGMLType.Q8_0: (32, 34),
    GGMLType.Q4_K: (256, 144),
    GGMLType.Q5_K: (256, 176),
    GGMLType.Q6_K: (256, 210),
    GGMLType.BF16: (1, 2),
    GGMLType.IQ4_XS: (256, 136),
    GGMLType.MXFP4: (32, 17),
    GGMLType.NVFP4: (64, 36),
}


class FileType(IntEnum):
    """general.file_type values (enum llama_ftype in llama.h) of the file types supported."""

    ALL_F32 = 0
    MOSTLY_F16 = 1
    MOSTLY_Q4_0 = 2
    MOSTLY_Q4_1 = 3
    MOSTLY_Q8_0 = 7
    MOSTLY_Q5_0 = 8
    MOSTLY_Q5_1 = 9
    MOSTLY_Q4_K_S = 14
    MOSTLY_Q4_K_M = 15
    MOSTLY_Q5_K_S = 16
    MOSTLY_Q5_K_M = 17
    MOSTLY_Q6_K = 18
    MOSTLY_IQ4_XS = 30
    MOSTLY_BF16 = 32
    MOSTLY_MXFP4_MOE = 38
    MOSTLY_NVFP4 = 39


Q = GGMLType
TYPE_NAMES = {t: t.name for t in GGMLType}  # Enum.name is a descriptor: slow ~100k times over

# ftype name -> (general.file_type, the tensor type a 2-D weight gets before llama-quant's
# per-tensor adjustments). Same table as llama_ftype_get_default_type() in llama-quant.cpp.
FILE_TYPES: dict[str, tuple[FileType, GGMLType]] = {
    "F32": (FileType.ALL_F32, Q.F32),
    "F16": (FileType.MOSTLY_F16, Q.F16),
    "BF16": (FileType.MOSTLY_BF16, Q.BF16),
    "Q8_0": (FileType.MOSTLY_Q8_0, Q.Q8_0),
    "Q4_0": (FileType.MOSTLY_Q4_0, Q.Q4_0),
    "Q4_1": (FileType.MOSTLY_Q4_1, Q.Q4_1),
    "Q5_0": (FileType.MOSTLY_Q5_0, Q.Q5_0),
    "Q5_1": (FileType.MOSTLY_Q5_1, Q.Q5_1),
    "Q4_K_S": (FileType.MOSTLY_Q4_K_S, Q.Q4_K),
    "Q4_K_M": (FileType.MOSTLY_Q4_K_M, Q.Q4_K),
    "Q5_K_S": (FileType.MOSTLY_Q5_K_S, Q.Q5_K),
    "Q5_K_M": (FileType.MOSTLY_Q5_K_M, Q.Q5_K),
    "Q6_K": (FileType.MOSTLY_Q6_K, Q.Q6_K),
    # NVFP4 files come from convert_hf_to_gguf.py on ModelOpt / compressed-tensors NVFP4
    # checkpoints, not from llama-quantize: see _weight_type for what it keeps in 16 bits
    # (pure=True writes every matrix in NVFP4 instead, for the machine probe)
    "NVFP4": (FileType.MOSTLY_NVFP4, Q.NVFP4),
    # gpt-oss as released: experts MXFP4, every other matrix Q8_0 (gguf/gptoss_layout.py)
    "MXFP4_MOE": (FileType.MOSTLY_MXFP4_MOE, Q.MXFP4),
}
# Written as single-type files only (pure=True): llama-quant's mixtures for these are not
# modelled here. The machine probe (runtime/probe.py) times their kernels.
PURE_FILE_TYPES: dict[str, tuple[FileType, GGMLType]] = {
    "IQ4_XS": (FileType.MOSTLY_IQ4_XS, Q.IQ4_XS),
    "MXFP4": (FileType.MOSTLY_MXFP4_MOE, Q.MXFP4),
    "NVFP4": (FileType.MOSTLY_NVFP4, Q.NVFP4),
}
_ALL_FILE_TYPES = {**FILE_TYPES, **PURE_FILE_TYPES}
# Bare K-quant names mean the "_M" mixture, the one people download.
_FTYPE_ALIASES = {"Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M", "FP16": "F16", "FP32": "F32"}


@dataclass(frozen=True)
class TensorPlan:
    """One tensor of the file to write."""

    name: str
    shape: tuple[int, ...]  # numpy order (outermost first): the reverse of GGUF's (ne0, ne1, ...)
    qtype: GGMLType
    init: str  # "normal", "ones", or "output" (normal, special-token rows zeroed)

    @property
    def ne(self) -> tuple[int, ...]:
        """Shape in GGUF/ggml order (ne0 first), as GGUFReader and llama.cpp report it."""
        return tuple(reversed(self.shape))

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)  # Python ints: exact, and ~10x faster than numpy on a tuple

    @property
    def n_bytes(self) -> int:
        return tensor_nbytes(self.n_elements, self.qtype)


def type_block_size(type_name: str) -> tuple[int, int]:
    """(elements, bytes) per block of a ggml type by name; (1, 2) for a name ggml lacks.
    The recipe's own types need no import of the gguf package (and numpy, yaml under it)."""
    name = type_name.upper()
    if name in GGMLType.__members__:
        return GGML_BLOCK_SIZES[GGMLType[name]]
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        return GGML_QUANT_SIZES[GGMLQuantizationType[name]]
    except KeyError:
        return 1, 2


def tensor_nbytes(n_elements: int, qtype: GGMLType) -> int:
    """Bytes a tensor of n_elements takes in the file (without alignment padding)."""
    block_size, type_size = GGML_BLOCK_SIZES[qtype]
    if n_elements % block_size:
        raise ValueError(f"{n_elements} elements do not fill whole {qtype.name} blocks")
    return n_elements // block_size * type_size


# --------------------------------------------------------------------------------------------
# tensor list and per-tensor types
# --------------------------------------------------------------------------------------------


def normalize_ftype(ftype: str) -> str:
    name = _FTYPE_ALIASES.get(ftype.upper(), ftype.upper())
    if name not in _ALL_FILE_TYPES:
        raise ValueError(f"unsupported ftype {ftype!r}; choose one of {', '.join(_ALL_FILE_TYPES)}")
    return name



def _use_more_bits(i_layer: int, n_layer: int) -> bool:
    # llama-quant.cpp: the layers that the "_M" mixtures give extra bits to
    return (
        i_layer < n_layer // 8
        or i_layer >= 7 * n_layer // 8
        or (i_layer - n_layer // 8) % 3 == 2
    )


# llama-quant.cpp tensor_type_fallback(): the type a tensor gets when its rows (ne0) do not
# fill whole blocks of the type it was meant to get. A 32-block type keeps itself; either way
# F16 where the result does not fit. NVFP4 (64-blocks) has no fallback there (llama-quantize
# stops): Q8_0 stands in.
_FALLBACK_TYPES = {
    **dict.fromkeys(("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_XS"), "IQ4_NL"),
    **dict.fromkeys(("Q2_K", "Q3_K", "TQ1_0", "TQ2_0"), "Q4_0"),
    "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0", "NVFP4": "Q8_0",
}
_IQ4_NL_BLOCK = 32  # the one fallback outside the recipe's types: known here, so no gguf import


def fallback_type(type_name: str, ne0: int) -> str:
    """tensor_type_fallback() by type name: `type_name` where ne0 fills its blocks, else its
    fallback, else F16."""
    for name in (type_name, _FALLBACK_TYPES.get(type_name, type_name)):
        if ne0 % (_IQ4_NL_BLOCK if name == "IQ4_NL" else type_block_size(name)[0]) == 0:
            return name
    return "F16"


def _fallback(qtype: GGMLType, ne0: int) -> GGMLType:
    """fallback_type for the recipe's types; IQ4_NL, which the writer cannot write, as Q4_0
    (the same 4.5 bits in 32-blocks)."""
    name = fallback_type(TYPE_NAMES[qtype], ne0)
    return Q.Q4_0 if name == "IQ4_NL" else GGMLType[name]


def _weight_type(
    ftype: str, role: str, ne0: int, layer: int, n_layer: int, n_expert: int, pure: bool = False
) -> GGMLType:
    """Type of one 2-D/3-D weight, following llama_tensor_get_type_impl() for our ftypes.

    role: "output" (also a tied token_embd), "token_embd", "attn_q", "attn_k", "attn_v",
    "attn_output", "ffn_gate", "ffn_up", "ffn_down" (dense or experts).
    """
    base = _ALL_FILE_TYPES[ftype][1]
    if base in (Q.F32, Q.F16, Q.BF16):
        return base  # unquantized files keep every matrix in the file's float type
    if pure:  # llama-quantize --pure: every matrix in the base type (fallbacks aside)
        return _fallback(base, ne0)
    if base == Q.NVFP4:
        # the converter repacks the checkpoint's NVFP4 linear layers (the blocks' matrices;
        # ModelOpt leaves embeddings and the LM head unquantized) and writes the rest in
        # its 16-bit outtype (conversion/base.py _generate_nvfp4_tensors)
        if role in ("output", "token_embd") or ne0 % GGML_BLOCK_SIZES[Q.NVFP4][0]:
            return Q.F16
        return Q.NVFP4
    new = base
    if role == "output":
        if ne0 % GGML_BLOCK_SIZES[base][0] != 0:
            new = Q.Q8_0
        elif base != Q.Q8_0:
            new = Q.Q6_K
    elif role == "attn_v":
        if ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(layer, n_layer):
            new = Q.Q6_K
        elif ftype == "Q4_K_S" and layer < 4:
            new = Q.Q5_K
        if n_expert == 8:
            new = Q.Q8_0
    elif role == "attn_k":
        if n_expert == 8:
            new = Q.Q8_0
    elif role == "ffn_down":
        if ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(layer, n_layer):
            new = Q.Q6_K
        elif ftype == "Q4_K_S" and layer < n_layer // 8:
            new = Q.Q5_K
    elif role == "attn_output":
        if n_expert == 8 and ftype in ("Q4_K_S", "Q4_K_M"):
            new = Q.Q5_K
    return _fallback(new, ne0)


class TensorRow(NamedTuple):
    """One tensor of the recipe, as plain values (what both the writer's TensorPlan and the
    estimator's TensorInfo are made from)."""

    name: str
    shape: tuple[int, ...]  # numpy order (outermost first)
    qtype: GGMLType
    init: str  # "normal", "ones", or "output"
    layer: int | None  # block index of "blk.N.*", None for the others
    n_bytes: int


_BY_LAYER = ("attn_v", "ffn_down")  # the roles whose type _weight_type picks per block


def tensor_rows(
    *,
    arch: str,
    ftype: str,
    n_layer: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    head_dim: int,
    n_ff: int,
    n_vocab: int,
    n_expert: int = 0,
    tie_embeddings: bool = False,
    pure: bool = False,
    n_ff_exp: int = 0,
    moe_layer_step: int = 1,
) -> list[TensorRow]:
    """Every tensor llama.cpp's loader requires for this architecture, with its file type
    and size. Blocks repeat: a type and a size are worked out once per distinct one (the
    catalog sizes ~100k tensors this way when `rooflight rank` starts). llama4: every
    moe_layer_step-th block routes to experts of n_ff_exp beside a shared expert of the same
    width, the others are dense of n_ff (src/models/llama4.cpp load_arch_tensors)."""
    ftype = normalize_ftype(ftype)
    if ftype in PURE_FILE_TYPES and ftype not in FILE_TYPES and not pure:
        raise ValueError(f"{ftype} files are written with pure=True only (one type for every matrix)")
    types: dict[tuple, GGMLType] = {}
    sizes: dict[tuple, int] = {}

    def row(name: str, shape: tuple[int, ...], qtype: GGMLType, init: str, layer: int | None) -> TensorRow:
        key = (shape, qtype)
        n = sizes.get(key)
        if n is None:
            n = sizes[key] = tensor_nbytes(math.prod(shape), qtype)
        return TensorRow(name, shape, qtype, init, layer, n)

    def weight(name: str, shape: tuple[int, ...], role: str, layer: int | None = None) -> TensorRow:
        if ftype == "MXFP4_MOE":  # llama-quant: 3-D (expert) tensors MXFP4, every other matrix Q8_0
            qtype = _fallback(Q.MXFP4 if len(shape) == 3 else Q.Q8_0, shape[-1])
            return row(name, shape, qtype, "output" if role == "output" else "normal", layer)
        at = 0 if layer is None else layer
        # only these roles' types depend on the block (_weight_type): the rest repeat
        key = (role, shape[-1], at if role in _BY_LAYER else 0)
        cached = types.get(key)
        if cached is None:
            cached = types[key] = _weight_type(ftype, role, shape[-1], at, n_layer, n_expert, pure)
        return row(name, shape, cached, "output" if role == "output" else "normal", layer)

    def norm(name: str, size: int, layer: int | None = None) -> TensorRow:
        return row(name, (size,), Q.F32, "ones", layer)  # llama.cpp wants 1-D tensors in F32

    rows = [
        weight("token_embd.weight", (n_vocab, n_embd), "output" if tie_embeddings else "token_embd"),
        norm("output_norm.weight", n_embd),
    ]
    if not tie_embeddings:
        rows.append(weight("output.weight", (n_vocab, n_embd), "output"))

    if arch == gptoss_layout.ARCH:
        return rows + gptoss_layout.tensors(
            weight, norm, lambda name, shape, i: row(name, shape, Q.F32, "normal", i), n_layer=n_layer,
            n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim, n_ff=n_ff, n_expert=n_expert)
    q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim
    for i in range(n_layer):
        b = f"blk.{i}."
        rows += [
            norm(b + "attn_norm.weight", n_embd, i),
            weight(b + "attn_q.weight", (q_dim, n_embd), "attn_q", i),
            weight(b + "attn_k.weight", (kv_dim, n_embd), "attn_k", i),
            weight(b + "attn_v.weight", (kv_dim, n_embd), "attn_v", i),
            weight(b + "attn_output.weight", (n_embd, q_dim), "attn_output", i),
        ]
        if arch in ("gemma3", "qwen3moe"):
            rows += [norm(b + "attn_q_norm.weight", head_dim, i), norm(b + "attn_k_norm.weight", head_dim, i)]
        if arch == "gemma3":
            rows += [
                norm(b + "post_attention_norm.weight", n_embd, i),
                norm(b + "post_ffw_norm.weight", n_embd, i),
            ]
        rows.append(norm(b + "ffn_norm.weight", n_embd, i))
        # routed experts: every block of a MoE, every moe_layer_step-th of llama4 (whose
        # experts and shared expert are n_ff_exp wide, its dense blocks n_ff)
        routed = (moe_layer_step > 0 and (i + 1) % moe_layer_step == 0) if arch == "llama4" else bool(n_expert)
        if routed:
            width = n_ff_exp if arch == "llama4" else n_ff
            # the router stays F32 in every file type (llama-quant never quantizes ffn_gate_inp)
            rows.append(row(b + "ffn_gate_inp.weight", (n_expert, n_embd), Q.F32, "normal", i))
            rows += [
                weight(b + "ffn_gate_exps.weight", (n_expert, width, n_embd), "ffn_gate", i),
                weight(b + "ffn_up_exps.weight", (n_expert, width, n_embd), "ffn_up", i),
                weight(b + "ffn_down_exps.weight", (n_expert, n_embd, width), "ffn_down", i),
            ]
        shared = "_shexp" if routed and arch == "llama4" else ""  # llama4's shared expert, else the dense FFN
        if shared or not routed:
            width = n_ff_exp if shared else n_ff
            rows += [
                weight(b + f"ffn_gate{shared}.weight", (width, n_embd), "ffn_gate", i),
                weight(b + f"ffn_up{shared}.weight", (width, n_embd), "ffn_up", i),
                weight(b + f"ffn_down{shared}.weight", (n_embd, width), "ffn_down", i),
            ]
    return rows


def plan_tensors(**kwargs) -> list[TensorPlan]:
    """tensor_rows() as the writer's TensorPlans (same arguments)."""
    return [TensorPlan(r.name, r.shape, r.qtype, r.init) for r in tensor_rows(**kwargs)]
