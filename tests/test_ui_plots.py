"""Plot widgets built from real sweeps (and a real stress run), their PNG / SVG exports,
and the live monitor panel fed by a running Monitor (NVML faked at its boundary)."""

from __future__ import annotations

import threading
import time
import xml.etree.ElementTree as ET

import pytest
from PySide6.QtCharts import QAreaSeries, QHorizontalBarSeries, QScatterSeries
from PySide6.QtCore import QThread
from PySide6.QtGui import QImage
from PySide6.QtSvg import QSvgRenderer

from rooflight.catalog import find_model
from rooflight.estimate import Wishes
from rooflight.estimate.sweep import max_fitting_context, memory_vs_context
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import profile_from_dict
from rooflight.hardware.monitor import Monitor, SpeedBoard
from rooflight.hardware.profile import CPUInfo, HardwareProfile
from rooflight.runtime.stress import measured_speeds, run_stress
from rooflight.ui.monitor_panel import MonitorPanel
from rooflight.ui.plots import MemoryContextPlot, QuantComparisonPlot, SpeedContextPlot, ctx_label
from test_monitor import RTX_4090, fake_pynvml

GB = 1e9
GiB = 2**30
MiB = 2**20

RTX_4090_16GB_RAM = profile_from_dict({
    "cpu": {"name": "test CPU", "cores": 8, "threads": 16, "isa": ["avx2"], "ram_total_bytes": 16_000_000_000,
            "ram_available_bytes": 14_000_000_000, "ram_bandwidth_gbs": 60.0},
    "gpus": [{"name": "RTX 4090"}], "backend": "cuda"})


def series_of(chart, kind):
    return [s for s in chart.series() if isinstance(s, kind)]


def by_name(chart, name):
    return next(s for s in chart.series() if s.name() == name)


def check_exports(widget, tmp_path, stem):
    png = widget.export_png(tmp_path / f"{stem}.png", scale=2.0)
    image = QImage(str(png))
    assert not image.isNull()
    assert (image.width(), image.height()) == (widget.width() * 2, widget.height() * 2)
    # not a blank canvas: many distinct colours (series, text, grid)
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
    assert len(colours) > 20
    svg = widget.export_svg(tmp_path / f"{stem}.svg")
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    assert QSvgRenderer(str(svg)).isValid()
    text = svg.read_text()
    assert text.count("<path") + text.count("<polyline") > 10
    assert not list(tmp_path.glob(f".{stem}*"))  # temp files renamed away
    return text


def test_memory_plot_from_a_real_sweep(qtbot, tmp_path):
    spec = find_model("mistral-small-3.1-24b").spec("Q6_K")
    plot = MemoryContextPlot()
    qtbot.addWidget(plot)
    plot.plot(spec, RTX_4090_16GB_RAM)
    plot.resize(900, 700)
    # not shown: exports lay out and render a hidden panel (a background tab)
    # the plan's own boundaries: every layer on the GPU up to ~32k, fits to ~100k, 128k trained
    assert plot.full_gpu_until < plot.fits_until < spec.context_length
    assert plot.fits_until == max_fitting_context(spec, RTX_4090_16GB_RAM)
    assert [c.title() for c in plot.charts()] == ["RAM (CPU)", "GPU 0 VRAM (RTX 4090)"]
    assert "RTX 4090" in plot.title() and "16 GB RAM" in plot.title()
    assert f"fits up to {ctx_label(plot.fits_until)} tokens" in plot.caption()
    gpu = plot.charts()[1]
    names = [s.name() for s in gpu.series()]
    for name in ("weights", "KV cache", "compute", "GPU overhead", "capacity",
                 f"leaves GPU: {ctx_label(plot.full_gpu_until)}", f"fits to {ctx_label(plot.fits_until)}",
                 "too large"):
        assert name in names
    # the stacked top is the planned total at every context, the capacity line the usable memory
    top = by_name(gpu, "GPU overhead").upperSeries().points()
    cap = by_name(gpu, "capacity").points()
    for p, t, c in zip(plot.points, top, cap, strict=True):
        d = p.estimate.memory.device("gpu0")
        assert t.y() == pytest.approx(d.total_bytes / GB) and c.y() == pytest.approx(d.available_bytes / GB)
    check_exports(plot, tmp_path, "memory")


def test_memory_plot_set_points_cpu_only(qtbot):
    spec = find_model("gemma-3-270m").spec("Q8_0")
    host = HardwareProfile(cpu=CPUInfo("h", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0))
    points = memory_vs_context(spec, host, contexts=[512, 2048, 8192, 32768])
    plot = MemoryContextPlot()
    qtbot.addWidget(plot)
    plot.set_points(points, fits_until=32768, title="t")
    assert len(plot.charts()) == 1
    names = [s.name() for s in plot.charts()[0].series()]
    assert "GPU overhead" not in names and "too large" not in names
    assert "the whole range" in plot.caption()
    assert len(series_of(plot.charts()[0], QAreaSeries)) == 3


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    path = write_model(tmp_path_factory.mktemp("plots") / "plot-f16.gguf", arch="llama", n_layer=4, n_embd=256,
                       n_head=8, n_head_kv=2, n_ff=768, n_vocab=2000, ftype="F16", context_length=8192)
    return path, load_model_spec(str(path))


