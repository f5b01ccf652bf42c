"""ggml's C functions that llama-cpp-python does not wrap, found through ctypes.

llama-cpp-python binds llama.h; the ggml backend registry (devices, buffer types) is reached
here for tensor placement overrides (tensor_overrides.py) and the AMX guard (amx.py).
"""

from __future__ import annotations

import ctypes
from pathlib import Path


def ggml_function(name: str, restype, argtypes):
    """A ggml function with its C signature set, or None where this build exports none by
    that name: looked up through libllama (dlsym searches the libraries it was linked with,
    where libggml is), else in the ggml libraries shipped beside it."""
    import llama_cpp.llama_cpp as lc

    fn = getattr(lc._lib, name, None)
    if fn is None:
        for path in sorted((Path(lc.__file__).parent / "lib").glob("*ggml*")):
            try:
                fn = getattr(ctypes.CDLL(str(path)), name, None)
            except OSError:
                continue
            if fn is not None:
                break
    if fn is not None:
        fn.restype, fn.argtypes = restype, argtypes
    return fn
