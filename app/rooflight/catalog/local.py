"""GGUF models already on disk: the Hugging Face cache, LM Studio, Ollama, chosen folders.

Where each store keeps its files (all overridable, so tests build fake trees):

- Hugging Face cache: HF_HUB_CACHE (huggingface_hub's own setting), read with
  huggingface_hub.scan_cache_dir: models--OWNER--REPO/snapshots/<commit>/<path>.
- LM Studio: ~/.lmstudio/models and the older ~/.cache/lm-studio/models, laid out
  PUBLISHER/REPO/FILE.gguf like the Hub repositories they come from
  (ROOFLIGHT_LMSTUDIO_DIRS overrides, os.pathsep-separated).
- Ollama: OLLAMA_MODELS (Ollama's own setting), else ~/.ollama/models. A manifest
  manifests/<registry>/<namespace>/<name>/<tag> lists layers; the one with media type
  application/vnd.ollama.image.model is the GGUF file, stored as blobs/sha256-<hex>. Its
  config blob names the quant ("file_type"). Models pulled from hf.co keep their repo.
- Folders the user chooses (ROOFLIGHT_MODELS_DIRS, os.pathsep-separated), searched
  recursively.

Every model found is estimated from its real header (catalog/installed_rank.py), never its name.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rooflight.catalog.hub_files import group_gguf, parse_quant
from rooflight.catalog.models import CatalogModel, load_catalog

OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class InstalledFile:
    """One model on disk: a GGUF file, or all parts of a split one."""

    path: Path  # the file to load (part 1 of a split model)
    source: str  # hf_cache | lmstudio | ollama | folder
    name: str  # how to show it: "owner/repo/file.gguf", "llama3.2:1b", a relative path
    repo_id: str | None  # the Hub repository it came from, where the store records it
    filename: str  # path inside that repository (or the folder); the tag for Ollama
    size: int  # bytes on disk, all parts present
    parts: int = 1
    complete: bool = True  # every part of a split model is present
    quant: str | None = None  # from the name or Ollama's config: display and matching only
    sha256: str | None = None  # when the store names the blob by it (Ollama, HF cache LFS)
    mmproj: str | None = None  # a vision projector beside it (gguf/projector.py), loaded with it

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "source": self.source, "name": self.name,
                "repo": self.repo_id, "file": self.filename, "size_bytes": self.size,
                "parts": self.parts, "complete": self.complete, "quant": self.quant,
                "sha256": self.sha256, "mmproj": self.mmproj}


# ---- where to look ------------------------------------------------------------------------


def _env_dirs(name: str) -> list[Path] | None:
    value = os.environ.get(name)
    if value is None:
        return None
    return [Path(p).expanduser() for p in value.split(os.pathsep) if p]


def default_hf_caches() -> list[Path]:
    from huggingface_hub import constants

    return [Path(constants.HF_HUB_CACHE)]


def default_lmstudio_dirs() -> list[Path]:
    env = _env_dirs("ROOFLIGHT_LMSTUDIO_DIRS")
    if env is not None:
        return env
    home = Path.home()
    return [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]


def default_ollama_dirs() -> list[Path]:
    env = os.environ.get("OLLAMA_MODELS")
    if env:
        return [Path(env).expanduser()]
    dirs = [Path.home() / ".ollama" / "models"]
    if sys.platform.startswith("linux"):
        dirs.append(Path("/usr/share/ollama/.ollama/models"))  # the Linux service install
    return dirs


def default_model_dirs() -> list[Path]:
    return _env_dirs("ROOFLIGHT_MODELS_DIRS") or []


# ---- the stores -------------------------------------------------------------------------


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _grouped(base: Path, rel_paths: Iterable[str], **common: Any) -> list[InstalledFile]:
    """One InstalledFile per model among files under `base` (split parts grouped)."""
    out = []
    for g in group_gguf(rel_paths):
        present = [base / p for p, have in zip(g.parts, g.present, strict=True) if have]
        first = base / g.filename
        out.append(InstalledFile(
            path=first, filename=g.filename, size=sum(_size(p) for p in present),
            parts=len(g.parts), complete=g.complete, quant=parse_quant(g.filename), **common,
        ))
    return out


def _walk_gguf(root: Path) -> list[str]:
    """Relative paths of *.gguf files under root (following no directory symlink loops)."""
    found = []
    for dirpath, _dirs, files in os.walk(root, followlinks=False):
        for f in files:
            if f.lower().endswith(".gguf"):
                found.append(Path(dirpath, f).relative_to(root).as_posix())
    return found


def scan_hf_cache(cache_dir: Path) -> list[InstalledFile]:
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound, CorruptedCacheException

    try:
        info = scan_cache_dir(cache_dir)
    except (CacheNotFound, CorruptedCacheException, OSError):
        return []
    out = []
    for repo in info.repos:
        if repo.repo_type != "model":
            continue
        # newest revision first: a file cached in several revisions is listed once
        revisions = sorted(repo.revisions, key=lambda r: r.last_modified, reverse=True)
        seen: set[str] = set()
        for rev in revisions:
            rels = {}
            for f in rev.files:
                rel = f.file_path.relative_to(rev.snapshot_path).as_posix()
                if rel.lower().endswith(".gguf") and rel not in seen:
                    rels[rel] = f.blob_path.name
            seen.update(rels)
            for item in _grouped(rev.snapshot_path, rels, source="hf_cache", repo_id=repo.repo_id,
                                 name="", sha256=None):
                blob = rels.get(item.filename, "")
                out.append(_with(item, name=f"{repo.repo_id}/{item.filename}",
                                 sha256=blob if _HEX64.match(blob) else None))
    return out


def _with(item: InstalledFile, **changes: Any) -> InstalledFile:
    from dataclasses import replace

    return replace(item, **changes)


def scan_lmstudio(root: Path) -> list[InstalledFile]:
    """PUBLISHER/REPO/FILE.gguf (files may sit deeper, e.g. split folders)."""
    out = []
    by_repo: dict[str, list[str]] = {}
    for rel in _walk_gguf(root):
        parts = rel.split("/")
        if len(parts) < 3:
            continue  # not in LM Studio's layout
        by_repo.setdefault("/".join(parts[:2]), []).append("/".join(parts[2:]))
    for repo_id, rels in sorted(by_repo.items()):
        for item in _grouped(root / repo_id, rels, source="lmstudio", repo_id=repo_id, name=""):
            out.append(_with(item, name=f"{repo_id}/{item.filename}"))
    return out


def _ollama_name(registry: str, namespace: str, model: str, tag: str) -> str:
    if registry == "registry.ollama.ai":
        return f"{model}:{tag}" if namespace == "library" else f"{namespace}/{model}:{tag}"
    return f"{registry}/{namespace}/{model}:{tag}"


def scan_ollama(root: Path) -> list[InstalledFile]:
    manifests = root / "manifests"
    out: list[InstalledFile] = []
    if not manifests.is_dir():
        return out
    for registry in sorted(p for p in manifests.iterdir() if p.is_dir()):
        for manifest in sorted(p for p in registry.glob("*/*/*") if p.is_file()):
            namespace, model, tag = manifest.relative_to(registry).parts
            try:
                doc = json.loads(manifest.read_text(encoding="utf-8"))
                layers = [layer for layer in doc.get("layers", []) if isinstance(layer, dict)]
            except (OSError, ValueError, AttributeError):
                continue
            layer = next((x for x in layers if x.get("mediaType") == OLLAMA_MODEL_LAYER), None)
            digest = str((layer or {}).get("digest", ""))
            if not digest.startswith("sha256:"):
                continue
            hexdigest = digest.removeprefix("sha256:")
            blob = root / "blobs" / f"sha256-{hexdigest}"
            if not blob.is_file():
                continue  # a pull that never finished
            quant = _ollama_quant(root, doc) or parse_quant(tag)
            hf = registry.name in ("hf.co", "huggingface.co")
            out.append(InstalledFile(
                path=blob, source="ollama", name=_ollama_name(registry.name, namespace, model, tag),
                repo_id=f"{namespace}/{model}" if hf else None, filename=tag, size=_size(blob),
                quant=quant, sha256=hexdigest if _HEX64.match(hexdigest) else None,
            ))
    return out


def _ollama_quant(root: Path, manifest: Mapping[str, Any]) -> str | None:
    """The config blob's "file_type" ("Q4_K_M"): what Ollama read from the header."""
    config = manifest.get("config")
    digest = str(config.get("digest", "")) if isinstance(config, dict) else ""
    if not digest.startswith("sha256:"):
        return None
    try:
        doc = json.loads((root / "blobs" / f"sha256-{digest[7:]}").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ft = doc.get("file_type") if isinstance(doc, dict) else None
    return parse_quant(f"x-{ft}.gguf") if isinstance(ft, str) else None


def scan_folder(root: Path) -> list[InstalledFile]:
    out = []
    for item in _grouped(root, _walk_gguf(root), source="folder", repo_id=None, name=""):
        out.append(_with(item, name=item.filename))
    return out


def find_installed(
    *,
    hf_caches: Sequence[str | os.PathLike[str]] | None = None,
    lmstudio_dirs: Sequence[str | os.PathLike[str]] | None = None,
    ollama_dirs: Sequence[str | os.PathLike[str]] | None = None,
    folders: Sequence[str | os.PathLike[str]] | None = None,
) -> list[InstalledFile]:
    """Every GGUF model found. Each argument None means the default places (module doc);
    an empty list skips that store. A file reachable from two places is listed once,
    from the first store that knows most about it (HF cache, LM Studio, Ollama, folders)."""
    stores = [
        (scan_hf_cache, default_hf_caches() if hf_caches is None else hf_caches),
        (scan_lmstudio, default_lmstudio_dirs() if lmstudio_dirs is None else lmstudio_dirs),
        (scan_ollama, default_ollama_dirs() if ollama_dirs is None else ollama_dirs),
        (scan_folder, default_model_dirs() if folders is None else folders),
    ]
    out: list[InstalledFile] = []
    seen: set[str] = set()
    for scan, roots in stores:
        for root in roots:
            root = Path(root).expanduser()
            if not root.is_dir():
                continue
            try:
                found = scan(root)
            except OSError:
                continue  # an unreadable store is not an error; others still count
            for item in found:
                key = os.path.realpath(item.path)
                if key not in seen:
                    seen.add(key)
                    out.append(_paired(item))
    return out


def _paired(item: InstalledFile) -> InstalledFile:
    """The model with the projector in its folder, if any (an HF snapshot, an LM Studio
    model folder). Ollama keeps a projector as another blob layer: not paired here."""
    if item.source == "ollama":
        return item
    from rooflight.gguf.projector import projectors_beside

    found = projectors_beside(item.path)
    return _with(item, mmproj=str(found[0])) if found else item


def installed_paths(files: Iterable[InstalledFile] | None = None) -> dict[tuple[str, str], str]:
    """(repo, file) -> local path, for files whose Hub repository is known (the GUI's
    InstalledModels provider shape)."""
    files = find_installed() if files is None else files
    return {(f.repo_id, f.filename): str(f.path) for f in files if f.repo_id and f.complete}


# ---- catalog matching -------------------------------------------------------------------


def match_catalog(
    files: Iterable[InstalledFile], models: Iterable[CatalogModel] | None = None
) -> dict[str, tuple[InstalledFile, ...]]:
    """catalog id -> its files on disk. A file matches by Hub repository and file name
    (a split folder by prefix), an Ollama hf.co pull by repository and quant, and
    otherwise by a file name that only one catalog model publishes."""
    models = list(models if models is not None else load_catalog())
    exact: dict[tuple[str, str], str] = {}
    folders: list[tuple[str, str, str]] = []
    repos: dict[str, str] = {}
    names: dict[str, set[str]] = {}
    for m in models:
        for s in m.gguf:
            repos.setdefault(s.repo, m.id)
            for name in s.files.values():
                if name.endswith("/"):
                    folders.append((s.repo, name, m.id))
                else:
                    exact[(s.repo, name)] = m.id
                    names.setdefault(Path(name).name.lower(), set()).add(m.id)
    out: dict[str, list[InstalledFile]] = {}
    for f in files:
        mid = None
        if f.repo_id:
            mid = exact.get((f.repo_id, f.filename))
            if mid is None:
                mid = next((m for r, pre, m in folders if r == f.repo_id and f.filename.startswith(pre)), None)
            if mid is None and f.source == "ollama":
                mid = repos.get(f.repo_id)
        if mid is None and f.source != "ollama":
            hits = names.get(Path(f.filename).name.lower(), set())
            mid = next(iter(hits)) if len(hits) == 1 else None
        if mid is not None:
            out.setdefault(mid, []).append(f)
    return {k: tuple(v) for k, v in out.items()}
