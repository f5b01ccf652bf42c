"""Build and install the GPU llama-cpp-python in one step, keeping the CPU build on failure.

Three commands, each through `runner` (subprocess.Popen by default; tests fake it there):

1. `pip wheel` the installed version with the GPU's CMAKE_ARGS into a temporary folder
   (verbose, so CMake's "[ 45%] Building CUDA object ..." lines give the progress). The
   installed build is not touched: a failed or cancelled build leaves the CPU build working.
2. Look inside the wheel: it must bundle the backend's library (libggml-cuda...). CMake
   quietly builds a CPU-only wheel when it finds no toolkit; that wheel is not installed.
3. `pip install --force-reinstall --no-deps` the wheel, then ask a fresh Python (this
   process has the old library loaded) whether llama_supports_gpu_offload() is true now.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rooflight.hardware.backend import backends_from_libraries
from rooflight.hardware.gpu_build import GPUBuild

_PERCENT = re.compile(r"^\s*\[\s*(\d{1,3})%\]")
_CHECK = ("import json, llama_cpp, os; d = os.path.join(os.path.dirname(llama_cpp.__file__), 'lib'); "
          "print(json.dumps({'offload': bool(llama_cpp.llama_supports_gpu_offload()), "
          "'libs': sorted(os.listdir(d)) if os.path.isdir(d) else []}))")


class Process(Protocol):
    stdout: Iterable[str]

    def wait(self) -> int: ...
    def terminate(self) -> None: ...


Runner = Callable[[list[str], dict[str, str]], Process]


class _Popen:
    """subprocess.Popen as a Process: its output as lines (stderr folded in)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self._proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      errors="replace", bufsize=1)
        assert self._proc.stdout is not None  # stdout=PIPE
        self.stdout: Iterable[str] = self._proc.stdout

    def wait(self) -> int:
        return self._proc.wait()

    def terminate(self) -> None:
        self._proc.terminate()


def popen_runner(argv: list[str], env: dict[str, str]) -> Process:
    return _Popen(argv, env)


RUNNER: Runner = popen_runner  # what the app runs commands with (tests replace it at this boundary)


@dataclass(frozen=True)
class BuildOutcome:
    ok: bool
    message: str  # one sentence
    cancelled: bool = False


def _run(runner: Runner, argv: list[str], env: dict[str, str], on_line, should_stop) -> tuple[int | None, list[str]]:
    """Run one command, streaming its lines; (exit status or None when stopped, last lines)."""
    proc = runner(argv, env)
    tail: list[str] = []
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail = (tail + [line])[-40:]
        if on_line is not None:
            on_line(line)
        if should_stop():
            proc.terminate()
            proc.wait()
            return None, tail
    return proc.wait(), tail


def _why(tail: list[str]) -> str:
    """The line of a failed build that says why (CMake and compilers say 'error')."""
    generic = re.compile(r"Failed building wheel|subprocess-exited-with-error|Failed to build", re.I)
    bad = [ln.strip() for ln in tail
           if re.search(r"error|fatal|not found|could not|failed", ln, re.I) and not generic.search(ln)]
    return (bad[0] if bad else (tail[-1].strip() if tail else "no output"))[:200]


def build_and_install(build: GPUBuild, *, on_line: Callable[[str], None] | None = None,
                      on_progress: Callable[[float], None] | None = None,
                      should_stop: Callable[[], bool] = lambda: False,
                      runner: Runner = popen_runner, work_dir: str | None = None,
                      keep_wheel: str | None = None) -> BuildOutcome:
    """Build, check and install `build`; what happened in one sentence. keep_wheel: a folder
    to copy the built wheel to (bench/gpu_check.py reuses it on a rerun)."""
    keep = "the CPU build stays installed"
    if not build.ready:
        return BuildOutcome(False, f"The {build.backend.upper()} build needs {build.needs}, which was not found "
                                   f"on this machine; install it and try again ({keep}).")
    env = dict(os.environ, **build.env)
    folder = tempfile.mkdtemp(prefix="rooflight-gpu-build-", dir=work_dir)
    try:
        def line(text: str) -> None:
            if on_line is not None:
                on_line(text)
            m = _PERCENT.match(text)
            if m and on_progress is not None:
                on_progress(min(100, int(m.group(1))) / 100 * 0.9)

        wheel_cmd = [build.python, "-m", "pip", "wheel", "-v", "--no-deps", "--no-cache-dir", *build.offline_args,
                     "--no-binary", "llama-cpp-python", build.requirement, "-w", folder]
        rc, tail = _run(runner, wheel_cmd, env, line, should_stop)
        if rc is None:
            return BuildOutcome(False, f"The build was cancelled; {keep}.", cancelled=True)
        if rc != 0:
            return BuildOutcome(False, f"The build failed ({_why(tail)}); {keep}.")
        wheels = sorted(Path(folder).glob("llama_cpp_python-*.whl"))
        if not wheels:
            return BuildOutcome(False, f"The build finished without a llama-cpp-python wheel; {keep}.")
        with zipfile.ZipFile(wheels[0]) as z:
            bundled = backends_from_libraries(Path(n).name for n in z.namelist())
        if build.backend != "metal" and build.backend not in bundled:
            return BuildOutcome(False, f"The build has no {build.backend.upper()} library (CMake did not find "
                                       f"{build.needs}); {keep}.")
        if keep_wheel:
            os.makedirs(keep_wheel, exist_ok=True)
            shutil.copy2(wheels[0], keep_wheel)
        if on_progress is not None:
            on_progress(0.92)
        install_cmd = [build.python, "-m", "pip", "install", "--force-reinstall", "--no-deps", "--no-cache-dir",
                       *build.offline_args, str(wheels[0])]
        rc, tail = _run(runner, install_cmd, env, on_line, lambda: False)  # never stop half-installed
        if rc != 0:
            return BuildOutcome(False, f"Installing the GPU build failed ({_why(tail)}); {keep}.")
        out: list[str] = []
        rc, tail = _run(runner, [build.python, "-c", _CHECK], env, out.append, lambda: False)
        if on_progress is not None:
            on_progress(1.0)
        try:
            told = json.loads(out[-1]) if rc == 0 and out else {}
        except ValueError:
            told = {}
        installed = backends_from_libraries(told.get("libs", []))
        if told and build.backend != "metal" and build.backend not in installed:
            return BuildOutcome(False, f"The installed llama-cpp-python has no {build.backend.upper()} library "
                                       "after all (another Python's pip?); it runs models on the CPU.")
        if not told.get("offload"):
            return BuildOutcome(False, "The GPU build is installed but llama.cpp reports no GPU offload; check "
                                       "the GPU driver (it still runs models on the CPU).")
        return BuildOutcome(True, f"The {build.backend.upper()} build is installed and llama.cpp can offload to "
                                  "the GPU; restart Rooflight to use it.")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
