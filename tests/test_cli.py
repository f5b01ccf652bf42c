"""The command line as a user runs it: real processes, real files, CONTRACT.md fields."""

import json
import os
import subprocess
import sys

import pytest

from rooflight.gguf.synthetic import write_model


def run(*args, env_extra=None):
    env = {**os.environ, **env_extra} if env_extra else None
    return subprocess.run([sys.executable, "-m", "rooflight", *args], capture_output=True, text=True, timeout=120,
                          env=env)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("m") / "tiny.gguf", n_layer=2, n_embd=128, n_head=4,
                       n_head_kv=2, n_ff=256, ftype="Q8_0", context_length=4096)


@pytest.fixture(scope="module")
def bench_model(tmp_path_factory):
    # big enough (13M parameters) that the roofline, not per-token overheads, sets its speed:
    # a bench of it is a measurement calibration may use (a tiny model's is not)
    return write_model(tmp_path_factory.mktemp("b") / "small.gguf", n_layer=4, n_embd=512, n_head=8,
                       n_head_kv=4, n_ff=1408, ftype="Q8_0", context_length=4096)


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("rooflight ")


def test_hardware_json_has_contract_fields():
    r = run("hardware", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc["cpu"]) >= {"name", "cores", "threads", "isa", "ram_total_bytes", "ram_available_bytes",
                               "ram_bandwidth_gbs", "ram_bandwidth_source"}
    assert doc["backend"] in ("cuda", "rocm", "metal", "vulkan", "sycl", "cpu")
    assert doc["cpu"]["ram_bandwidth_gbs"] > 0


def test_hardware_text():
    r = run("hardware")
    assert r.returncode == 0 and "CPU" in r.stdout


