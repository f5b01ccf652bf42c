"""Hub search, file listings, remote headers and offline answers, against the local Hub.

The real huggingface_hub client talks HTTP to tests/hub_server.py; the models it serves
are small generated GGUF files (rooflight.gguf.synthetic), so every header is real.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import constants

from rooflight.catalog import hub, hub_cache
from rooflight.catalog.hub import list_gguf_files, refresh_catalog_files, search_hub
from rooflight.catalog.hub_files import group_gguf, parse_quant
from rooflight.catalog.hub_rank import rank_hub_results, search_and_rank
from rooflight.catalog.models import parse_catalog
from rooflight.catalog.quality import quality_score, size_prior
from rooflight.catalog.rank import choose_best, rank_models, score_option
from rooflight.errors import BadInputError, OperationFailedError
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from test_estimate_memory import GiB, machine
from test_gguf_factory import write_gguf

REPO = "acme/Tiny-GGUF"
QUANTS = ("Q4_K_M", "Q8_0", "F16")
SHAPE = dict(n_layer=4, n_embd=256, n_head=4, n_head_kv=2, n_ff=512, context_length=4096)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    """One small model at three quantizations (0.9 to 2.7 MB)."""
    d = tmp_path_factory.mktemp("tiny")
    return {q: write_model(d / f"Tiny-{q}.gguf", ftype=q, name="Tiny", **SHAPE) for q in QUANTS}


@pytest.fixture(autouse=True)
def _fresh_reachability():
    # each test's Hub stand-in is a new endpoint, but keep the module's memory clean too
    hub._unreachable.clear()
    yield


def publish(server, tiny, repo=REPO, downloads=0, tags=("gguf",)):
    for q, path in tiny.items():
        server.add_file(repo, f"Tiny-{q}.gguf", path)
    server.add_file(repo, "README.md", b"# tiny\n")
    server.repo_meta[repo] = {"downloads": downloads, "tags": list(tags)}


def hw_big():
    return machine(24 * GiB, ram=64 * GiB)


# ---- search and listings ------------------------------------------------------------------


def test_search_finds_gguf_repos_most_downloaded_first(hub_server, tiny):
    publish(hub_server, tiny, "acme/Tiny-GGUF", downloads=10)
    publish(hub_server, tiny, "other/tiny-chat-GGUF", downloads=500)
    hub_server.add_file("acme/tiny-safetensors", "model.safetensors", b"x" * 10)
    found = search_hub("tiny")
    assert [r.repo_id for r in found.repos] == ["other/tiny-chat-GGUF", "acme/Tiny-GGUF"]
    assert not found.offline
    top = found.repos[0]
    assert top.downloads == 500 and set(top.quants) == set(QUANTS)
    assert set(top.gguf_files) == {f"Tiny-{q}.gguf" for q in QUANTS}
    searches = [r for r in hub_server.requests if r.path == "/api/models"]
    assert len(searches) == 1
    assert search_hub("nothing-like-this").repos == ()


def test_listing_groups_split_parts_with_sizes_and_sha256(hub_server):
    parts = {f"Q8_0/big-Q8_0-{i:05d}-of-00003.gguf": bytes([i]) * (1000 + i) for i in (1, 2, 3)}
    for path, data in parts.items():
        hub_server.add_file(REPO, path, data)
    hub_server.add_file(REPO, "big-Q4_K_M.gguf", b"q4" * 100)
    hub_server.add_file(REPO, "mmproj-big-f16.gguf", b"projector")
    hub_server.add_file(REPO, "half-Q6_K-00001-of-00002.gguf", b"only part one")
    listing = list_gguf_files(REPO)
    by_name = {f.filename: f for f in listing.files}
    assert set(by_name) == {"Q8_0/big-Q8_0-00001-of-00003.gguf", "big-Q4_K_M.gguf",
                            "half-Q6_K-00001-of-00002.gguf"}
    split = by_name["Q8_0/big-Q8_0-00001-of-00003.gguf"]
    assert split.parts == tuple(parts) and split.complete and split.quant == "Q8_0"
    assert split.size == sum(len(d) for d in parts.values())
    assert split.sha256 == tuple(hashlib.sha256(d).hexdigest() for d in parts.values())
    assert split.commit == listing.commit and split.uri.endswith(f"@{listing.commit}")
    assert not by_name["half-Q6_K-00001-of-00002.gguf"].complete


def test_quant_labels_and_grouping_from_names():
    assert parse_quant("Qwen3-8B-Q4_K_M.gguf") == "Q4_K_M"
    assert parse_quant("gemma-3-1b-it-UD-Q4_K_XL.gguf") == "UD-Q4_K_XL"
    assert parse_quant("phi-4.IQ4_XS.gguf") == "IQ4_XS"
    assert parse_quant("tiny-f16.gguf") == "F16"
    assert parse_quant("Q6_K/model-Q6_K-00001-of-00002.gguf") == "Q6_K"
    assert parse_quant("Qwen3.6-35B-A3B-NVFP4.gguf") == "NVFP4"  # FP4 files are named by their format
    assert parse_quant("model.gguf") is None
    groups = group_gguf(["a-00002-of-00002.gguf", "a-00001-of-00002.gguf", "imatrix.gguf", "b.gguf"])
    assert [(g.filename, g.complete) for g in groups] == [("a-00001-of-00002.gguf", True), ("b.gguf", True)]


# ---- ranking search results ---------------------------------------------------------------


def test_rank_reads_one_header_remotely_and_ranks_like_the_catalog(hub_server, tiny):
    publish(hub_server, tiny)
    hw = hw_big()
    result = search_and_rank("tiny", hw, 2048)  # the GUI's provider signature
    assert not result.offline and not result.skipped
    assert list(result) == result.models and len(result) == 1 and result[0] is result.models[0]
    (r,) = result.models
    assert r.origin == "hub" and r.model.id == REPO and r.quality_source == "size"
    # only the Q4_K_M file's header was read, and not all of it
    read = {k: v for k, v in hub_server.bytes_served.items() if v}
    q4 = f"{REPO}/Tiny-Q4_K_M.gguf"
    assert set(read) == {q4} and read[q4] < tiny["Q4_K_M"].stat().st_size
    by_quant = {o.quant: o for o in r.options}
    assert set(by_quant) == set(QUANTS)
    assert by_quant["Q4_K_M"].source == "header" and by_quant["Q8_0"].source == "scaled"
    for q, o in by_quant.items():
        assert o.estimate.spec.file_bytes == tiny[q].stat().st_size  # the Hub's exact sizes
        assert o.file_bytes_source == "hub" and o.filename == f"Tiny-{q}.gguf"
    # the catalog's rules: size prior (no benchmark), best quant, score
    params_b = load_model_spec(tiny["F16"]).params / 1e9
    assert r.model.params_total == pytest.approx(params_b)
    for o in r.options:
        assert o.quality == pytest.approx(quality_score(size_prior(params_b), o.quant, params_b))
    assert r.best == choose_best(r.options) and r.score == score_option(r.best, "chat")
    doc = r.to_dict()
    assert doc["repo"] == REPO and doc["file"] == f"Tiny-{r.best.quant}.gguf" and doc["origin"] == "hub"
    assert doc["file_bytes_source"] == "hub" and doc["quality_source"] == "size"


def test_scaled_estimates_stay_close_to_exact_headers(hub_server, tiny):
    publish(hub_server, tiny)
    hw = machine(ram=8 * GiB, backend="cpu")
    scaled = rank_hub_results(hw, [REPO], ctx=2048).models[0]
    exact = rank_hub_results(hw, [REPO], ctx=2048, exact=True).models[0]
    assert {o.source for o in exact.options} == {"header"}
    for s, e in zip(scaled.options, exact.options, strict=True):
        assert s.quant == e.quant
        assert s.estimate.memory.total_bytes == pytest.approx(e.estimate.memory.total_bytes, rel=0.02)
        assert s.estimate.performance.decode_tok_s == pytest.approx(e.estimate.performance.decode_tok_s, rel=0.15)
    # headers read once are reused from the disk cache: a second exact ranking reads nothing
    hub_server.reset_counters()
    again = rank_hub_results(hw, [REPO], ctx=2048, exact=True).models[0]
    assert not any(hub_server.bytes_served.values())
    assert [o.source for o in again.options] == ["header"] * 3


def test_split_model_is_one_option_read_from_all_its_parts(hub_server, tmp_path):
    parts = write_gguf(tmp_path / "tiny.gguf", split_max_tensors=7)
    for p in parts:
        hub_server.add_file("acme/split", f"Q4_0/{p.name.replace('tiny', 'tiny-Q4_0')}", p)
    (r,) = rank_hub_results(hw_big(), ["acme/split"]).models
    (o,) = r.options
    assert o.source == "header" and o.estimate.spec.split_count == 3
    assert o.filename == "Q4_0/tiny-Q4_0-00001-of-00003.gguf"
    assert o.estimate.spec.file_bytes == sum(p.stat().st_size for p in parts)


def test_too_large_is_never_recommended(hub_server, tiny):
    publish(hub_server, tiny)
    tiny_machine = machine(ram=256 * 2**20, backend="cpu")  # 256 MiB: nothing fits
    (r,) = rank_hub_results(tiny_machine, [REPO]).models
    assert r.fit == "too_large" and r.score == 0.0


def test_no_gguf_and_missing_repos_are_skipped_with_a_sentence(hub_server, tiny):
    publish(hub_server, tiny)
    hub_server.add_file("acme/empty", "README.md", b"nothing")
    result = rank_hub_results(hw_big(), ["acme/empty", "acme/missing", REPO])
    assert [r.model.id for r in result.models] == [REPO]
    reasons = dict(result.skipped)
    assert "no complete GGUF model file" in reasons["acme/empty"]
    assert "does not exist on the Hub" in reasons["acme/missing"]


# ---- gated and private --------------------------------------------------------------------


def test_gated_repo_says_how_to_get_access(hub_server, tiny, monkeypatch):
    publish(hub_server, tiny, "meta/Gated-GGUF")
    hub_server.require_token("meta/Gated-GGUF", "hf_secret")
    result = rank_hub_results(hw_big(), search_hub("gated").repos)
    assert not result.models
    (why,) = dict(result.skipped).values()
    assert "gated" in why and "licence" in why and "HF_TOKEN" in why and "hf auth login" in why
    assert why.endswith(".") and why.count(". ") == 0  # one sentence
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert [r.model.id for r in rank_hub_results(hw_big(), ["meta/Gated-GGUF"]).models] == ["meta/Gated-GGUF"]


def test_private_repo_without_token(hub_server, tiny, monkeypatch):
    publish(hub_server, tiny, "me/private-GGUF")
    hub_server.require_token("me/private-GGUF", "hf_mine", private=True)
    assert search_hub("private").repos == ()  # invisible to others, as on the Hub
    with pytest.raises(BadInputError, match=r"does not exist on the Hub or is private.*HF_TOKEN.*hf auth login"):
        list_gguf_files("me/private-GGUF")
    monkeypatch.setenv("HF_TOKEN", "hf_mine")
    assert [r.repo_id for r in search_hub("private", max_age=0).repos] == ["me/private-GGUF"]
    assert len(list_gguf_files("me/private-GGUF").files) == 3


# ---- cache, expiry, offline ---------------------------------------------------------------


def test_answers_are_cached_and_expire(hub_server, tiny):
    publish(hub_server, tiny)
    search_hub("tiny")
    publish(hub_server, tiny, "acme/tiny-2-GGUF")
    n = len(hub_server.requests)
    assert [r.repo_id for r in search_hub("tiny").repos] == [REPO]  # fresh: from the disk
    assert len(hub_server.requests) == n
    assert len(search_hub("tiny", max_age=0).repos) == 2  # expired: asked again
    # an answer written hours ago counts as expired with the default max age
    key = json.dumps([hub.endpoint(), "tiny", None])
    old = hub_cache.load("search", key)
    hub_cache.store("search", key, old.data, fetched_at=old.fetched_at - hub.SEARCH_MAX_AGE_S - 1)
    n = len(hub_server.requests)
    search_hub("tiny")
    assert len(hub_server.requests) > n
    assert list(hub_cache.answers_dir().glob("search/*.json"))


def test_offline_mode_serves_everything_from_the_cache(hub_server, tiny, monkeypatch):
    publish(hub_server, tiny)
    online = search_and_rank("tiny", hw_big())
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    n = len(hub_server.requests)
    offline = search_and_rank("tiny", hw_big())
    assert len(hub_server.requests) == n  # not one request
    assert offline.offline and offline.models[0].offline
    assert [o.to_dict() for o in offline.models[0].options] == [o.to_dict() for o in online.models[0].options]
    assert search_hub("tiny").offline and list_gguf_files(REPO).offline


def test_offline_with_a_cold_cache_says_so_in_one_sentence(hub_server, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OperationFailedError) as e:
        search_hub("tiny")
    msg = str(e.value)
    assert "HF_HUB_OFFLINE" in msg and "no earlier answer is cached" in msg and msg.count(". ") == 0
    assert not hub_server.requests


def test_unreachable_hub_falls_back_to_the_cache(hub_server, tiny):
    publish(hub_server, tiny)
    search_hub("tiny")
    list_gguf_files(REPO)
    hub_server.stop()  # the network goes away, pooled connections too
    huggingface_hub.close_session()
    found = search_hub("tiny", max_age=0)
    assert found.offline and [r.repo_id for r in found.repos] == [REPO]
    assert list_gguf_files(REPO, max_age=0).offline
    with pytest.raises(OperationFailedError, match="be reached.*no earlier answer is cached"):
        search_hub("something else")


# ---- the catalog's files as the Hub lists them ----------------------------------------------


def tiny_catalog(repo=REPO):
    """A one-model catalog whose hyper-parameters are the tiny model's."""
    entry = {
        "id": "tiny", "name": "Tiny", "family": "tiny", "architecture": "llama", "layout": "llama",
        "params_total": 0.003, "params_active": 0.003, "license": "mit", "tags": ["chat"],
        "release": "2025-01", "hparams_source": "test", "quality": None,
        "hparams": {"n_layer": 4, "n_embd": 256, "n_head": 4, "n_head_kv": 2, "head_dim": 64,
                    "n_ff": 512, "n_vocab": 260, "context_length": 4096},
        "gguf": [{"repo": repo, "files": {"Q4_K_M": "Tiny-Q4_K_M.gguf", "Q6_K": "Tiny-Q6_K.gguf"}}],
    }
    return parse_catalog({"models": [entry]})


