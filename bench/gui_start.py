"""Cold start of the desktop app to a usable window, beside a bare QApplication start.

    python bench/gui_start.py [--rounds 5]

Each round starts fresh processes (interleaved, so both see the same machine load) and
measures the wall time from spawning the process to its "ready" line:
- bare: import PySide6, create a QApplication, show an empty window, paint it;
- app:  `python -m rooflight.ui.app --quit-when-ready`: the window shown, this machine
        detected, the catalog ranked and the ranking painted in the table.
Plus one app start on a "new machine": an empty cache, so the RAM bandwidth is measured.
Runs offscreen unless a display is set; settings come from an empty data dir. Target
(issue 19): the app usable at most 1.0 s after the bare window (app - bare <= 1.0 s).
Wall times stretch with the machine's load; the ratio app / bare is printed beside.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_S = 1.0  # app - bare
BARE = (
    "from PySide6.QtWidgets import QApplication, QWidget\n"
    "app = QApplication([])\n"
    "w = QWidget(); w.resize(1280, 800); w.show()\n"
    "app.processEvents()\n"
    "print('ready', flush=True)\n"
)


def time_to_ready(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    _out, err = proc.communicate(timeout=60)
    if line.strip() != "ready" or proc.returncode != 0:
        raise SystemExit(f"{cmd[-1]} did not become ready (exit {proc.returncode}): {err.strip()[-400:]}")
    return elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    env = dict(os.environ)
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
    app_cmd = [sys.executable, "-m", "rooflight.ui.app", "--quit-when-ready"]
    bare_cmd = [sys.executable, "-c", BARE]
    bare, app = [], []
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as fresh_cache:
        env["ROOFLIGHT_DATA_DIR"] = data
        time_to_ready(app_cmd, env)  # warm the OS file cache and the bandwidth cache once
        for _ in range(args.rounds):
            bare.append(time_to_ready(bare_cmd, env))
            app.append(time_to_ready(app_cmd, env))
        first = time_to_ready(app_cmd, {**env, "ROOFLIGHT_CACHE_DIR": fresh_cache})

    def row(name: str, xs: list[float]) -> str:
        return f"{name:<44}{statistics.median(xs):>8.2f}{min(xs):>8.2f}{max(xs):>8.2f}"

    print(f"{'start to usable window (s), ' + str(args.rounds) + ' rounds':<44}{'median':>8}{'min':>8}{'max':>8}")
    print(row("bare QApplication + empty window", bare))
    print(row("Rooflight: detected + ranked + painted", app))
    print(row("Rooflight, new machine (bandwidth measured)", [first]))
    med, base = statistics.median(app), statistics.median(bare)
    print(f"app - bare: {med - base:.2f} s, app / bare: {med / base:.1f}x; target app - bare <= "
          f"{TARGET_S:.1f} s: {'met' if med - base <= TARGET_S else 'NOT met'}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
