"""Prepare .gpukit/ here, for bench/gpu_check.py on a GPU machine that reaches no network.

    python bench/gpu_kit_prepare.py [--sdist PATH]

Writes, into .gpukit/ (ignored by git; carried to the device machine with `carry`):
- llama_cpp_python-<version>-trimmed.tar.gz: the installed llama-cpp-python version's
  source (pip download, or --sdist) without what a CUDA build of the Python package never
  reads: llama.cpp's test vocabularies (models/, 75 MB), docs, tests, examples, tools other
  than mtmd, and the ggml backends other than CPU and CUDA. The sdist is 77 MB, more than
  the 64 MiB a device call carries; the trimmed one is a few MB.
- pydeps/: the pure-Python wheels Rooflight needs that the device image lacks (gguf,
  platformdirs), for Python 3.12 there.

Checks the trimmed tree with a CMake configure (CPU backend, a few seconds) when cmake is
on the PATH, so a missing directory shows here rather than in device time.
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / ".gpukit"
DROP = ("models", "docs", "tests", "examples", "benches", "media", "gguf-py", "conversion", "skills",
        "requirements", "grammars", "scripts/apple")
KEEP_BACKENDS = ("ggml-cpu", "ggml-cuda", "ggml-blas")  # ggml/src/<dir>: the others are never built here
PYDEPS = ("gguf", "platformdirs")


def _version() -> str:
    return importlib.metadata.version("llama-cpp-python")


def _download_sdist(version: str, folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    f"llama-cpp-python=={version}", "-d", str(folder)], check=True)
    return next(folder.glob("llama_cpp_python-*.tar.gz"))


def trim(sdist: Path, out: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        (top,) = Path(tmp).iterdir()
        vendor = top / "vendor" / "llama.cpp"
        for name in DROP:
            shutil.rmtree(vendor / name, ignore_errors=True)
        tools = vendor / "tools"
        for d in tools.iterdir() if tools.is_dir() else []:
            if d.is_dir() and d.name != "mtmd":
                shutil.rmtree(d)
        for d in (vendor / "ggml" / "src").iterdir():
            if d.is_dir() and d.name.startswith("ggml-") and d.name not in KEEP_BACKENDS:
                shutil.rmtree(d)
        for d in ("examples", "docs", "tests", "docker", ".git"):  # the sdist even holds a git pack
            shutil.rmtree(top / d, ignore_errors=True)
        shutil.rmtree(vendor / ".git", ignore_errors=True)
        for media in (tools / "mtmd").glob("test-*"):  # mtmd's sample images and video
            media.unlink()
        target = out / f"{top.name}-trimmed.tar.gz"
        with tarfile.open(target, "w:gz") as tar:
            tar.add(top, arcname=top.name)
        if shutil.which("cmake"):
            with tempfile.TemporaryDirectory() as build:
                r = subprocess.run(["cmake", "-S", str(top), "-B", build, "-DGGML_CUDA=OFF", "-DGGML_NATIVE=OFF"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise SystemExit(f"CMake cannot configure the trimmed tree:\n{r.stderr[-3000:]}")
                print("cmake configure of the trimmed tree: ok")
    return target


def pydeps(out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    names = [f"{n}=={importlib.metadata.version(n)}" for n in PYDEPS]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux2014_x86_64",
                    "-d", str(out), *names], check=True)
    return sorted(glob.glob(str(out / "*.whl")))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdist", help="a llama-cpp-python source tarball (default: pip download the installed version)")
    args = ap.parse_args()
    KIT.mkdir(exist_ok=True)
    for old in KIT.glob("llama_cpp_python-*.tar.gz"):
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        sdist = Path(args.sdist) if args.sdist else _download_sdist(_version(), Path(tmp))
        target = trim(sdist, KIT)
    wheels = pydeps(KIT / "pydeps")
    print(f"{target.relative_to(ROOT)}: {target.stat().st_size / 2**20:.1f} MiB")
    for w in wheels:
        print(f"{Path(w).relative_to(ROOT)}: {Path(w).stat().st_size / 2**20:.2f} MiB")
    total = sum(p.stat().st_size for p in KIT.rglob("*") if p.is_file() and "models" not in p.parts)
    print(f".gpukit/ carries {total / 2**20:.1f} MiB (the limit is 64 MiB with the working tree)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