def test_catalog_sizes_become_the_hubs_when_refreshed(hub_server, tiny):
    publish(hub_server, tiny)  # the Hub has Q4_K_M, Q8_0, F16: no Q6_K any more
    models = tiny_catalog()
    before = rank_models(hw_big(), models=models)[0]
    assert {o.quant: o.source for o in before.options} == {"Q4_K_M": "computed", "Q6_K": "computed"}
    assert before.to_dict()["file_bytes_source"] == "computed"
    assert hub.cached_catalog_files(models) == {}  # nothing asked yet
    refreshed = refresh_catalog_files(models)
    assert not refreshed.offline and not refreshed.errors
    after = rank_models(hw_big(), models=models, hub_files=refreshed.models)[0]
    by_quant = {o.quant: o for o in after.options}
    assert set(by_quant) == {"Q4_K_M", "Q8_0", "F16"}  # the Hub's list: Q6_K gone, two added
    for q, o in by_quant.items():
        assert o.source == "hub" and o.estimate.spec.file_bytes == tiny[q].stat().st_size
        # the recipe's computed size was close: the file adds only its header
        computed = models[0].spec(q).file_bytes
        assert computed <= o.estimate.spec.file_bytes <= computed * 1.1 + 64 * 1024
    assert after.to_dict()["file_bytes_source"] == "hub"
    # later runs read the same answer from the disk, without the Hub
    assert hub.cached_catalog_files(models) == refreshed.models


