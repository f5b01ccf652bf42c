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
(kept in the cache folder, and for the life of the process). Where it crashes, the AMX
buffer type is taken out of the list of extra buffer types llama.cpp places weights in
(drop_amx_buffer), so the weights it would have held go where they go on a CPU without AMX:
llama.cpp's CPU repack buffer for the types its kernels repack (Q4_0, Q4_K, IQ4_NL...), plain
buffers for the rest. A second child tries that first (it writes into ggml's memory, so it is
proven on the build before this process relies on it). Where it cannot be done, every load
passes `use_extra_bufts = false` (llama.h), which turns off the repack buffer too. A build without
AMX costs nothing here but one look at its system info: no child is started.
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
from collections.abc import Callable
from pathlib import Path

from rooflight.atomic import write_text_atomic

CACHE_FILE = "amx_check.json"
# a child that writes and loads a 1 MB model and runs 36 tokens takes about 0.3 s here; one
# that has not finished in this long is hung, not slow, and counts as a crash
CHECK_TIMEOUT_S = 60.0
NOTICE = ("The AMX kernels of this llama.cpp build crash on this machine (llama.cpp issue #20824), so "
          "Rooflight loads models without them: llama.cpp's other CPU kernels run, slower at prompts than "
          "working AMX would be.")
AMX_BUFFER = "AMX"  # ggml_backend_amx_buffer_type's name (ggml-cpu/amx/amx.cpp)
GGML_BACKEND_DEVICE_TYPE_CPU = 0  # ggml-backend.h enum ggml_backend_dev_type
_lock = threading.RLock()
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


@functools.cache
def _cpu() -> tuple[str, tuple[str, ...] | None]:
    """(this CPU's name and flags as one string, its flags; None where /proc/cpuinfo is not there)."""
    from rooflight.hardware.cpu import parse_cpuinfo

    try:
        name, isa = parse_cpuinfo(Path("/proc/cpuinfo").read_text(errors="replace"))
    except OSError:
        return platform.processor(), None
    return f"{name}|{','.join(isa)}", tuple(isa)


def _key() -> str:
    """The build and machine a verdict holds for: another build, CPU or kernel asks again."""
    from rooflight.runtime.build import loaded_llama_build

    cpu = _cpu()[0]
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


WITHOUT_AMX = "--without-amx"  # the second child's flag: AMX dropped from the list first


def check_command(model_path: Path, without_amx: bool = False) -> list[str]:
    """How to start the child: this Python with this module, or the frozen app itself
    (packaging/rooflight_main.py dispatches the flag)."""
    flags = [WITHOUT_AMX] if without_amx else []
    if getattr(sys, "frozen", False):
        return [sys.executable, "--amx-check", *flags, str(model_path)]
    return [sys.executable, "-m", "rooflight.runtime.amx", *flags, str(model_path)]


def main() -> None:
    """The child: a tiny model through a 32-token prompt (the tile or repacked GEMM path) and
    a few tokens of decode (the one-row path); "ok" if it lived. Plain: Q8_0, every matrix in
    the AMX buffer. With WITHOUT_AMX: AMX dropped from the list first, then Q4_0, which the
    repack buffer takes where this CPU's build has one (exit 3 when the list cannot be reached)."""
    import llama_cpp

    from rooflight.gguf.synthetic import write_model

    without_amx = WITHOUT_AMX in sys.argv[1:]
    if without_amx and not drop_amx_buffer():
        sys.exit(3)
    path = write_model(sys.argv[-1], n_layer=1, n_embd=256, n_head=4, n_head_kv=4, n_ff=512,
                       ftype="Q4_0" if without_amx else "Q8_0", pure=True)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=128, n_threads=2, n_gpu_layers=0, verbose=False)
    llm.eval([3 + i for i in range(32)])
    for i in range(4):
        llm.eval([40 + i])
    print("ok", flush=True)
    sys.exit(0)


def killed(returncode: int) -> bool:
    """Whether a child's exit status says the CPU stopped it rather than Python."""
    return returncode < 0 or returncode in _WINDOWS_FAULTS


