"""llama.cpp's RPC backend for real (issue 20): two rpc-servers on 127.0.0.1, a generated
model split across this CPU and both, buffers per device against the plan, tokens out.

Needs the RPC build of packaging/build_llama_rpc.sh (CI builds it in .ci/run); without it
these tests skip on a developer's machine and fail under CI. Every server is stopped.
Loading runs in a child process: this test process has llama.cpp loaded without RPC.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rooflight.runtime import rpc

ROOT = Path(__file__).resolve().parents[1]

needs_build = pytest.mark.skipif(
    rpc.find_build() is None and not os.environ.get("CI"),
    reason="no RPC build of llama.cpp here; run packaging/build_llama_rpc.sh",
)
pytestmark = [needs_build, pytest.mark.slow]


def test_split_across_cpu_and_two_servers_matches_the_plan():
    code = ("import json, sys; sys.path.insert(0, 'bench'); import rpc_split; "
            "print(json.dumps(rpc_split.run(n_layer=6, n_embd=256, n_ctx=512, prompt_tokens=64, gen_tokens=8)))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    layers = doc["layer_devices"]
    assert layers[:2] == ["cpu", "cpu"] and {"rpc0", "rpc1"} <= set(layers)  # the split as planned
    for dev in ("rpc0", "rpc1"):
        plan, got = doc["planned"][dev], doc["reported"][dev]
        assert got["model"] == pytest.approx(plan["model"], rel=0.02), dev
        assert got["kv"] == pytest.approx(plan["kv"], rel=0.02), dev
        assert got["compute"] == pytest.approx(plan["compute"], rel=0.02), dev
    assert doc["measured"]["tokens_generated"] == 8 and doc["measured"]["decode_tok_s"] > 0
    assert doc["predicted"]["network"]["crossings_per_token"] >= 2


@pytest.mark.parametrize("flash_attn", ["on", "off"])
def test_every_layer_on_the_servers_plans_pipeline_parallelism(flash_attn):
    """With every layer and the output on two devices llama.cpp turns on pipeline
    parallelism and keeps 4 copies of each split's inputs (estimate/split_compute.py): each
    compute buffer, this CPU's included, as planned to 0.02 MiB (it was 5-7 MiB short)."""
    code = ("import json, sys; sys.path.insert(0, 'bench'); import rpc_split; "
            "print(json.dumps(rpc_split.run(n_layer=5, n_embd=384, n_ctx=1024, n_ff=1280, n_head_kv=2, "
            f"cpu_blocks=0, flash_attn='{flash_attn}', prompt_tokens=64, gen_tokens=4)))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert "cpu" not in doc["layer_devices"] and {"rpc0", "rpc1"} == set(doc["layer_devices"])
    for dev in ("cpu", "rpc0", "rpc1"):
        planned, reported = doc["planned"][dev]["compute"], doc["reported"][dev]["compute"]
        assert abs(planned - reported) < 0.02 * 2**20, (dev, planned, reported)
    assert doc["measured"]["tokens_generated"] == 4


@pytest.mark.parametrize("placement", [
    "cpu_blocks=2, flash_attn='on', prompt_tokens=64",
    "cpu_blocks=2, flash_attn='on', prompt_tokens=16",  # under 32 tokens llama.cpp pins each norm
    "cpu_blocks=0, flash_attn='off', prompt_tokens=64",
])
def test_the_bytes_each_server_is_sent_and_returns_are_the_plans(placement):
    """Counted from each server's own log (GGML_RPC_DEBUG=1): per step, the activations, the
    attention inputs (positions, cache indices, KQ masks) and the logits, to the byte, for a
    prompt step and a decoded token (estimate/network.py step_bytes)."""
    code = ("import json, sys; sys.path.insert(0, 'bench'); import rpc_split; "
            "print(json.dumps(rpc_split.run(n_layer=6, n_embd=256, n_ctx=2048, gen_tokens=4, "
            f"count_bytes=True, {placement})))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    sent = json.loads(r.stdout.strip().splitlines()[-1])["bytes_sent"]
    assert set(sent) == {"rpc0", "rpc1"}
    for dev, steps in sent.items():
        for kind in ("prompt", "decode"):
            assert steps[kind]["counted"] == steps[kind]["planned"], (dev, kind, steps[kind])


def test_remotes_lists_a_server_and_refuses_an_unreachable_one():
    port = _free_port()
    server = rpc.start_server(port, threads=1)
    try:
        r = subprocess.run([sys.executable, "-m", "rooflight", "remotes", f"127.0.0.1:{port}", "--json"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        (entry,) = json.loads(r.stdout)["servers"]
        (dev,) = entry["devices"]
        assert dev["total_bytes"] > 1e9  # a CPU server reports the machine's RAM
    finally:
        rpc.stop_server(server)
    r = subprocess.run([sys.executable, "-m", "rooflight", "remotes", f"127.0.0.1:{port}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "No RPC server answers at 127.0.0.1:" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
