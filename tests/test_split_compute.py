"""Compute buffers when llama.cpp splits the graph across devices (estimate/split_compute.py):
when pipeline parallelism applies, and what it adds. Pure; tests/test_rpc_run.py checks the
same rule against llama.cpp's own buffers on two real RPC servers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rooflight.catalog.models import find_model
from rooflight.estimate.compute import compute_bytes, mask_bytes, micro_batch, output_buffer_bytes
from rooflight.estimate.memory import plan_memory
from rooflight.estimate.plan import Wishes, plan
from rooflight.estimate.split_compute import (
    PIPELINE_COPIES,
    pipeline_cpu_bytes,
    pipeline_device_bytes,
)
from rooflight.hardware import profile_from_dict

CPU = {"name": "desktop", "cores": 16, "threads": 32, "ram_total_bytes": 128_000_000_000,
       "ram_bandwidth_gbs": 80.0, "isa": ["avx2"]}


def machine(*gpus: str):
    return profile_from_dict({"cpu": CPU, "gpus": [{"name": g} for g in gpus]}, measure_bandwidth=False)


def compute_of(est) -> dict[str, int]:
    return {d.device: d.compute_bytes for d in est.memory.devices}


@pytest.fixture(scope="module")
def llama70b():
    return find_model("llama-3.3-70b").spec("Q4_K_M")


def test_two_gpus_with_every_layer_keep_four_copies_of_their_inputs(llama70b):
    spec = llama70b
    est = plan(spec, machine("RTX 3090", "RTX 3090", "RTX 3090", "RTX 3090"), Wishes(n_ctx=32768))
    assert est.config.n_gpu_layers == spec.n_layer + 1 and "cpu" not in est.memory.layer_devices
    got = compute_of(est)
    cfg = est.config
    devices = est.memory.layer_devices
    for name in ("gpu0", "gpu1", "gpu2", "gpu3"):
        blocks = devices[: spec.n_layer]
        assert got[name] == pipeline_device_bytes(spec, cfg, n_blocks=blocks.count(name),
                                                  runs_last_block=blocks[-1] == name,
                                                  runs_output=devices[spec.n_layer] == name)
        # four copies of a 32K-position mask and the residual stream: far above one graph's buffer
        one_graph = compute_bytes(spec, cfg, runs_layers=True, runs_output=devices[spec.n_layer] == name)
        extra_inputs = (PIPELINE_COPIES - 1) * (mask_bytes(spec, cfg) + spec.n_embd * micro_batch(cfg) * 4)
        assert got[name] > one_graph + extra_inputs / 2
    assert got["cpu"] == pipeline_cpu_bytes(spec, cfg) + output_buffer_bytes(spec)
    assert got["cpu"] > PIPELINE_COPIES * mask_bytes(spec, cfg)


@pytest.mark.parametrize("gpus, wishes", [
    (("RTX 3090",), {"n_ctx": 8192}),  # one device: nothing to pipeline
    (("RTX 3090", "RTX 3090"), {"n_ctx": 8192, "n_gpu_layers": 40}),  # the CPU runs the first layers
    (("RTX 3090", "RTX 3090", "RTX 3090", "RTX 3090"), {"n_ctx": 8192, "offload_kqv": False}),  # KV in RAM
])
def test_no_pipeline_parallelism_keeps_one_graphs_buffers(llama70b, gpus, wishes):
    spec = llama70b
    hw = machine(*gpus)
    offload_kqv = wishes.pop("offload_kqv", True)
    cfg = replace(plan(spec, hw, Wishes(**wishes)).config, offload_kqv=offload_kqv)
    memory = plan_memory(spec, hw, cfg)
    devices = memory.layer_devices
    for d in memory.devices:
        runs_layers, runs_output = d.device in devices[: spec.n_layer], devices[spec.n_layer] == d.device
        if d.device != "cpu" and (runs_layers or runs_output):
            assert d.compute_bytes == compute_bytes(spec, cfg, runs_layers=runs_layers, runs_output=runs_output)


def test_experts_kept_in_ram_turn_pipeline_parallelism_off():
    """--n-cpu-moe sets tensor overrides, and llama.cpp pipelines no model that has them."""
    spec = find_model("qwen3-30b-a3b").spec("Q4_K_M")
    hw = machine("RTX 3060", "RTX 3060")
    with_experts_on_gpu = plan(spec, hw, Wishes(n_ctx=8192, n_gpu_layers=spec.n_layer + 1, n_cpu_moe=0))
    experts_in_ram = plan(spec, hw, Wishes(n_ctx=8192, n_gpu_layers=spec.n_layer + 1, n_cpu_moe=4))
    assert experts_in_ram.config.n_cpu_moe == 4
    cfg = experts_in_ram.config
    for name in ("gpu0", "gpu1"):
        runs_output = experts_in_ram.memory.layer_devices[spec.n_layer] == name
        assert compute_of(experts_in_ram)[name] == compute_bytes(spec, cfg, runs_layers=True, runs_output=runs_output)
    assert compute_of(with_experts_on_gpu)["gpu0"] > compute_of(experts_in_ram)["gpu0"]
