"""ProjectorSpec: what the estimator needs to know about a vision projector (mmproj GGUF).

Read from the projector's own header (local or remote, like a model's), with the keys
llama.cpp's mtmd library reads (tools/mtmd/clip-impl.h, clip.cpp load_hparams). Only the
vision part is described: audio encoders in the same file are not planned.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from rooflight.errors import BadInputError

if TYPE_CHECKING:  # the header reader (and the gguf package, numpy) load when a file is read
    from .header import GGUFHeader

# The file names vision repositories give their projectors: mmproj-<model>-f16.gguf,
# <model>-mmproj-Q8_0.gguf, mmproj-F16.gguf, ... (llama.cpp's converter writes "mmproj-"
# first; several uploaders put it in the middle).
_MMPROJ_NAME = re.compile(r"(^|[-_./])mmproj([-_.]|$)", re.IGNORECASE)


def is_projector_name(filename: str) -> bool:
    """True for a file name that is a vision projector, not a language model."""
    name = PurePosixPath(filename).name
    return name.lower().endswith(".gguf") and bool(_MMPROJ_NAME.search(name))


@dataclass(frozen=True)
class ProjectorSpec:
    name: str
    source: str  # path or hf: URI it was read from
    projector_type: str  # clip.projector_type: gemma3, mlp, idefics3, qwen25vl, ...
    file_type: str  # F16, Q8_0, ... (general.file_type, or the dominant tensor type)
    file_bytes: int
    weights_bytes: int  # every tensor: clip.cpp loads the whole file's vision tensors
    n_embd: int  # vision tower width
    n_ff: int
    n_layer: int
    n_head: int
    image_size: int  # the side the image is resized to (clip.vision.image_size)
    patch_size: int
    projection_dim: int  # the language model's n_embd it projects to
    n_merge: int  # patches merged per side into one token (gemma3's pool, pixel shuffle...)

    @property
    def n_patches(self) -> int:
        side = self.image_size // max(1, self.patch_size)
        return side * side

    @property
    def image_tokens(self) -> int:
        """Tokens one image at the default size takes in the language model's context.

        clip.cpp clip_n_output_tokens(): projectors that merge patches divide by
        n_merge^2, the Qwen-VL family by 4 (a 2x2 merge), LLaVA's MLP keeps every patch.
        Tiling projectors (LLaVA-1.6, MiniCPM-V, SmolVLM's large images) add tiles for big
        images; one tile is what is planned here.
        """
        p = self.n_patches
        t = self.projector_type
        if t in ("ldp", "ldpv2", "glm_edge", "qwen2vl", "qwen25vl", "qwen3vl"):
            return max(1, p // 4)
        if self.n_merge > 1:
            return max(1, p // (self.n_merge * self.n_merge))
        return p

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "file": self.source,
            "projector_type": self.projector_type,
            "file_type": self.file_type,
            "file_bytes": self.file_bytes,
            "weights_bytes": self.weights_bytes,
            "image_size": self.image_size,
            "patch_size": self.patch_size,
            "image_tokens": self.image_tokens,
            "n_embd": self.n_embd,
            "n_layer": self.n_layer,
            "projection_dim": self.projection_dim,
        }


# n_merge defaults that clip.cpp load_hparams() sets when the key is absent
_DEFAULT_MERGE = {"gemma3": 4, "gemma3nv": 1, "llama4": 2, "internvl": 2, "idefics3": 1}


def _uint(meta: dict, key: str, source: str, default: int | None = None) -> int:
    v = meta.get(key)
    if v is None:
        if default is None:
            raise BadInputError(f"{source} has no {key} key, so llama.cpp cannot load it as a projector.")
        return default
    if type(v) is bool or type(v) is not int or v < 0:
        raise BadInputError(f"{source} has {key} = {v!r}, not a non-negative integer.")
    return v


def build_projector_spec(header: GGUFHeader, *, default_name: str) -> ProjectorSpec:
    meta = header.metadata
    source = header.source
    if meta.get("general.architecture") != "clip":
        raise BadInputError(f"{source} is not a vision projector (general.architecture is not clip).")
    if meta.get("clip.has_vision_encoder") is not True:
        raise BadInputError(f"{source} has no vision encoder (an audio-only projector?).")
    ptype = meta.get("clip.projector_type") or meta.get("clip.vision.projector_type")
    if not isinstance(ptype, str) or not ptype:
        raise BadInputError(f"{source} does not say its projector type (clip.projector_type).")
    merge_key = "clip.vision.spatial_merge_size" if ptype in ("pixtral", "lightonocr") else \
        "clip.vision.projector.scale_factor"
    n_merge = _uint(meta, merge_key, source, _DEFAULT_MERGE.get(ptype, 1))
    from .build import _dominant_type, _file_type_name
    from .spec import TensorInfo

    tensors = [TensorInfo(t.name, t.type_name, t.shape, t.n_bytes, None) for t in header.tensors]
    vision = [t for t in tensors if not t.name.startswith("a.") and not t.name.startswith("mm.a.")]
    name = meta.get("general.name")
    return ProjectorSpec(
        name=name if isinstance(name, str) and name.strip() else default_name,
        source=source,
        projector_type=ptype.lower(),
        file_type=_file_type_name(meta.get("general.file_type")) or _dominant_type(tensors),
        file_bytes=header.file_size,
        weights_bytes=sum(t.n_bytes for t in vision),
        n_embd=_uint(meta, "clip.vision.embedding_length", source),
        n_ff=_uint(meta, "clip.vision.feed_forward_length", source),
        n_layer=_uint(meta, "clip.vision.block_count", source),
        n_head=max(1, _uint(meta, "clip.vision.attention.head_count", source)),
        image_size=_uint(meta, "clip.vision.image_size", source),
        patch_size=max(1, _uint(meta, "clip.vision.patch_size", source)),
        projection_dim=_uint(meta, "clip.vision.projection_dim", source, 0),
        n_merge=max(1, n_merge),
    )


def load_projector_spec(source: str | os.PathLike[str]) -> ProjectorSpec:
    """ProjectorSpec of a local mmproj GGUF or an `hf:OWNER/REPO/FILE.gguf` URI (header only)."""
    from .splits import read_headers

    headers = read_headers(source if isinstance(source, str) else Path(source))
    name = PurePosixPath(str(source)).name.removesuffix(".gguf")
    spec = build_projector_spec(headers[0], default_name=name)
    return replace(spec, source=str(source))  # the header keeps only a display name




# Variants in the order a user would want them when several sit beside the model: the
# full-precision projector first (repositories offer Q8_0 as the smaller option).
_PREFERENCE = ("F16", "BF16", "F32", "Q8_0")


def _rank(name: str) -> tuple[int, str]:
    up = PurePosixPath(name).name.upper()
    return next((i for i, t in enumerate(_PREFERENCE) if t in up), len(_PREFERENCE)), name


def choose_projector(filenames: list[str], wanted: str = "auto") -> str | None:
    """The projector among a repository's files: the one named, or (auto) the best of them.

    wanted may also be a precision ("F16", "Q8_0"): the file whose name carries it."""
    projectors = sorted((f for f in filenames if is_projector_name(f)), key=_rank)
    if wanted == "auto":
        return projectors[0] if projectors else None
    if wanted in filenames and is_projector_name(wanted):
        return wanted
    return next((f for f in projectors if wanted.upper() in PurePosixPath(f).name.upper()), None)


def projectors_beside(model_path: str | os.PathLike[str]) -> list[Path]:
    """mmproj files in the model's folder (a Hugging Face snapshot, an LM Studio model
    folder, a chosen folder), best first."""
    folder = Path(model_path).parent
    try:
        found = [p for p in folder.iterdir() if is_projector_name(p.name) and p.is_file()]
    except OSError:
        return []

    return sorted(found, key=lambda p: _rank(p.name))


def check_pair(projector: ProjectorSpec, n_embd: int, model_name: str) -> None:
    """mtmd refuses a projector whose output width is not the model's (mtmd.cpp)."""
    if projector.projection_dim and projector.projection_dim != n_embd:
        raise BadInputError(
            f"The projector {PurePosixPath(projector.source).name} makes {projector.projection_dim}-wide "
            f"embeddings but {model_name} takes {n_embd}; it belongs to another model.")


def with_projector(spec, projector_path: str | os.PathLike[str]):
    """The ModelSpec with the projector given (BadInputError when it does not fit the model)."""
    proj = load_projector_spec(projector_path)
    check_pair(proj, spec.n_embd, spec.name)
    return replace(spec, projector=proj)


def pair_local(spec, model_path: str | os.PathLike[str]):
    """The spec with the best projector found beside model_path that fits it (or unchanged)."""
    for candidate in projectors_beside(model_path):
        try:
            proj = load_projector_spec(candidate)
            check_pair(proj, spec.n_embd, spec.name)
        except BadInputError:
            continue
        return replace(spec, projector=proj)
    return spec


def projector_for_args(spec, model: str, mmproj: str | None):
    """A command's spec with --mmproj, else with a projector beside a local model file."""
    if mmproj:
        return with_projector(spec, mmproj if mmproj.startswith("hf:") else Path(mmproj).expanduser())
    if not model.startswith("hf:") and Path(model).is_file():
        return pair_local(spec, model)
    return spec
