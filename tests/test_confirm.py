"""`estimate --confirm`: llama.cpp's own no-alloc numbers, from a header-only sparse copy.

Each check runs the real llama.cpp of this build in the real child process: what it says
it would allocate for a sparse copy (header bytes, then a hole) must equal what it really
allocates when the whole model is loaded, within 1%; the copy is removed after success,
failure and timeout; no weight is read.
"""

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from gguf import GGUFWriter

from gemma_model import gemma_270m_path
from rooflight.estimate import Wishes, plan
from rooflight.gguf import load_model_spec
from rooflight.gguf.header import FIRST_CHUNK
from rooflight.gguf.header_copy import header_copies
from rooflight.gguf.synthetic import write_model
from rooflight.hardware.profile import CPUInfo, HardwareProfile
from rooflight.runtime import noalloc_worker
from rooflight.runtime.confirm import (
    Confirmation,
    ConfirmedDevice,
    confirm,
    describe,
    write_sparse_copy,
)
from rooflight.runtime.measure import measure
from rooflight.runtime.stress import reported_memory

pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.skipif(not noalloc_worker.breakdown_abi_supported(),
                                reason="llama.cpp's memory breakdown is read on Linux x86-64 only")

GiB = 2**30
HOST = HardwareProfile(
    cpu=CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0),
    backend="cpu",
)
CASES = {
    "llama-f16": dict(arch="llama", n_layer=4, n_embd=256, n_head=8, n_head_kv=2, n_ff=768, n_vocab=2000, ftype="F16"),
    "llama-q4km": dict(arch="llama", n_layer=4, n_embd=512, n_head=8, n_head_kv=4, n_ff=1536, n_vocab=4000,
                       ftype="Q4_K_M"),
    "gemma3-swa": dict(arch="gemma3", n_layer=7, n_embd=256, n_head=4, n_head_kv=1, head_dim=128, n_ff=512,
                       n_vocab=3000, ftype="Q8_0", sliding_window=128),
    "qwen3moe": dict(arch="qwen3moe", n_layer=3, n_embd=256, n_head=8, n_head_kv=2, n_ff=256, n_vocab=2000,
                     ftype="Q8_0", n_expert=8, n_expert_used=2),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("confirm_models")
    return {name: write_model(d / f"{name}.gguf", context_length=16384, **kw) for name, kw in CASES.items()}


def _real(path, est):
    """What llama.cpp allocates on a real load of the whole file, per device."""
    spec = load_model_spec(str(path))
    got = measure(path, est.config, prompt_tokens=1, gen_tokens=1).buffers
    return reported_memory(spec, got).devices


def _assert_matches_real_load(c: Confirmation, real: dict) -> None:
    assert c.by == "llama.cpp", c.reason
    told = {d.device: d for d in c.devices}
    assert set(told) == set(real)
    for dev, r in real.items():
        t = told[dev]
        assert t.kv_bytes == pytest.approx(r["kv_bytes"], rel=0.01, abs=2**20 // 100)
        assert t.weights_bytes == pytest.approx(r["weights_bytes"], rel=0.01)
        assert t.total_bytes == pytest.approx(r["total_bytes"], rel=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("wishes", [Wishes(n_ctx=4096, flash_attn="on"), Wishes(n_ctx=2048, flash_attn="off")],
                         ids=["4096-fa", "2048-nofa"])
def test_no_alloc_numbers_equal_a_real_load(models, name, wishes, tmp_path):
    path = models[name]
    est = plan(load_model_spec(str(path)), HOST, replace(wishes, n_gpu_layers=0))
    c = confirm(path, est, work_dir=tmp_path)
    _assert_matches_real_load(c, _real(path, est))
    assert list(tmp_path.iterdir()) == []  # the sparse copy is gone
    assert c.max_difference_pct is not None and c.max_difference_pct < 10


@pytest.mark.slow
def test_gemma_package_model_confirmed_without_reading_its_weights(tmp_path):
    path = gemma_270m_path()
    spec = load_model_spec(str(path))
    est = plan(spec, HOST, Wishes(n_ctx=8192, n_gpu_layers=0))
    c = confirm(path, est, work_dir=tmp_path)
    _assert_matches_real_load(c, _real(path, est))
    # the child read() the header and little else while loading: not 250 MB of weights
    assert c.read_bytes_during_load is not None
    header = sum(len(h.header) for h in header_copies(path))
    assert c.read_bytes_during_load < header + 2**20 < spec.file_bytes / 10
    assert c.agrees and describe(c).startswith("llama.cpp confirms: ")


def test_sparse_copy_is_a_header_and_a_hole(tmp_path, models):
    path = models["llama-q4km"]
    copies = header_copies(path)
    first = write_sparse_copy(copies, tmp_path)
    size = os.path.getsize(path)
    assert os.path.getsize(first) == size
    assert os.stat(first).st_blocks * 512 <= len(copies[0].header) + 64 * 1024  # data region: a hole
    with open(first, "rb") as f, open(path, "rb") as g:
        assert f.read(len(copies[0].header)) == g.read(len(copies[0].header))
        data = f.read()
    assert data == bytes(len(data))  # no weight in the copy, only zeros


def test_a_load_llama_cpp_refuses_is_reported_and_cleaned_up(tmp_path):
    bad = tmp_path / "models" / "bad.gguf"
    bad.parent.mkdir()
    w = GGUFWriter(bad, "llama")  # a valid GGUF that lacks every llama hyper-parameter
    w.add_tensor("token_embd.weight", __import__("numpy").zeros((8, 32), dtype="float32"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    est = plan(load_model_spec(str(write_model(tmp_path / "models" / "ok.gguf"))), HOST, Wishes(n_ctx=512))
    work = tmp_path / "work"
    work.mkdir()
    c = confirm(bad, est, work_dir=work)
    assert c.by is None and c.reason.startswith("llama.cpp could not simulate this load")
    assert list(work.iterdir()) == []
    assert c.to_dict() == {"by": None, "reason": c.reason}
    assert describe(c).startswith("llama.cpp could not confirm the plan: ")


def test_a_timeout_kills_the_check_and_cleans_up(tmp_path, models):
    path = models["llama-f16"]
    est = plan(load_model_spec(str(path)), HOST, Wishes(n_ctx=512))
    c = confirm(path, est, timeout_s=0.01, work_dir=tmp_path)  # no Python starts in 10 ms
    assert c.by is None and "did not answer within 0.01 s" in c.reason
    assert list(tmp_path.iterdir()) == []


def test_unreadable_header_falls_back_to_the_plan(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model")
    est = plan(load_model_spec(str(write_model(tmp_path / "ok.gguf"))), HOST, Wishes(n_ctx=512))
    c = confirm(junk, est, work_dir=tmp_path)
    assert c.by is None and "header could not be read" in c.reason


def test_worker_says_so_where_the_breakdown_cannot_be_read(monkeypatch):
    monkeypatch.setattr(noalloc_worker, "breakdown_abi_supported", lambda: False)
    answer = noalloc_worker.run({"path": "unused.gguf", "config": {}})
    assert answer["ok"] is False and answer["unsupported"] and "Linux x86-64" in answer["reason"]


def test_remote_header_confirmed_before_the_download(hub_server, models, tmp_path):
    path = models["gemma3-swa"]
    hub_server.add_file("tester/tiny-GGUF", "tiny-Q8_0.gguf", path)
    uri = "hf:tester/tiny-GGUF/tiny-Q8_0.gguf"
    est = plan(load_model_spec(uri), HOST, Wishes(n_ctx=4096, n_gpu_layers=0))
    hub_server.reset_counters()
    work = tmp_path / "work"
    work.mkdir()
    c = confirm(uri, est, work_dir=work)
    served = sum(hub_server.bytes_served.values())
    assert c.by == "llama.cpp", c.reason
    local = confirm(path, est, work_dir=work)
    assert c.devices == local.devices
    # the header's bytes as a header read fetches them (its first range is 1 MiB), never the weights
    assert served <= max(FIRST_CHUNK, len(header_copies(path)[0].header)) + 1024
    assert served < os.path.getsize(path) / 4
    assert list(work.iterdir()) == []


@pytest.mark.slow
def test_a_tied_output_the_cpu_kernels_convert_is_counted_once(tmp_path):
    """A tied Q4_0 output matrix: where this CPU's repack kernels take it (AVX2, NEON), llama.cpp
    loads a second, repacked copy for the output beside token_embd's, and the no-alloc answer
    (no mmap) counts both. The confirmation counts it once, as the plan does. (Not against the
    real load's report here: with every matrix repacked, the mapped range llama.cpp reports ends
    before the last of them, so reported_memory, which takes the repacked copies out of it,
    comes out 4% short.)"""
    path = write_model(tmp_path / "tied-q4_0.gguf", n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=512,
                       n_vocab=32000, ftype="Q4_0", tie_embeddings=True, pure=True)
    spec = load_model_spec(str(path))
    est = plan(spec, HOST, Wishes(n_ctx=512, n_gpu_layers=0))
    work = tmp_path / "work"
    work.mkdir()
    c = confirm(path, est, work_dir=work)
    got = measure(path, est.config, prompt_tokens=1, gen_tokens=1).buffers
    duplicated = "token_embd.weight" in got.repacked_tensors  # the output's converted copy
    assert c.tied_output_counted_once_bytes == (spec.tensor("token_embd.weight").n_bytes if duplicated else 0)
    assert c.devices[0].weights_bytes == est.memory.device("cpu").weights_bytes
    assert c.agrees, describe(c)


def test_the_tied_output_is_counted_once_only_where_an_extra_buffer_holds_a_second_copy(tmp_path):
    from rooflight.runtime.confirm import tied_output_counted_twice

    spec = load_model_spec(str(write_model(tmp_path / "tied.gguf", n_layer=1, n_embd=256, n_head=4, n_head_kv=2,
                                           n_ff=256, n_vocab=8000, ftype="Q4_0", tie_embeddings=True, pure=True)))
    est = plan(spec, HOST, Wishes(n_ctx=512, n_gpu_layers=0))
    tied = spec.tensor("token_embd.weight").n_bytes
    planned = est.memory.device("cpu").weights_bytes

    def answer(**model):
        return {"buffers": {name: {"model": n, "context": 0, "compute": 0} for name, n in model.items()}}

    assert tied_output_counted_twice(est, answer(CPU=planned - 100, CPU_REPACK=tied + 100)) == tied
    assert tied_output_counted_twice(est, answer(CPU=planned, AMX=tied)) == tied
    assert tied_output_counted_twice(est, answer(CPU=planned + tied)) == 0  # no converted copy
    assert tied_output_counted_twice(est, answer(CPU=planned - 4096, CPU_REPACK=4096)) == 0  # repacked once


def test_describe_names_the_device_and_the_difference():
    told = (ConfirmedDevice("cpu", 10**9, 2 * 10**8, 10**8), ConfirmedDevice("gpu0", 9 * 10**9, 3 * 10**8, 10**8))
    ok = Confirmation("llama.cpp", told, 1.2, (("cpu", 13 * 10**8), ("gpu0", 94 * 10**8)))
    assert describe(ok) == "llama.cpp confirms: 1.3 GB of RAM, 9.4 GB on GPU 0 (within 1.2% of the plan)."
    off = Confirmation("llama.cpp", told, 17.0, (("cpu", 13 * 10**8), ("gpu0", 11 * 10**9)))
    assert describe(off) == ("llama.cpp differs from the plan by up to 17% "
                             "(GPU 0: llama.cpp 9.4 GB, plan 11.0 GB).")
    assert ok.to_dict()["devices"][1] == {"device": "gpu0", "weights_bytes": 9 * 10**9, "kv_bytes": 3 * 10**8,
                                         "compute_bytes": 10**8, "total_bytes": 94 * 10**8}


def test_cli_estimate_confirm_json(models, tmp_path):
    path = models["llama-f16"]
    run = [sys.executable, "-m", "rooflight", "estimate", str(path), "--ctx", "1024", "--confirm", "--json"]
    r = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    got = doc["confirmed"]
    assert got["by"] == "llama.cpp" and isinstance(got["max_difference_pct"], float)
    assert {d["device"] for d in got["devices"]} == {"cpu"}
    assert set(got["devices"][0]) == {"device", "weights_bytes", "kv_bytes", "compute_bytes", "total_bytes"}
    profile = tmp_path / "p.json"
    profile.write_text('{"gpus": [{"name": "RTX 3090"}]}')
    r = subprocess.run(run + ["--hardware", str(profile)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["confirmed"]
    assert got["by"] is None and "--hardware" in got["reason"]
    r = subprocess.run(run[:-1], capture_output=True, text=True, timeout=120)
    assert "llama.cpp confirms: " in r.stdout
