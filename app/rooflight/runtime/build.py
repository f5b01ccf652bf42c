"""Which llama.cpp build runs models here (a probe is valid for one build)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def llama_build() -> str:
    """The llama.cpp build that runs models here: llama-cpp-python's version and a hash of
    its native libraries' names, sizes and times (a rebuild, say with CUDA, changes them
    even at the same version). Cheap: no import of llama_cpp, so every estimate can ask.
    A probe belongs to it; an RPC chat, which loads the RPC build of the same sources
    (runtime/rpc.py), keeps using it."""
    return _build_id(_package_lib_dirs())


def loaded_llama_build() -> str:
    """The build whose libraries this process loads: LLAMA_CPP_LIB_PATH's when it is set
    (llama-cpp-python then loads libllama from there: the RPC build, a self-built llama.cpp),
    else llama_build(). What a property of the binary itself (runtime/amx.py) belongs to."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    return _build_id([Path(override)]) if override else llama_build()


def _package_lib_dirs() -> list[Path]:
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    return [Path(root) / "lib" for root in ((spec.submodule_search_locations or []) if spec else [])]


def _build_id(dirs: list[Path]) -> str:
    import importlib.metadata

    try:
        version = importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        return "no llama-cpp-python"
    libs = []
    for d in dirs:
        for f in sorted(d.glob("*")):
            if f.is_file() and not f.is_symlink():
                st = f.stat()
                libs.append(f"{f.name}:{st.st_size}:{st.st_mtime_ns}")
    digest = hashlib.sha1("|".join(libs).encode()).hexdigest()[:12]
    return f"llama-cpp-python {version} [{digest}]"
