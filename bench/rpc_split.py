"""Plan vs llama.cpp for a model split across this CPU and two RPC servers on 127.0.0.1.

Starts two llama.cpp rpc-servers (the RPC build of packaging/build_llama_rpc.sh) on
loopback ports, measures the loopback link (bandwidth of a 64 MiB transfer, median round
trip of small messages) and gives those to the planner as the remotes' link, loads a
generated model with layers on the local CPU and both servers exactly as planned, and
prints, per device, llama.cpp's reported buffers beside the plan, then predicted vs
measured prefill and decode. Every server it starts is stopped.

    python bench/rpc_split.py [--n-layer 8] [--n-embd 512] [--json]

(The servers share this machine's cores with the main process, so the speeds say how
well the plan prices RPC's overheads, not what two real machines would do.)
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

_DEVICE_RE = re.compile(r"^RPC(\d+)\[(.+)\]$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure_loopback(n_bytes: int = 64 << 20, pings: int = 200) -> tuple[float, float]:
    """(Gbit/s, round-trip ms) of TCP over 127.0.0.1, measured with a sink/echo thread."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            got = 0
            while got < n_bytes:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    return
                got += len(chunk)
            conn.sendall(b"k")
            for _ in range(pings):
                conn.sendall(conn.recv(1))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        block = b"\0" * (1 << 20)
        t0 = time.perf_counter()
        for _ in range(n_bytes >> 20):
            c.sendall(block)
        c.recv(1)
        gbps = n_bytes * 8 / (time.perf_counter() - t0) / 1e9
        rtts = []
        for _ in range(pings):
            t0 = time.perf_counter()
            c.sendall(b"p")
            c.recv(1)
            rtts.append(time.perf_counter() - t0)
    t.join(5)
    srv.close()
    return gbps, statistics.median(rtts) * 1000


def device_names(hardware) -> dict[tuple[str, int], str]:
    """(endpoint, device number on that server) -> rpcN, in Rooflight's order."""
    from rooflight.hardware.remote import remote_devices

    out, seen = {}, {}
    for d in remote_devices(hardware):
        ep = d.machine.endpoint
        out[(ep, seen.get(ep, 0))] = d.name
        seen[ep] = seen.get(ep, 0) + 1
    return out


def reported_by_device(buffers, names: dict[tuple[str, int], str]) -> dict[str, dict[str, int]]:
    """llama.cpp's buffers (keyed RPC0[127.0.0.1:50052], CPU, CPU_Mapped...) per plan device."""
    out: dict[str, dict[str, int]] = {}
    for kind in ("model", "kv", "compute", "output"):
        for buf, n in getattr(buffers, kind).items():
            m = _DEVICE_RE.match(buf)
            dev = names.get((m.group(2), int(m.group(1))), buf) if m else "cpu"
            if kind == "output":
                kind_key = "compute"  # the plan counts the output buffer with the CPU's compute
            else:
                kind_key = kind
            slot = out.setdefault(dev, {"model": 0, "kv": 0, "compute": 0})
            slot[kind_key] += n
    return out


