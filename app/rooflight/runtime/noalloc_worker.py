"""The child process of `estimate --confirm`: ask the installed llama.cpp what it would allocate.

Run as `python -m rooflight.runtime.noalloc_worker` with one JSON request on stdin
({"path": GGUF, "config": RunConfig.to_dict()}); prints one JSON answer on stdout. It loads
the model with `llama_model_params.no_alloc` ("only load metadata and simulate memory
allocations", llama.h) and without mmap, so llama.cpp places every tensor, sizes the KV
cache and reserves the compute graphs exactly as for a real load, but allocates no weight,
KV or compute buffer and reads no weight: the file may be a sparse copy of a remote header.

It runs in its own process because a no-alloc load can abort inside llama.cpp (a GGML_ASSERT
kills the process) or hang; the parent (runtime/confirm.py) gives it a deadline.

Where the sizes come from. With no_alloc, llama.cpp logs its model and KV buffers as
0.00 MiB (they are dummy buffers); the real figures are in llama_get_memory_breakdown(), a
C++ function returning std::map<buffer type, {model, context, compute}> by value. That is
read here through ctypes for the one ABI where its layout is known and checked: Linux with
libstdc++ on x86-64 (hidden return pointer first, then the context; libstdc++'s red-black
tree: header at +8, root at +16, node count at +40; node value at +32). Elsewhere the
answer says so and the parent falls back to the plan. The figures are cross-checked against
what the log does carry (the compute buffers and llama_model_size) before they are trusted.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import platform
import sys

ANSWER_PREFIX = "ROOFLIGHT-NOALLOC "  # marks the answer line: llama.cpp may print to stdout too
_BREAKDOWN_SYMBOL = "_Z26llama_get_memory_breakdownPK13llama_context"


def breakdown_abi_supported() -> bool:
    return sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")


def _io_read_chars() -> int | None:
    """Bytes this process has read through read() so far (Linux), to prove no weight was read."""
    try:
        with open("/proc/self/io", encoding="ascii") as f:
            for line in f:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _read_breakdown(llama_cpp, ctx_ptr) -> dict[str, dict[str, int]]:
    lib = llama_cpp.llama_cpp._lib
    fn = getattr(lib, _BREAKDOWN_SYMBOL)  # AttributeError: this build does not export it
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    name_fn = lib.ggml_backend_buft_name
    name_fn.restype = ctypes.c_char_p
    name_fn.argtypes = [ctypes.c_void_p]
    out = (ctypes.c_uint64 * 32)()  # std::map is 48 bytes; room to spare
    base = ctypes.addressof(out)
    if fn(base, ctx_ptr) != base:
        raise RuntimeError("llama_get_memory_breakdown did not return its result where expected")

    def u64(addr: int) -> int:
        return ctypes.c_uint64.from_address(addr).value

    count = u64(base + 40)
    if not 0 < count <= 64:
        raise RuntimeError(f"memory breakdown has an implausible {count} entries")
    result: dict[str, dict[str, int]] = {}
    stack, seen = [u64(base + 16)], 0
    while stack:
        node = stack.pop()
        if not node:
            continue
        seen += 1
        if seen > count:
            raise RuntimeError("memory breakdown tree has more nodes than it says")
        buft = u64(node + 32)
        raw = name_fn(buft) if buft else None
        name = raw.decode("ascii", errors="strict") if raw else ""
        if not name or not name.isprintable() or len(name) > 64:
            raise RuntimeError("memory breakdown names an unreadable buffer type")
        entry = result.setdefault(name, {"model": 0, "context": 0, "compute": 0})
        entry["model"] += u64(node + 40)
        entry["context"] += u64(node + 48)
        entry["compute"] += u64(node + 56)
        stack += [u64(node + 16), u64(node + 24)]
    if seen != count:
        raise RuntimeError(f"memory breakdown tree has {seen} nodes, not {count}")
    return result


def _llama_class(llama_cpp, overrides=None):
    class NoAllocLlama(llama_cpp.Llama):
        """Llama whose model parameters ask for a no-alloc load (set as __init__ builds them),
        with the plan's tensor overrides (MoE experts in RAM) where it has any."""

        @property
        def model_params(self):
            return self.__dict__["_noalloc_model_params"]

        @model_params.setter
        def model_params(self, params) -> None:
            params.no_alloc = True
            from rooflight.runtime import amx

            amx.safe_model_params(params)  # placed as the real load will place them
            if overrides is not None:
                overrides.apply(params)
            self.__dict__["_noalloc_model_params"] = params

    return NoAllocLlama


