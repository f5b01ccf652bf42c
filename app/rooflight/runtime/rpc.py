"""Run layers on other machines through llama.cpp's RPC backend (issue 20).

Why this module exists: PyPI's llama-cpp-python is built without GGML_RPC, and its
`Llama()` has no parameter for RPC servers. llama.cpp itself adds them to ggml's backend
registry (common/arg.cpp add_rpc_devices: `ggml_backend_rpc_add_server`, then
`ggml_backend_register`), after which a model load's default device selection puts them
first in its device list. So Rooflight:
  1. uses an RPC-enabled build of the same llama.cpp that llama-cpp-python vendors
     (packaging/build_llama_rpc.sh) by pointing llama-cpp-python at it with
     LLAMA_CPP_LIB_PATH before `llama_cpp` is imported (use_rpc_build);
  2. asks each server, in a child process, how many devices it has and their memory
     (query_servers: a server speaking another protocol version makes ggml abort, which
     must not take the app down);
  3. registers the servers in this process through ctypes (connect), then loads as usual.

Security: llama.cpp's rpc-server has no authentication and runs whatever graph it is sent:
never expose one to an untrusted network (SECURITY_NOTE; `rooflight rpc-server` binds to
127.0.0.1 unless told otherwise).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from rooflight.errors import OperationFailedError
from rooflight.hardware.profile import CPUInfo, RemoteMachine

BUILD_DIR_ENV = "ROOFLIGHT_LLAMA_RPC_DIR"
LIB_PATH_ENV = "LLAMA_CPP_LIB_PATH"  # read by llama-cpp-python when it loads libllama
DEFAULT_PORT = 50052  # llama.cpp rpc-server's default
SERVER_BINARY = "ggml-rpc-server"
SECURITY_NOTE = ("llama.cpp's RPC server has no authentication and executes what it is sent: "
                 "run it only on a network you trust (bind it to 127.0.0.1, or to a private "
                 "interface behind a firewall), never on one reachable from the internet.")


class RemoteError(OperationFailedError):
    """An RPC server that cannot be used, in one sentence."""


def llama_cpp_version() -> str:
    return importlib.metadata.version("llama-cpp-python")


def default_build_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rooflight" / f"llama-rpc-{llama_cpp_version()}"


def find_build() -> Path | None:
    """The RPC-enabled llama.cpp build for the installed llama-cpp-python, if built."""
    d = Path(os.environ.get(BUILD_DIR_ENV) or default_build_dir())
    complete = (d / "bin" / SERVER_BINARY).is_file() and any((d / "lib").glob("libggml-rpc.*"))
    return d if complete else None


def build_command() -> str:
    return "bash packaging/build_llama_rpc.sh   (from a Rooflight checkout; needs cmake and a C++ compiler)"


def require_build() -> Path:
    d = find_build()
    if d is None:
        raise RemoteError("This llama-cpp-python build has no RPC backend; build one for it with: "
                          + build_command() + ".")
    return d


def check_reachable(endpoint: str, timeout: float = 3.0) -> float:
    """Seconds a TCP connection to the server took (about one round trip); RemoteError
    with one sentence when nothing answers there."""
    host, _, port = endpoint.rpartition(":")
    t0 = time.perf_counter()
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return time.perf_counter() - t0
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RemoteError(f"No RPC server answers at {endpoint} ({reason}); start one there with "
                          f"`rooflight rpc-server` and check the address and firewall.") from None


def server_command(build: Path, *, host: str, port: int, threads: int | None = None,
                   device: str | None = None, cache: bool = False) -> tuple[list[str], dict[str, str]]:
    """The rpc-server command line and environment (its libraries are the build's)."""
    cmd = [str(build / "bin" / SERVER_BINARY), "--host", host, "--port", str(port)]
    if threads:
        cmd += ["--threads", str(threads)]
    if device:
        cmd += ["--device", device]
    if cache:
        cmd.append("--cache")
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(
        [str(build / "lib"), *filter(None, [os.environ.get("LD_LIBRARY_PATH")])]))
    return cmd, env


def start_server(port: int, *, host: str = "127.0.0.1", threads: int | None = None,
                 timeout: float = 20.0, debug_log: IO[str] | None = None) -> subprocess.Popen:
    """Start an rpc-server in the background and wait until it accepts connections; the
    caller stops it (stop_server). For tests, benchmarks and a helper started by hand.
    debug_log: an open file that gets the server's log of every command it serves
    (GGML_RPC_DEBUG=1; bench/rpc_split.py --count-bytes reads it)."""
    cmd, env = server_command(require_build(), host=host, port=port, threads=threads)
    if debug_log is not None:
        env["GGML_RPC_DEBUG"] = "1"
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL if debug_log is None else debug_log,
                            stderr=subprocess.PIPE if debug_log is None else subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace").strip().splitlines() if proc.stderr else []
            raise RemoteError(f"The RPC server on port {port} exited at once ({(err or ['no output'])[-1]}).")
        try:
            check_reachable(f"{host}:{port}", timeout=0.5)
            return proc
        except RemoteError:
            if time.monotonic() > deadline:
                stop_server(proc)
                raise
            time.sleep(0.1)


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr:
        proc.stderr.close()


@dataclass(frozen=True)
class ServerDevice:
    endpoint: str
    index: int  # device number on that server
    free_bytes: int
    total_bytes: int


