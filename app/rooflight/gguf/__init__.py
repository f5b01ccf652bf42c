"""Read GGUF headers, local or remote (HTTP range reads), into a ModelSpec.

load_model_spec("model.gguf")                       # a local file (or part 1 of a split)
load_model_spec("hf:owner/repo/model-Q4_K_M.gguf")  # only the header is fetched

The header readers (and the gguf package and numpy under them) are imported when first
used, not with this package: `rooflight rank` plans catalog models from their
hyper-parameters (from_hparams.py, quant_recipe.py) and never reads a header.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from .spec import ModelSpec, TensorInfo

if TYPE_CHECKING:
    from .header import ArrayInfo, GGUFHeader, GGUFTensor, parse_header, read_header
    from .remote import HubFile, HubNotFoundError, is_hf_uri, parse_hf_uri
    from .splits import read_headers, split_part_names

# name -> the submodule that defines it, imported on first use (PEP 562)
_LAZY = {
    "ArrayInfo": "header", "GGUFHeader": "header", "GGUFTensor": "header", "parse_header": "header",
    "read_header": "header", "DEFAULT_MAX_HEADER_BYTES": "header",
    "HubFile": "remote", "HubNotFoundError": "remote", "is_hf_uri": "remote", "parse_hf_uri": "remote",
    "read_headers": "splits", "split_part_names": "splits", "build_model_spec": "build",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value

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
    from .remote import is_hf_uri, parse_hf_uri
    from .splits import split_part_names

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
    source: str | os.PathLike[str], *, max_header_bytes: int | None = None
) -> ModelSpec:
    """ModelSpec of a local GGUF path or an `hf:OWNER/REPO/FILE.gguf[@REV]` URI.

    Raises BadInputError for a bad file or reference, OperationFailedError for network
    trouble or a gated repository.
    """
    from .build import build_model_spec
    from .header import DEFAULT_MAX_HEADER_BYTES
    from .splits import read_headers

    headers = read_headers(
        source if isinstance(source, str) else Path(source),
        max_header_bytes=DEFAULT_MAX_HEADER_BYTES if max_header_bytes is None else max_header_bytes,
    )
    return build_model_spec(headers, default_name=_default_name(source))
