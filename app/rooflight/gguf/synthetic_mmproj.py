"""Tiny but real vision projectors (mmproj GGUF files), written from random weights.

A vision model in llama.cpp is two files: the language model and a projector that turns
an image into embeddings in the language model's input space. llama.cpp's mtmd library
(tools/mtmd/clip.cpp, which llama-cpp-python 0.3.36 ships as libmtmd) loads it.

The projector written here is Gemma 3's: a SigLIP vision tower (patch convolution,
learned position embeddings, pre-norm ViT blocks with biases, a final layer norm), then
an average pool of n_merge x n_merge patches, an RMS norm and one matrix to the language
model's n_embd (clip_graph_siglip::build, PROJECTOR_TYPE_GEMMA3). Keys and tensor names
are those of llama.cpp's converter (conversion/gemma.py Gemma3VisionModel, the
MmprojModel base, gguf-py's tensor map); which tensors stay F32 or F16 follows its
tensor_force_quant(). Pair it with a language model whose n_embd equals projection_dim
(mtmd refuses a mismatch), e.g. write_model(arch="gemma3", n_embd=projection_dim).
"""

from __future__ import annotations

import os
from pathlib import Path

from gguf import LlamaFileType

from rooflight.gguf.fast_writer import FastArrayWriter
from rooflight.gguf.quant_recipe import GGMLType
from rooflight.gguf.synthetic import TensorPlan, write_tensors

__all__ = ["PROJECTOR_FILE_TYPES", "plan_projector_tensors", "write_projector"]

Q = GGMLType  # the recipe's tensor types (TensorPlan's); the gguf package's enum for the writer

# The two variants vision repositories publish (mmproj-...-f16.gguf, mmproj-...-Q8_0.gguf).
PROJECTOR_FILE_TYPES = {
    "F16": (LlamaFileType.MOSTLY_F16, Q.F16),
    "Q8_0": (LlamaFileType.MOSTLY_Q8_0, Q.Q8_0),
}

# SigLIP's preprocessing (Gemma 3's preprocessor_config.json): pixels to [-1, 1]
_IMAGE_MEAN = [0.5, 0.5, 0.5]
_IMAGE_STD = [0.5, 0.5, 0.5]


def plan_projector_tensors(
    *, ftype: str, n_embd: int, n_ff: int, n_layer: int, image_size: int, patch_size: int,
    projection_dim: int,
) -> list[TensorPlan]:
    """Every tensor clip.cpp's loader reads for a Gemma 3 projector, with its file type."""
    if ftype not in PROJECTOR_FILE_TYPES:
        raise ValueError(f"unsupported projector ftype {ftype!r}; choose F16 or Q8_0")
    matrix = PROJECTOR_FILE_TYPES[ftype][1]
    n_patches = (image_size // patch_size) ** 2

    def vec(name: str, size: int, init: str = "normal") -> TensorPlan:
        return TensorPlan(name, (size,), Q.F32, init)

    plans = [
        # ".embeddings." tensors are forced to F32 by the converter
        TensorPlan("v.patch_embd.weight", (n_embd, 3, patch_size, patch_size), Q.F32, "normal"),
        vec("v.patch_embd.bias", n_embd),
        TensorPlan("v.position_embd.weight", (n_patches, n_embd), Q.F32, "normal"),
    ]
    for i in range(n_layer):
        b = f"v.blk.{i}."
        plans += [vec(b + "ln1.weight", n_embd, "ones"), vec(b + "ln1.bias", n_embd)]
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out"):
            plans += [TensorPlan(b + proj + ".weight", (n_embd, n_embd), matrix, "normal"),
                      vec(b + proj + ".bias", n_embd)]
        plans += [
            vec(b + "ln2.weight", n_embd, "ones"), vec(b + "ln2.bias", n_embd),
            TensorPlan(b + "ffn_up.weight", (n_ff, n_embd), matrix, "normal"),
            vec(b + "ffn_up.bias", n_ff),
            TensorPlan(b + "ffn_down.weight", (n_embd, n_ff), matrix, "normal"),
            vec(b + "ffn_down.bias", n_embd),
        ]
    plans += [
        vec("v.post_ln.weight", n_embd, "ones"), vec("v.post_ln.bias", n_embd),
        # "input_projection" is forced to F16 (llama.cpp issue #13025); ne = [n_embd_text, n_embd]
        TensorPlan("mm.input_projection.weight", (n_embd, projection_dim), Q.F16, "normal"),
        vec("mm.soft_emb_norm.weight", n_embd, "ones"),
    ]
    return plans


def write_projector(
    path: str | os.PathLike[str],
    *,
    projection_dim: int,
    n_embd: int = 64,
    n_ff: int = 96,
    n_layer: int = 2,
    n_head: int = 4,
    image_size: int = 128,
    patch_size: int = 8,
    n_merge: int = 4,
    ftype: str = "F16",
    seed: int = 0,
    name: str | None = None,
) -> Path:
    """Write a random-weight Gemma 3 style mmproj GGUF that mtmd loads; return its path.

    projection_dim is the language model's n_embd. An image becomes
    (image_size / patch_size / n_merge)^2 tokens: 16 with the defaults (Gemma 3's real
    projector: 896 / 14 / 4 -> 256). n_ff must differ from n_embd (clip.cpp takes an
    ffn_down whose first dimension equals n_embd for an old export with up and down
    swapped).
    """
    ftype = ftype.upper()
    if image_size % patch_size or (image_size // patch_size) % n_merge:
        raise ValueError("image_size must be a multiple of patch_size * n_merge")
    if n_embd % n_head or n_embd % 32 or n_ff % 32 or projection_dim % 32:
        raise ValueError("n_embd, n_ff and projection_dim must be multiples of 32, n_embd of n_head")
    if n_ff == n_embd:
        raise ValueError("n_ff must differ from n_embd")
    plans = plan_projector_tensors(ftype=ftype, n_embd=n_embd, n_ff=n_ff, n_layer=n_layer,
                                   image_size=image_size, patch_size=patch_size,
                                   projection_dim=projection_dim)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = FastArrayWriter(path, "clip")
    try:
        writer.add_type("mmproj")
        writer.add_name(name or f"synthetic-gemma3-mmproj-{ftype}")
        writer.add_file_type(int(PROJECTOR_FILE_TYPES[ftype][0]))
        writer.add_clip_has_vision_encoder(True)
        writer.add_clip_projector_type("gemma3")
        writer.add_vision_projection_dim(projection_dim)
        writer.add_vision_image_size(image_size)
        writer.add_vision_patch_size(patch_size)
        writer.add_vision_embedding_length(n_embd)
        writer.add_vision_feed_forward_length(n_ff)
        writer.add_vision_block_count(n_layer)
        writer.add_vision_head_count(n_head)
        writer.add_vision_image_mean(_IMAGE_MEAN)
        writer.add_vision_image_std(_IMAGE_STD)
        writer.add_vision_attention_layernorm_eps(1e-6)
        writer.add_vision_use_gelu(True)
        if n_merge != 4:  # the converter writes it only when it is not Gemma 3's 4
            writer.add_vision_projector_scale_factor(n_merge)
        write_tensors(writer, plans, seed)
    except BaseException:
        writer.close()
        path.unlink(missing_ok=True)
        raise
    writer.close()
    return path
