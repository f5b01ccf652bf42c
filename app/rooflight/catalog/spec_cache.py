"""The catalog's specs on disk, so that ranking the whole catalog starts in a fraction of a second.

Every catalog spec, (model, quant[, the Hub's file size]), is a pure function of
catalog.json and the code that sizes it. Building all of them (~350 specs of ~400 tensors)
with their per-layer tables costs most of a second of CPU in every process that ranks.
This cache keeps, per spec, its scalar fields and the figures the estimator derives from
its tensors (gguf/derived.py: the layer and expert tables, a few named tensors), in one
file in the cache dir in marshal's format: the one Python's own __pycache__ files use,
builtins only, read in ~15 ms where JSON took ~45 ms (and held the GIL that long in a
worker while the window paints). A restored spec's tensor list is a LazyTensors that
rebuilds it with the same code the first time anything else reads it, so nothing can
differ from a spec built now.

The file is keyed by a fingerprint of catalog.json and of the package's code (every
module's size and modification time, and the version), so any change rebuilds it. Only
entries of the packaged catalog are cached (a catalog passed in by a caller is not).
A missing, stale or unreadable file is rebuilt quietly: it is only a cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import marshal
import os
import sys
import threading
from collections.abc import Callable, Hashable
from importlib import resources
from pathlib import Path
from typing import Any

from rooflight.gguf import derived
from rooflight.gguf.spec import LazyTensors, ModelSpec, TensorInfo

FILE_NAME = "catalog-specs.marshal"
_VERSION = 1
# what derived.known() may hold that is safe to store: the tables, widths, named tensors, the
# AMX layout's padding (estimate/amx_layout.py)
_TABLES: dict[str, type] = {}


def _tables() -> dict[str, type]:
    if not _TABLES:
        from rooflight.estimate.experts import ExpertTable
        from rooflight.estimate.layers import LayerTable

        _TABLES.update({"layer_table": LayerTable, "expert_table": ExpertTable})
    return _TABLES


def cache_path() -> Path:
    from rooflight.hardware.bandwidth import cache_dir

    return cache_dir() / FILE_NAME


def fingerprint() -> str:
    """catalog.json's bytes, the package version and every module's (path, size, mtime)."""
    import rooflight

    h = hashlib.sha256()
    h.update((resources.files("rooflight.resources") / "catalog.json").read_bytes())
    h.update(f"{_VERSION}|{getattr(rooflight, '__version__', '')}|{sys.version_info[:2]}".encode())
    if getattr(sys, "frozen", False):  # a bundle: its code changes only with the executable
        st = os.stat(sys.executable)
        h.update(f"{sys.executable}|{st.st_size}|{st.st_mtime_ns}".encode())
    root = Path(rooflight.__file__).parent
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                st = os.stat(os.path.join(dirpath, name))
                h.update(f"{os.path.relpath(dirpath, root)}/{name}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()


# ---- (de)serializing one spec's fields and derived figures ---------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _tuples(value: Any) -> Any:
    """One level of list -> tuple: every stored field is a flat tuple (of numbers, bools or
    per-layer dicts) or a scalar."""
    return tuple(value) if isinstance(value, list) else value


def _key_text(key: Hashable) -> str | None:
    if isinstance(key, str) and key in ("dense_ff", "expert_ff", "amx_padding", *_tables()):
        return key
    if isinstance(key, tuple) and len(key) == 2 and key[0] == "tensor" and isinstance(key[1], str):
        return "tensor:" + key[1]
    return None  # anything else is recomputed when asked for


def _value_doc(value: Any) -> Any:
    if isinstance(value, TensorInfo):
        return [value.name, value.ggml_type, list(value.shape), value.n_bytes, value.layer]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def _restore_value(key: str, doc: Any) -> tuple[Hashable, Any]:
    if key.startswith("tensor:"):
        t = None if doc is None else TensorInfo(doc[0], doc[1], tuple(doc[2]), doc[3], doc[4])
        return ("tensor", key.removeprefix("tensor:")), t
    table = _tables().get(key)
    if table is not None:
        return key, table(**{k: _tuples(v) for k, v in doc.items()})
    return key, doc


def spec_doc(spec: ModelSpec) -> dict[str, Any]:
    fields = {f.name: _plain(getattr(spec, f.name)) for f in dataclasses.fields(ModelSpec)
              if f.name not in ("tensors", "projector")}
    figures = {}
    for key, value in derived.known(spec).items():
        text = _key_text(key)
        if text is not None:
            figures[text] = _value_doc(value)
    return {"fields": fields, "derived": figures}


def restore_spec(doc: dict[str, Any], build: Callable[[], ModelSpec]) -> ModelSpec:
    """The spec `doc` describes; its tensors come from build() when first read."""
    fields = {k: (v if k == "metadata" else _tuples(v)) for k, v in doc["fields"].items()}
    spec = ModelSpec(**fields, tensors=LazyTensors(lambda: build().tensors))
    derived.prime(spec, dict(_restore_value(k, v) for k, v in doc["derived"].items()))
    return spec


# ---- the file -----------------------------------------------------------------------------


class SpecCache:
    """Specs by key ("model|quant|file bytes") and small values by name, read from and
    written to one file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._doc: dict[str, dict[str, Any]] | None = None
        self._fingerprint = ""
        # specs handed out by this process: key -> (spec, derived figures it came with; -1: built here)
        self._live: dict[str, tuple[ModelSpec, int]] = {}
        self._dirty = False

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._doc is None:
            self._fingerprint = fingerprint()
            self._doc = {"specs": {}, "values": {}}
            try:
                data = marshal.loads(self.path.read_bytes())
            except (OSError, ValueError, EOFError, TypeError):
                data = None  # none yet, or broken: rebuilt
            if isinstance(data, dict) and data.get("fingerprint") == self._fingerprint:
                for part in ("specs", "values"):
                    if isinstance(data.get(part), dict):
                        self._doc[part] = data[part]
        return self._doc

    def get(self, key: str, build: Callable[[], ModelSpec]) -> ModelSpec:
        with self._lock:
            doc = self._load()["specs"].get(key)
        spec = None
        if doc is not None:
            try:
                spec = restore_spec(doc, build)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                spec = None  # not what this code writes: rebuilt below
        came_with = len(derived.known(spec)) if spec is not None else -1
        if spec is None:
            spec = build()
        with self._lock:
            self._live[key] = (spec, came_with)
        return spec

    def value(self, key: str, compute: Callable[[], Any]) -> Any:
        """compute(), a JSON value, kept in the file under key."""
        with self._lock:
            values = self._load()["values"]
            if key in values:
                return values[key]
        result = compute()
        with self._lock:
            values[key] = result
            self._dirty = True
        return result

    def save(self) -> bool:
        """Write the file when this process built or derived something it lacks; True if
        written."""
        with self._lock:
            doc = self._load()
            specs = doc["specs"]
            for key, (spec, came_with) in self._live.items():
                if came_with < 0 or len(derived.known(spec)) > came_with:
                    specs[key] = spec_doc(spec)
                    self._live[key] = (spec, len(derived.known(spec)))
                    self._dirty = True
            if not self._dirty:
                return False
            self._dirty = False
            blob = marshal.dumps({"fingerprint": self._fingerprint, **doc})
        from rooflight.atomic import write_file_atomic

        try:
            write_file_atomic(self.path, lambda tmp: tmp.write_bytes(blob) > 0)
        except OSError:
            return False  # a read-only cache dir costs only speed
        return True


_caches: dict[Path, SpecCache] = {}


def spec_cache() -> SpecCache:
    """This process's cache for the current cache dir (tests point it elsewhere)."""
    path = cache_path()
    cache = _caches.get(path)
    if cache is None:
        cache = _caches[path] = SpecCache(path)
    return cache
