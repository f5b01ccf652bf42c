"""Render the plots and the live monitor panel with real data, into docs/screenshots/.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/plot_screenshots.py [--out docs/screenshots]

- plot_memory.png: Mistral Small 3.1 24B Q6_K planned on an RTX 4090 with 16 GB of RAM
  (a --hardware style profile: the GPU's figures from the bundled table) over 256 tokens
  to its trained 128k context.
- plot_speed.png: Gemma-3-270M (the test package's real GGUF) on this machine: predicted
  lines, and measured points from a real stress run (runtime/stress.py) at 512 to 4k,
  both at one thread.
- plot_quants.png: Llama 3.1 8B's published quants on the RTX 4090 profile at 8k.
- monitor.png: the monitor panel fed by a real Monitor on this machine for about 25 s
  while Gemma-3-270M prefills and generates on a worker thread, reporting its rates.

Nothing is stored for calibration. Takes one to two minutes on two cores.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import threading
import time
from pathlib import Path

from PySide6.QtWidgets import QApplication

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the Gemma-3-270M test model: tests/gemma_model.py


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def memory_plot(out: Path) -> None:
    from rooflight.catalog import find_model
    from rooflight.hardware import profile_from_dict
    from rooflight.ui.plots import MemoryContextPlot

    hw = profile_from_dict({"cpu": {"ram_total_bytes": 16_000_000_000, "ram_available_bytes": 14_000_000_000},
                            "gpus": [{"name": "RTX 4090"}]})
    plot = MemoryContextPlot()
    plot.plot(find_model("mistral-small-3.1-24b").spec("Q6_K"), hw)
    plot.resize(1000, 760)
    plot.show()
    QApplication.processEvents()
    plot.export_png(out / "plot_memory.png")
    _log(f"plot_memory.png: {plot.caption()}")


def speed_plot(out: Path) -> None:
    from gemma_model import gemma_270m_path
    from rooflight.estimate import Wishes
    from rooflight.gguf import load_model_spec
    from rooflight.hardware import detect
    from rooflight.runtime.stress import measured_speeds, run_stress
    from rooflight.ui.plots import SpeedContextPlot

    path = gemma_270m_path()
    spec = load_model_spec(str(path))
    hw = detect()
    # One thread: on this project's shared 2-core VM other jobs keep the cores busy, and
    # llama.cpp's threads then wait on each other at every barrier (measured 25x slower
    # with 2 threads under load); the plan is made for the same one thread.
    wishes = Wishes(n_threads=1)
    _log("stress run on Gemma-3-270M (512, 1k, 2k, 4k), 1 thread...")
    with contextlib.redirect_stderr(io.StringIO()):
        result = run_stress(path, spec, hw, contexts=[512, 1024, 2048, 4096], wishes=wishes)
    for p in result.points:
        _log(f"  {p.n_ctx}: prefill {p.measured.prefill_tok_s:.0f} tok/s, decode {p.measured.decode_tok_s:.1f} tok/s")
    load = os.getloadavg()[0]
    plot = SpeedContextPlot()
    plot.plot(spec, hw, wishes, measured=measured_speeds(result))
    plot.set_title(plot.title() + ", 1 thread")
    # say how busy the machine was: on a shared VM other jobs slow the measured runs
    plot.set_caption(plot.caption() + f" Measured with a load average of {load:.1f} on {os.cpu_count()} CPUs.")
    plot.resize(1100, 460)
    plot.show()
    QApplication.processEvents()
    plot.export_png(out / "plot_speed.png")


def quant_plot(out: Path) -> None:
    from rooflight.catalog import find_model
    from rooflight.hardware import profile_from_dict
    from rooflight.ui.plots import QuantComparisonPlot

    hw = profile_from_dict({"gpus": [{"name": "RTX 4090"}]})
    plot = QuantComparisonPlot()
    plot.plot(find_model("llama-3.1-8b"), hw, n_ctx=8192)
    plot.resize(1100, 520)
    plot.show()
    QApplication.processEvents()
    plot.export_png(out / "plot_quants.png")


def _generate(monitor, stop: threading.Event) -> None:
    """Gemma-3-270M at its planned config: prompts of growing length, then tokens, with
    the rates reported to the monitor as a chat engine would."""
    from gemma_model import gemma_270m_path
    from rooflight.estimate import Wishes
    from rooflight.estimate.sweep import plan_at
    from rooflight.gguf import load_model_spec
    from rooflight.hardware import detect
    from rooflight.runtime import amx

    path = gemma_270m_path()
    # one thread, as in speed_plot: the shared VM's other jobs stall two
    point = plan_at(load_model_spec(str(path)), detect(), 4096, Wishes(n_threads=1))
    with contextlib.redirect_stderr(io.StringIO()):
        llm = amx.llama_class()(model_path=str(path), verbose=False, **point.estimate.config.runtime_kwargs())
    text = b"The quick brown fox jumps over the lazy dog near the quiet harbour. "
    tokens = llm.tokenize(text * 60, add_bos=True)
    try:
        for n_prompt in (400, 900, 1600):
            if stop.is_set():
                return
            llm.reset()
            t0 = time.perf_counter()
            llm.eval(tokens[:n_prompt])
            monitor.record_speed("prompt", n_prompt / (time.perf_counter() - t0))
            tok = llm.sample(temp=0.8)
            t0, n = time.perf_counter(), 0
            for _ in range(160):
                if stop.is_set():
                    return
                llm.eval([tok])
                tok = llm.sample(temp=0.8)
                n += 1
                if n % 8 == 0:
                    monitor.record_speed("decode", n / (time.perf_counter() - t0))
                    t0, n = time.perf_counter(), 0
            time.sleep(2.0)  # idle between replies
    finally:
        llm.close()


def monitor_shot(out: Path, seconds: float = 26.0) -> None:
    from rooflight.hardware.monitor import Monitor
    from rooflight.ui.monitor_panel import MonitorPanel

    monitor = Monitor(interval_s=0.5).start()
    panel = MonitorPanel(monitor, window_s=30.0)
    panel.resize(1100, 640)
    panel.show()
    stop = threading.Event()
    worker = threading.Thread(target=_generate, args=(monitor, stop), daemon=True)
    worker.start()
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        QApplication.processEvents()
        time.sleep(0.05)
    stop.set()
    worker.join(30)
    QApplication.processEvents()
    panel.export_png(out / "monitor.png")
    monitor.stop()
    _log(f"monitor.png: {panel.samples_drawn} samples drawn; monitor thread used {monitor.cpu_fraction:.3%} of a core")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    ap.add_argument("--only", choices=["memory", "speed", "quants", "monitor"])
    args = ap.parse_args()
    app = QApplication.instance() or QApplication(sys.argv)
    app.setStyle("Fusion")
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = {"memory": memory_plot, "speed": speed_plot, "quants": quant_plot, "monitor": monitor_shot}
    for name, job in jobs.items():
        if args.only in (None, name):
            job(args.out)
    _log(f"written to {args.out}")


if __name__ == "__main__":
    main()
