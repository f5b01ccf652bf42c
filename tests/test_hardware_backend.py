"""Which llama.cpp backend would run: the build's libraries AND a matching GPU."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from rooflight.hardware.backend import (
    backend_for_gpus,
    backends_from_libraries,
    detect_backend,
    inspect_build,
)
from rooflight.hardware.profile import GPUInfo

CUDA_HINT = "CMAKE_ARGS=-DGGML_CUDA=on "  # then this Python's pip; gpu_build.py tests the full command


def gpu(vendor: str, name: str = "Some GPU", index: int = 0) -> GPUInfo:
    return GPUInfo(index, name, vendor, 8 << 30, None, 500.0, 50.0)


def fake_llama(tmp_path: Path, libs: list[str], offload: bool | None):
    """An importer for a llama_cpp package whose lib/ holds `libs`."""
    pkg = tmp_path / "llama_cpp"
    (pkg / "lib").mkdir(parents=True)
    for name in libs:
        (pkg / "lib" / name).write_text("")
    module = types.ModuleType("llama_cpp")
    module.__file__ = str(pkg / "__init__.py")
    if offload is not None:
        module.llama_supports_gpu_offload = lambda: offload

    def importer(name: str):
        if name != "llama_cpp":
            raise ImportError(name)
        return module

    return importer


CPU_LIBS = ["libllama.so", "libggml.so", "libggml-base.so", "libggml-cpu.so"]


def test_library_names():
    assert backends_from_libraries(["libggml-cuda.so", "libggml-cpu.so"]) == {"cuda"}
    assert backends_from_libraries(["ggml-hip.dll", "libggml-vulkan.so"]) == {"rocm", "vulkan"}
    assert backends_from_libraries(["libggml-metal.dylib", "libggml-sycl.so"]) == {"metal", "sycl"}
    assert backends_from_libraries(CPU_LIBS) == set()


def test_cuda_build_with_nvidia_gpu(tmp_path):
    importer = fake_llama(tmp_path, [*CPU_LIBS, "libggml-cuda.so"], True)
    assert detect_backend([gpu("nvidia")], importer=importer) == ("cuda", [])


def test_cpu_build_with_nvidia_gpu_says_how_to_install_cuda(tmp_path):
    importer = fake_llama(tmp_path, CPU_LIBS, False)
    backend, warnings = detect_backend(
        [gpu("nvidia", "NVIDIA GeForce RTX 4090")], importer=importer
    )
    assert backend == "cpu"
    assert len(warnings) == 1 and CUDA_HINT in warnings[0] and "RTX 4090" in warnings[0]
    assert "CPU-only" in warnings[0]


def test_cpu_build_warning_gives_the_exact_command_for_this_gpu(tmp_path):
    importer = fake_llama(tmp_path, CPU_LIBS, False)
    h200 = GPUInfo(0, "NVIDIA H200", "nvidia", 150 << 30, None, 4800.0, 989.0, compute_capability="9.0")
    _, warnings = detect_backend([h200], importer=importer)
    assert "CMAKE_ARGS='-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90' " in warnings[0]
    assert "-m pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python" in warnings[0]
    assert "(needs CUDA toolkit 11.8 or newer (nvcc))" in warnings[0]


@pytest.mark.parametrize(
    ("vendor", "flag"), [("amd", "-DGGML_HIP=on"), ("intel", "-DGGML_VULKAN=on")]
)
def test_cpu_build_hints_for_other_vendors(tmp_path, vendor, flag):
    backend, warnings = detect_backend(
        [gpu(vendor)], importer=fake_llama(tmp_path, CPU_LIBS, False)
    )
    assert backend == "cpu" and flag in warnings[0]


def test_no_gpu_is_cpu_without_warning(tmp_path):
    importer = fake_llama(tmp_path, [*CPU_LIBS, "libggml-cuda.so"], False)
    assert detect_backend([], importer=importer) == ("cpu", [])


def test_vulkan_build_drives_any_discrete_gpu(tmp_path):
    importer = fake_llama(tmp_path, [*CPU_LIBS, "libggml-vulkan.so"], True)
    assert detect_backend([gpu("amd")], importer=importer)[0] == "vulkan"
    assert detect_backend([gpu("nvidia")], importer=importer)[0] == "vulkan"


def test_native_backend_preferred(tmp_path):
    importer = fake_llama(tmp_path, [*CPU_LIBS, "libggml-vulkan.so", "libggml-hip.so"], True)
    assert detect_backend([gpu("amd")], importer=importer)[0] == "rocm"


def test_cuda_build_with_amd_gpu_only(tmp_path):
    importer = fake_llama(tmp_path, [*CPU_LIBS, "libggml-cuda.so"], False)
    backend, warnings = detect_backend([gpu("amd")], importer=importer)
    assert backend == "cpu" and "built for cuda only" in warnings[0] and "GGML_HIP" in warnings[0]


def test_libraries_present_but_no_offload_means_driver_trouble(tmp_path):
    importer = fake_llama(tmp_path, [*CPU_LIBS, "libggml-cuda.so"], False)
    backend, warnings = detect_backend([gpu("nvidia")], importer=importer)
    assert backend == "cpu" and "driver" in warnings[0]


def test_monolithic_build_that_offloads(tmp_path):
    importer = fake_llama(tmp_path, ["libllama.so"], True)
    assert detect_backend([gpu("nvidia")], importer=importer)[0] == "cuda"


def test_mixed_vendors_warn_about_the_unusable_gpu(tmp_path):
    importer = fake_llama(tmp_path, [*CPU_LIBS, "libggml-cuda.so"], True)
    backend, warnings = detect_backend(
        [gpu("nvidia"), gpu("amd", "AMD Radeon RX 7900 XTX", 1)], importer=importer
    )
    assert backend == "cuda" and "RX 7900 XTX" in warnings[0]


def test_unimportable_llama_cpp_degrades_to_cpu():
    def broken(name):
        raise OSError("libcudart.so.12: cannot open shared object file")

    backend, warnings = detect_backend([gpu("nvidia")], importer=broken)
    assert backend == "cpu" and "cannot be imported" in warnings[0] and "libcudart" in warnings[0]


def test_explicit_lib_dir(tmp_path):
    lib = tmp_path / "elsewhere"
    lib.mkdir()
    (lib / "libggml-metal.dylib").write_text("")
    importer = fake_llama(tmp_path, CPU_LIBS, True)
    build = inspect_build(importer, lib_dir=lib)
    assert build.backends == {"metal"} and build.gpu_offload is True


def test_the_real_install_is_inspected_without_error():
    build = inspect_build()
    if build.importable:
        assert any("llama" in name for name in build.libraries)


def test_backend_for_profile_vendors():
    def gpu(vendor: str, name: str = "a GPU the table lacks") -> GPUInfo:
        return GPUInfo(0, name, vendor, 8 << 30, None, 500.0, 50.0)

    assert backend_for_gpus([gpu("nvidia")]) == "cuda"
    assert backend_for_gpus([gpu("amd")]) == "rocm"
    assert backend_for_gpus([gpu("apple")]) == "metal"
    assert backend_for_gpus([gpu("intel")]) == "vulkan"
    assert backend_for_gpus([]) == "cpu"
    assert backend_for_gpus([gpu("amd", "AMD Radeon RX 580")]) == "vulkan"  # GFX8: ROCm dropped it
    # GPUs of several vendors: the backend that drives them all, else the first's own
    assert backend_for_gpus([gpu("nvidia"), gpu("amd")]) == "vulkan"
    assert backend_for_gpus([gpu("apple"), gpu("nvidia")]) == "metal"


def test_a_what_if_second_gpu_of_another_vendor_gets_layers_too():
    """An RTX 4090 with an RX 7900 XTX beside it is planned on Vulkan, which drives both; on
    the 4090's CUDA the Radeon would get no layer."""
    from rooflight.catalog.models import find_model
    from rooflight.estimate.plan import Wishes, plan
    from rooflight.hardware import profile_from_dict

    cpu = {"cores": 16, "threads": 32, "ram_total_bytes": 64 << 30, "ram_bandwidth_gbs": 60.0, "isa": ["avx2"]}
    hw = profile_from_dict({"cpu": cpu, "gpus": [{"name": "RTX 4090"}, {"name": "RX 7900 XTX"}]},
                           measure_bandwidth=False)
    assert hw.backend == "vulkan" and len(hw.offload_gpus) == 2
    est = plan(find_model("llama-3.3-70b").spec("Q4_K_M"), hw, Wishes(n_ctx=8192))
    assert {"gpu0", "gpu1"} <= set(est.memory.layer_devices) and est.fit == "full_gpu"


