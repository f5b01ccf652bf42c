"""`rooflight monitor`: a live line per sample (RAM, CPU, each GPU) until Ctrl-C or --count.

With --json every sample is one JSON object on its own line (JSON Lines), so a script can
read the stream as it comes; the fields are Sample.to_dict()'s (README "Monitor, stress
test and plots").
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import time

from rooflight.commands.common import positive_int

GB = 1e9


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0.1 <= value <= 3600:
        raise argparse.ArgumentTypeError("expected an interval between 0.1 and 3600 seconds")
    return value


def register(subparsers) -> None:
    p = subparsers.add_parser("monitor", help="watch RAM, CPU and GPUs live (Ctrl-C stops)")
    p.add_argument("--interval", type=_interval, default=1.0, metavar="S", help="seconds between samples (default 1)")
    p.add_argument("--count", type=positive_int, metavar="N", help="stop after N samples (default: until Ctrl-C)")
    p.add_argument("--json", action="store_true", help="one JSON object per sample, one per line")
    p.set_defaults(func=cmd_monitor)


def _opt(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def format_sample(s) -> str:
    """One terminal line: time, RAM, CPU, then per GPU memory / load / power / temperature,
    then the model's rates when one reported them."""
    parts = [
        time.strftime("%H:%M:%S", time.localtime(s.time)),
        f"RAM {s.ram_used_bytes / GB:5.1f}/{s.ram_total_bytes / GB:.1f} GB",
        f"CPU {s.cpu_percent:5.1f}%",
    ]
    for g in s.gpus:
        vram = (f"{g.vram_used_bytes / GB:.1f}/{g.vram_total_bytes / GB:.1f} GB"
                if g.vram_used_bytes is not None and g.vram_total_bytes else "- GB")
        parts.append(
            f"GPU{g.index} {vram} {_opt(g.util_percent, '{:.0f}%')} "
            f"{_opt(g.power_watts, '{:.0f} W')} {_opt(g.temperature_c, '{:.0f}°C')}"
        )
    if s.decode_tok_s is not None:
        parts.append(f"decode {s.decode_tok_s:.1f} tok/s")
    if s.prompt_tok_s is not None:
        parts.append(f"prompt {s.prompt_tok_s:.1f} tok/s")
    return "  ".join(parts)


def cmd_monitor(args) -> int:
    from rooflight.hardware.monitor import Monitor

    # the monitor thread only queues samples; printing happens here, on the main thread,
    # where Ctrl-C (KeyboardInterrupt) arrives
    inbox: queue.Queue = queue.Queue()
    monitor = Monitor(interval_s=args.interval, capacity=8)
    monitor.subscribe(inbox.put)
    shown = 0
    wait_s = max(10.0, 3 * args.interval)
    monitor.start()
    try:
        while args.count is None or shown < args.count:
            sample = inbox.get(timeout=wait_s)
            if args.json:
                sys.stdout.write(json.dumps(sample.to_dict()) + "\n")
                sys.stdout.flush()
            else:
                if shown == 0:  # name the GPUs once; the lines then say GPU0, GPU1...
                    for g in sample.gpus:
                        print(f"GPU{g.index}: {g.name}", file=sys.stderr)
                print(format_sample(sample), flush=True)
            shown += 1
    except KeyboardInterrupt:
        print("", file=sys.stderr)
    except queue.Empty:
        from rooflight.errors import OperationFailedError

        raise OperationFailedError("The monitor stopped sampling; run with --debug to see why.") from None
    finally:
        monitor.stop()
    return 0
