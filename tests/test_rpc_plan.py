"""Planning across machines with llama.cpp's RPC backend (issue 20): profiles, placement,
memory per remote device, and what the network costs. Pure: no server is started here
(tests/test_rpc_run.py runs real ones on 127.0.0.1)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rooflight.catalog.models import find_model
from rooflight.errors import BadInputError
from rooflight.estimate.network import step_cost
from rooflight.estimate.plan import Wishes, plan
from rooflight.hardware import profile_from_dict
from rooflight.hardware.remote import remote_devices

GB = 1e9
LAPTOP = {"name": "laptop", "cores": 8, "threads": 16, "ram_total_bytes": 32_000_000_000,
          "ram_bandwidth_gbs": 50.0, "isa": ["avx2"]}
RTX_3090_PC = {"endpoint": "192.168.1.20:50052", "name": "second PC", "gpus": [{"name": "RTX 3090"}],
               "link_gbps": 1.0, "rtt_ms": 0.5}


@pytest.fixture
def tiny_model(tmp_path):
    from rooflight.gguf.synthetic import write_model

    return write_model(tmp_path / "tiny.gguf", n_layer=2, n_embd=64, n_vocab=800)


def profile(**d):
    d.setdefault("cpu", LAPTOP)
    return profile_from_dict(d, measure_bandwidth=False)


def test_remotes_parse_and_round_trip():
    hw = profile(remotes=[RTX_3090_PC, {"endpoint": "127.0.0.1:50053", "cpu": {
        "cores": 4, "threads": 4, "ram_total_bytes": 16_000_000_000, "ram_bandwidth_gbs": 30.0}}])
    devs = remote_devices(hw)
    assert [d.name for d in devs] == ["rpc0", "rpc1"]
    assert devs[0].backend == "cuda" and devs[0].gpu.vram_total_bytes > 20e9  # from the GPU table
    assert devs[1].is_cpu and devs[1].free_bytes == 16_000_000_000
    assert hw.remotes[1].link_gbps == 1.0 and hw.remotes[1].rtt_ms == 0.5  # defaults: gigabit LAN
    again = profile_from_dict(json.loads(json.dumps(hw.to_dict())), measure_bandwidth=False)
    assert again.remotes == hw.remotes
    assert "remotes" not in profile().to_dict()  # a profile without remotes is unchanged


@pytest.mark.parametrize("remote, words", [
    ({"endpoint": "pc2"}, 'must be "host:port"'),
    ({"endpoint": "pc2:99999", "gpus": [{"name": "RTX 3090"}]}, 'must be "host:port"'),
    ({"endpoint": "pc2:50052"}, "neither gpus nor cpu"),
    ({"endpoint": "pc2:50052", "gpus": [{"name": "RTX 3090"}], "link_gbps": 0}, "link_gbps must be a number > 0"),
    ({"endpoint": "pc2:50052", "gpus": [{"name": "RTX 3090"}], "rtt_ms": -1}, "rtt_ms must be a number >= 0"),
    ({"endpoint": "pc2:50052", "cpu": {"cores": 4}}, "lacks threads, ram_total_bytes"),
])
def test_bad_remotes_get_one_sentence(remote, words):
    with pytest.raises(BadInputError, match=words) as err:
        profile(remotes=[remote])
    assert "\n" not in str(err.value)


def test_the_same_endpoint_twice_is_refused():
    with pytest.raises(BadInputError, match="listed twice"):
        profile(remotes=[RTX_3090_PC, RTX_3090_PC])


def test_remote_devices_take_the_first_offloaded_layers_local_gpus_the_last():
    """llama.cpp lists RPC devices before its own GPUs and splits the offloaded range
    in that order by free memory: the output layer stays on the local GPU."""
    spec = find_model("llama-3.3-70b").spec("Q4_K_M")
    hw = profile(gpus=[{"name": "RTX 4090"}], remotes=[RTX_3090_PC])
    est = plan(spec, hw, Wishes(n_ctx=4096))
    devices = est.memory.layer_devices
    assert est.config.n_gpu_layers == spec.n_layer + 1 and est.fit == "full_gpu"
    first_local = devices.index("gpu0")
    assert set(devices[:first_local]) == {"rpc0"} and set(devices[first_local:]) == {"gpu0"}
    # both 24 GB cards: about half the blocks each
    assert abs(devices.count("rpc0") - devices.count("gpu0")) <= 2
    names = [d.device for d in est.memory.devices]
    assert names == ["cpu", "gpu0", "rpc0"]
    rpc0 = est.memory.device("rpc0")
    assert rpc0.weights_bytes > 15 * GB and rpc0.kv_bytes > 0 and rpc0.compute_bytes > 0
    assert rpc0.overhead_bytes > 0  # a CUDA context on the remote GPU
    assert rpc0.available_bytes < 25 * GB


def test_a_remote_gpu_makes_a_model_fit_that_one_card_cannot_hold():
    spec = find_model("llama-3.3-70b").spec("Q4_K_M")
    alone = plan(spec, profile(gpus=[{"name": "RTX 4090"}]), Wishes(n_ctx=4096))
    both = plan(spec, profile(gpus=[{"name": "RTX 4090"}], remotes=[RTX_3090_PC]), Wishes(n_ctx=4096))
    assert alone.fit == "partial_gpu" and both.fit == "full_gpu"
    assert both.performance.decode_tok_s > 2 * alone.performance.decode_tok_s


def test_weights_kv_and_layers_add_up_across_devices():
    spec = find_model("qwen3-32b").spec("Q4_K_M")
    local = plan(spec, profile(gpus=[{"name": "RTX 4090"}, {"name": "RTX 3090"}]), Wishes(n_ctx=8192))
    remote = plan(spec, profile(gpus=[{"name": "RTX 4090"}], remotes=[RTX_3090_PC]), Wishes(n_ctx=8192))
    for field in ("weights_bytes", "kv_bytes"):
        assert sum(getattr(d, field) for d in local.memory.devices) == sum(
            getattr(d, field) for d in remote.memory.devices)


def test_a_cpu_only_machine_offloads_to_a_cpu_server_by_its_ram():
    """A CPU rpc-server reports all its RAM as free; llama.cpp splits by that."""
    spec = find_model("qwen3-8b").spec("Q4_K_M")
    cpu_server = {"endpoint": "127.0.0.1:50052", "cpu": {
        "cores": 8, "threads": 8, "ram_total_bytes": 64_000_000_000, "ram_available_bytes": 60_000_000_000,
        "ram_bandwidth_gbs": 60.0}}
    other = dict(cpu_server, endpoint="127.0.0.1:50053", cpu=dict(cpu_server["cpu"], ram_total_bytes=32_000_000_000,
                                                                   ram_available_bytes=30_000_000_000))
    est = plan(spec, profile(remotes=[cpu_server, other]), Wishes(n_ctx=4096))
    devices = est.memory.layer_devices
    assert est.config.n_gpu_layers == spec.n_layer + 1
    assert devices.count("rpc0") == pytest.approx(2 * devices.count("rpc1"), abs=2)
    assert est.memory.device("rpc0").overhead_bytes == 0  # no GPU context on a CPU server
    assert est.performance.network is not None


def test_network_cost_counts_boundaries_round_trips_and_remote_logits():
    spec = find_model("qwen3-32b").spec("Q4_K_M")
    hw = profile(remotes=[RTX_3090_PC])  # no local GPU: everything but the embeddings is remote
    est = plan(spec, hw, Wishes(n_ctx=4096))
    devices = est.memory.layer_devices
    assert set(devices) == {"rpc0"}
    cfg = est.config
    one = step_cost(spec, hw, cfg, devices, 1, 1000)
    # embeddings to the server, logits back: two crossings, two round trips
    assert one.crossings == 2 and one.latency_s == pytest.approx(2 * 0.5e-3)
    link = 1e9 / 8
    # and the step's attention inputs: a position, two cache indices, a 1024-cell f16 mask
    # row, and the output's row id
    inputs = 4 + 2 * 8 + 1024 * 2 + 4
    assert one.transfer_s == pytest.approx(((spec.n_embd + spec.n_vocab) * 4 + inputs) / link)
    batch = step_cost(spec, hw, cfg, devices, 512, 1000)
    inputs = 512 * (4 + 2 * 8) + 1024 * 512 * 2 + 4
    assert batch.transfer_s == pytest.approx(((512 * spec.n_embd + spec.n_vocab) * 4 + inputs) / link)
    # a longer context sends longer masks: after 32K positions a decoded token's mask (64 KiB)
    # is three times this 5120-wide model's activations
    long_cfg = plan(spec, hw, Wishes(n_ctx=32768)).config
    late = step_cost(spec, hw, long_cfg, devices, 1, 32768)
    assert late.transfer_s - one.transfer_s == pytest.approx((32768 - 1024) * 2 / link)
    assert 32768 * 2 > 3 * spec.n_embd * 4
    net = est.performance.network
    assert 0 < net["decode_share"] < 1 and net["crossings_per_token"] == 2
    assert net["decode_tok_s_no_network"] > net["decode_tok_s_faster_link"] > est.performance.decode_tok_s


def test_a_slow_link_bounds_the_speed_and_the_estimate_says_so():
    spec = find_model("qwen3-8b").spec("Q4_K_M")
    slow = dict(RTX_3090_PC, link_gbps=0.01, rtt_ms=20.0)  # 10 Mbit/s Wi-Fi far away
    est = plan(spec, profile(remotes=[slow]), Wishes(n_ctx=4096))
    assert est.performance.network["bound"] is True and est.performance.bound == "network"
    assert est.performance.network["decode_tok_s_faster_link"] > 3 * est.performance.decode_tok_s
    from rooflight.format import format_estimate

    assert "The network bounds the speed" in format_estimate(est)


def test_local_plans_have_no_network_entry():
    spec = find_model("qwen3-8b").spec("Q4_K_M")
    est = plan(spec, profile(gpus=[{"name": "RTX 4090"}]), Wishes(n_ctx=4096))
    assert est.performance.network is None and "network" not in est.performance.to_dict()


def test_two_gpus_of_one_server_copy_between_themselves():
    spec = find_model("llama-3.3-70b").spec("Q4_K_M")
    two = dict(RTX_3090_PC, gpus=[{"name": "RTX 3090"}, {"name": "RTX 3090"}])
    hw = profile(remotes=[two])
    est = plan(spec, hw, Wishes(n_ctx=4096))
    assert {"rpc0", "rpc1"} <= set(est.memory.layer_devices)
    assert step_cost(spec, hw, est.config, est.memory.layer_devices, 1, 4096).crossings == 2  # in, and logits out


def test_estimate_cli_shows_rpc_devices_from_a_profile(tmp_path, tiny_model):
    prof = tmp_path / "hw.json"
    prof.write_text(json.dumps({"cpu": LAPTOP, "remotes": [RTX_3090_PC]}))
    r = subprocess.run([sys.executable, "-m", "rooflight", "estimate", str(tiny_model), "--hardware", str(prof),
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [d["device"] for d in doc["memory"]["devices"]] == ["cpu", "rpc0"]
    assert doc["performance"]["network"]["crossings_per_token"] == 2


def test_rpc_option_refuses_a_bad_endpoint_in_one_line(tiny_model):
    r = subprocess.run([sys.executable, "-m", "rooflight", "estimate", str(tiny_model), "--rpc", "nohost"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and 'must be "host:port"' in r.stderr and "Traceback" not in r.stderr
