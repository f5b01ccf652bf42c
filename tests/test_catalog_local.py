"""Models already on disk: fake LM Studio, Ollama, HF cache and folder trees in tmp dirs,
each holding small generated GGUF files whose real headers give the estimates."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rooflight.catalog.installed_rank import rank_installed
from rooflight.catalog.local import (
    find_installed,
    installed_paths,
    match_catalog,
)
from rooflight.catalog.rank import rank_models
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from test_estimate_memory import GiB, machine
from test_gguf_factory import write_gguf

CATALOG_REPO = "bartowski/Llama-3.2-1B-Instruct-GGUF"  # a catalog source (llama-3.2-1b)
CATALOG_FILE = "Llama-3.2-1B-Instruct-Q4_K_M.gguf"


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("src")
    return {
        "q4": write_model(d / "a-Q4_K_M.gguf", ftype="Q4_K_M", n_embd=256, n_ff=512, name="A"),
        "q8": write_model(d / "b-Q8_0.gguf", ftype="Q8_0", name="B"),
        "f16": write_model(d / "c-F16.gguf", ftype="F16", n_layer=3, name="C"),
        "split": write_gguf(d / "s.gguf", split_max_tensors=7),
    }


def put(path: Path, src: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, path)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ollama_store(root: Path, models: dict) -> None:
    """Ollama's layout: manifests name blobs/sha256-<hex>; the config blob has file_type."""
    blobs = root / "blobs"

    def blob(data: bytes) -> str:
        h = hashlib.sha256(data).hexdigest()
        (blobs / f"sha256-{h}").parent.mkdir(parents=True, exist_ok=True)
        (blobs / f"sha256-{h}").write_bytes(data)
        return f"sha256:{h}"

    def manifest(rel: str, model_digest: str, size: int, file_type: str | None) -> None:
        config = blob(json.dumps({"model_format": "gguf", "file_type": file_type}).encode()) if file_type else ""
        doc = {"schemaVersion": 2, "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                                              "digest": config, "size": 60},
               "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": model_digest, "size": size},
                          {"mediaType": "application/vnd.ollama.image.template", "digest": blob(b"{{ .Prompt }}"),
                           "size": 12}]}
        p = root / "manifests" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(doc))

    q8 = models["q8"].read_bytes()
    manifest("registry.ollama.ai/library/tiny/latest", blob(q8), len(q8), "Q8_0")
    q4 = models["q4"].read_bytes()
    manifest("hf.co/acme/Tiny-GGUF/Q4_K_M", blob(q4), len(q4), None)
    manifest("registry.ollama.ai/library/gone/latest", "sha256:" + "0" * 64, 10, "Q4_0")  # never finished
    (root / "manifests/registry.ollama.ai/library/broken").mkdir(parents=True)
    (root / "manifests/registry.ollama.ai/library/broken/latest").write_text("{not json")


