"""Which models are installed (downloaded and verified), and which downloads are unfinished.

A row in `installed` is written only after every part of a model passed its sha256
check and sits in the Hugging Face cache, so the rest of the app can trust it; `list()`
also hides rows whose files have since vanished (deleted with `hf cache delete`, say).
`pending` remembers downloads that were started and not finished, with the blob names
of their partial files, so that after a restart the app can offer to resume them and
can delete their partial data without asking the Hub.

SQLite in WAL mode in the user data dir, like the calibration store; one connection
shared by the download threads behind a lock.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rooflight.store.paths import data_dir
from rooflight.store.schema import apply_schema

_SCHEMA = """
CREATE TABLE IF NOT EXISTS installed (
    repo_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    revision TEXT NOT NULL,
    commit_hash TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    path TEXT NOT NULL,
    parts TEXT NOT NULL,
    installed_at REAL NOT NULL,
    PRIMARY KEY (repo_id, filename)
);
CREATE TABLE IF NOT EXISTS pending (
    repo_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    revision TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    blobs TEXT NOT NULL,
    cache_dir TEXT NOT NULL,
    added_at REAL NOT NULL,
    PRIMARY KEY (repo_id, filename, revision)
);
"""


@dataclass(frozen=True)
class InstalledPart:
    filename: str  # path inside the repo
    sha256: str
    etag: str  # the cache blob's name (the sha256 for LFS files)
    size_bytes: int
    path: str  # the snapshot path in the Hugging Face cache


@dataclass(frozen=True)
class InstalledModel:
    repo_id: str
    filename: str  # the file to load (first part of a split model)
    revision: str  # as asked for ("main", a tag, a commit)
    commit: str
    sha256: str  # of `filename`
    size_bytes: int  # all parts together
    path: str  # snapshot path of `filename`: what llama.cpp opens
    installed_at: float  # Unix time
    parts: tuple[InstalledPart, ...]

    def present(self) -> bool:
        return all(Path(p.path).is_file() for p in self.parts)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["parts"] = [asdict(p) for p in self.parts]
        return d


@dataclass(frozen=True)
class PendingDownload:
    repo_id: str
    filename: str
    revision: str
    size_bytes: int
    blobs: tuple[str, ...]  # etags of the parts: partial data is blobs/<etag>.incomplete
    cache_dir: str
    added_at: float

    def partial_paths(self) -> list[Path]:
        from huggingface_hub.file_download import repo_folder_name

        storage = Path(self.cache_dir) / repo_folder_name(repo_id=self.repo_id, repo_type="model")
        return [storage / "blobs" / f"{etag}.incomplete" for etag in self.blobs]

    def partial_bytes(self) -> int:
        total = 0
        for p in self.partial_paths():
            try:
                total += p.stat().st_size
            except FileNotFoundError:
                pass
        return total


class InstalledStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or data_dir() / "installed.sqlite3"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=10, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        apply_schema(self._db, _SCHEMA)
        self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> InstalledStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- installed models -------------------------------------------------------------

    def add(self, m: InstalledModel) -> None:
        parts = json.dumps([asdict(p) for p in m.parts])
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO installed (repo_id, filename, revision, commit_hash, sha256,"
                " size_bytes, path, parts, installed_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (m.repo_id, m.filename, m.revision, m.commit, m.sha256, m.size_bytes, m.path,
                 parts, m.installed_at),
            )

    def get(self, repo_id: str, filename: str) -> InstalledModel | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM installed WHERE repo_id = ? AND filename = ?", (repo_id, filename)
            ).fetchone()
        return _model(row) if row else None

    def list(self, *, include_missing: bool = False) -> list[InstalledModel]:
        """Installed models, newest first; those whose files vanished only when asked."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM installed ORDER BY installed_at DESC").fetchall()
        models = [_model(r) for r in rows]
        return models if include_missing else [m for m in models if m.present()]

    def forget(self, repo_id: str, filename: str) -> bool:
        """Drop the record only (the files stay in the cache)."""
        with self._lock, self._db:
            cur = self._db.execute(
                "DELETE FROM installed WHERE repo_id = ? AND filename = ?", (repo_id, filename)
            )
        return cur.rowcount > 0

    def remove(self, repo_id: str, filename: str) -> InstalledModel | None:
        """Delete an installed model: its cache files (links, unshared blobs, partials) and record.

        Returns the removed record, or None if the model was not installed.
        """
        m = self.get(repo_id, filename)
        if m is None:
            return None
        # a part another installed unit also holds (a vision projector shared by two quants
        # of one repository) stays for that unit
        shared = {(p.filename, p.etag) for o in self.list(include_missing=True)
                  if o.repo_id == repo_id and o.filename != filename for p in o.parts}
        delete_cached_files(replace(m, parts=tuple(p for p in m.parts if (p.filename, p.etag) not in shared)))
        self.forget(repo_id, filename)
        return m

    # -- unfinished downloads ---------------------------------------------------------

    def set_pending(
        self, repo_id: str, filename: str, revision: str, *, size_bytes: int,
        blobs: tuple[str, ...], cache_dir: str | os.PathLike[str],
    ) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO pending (repo_id, filename, revision, size_bytes, blobs,"
                " cache_dir, added_at) VALUES (?,?,?,?,?,?,"
                " COALESCE((SELECT added_at FROM pending WHERE repo_id = ? AND filename = ?"
                " AND revision = ?), ?))",
                (repo_id, filename, revision, size_bytes, json.dumps(list(blobs)), str(cache_dir),
                 repo_id, filename, revision, time.time()),
            )

    def clear_pending(self, repo_id: str, filename: str, revision: str | None = None) -> None:
        with self._lock, self._db:
            if revision is None:
                self._db.execute(
                    "DELETE FROM pending WHERE repo_id = ? AND filename = ?", (repo_id, filename)
                )
            else:
                self._db.execute(
                    "DELETE FROM pending WHERE repo_id = ? AND filename = ? AND revision = ?",
                    (repo_id, filename, revision),
                )

    def get_pending(self, repo_id: str, filename: str, revision: str) -> PendingDownload | None:
        with self._lock:
            row = self._db.execute(
                "SELECT repo_id, filename, revision, size_bytes, blobs, cache_dir, added_at"
                " FROM pending WHERE repo_id = ? AND filename = ? AND revision = ?",
                (repo_id, filename, revision),
            ).fetchone()
        return _pending(row) if row else None

    def pending(self) -> builtins.list[PendingDownload]:  # `list` here is the method above
        """Unfinished downloads, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT repo_id, filename, revision, size_bytes, blobs, cache_dir, added_at"
                " FROM pending ORDER BY added_at"
            ).fetchall()
        return [_pending(r) for r in rows]


def _model(row: tuple) -> InstalledModel:
    repo_id, filename, revision, commit, sha256, size, path, parts, installed_at = row
    return InstalledModel(
        repo_id, filename, revision, commit, sha256, size, path, installed_at,
        tuple(InstalledPart(**p) for p in json.loads(parts)),
    )


def _pending(row: tuple) -> PendingDownload:
    repo_id, filename, revision, size, blobs, cache_dir, added_at = row
    return PendingDownload(repo_id, filename, revision, size, tuple(json.loads(blobs)), cache_dir, added_at)


def _storage_of(snapshot_path: Path) -> Path | None:
    """The repo's cache folder from a snapshot path: <cache>/models--o--r/snapshots/<commit>/<file>."""
    for p in snapshot_path.parents:
        if p.name == "snapshots":
            return p.parent
    return None


