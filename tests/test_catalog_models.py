"""The curated model catalog: complete, self-consistent, and its hparams match the stated sizes."""

from __future__ import annotations

import json
import re

import pytest

from rooflight.catalog import CatalogModel, find_model, load_catalog, parse_catalog
from rooflight.errors import BadInputError
from rooflight.gguf.synthetic import ARCHITECTURES, FILE_TYPES

CATALOG = load_catalog()
IDS = [m.id for m in CATALOG]


def _raw_doc() -> dict:
    from importlib import resources

    return json.loads((resources.files("rooflight.resources") / "catalog.json").read_text("utf-8"))


def test_catalog_size_and_unique_ids():
    assert len(CATALOG) >= 40
    assert len(set(IDS)) == len(IDS)
    assert load_catalog() is CATALOG  # cached


def test_top_level_notes():
    doc = _raw_doc()
    assert doc["sources"]
    assert "computed from hparams" in doc["computed_sizes"]


def test_families_covered():
    families = {m.family for m in CATALOG}
    for fam in ("llama", "qwen", "gemma", "mistral", "phi", "deepseek", "gpt-oss", "smollm"):
        assert fam in families


def test_size_range_and_moe_present():
    totals = [m.params_total for m in CATALOG]
    assert min(totals) <= 0.27 and max(totals) >= 120
    assert sum(m.is_moe for m in CATALOG) >= 3


@pytest.mark.parametrize("model", CATALOG, ids=IDS)
def test_entry_fields_sane(model: CatalogModel):
    assert re.fullmatch(r"[a-z0-9]+(?:[-.][a-z0-9]+)*", model.id)
    assert model.name and model.family and model.architecture and model.license
    assert model.layout in ARCHITECTURES
    assert re.fullmatch(r"20\d\d-(0[1-9]|1[0-2])", model.release)
    assert model.tags and all(isinstance(t, str) and t for t in model.tags)
    assert model.hparams_source.endswith("config.json")
    h = model.hparams
    if h.head_dim == h.n_embd // h.n_head:
        assert h.n_embd % h.n_head == 0
    assert h.n_head % h.n_head_kv == 0
    assert h.context_length >= 2048
    assert model.params_total >= model.params_active > 0
    if h.sliding_window:
        assert h.swa_pattern is None or h.swa_pattern >= 2
        assert h.sliding_window < h.context_length
    if model.is_moe:
        assert 0 < h.n_expert_used < h.n_expert
        assert model.params_active < model.params_total
    else:
        assert h.n_expert_used == 0
        assert model.params_active == model.params_total
    if model.quality is not None:
        assert model.quality.score > 0 and model.quality.benchmark and model.quality.source
    assert model.gguf
    for src in model.gguf:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", src.repo)
        for quant, fname in src.files.items():
            assert quant in FILE_TYPES
            assert fname.endswith((".gguf", "/"))


@pytest.mark.parametrize("model", CATALOG, ids=IDS)
def test_hparams_match_stated_params(model: CatalogModel):
    spec = model.spec("Q4_K_M")
    computed = spec.params / 1e9
    assert computed == pytest.approx(model.params_total, rel=0.15), (computed, model.params_total)
    if model.is_moe:
        assert spec.active_params < spec.params
        assert spec.n_expert == model.hparams.n_expert


@pytest.mark.parametrize("model", CATALOG, ids=IDS)
def test_every_quant_builds_and_sizes_grow_with_bits(model: CatalogModel):
    assert model.quants
    sizes = {}
    for quant in set(model.quants) | {"Q4_K_M", "Q8_0"}:
        spec = model.spec(quant)
        assert spec.file_type == quant
        assert spec.file_bytes > 0
        assert spec.context_length == model.hparams.context_length
        sizes[quant] = spec.file_bytes
    assert sizes["Q4_K_M"] < sizes["Q8_0"]
    order = [q for q in ("Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0") if q in sizes]
    assert [sizes[q] for q in order] == sorted(sizes[q] for q in order)


@pytest.mark.parametrize("model", CATALOG, ids=IDS)
def test_file_for_every_quant(model: CatalogModel):
    for quant in model.quants:
        repo, fname = model.file_for(quant)
        assert quant in next(s.files for s in model.gguf if s.repo == repo)
        assert fname
    with pytest.raises(BadInputError):
        model.file_for("Q4_1")


def test_swa_layers_from_pattern():
    gemma = find_model("gemma-3-12b")
    assert gemma is not None
    spec = gemma.spec("Q4_K_M")
    assert spec.sliding_window == 1024
    assert len(spec.swa_layers) == gemma.hparams.n_layer
    assert spec.swa_layers[:6] == (True,) * 5 + (False,)
    assert sum(not s for s in spec.swa_layers) == gemma.hparams.n_layer // 6
    oss = find_model("gpt-oss-20b")
    assert oss is not None and oss.spec("Q8_0").swa_layers[:4] == (True, False, True, False)
    dense = find_model("llama-3.1-8b")
    assert dense is not None and dense.spec("Q4_K_M").swa_layers == ()


def test_find_model():
    assert find_model("qwen3-8b") is not None
    assert find_model("QWEN3-8B") is find_model("qwen3-8b")
    assert find_model("no-such-model") is None


def test_spec_rejects_unknown_quant():
    with pytest.raises(BadInputError):
        CATALOG[0].spec("IQ9_XXL")


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e.pop("hparams"),
        lambda e: e["hparams"].pop("n_layer"),
        lambda e: e["hparams"].update(n_layer="32"),
        lambda e: e["hparams"].update(n_head_kv=5),
        lambda e: e.update(params_active=e["params_total"] * 2),
        lambda e: e.update(layout="mamba"),
        lambda e: e.update(gguf=[]),
        lambda e: e.update(gguf=[{"repo": "x/y", "files": {"IQ2_XS": "a.gguf"}}]),
        lambda e: e.update(quality={"score": "high"}),
    ],
)
def test_malformed_entry_raises_naming_it(mutate):
    doc = _raw_doc()
    entry = next(e for e in doc["models"] if e["id"] == "llama-3.1-8b")
    mutate(entry)
    with pytest.raises(BadInputError, match="llama-3.1-8b"):
        parse_catalog(doc)


def test_malformed_documents_raise():
    with pytest.raises(BadInputError):
        parse_catalog({"version": 1})
    with pytest.raises(BadInputError):
        parse_catalog({"models": ["not an object"]})
    doc = _raw_doc()
    doc["models"].append(doc["models"][0])
    with pytest.raises(BadInputError, match="twice"):
        parse_catalog(doc)