def apu(name: str = "AMD Radeon 780M", index: int = 0) -> GPUInfo:
    return GPUInfo(index, name, "amd", 16 << 30, None, 120.0, 8.0, unified_memory=True)


def test_a_laptops_radeon_igpu_beside_an_nvidia_gpu_gets_no_layer(tmp_path):
    """llama.cpp's CUDA build sees only the NVIDIA GPU; Rooflight planned most layers onto the
    780M's 16 GB GTT before (a CUDA build cannot reach it)."""
    from rooflight.catalog.models import find_model
    from rooflight.estimate.plan import Wishes, plan
    from rooflight.hardware.profile import CPUInfo, HardwareProfile

    gpus = [apu(index=0), gpu("nvidia", "NVIDIA GeForce RTX 4060 Laptop GPU", index=1)]
    importer = fake_llama(tmp_path, [*CPU_LIBS, "libggml-cuda.so"], True)
    backend, warnings = detect_backend(gpus, importer=importer)
    assert backend == "cuda"
    # the reason that holds whatever the build: llama.cpp skips an iGPU beside a discrete GPU
    assert any("GPU 0 (AMD Radeon 780M) is integrated" in w and "will not be used" in w for w in warnings)
    assert not any("cannot be driven" in w for w in warnings)
    cpu = CPUInfo("Ryzen 7 7840HS", 8, 16, ("avx2",), 32 << 30, 24 << 30, 60.0, "measured")
    hw = HardwareProfile(cpu=cpu, gpus=tuple(gpus), backend=backend)
    assert [g.name for g in hw.offload_gpus] == ["NVIDIA GeForce RTX 4060 Laptop GPU"]
    est = plan(find_model("qwen3-8b").spec("Q4_K_M"), hw, Wishes(n_ctx=8192))
    assert set(est.memory.layer_devices) <= {"cpu", "gpu1"}
    assert "gpu0" not in {d.device for d in est.memory.devices}


