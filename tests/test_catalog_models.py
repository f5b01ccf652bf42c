"""The curated model catalog: complete, self-consistent, and its hparams match the stated sizes."""

from __future__ import annotations

import json
import re

import pytest

from rooflight.catalog import CatalogModel, find_model, load_catalog, parse_catalog
from rooflight.catalog.arch_support import unavailable_reason
from rooflight.catalog.hub_files import parse_quant
from rooflight.catalog.models import is_quant_label
from rooflight.catalog.quality import SCALE
from rooflight.errors import BadInputError
from rooflight.gguf.synthetic import ARCHITECTURES

CATALOG = load_catalog()
IDS = [m.id for m in CATALOG]


def _raw_doc() -> dict:
    from importlib import resources

    return json.loads((resources.files("rooflight.resources") / "catalog.json").read_text("utf-8"))


def test_catalog_size_and_unique_ids():
    assert len(CATALOG) >= 80
    assert len(set(IDS)) == len(IDS)
    assert load_catalog() is CATALOG  # cached


# how a source admits its names were only guessed from the publisher's pattern
UNCONFIRMED = re.compile(r"(?i)names? (?:follows?|by) [^;]*pattern|named by [^;]*pattern|names unconfirmed|run the refresh")


def test_every_file_name_is_confirmed():
    """No repo block ships names that only follow a publisher's pattern: every block is
    `checked` and, where it says so, names the listing or card it was checked against."""
    for entry in _raw_doc()["models"]:
        for src in entry["gguf"]:
            assert src.get("checked", True) is True, (entry["id"], src["repo"])
            assert src["files"], (entry["id"], src["repo"])
            if "checked" in src:
                assert src.get("source", "").strip(), (entry["id"], src["repo"])
                assert not UNCONFIRMED.search(src["source"]), src["source"]


# config.json keys llama.cpp's converter reads for each hybrid layer type (convert_hf_to_gguf):
# without them a config builder cannot place the recurrent / convolution layers.
HYBRID_KEYS = {
    "qwen3next": ("linear_conv_kernel_dim", "linear_key_head_dim", "linear_num_key_heads",
                  "linear_num_value_heads", "linear_value_head_dim", "full_attention_interval"),
    "granitehybrid": ("layer_types", "mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups",
                      "mamba_d_conv"),
    "nemotron_h": ("hybrid_override_pattern", "ssm_state_size", "conv_kernel", "mamba_num_heads", "mamba_head_dim"),
    "lfm2": ("layer_types", "conv_L_cache"),
}
HYBRID_KEYS["qwen35"] = HYBRID_KEYS["qwen35moe"] = HYBRID_KEYS["qwen3next"]
HYBRID_KEYS["nemotron_h_moe"] = HYBRID_KEYS["nemotron_h"] + ("n_routed_experts", "moe_intermediate_size")
HYBRID_KEYS["lfm2moe"] = HYBRID_KEYS["lfm2"] + ("num_experts", "moe_intermediate_size", "num_dense_layers")


@pytest.mark.parametrize("model", [m for m in CATALOG if m.architecture in HYBRID_KEYS],
                         ids=[m.id for m in CATALOG if m.architecture in HYBRID_KEYS])
def test_hybrid_configs_carry_their_recurrent_fields(model: CatalogModel):
    """A hybrid model's hparams.config holds the config.json fields of its recurrent layers
    (not only the transformer subset), and a per-layer list, where given, covers every layer."""
    cfg = model.hparams.config
    missing = [k for k in HYBRID_KEYS[model.architecture] if k not in cfg]
    assert not missing, (model.id, missing)
    types = cfg.get("layer_types")
    if types is not None:
        assert len(types) == cfg["num_hidden_layers"] == model.hparams.n_layer
    if "hybrid_override_pattern" in cfg:
        assert len(cfg["hybrid_override_pattern"]) == cfg["num_hidden_layers"] == model.hparams.n_layer
    assert "find_string" in model.hparams_source or "config.json" in model.hparams_source


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
    assert any(m.is_moe and m.params_total >= 100 for m in CATALOG)
    assert sum(m.params_total <= 1.0 for m in CATALOG) >= 3


def test_current_models_and_use_cases():
    """What people run in late 2026: at least 30 models released since 2025-07, and every
    use case (chat, coding, reasoning, vision) covered."""
    assert sum(m.release >= "2025-07" for m in CATALOG) >= 30
    for tag in ("chat", "coding", "reasoning", "vision", "moe", "tiny"):
        assert sum(tag in m.tags for m in CATALOG) >= 3, tag
    for fam in ("granite", "lfm", "glm", "nemotron"):
        assert any(m.family == fam for m in CATALOG), fam


