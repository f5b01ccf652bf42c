"""The GPU build in one step: the exact command per GPU, and the build run with the command
runner faked at its boundary (no real pip, CMake or compiler runs here)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from rooflight.hardware.gpu_build import (
    cuda_architecture,
    cuda_toolkit_needed,
    gpu_build_for,
    install_hint,
)
from rooflight.hardware.profile import GPUInfo
from rooflight.runtime.gpu_build_run import build_and_install

H200 = GPUInfo(0, "NVIDIA H200", "nvidia", 150 * 2**30, 140 * 2**30, 4800.0, 989.0, compute_capability="9.0")
RTX_4090 = GPUInfo(0, "NVIDIA GeForce RTX 4090", "nvidia", 24 * 2**30, None, 1008.0, 165.0,
                   compute_capability="8.9")
NVCC = {"CUDA_HOME": ""}


def _which(found: str | None):
    return lambda name: found if name == "nvcc" else None


def test_cuda_architecture_and_toolkit_from_compute_capability():
    assert cuda_architecture("8.9") == "89" and cuda_architecture("12.0") == "120" and cuda_architecture("7") == "70"
    assert cuda_architecture(None) is None and cuda_architecture("x.y") is None
    assert cuda_toolkit_needed("8.6") == "CUDA toolkit 11.1 or newer (nvcc)"
    assert cuda_toolkit_needed("9.0") == "CUDA toolkit 11.8 or newer (nvcc)"
    assert cuda_toolkit_needed("12.0") == "CUDA toolkit 12.8 or newer (nvcc)"
    assert cuda_toolkit_needed("11.0") == "CUDA toolkit 13.0 or newer (nvcc)"  # Jetson Thor: sm_110 from CUDA 13
    assert cuda_toolkit_needed("12.1") == "CUDA toolkit 12.9 or newer (nvcc)"  # GB10: 121a from CUDA 12.9
    assert "older than 13" in cuda_toolkit_needed("6.1")


def test_exact_command_for_this_gpu():
    b = gpu_build_for(H200, python="/venv/bin/python", version="0.3.36", environ=NVCC, which=_which("/usr/bin/nvcc"))
    assert b.command == ("CMAKE_ARGS='-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90' /venv/bin/python -m pip install "
                         "--force-reinstall --no-cache-dir --no-deps llama-cpp-python==0.3.36")
    assert b.ready and b.toolkit == "/usr/bin/nvcc"
    missing = gpu_build_for(H200, version="0.3.36", environ=NVCC, which=_which(None))
    assert missing.toolkit is None or Path(missing.toolkit).exists()
    amd = gpu_build_for(GPUInfo(0, "Radeon RX 7900 XTX", "amd", 24 * 2**30, None, 960.0, 123.0), version="0.3.36")
    assert amd.cmake_args == "-DGGML_HIP=on" and amd.ready
    intel = gpu_build_for(GPUInfo(0, "Arc A770", "intel", 16 * 2**30, None, 560.0, 39.0), version="0.3.36")
    assert intel.cmake_args == "-DGGML_VULKAN=on" and "Vulkan SDK" in intel.needs
    assert "(needs CUDA toolkit 11.8 or newer (nvcc))" in install_hint(RTX_4090)


class FakeProcess:
    def __init__(self, lines: list[str], rc: int) -> None:
        self.stdout = iter(line + "\n" for line in lines)
        self.rc = rc
        self.terminated = False

    def wait(self) -> int:
        return -15 if self.terminated else self.rc

    def terminate(self) -> None:
        self.terminated = True


class FakePip:
    """Answers like pip/CMake would: a verbose wheel build, an install, the post-install check."""

    def __init__(self, *, wheel_libs=("libggml-cuda.so", "libllama.so"), wheel_rc=0, offload=True,
                 installed_libs=("libggml-cuda.so", "libggml-base.so")) -> None:
        self.calls: list[tuple[list[str], dict]] = []
        self.wheel_libs, self.wheel_rc, self.offload, self.installed_libs = wheel_libs, wheel_rc, offload, installed_libs
        self.last: FakeProcess | None = None

    def __call__(self, argv: list[str], env: dict[str, str]) -> FakeProcess:
        self.calls.append((argv, env))
        if argv[1:4] == ["-m", "pip", "wheel"]:
            out = Path(argv[argv.index("-w") + 1])
            if self.wheel_rc == 0:
                buf = io.BytesIO()
                with zipfile.ZipFile(buf, "w") as z:
                    for lib in self.wheel_libs:
                        z.writestr(f"llama_cpp/lib/{lib}", b"")
                (out / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl").write_bytes(buf.getvalue())
                lines = ["Building wheel for llama-cpp-python", "[  5%] Building C object ggml.c.o",
                         "[ 50%] Building CUDA object mmq.cu.o", "[100%] Linking CXX shared library libllama.so"]
            else:
                lines = ["[ 10%] Building CUDA object mmq.cu.o", "nvcc fatal   : Unsupported gpu architecture 'compute_120'",
                         "ERROR: Failed building wheel for llama-cpp-python"]
            self.last = FakeProcess(lines, self.wheel_rc)
        elif argv[1:4] == ["-m", "pip", "install"]:
            self.last = FakeProcess(["Successfully installed llama-cpp-python-0.3.36"], 0)
        else:  # the check in a fresh Python
            self.last = FakeProcess([json.dumps({"offload": self.offload, "libs": list(self.installed_libs)})], 0)
        return self.last


def _build():
    return gpu_build_for(H200, python="/venv/bin/python", version="0.3.36", environ=NVCC, which=_which("/usr/bin/nvcc"))


def test_build_check_install_and_verify(tmp_path):
    pip, lines, progress = FakePip(), [], []
    out = build_and_install(_build(), on_line=lines.append, on_progress=progress.append, runner=pip,
                            work_dir=str(tmp_path))
    assert out.ok and "restart Rooflight" in out.message
    wheel, install, check = (argv for argv, _ in pip.calls)
    assert wheel[:5] == ["/venv/bin/python", "-m", "pip", "wheel", "-v"] and "llama-cpp-python==0.3.36" in wheel
    assert pip.calls[0][1]["CMAKE_ARGS"] == "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90"
    assert install[3:5] == ["install", "--force-reinstall"] and install[-1].endswith(".whl")
    assert check[1] == "-c" and "llama_supports_gpu_offload" in check[2]
    assert "[ 50%] Building CUDA object mmq.cu.o" in lines
    assert progress[:3] == [0.05 * 0.9, 0.5 * 0.9, 0.9] and progress[-1] == 1.0
    assert list(tmp_path.iterdir()) == []  # the wheel folder is gone


def test_failed_build_keeps_the_cpu_build_and_says_why(tmp_path):
    pip = FakePip(wheel_rc=1)
    out = build_and_install(_build(), runner=pip, work_dir=str(tmp_path))
    assert not out.ok and len(pip.calls) == 1  # nothing installed
    assert out.message == ("The build failed (nvcc fatal   : Unsupported gpu architecture 'compute_120'); "
                           "the CPU build stays installed.")
    assert list(tmp_path.iterdir()) == []


def test_a_wheel_without_the_cuda_library_is_not_installed(tmp_path):
    pip = FakePip(wheel_libs=("libggml-cpu.so", "libllama.so"))  # CMake found no toolkit
    out = build_and_install(_build(), runner=pip, work_dir=str(tmp_path))
    assert not out.ok and "has no CUDA library" in out.message and len(pip.calls) == 1


def test_cancel_stops_the_build(tmp_path):
    pip, seen = FakePip(), []
    out = build_and_install(_build(), on_line=seen.append, should_stop=lambda: len(seen) >= 2, runner=pip,
                            work_dir=str(tmp_path))
    assert out.cancelled and not out.ok and pip.last.terminated and len(pip.calls) == 1
    assert "cancelled; the CPU build stays installed" in out.message


def test_installed_but_no_offload_is_told(tmp_path):
    out = build_and_install(_build(), runner=FakePip(offload=False), work_dir=str(tmp_path))
    assert not out.ok and "reports no GPU offload" in out.message


def test_no_toolkit_no_run():
    b = gpu_build_for(H200, version="0.3.36", environ={"CUDA_HOME": "/nonexistent"}, which=_which(None))
    if b.toolkit is None:
        pip = FakePip()
        out = build_and_install(b, runner=pip)
        assert not out.ok and pip.calls == [] and "CUDA toolkit 11.8 or newer (nvcc), which was not found" in out.message


def test_a_toolkit_off_the_path_is_named_for_cmake():
    b = gpu_build_for(H200, python="/venv/bin/python", version="0.3.36", environ={"CUDACXX": "/opt/cuda/bin/nvcc"},
                      which=_which(None))
    assert b.toolkit == "/opt/cuda/bin/nvcc" and b.env["CUDACXX"] == "/opt/cuda/bin/nvcc"
    assert b.command.startswith("CMAKE_ARGS='-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90' CUDACXX=/opt/cuda/bin/nvcc ")
    offline = gpu_build_for(H200, version="0.3.36", environ={"CUDACXX": "/x/nvcc"}, which=_which(None),
                            source="/kit/llama_cpp_python-0.3.36-trimmed.tar.gz", offline=True)
    assert offline.pip_args[-3:] == ["--no-index", "--no-build-isolation", "/kit/llama_cpp_python-0.3.36-trimmed.tar.gz"]


def test_an_offline_build_from_a_carried_source(tmp_path):
    """What bench/gpu_check.py runs on a GPU machine without a network."""
    pip = FakePip()
    b = gpu_build_for(H200, python="/venv/bin/python", version=None, environ=NVCC, which=_which("/usr/bin/nvcc"),
                      source="/repo/.gpukit/llama_cpp_python-0.3.36-trimmed.tar.gz", offline=True)
    keep = tmp_path / "kept"
    out = build_and_install(b, runner=pip, work_dir=str(tmp_path), keep_wheel=str(keep))
    assert out.ok
    wheel, install, _ = (argv for argv, _ in pip.calls)
    assert "--no-index" in wheel and "--no-build-isolation" in wheel
    assert "/repo/.gpukit/llama_cpp_python-0.3.36-trimmed.tar.gz" in wheel and "--no-index" in install
    assert [p.name for p in keep.iterdir()] == ["llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"]


def test_an_amd_gpu_rocm_dropped_gets_the_vulkan_build_and_plans_on_vulkan():
    """GFX8 (the RX 580) is not detected by ROCm from 4.5 on: its build and a profile that names
    it without a backend are Vulkan; a current AMD GPU stays on ROCm."""
    from rooflight.hardware import profile_from_dict

    rx580 = GPUInfo(0, "AMD Radeon RX 580", "amd", 8 * 2**30, None, 256.0, 6.17)
    build = gpu_build_for(rx580, version="0.3.36")
    assert build.backend == "vulkan" and "-DGGML_VULKAN=on" in build.command
    assert profile_from_dict({"gpus": [{"name": "RX 580"}]}, measure_bandwidth=False).backend == "vulkan"
    assert profile_from_dict({"gpus": [{"name": "RX 7900 XTX"}]}, measure_bandwidth=False).backend == "rocm"
    xtx = GPUInfo(0, "AMD Radeon RX 7900 XTX", "amd", 24 * 2**30, None, 960.0, 122.8)
    assert gpu_build_for(xtx, version="0.3.36").backend == "rocm"
