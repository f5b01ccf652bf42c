"""Cold start of `rooflight rank --json` (the whole catalog) beside a bare Python start.

    python bench/rank_start.py [--rounds 5] [--hardware FILE]

Each round starts fresh processes, interleaved so both see the same machine load, and
takes the wall time from spawning to exit:
- bare: `python -c pass` (the interpreter alone);
- rank: `python -m rooflight rank --json` (this machine detected, its bandwidth from the
        cache; with --hardware, that profile instead of detection).
Prints the medians, rank - bare and rank / bare, and the CPU time of the rank process.
Plus the first start on a new install: an empty spec cache (catalog/spec_cache.py), so
every catalog spec is built and the cache written; later starts restore them.
Target (issue 19): rank - bare <= 0.5 s. On a loaded machine the wall times stretch by the
load; the CPU time says what the work itself costs.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_S = 0.5


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {r.returncode}): {r.stderr.strip()[-400:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--hardware", metavar="FILE", help="rank for this profile instead of detecting")
    args = p.parse_args()
    bare_cmd = [sys.executable, "-c", "pass"]
    rank_cmd = [sys.executable, "-m", "rooflight", "rank", "--json"]
    if args.hardware:
        rank_cmd += ["--hardware", args.hardware]
    run(rank_cmd)  # the OS file cache and the bandwidth cache, once
    bare, rank, cpu = [], [], []
    for _ in range(args.rounds):
        bare.append(run(bare_cmd)[0])
        wall, used = run(rank_cmd)
        rank.append(wall)
        cpu.append(used)
    firsts = []
    for _ in range(2):
        with tempfile.TemporaryDirectory() as empty:
            import shutil

            from rooflight.hardware.bandwidth import cache_dir

            src = cache_dir() / "ram_bandwidth.json"  # a new install's spec cache, not a new machine
            if src.is_file():
                shutil.copy(src, empty)
            firsts.append(run(rank_cmd, {**os.environ, "ROOFLIGHT_CACHE_DIR": empty}))
    b, r = statistics.median(bare), statistics.median(rank)
    print(f"{'cold start to exit (s), ' + str(args.rounds) + ' rounds':<40}{'median':>8}{'min':>8}{'max':>8}")
    print(f"{'bare python -c pass':<40}{b:>8.2f}{min(bare):>8.2f}{max(bare):>8.2f}")
    print(f"{'rooflight rank --json':<40}{r:>8.2f}{min(rank):>8.2f}{max(rank):>8.2f}")
    print(f"{'  its CPU time (user + sys)':<40}{statistics.median(cpu):>8.2f}{min(cpu):>8.2f}{max(cpu):>8.2f}")
    fw = [w for w, _ in firsts]
    print(f"{'first start, empty spec cache (2 runs)':<40}{statistics.median(fw):>8.2f}{min(fw):>8.2f}{max(fw):>8.2f}")
    print(f"rank - bare: {r - b:.2f} s, rank / bare: {r / b:.1f}x; target rank - bare <= {TARGET_S:.1f} s: "
          f"{'met' if r - b <= TARGET_S else 'NOT met'}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