@pytest.mark.parametrize("model", CATALOG, ids=IDS)
def test_entry_fields_sane(model: CatalogModel):
    assert re.fullmatch(r"[a-z0-9]+(?:[-.][a-z0-9]+)*", model.id)
    assert model.name and model.family and model.architecture and model.license
    assert model.layout in ARCHITECTURES
    assert re.fullmatch(r"20\d\d-(0[1-9]|1[0-2])", model.release)
    assert model.tags and all(isinstance(t, str) and t for t in model.tags)
    assert model.hparams_source.strip()  # every entry names where its hyper-parameters come from
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
    assert model.quality is not None and model.quality.benchmark == SCALE and model.quality.source
    assert model.quality.score is None or model.quality.score > 0
    assert model.gguf
    for src in model.gguf:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", src.repo)
        assert src.source or src.checked  # where the names were checked, or the pattern they follow
        for quant, fname in src.files.items():
            assert is_quant_label(quant)
            assert fname.endswith((".gguf", "/"))
        assert set(src.sizes) <= set(src.files)
        if src.mmproj:
            assert "vision" in model.tags
            assert all(n.startswith("mmproj") and n.endswith(".gguf") for n in src.mmproj.values())


@pytest.mark.parametrize("model", CATALOG, ids=IDS)
def test_file_names_follow_their_repository_pattern(model: CatalogModel):
    """<Model>-<QUANT>.gguf (bartowski, unsloth, lmstudio, ggml-org), <Model>.<QUANT>.gguf
    (mradermacher), split parts named -00001-of-0000N, big files in a <QUANT>/ folder; the
    quant read back from the name is the quant the entry files it under."""
    for src in model.gguf:
        base = src.repo.split("/")[1]
        base = base[:-5] if base.lower().endswith("-gguf") else base
        for quant, fname in src.files.items():
            assert parse_quant(fname.rstrip("/")) == quant, (src.repo, fname)
            leaf = fname.rstrip("/").split("/")[-1]
            if fname.endswith("/"):  # unsloth: Q4_K_M/, bartowski: <Model>-Q4_K_M/
                assert leaf == quant or leaf.lower().startswith(base.lower()), (src.repo, fname)
                continue
            assert leaf.lower().startswith(base.lower()), (src.repo, fname)
            if "-of-" in leaf:
                assert re.search(r"-00001-of-\d{5}\.gguf$", leaf), fname
            if "/" in fname:
                assert fname.split("/")[0] == quant


MODELED = [m for m in CATALOG if unavailable_reason(m) is None]


@pytest.mark.parametrize("model", MODELED, ids=[m.id for m in MODELED])
def test_hparams_match_stated_params(model: CatalogModel):
    """Parameters counted from the hyper-parameters are within 10% of the publisher's figure
    (the model as released: a tied embedding counted once)."""
    spec = model._computed("Q4_K_M")
    computed = spec.params / 1e9
    if model.architecture in ("gemma3n", "qwen35", "qwen35moe") and "vision" in model.tags:
        # these publishers' totals count the vision (Gemma 3n: and audio) encoder, shipped as
        # mmproj, not in the text GGUF the spec describes: the decoder alone is below it
        assert 0.8 * model.params_total < computed <= model.params_total, (computed, model.params_total)
        return
    assert computed == pytest.approx(model.params_total, rel=0.10), (computed, model.params_total)
    if model.is_moe:
        assert spec.active_params < spec.params
        assert spec.n_expert == model.hparams.n_expert


def test_unmodeled_architectures_keep_their_config_and_say_so():
    """An architecture the estimator does not model keeps config.json's fields verbatim and
    is reported as not estimable, never given a number."""
    from dataclasses import replace

    # every catalog entry records the config.json fields its builder needs (since 2026-12-02,
    # Gemma 4, Llama 4 Scout and Nemotron 3 Nano too)
    assert [m.id for m in CATALOG if unavailable_reason(m) is not None] == []
    # without those fields, or for an architecture the estimator refuses, one sentence
    nemotron = next(m for m in CATALOG if m.architecture == "nemotron_h_moe")
    bare = replace(nemotron, hparams=replace(nemotron.hparams, config={"num_hidden_layers": 52}))
    rwkv = replace(nemotron, architecture="rwkv7")
    for m in (bare, rwkv):
        reason = unavailable_reason(m)
        assert reason is not None and reason.lower().startswith(f"estimate not available for {m.architecture}")


