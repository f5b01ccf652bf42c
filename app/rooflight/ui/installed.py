"""The provider behind ctx.installed: which catalog files are on disk, and where.

Runs in a worker (it walks the Hugging Face cache, LM Studio's and Ollama's stores and
the models folder chosen in Settings) over catalog.local; the result is keyed the way the
Models page asks, (Hub repository, file name in it) -> local path.
"""

from __future__ import annotations

from pathlib import Path


def installed_catalog_files(models_dir: str = "") -> dict[tuple[str, str], str]:
    from rooflight.catalog import find_model
    from rooflight.catalog.local import (
        default_model_dirs,
        find_installed,
        installed_paths,
        match_catalog,
    )

    folders = [*default_model_dirs(), *([Path(models_dir).expanduser()] if models_dir else [])]
    files = find_installed(folders=folders)
    out = installed_paths(files)  # files whose store records their Hub repository
    # files known by name only (a folder, LM Studio) or by quant (an Ollama pull from hf.co)
    for model_id, found in match_catalog(files).items():
        model = find_model(model_id)
        if model is None or not all(f.complete for f in found):
            continue
        for f in found:
            base = Path(f.filename).name.lower()
            for source in model.gguf:
                for quant, name in source.files.items():
                    by_name = Path(name).name.lower() == base
                    by_quant = f.source == "ollama" and f.repo_id == source.repo and f.quant == quant
                    if by_name or by_quant:
                        out.setdefault((source.repo, name), str(f.path))
    return out
