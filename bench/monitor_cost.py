"""What the live monitor costs: CPU time of its sampling thread over its wall time.

    .venv/bin/python bench/monitor_cost.py [--seconds 10] [--interval 0.5]

Runs a Monitor with this machine's real samplers (psutil, and NVML when an NVIDIA driver
is present) and prints the sampling thread's CPU time (time.thread_time, measured inside
the thread, so other load does not count), the share of one core, and the time per
sample. The issue's budget is under 1%.
"""

from __future__ import annotations

import argparse
import time

from rooflight.hardware.monitor import Monitor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=0.5)
    args = ap.parse_args()

    monitor = Monitor(interval_s=args.interval, capacity=10_000)
    with monitor:
        time.sleep(args.seconds)
    samples = monitor.samples()
    n = len(samples)
    gpus = len(samples[-1].gpus) if samples else 0
    print(f"{n} samples in {monitor.run_seconds:.2f} s at {1 / args.interval:g} Hz, {gpus} NVIDIA GPU(s) read")
    print(f"sampling thread CPU time: {monitor.cpu_seconds * 1e3:.1f} ms"
          f" ({monitor.cpu_seconds / max(n, 1) * 1e3:.3f} ms per sample)")
    print(f"CPU cost: {monitor.cpu_fraction:.3%} of one core (budget: under 1%)")


if __name__ == "__main__":
    main()
