"""Which llama.cpp build runs models here (a probe is valid for one build)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def llama_build() -> str:
    """The llama.cpp build that runs models here: llama-cpp-python's version and a hash of
    its native libraries' names, sizes and times (a rebuild, say with CUDA, changes them
    even at the same version; so does LLAMA_CPP_LIB_PATH, which loads another build's).
    Cheap: no import of llama_cpp, so every estimate can ask."""
    import importlib.metadata
    import importlib.util

    try:
        version = importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        return "no llama-cpp-python"
    spec = importlib.util.find_spec("llama_cpp")
    # llama-cpp-python loads libllama from LLAMA_CPP_LIB_PATH when it is set (the RPC build,
    # a self-built llama.cpp), else from its package's lib/: those are the build
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    dirs = [Path(override)] if override else [Path(root) / "lib" for root in
                                              ((spec.submodule_search_locations or []) if spec else [])]
    libs = []
    for d in dirs:
        for f in sorted(d.glob("*")):
            if f.is_file() and not f.is_symlink():
                st = f.stat()
                libs.append(f"{f.name}:{st.st_size}:{st.st_mtime_ns}")
    digest = hashlib.sha1("|".join(libs).encode()).hexdigest()[:12]
    return f"llama-cpp-python {version} [{digest}]"
