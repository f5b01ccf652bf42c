"""llama.cpp's AMX kernels, and the machines where they crash.

A llama.cpp built on a CPU with Intel AMX (GGML_NATIVE sees AMX_INT8) keeps Q4_0, Q4_1,
Q8_0, Q4_K, Q5_K, Q6_K and IQ4_XS weights in its "AMX" buffer and multiplies them with tile
instructions. On some machines the first such multiply kills the process: the tile
configuration the compiler leaves on the stack is invalid and `ldtilecfg` faults
(llama.cpp issue #20824, the fix proposed in PR #26954; seen here on a 2-core Xeon VM with
AMX, 480 MiB L3, llama-cpp-python 0.3.36 built with GCC 12: every Q4_K_M model, the
Gemma-3-270M package included, died with SIGSEGV in ggml_backend_amx_mul_mat).

Whether a build crashes is a property of its binary and the machine, not something the CPU
flags tell, so it is measured: once per llama.cpp build and machine, a child process runs a
tiny generated Q8_0 model with the AMX buffer in use, and its exit status is the answer
(kept in the cache folder, and for the life of the process). Where it crashes, every load
passes `use_extra_bufts = false` (llama.h), so weights stay in ordinary CPU buffers: the
build's plain kernels run, slower at prompts than working AMX (and without the CPU repack
buffer either, which the same switch turns off), but they run. A build without AMX costs
nothing here but one look at its system info: no child is started.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from rooflight.atomic import write_text_atomic

CACHE_FILE = "amx_check.json"
# a child that writes and loads a 1 MB model and runs 36 tokens takes about 0.3 s here; one
# that has not finished in this long is hung, not slow, and counts as a crash
CHECK_TIMEOUT_S = 60.0
NOTICE = ("The AMX kernels of this llama.cpp build crash on this machine (llama.cpp issue #20824), so "
          "Rooflight loads models without them: prompts run on the plain CPU kernels, slower than AMX would be.")
_lock = threading.Lock()
# how a child killed by the CPU exits: POSIX gives the signal as a negative code (SIGSEGV,
# SIGILL, SIGBUS); Windows an NTSTATUS (access violation, illegal and privileged instruction)
_WINDOWS_FAULTS = (0xC0000005, 0xC000001D, 0xC0000096)


def build_has_amx() -> bool:
    """Whether the installed llama.cpp was built with its AMX kernels (AMX_INT8 in its
    system info line)."""
    try:
        import llama_cpp
    except ImportError:
        return False
    info = llama_cpp.llama_print_system_info()
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    return "AMX_INT8 = 1" in text


def _key() -> str:
    """The build and machine a verdict holds for: another build, CPU or kernel asks again."""
    from rooflight.hardware.cpu import parse_cpuinfo
    from rooflight.runtime.build import loaded_llama_build

    try:
        name, isa = parse_cpuinfo(Path("/proc/cpuinfo").read_text(errors="replace"))
        cpu = f"{name}|{','.join(isa)}"
    except OSError:
        cpu = platform.processor()
    return f"{loaded_llama_build()}|{platform.release()}|{hashlib.sha1(cpu.encode()).hexdigest()[:12]}"


def _cache_path() -> Path:
    from rooflight.hardware.bandwidth import cache_dir

    return cache_dir() / CACHE_FILE


def _cached(key: str) -> bool | None:
    try:
        data = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = data.get(key) if isinstance(data, dict) else None
    return ok if isinstance(ok, bool) else None


def _remember(key: str, ok: bool) -> None:
    path = _cache_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    data[key] = ok
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(data, indent=1))
    except OSError:
        pass  # not kept: asked again by the next process, which costs the child's 0.3 s


def check_command(model_path: Path) -> list[str]:
    """How to start the child: this Python with this module, or the frozen app itself
    (packaging/rooflight_main.py dispatches the flag)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--amx-check", str(model_path)]
    return [sys.executable, "-m", "rooflight.runtime.amx", str(model_path)]


def main() -> None:
    """The child: a tiny Q8_0 model (every matrix in the AMX buffer) through a 32-token
    prompt (the tile path) and a few tokens of decode (the one-row path); "ok" if it lived."""
    import llama_cpp

    from rooflight.gguf.synthetic import write_model

    path = write_model(sys.argv[-1], n_layer=1, n_embd=256, n_head=4, n_head_kv=4, n_ff=512, ftype="Q8_0",
                       pure=True)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=128, n_threads=2, n_gpu_layers=0, verbose=False)
    llm.eval([3 + i for i in range(32)])
    for i in range(4):
        llm.eval([40 + i])
    print("ok", flush=True)
    sys.exit(0)


def killed(returncode: int) -> bool:
    """Whether a child's exit status says the CPU stopped it rather than Python."""
    return returncode < 0 or returncode in _WINDOWS_FAULTS


def run_check() -> bool | None:
    """Run the child once: True when the AMX kernels ran, False when the child was killed by
    a signal (the crash) or hung, None when it could not run at all (nothing learnt)."""
    with tempfile.TemporaryDirectory(prefix="rooflight-amx-") as d:
        try:
            done = subprocess.run(check_command(Path(d) / "amx.gguf"), capture_output=True, text=True,
                                  timeout=CHECK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return False
        except OSError:
            return None
    if killed(done.returncode):  # the kernels, not Python
        return False
    return True if done.returncode == 0 and done.stdout.strip().endswith("ok") else None


@functools.cache
def amx_crashes() -> bool:
    """Whether this build's AMX kernels crash on this machine (False where it has none).
    The kept verdict is read first: asking the build (importing llama_cpp, ~0.15 s) is left
    to the first time, so a detection on an AMX machine does not pay it every start."""
    with _lock:
        key = _key()
        ok = _cached(key)
        if ok is None:
            ok = run_check() if build_has_amx() else True  # no AMX kernels: nothing to crash
            if ok is not None:
                _remember(key, ok)
    return ok is False


def safe_model_params(params) -> None:
    """Set on llama_model_params before a load: keep weights out of the AMX buffer where
    its kernels crash."""
    if amx_crashes():
        params.use_extra_bufts = False


def llama_with_params(configure):
    """llama_cpp.Llama whose model parameters pass through configure(params) as
    llama-cpp-python's __init__ builds them (it offers no argument for most fields)."""
    import llama_cpp

    class ConfiguredLlama(llama_cpp.Llama):
        @property
        def model_params(self):
            return self.__dict__["_rooflight_model_params"]

        @model_params.setter
        def model_params(self, params) -> None:
            configure(params)
            self.__dict__["_rooflight_model_params"] = params

    return ConfiguredLlama


@functools.cache
def llama_class():
    """llama_cpp.Llama for loads that need nothing else on their model parameters (the
    probe's models, bench scripts), with safe_model_params applied."""
    return llama_with_params(safe_model_params)


if __name__ == "__main__":
    main()
