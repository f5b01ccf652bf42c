"""Figures derived from a ModelSpec's tensor list, worked out once per spec.

A ranking plans hundreds of specs of hundreds of tensors, each many times; every figure
that needs a pass over the tensors (per-layer totals, the expert table, one named tensor)
is computed once and kept here. Keyed by the spec's identity, not its value: hashing a
frozen ModelSpec hashes all its tensors. An entry goes when its spec does.

A spec restored from the catalog's spec cache (catalog/spec_cache.py) arrives with these
figures filled in (prime), so its tensors are never rebuilt unless something else asks.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rooflight.gguf.spec import ModelSpec

T = TypeVar("T")
_memo: dict[int, dict[Hashable, Any]] = {}


def _entry(spec: ModelSpec) -> dict[Hashable, Any]:
    key = id(spec)
    entry = _memo.get(key)
    if entry is None:
        entry = _memo[key] = {}
        weakref.finalize(spec, _memo.pop, key, None)
    return entry


def derived(spec: ModelSpec, key: Hashable, build: Callable[[ModelSpec], T]) -> T:
    """build(spec), computed once per spec and key."""
    entry = _entry(spec)
    try:
        return entry[key]
    except KeyError:
        value = entry[key] = build(spec)
        return value


def known(spec: ModelSpec) -> Mapping[Hashable, Any]:
    """What has been derived for this spec so far (what the spec cache saves)."""
    return _memo.get(id(spec), {})


def prime(spec: ModelSpec, values: Mapping[Hashable, Any]) -> None:
    """Fill in figures derived earlier from the same tensors (a restored spec)."""
    _entry(spec).update(values)


def inherit(new: ModelSpec, old: ModelSpec) -> ModelSpec:
    """new, a copy of old with the same tensors and shape fields (only, e.g., a projector
    added), keeps what was derived for old."""
    if new is not old and id(old) in _memo:
        prime(new, _memo[id(old)])
    return new
