"""`rooflight rpc-server` and `rooflight remotes`, and the --rpc option (issue 20).

rpc-server starts llama.cpp's RPC server (the RPC build of packaging/build_llama_rpc.sh)
on a helper machine, bound to 127.0.0.1 unless told otherwise; remotes lists the servers
it is told about with their devices and memory, or says in one sentence which one does
not answer. --rpc HOST:PORT[,HOST:PORT...] on estimate, chat and bench plans (and loads)
with layers on those servers.
"""

from __future__ import annotations

import os
import sys

from rooflight.commands.common import add_rpc_option, emit_json, positive_int  # noqa: F401 (re-exported)
from rooflight.errors import BadInputError
from rooflight.hardware.limits import cpu_counts


def endpoints_of(text: str) -> list[str]:
    from rooflight.hardware.profile_io import parse_endpoint

    eps = [parse_endpoint(t, "--rpc") for t in text.split(",") if t.strip()]
    if not eps:
        raise BadInputError('--rpc needs at least one "host:port".')
    if len(set(eps)) != len(eps):
        raise BadInputError("--rpc lists a server twice.")
    return eps


def remotes_from_args(args) -> tuple:
    """The --rpc servers as RemoteMachines, asked for their memory, with the RPC build
    chosen for this process (before anything loads llama.cpp)."""
    if not getattr(args, "rpc", None):
        return ()
    if args.link_gbps <= 0:
        raise BadInputError("--link-gbps must be more than 0.")
    from rooflight.hardware.cpu import detect_cpu
    from rooflight.runtime import rpc

    endpoints = endpoints_of(args.rpc)
    rpc.use_rpc_build()
    rtt = {ep: rpc.check_reachable(ep) * 1000 for ep in endpoints}
    devices = rpc.query_servers(endpoints)
    cpu, _ = detect_cpu()
    return rpc.remotes_from_servers(devices, cpu, link_gbps=args.link_gbps, rtt_ms=rtt)


def cmd_rpc_server(args) -> int:
    from rooflight.runtime import rpc

    build = rpc.require_build()
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: binding to {args.host}. {rpc.SECURITY_NOTE}", file=sys.stderr)
    # llama.cpp's own default is half of hardware_concurrency(): the host's CPUs, whatever
    # the affinity or a container's quota allows, and one thread on a 2-vCPU VM
    threads = args.threads or cpu_counts()[0]
    cmd, env = rpc.server_command(build, host=args.host, port=args.port, threads=threads,
                                  device=args.device, cache=args.cache)
    print(f"llama.cpp RPC server on {args.host}:{args.port} (Ctrl-C stops it). {rpc.SECURITY_NOTE}",
          file=sys.stderr)
    sys.stderr.flush()
    os.execve(cmd[0], cmd, env)  # the server replaces this process: signals reach it directly
    return 0  # not reached


def cmd_remotes(args) -> int:
    from rooflight.runtime import rpc

    endpoints = endpoints_of(",".join(args.endpoints))
    rtt = {ep: rpc.check_reachable(ep) * 1000 for ep in endpoints}  # one sentence if one is down
    devices = rpc.query_servers(endpoints)
    if args.json:
        emit_json({"servers": [
            {"endpoint": ep, "connect_ms": round(rtt[ep], 3),
             "devices": [{"index": d.index, "free_bytes": d.free_bytes, "total_bytes": d.total_bytes}
                         for d in devices if d.endpoint == ep]}
            for ep in endpoints]})
        return 0
    for ep in endpoints:
        mine = [d for d in devices if d.endpoint == ep]
        print(f"{ep}: reachable ({rtt[ep]:.2f} ms to connect), {len(mine)} device(s)")
        for d in mine:
            print(f"  device {d.index}: {d.free_bytes / 1e9:.1f} GB free of {d.total_bytes / 1e9:.1f} GB")
    print(f"note: {rpc.SECURITY_NOTE}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("rpc-server", help="start llama.cpp's RPC server, to lend this machine's "
                              "devices to another running Rooflight (trusted networks only)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; another address exposes an unauthenticated server)")
    p.add_argument("--port", type=positive_int, default=50052)
    p.add_argument("--threads", type=positive_int,
                   help="CPU threads of the server (default: the physical cores this process may use)")
    p.add_argument("--device", help="comma-separated llama.cpp devices to serve (default: all GPUs, else the CPU)")
    p.add_argument("--cache", action="store_true", help="cache received tensors on disk (faster reloads)")
    p.set_defaults(func=cmd_rpc_server)

    p = subparsers.add_parser("remotes", help="list llama.cpp RPC servers with their devices and memory")
    p.add_argument("endpoints", nargs="+", metavar="HOST:PORT")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_remotes)