@pytest.fixture
def disk(tmp_path, models, monkeypatch):
    """HOME with LM Studio's two folders, an Ollama store and a models folder."""
    home = tmp_path / "home"
    lms = home / ".lmstudio" / "models"
    put(lms / CATALOG_REPO / CATALOG_FILE, models["q4"])
    put(lms / "pub" / "B-GGUF" / "b-Q8_0.gguf", models["q8"])
    put(lms / "stray-Q8_0.gguf", models["q8"])  # not PUBLISHER/REPO/FILE: not LM Studio's
    put(home / ".cache" / "lm-studio" / "models" / "old" / "C-GGUF" / "c-F16.gguf", models["f16"])
    folder = tmp_path / "my models"
    put(folder / "nested" / "c-F16.gguf", models["f16"])
    put(folder / "mmproj-c-f16.gguf", models["f16"])  # a vision projector: not a model
    (folder / "notes.txt").write_text("hello")
    for p in models["split"][:2]:  # part 3 of 3 is missing
        put(folder / "split" / p.name, p)
    ollama_store(tmp_path / "ollama", models)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    monkeypatch.setenv("ROOFLIGHT_MODELS_DIRS", str(folder))
    monkeypatch.delenv("ROOFLIGHT_LMSTUDIO_DIRS", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    return tmp_path


def test_finds_models_in_every_store(disk):
    found = find_installed()
    got = {(f.source, f.name, f.repo_id, f.quant, f.complete) for f in found}
    assert got == {
        ("lmstudio", f"{CATALOG_REPO}/{CATALOG_FILE}", CATALOG_REPO, "Q4_K_M", True),
        ("lmstudio", "pub/B-GGUF/b-Q8_0.gguf", "pub/B-GGUF", "Q8_0", True),
        ("lmstudio", "old/C-GGUF/c-F16.gguf", "old/C-GGUF", "F16", True),
        ("ollama", "tiny:latest", None, "Q8_0", True),
        ("ollama", "hf.co/acme/Tiny-GGUF:Q4_K_M", "acme/Tiny-GGUF", "Q4_K_M", True),
        ("folder", "nested/c-F16.gguf", None, "F16", True),
        ("folder", "split/s-00001-of-00003.gguf", None, None, False),
    }
    for f in found:
        assert f.path.is_file()
    # one store at a time, and stores switched off
    assert find_installed(hf_caches=[], lmstudio_dirs=[], ollama_dirs=[], folders=[]) == []
    only = find_installed(hf_caches=[], lmstudio_dirs=[], ollama_dirs=[], folders=[disk / "my models"])
    assert {f.source for f in only} == {"folder"}


def test_ollama_blobs_are_the_gguf_files_their_manifests_name(disk, models):
    found = {f.name: f for f in find_installed(hf_caches=[], lmstudio_dirs=[], folders=[])}
    tiny = found["tiny:latest"]
    assert tiny.sha256 == sha256(models["q8"]) and tiny.path.name == f"sha256-{tiny.sha256}"
    assert tiny.size == models["q8"].stat().st_size and tiny.filename == "latest"
    assert load_model_spec(tiny.path).n_layer == 2  # a real GGUF file
    assert "gone:latest" not in found and "broken:latest" not in found


def test_split_parts_are_one_model_and_a_missing_part_is_flagged(disk, models):
    (split,) = [f for f in find_installed(lmstudio_dirs=[], ollama_dirs=[]) if f.parts > 1]
    assert split.parts == 3 and not split.complete
    assert split.size == sum(p.stat().st_size for p in models["split"][:2])
    put(disk / "my models" / "split" / models["split"][2].name, models["split"][2])
    (split,) = [f for f in find_installed(lmstudio_dirs=[], ollama_dirs=[]) if f.parts > 1]
    assert split.complete


def test_a_file_reachable_twice_is_listed_once(disk):
    lms = disk / "home" / ".lmstudio" / "models"
    found = find_installed(hf_caches=[], ollama_dirs=[], folders=[lms], lmstudio_dirs=[lms])
    paths = [f.path for f in found]
    assert len(paths) == len(set(paths)) == 3
    # LM Studio's listing (which knows the repositories) wins; the stray file only a folder has
    assert sorted((f.source, f.path.name) for f in found) == [
        ("folder", "stray-Q8_0.gguf"), ("lmstudio", CATALOG_FILE), ("lmstudio", "b-Q8_0.gguf")]


def test_installed_models_are_estimated_from_their_real_headers(disk, models):
    hw = machine(8 * GiB)
    result = rank_installed(hw, find_installed(), ctx=1024)
    by_name = {r.installed[0].name: r for r in result.models}
    assert len(by_name) == 6
    for r in result.models:
        f = r.installed[0]
        (o,) = r.options
        assert r.origin == "disk" and o.source == "disk" and o.file_bytes_source == "disk"
        assert o.estimate.spec.params == load_model_spec(f.path).params  # the header, not the name
        assert o.estimate.config.n_ctx == 1024 and o.estimate.fit == "full_gpu"
    # the file that is a catalog model's keeps the catalog's entry and quality figure
    cat = by_name[f"{CATALOG_REPO}/{CATALOG_FILE}"]
    assert cat.model.id == "llama-3.2-1b" and cat.quality_source == "benchmark"
    other = by_name["tiny:latest"]
    assert other.quality_source == "size" and other.model.id == "tiny:latest"
    assert other.to_dict()["installed_files"][0]["source"] == "ollama"
    (skipped,) = result.skipped
    assert "missing some of its 3 parts" in skipped[1]


def test_rank_marks_installed_catalog_models_and_filters(disk):
    hw = machine(8 * GiB)
    files = find_installed()
    assert set(match_catalog(files)) == {"llama-3.2-1b"}
    ranked = rank_models(hw, installed=files, max_params_b=2)
    mine = [r for r in ranked if r.installed]
    assert [r.model.id for r in mine] == ["llama-3.2-1b"]
    doc = mine[0].to_dict()
    assert doc["installed"] is True and doc["installed_files"][0]["path"].endswith(CATALOG_FILE)
    assert {o["quant"] for o in doc["options"] if o["installed"]} == {"Q4_K_M"}
    only = rank_models(hw, installed=files, installed_only=True)
    assert [r.model.id for r in only] == ["llama-3.2-1b"]
    # found on disk when not given
    assert [r.model.id for r in rank_models(hw, installed_only=True)] == ["llama-3.2-1b"]
    assert installed_paths(files)[(CATALOG_REPO, CATALOG_FILE)].endswith(CATALOG_FILE)


def test_hf_cache_downloads_are_found_and_marked_in_hub_results(hub_server, models):
    from huggingface_hub import constants, hf_hub_download

    from rooflight.catalog.hub_rank import rank_hub_results

    hub_server.add_file("acme/Tiny-GGUF", "Tiny-Q4_K_M.gguf", models["q4"])
    hub_server.add_file("acme/Tiny-GGUF", "Tiny-Q8_0.gguf", models["q8"])
    for p in models["split"]:
        hub_server.add_file("acme/Split-GGUF", f"Q4_0/{p.name}", p)
    for p in models["split"]:  # all parts at one commit: a split model's parts belong together
        hf_hub_download("acme/Split-GGUF", f"Q4_0/{p.name}")
    hf_hub_download("acme/Tiny-GGUF", "Tiny-Q4_K_M.gguf")
    found = find_installed(hf_caches=[constants.HF_HUB_CACHE], lmstudio_dirs=[], ollama_dirs=[], folders=[])
    got = {(f.repo_id, f.filename, f.parts, f.complete) for f in found}
    assert got == {("acme/Tiny-GGUF", "Tiny-Q4_K_M.gguf", 1, True),
                   ("acme/Split-GGUF", "Q4_0/s-00001-of-00003.gguf", 3, True)}
    tiny = next(f for f in found if f.repo_id == "acme/Tiny-GGUF")
    assert tiny.source == "hf_cache" and tiny.sha256 == sha256(models["q4"]) and tiny.quant == "Q4_K_M"
    (r,) = rank_hub_results(machine(8 * GiB), ["acme/Tiny-GGUF"], installed=found).models
    assert [f.filename for f in r.installed] == ["Tiny-Q4_K_M.gguf"]
    assert {o["quant"]: o["installed"] for o in r.to_dict()["options"]} == {"Q4_K_M": True, "Q8_0": False}


def test_models_and_rank_installed_cli(disk, tmp_path):
    profile = tmp_path / "hw.json"
    profile.write_text(json.dumps({"gpus": [{"name": "RTX 4090"}], "cpu": {"ram_total_bytes": 64 * GiB}}))
    env = dict(os.environ)
    run = [sys.executable, "-m", "rooflight"]
    r = subprocess.run([*run, "models", "--only-dirs", "--dir", str(disk / "my models"), "--hardware",
                        str(profile), "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [m["installed_files"][0]["name"] for m in doc["models"]] == ["nested/c-F16.gguf"]
    assert doc["skipped"][0]["path"].endswith("s-00001-of-00003.gguf")
    assert "skipped" in r.stderr
    r = subprocess.run([*run, "models", "--hardware", str(profile)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0 and "tiny:latest" in r.stdout and "ollama" in r.stdout
    r = subprocess.run([*run, "rank", "--installed", "--json", "--hardware", str(profile)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert [m["id"] for m in json.loads(r.stdout)["models"]] == ["llama-3.2-1b"]
    r = subprocess.run([*run, "rank", "--installed", "--hardware", str(profile)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and " *" in r.stdout and "* already on disk" in r.stdout, r.stdout
    bad = subprocess.run([*run, "models", "--dir", str(tmp_path / "nope")], capture_output=True, text=True,
                         timeout=120, env=env)
    assert bad.returncode == 2 and "is not a folder" in bad.stderr