def run_check(without_amx: bool = False) -> bool | None:
    """Run the child once: True when its kernels ran, False when it was killed by a signal
    (the crash), hung, or (without_amx) could not drop the AMX buffer; None when it could not
    run at all (nothing learnt)."""
    with tempfile.TemporaryDirectory(prefix="rooflight-amx-") as d:
        try:
            done = subprocess.run(check_command(Path(d) / "amx.gguf", without_amx), capture_output=True, text=True,
                                  timeout=CHECK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return False
        except OSError:
            return None
    if killed(done.returncode) or (without_amx and done.returncode == 3):
        return False
    return True if done.returncode == 0 and done.stdout.strip().endswith("ok") else None


def _verdict(key: str, check) -> bool | None:
    """The kept verdict for key, else check()'s, kept when it says something."""
    ok = _cached(key)
    if ok is None:
        ok = check()
        if ok is not None:
            _remember(key, ok)
    return ok


@functools.cache
def amx_crashes() -> bool:
    """Whether this build's AMX kernels crash on this machine (False where it has none).
    The kept verdict is read first: asking the build (importing llama_cpp, ~0.15 s) is left
    to the first time, so a detection on an AMX machine does not pay it every start."""
    with _lock:
        # no AMX kernels: nothing to crash
        ok = _verdict(_key(), run_check) if has_amx_kernels() else True
    return ok is False


@functools.cache
def has_amx_kernels() -> bool:
    """build_has_amx, kept with the verdicts: asked of the build once, and not at all on a
    CPU whose flags show no AMX (no build runs AMX kernels there)."""
    isa = _cpu()[1]
    if isa is not None and "amx_int8" not in isa:
        return False
    with _lock:
        return _verdict(_key() + "|kernels", build_has_amx) is True


def amx_weights_here() -> bool:
    """Whether loads here keep weights in the AMX buffer: the build has AMX kernels and they
    run (hardware.profile.CPUInfo.amx_weights; estimate/amx_layout.py prices its layout)."""
    return has_amx_kernels() and not amx_crashes()


@functools.cache
def runs_without_amx() -> bool:
    """Whether a child that dropped the AMX buffer (drop_amx_buffer) then ran a model: asked
    only where the AMX kernels crash, kept like amx_crashes' verdict."""
    with _lock:
        return _verdict(_key() + "|" + WITHOUT_AMX, lambda: run_check(without_amx=True)) is True


def _extra_buffer_list() -> tuple[int, list[int], Callable[[int], bytes]] | None:
    """(address of the NULL-terminated array of extra buffer types ggml's CPU device hands
    llama.cpp, the buffer types in it, ggml_backend_buft_name), or None where this build
    does not expose it."""
    import ctypes

    from rooflight.runtime.ggml_api import ggml_function

    ptr = ctypes.c_void_p
    by_type = ggml_function("ggml_backend_dev_by_type", ptr, [ctypes.c_int])
    dev_reg = ggml_function("ggml_backend_dev_backend_reg", ptr, [ptr])
    proc = ggml_function("ggml_backend_reg_get_proc_address", ptr, [ptr, ctypes.c_char_p])
    name = ggml_function("ggml_backend_buft_name", ctypes.c_char_p, [ptr])
    if None in (by_type, dev_reg, proc, name):
        return None
    dev = by_type(GGML_BACKEND_DEVICE_TYPE_CPU)
    address = proc(dev_reg(dev), b"ggml_backend_dev_get_extra_bufts") if dev else None
    if not address:
        return None
    array = ctypes.CFUNCTYPE(ptr, ptr)(address)(dev)
    if not array:
        return None
    entries: list[int] = []
    while (entry := ptr.from_address(array + len(entries) * ctypes.sizeof(ptr)).value):
        entries.append(entry)
    return array, entries, name


def extra_buffer_names() -> list[str] | None:
    """The extra buffer types llama.cpp places weights in on the CPU, in its order of
    preference (e.g. ["AMX", "CPU_REPACK"]), or None where this build does not tell."""
    with _lock:
        found = _extra_buffer_list()
    return None if found is None else [found[2](b).decode() for b in found[1]]


@functools.cache
def drop_amx_buffer() -> bool:
    """Take the AMX buffer type out of the extra buffer types llama.cpp places weights in,
    keeping the others in order; True when that list now holds no AMX (also where it never
    did), False where this build does not expose it.

    Why not llama.h's switch: use_extra_bufts = false turns off every extra buffer type, the
    CPU repack one too, whose kernels every CPU without AMX runs (on this project's AMX VM,
    keeping it made a 1B Q4_0 model's prompts x1.53-1.59 and decode x1.21-1.23 as fast as
    without it, a 300M Q4_K_M's prompts x0.74-0.76 and decode x1.10-1.13: bench/amx_cost.py,
    README "Intel CPUs with AMX"). The array changed is
    the copy ggml's CPU backend hands llama.cpp's model loader through its registry
    (ggml-cpu.cpp ggml_backend_cpu_device_get_extra_buffers_type: a static, NULL-terminated
    vector, read at each load by make_cpu_buft_list); the backend's own checks use the
    original list. Process-wide, for every load after it."""
    import ctypes

    with _lock:
        found = _extra_buffer_list()
        if found is None:
            return False
        array, entries, name = found
        kept = [b for b in entries if name(b).decode() != AMX_BUFFER]
        if len(kept) < len(entries):
            slots = (ctypes.c_void_p * (len(entries) + 1)).from_address(array)
            for i in range(len(entries) + 1):
                slots[i] = kept[i] if i < len(kept) else None
        return True


def loads_use_extra_buffers() -> bool:
    """Whether loads keep llama.cpp's extra buffer types (the repack one at least): False
    only where the AMX kernels crash and the second child could not run without them. Asks
    the verdicts only; prepare_loads makes it so in this process."""
    return not amx_crashes() or runs_without_amx()


def prepare_loads() -> bool:
    """Make this process's loads safe (the AMX buffer dropped where its kernels crash and the
    second child ran without it); whether they keep the extra buffer types."""
    return loads_use_extra_buffers() and (not amx_crashes() or drop_amx_buffer())


def safe_model_params(params) -> None:
    """Set on llama_model_params before a load: keep weights out of the AMX buffer where
    its kernels crash (drop_amx_buffer; use_extra_bufts off where that was not proven safe)."""
    if not prepare_loads():
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