@pytest.mark.slow
def test_speed_plot_with_measured_points_from_a_real_stress_run(qtbot, tmp_path, tiny_model):
    path, spec = tiny_model
    # this machine for the runs, a small-RAM profile for the plan: it stops fitting past ~7k
    small = HardwareProfile(cpu=CPUInfo("h", 2, 2, ("avx2",), GiB, 540 * MiB, 20.0, "profile", 3000.0))
    result = run_stress(path, spec, small, contexts=[256, 1024], wishes=Wishes(n_threads=1))
    measured = measured_speeds(result)
    plot = SpeedContextPlot()
    qtbot.addWidget(plot)
    plot.plot(spec, small, Wishes(n_threads=1), measured=measured)
    plot.resize(1000, 420)
    # not shown: exports lay out and render a hidden panel (a background tab)
    decode, prefill = plot.charts()
    assert decode.title() == "decode (generation)" and prefill.title() == "prefill (prompt processing)"
    dots = by_name(decode, "measured")
    assert isinstance(dots, QScatterSeries)
    assert [round(p.y(), 6) for p in dots.points()] == [round(m.decode_tok_s, 6) for m in measured]
    assert [round(p.y(), 6) for p in by_name(prefill, "measured").points()] == [
        round(m.prefill_tok_s, 6) for m in measured]
    # the predicted line stops where the plan stops fitting, and says so
    line = by_name(decode, "predicted")
    fitting = [p for p in plot.points if p.fits]
    assert len(line.points()) == len(fitting) < len(plot.points)
    assert line.points()[0].y() == pytest.approx(fitting[0].decode_tok_s)
    assert "does not fit beyond" in [s.name() for s in decode.series()]
    assert "2 measured point(s)" in plot.caption()
    check_exports(plot, tmp_path, "speed")


def test_quant_plot_from_catalog_estimates(qtbot, tmp_path):
    model = find_model("llama-3.1-8b")
    plot = QuantComparisonPlot()
    qtbot.addWidget(plot)
    plot.plot(model, profile_from_dict({"gpus": [{"name": "RTX 4090"}]}), n_ctx=8192)
    plot.resize(1000, 480)
    # not shown: exports lay out and render a hidden panel (a background tab)
    assert {q.quant for q in plot.points} == set(model.quants)
    size, speed, loss = plot.charts()
    for chart, attr, scale in ((size, "file_bytes", GB), (speed, "decode_tok_s", 1.0), (loss, "kld", 1.0)):
        (series,) = series_of(chart, QHorizontalBarSeries)
        values = [series.barSets()[0].at(i) for i in range(series.barSets()[0].count())]
        assert values == pytest.approx([getattr(q, attr) / scale for q in plot.points])
    # smaller quants are faster and lose more
    q4, q8 = (next(q for q in plot.points if q.quant == name) for name in ("Q4_K_M", "Q8_0"))
    assert q4.file_bytes < q8.file_bytes and q4.decode_tok_s > q8.decode_tok_s and q4.kld > q8.kld
    text = check_exports(plot, tmp_path, "quants")
    assert "Q4_K_M" in text


def test_monitor_panel_follows_a_running_monitor(qtbot, tmp_path):
    nvml = fake_pynvml([RTX_4090])
    monitor = Monitor(interval_s=0.05, nvml=nvml)
    monitor.speeds = SpeedBoard(hold_s=60.0)  # the rates below stay current for the whole test
    panel = MonitorPanel(window_s=10.0)
    qtbot.addWidget(panel)
    panel.resize(1100, 620)
    # not shown: a hidden panel still receives and draws samples
    drawn_on: set = set()
    real_add = panel.add_sample

    def spy(sample):
        drawn_on.add(QThread.currentThread())
        real_add(sample)

    panel.add_sample = spy  # the bridge is connected at attach time: spy before it
    monitor.record_speed("decode", 41.5)
    monitor.record_speed("prompt", 812.0)
    with monitor:
        panel.attach(monitor)
        qtbot.waitUntil(lambda: panel.samples_drawn >= 4, timeout=5000)
        # the GUI thread only drew; sampling ran on the monitor's thread
        assert drawn_on == {panel.thread()}
        assert threading.current_thread() is threading.main_thread()
        titles = [c.title() for c in panel.charts()]
        assert titles == ["model speed", "memory (dashed: capacity)", "load", "GPU power and temperature"]
        speed = panel.charts()[0]
        assert {round(p.y(), 1) for p in by_name(speed, "decode").points()} == {41.5}
        memory = panel.charts()[1]
        assert by_name(memory, "GPU0 VRAM").points()[-1].y() == pytest.approx(6 * GiB / GB)
        assert by_name(memory, "GPU0 size").points()[-1].y() == pytest.approx(24 * GiB / GB)
        assert by_name(panel.charts()[3], "GPU0 W").points()[-1].y() == pytest.approx(312.5)
        assert "decode 41.5 tok/s" in panel.caption() and "312 W" in panel.caption()
        check_exports(panel, tmp_path, "monitor")
        assert monitor.subscriber_count == 1
        panel.detach()
        assert monitor.subscriber_count == 0
        drawn = panel.samples_drawn
        time.sleep(0.3)
        qtbot.wait(50)
        assert panel.samples_drawn == drawn  # detached: no more updates
        assert len(monitor.samples()) > drawn  # while the monitor went on sampling


def test_monitor_panel_outlived_by_its_monitor(qtbot):
    """The panel closes while the monitor keeps running: no crash, no more deliveries."""
    monitor = Monitor(interval_s=0.02, nvml=fake_pynvml([]))
    with monitor:
        panel = MonitorPanel(monitor)
        qtbot.waitUntil(lambda: panel.samples_drawn >= 2, timeout=5000)
        assert [c.title() for c in panel.charts()] == ["model speed", "memory (dashed: capacity)", "load"]
        assert monitor.subscriber_count == 1
        panel.deleteLater()
        qtbot.wait(100)
        assert monitor.subscriber_count == 0  # the panel's end unsubscribed it
        time.sleep(0.1)
        qtbot.wait(50)
    assert not monitor.running
