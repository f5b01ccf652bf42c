"""Hub answers kept on disk: one small JSON file per question, stamped with when it was asked.

The Hub is slow to ask and not always reachable, so every answer Rooflight gets from it
(a search, a repository's file list, a model's header turned into a ModelSpec) is kept
under the cache dir (ROOFLIGHT_CACHE_DIR, else the platform's user cache dir) in
`hub/<kind>/`. Whether an answer is still fresh is the caller's decision (hub.py): a
search expires after hours, a header read by its content hash never does. Files are
written atomically (temp name, fsync, rename), so a crash never leaves half an answer.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rooflight.atomic import write_text_atomic
from rooflight.hardware.bandwidth import cache_dir

FORMAT = 1  # bump when the stored shapes change: older files are then ignored
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Cached:
    data: Any
    fetched_at: float  # time.time() when the Hub gave this answer

    def age_s(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - self.fetched_at


def answers_dir() -> Path:
    return cache_dir() / "hub"


def _path(kind: str, key: str) -> Path:
    # a readable prefix for people looking at the folder, a hash for uniqueness
    slug = _SLUG.sub("_", key)[:60].strip("_") or "key"
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return answers_dir() / kind / f"{slug}-{digest}.json"


def load(kind: str, key: str) -> Cached | None:
    """The stored answer, or None when there is none (or it is unreadable or outdated)."""
    try:
        doc = json.loads(_path(kind, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key:
        return None
    fetched = doc.get("fetched_at")
    if not isinstance(fetched, int | float):
        return None
    return Cached(doc.get("data"), float(fetched))


def store(kind: str, key: str, data: Any, *, fetched_at: float | None = None) -> Cached:
    """Write an answer atomically; a cache that cannot be written is not an error."""
    cached = Cached(data, time.time() if fetched_at is None else fetched_at)
    path = _path(kind, key)
    doc = {"format": FORMAT, "key": key, "fetched_at": cached.fetched_at, "data": data}
    try:
        write_text_atomic(path, json.dumps(doc, separators=(",", ":")), make_parent=True)
    except OSError:
        pass  # read-only or full disk: the answer is still good for this run
    return cached