def delete_cached_files(m: InstalledModel) -> None:
    """Remove a model's files from the Hugging Face cache, as `hf cache` would.

    huggingface_hub's own scan and `delete_files` strategy remove the snapshot links in
    every cached revision of the repo and each blob no other cached file still uses (a
    file shared with another revision or model stays). Emptied snapshot folders and
    leftover partial downloads of the same blobs go too.
    """
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    storage = _storage_of(Path(m.path))
    if storage is None:
        return
    try:
        info = scan_cache_dir(storage.parent)
    except CacheNotFound:
        return
    names = {p.filename for p in m.parts}
    chosen = []
    snapshot_dirs = []
    for repo in info.repos:
        if repo.repo_id != m.repo_id or repo.repo_type != "model":
            continue
        for rev in repo.revisions:
            for f in rev.files:
                if f.file_path.relative_to(rev.snapshot_path).as_posix() in names:
                    chosen.append(f)
                    snapshot_dirs.append(rev.snapshot_path)
    if chosen:
        if hasattr(info, "delete_files"):
            info.delete_files(*chosen).execute()
        else:  # huggingface_hub before 1.x: the same rule by hand
            _delete_files_by_hand(info, chosen)
    for d in snapshot_dirs:
        _remove_empty_dirs(d)
    for part in m.parts:
        (storage / "blobs" / f"{part.etag}.incomplete").unlink(missing_ok=True)


def _delete_files_by_hand(info, chosen: list) -> None:
    chosen_paths = {f.file_path for f in chosen}
    kept_blobs = {
        f.blob_path
        for repo in info.repos
        for rev in repo.revisions
        for f in rev.files
        if f.file_path not in chosen_paths
    }
    for f in chosen:
        f.file_path.unlink(missing_ok=True)
    for f in chosen:
        if f.blob_path not in kept_blobs and f.blob_path != f.file_path:
            f.blob_path.unlink(missing_ok=True)


def _remove_empty_dirs(snapshot: Path) -> None:
    """Remove empty folders under (and including) one snapshot folder."""
    if not snapshot.is_dir():
        return
    for root, _dirs, _files in sorted(os.walk(snapshot), key=lambda t: -len(t[0])):
        try:
            os.rmdir(root)  # only succeeds when empty
        except OSError:
            pass