def query_servers(endpoints: list[str], timeout: float = 30.0) -> list[ServerDevice]:
    """The devices each server offers and their memory, asked in a child process."""
    build = require_build()
    for ep in endpoints:
        check_reachable(ep)
    env = dict(os.environ, **{LIB_PATH_ENV: str(build / "lib")})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rooflight.runtime.rpc", *endpoints],
            capture_output=True, text=True, timeout=timeout, env=env,
        )
    except subprocess.TimeoutExpired:
        raise RemoteError(f"The RPC servers {', '.join(endpoints)} did not answer within "
                          f"{timeout:.0f} s.") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RemoteError(f"Could not talk to the RPC servers {', '.join(endpoints)} ({last}); a "
                          "server of another llama.cpp version speaks another protocol.")
    return [ServerDevice(**d) for d in json.loads(proc.stdout)]


def remotes_from_servers(
    devices: list[ServerDevice], local_cpu: CPUInfo, *, link_gbps: float, rtt_ms: dict[str, float],
) -> tuple[RemoteMachine, ...]:
    """Remote machines as the servers describe themselves. The RPC protocol reports only
    each device's memory, not what it is, so a server is planned as a CPU like this
    machine's with the memory it reports (on Linux a CPU server reports all RAM as free,
    as llama.cpp then splits by it). A GPU server is described in a profile's remotes."""
    by_endpoint: dict[str, list[ServerDevice]] = {}
    for d in devices:
        by_endpoint.setdefault(d.endpoint, []).append(d)
    out = []
    for ep, devs in by_endpoint.items():
        total = sum(d.total_bytes for d in devs)
        free = sum(d.free_bytes for d in devs)
        cpu = replace(local_cpu, ram_total_bytes=total, ram_available_bytes=min(free, total))
        out.append(RemoteMachine(endpoint=ep, name=ep, cpu=cpu, backend="cpu", link_gbps=link_gbps,
                                 rtt_ms=rtt_ms.get(ep, 0.5)))
    return tuple(out)


def use_rpc_build() -> Path:
    """Make this process load llama.cpp from the RPC build. Must run before `llama_cpp`
    is imported; afterwards it only checks that the loaded build is that one."""
    build = require_build()
    lib = str(build / "lib")
    if "llama_cpp" in sys.modules:
        if os.environ.get(LIB_PATH_ENV) != lib:
            raise RemoteError("llama.cpp was already loaded without RPC in this process; start "
                              "Rooflight again with the remote machines configured.")
        return build
    os.environ[LIB_PATH_ENV] = lib
    return build


_connected: set[str] = set()


def _ggml(build: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(build / "lib" / "libggml.so"), mode=ctypes.RTLD_GLOBAL)
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    lib.ggml_backend_reg_by_name.argtypes, lib.ggml_backend_reg_by_name.restype = [cp], vp
    lib.ggml_backend_reg_get_proc_address.argtypes = [vp, cp]
    lib.ggml_backend_reg_get_proc_address.restype = vp
    lib.ggml_backend_register.argtypes, lib.ggml_backend_register.restype = [vp], None
    lib.ggml_backend_reg_dev_count.argtypes, lib.ggml_backend_reg_dev_count.restype = [vp], ctypes.c_size_t
    lib.ggml_backend_reg_dev_get.argtypes, lib.ggml_backend_reg_dev_get.restype = [vp, ctypes.c_size_t], vp
    lib.ggml_backend_dev_memory.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    lib.ggml_backend_dev_memory.restype = None
    return lib


def _add_server(lib: ctypes.CDLL, endpoint: str) -> int:
    """Register one server in ggml's registry; the reg handle (0: it has no devices)."""
    rpc = lib.ggml_backend_reg_by_name(b"RPC")
    if not rpc:
        raise RemoteError("The loaded llama.cpp has no RPC backend; rebuild it with: " + build_command() + ".")
    addr = lib.ggml_backend_reg_get_proc_address(rpc, b"ggml_backend_rpc_add_server")
    add = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)(addr)
    return add(endpoint.encode()) or 0


def connect(endpoints: list[str]) -> None:
    """Add the servers to this process's llama.cpp, once each, in order (their devices
    become rpc0, rpc1, ... of the next model load). Call use_rpc_build() first."""
    build = use_rpc_build()
    import llama_cpp  # noqa: F401 - loads libllama (and libggml) from the RPC build

    lib = _ggml(build)
    for ep in endpoints:
        if ep in _connected:
            continue
        check_reachable(ep)
        reg = _add_server(lib, ep)
        if not reg:
            raise RemoteError(f"The RPC server at {ep} offers no device.")
        lib.ggml_backend_register(reg)
        _connected.add(ep)


def _query_here(endpoints: list[str]) -> list[dict]:
    """In the child process: register nothing, just ask each server."""
    build = Path(os.environ[LIB_PATH_ENV]).parent
    lib = _ggml(build)
    out = []
    for ep in endpoints:
        reg = _add_server(lib, ep)
        n = lib.ggml_backend_reg_dev_count(reg) if reg else 0
        for i in range(n):
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            lib.ggml_backend_dev_memory(lib.ggml_backend_reg_dev_get(reg, i), ctypes.byref(free), ctypes.byref(total))
            out.append({"endpoint": ep, "index": i, "free_bytes": free.value, "total_bytes": total.value})
    return out


if __name__ == "__main__":  # the child process of query_servers
    print(json.dumps(_query_here(sys.argv[1:])))
