"""Read GGUF headers, local or remote (HTTP range reads), into a ModelSpec.

load_model_spec("model.gguf")                       # a local file (or part 1 of a split)
load_model_spec("hf:owner/repo/model-Q4_K_M.gguf")  # only the header is fetched
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from .build import build_model_spec
from .header import (
    DEFAULT_MAX_HEADER_BYTES,
    ArrayInfo,
    GGUFHeader,
    GGUFTensor,
    parse_header,
    read_header,
)
from .remote import HubFile, HubNotFoundError, is_hf_uri, parse_hf_uri
from .spec import ModelSpec, TensorInfo
from .splits import read_headers, split_part_names

__all__ = [
    "ArrayInfo",
    "GGUFHeader",
    "GGUFTensor",
    "HubFile",
    "HubNotFoundError",
    "ModelSpec",
    "TensorInfo",
    "is_hf_uri",
    "load_model_spec",
    "parse_header",
    "parse_hf_uri",
    "read_header",
    "read_headers",
    "split_part_names",
]


def _default_name(source: str | os.PathLike[str]) -> str:
    if isinstance(source, str) and is_hf_uri(source):
        name = PurePosixPath(parse_hf_uri(source).filename).name
    else:
        name = Path(source).name
    for suffix in (".gguf",):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    names = split_part_names(name + ".gguf")
    if names is not None:  # "model-00001-of-00003" -> "model"
        name = names[0][: -len("-00001-of-00000.gguf")]
    return name


def load_model_spec(
    source: str | os.PathLike[str], *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
) -> ModelSpec:
    """ModelSpec of a local GGUF path or an `hf:OWNER/REPO/FILE.gguf[@REV]` URI.

    Raises BadInputError for a bad file or reference, OperationFailedError for network
    trouble or a gated repository.
    """
    headers = read_headers(
        source if isinstance(source, str) else Path(source), max_header_bytes=max_header_bytes
    )
    return build_model_spec(headers, default_name=_default_name(source))