def test_estimate_local_json(model):
    r = run("estimate", str(model), "--ctx", "2048", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["model"]["architecture"] == "llama"
    assert doc["model"]["n_layer"] == 2
    assert doc["config"]["n_ctx"] == 2048
    assert doc["memory"]["fit"] in ("cpu_only", "full_gpu", "partial_gpu")
    assert doc["performance"]["decode_tok_s"] > 0


def test_estimate_for_named_gpu_profile(model, tmp_path):
    prof = tmp_path / "3090.json"
    prof.write_text(json.dumps({"gpus": [{"name": "RTX 3090"}]}))
    r = run("estimate", str(model), "--hardware", str(prof), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["memory"]["fit"] == "full_gpu"
    assert doc["config"]["n_gpu_layers"] == 3
    assert [d["device"] for d in doc["memory"]["devices"]] == ["cpu", "gpu0"]
    assert doc["performance"]["calibrated"] is False


def test_estimate_text_output(model, tmp_path):
    """No probe stored (the test's own data folder): the estimate names `rooflight probe`
    for this machine, not for a what-if profile."""
    from rooflight.format import PROBE_HINT

    r = run("estimate", str(model))
    assert r.returncode == 0, r.stderr
    assert "Fit:" in r.stdout and "Decode:" in r.stdout
    assert "Speeds from table constants" in r.stdout and r.stdout.rstrip().endswith(PROBE_HINT)
    prof = tmp_path / "3090.json"
    prof.write_text(json.dumps({"gpus": [{"name": "RTX 3090"}]}))
    what_if = run("estimate", str(model), "--hardware", str(prof))
    assert what_if.returncode == 0 and PROBE_HINT not in what_if.stdout


@pytest.mark.parametrize(
    "content, fragment",
    [(b"not a gguf at all", "not a GGUF"), (b"GGUF", "truncated")],
)
def test_bad_model_file_is_exit_2_one_line(tmp_path, content, fragment):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    r = run("estimate", str(bad))
    assert r.returncode == 2
    assert fragment in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_missing_file_is_exit_2(tmp_path):
    r = run("estimate", str(tmp_path / "nope.gguf"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"rooflight: {tmp_path / 'nope.gguf'} does not exist."


def test_unknown_model_message_says_what_the_argument_looks_like():
    """A missing path, a Hub file or repository written without hf:, and an unknown id each
    get the sentence that says what to write instead."""
    from rooflight.commands.common import unknown_model_message

    assert unknown_model_message("/models/x.gguf") == "/models/x.gguf does not exist."
    assert unknown_model_message("x.gguf") == "x.gguf does not exist."
    assert unknown_model_message("./sub/x.gguf") == "./sub/x.gguf does not exist."
    assert "written hf:org/repo/x.gguf" in unknown_model_message("org/repo/x.gguf")
    assert "hf:org/repo/FILE.gguf" in unknown_model_message("org/repo")
    assert "is not a catalog id" in unknown_model_message("no-such-model")


def test_estimate_a_catalog_id(tmp_path):
    """CONTRACT: MODEL may be a catalog id; --quant picks among the catalog's files."""
    prof = tmp_path / "gpu.json"
    prof.write_text(json.dumps({"gpus": [{"name": "RTX 4090"}]}))
    doc = json.loads(run("estimate", "qwen3-30b-a3b", "--hardware", str(prof), "--json").stdout)
    assert doc["model"]["name"] == "qwen3-30b-a3b" and doc["model"]["quant"] == "Q4_K_M"
    assert doc["performance"]["prefill_tok_s"] > 0 and doc["memory"]["fit"] == "full_gpu"
    q8 = json.loads(run("estimate", "qwen3-30b-a3b", "--quant", "q8_0", "--hardware", str(prof), "--json").stdout)
    assert q8["model"]["quant"] == "Q8_0" and q8["model"]["file_bytes"] > doc["model"]["file_bytes"]
    for args, fragment in ((("qwen3-30b-a3b", "--quant", "Q9"), "has no Q9 file"),
                           (("no-such-model",), "is not a catalog id"),
                           (("org/repo/model.gguf",), "is written hf:org/repo/model.gguf")):
        r = run("estimate", *args)
        assert r.returncode == 2 and fragment in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_malformed_profile_is_exit_2(model, tmp_path):
    prof = tmp_path / "bad.json"
    prof.write_text("{not json")
    r = run("estimate", str(model), "--hardware", str(prof))
    assert r.returncode == 2 and "profile" in r.stderr and "Traceback" not in r.stderr
    prof.write_text(json.dumps({"gpus": [{"name": "Imaginary GPU 9000"}]}))
    r = run("estimate", str(model), "--hardware", str(prof))
    assert r.returncode == 2 and "Imaginary GPU 9000" in r.stderr


def test_bad_option_is_exit_2(model):
    assert run("estimate", str(model), "--ctx", "-5").returncode == 2
    assert run("estimate", str(model), "--kv-type", "q2").returncode == 2
    r = run("estimate", str(model), "--kv-type", "q8_0", "--flash-attn", "off")
    assert r.returncode == 2 and "flash attention" in r.stderr


def test_bench_measures_and_calibrates(bench_model, tmp_path):
    model = bench_model
    env_dir = tmp_path / "data"
    import os

    env = dict(os.environ, ROOFLIGHT_DATA_DIR=str(env_dir))
    r = subprocess.run([sys.executable, "-m", "rooflight", "bench", str(model), "--prompt-tokens", "64",
                        "--gen-tokens", "16", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["measured"]["decode_tok_s"] > 0 and doc["measured"]["prefill_tok_s"] > 0
    assert doc["stored"] is True and doc["used_for_calibration"] is True
    assert doc["kernel_shares"] is None  # no probe here: a table-based prediction has no kernels
    # the next estimate on this machine is calibrated by that measurement
    r = subprocess.run([sys.executable, "-m", "rooflight", "estimate", str(model), "--json"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(r.stdout)["performance"]["calibrated"] is True


def test_bench_threads_sweep_keeps_the_fastest_for_later_plans(bench_model, tmp_path):
    model = bench_model
    import os

    env = dict(os.environ, ROOFLIGHT_DATA_DIR=str(tmp_path / "data"))
    r = subprocess.run([sys.executable, "-m", "rooflight", "bench", str(model), "--threads-sweep",
                        "--prompt-tokens", "64", "--gen-tokens", "16", "--json"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    sweep = doc["threads_sweep"]
    counts = [run["n_threads"] for run in sweep["runs"]]
    assert sweep["start"] in counts and 1 in counts and sweep["best"] in counts
    assert all(run["decode_tok_s"] > 0 and run["prefill_tok_s"] > 0 for run in sweep["runs"])
    assert doc["config"]["n_threads"] == sweep["best"]  # the benchmark ran at the winner
    assert {"predicted", "measured", "ratio", "stored"} <= set(doc)
    r = subprocess.run([sys.executable, "-m", "rooflight", "estimate", str(model), "--json"],
                       capture_output=True, text=True, env=env, timeout=120)
    est = json.loads(r.stdout)
    assert est["config"]["n_threads"] == sweep["best"] and est["performance"]["calibrated"] is True


def test_bench_refusals_are_one_line(model, tmp_path):
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps({"gpus": [{"name": "RTX 3090"}]}))
    for args, fragment in [(["--hardware", str(prof)], "this machine"),
                           (["--threads-sweep", "--threads", "2"], "--threads-sweep"),
                           ([], None)]:
        if fragment is None:
            r = run("bench", "hf:acme/x/y.gguf")
            fragment = "local .gguf"
        else:
            r = run("bench", str(model), *args)
        assert r.returncode == 2 and fragment in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_estimate_remote_reads_only_the_header(hub_server, tmp_path):
    big = write_model(tmp_path / "big.gguf", n_layer=4, n_embd=512, n_head=8, n_head_kv=2, n_ff=1536,
                      n_vocab=8000, ftype="F16", context_length=8192)
    hub_server.add_file("acme/tiny-GGUF", "tiny-F16.gguf", big)
    local = json.loads(run("estimate", str(big), "--json").stdout)
    r = run("estimate", "hf:acme/tiny-GGUF/tiny-F16.gguf", "--json")
    assert r.returncode == 0, r.stderr
    remote = json.loads(r.stdout)
    assert remote["model"]["params"] == local["model"]["params"]
    assert remote["model"]["file_bytes"] == big.stat().st_size
    assert remote["memory"]["devices"][0]["weights_bytes"] == local["memory"]["devices"][0]["weights_bytes"]
    assert hub_server.served("acme/tiny-GGUF/tiny-F16.gguf") < big.stat().st_size / 4


def test_estimate_remote_missing_file_is_clear(hub_server):
    r = run("estimate", "hf:acme/nothing-here/model.gguf")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_bench_too_short_a_context_is_one_sentence_before_anything_runs(model, tmp_path):
    r = run("bench", str(model), "--ctx", "10", env_extra={"ROOFLIGHT_DATA_DIR": str(tmp_path)})
    assert r.returncode == 2 and r.stdout == ""  # no "measuring ..." line first
    assert r.stderr.strip() == ("rooflight: A 512+128-token benchmark does not fit a 10-token context; "
                                "give --ctx 640 or more, or fewer --prompt-tokens / --gen-tokens.")
