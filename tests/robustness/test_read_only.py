"""Read-only places: the Hugging Face cache, the data folder and a models folder that cannot
be written each give one clear sentence (or keep working where writing is not needed).

Read-only is made with `chattr +i` when running as root (root ignores permission bits),
else with chmod; where neither is possible the tests skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rooflight.errors import RooflightError
from rooflight.gguf.synthetic import write_model


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    if os.geteuid() == 0:
        if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(path)],
                                                         capture_output=True).returncode:
            pytest.skip("cannot make a folder read-only for root here (chattr +i)")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(mode)


def _one_sentence(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and 10 < len(text) < 400, text
    return text


def test_download_into_a_read_only_cache_says_so(hub_server) -> None:
    from huggingface_hub import constants

    from rooflight.download import download_model

    hub_server.add_file("acme/Tiny-GGUF", "m.gguf", b"GGUF" + bytes(4096))
    cache = Path(constants.HF_HUB_CACHE)
    cache.mkdir(parents=True, exist_ok=True)
    with read_only(cache), pytest.raises(RooflightError) as e:
        download_model("acme/Tiny-GGUF", "m.gguf")
    text = _one_sentence(e.value)
    assert str(cache) in text or "write" in text.lower() or "permission" in text.lower()


def test_chat_store_in_a_read_only_data_folder_says_so(tmp_path) -> None:
    from rooflight.store.chats import ChatStore

    folder = tmp_path / "data"
    folder.mkdir()
    with read_only(folder), pytest.raises(RooflightError) as e:
        with ChatStore(folder / "chats.sqlite3") as store:
            store.create_chat("t", "m")
    _one_sentence(e.value)


def test_models_in_a_read_only_folder_are_still_found_and_estimated(tmp_path) -> None:
    from rooflight.catalog.local import find_installed

    folder = tmp_path / "models"
    folder.mkdir()
    write_model(folder / "tiny.gguf", n_layer=2, n_embd=64, ftype="Q8_0")
    with read_only(folder):
        found = find_installed(hf_caches=[], lmstudio_dirs=[], ollama_dirs=[], folders=[folder])
    assert [f.path.name for f in found] == ["tiny.gguf"]
