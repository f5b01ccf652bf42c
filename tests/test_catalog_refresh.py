"""`python -m rooflight.catalog.refresh` against the local Hub stand-in (tests/hub_server.py).

The real huggingface_hub client lists the served repositories and range-reads real
headers of small generated GGUF files; the refresh rewrites a catalog file on disk.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from rooflight.catalog import hub
from rooflight.catalog.models import parse_catalog
from rooflight.catalog.refresh import main, refresh_document
from rooflight.gguf.synthetic import write_model

SHAPE = dict(n_layer=4, n_embd=256, n_head=4, n_head_kv=2, n_ff=512, context_length=4096)


@pytest.fixture(autouse=True)
def _fresh_reachability():
    hub._unreachable.clear()
    yield


@pytest.fixture
def served(hub_server, tmp_path):
    """acme/Tiny-GGUF: Q4_K_M, Q8_0 (renamed upstream), F16 (added upstream), a split Q6_K in
    a folder; the files carry output.weight (untied)."""
    d = tmp_path / "models"
    d.mkdir()
    paths = {q: write_model(d / f"Tiny-{q}.gguf", ftype=q, name="Tiny", **SHAPE) for q in ("Q4_K_M", "Q8_0", "F16")}
    hub_server.add_file("acme/Tiny-GGUF", "Tiny-Q4_K_M.gguf", paths["Q4_K_M"])
    hub_server.add_file("acme/Tiny-GGUF", "Tiny-v2-Q8_0.gguf", paths["Q8_0"])
    hub_server.add_file("acme/Tiny-GGUF", "Tiny-F16.gguf", paths["F16"])
    hub_server.add_file("acme/Tiny-GGUF", "mmproj-Tiny-F16.gguf", b"projector, not a model")
    hub_server.add_file("acme/Tiny-GGUF", "README.md", b"# tiny\n")
    return hub_server, paths


def _entry(**over) -> dict:
    e = {
        "id": "tiny", "name": "Tiny", "family": "tiny", "architecture": "llama", "layout": "llama",
        "params_total": 0.005, "params_active": 0.005, "license": "apache-2.0", "tags": ["chat", "tiny"],
        "release": "2026-01",
        "hparams": {"n_layer": 5, "n_embd": 256, "n_head": 4, "n_head_kv": 2, "head_dim": 64, "n_ff": 512,
                    "n_vocab": 260, "context_length": 2048, "tie_embeddings": True},
        "hparams_source": "a config.json",
        "quality": {"score": None, "benchmark": "Open LLM Leaderboard v2 average", "source": "none", "prior": "size"},
        "gguf": [{"repo": "acme/Tiny-GGUF", "checked": False, "source": "pattern",
                  "files": {"Q4_K_M": "Tiny-Q4_K_M.gguf", "Q6_K": "Tiny-Q6_K.gguf", "Q8_0": "Tiny-Q8_0.gguf"},
                  "sizes": {"Q4_K_M": 1}}],
    }
    e.update(over)
    return e


def _doc(*entries) -> dict:
    return {"version": 2, "sources": "test", "computed_sizes": "computed from hparams", "models": list(entries)}


def test_refresh_rewrites_files_sizes_sha256_and_hyperparameters(served):
    server, paths = served
    new, report = refresh_document(_doc(_entry()))
    src = new["models"][0]["gguf"][0]
    # renamed file followed by its quant, a gone quant dropped, an added one listed; mmproj is no model
    assert src["files"] == {"Q4_K_M": "Tiny-Q4_K_M.gguf", "Q8_0": "Tiny-v2-Q8_0.gguf", "F16": "Tiny-F16.gguf"}
    for q in src["files"]:
        data = paths[q].read_bytes()
        assert src["sizes"][q] == len(data)
        assert src["sha256"][q] == [hashlib.sha256(data).hexdigest()]
    assert src["checked"] is True and "refreshed" in src["source"] and src["revision"]
    assert src["mmproj"] == {"F16": "mmproj-Tiny-F16.gguf"}  # the projector is listed apart
    h = new["models"][0]["hparams"]
    assert h["n_layer"] == 4 and h["context_length"] == 4096 and h["n_vocab"] > 256  # the header wins
    assert src["untied_output"] is True  # the files carry output.weight
    assert "checked against the GGUF header of acme/Tiny-GGUF/Tiny-Q4_K_M.gguf" in new["models"][0]["hparams_source"]
    what = " ".join(report.changed["tiny"])
    assert "Q6_K" in what and "Tiny-v2-Q8_0.gguf" in what and "added F16" in what and "n_layer is 4" in what
    assert report.repos == 1 and report.headers == 1 and not report.errors
    parse_catalog(new)  # the app reads it back
    # one listing request and a few range reads, nothing downloaded whole
    served_bytes = sum(server.bytes_served.values())
    assert served_bytes < sum(p.stat().st_size for p in paths.values())


def test_refresh_command_writes_atomically_and_reports_failures(served, tmp_path):
    server, _ = served
    cat = tmp_path / "catalog.json"
    missing = _entry(id="ghost", gguf=[{"repo": "acme/Ghost-GGUF", "files": {"Q4_K_M": "Ghost-Q4_K_M.gguf"}}])
    cat.write_text(json.dumps(_doc(_entry(), missing)))
    assert main(["--catalog", str(cat)]) == 1  # one repository could not be listed
    doc = json.loads(cat.read_text())
    tiny, ghost = doc["models"]
    assert tiny["gguf"][0]["checked"] is True
    assert ghost == missing  # a failed listing never empties an entry
    assert not list(tmp_path.glob(".catalog-*"))
    # a second run changes nothing: the refresh is idempotent
    before = cat.read_text()
    out = tmp_path / "again.json"
    assert main(["--catalog", str(cat), "--only", "tiny", "--output", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["models"][0]["gguf"] == tiny["gguf"] and again["models"][0]["hparams"] == tiny["hparams"]
    assert cat.read_text() == before


def test_refresh_dry_run_and_module_entry_point(served, tmp_path):
    server, _ = served
    cat = tmp_path / "catalog.json"
    cat.write_text(json.dumps(_doc(_entry())))
    before = cat.read_text()
    r = subprocess.run([sys.executable, "-m", "rooflight.catalog.refresh", "--catalog", str(cat), "--dry-run",
                        "--no-headers", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["repos"] == 1 and report["headers"] == 0 and "tiny" in report["changed"]
    assert cat.read_text() == before
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = subprocess.run([sys.executable, "-m", "rooflight.catalog.refresh", "--catalog", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "cannot read the catalog" in r.stderr and "Traceback" not in r.stderr


def test_split_files_in_a_folder_name_their_first_part(hub_server, tmp_path):
    from test_gguf_factory import write_gguf

    parts = write_gguf(tmp_path / "tiny.gguf", split_max_tensors=7)
    for p in parts:
        hub_server.add_file("acme/Split-GGUF", f"Q4_0/{p.name.replace('tiny', 'Split-Q4_0')}", p)
    entry = _entry(gguf=[{"repo": "acme/Split-GGUF", "files": {"Q4_0": "Q4_0/"}}])
    new, report = refresh_document(_doc(entry), headers=False)
    src = new["models"][0]["gguf"][0]
    assert src["files"] == {"Q4_0": "Q4_0/Split-Q4_0-00001-of-00003.gguf"}
    assert src["sizes"]["Q4_0"] == sum(p.stat().st_size for p in parts)
    assert len(src["sha256"]["Q4_0"]) == 3