def test_published_sizes_are_used():
    """Where a file's size is published, the spec is that size, not a computed one."""
    seen = 0
    for m in CATALOG:
        if unavailable_reason(m) is not None:
            continue
        for src in m.gguf:
            for quant, size in src.sizes.items():
                if m.published_size(quant) == (size, src.repo):
                    assert m.spec(quant).file_bytes == size, (m.id, quant)
                    seen += 1
    assert seen >= 8


def test_a_published_size_keeps_the_recipes_tensor_types():
    """A Q4_K_M file resized to its published size keeps its Q6_K tensors (priced per type);
    the two Qwen3 30B-A3B 2507 models, one sized by the recipe and one by its published
    file, then get the same estimate. Another quant's file takes that quant's main type."""
    import json
    from pathlib import Path

    from rooflight.catalog.hub_specs import resize_spec
    from rooflight.estimate import Wishes, plan
    from rooflight.hardware import profile_from_dict

    sized, recipe = find_model("qwen3-30b-a3b-thinking-2507"), find_model("qwen3-30b-a3b-instruct-2507")
    assert sized.published_size("Q4_K_M") and not recipe.published_size("Q4_K_M")

    def types(spec):
        return {t.name: t.ggml_type for t in spec.tensors}

    assert types(sized.spec("Q4_K_M")) == types(recipe.spec("Q4_K_M"))
    assert "Q6_K" in types(sized.spec("Q4_K_M")).values()
    as_q8 = resize_spec(recipe.spec("Q4_K_M"), 32 * 10**9, quant="Q8_0")
    assert set(types(as_q8).values()) == {"F32", "Q8_0"}

    profile = Path(__file__).parent / "profiles" / "laptop-16gb-cpu.json"
    hw = profile_from_dict(json.loads(profile.read_text()), measure_bandwidth=False)
    a, b = (plan(m.spec("Q4_K_M"), hw, Wishes(n_ctx=4096, n_gpu_layers=0)).performance for m in (sized, recipe))
    assert a.decode_tok_s == pytest.approx(b.decode_tok_s, rel=0.005)
    assert a.prefill_tok_s == pytest.approx(b.prefill_tok_s, rel=0.005)


@pytest.mark.parametrize("model_id", ["nemotron-nano-9b-v2", "qwen2.5-0.5b", "qwen3-30b-a3b-instruct-2507"])
def test_another_quant_scaled_from_a_header_is_typed_as_its_file(model_id):
    """`rooflight search` estimates a repository's other files from one header (Q4_K_M):
    scaled to a Q5_K_M, Q6_K or Q8_0 file, each tensor gets the type llama.cpp's quantizer
    gives it there (the recipe's), fallbacks for rows a 256-block does not divide
    included (this Nemotron's and Qwen2.5-0.5B's widths), and the bytes follow the types."""
    from rooflight.catalog.hub_specs import resize_spec

    model = find_model(model_id)
    header = model._computed("Q4_K_M")
    for quant in ("Q5_K_M", "Q6_K", "Q8_0"):
        own = model._computed(quant)
        scaled = resize_spec(header, own.file_bytes, quant=quant)
        assert [t.ggml_type for t in scaled.tensors] == [t.ggml_type for t in own.tensors], quant
        for a, b in zip(scaled.tensors, own.tensors, strict=True):
            assert a.n_bytes == pytest.approx(b.n_bytes, rel=1e-3, abs=2), (quant, a.name)


def test_gpt_oss_files_keep_their_mxfp4_experts_whatever_their_label():
    """A gpt-oss file labelled Q4_K_M or F16 keeps the released MXFP4 experts (its quantizers
    say so); the label says what the other tensors became (Q4_K, with llama.cpp's Q5_0
    fallback for its 2880-wide rows; F16). The MXFP4 file is the release: Q8_0 besides."""
    model = find_model("gpt-oss-20b")

    def types(quant):
        return {t.ggml_type for t in model.spec(quant).tensors if t.ggml_type != "F32"}

    experts = {t.ggml_type for t in model.spec("Q4_K_M").tensors if t.name.endswith("_exps.weight")}
    assert experts == {"MXFP4"}
    assert types("Q4_K_M") == {"MXFP4", "Q4_K", "Q5_0"}
    assert types("MXFP4") == {"MXFP4", "Q8_0"}
    if "F16" in model.quants:
        assert types("F16") == {"MXFP4", "F16"}


