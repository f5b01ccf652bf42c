"""The standard Hugging Face cache, laid out exactly as huggingface_hub lays it out.

    HF_HUB_CACHE/models--OWNER--REPO/
        blobs/<etag>                  the file's bytes (etag: sha256 for LFS files)
        blobs/<etag>.incomplete       a partial download, resumed with HTTP Range
        snapshots/<commit>/<path>     relative symlink to ../../blobs/<etag>
        refs/<revision>               the commit a branch or tag pointed to

so `hf_hub_download`, `llama_cpp.Llama.from_pretrained`, `hf cache ls` and friends see
what Rooflight downloads and the other way round. Placing a finished blob uses
huggingface_hub's own helpers (the ones `hf_hub_download` calls: permissions from the
cache folder, relative symlinks with the copy fallback where symlinks are unavailable,
atomic ref files). They are private names, so tests check the result through the public
`try_to_load_from_cache` and `scan_cache_dir`: a change in them fails a test, not a user.

A partial file is `blobs/<etag>.incomplete`, the name `scan_cache_dir` reports as an
interrupted download (huggingface_hub 2.x's own downloads use a per-process random name
and delete it on failure, so they never resume, and never touch ours). The lock is the
one `hf_hub_download` takes for the same blob, so two programs never write one file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .control import DownloadControl

LOCK_POLL_S = 0.25


def hub_cache_dir() -> Path:
    """HF_HUB_CACHE (or HF_HOME/hub), read when called so a changed environment is honoured."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


class RepoCache:
    """Paths and placement for one model repository in the cache."""

    def __init__(self, repo_id: str, cache_dir: str | os.PathLike[str] | None = None) -> None:
        from huggingface_hub.file_download import repo_folder_name

        self.repo_id = repo_id
        self.cache_dir = Path(cache_dir) if cache_dir is not None else hub_cache_dir()
        self.storage = self.cache_dir / repo_folder_name(repo_id=repo_id, repo_type="model")

    def prepare(self) -> None:
        """Create blobs/ (and tag the cache for backup tools, as hf_hub_download does)."""
        from huggingface_hub import file_download

        (self.storage / "blobs").mkdir(parents=True, exist_ok=True)
        tag = getattr(file_download, "_create_cachedir_tag", None)  # huggingface_hub >= 1.x
        if tag is not None:
            tag(self.cache_dir)

    def blob(self, etag: str) -> Path:
        return self.storage / "blobs" / etag

    def partial(self, etag: str) -> Path:
        return self.storage / "blobs" / f"{etag}.incomplete"

    def pointer(self, commit: str, filename: str) -> Path:
        from huggingface_hub.file_download import _get_pointer_path

        # _get_pointer_path refuses a filename that would escape the snapshot folder
        return Path(_get_pointer_path(str(self.storage), commit, os.path.join(*filename.split("/"))))

    def lock_path(self, etag: str) -> Path:
        from huggingface_hub.file_download import repo_folder_name

        return self.cache_dir / ".locks" / repo_folder_name(repo_id=self.repo_id, repo_type="model") / f"{etag}.lock"

    def partial_size(self, etag: str) -> int:
        try:
            return self.partial(etag).stat().st_size
        except FileNotFoundError:
            return 0

    def has_blob(self, etag: str) -> bool:
        return self.blob(etag).is_file()

    @contextmanager
    def locked(
        self, etag: str, control: DownloadControl | None, on_wait=None, timeout: float | None = None
    ) -> Iterator[None]:
        """Hold huggingface_hub's lock for a blob, polling so a stop request ends the wait.

        Raises TimeoutError after `timeout` seconds (None: wait until stopped).
        """
        from filelock import Timeout
        from huggingface_hub.utils import WeakFileLock

        path = self.lock_path(etag)
        path.parent.mkdir(parents=True, exist_ok=True)
        waited = False
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if control is not None:
                control.check()
            lock = WeakFileLock(path, timeout=LOCK_POLL_S)
            try:
                lock.__enter__()
            except Timeout:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"{path} is held by another download") from None
                if not waited and on_wait is not None:
                    on_wait()
                waited = True
                continue
            break
        try:
            yield
        finally:
            lock.__exit__(None, None, None)

    def place(self, etag: str, commit: str, filename: str, revision: str) -> Path:
        """Move a verified `.incomplete` into blobs/, link the snapshot, record the ref.

        Durable before visible: the data is fsynced before the rename that gives it the
        blob's name, so a crash never leaves a blob whose bytes are not its checksum.
        """
        from huggingface_hub.file_download import _chmod_and_move

        src, blob = self.partial(etag), self.blob(etag)
        with open(src, "rb+") as fh:
            os.fsync(fh.fileno())
        _chmod_and_move(src, blob)
        _fsync_dir(blob.parent)
        return self.link(etag, commit, filename, revision, new_blob=True)

    def link(self, etag: str, commit: str, filename: str, revision: str, *, new_blob: bool = False) -> Path:
        """Point snapshots/<commit>/<filename> at an existing blob and record the ref."""
        from huggingface_hub.file_download import (
            _cache_commit_hash_for_specific_revision,
            _create_symlink,
        )

        pointer = self.pointer(commit, filename)
        pointer.parent.mkdir(parents=True, exist_ok=True)
        _create_symlink(str(self.blob(etag)), str(pointer), new_blob=new_blob)
        _cache_commit_hash_for_specific_revision(str(self.storage), revision, commit)
        return pointer

    def unlink_blob(self, etag: str, commit: str | None = None, filename: str | None = None) -> None:
        """Delete a blob that failed its check, and the snapshot link to it."""
        if commit and filename:
            p = self.pointer(commit, filename)
            if p.is_symlink() or p.exists():
                p.unlink()
        self.blob(etag).unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # not possible on Windows; the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