def run(n_layer: int = 8, n_embd: int = 512, n_ctx: int = 1024, prompt_tokens: int = 256,
        gen_tokens: int = 32, threads: int = 1, cpu_blocks: int | None = None, flash_attn: str = "on",
        n_ubatch: int = 512, n_ff: int | None = None, n_head_kv: int = 4, count_bytes: bool = False) -> dict:
    from rooflight.runtime import rpc

    rpc.use_rpc_build()  # before llama_cpp is imported
    from rooflight.estimate import Wishes
    from rooflight.gguf.synthetic import write_model
    from rooflight.hardware.cpu import detect_cpu
    from rooflight.runtime.engine import load_engine
    from rooflight.runtime.loader import plan_load
    from rooflight.runtime.measure import _prompt

    gbps, rtt_ms = measure_loopback()
    ports = [free_port(), free_port()]
    logs = [tempfile.TemporaryFile("w+") for _ in ports] if count_bytes else [None, None]
    servers = [rpc.start_server(p, threads=threads, debug_log=log) for p, log in zip(ports, logs, strict=True)]
    try:
        endpoints = [f"127.0.0.1:{p}" for p in ports]
        devices = rpc.query_servers(endpoints)
        cpu, _ = detect_cpu()
        remotes = rpc.remotes_from_servers(devices, cpu, link_gbps=gbps,
                                           rtt_ms={ep: rtt_ms for ep in endpoints})
        with tempfile.TemporaryDirectory() as tmp:
            path = write_model(Path(tmp) / "split.gguf", n_layer=n_layer, n_embd=n_embd, n_head=8, n_head_kv=n_head_kv,
                               n_ff=n_ff or 4 * n_embd, n_vocab=2000, context_length=4096, ftype="Q8_0")
            # by default a third of the blocks stay on this CPU, the rest split by the servers' memory
            n_gpu = n_layer + 1 - (n_layer // 3 if cpu_blocks is None else cpu_blocks)
            lp = plan_load(path, Wishes(n_ctx=n_ctx, n_gpu_layers=n_gpu, n_threads=threads, n_ubatch=n_ubatch,
                                        flash_attn=flash_attn, prompt_tokens=prompt_tokens, gen_tokens=gen_tokens),
                           remotes=remotes)
            engine = load_engine(lp, force=True, warmup=False)
            try:
                llm = engine.llm
                prompt = _prompt(llm, prompt_tokens)
                t0 = time.perf_counter()
                llm.eval(prompt)
                prefill = prompt_tokens / (time.perf_counter() - t0)
                token = llm.sample(temp=0.0)
                t0 = time.perf_counter()
                for _ in range(gen_tokens):
                    llm.eval([token])
                    token = llm.sample(temp=0.0)
                decode = gen_tokens / (time.perf_counter() - t0)
                reported = reported_by_device(engine.buffers, device_names(lp.hardware))
            finally:
                engine.close()
    finally:
        for s in servers:
            rpc.stop_server(s)
    est = lp.estimate
    sent = None
    if count_bytes:
        sent = bytes_sent_per_step(lp, [f"127.0.0.1:{p}" for p in ports], logs, prompt_tokens, gen_tokens)
    planned = {d.device: {"model": d.weights_bytes, "kv": d.kv_bytes, "compute": d.compute_bytes}
               for d in est.memory.devices}
    return {
        "link": {"gbps": round(gbps, 2), "rtt_ms": round(rtt_ms, 4)},
        "layer_devices": list(est.memory.layer_devices),
        "planned": planned,
        "reported": reported,
        "predicted": {"prefill_tok_s": est.performance.prefill_tok_s, "decode_tok_s": est.performance.decode_tok_s,
                      "network": est.performance.network},
        "measured": {"prefill_tok_s": prefill, "decode_tok_s": decode, "tokens_generated": gen_tokens},
        "bytes_sent": sent,
    }


_SET_RE = re.compile(r"^\[set_tensor\] buffer: (0x[0-9a-f]+|\(nil\)).*size: (\d+)")
_GET_RE = re.compile(r"^\[get_tensor\] .*size: (\d+)")


def server_steps(log: str) -> list[tuple[int, int]]:
    """(bytes sent to, bytes fetched from) a server for each graph it computed, from its
    GGML_RPC_DEBUG log: the set_tensor calls into the buffers later steps' inputs go to (the
    compute buffer; the weights are uploaded before the first step) before the computation,
    and the get_tensor calls after it."""
    events: list[tuple[str, str, int]] = []  # (set | get | compute, buffer, bytes)
    for line in log.splitlines():
        if m := _SET_RE.match(line):
            events.append(("set", m.group(1), int(m.group(2))))
        elif m := _GET_RE.match(line):
            events.append(("get", "", int(m.group(1))))
        elif line.startswith(("[graph_compute]", "[graph_recompute]")):
            events.append(("compute", "", 0))
    kinds = [e[0] for e in events]
    first = kinds.index("compute") if "compute" in kinds else len(events)
    step_buffers = {b for k, b, _ in events[first + 1:] if k == "set"}
    steps: list[tuple[int, int]] = []
    sent = fetched = 0
    computed = False
    for kind, buffer, n in events:
        if kind == "set" and buffer in step_buffers:
            if computed:  # the next step's inputs: the last step is complete
                steps.append((sent, fetched))
                sent = fetched = 0
                computed = False
            sent += n
        elif kind == "get" and computed:
            fetched += n
        elif kind == "compute":
            computed = True
    if computed:
        steps.append((sent, fetched))
    return steps


def bytes_sent_per_step(lp, endpoints: list[str], logs, prompt_tokens: int, gen_tokens: int) -> dict:
    """Per server: bytes sent and fetched for the prompt's step and the median decode step,
    counted from its log and as network.step_bytes prices them (the prompt is one micro-batch
    here)."""
    from rooflight.estimate.network import step_bytes

    names = device_names(lp.hardware)
    est, spec, hw, cfg = lp.estimate, lp.spec, lp.hardware, lp.config
    devices = tuple(est.memory.layer_devices)
    prompt = step_bytes(spec, hw, cfg, devices, prompt_tokens, prompt_tokens)
    decode = step_bytes(spec, hw, cfg, devices, 1, prompt_tokens + 1 + gen_tokens // 2)
    out = {}
    for ep, log in zip(endpoints, logs, strict=True):
        log.seek(0)
        steps = server_steps(log.read())
        log.close()
        dev = names[(ep, 0)]
        out[dev] = {
            "prompt": {"counted": list(steps[0]) if steps else None,
                       "planned": [prompt[0].get(dev, 0), prompt[1].get(dev, 0)]},
            "decode": {"counted": [statistics.median(s[k] for s in steps[1:]) for k in (0, 1)] if len(steps) > 1 else None,
                       "planned": [decode[0].get(dev, 0), decode[1].get(dev, 0)]},
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-layer", type=int, default=8)
    ap.add_argument("--n-embd", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-ctx", type=int, default=1024)
    ap.add_argument("--n-ubatch", type=int, default=512)
    ap.add_argument("--flash-attn", choices=("on", "off"), default="on")
    ap.add_argument("--count-bytes", action="store_true",
                    help="count what each server is sent per step (its GGML_RPC_DEBUG log) beside the plan's network bytes")
    ap.add_argument("--cpu-blocks", type=int, default=None,
                    help="repeating blocks this CPU runs (default a third; 0: every layer on the servers)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    doc = run(n_layer=args.n_layer, n_embd=args.n_embd, n_ctx=args.n_ctx, threads=args.threads,
              cpu_blocks=args.cpu_blocks, flash_attn=args.flash_attn, n_ubatch=args.n_ubatch,
              count_bytes=args.count_bytes)
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        print()
        return 0
    print(f"loopback link: {doc['link']['gbps']:.1f} Gbit/s, round trip {doc['link']['rtt_ms']:.3f} ms")
    print(f"layers: {' '.join(doc['layer_devices'])}")
    print(f"{'device':<7}{'buffer':<9}{'planned MiB':>13}{'llama.cpp MiB':>15}{'ratio':>8}")
    for dev, plan in doc["planned"].items():
        rep = doc["reported"].get(dev, {})
        for kind in ("model", "kv", "compute"):
            p, r = plan[kind] / 2**20, rep.get(kind, 0) / 2**20
            ratio = f"{p / r:.3f}" if r else "-"
            print(f"{dev:<7}{kind:<9}{p:>13.2f}{r:>15.2f}{ratio:>8}")
    print("(cpu model: llama.cpp reports the mapped file range of the CPU's tensors, which spans any\n"
          " offloaded tensor stored between them; the plan counts the CPU's tensors themselves)")
    for dev, kinds in (doc["bytes_sent"] or {}).items():
        for kind, v in kinds.items():
            print(f"{dev} {kind} step: bytes (sent, fetched) counted {v['counted']}, planned {v['planned']}")
    pr, me = doc["predicted"], doc["measured"]
    print(f"prefill: predicted {pr['prefill_tok_s']:.1f} tok/s, measured {me['prefill_tok_s']:.1f} "
          f"(measured/predicted {me['prefill_tok_s'] / pr['prefill_tok_s']:.2f})")
    print(f"decode:  predicted {pr['decode_tok_s']:.1f} tok/s, measured {me['decode_tok_s']:.1f} "
          f"(measured/predicted {me['decode_tok_s'] / pr['decode_tok_s']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
