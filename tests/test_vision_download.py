"""A vision model downloads as one unit with its projector, against the local Hub stand-in:
one call, resumable, verified, then found on disk paired and loaded with its projector."""

from __future__ import annotations

from pathlib import Path

import pytest

from rooflight.download import DownloadControl, DownloadStopped, RetryPolicy, download_model
from rooflight.download import progress as P
from rooflight.errors import BadInputError
from rooflight.store.installed import InstalledStore
from vision_files import vision_model

REPO = "acme/Vis-GGUF"
FAST = RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture
def vision_repo(hub_server, tmp_path):
    lm, proj = vision_model(tmp_path / "src", image_size=256, n_embd=64)
    lm8, q8 = vision_model(tmp_path / "src8", projector_name="mmproj-vis-lm-Q8_0.gguf", ftype="Q8_0")
    hub_server.add_file(REPO, "vis-lm-other.gguf", lm8)
    hub_server.add_file(REPO, "vis-lm-F16.gguf", lm)
    hub_server.add_file(REPO, "mmproj-vis-lm-f16.gguf", proj)
    hub_server.add_file(REPO, "mmproj-vis-lm-Q8_0.gguf", q8)
    hub_server.add_file(REPO, "README.md", b"# Vis\n")
    return lm, proj, q8


def test_model_and_projector_are_one_unit(vision_repo, hub_server):
    lm, proj, _ = vision_repo
    control = DownloadControl()

    def stop_in_projector(p: P.Progress) -> None:  # pause once the model is in, mid-projector
        if p.phase == P.DOWNLOADING and p.done_bytes >= lm.stat().st_size + 50_000:
            control.pause()

    with pytest.raises(DownloadStopped):
        download_model(REPO, "vis-lm-F16.gguf", control=control, retry=FAST, progress_interval=0,
                       on_progress=stop_in_projector)
    with InstalledStore() as store:
        assert store.get(REPO, "vis-lm-F16.gguf") is None  # half a unit is not installed
    r = download_model(REPO, "vis-lm-F16.gguf", retry=FAST)  # resumes
    assert r.resumed_bytes > lm.stat().st_size
    doc = r.to_dict()
    assert [p["file"] for p in doc["parts"]] == ["vis-lm-F16.gguf", "mmproj-vis-lm-f16.gguf"]
    assert Path(doc["mmproj"]).read_bytes() == proj.read_bytes()  # verified: sha256 as the Hub's
    assert doc["size_bytes"] == lm.stat().st_size + proj.stat().st_size

    # on disk: local discovery pairs them, the loader plans and loads both
    from huggingface_hub import constants

    from rooflight.catalog.local import find_installed

    found = [m for m in find_installed(hf_caches=[constants.HF_HUB_CACHE], lmstudio_dirs=[],
                                       ollama_dirs=[], folders=[]) if m.path.name == "vis-lm-F16.gguf"]
    assert found and found[0].mmproj and found[0].mmproj.endswith("mmproj-vis-lm-f16.gguf")
    from rooflight.estimate import Wishes
    from rooflight.runtime.loader import plan_load
    from test_vision import HOST

    lp = plan_load(r.model.path, Wishes(n_ctx=256), hardware=HOST)
    assert lp.spec.projector is not None and lp.estimate.vision.image_tokens == 16 * 4


def test_projector_choice_and_sharing(vision_repo, hub_server):
    r = download_model(REPO, "vis-lm-F16.gguf", retry=FAST, projector="Q8_0")
    assert r.to_dict()["mmproj"].endswith("mmproj-vis-lm-Q8_0.gguf")
    none = download_model(REPO, "README.md", retry=FAST, projector=None)
    assert none.to_dict()["mmproj"] is None
    with pytest.raises(BadInputError, match="no vision projector"):
        download_model(REPO, "vis-lm-F16.gguf", retry=FAST, projector="BF16")
    # a projector shared by two units stays while one of them is installed
    other = download_model(REPO, "vis-lm-other.gguf", retry=FAST, projector="Q8_0")
    with InstalledStore() as store:
        store.remove(REPO, "vis-lm-F16.gguf")
        assert store.get(REPO, "vis-lm-other.gguf").present()
        assert Path(other.to_dict()["mmproj"]).is_file()
