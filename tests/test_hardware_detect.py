"""The whole detect() path: all probes faked, plus one real run on this machine."""

from __future__ import annotations

import time
import types

from rooflight.hardware import bandwidth, detect, format_profile, profile_from_dict, profile_to_json
from rooflight.hardware import detection as detect_module
from rooflight.hardware.detection import Probes

GiB = 1 << 30


class NVMLError(Exception):
    value = 999


def nvml_with(names_and_mem: list[tuple[str, int, int]]) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.NVML_CLOCK_MEM = 2
    m.nvmlInit = lambda: None
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: len(names_and_mem)
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: names_and_mem[h][0]
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(
        total=names_and_mem[h][1], free=names_and_mem[h][2]
    )
    return m  # no clocks, no bus width: the bandwidth must come from the table


def cuda_build(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("libllama.so", "libggml-cpu.so", "libggml-cuda.so"):
        (lib / name).write_text("")
    module = types.ModuleType("llama_cpp")
    module.llama_supports_gpu_offload = lambda: True

    def importer(name):
        if name == "llama_cpp":
            return module
        raise ImportError(name)

    return importer, lib


def test_full_detect_with_fakes(tmp_path, monkeypatch):
    monkeypatch.setattr(bandwidth, "measure_ram_bandwidth", lambda threads=None: 42.0)
    importer, lib = cuda_build(tmp_path)
    nvml = nvml_with(
        [
            ("NVIDIA GeForce RTX 4060 Ti", 16 * GiB - (200 << 20), 15 * GiB),
            ("NVIDIA L4", 24 * GiB, 20 * GiB),
        ]
    )
    probes = Probes(
        sysfs_root=tmp_path / "sys",
        nvml=nvml,
        importer=importer,
        llama_lib_dir=lib,
        platform_name="linux",
        machine="x86_64",
    )
    p = detect(cache_dir=tmp_path / "cache", probes=probes)
    assert p.backend == "cuda" and p.cpu.ram_bandwidth_gbs == 42.0
    a, b = p.gpus
    assert (a.index, b.index) == (0, 1)
    assert a.bandwidth_gbs == 288.0 and a.fp16_tflops == 44.1  # the 16 GB board, by memory
    assert b.bandwidth_gbs == 300.0 and b.compute_capability == "8.9"
    # Missing NVML functions become warnings, not failures.
    assert any("memory clock" in w for w in p.warnings)
    assert profile_from_dict(p.to_dict()) == p
    assert "GPU 1: NVIDIA L4" in format_profile(p)


def test_detect_never_raises_when_a_probe_crashes(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("probe bug")

    monkeypatch.setattr(detect_module, "detect_amd", boom)
    monkeypatch.setattr(detect_module, "detect_cpu", boom)
    monkeypatch.setattr(detect_module, "ram_bandwidth", boom)
    importer, lib = cuda_build(tmp_path)
    probes = Probes(
        sysfs_root=tmp_path,
        nvml=nvml_with([("NVIDIA GeForce RTX 3090", 24 * GiB, 0)]),
        importer=importer,
        llama_lib_dir=lib,
        platform_name="linux",
    )
    p = detect(probes=probes)
    assert [g.name for g in p.gpus] == ["NVIDIA GeForce RTX 3090"]
    assert p.cpu.cores >= 1
    text = " | ".join(p.warnings)
    assert "AMD GPU detection failed" in text and "CPU detection failed" in text
    assert "RAM bandwidth could not be measured" in text


def test_real_machine_detect_is_quick_and_serialisable(tmp_path):
    t0 = time.perf_counter()
    p = detect(cache_dir=tmp_path)
    elapsed = time.perf_counter() - t0
    assert elapsed < 5
    assert p.cpu.ram_bandwidth_source == "measured" and p.cpu.ram_bandwidth_gbs > 0
    assert p.backend in {"cuda", "rocm", "metal", "vulkan", "sycl", "cpu"}
    assert detect(cache_dir=tmp_path).cpu.ram_bandwidth_source == "cached"
    assert profile_from_dict(p.to_dict()) == p
    assert profile_to_json(p).startswith("{")
    assert format_profile(p).startswith("CPU: ")