def test_known_file_errors_fixed():
    """Issue 15's checks against the mirrored listings."""
    oss20, oss120 = find_model("gpt-oss-20b"), find_model("gpt-oss-120b")
    assert oss20.file_for("MXFP4") == ("bartowski/openai_gpt-oss-20b-GGUF", "openai_gpt-oss-20b-MXFP4.gguf")
    assert oss20.native_quant == oss120.native_quant == "MXFP4"
    assert "Q8_0" not in next(s for s in oss20.gguf if s.repo.startswith("bartowski/")).files
    assert not any(s.repo.startswith("bartowski/") for s in oss120.gguf)
    # every expert stays MXFP4: all of gpt-oss-20b's files are within 20% of each other
    sizes = [m for s in oss20.gguf for m in s.sizes.values()]
    assert max(sizes) < 1.2 * min(sizes)
    assert oss120.spec("MXFP4").file_bytes == pytest.approx(63.4e9, rel=0.01)
    # Qwen3 0.6B / 1.7B files from bartowski and lmstudio carry an untied output tensor
    for mid in ("qwen3-0.6b", "qwen3-1.7b"):
        m = find_model(mid)
        tied = m._computed("Q8_0").file_bytes
        assert m.spec("Q8_0").file_bytes > 1.15 * tied  # bartowski's file
        unsloth = next(s for s in m.gguf if s.repo.startswith("unsloth/"))
        assert not unsloth.untied_output
    assert find_model("mistral-nemo-12b").hparams.context_length == 128000
    # Ministral 8B: the interleaved window as configured is kept (hparams.config); the GGUF
    # llama.cpp runs has none (its converter does not write it), so neither has the plan
    ministral = find_model("ministral-8b")
    assert ministral.hparams.config["layer_types"][:4] == ["full_attention"] + ["sliding_attention"] * 3
    assert ministral.hparams.config["sliding_window"] == 32768
    assert ministral.spec("Q4_K_M").sliding_window == 0


@pytest.mark.parametrize("model", MODELED, ids=[m.id for m in MODELED])
def test_every_quant_builds_and_sizes_grow_with_bits(model: CatalogModel):
    assert model.quants
    sizes = {}
    for quant in [q for q in model.quants if model.sizable(q)]:
        spec = model.spec(quant)
        assert spec.file_type == quant
        assert spec.file_bytes > 0
        assert spec.context_length == model.hparams.context_length
        sizes[quant] = spec.file_bytes
    assert sizes
    computed = {q: model._computed(q).file_bytes for q in ("Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0")}
    assert list(computed.values()) == sorted(computed.values())
    if model.native_quant is None:  # gpt-oss: every label keeps MXFP4 experts, sizes barely move
        order = [q for q in ("Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0") if q in sizes]
        assert [sizes[q] for q in order] == sorted(sizes[q] for q in order)


@pytest.mark.parametrize("model", CATALOG, ids=IDS)
def test_file_for_every_quant(model: CatalogModel):
    for quant in model.quants:
        repo, fname = model.file_for(quant)
        assert quant in next(s.files for s in model.gguf if s.repo == repo)
        assert fname
    with pytest.raises(BadInputError):
        model.file_for("IQ1_S")  # a quant no entry files
    for src in model.gguf:  # split files name their first part
        assert all("-of-" not in f or "-00001-of-" in f for f in src.files.values())


def test_swa_layers_from_pattern():
    gemma = find_model("gemma-3-12b")
    assert gemma is not None
    spec = gemma.spec("Q4_K_M")
    assert spec.sliding_window == 1024
    assert len(spec.swa_layers) == gemma.hparams.n_layer
    assert spec.swa_layers[:6] == (True,) * 5 + (False,)
    assert sum(not s for s in spec.swa_layers) == gemma.hparams.n_layer // 6
    oss = find_model("gpt-oss-20b")
    assert oss is not None and oss.spec("MXFP4").swa_layers[:4] == (True, False, True, False)
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
        lambda e: e.update(gguf=[{"repo": "x/y", "files": {"Q9_Z": "a.gguf"}}]),
        lambda e: e.update(quality={"score": "high"}),
        lambda e: e.update(quality={"score": None, "benchmark": "x", "source": "y", "prior": "vibes"}),
        lambda e: e["gguf"][0].update(sizes={"Q4_K_M": -1}),
        lambda e: e["hparams"].update(layer_types=["full_attention"]),
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
