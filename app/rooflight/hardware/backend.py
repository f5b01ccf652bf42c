"""Which llama.cpp backend this machine would really use.

The answer needs both halves: the installed llama-cpp-python build must contain the
backend (its shared libraries in llama_cpp/lib name them: libggml-cuda.so, ggml-hip,
ggml-metal, ggml-vulkan, ggml-sycl) AND a GPU it can drive must be present. A CPU-only
wheel on a machine with a GPU is the most common silent failure (REFERENCE.md section 5),
so that case gets a warning with the exact command that installs a GPU build.
"""

from __future__ import annotations

import importlib
import mmap
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from .profile import BACKENDS_BY_VENDOR, GPUInfo, is_integrated, offload_gpus_of

Importer = Callable[[str], ModuleType]

# Library-name fragments that reveal a backend in the build.
_LIB_MARKERS = {
    "cuda": ("ggml-cuda",),
    "rocm": ("ggml-hip", "ggml-rocm"),
    "metal": ("ggml-metal",),
    "vulkan": ("ggml-vulkan",),
    "sycl": ("ggml-sycl",),
}
# The backend a profile implies when it names GPUs but no backend. Intel gets Vulkan, not
# SYCL: Vulkan runs on the stock Mesa/Windows drivers and is what llama.cpp's prebuilt Arc
# binaries commonly use, whereas SYCL needs the oneAPI toolkit installed and a custom build.
DEFAULT_BACKEND = {"nvidia": "cuda", "amd": "rocm", "apple": "metal", "intel": "vulkan"}

_PIP = "pip install --force-reinstall --no-cache-dir llama-cpp-python"
# generic hints per vendor; warnings give the exact command for the GPU (gpu_build.py)
INSTALL_HINTS = {
    "nvidia": f'CMAKE_ARGS="-DGGML_CUDA=on" {_PIP}',
    "amd": f'CMAKE_ARGS="-DGGML_HIP=on" {_PIP}',
    "intel": f'CMAKE_ARGS="-DGGML_VULKAN=on" {_PIP}',
    "apple": f"{_PIP}  (Metal is on by default on macOS)",
}
# the SYCL build with FP16 GEMMs (llama.cpp docs/backend/SYCL.md builds with -DGGML_SYCL_F16=ON)
SYCL_F16_INSTALL = (
    'source /opt/intel/oneapi/setvars.sh && CMAKE_ARGS="-DGGML_SYCL=on -DGGML_SYCL_F16=on '
    f'-DCMAKE_C_COMPILER=icx -DCMAKE_CXX_COMPILER=icpx" {_PIP}'
)
_VENDOR_WORD = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel", "apple": "Apple"}


@dataclass(frozen=True)
class BuildInfo:
    """What the installed llama-cpp-python can do."""

    importable: bool
    backends: frozenset[str] = frozenset()  # from the library names
    gpu_offload: bool | None = None  # llama_supports_gpu_offload(); None if not asked
    libraries: tuple[str, ...] = field(default_factory=tuple)
    error: str = ""
    sycl_f16: bool | None = None  # a SYCL build's GGML_SYCL_F16 (sycl_f16_of_library); None: no SYCL


def backends_from_libraries(names: Iterable[str]) -> frozenset[str]:
    found = set()
    for name in names:
        low = name.lower()
        for backend, markers in _LIB_MARKERS.items():
            if any(m in low for m in markers):
                found.add(backend)
    return frozenset(found)


def _library_paths(module: ModuleType, lib_dir: Path | None) -> list[Path]:
    dirs: list[Path] = [lib_dir] if lib_dir is not None else []
    if lib_dir is None and getattr(module, "__file__", None):
        pkg = Path(module.__file__).parent  # type: ignore[arg-type]
        dirs = [pkg / "lib", pkg]  # older wheels put the libraries beside the package
    paths: dict[str, Path] = {}
    for d in dirs:
        try:
            for p in d.iterdir():
                if (p.is_file() or p.is_symlink()) and any(s in p.name for s in (".so", ".dylib", ".dll")):
                    paths.setdefault(p.name, p)
        except OSError:
            continue
    return [paths[n] for n in sorted(paths)]


# ggml-sycl prints its build options when it starts (ggml_check_sycl, ggml-sycl.cpp:
# "GGML_SYCL_F16: yes" or "no"); only the branch compiled in is in the library, so the
# library's bytes say which build it is without starting a device. Older builds printed
# "ggml_init_sycl: GGML_SYCL_F16:   no" (llama.cpp issue #6036): the spaces vary.
_SYCL_F16_MARK = re.compile(rb"GGML_SYCL_F16:\s{0,8}(yes|no)\b")