def test_a_discrete_gpu_the_backend_cannot_drive_is_said_so(tmp_path):
    """An RX 7900 XTX beside an RTX 4090 with a CUDA build: CUDA cannot drive it."""
    gpus = [gpu("nvidia", "NVIDIA GeForce RTX 4090", index=0), gpu("amd", "AMD Radeon RX 7900 XTX", index=1)]
    backend, warnings = detect_backend(gpus, importer=fake_llama(tmp_path, [*CPU_LIBS, "libggml-cuda.so"], True))
    assert backend == "cuda"
    assert warnings == ["GPU 1 (AMD Radeon RX 7900 XTX) cannot be driven by the cuda backend and will not be used"]


def test_vulkan_drives_both_but_llama_cpp_skips_the_integrated_one(tmp_path):
    """src/llama.cpp adds integrated GPUs only where it found no discrete one."""
    gpus = [apu(index=0), gpu("amd", "AMD Radeon RX 7800 XT", index=1)]
    importer = fake_llama(tmp_path, [*CPU_LIBS, "libggml-vulkan.so"], True)
    backend, warnings = detect_backend(gpus, importer=importer)
    assert backend == "vulkan"
    assert any("GPU 0 (AMD Radeon 780M) is integrated" in w and "will not be used" in w for w in warnings)
    from rooflight.hardware.profile import CPUInfo, HardwareProfile

    cpu = CPUInfo("Ryzen 7 8700G", 8, 16, ("avx2",), 32 << 30, 24 << 30, 60.0, "measured")
    assert [g.index for g in HardwareProfile(cpu=cpu, gpus=tuple(gpus), backend=backend).offload_gpus] == [1]
    # alone, the integrated GPU is used (Strix Halo, a mini PC's 780M)
    alone = HardwareProfile(cpu=cpu, gpus=(apu(),), backend="vulkan")
    assert [g.name for g in alone.offload_gpus] == ["AMD Radeon 780M"]
    assert HardwareProfile(cpu=cpu, gpus=(apu(),), backend="cpu").offload_gpus == ()
