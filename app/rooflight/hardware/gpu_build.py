"""The exact command that installs a llama-cpp-python build for this machine's GPU.

PyPI ships llama-cpp-python as source only; `pip install -e .` builds it for the CPU. A GPU
build is the same source built with the backend switched on (CMAKE_ARGS). For NVIDIA the
build is for this GPU's architecture only (CMAKE_CUDA_ARCHITECTURES from the compute
capability NVML reports: 8.9 -> 89), which builds several times faster than llama.cpp's
default list of architectures and needs only the CUDA toolkit that knows that architecture.

Toolkit minimums are llama.cpp's own, from vendor/llama.cpp/ggml/src/ggml-cuda/CMakeLists.txt
of llama-cpp-python 0.3.36: "86 == RTX 3000, needs CUDA v11.1", "89 == RTX 4000, needs CUDA
v11.8", "90 == Hopper H100/200, needs CUDA v11.8", "120 == Blackwell, needs CUDA v12.8", and
architectures below 75 are built only with CUDA older than 13. Compute capability 10.x is
Blackwell too (B200); the same 12.8 is assumed for it (that file names only 120/121).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from .backend import DEFAULT_BACKEND, native_backend
from .profile import GPUInfo

_BACKEND_FLAG = {"cuda": "-DGGML_CUDA=on", "rocm": "-DGGML_HIP=on", "vulkan": "-DGGML_VULKAN=on"}


def cuda_architecture(compute_capability: str | None) -> str | None:
    """'8.9' -> '89', '12.0' -> '120'; None when unknown or malformed."""
    if not compute_capability:
        return None
    major, _, minor = compute_capability.partition(".")
    if not (major.isdigit() and (minor or "0").isdigit()):
        return None
    return f"{int(major)}{int(minor or 0)}"


def cuda_toolkit_needed(compute_capability: str | None) -> str:
    """Which CUDA toolkit can build for this compute capability (llama.cpp's CMakeLists)."""
    arch = cuda_architecture(compute_capability)
    if arch is None:
        return "the CUDA toolkit (nvcc)"
    n = int(arch)
    if 110 <= n < 120:
        # Jetson Thor: sm_101 up to CUDA 12.9, renamed sm_110 from CUDA 13.0 (its release notes:
        # "SM101 has been renumbered as SM110"), so only a CUDA 13 nvcc builds for 110
        return "CUDA toolkit 13.0 or newer (nvcc)"
    if n == 121:  # DGX Spark's GB10: llama.cpp's CMakeLists adds 121a-real from CUDA 12.9 on
        return "CUDA toolkit 12.9 or newer (nvcc)"
    if n >= 100:
        return "CUDA toolkit 12.8 or newer (nvcc)"
    if n >= 89:
        return "CUDA toolkit 11.8 or newer (nvcc)"
    if n >= 86:
        return "CUDA toolkit 11.1 or newer (nvcc)"
    if n < 75:
        return "a CUDA toolkit older than 13 (CUDA 13 no longer builds for this GPU) (nvcc)"
    return "the CUDA toolkit (nvcc)"


def find_nvcc(environ: Mapping[str, str] = os.environ, which: Callable[[str], str | None] = shutil.which) -> str | None:
    """nvcc as CMake's FindCUDAToolkit would find it: CUDACXX, CUDA_HOME/CUDA_PATH, PATH, /usr/local/cuda."""
    if environ.get("CUDACXX"):
        return environ["CUDACXX"]
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDAToolkit_ROOT"):
        if environ.get(var):
            candidate = os.path.join(environ[var], "bin", "nvcc")
            if os.path.exists(candidate):
                return candidate
    found = which("nvcc")
    if found:
        return found
    return "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None


@dataclass(frozen=True)
class GPUBuild:
    """How to build and install llama-cpp-python for one GPU."""

    backend: str  # cuda | rocm | vulkan | metal
    cmake_args: str  # the CMAKE_ARGS value ("" for Metal: on by default on macOS)
    version: str | None  # the llama-cpp-python version to build (the installed one)
    needs: str  # what must be installed first, in words
    python: str = field(default=sys.executable)
    toolkit: str | None = None  # nvcc's path where found (CUDA), else None
    cudacxx: str | None = None  # nvcc for CMake when it is not on the PATH (CUDACXX)
    source: str | None = None  # a local llama-cpp-python sdist to build instead of PyPI's
    offline: bool = False  # no index, no build isolation: a machine without a network

    @property
    def requirement(self) -> str:
        if self.source:
            return self.source
        return f"llama-cpp-python=={self.version}" if self.version else "llama-cpp-python"

    @property
    def env(self) -> dict[str, str]:
        env = {"CMAKE_ARGS": self.cmake_args} if self.cmake_args else {}
        if self.cudacxx:
            env["CUDACXX"] = self.cudacxx  # CMake finds a toolkit off the PATH through this
        return env

    @property
    def offline_args(self) -> list[str]:
        return ["--no-index", "--no-build-isolation"] if self.offline else []

    @property
    def pip_args(self) -> list[str]:
        # --no-deps: only llama.cpp changes; --no-cache-dir: never reuse pip's cached CPU wheel
        return ["install", "--force-reinstall", "--no-cache-dir", "--no-deps", *self.offline_args, self.requirement]

    @property
    def command(self) -> str:
        """The one line a user can paste into a terminal."""
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in self.env.items())
        return f"{env}{shlex.quote(self.python)} -m pip {' '.join(self.pip_args)}"

    @property
    def ready(self) -> bool:
        """Whether the build can be tried here (CUDA: nvcc found)."""
        return self.backend != "cuda" or self.toolkit is not None


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return None


def gpu_build_for(gpu: GPUInfo, *, python: str | None = None, version: str | None = None,
                  environ: Mapping[str, str] = os.environ,
                  which: Callable[[str], str | None] = shutil.which,
                  source: str | None = None, offline: bool = False) -> GPUBuild:
    """The build for `gpu`: its native backend, for its architecture, at the installed version
    (or from the sdist `source`; `offline`: no index, no build isolation)."""
    return replace(_build_for(gpu, python, version, environ, which), source=source, offline=offline)


def _build_for(gpu: GPUInfo, python: str | None, version: str | None, environ: Mapping[str, str],
               which: Callable[[str], str | None]) -> GPUBuild:
    backend = native_backend(gpu.vendor, gpu.name) if gpu.vendor in DEFAULT_BACKEND else "vulkan"
    python = python or sys.executable
    version = version if version is not None else installed_version()
    if backend == "cuda":
        arch = cuda_architecture(gpu.compute_capability)
        args = _BACKEND_FLAG["cuda"] + (f" -DCMAKE_CUDA_ARCHITECTURES={arch}" if arch else "")
        nvcc = find_nvcc(environ, which)
        return GPUBuild("cuda", args, version, cuda_toolkit_needed(gpu.compute_capability), python, nvcc,
                        cudacxx=nvcc if nvcc and which("nvcc") != nvcc else None)
    if backend == "rocm":
        return GPUBuild("rocm", _BACKEND_FLAG["rocm"], version, "ROCm with hipcc", python)
    if backend == "metal":
        return GPUBuild("metal", "", version, "Xcode's command line tools", python)
    return GPUBuild("vulkan", _BACKEND_FLAG["vulkan"], version, "the Vulkan SDK (glslc)", python)


def install_hint(gpu: GPUInfo) -> str:
    """The exact command, for warnings: 'CMAKE_ARGS=... python -m pip install ...' (needs ...)."""
    b = gpu_build_for(gpu)
    return f"{b.command}  (needs {b.needs})"