def _expert_overrides(config):
    """The runtime's tensor overrides for config.n_cpu_moe (the MoE issue's runtime), or None."""
    if not getattr(config, "n_cpu_moe", 0):
        return None
    from rooflight.runtime import engine

    make = getattr(engine, "expert_overrides", None)
    if make is None:
        raise RuntimeError("this runtime cannot keep MoE experts in RAM, so it cannot simulate n_cpu_moe")
    return make(config)


def _check(breakdown: dict[str, dict[str, int]], log_compute: dict[str, int], model_size: int) -> None:
    """Refuse figures that do not agree with what llama.cpp logged (a wrong ABI guess)."""
    weights = sum(v["model"] for v in breakdown.values())
    # up to twice the file: a tied output matrix converted for the CPU's kernels is loaded a
    # second time (runtime/confirm.tied_output_counted_twice), and it can be most of a small model
    if model_size and not model_size * 0.98 <= weights <= model_size * 2 + (64 << 20):
        raise RuntimeError(f"memory breakdown weights {weights} disagree with llama_model_size {model_size}")
    for name, logged in log_compute.items():
        got = breakdown.get(name, {}).get("compute", 0)
        if abs(got - logged) > 0.006 * 2**20:  # the log rounds to 0.01 MiB
            raise RuntimeError(f"memory breakdown compute for {name} ({got}) disagrees with the log ({logged})")


def run(request: dict) -> dict:
    import llama_cpp

    from rooflight.estimate.config import RunConfig
    from rooflight.runtime.device_map import load_kwargs
    from rooflight.runtime.llama_log import capture_llama_log, parse_buffers

    names = {f[0] for f in llama_cpp.llama_model_params._fields_}
    if "no_alloc" not in names:
        return {"ok": False, "unsupported": True,
                "reason": f"llama-cpp-python {llama_cpp.__version__} has no no-alloc model load"}
    if not breakdown_abi_supported():
        return {"ok": False, "unsupported": True,
                "reason": "reading llama.cpp's memory breakdown is supported on Linux x86-64 only"}
    fields = dict(request["config"])
    if fields.get("tensor_split") is not None:
        fields["tensor_split"] = tuple(fields["tensor_split"])
    known = set(RunConfig.__dataclass_fields__)
    config = RunConfig(**{k: v for k, v in fields.items() if k in known})
    kwargs = load_kwargs(config, request.get("gpu_bus_ids", []), request.get("backend", "cpu"))
    overrides = _expert_overrides(config)  # kept alive until the process ends
    from rooflight.runtime import amx

    amx.prepare_loads()  # now: its imports, children and cache file are no reads of the load's
    read_before = _io_read_chars()
    with capture_llama_log() as cap, contextlib.redirect_stderr(io.StringIO()):
        try:
            llm = _llama_class(llama_cpp, overrides)(model_path=request["path"], verbose=True, use_mmap=False,
                                                     **kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            lines = [ln.strip() for ln in cap.text.splitlines() if "error" in ln.lower() or "fail" in ln.lower()]
            return {"ok": False, "reason": "; ".join(lines[-2:])[:300] or str(exc)}
    read_after = _io_read_chars()
    logged = parse_buffers(cap.text)
    breakdown = _read_breakdown(llama_cpp, llm._ctx.ctx)
    model_size = int(llama_cpp.llama_model_size(llm._model.model))
    _check(breakdown, logged.compute, model_size)
    return {
        "ok": True,
        "buffers": breakdown,
        "output": logged.output,
        "model_size": model_size,
        "read_bytes_during_load": None if read_before is None or read_after is None else read_after - read_before,
        "llama_cpp_version": llama_cpp.__version__,
    }


def main() -> None:
    try:
        request = json.loads(sys.stdin.read())
        answer = run(request)
    except Exception as exc:  # one JSON answer whatever happens; the parent turns it into a sentence
        answer = {"ok": False, "reason": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write("\n" + ANSWER_PREFIX + json.dumps(answer) + "\n")
    sys.stdout.flush()
    # no destructors: freeing a no-alloc context is not what is being asked, and must not
    # turn a good answer into a crash
    os._exit(0)


if __name__ == "__main__":
    main()
