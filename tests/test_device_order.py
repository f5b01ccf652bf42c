"""GPU numbering: the plan's (NVML, PCI order) against llama.cpp's (CUDA's order).

NVML is faked at its boundary (a pynvml module with NVML's function names, as in
test_hardware_nvidia.py) and reports the GPUs in PCI order; the fake CUDA list gives
llama.cpp's devices fastest first, the order CUDA uses without CUDA_DEVICE_ORDER.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types

from rooflight.estimate.config import RunConfig
from rooflight.hardware.device_order import (
    llama_gpu_bus_ids,
    normalize_bus_id,
    pci_bus_order,
    pci_order_environ,
    reorder_split,
    runtime_index_map,
    visible_to_cuda,
)
from rooflight.hardware.nvidia import detect_nvidia
from rooflight.runtime.device_map import load_kwargs
from test_hardware_nvidia import RTX_3060, RTX_4090, fake_pynvml

# PCI order: the RTX 3060 sits in the first slot, the RTX 4090 in the second
SLOW_FIRST_SLOT = dict(RTX_3060, pci="00000000:01:00.0")
FAST_SECOND_SLOT = dict(RTX_4090, pci="00000000:41:00.0")
CUDA_FASTEST_FIRST = ["0000:41:00.0", "0000:01:00.0"]  # what CUDA enumerates by default


def _nvml(devices):
    m = fake_pynvml(devices)

    def pci_info(handle):
        return types.SimpleNamespace(busId=devices[handle]["pci"].encode())  # pynvml gives bytes

    m.nvmlDeviceGetPciInfo = pci_info
    return m


def test_nvml_gives_pci_bus_ids_in_pci_order(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpus, warnings = detect_nvidia(_nvml([SLOW_FIRST_SLOT, FAST_SECOND_SLOT]))
    assert not warnings
    assert [g.name for g in gpus] == ["NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 4090"]
    assert [g.pci_bus_id for g in gpus] == ["00000000:01:00.0", "00000000:41:00.0"]


def test_plan_split_lands_on_the_same_physical_gpus_when_cuda_orders_by_speed(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpus, _ = detect_nvidia(_nvml([SLOW_FIRST_SLOT, FAST_SECOND_SLOT]))
    bus = [g.pci_bus_id for g in gpus]
    assert runtime_index_map(bus, CUDA_FASTEST_FIRST) == {0: 1, 1: 0}
    # the plan puts 30% on its GPU 0 (the 3060) and 70% on its GPU 1 (the 4090)
    config = RunConfig(n_ctx=4096, n_gpu_layers=33, n_threads=4, tensor_split=(0.3, 0.7))
    kwargs = load_kwargs(config, bus, "cuda", runtime_bus_ids=CUDA_FASTEST_FIRST)
    assert kwargs["tensor_split"] == [0.7, 0.3]  # CUDA device 0 is the 4090: it gets its 70%
    # the same order on both sides (CUDA_DEVICE_ORDER=PCI_BUS_ID): nothing moves
    same = load_kwargs(config, bus, "cuda", runtime_bus_ids=["0000:01:00.0", "0000:41:00.0"])
    assert same["tensor_split"] == [0.3, 0.7]
    # on the CPU, or with bus ids unknown, the plan's own order is kept
    assert load_kwargs(config, bus, "cpu", runtime_bus_ids=CUDA_FASTEST_FIRST)["tensor_split"] == [0.3, 0.7]
    assert load_kwargs(config, [None, None], "cuda", runtime_bus_ids=CUDA_FASTEST_FIRST)["tensor_split"] == [0.3, 0.7]


def test_bus_ids_of_both_spellings_match():
    assert normalize_bus_id("00000000:C1:00.0") == normalize_bus_id("0000:c1:00.0") == (0, 0xC1, 0, 0)
    assert normalize_bus_id(b"00000001:0A:1F.3") == (1, 10, 31, 3)
    assert normalize_bus_id("") is None and normalize_bus_id("garbage") is None
    assert runtime_index_map(["0000:01:00.0"], [None]) is None


def test_a_gpu_hidden_from_cuda_gets_nothing():
    # CUDA_VISIBLE_DEVICES=1: llama.cpp sees only the 4090, as its device 0
    assert runtime_index_map(["0000:01:00.0", "0000:41:00.0"], ["0000:41:00.0"]) == {1: 0}
    assert reorder_split([0.0, 1.0], {1: 0}, 1) == [1.0]


def test_cuda_visible_devices_shapes_what_is_planned(monkeypatch):
    nvml = _nvml([SLOW_FIRST_SLOT, FAST_SECOND_SLOT])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    gpus, _ = detect_nvidia(nvml)
    assert [g.name for g in gpus] == ["NVIDIA GeForce RTX 4090"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert [g.pci_bus_id for g in detect_nvidia(nvml)[0]] == ["00000000:41:00.0", "00000000:01:00.0"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert detect_nvidia(nvml)[0] == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,x,1")  # CUDA stops at the first bad entry
    assert [g.index for g in detect_nvidia(nvml)[0]] == [0]
    gpus, warnings = visible_to_cuda([1, 2], {"CUDA_VISIBLE_DEVICES": "GPU-8f2c"})
    assert gpus == [1, 2] and "UUID" in warnings[0]


def test_pci_order_is_set_before_llama_cpp_can_start_cuda():
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_ORDER"}
    code = "import os, rooflight; print(os.environ['CUDA_DEVICE_ORDER'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "PCI_BUS_ID"
    assert pci_order_environ({})["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert pci_order_environ({"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"
    mine = {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    assert "maps its plan" in pci_bus_order(mine) and mine["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"
    assert pci_bus_order({}) is None


def test_llama_cpp_device_list_reads_on_this_build():
    ids = llama_gpu_bus_ids()  # the real ggml device API; a CPU build has no GPU device
    assert isinstance(ids, list)
    assert all(i is None or normalize_bus_id(i) for i in ids)
