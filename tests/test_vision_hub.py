"""Hub search and the catalog recognise vision models and plan them with their projector,
against the local Hub stand-in (real huggingface_hub client, real range reads)."""

from __future__ import annotations

import pytest

from rooflight.catalog import hub
from rooflight.catalog.hub import list_gguf_files
from rooflight.catalog.hub_rank import search_and_rank
from rooflight.catalog.hub_vision import catalog_projector, catalog_projector_files
from rooflight.catalog.models import parse_catalog
from rooflight.catalog.rank import rank_models
from test_estimate_memory import GiB, machine
from vision_files import vision_model

REPO = "acme/Vis-GGUF"


@pytest.fixture(autouse=True)
def _fresh_reachability():
    hub._unreachable.clear()
    yield


@pytest.fixture
def published(hub_server, tmp_path):
    lm, proj = vision_model(tmp_path / "v")
    _, q8 = vision_model(tmp_path / "q", projector_name="mmproj-vis-lm-Q8_0.gguf", ftype="Q8_0")
    hub_server.add_file(REPO, "vis-lm-F16.gguf", lm)
    hub_server.add_file(REPO, "mmproj-vis-lm-f16.gguf", proj)
    hub_server.add_file(REPO, "mmproj-vis-lm-Q8_0.gguf", q8)
    hub_server.repo_meta[REPO] = {"downloads": 5, "tags": ["gguf", "image-text-to-text"]}
    return lm, proj


def test_hub_search_plans_a_vision_model_with_its_projector(published, hub_server):
    lm, proj = published
    listing = list_gguf_files(REPO)
    assert [f.filename for f in listing.files] == ["vis-lm-F16.gguf"]  # projectors are not models
    assert [f.filename for f in listing.projectors] == ["mmproj-vis-lm-Q8_0.gguf", "mmproj-vis-lm-f16.gguf"]
    (r,) = search_and_rank("vis", machine(8 * GiB, ram=32 * GiB), 2048).models
    assert "vision" in r.model.tags
    doc = r.to_dict()
    assert "/mmproj-vis-lm-f16.gguf" in doc["vision"]["file"]  # F16 preferred
    assert doc["vision"]["image_tokens"] == 16 and doc["vision"]["device"] == "gpu0"
    est = r.best.estimate
    assert est.spec.projector.weights_bytes > 0
    # only headers were read: a part of the projector, never all of both files
    served = hub_server.bytes_served
    assert not served.get(f"{REPO}/mmproj-vis-lm-Q8_0.gguf")
    assert 0 < served[f"{REPO}/mmproj-vis-lm-f16.gguf"]


CATALOG = {"models": [{
    "id": "vis-test", "name": "Vis test", "family": "gemma", "architecture": "gemma3", "layout": "gemma3",
    "params_total": 0.0005, "params_active": 0.0005, "license": "apache-2.0", "tags": ["vision"],
    "release": "2025-03", "hparams_source": "test",
    "hparams": {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_head_kv": 2, "head_dim": 16, "n_ff": 128,
                "n_vocab": 800, "context_length": 4096, "tie_embeddings": True},
    "quality": None,
    "gguf": [{"repo": REPO, "files": {"F16": "vis-lm-F16.gguf"},
              "mmproj": {"F16": "mmproj-vis-lm-f16.gguf", "Q8_0": "mmproj-vis-lm-Q8_0.gguf"}}],
}]}


def test_catalog_mmproj_key_and_rank(published, hub_server):
    (model,) = parse_catalog(CATALOG)
    if not catalog_projector_files(model):
        # a catalog parser from before the mmproj key (GGUFSource.mmproj) drops it: give the
        # source the attribute the newer parser sets
        from dataclasses import replace
        from types import SimpleNamespace

        src = model.gguf[0]
        model = replace(model, gguf=(SimpleNamespace(repo=src.repo, files=dict(src.files),
                                                     mmproj=CATALOG["models"][0]["gguf"][0]["mmproj"]),))
    assert catalog_projector_files(model)["Q8_0"] == "mmproj-vis-lm-Q8_0.gguf"
    hw = machine(8 * GiB, ram=32 * GiB)
    before = rank_models(hw, models=(model,), ctx=2048)[0]
    assert before.to_dict()["vision"] is None  # the projector's header was never read: not guessed
    assert catalog_projector(model, network=True) is not None  # what `rank --refresh` does
    after = rank_models(hw, models=(model,), ctx=2048)[0]
    v = after.to_dict()["vision"]
    assert "/mmproj-vis-lm-f16.gguf" in v["file"] and v["image_tokens"] == 16
    assert after.best.estimate.memory.total_bytes > before.best.estimate.memory.total_bytes