def sycl_f16_of_library(path: Path) -> bool | None:
    """GGML_SYCL_F16 of a ggml-sycl library: True / False, None when it does not say
    (unreadable, or a build that prints no such line)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            found = _SYCL_F16_MARK.search(data)
            return None if found is None else found.group(1) == b"yes"  # read while mapped
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return None


def inspect_build(
    importer: Importer = importlib.import_module, lib_dir: Path | None = None
) -> BuildInfo:
    try:
        module = importer("llama_cpp")
    except BaseException as exc:  # ImportError, OSError from a broken shared library...
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return BuildInfo(importable=False, error=f"{type(exc).__name__}: {exc}")
    paths = _library_paths(module, lib_dir)
    libs = tuple(p.name for p in paths)
    sycl_libs = [p for p in paths if backends_from_libraries([p.name]) == {"sycl"}]
    sycl_f16 = next((f for f in map(sycl_f16_of_library, sycl_libs) if f is not None), None)
    offload: bool | None = None
    fn = getattr(module, "llama_supports_gpu_offload", None)
    if callable(fn):
        try:
            offload = bool(fn())
        except Exception:
            offload = None
    return BuildInfo(
        importable=True, backends=backends_from_libraries(libs), gpu_offload=offload, libraries=libs,
        sycl_f16=sycl_f16,
    )


def choose_backend(gpus: Sequence[GPUInfo], build: BuildInfo) -> tuple[str, list[str]]:
    """(backend, warnings) for these GPUs and this build."""
    warnings: list[str] = []
    if not build.importable:
        warnings.append(
            f"llama-cpp-python cannot be imported ({build.error}); estimates assume the CPU "
            "backend and chat/bench will not work until it is installed"
        )
        return "cpu", warnings
    if not gpus:
        return "cpu", warnings
    available = set(build.backends)
    if not available and build.gpu_offload:
        # A monolithic build (one libllama with the backend linked in) offloads but does not
        # name its backend: assume the native one for the first GPU.
        available = {BACKENDS_BY_VENDOR[gpus[0].vendor][0]} if gpus[0].vendor in BACKENDS_BY_VENDOR else set()
    chosen = next(
        (b for gpu in gpus for b in BACKENDS_BY_VENDOR.get(gpu.vendor, ()) if b in available), None
    )
    if chosen is None:
        from .gpu_build import install_hint

        vendor = gpus[0].vendor
        hint = install_hint(gpus[0])  # this GPU's backend and architecture, exactly
        what = (
            "a CPU-only build"
            if not available
            else f"built for {', '.join(sorted(available))} only"
        )
        warnings.append(
            f"llama-cpp-python here is {what}, so llama.cpp will not use the "
            f"{_VENDOR_WORD.get(vendor, vendor)} GPU ({gpus[0].name}); install a GPU build with: "
            f"{hint}"
        )
        return "cpu", warnings
    if build.gpu_offload is False:
        # The backend library is there but llama.cpp found no device it can open: usually a
        # missing driver or runtime library (libcudart, ROCm) on this machine.
        warnings.append(
            f"llama-cpp-python has {chosen} support but reports no GPU offload; check the GPU "
            "driver and runtime libraries. Estimates assume the CPU backend"
        )
        return "cpu", warnings
    used = offload_gpus_of(gpus, chosen)
    beside_discrete = not all(map(is_integrated, used))
    for gpu in gpus:
        if gpu in used:
            continue
        if is_integrated(gpu) and beside_discrete:
            # the first reason, whatever the backend: a laptop's iGPU beside its RTX card
            warnings.append(
                f"GPU {gpu.index} ({gpu.name}) is integrated, and llama.cpp offloads to "
                "integrated GPUs only where there is no discrete one: it will not be used"
            )
        else:
            warnings.append(
                f"GPU {gpu.index} ({gpu.name}) cannot be driven by the {chosen} backend and "
                "will not be used"
            )
    return chosen, warnings


def detect_backend(
    gpus: Sequence[GPUInfo],
    *,
    importer: Importer = importlib.import_module,
    lib_dir: Path | None = None,
) -> tuple[str, list[str]]:
    """What llama.cpp would use here: "cuda" | "rocm" | "metal" | "vulkan" | "sycl" | "cpu"."""
    backend, warnings, _ = detect_backend_build(gpus, importer=importer, lib_dir=lib_dir)
    return backend, warnings


def detect_backend_build(
    gpus: Sequence[GPUInfo],
    *,
    importer: Importer = importlib.import_module,
    lib_dir: Path | None = None,
) -> tuple[str, list[str], bool | None]:
    """detect_backend's (backend, warnings), and the SYCL build's GGML_SYCL_F16 when the
    backend is SYCL (None otherwise, or where the library does not say)."""
    if importer is importlib.import_module and lib_dir is None:
        build = installed_build()
    else:
        build = inspect_build(importer, lib_dir)
    backend, warnings = choose_backend(gpus, build)
    sycl_f16 = build.sycl_f16 if backend == "sycl" else None
    if sycl_f16 is False:
        warnings.append(
            "llama-cpp-python's SYCL build was made without GGML_SYCL_F16 (the default), so llama.cpp "
            "multiplies prompts in FP32 on the vector units, not the XMX engines, and prompt estimates "
            f"use that rate; for the FP16 path: {SYCL_F16_INSTALL}"
        )
    return backend, warnings, sycl_f16


def installed_build() -> BuildInfo:
    """inspect_build() of the installed llama-cpp-python, without importing it when its files
    are as they were last time and it has no GPU backend library.

    Importing llama_cpp loads its shared libraries and costs ~0.15 s, most of what
    `rooflight rank` spends detecting the machine. A CPU-only build's answer is fixed by its
    files (names, sizes, times, and LLAMA_CPP_LIB_PATH, which picks another build), so it is
    kept in the cache dir under that stamp; a GPU build is always asked, because whether it
    can offload also depends on the driver, which can change under the same files.
    """
    import importlib.util
    import json
    import os
    import sys

    if "llama_cpp" in sys.modules:
        return inspect_build()
    try:
        found = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        return inspect_build()
    pkg = Path(next(iter(found.submodule_search_locations)))
    override = os.environ.get("LLAMA_CPP_LIB_PATH", "")
    stamp: list[list] = [[str(pkg), override]]
    for d in [pkg / "lib", pkg] + ([Path(override)] if override else []):
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name.endswith((".so", ".dylib", ".dll", ".py")) or ".so." in e.name:
                st = e.stat()
                stamp.append([e.path, st.st_size, st.st_mtime_ns])
    if backends_from_libraries(str(p[0]) for p in stamp[1:]):
        return inspect_build()  # a GPU build: ask it
    from .bandwidth import cache_dir

    path = cache_dir() / "llama_build.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("stamp") == stamp:
            b = doc["build"]
            return BuildInfo(bool(b["importable"]), frozenset(b["backends"]), b["gpu_offload"],
                             tuple(b["libraries"]), str(b["error"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    build = inspect_build()
    from rooflight.atomic import write_text_atomic

    doc = {"stamp": stamp, "build": {"importable": build.importable, "backends": sorted(build.backends),
                                     "gpu_offload": build.gpu_offload, "libraries": list(build.libraries),
                                     "error": build.error}}
    try:
        write_text_atomic(path, json.dumps(doc), make_parent=True)
    except OSError:
        pass  # a read-only cache dir costs only speed
    return build


# AMD GPU targets current ROCm no longer runs: GFX8 (Polaris, the RX 470-590; Fiji) is "not
# guaranteed" in ROCm 4.x and not detected from ROCm 4.5 (AMD's ROCm hardware and software
# support document, as quoted in https://gist.github.com/thaddeusc1/b0e5cdf92e1d1214d9d985364610aaf6).
# llama.cpp's Vulkan backend runs them, so that is their native build.
ROCM_DROPPED_GFX = frozenset({"gfx803"})


def native_backend(vendor: str, name: str = "") -> str:
    """The llama.cpp backend a GPU of this vendor (and table name) runs best: the vendor's,
    or Vulkan for an AMD GPU whose target ROCm has dropped (ROCM_DROPPED_GFX)."""
    if vendor == "amd" and name:
        from .gpu_table import lookup_gpu

        entry = lookup_gpu(name)
        if entry and entry.get("gfx") in ROCM_DROPPED_GFX:
            return "vulkan"
    return DEFAULT_BACKEND.get(vendor, "cpu")


def backend_for_gpus(gpus: Iterable[GPUInfo]) -> str:
    """The backend a hand-written profile implies when it names none: the native backend of
    its first GPU of a known vendor, or, for GPUs of several vendors (an RTX 4090 beside an
    RX 7900 XTX), the one backend that drives them all where there is one (Vulkan): with the
    first's native backend the others would get no layer (HardwareProfile.offload_gpus)."""
    known = [g for g in gpus if g.vendor in DEFAULT_BACKEND]
    if not known:
        return "cpu"
    vendors = {g.vendor for g in known}
    if len(vendors) > 1:
        common = set.intersection(*(set(BACKENDS_BY_VENDOR[v]) for v in vendors))
        shared = [b for b in BACKENDS_BY_VENDOR[known[0].vendor] if b in common]
        if shared:
            return shared[0]
    return native_backend(known[0].vendor, known[0].name)
