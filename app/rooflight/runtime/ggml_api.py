"""ggml's C functions that llama-cpp-python does not wrap, found through ctypes.

llama-cpp-python binds llama.h; the ggml backend registry (devices, buffer types) is reached
here for tensor placement overrides (tensor_overrides.py) and the AMX guard (amx.py).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path


def ggml_function(name: str, restype, argtypes):
    """A ggml function with its C signature set, or None where this build exports none by
    that name: looked up through libllama (dlsym searches the libraries it was linked with,
    where libggml is), else in the ggml libraries shipped beside it."""
    import llama_cpp.llama_cpp as lc

    fn = getattr(lc._lib, name, None)
    for lib in () if fn is not None else _ggml_libraries():
        if (fn := getattr(lib, name, None)) is not None:
            break
    if fn is not None:
        fn.restype, fn.argtypes = restype, argtypes
    return fn


@functools.cache
def _ggml_libraries() -> tuple[ctypes.CDLL, ...]:
    """The ggml libraries shipped beside libllama, opened once."""
    import llama_cpp.llama_cpp as lc

    libs = []
    for path in sorted((Path(lc.__file__).parent / "lib").glob("*ggml*")):
        try:
            libs.append(ctypes.CDLL(str(path)))
        except OSError:
            continue
    return tuple(libs)