# ---- the command line -----------------------------------------------------------------------


def test_search_cli_json_and_offline_note(hub_server, tiny, tmp_path):
    publish(hub_server, tiny)
    profile = tmp_path / "hw.json"
    profile.write_text(json.dumps({"gpus": [{"name": "RTX 4090"}], "cpu": {"ram_total_bytes": 64 * GiB}}))
    cmd = [sys.executable, "-m", "rooflight", "search", "tiny", "--hardware", str(profile), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["offline"] is False and doc["query"] == "tiny"
    (m,) = doc["models"]
    assert m["id"] == REPO and m["origin"] == "hub" and m["fit"] == "full_gpu"
    assert set(m) >= {"quant", "file", "repo", "decode_tok_s", "memory_bytes", "score", "options", "downloads"}
    offline = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                             env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["offline"] is True
    assert "offline (offline mode is on (HF_HUB_OFFLINE is set))" in offline.stderr
    cold = subprocess.run([*cmd[:4], "other", *cmd[5:]], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    assert cold.returncode == 1 and "no earlier answer is cached" in cold.stderr
    assert len(cold.stderr.strip().splitlines()) == 1


def test_a_damaged_cache_file_is_asked_again(hub_server, tiny, monkeypatch):
    publish(hub_server, tiny)
    search_hub("tiny")
    (path,) = hub_cache.answers_dir().glob("search/*.json")
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "data": ["not", "a", "search"]}))
    n = len(hub_server.requests)
    assert [r.repo_id for r in search_hub("tiny").repos] == [REPO]
    assert len(hub_server.requests) > n
    path.write_text("{half a json")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OperationFailedError, match="no earlier answer is cached"):
        search_hub("tiny")


def test_search_cli_refuses_an_empty_query_before_the_network():
    r = subprocess.run([sys.executable, "-m", "rooflight", "search", "  "], capture_output=True, text=True,
                       timeout=60, env={**__import__("os").environ, "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert r.returncode == 2 and r.stderr.strip() == (
        "rooflight: search needs some text of the repository name, such as 'qwen3 8b'.")
