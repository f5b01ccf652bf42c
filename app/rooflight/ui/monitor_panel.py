"""The live monitor panel: running charts of a hardware.monitor.Monitor's samples.

Charts: the model's decode and prompt tok/s; RAM and each GPU's VRAM in use against their
capacity (and this process's resident memory, where a loaded model shows); CPU load and
GPU utilisation; GPU power and temperature when NVML reports them.

Samples arrive on the monitor's own thread. A small bridge object re-emits each one as a
Qt signal with a queued connection, so the GUI thread draws it in its event loop and is
never blocked by (nor blocks) the sampler.

    panel = MonitorPanel()
    panel.attach(monitor)   # monitor = Monitor(interval_s=0.5).start(), owned by the app
    ...                     # the chat engine calls monitor.record_speed("decode", tok_s)
    panel.detach()
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from PySide6.QtCharts import QChart, QLineSeries, QValueAxis
from PySide6.QtCore import QObject, QPointF, Qt, Signal, Slot
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from rooflight.hardware.monitor import Monitor, Sample
from rooflight.ui.plots import (
    DECODE_COLOR,
    PREFILL_COLOR,
    ChartPanel,
    make_pen,
    nice_range,
    style_axis,
    value_axis,
)

GB = 1e9

RAM_COLOR = "#0f766e"
PROCESS_COLOR = "#7c3aed"
CPU_COLOR = "#475569"
# one colour per GPU (VRAM, utilisation, power share it)
GPU_COLORS = ("#16a34a", "#db2777", "#ca8a04", "#0891b2")
TEMP_COLOR = "#dc2626"


def _color_axis(axis: QValueAxis, color: str) -> None:
    """Axis labels and title in the colour of the line it measures."""
    axis.setLabelsColor(QColor(color))
    axis.setTitleBrush(QColor(color))


class _Bridge(QObject):
    """Lives on the GUI thread; emitted from the monitor thread -> queued to the panel."""

    sampled = Signal(object)


class MonitorPanel(ChartPanel):
    """Running charts over the last `window_s` seconds of a Monitor's samples."""

    def __init__(self, monitor: Monitor | None = None, parent: QWidget | None = None, *,
                 window_s: float = 60.0) -> None:
        super().__init__(parent, columns=2)
        self.window_s = window_s
        self._samples: deque[Sample] = deque()
        self._unsubscribe: Callable[[], None] | None = None
        self._bridge: _Bridge | None = None
        self._series: dict[str, QLineSeries] = {}
        self._axes: dict[str, QValueAxis] = {}
        self._layout_key: tuple | None = None  # GPUs and which of their figures exist
        self.samples_drawn = 0
        self.set_title("Live monitor")
        self.set_caption("Waiting for the first sample...")
        if monitor is not None:
            self.attach(monitor)

    # -- feeding ---------------------------------------------------------------------------
    def attach(self, monitor: Monitor) -> None:
        """Draw `monitor`'s samples from now on (and the ones already in its ring)."""
        self.detach()
        bridge = _Bridge()
        bridge.sampled.connect(self._from_bridge, Qt.ConnectionType.QueuedConnection)
        self._bridge = bridge
        # the subscriber holds the bridge, so it lives as long as the monitor may emit on
        # it; when the panel goes first, Qt drops the connection and emits reach nobody

        def deliver(sample: Sample, bridge: _Bridge = bridge) -> None:
            bridge.sampled.emit(sample)  # from the monitor thread: queued to the panel

        unsubscribe = monitor.subscribe(deliver)
        self._unsubscribe = unsubscribe
        self.destroyed.connect(lambda *_: unsubscribe())
        for sample in monitor.samples():
            self._keep(sample)
        if self._samples:
            self._redraw()

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._bridge = None

    @Slot(object)
    def _from_bridge(self, sample: Sample) -> None:
        # samples queued before a detach (or from a monitor attached earlier) are dropped
        if self._bridge is not None and self.sender() is self._bridge:
            self.add_sample(sample)

    def add_sample(self, sample: Sample) -> None:
        """Draw one more sample (GUI thread; the monitor's samples come here queued)."""
        self._keep(sample)
        self._redraw()

    def _keep(self, sample: Sample) -> None:
        self._samples.append(sample)
        while self._samples and sample.time - self._samples[0].time > self.window_s:
            self._samples.popleft()

    # -- drawing -------------------------------------------------------------------------------
    def _gpu_key(self, s: Sample) -> tuple:
        return tuple((g.index, g.name, g.vram_total_bytes is not None, g.util_percent is not None,
                      g.power_watts is not None, g.temperature_c is not None) for g in s.gpus)

    def _build(self, s: Sample) -> None:
        """Create the charts for what this machine reports (rebuilt if its GPUs change)."""
        self._clear()
        self._series, self._axes = {}, {}
        key = self._gpu_key(s)
        self._layout_key = key

        has_power = any(g.power_watts is not None or g.temperature_c is not None for g in s.gpus)
        # speed across the top; memory, load (and GPU power) side by side below it
        self._columns = 3 if has_power else 2
        # decode on the left axis, prompt processing (often 10x faster) on its own right axis
        self._chart("speed", "model speed", "decode tokens / s", (0, 0, self._columns), [
            ("decode", "decode", make_pen(DECODE_COLOR, 2.2)),
            ("prompt", "prompt processing (right axis)", make_pen(PREFILL_COLOR, 2.2)),
        ], right={"prompt": ("prompt", "prompt tokens / s", PREFILL_COLOR)}, left_color=DECODE_COLOR)
        memory = [("ram", "RAM used", make_pen(RAM_COLOR, 2.2)),
                  ("ram_total", "RAM size", make_pen(RAM_COLOR, 1.5, Qt.PenStyle.DashLine)),
                  ("rss", "this app", make_pen(PROCESS_COLOR, 1.8))]
        load = [("cpu", "CPU", make_pen(CPU_COLOR, 2.0))]
        power: list = []
        for g in s.gpus:
            color = GPU_COLORS[g.index % len(GPU_COLORS)]
            if g.vram_total_bytes is not None:
                memory += [(f"vram{g.index}", f"GPU{g.index} VRAM", make_pen(color, 2.2)),
                           (f"vram_total{g.index}", f"GPU{g.index} size", make_pen(color, 1.5, Qt.PenStyle.DashLine))]
            if g.util_percent is not None:
                load.append((f"util{g.index}", f"GPU{g.index}", make_pen(color, 2.0)))
            if g.power_watts is not None:
                power.append((f"power{g.index}", f"GPU{g.index} W", make_pen(color, 2.0)))
            if g.temperature_c is not None:
                power.append((f"temp{g.index}", f"GPU{g.index} °C",
                              make_pen(TEMP_COLOR if len(s.gpus) == 1 else color, 2.0, Qt.PenStyle.DotLine)))
        self._chart("memory", "memory (dashed: capacity)", "GB", (1, 0, 1), memory)
        self._chart("load", "load", "% busy", (1, 1, 1), load)
        if power:
            self._chart("gpu", "GPU power and temperature", "W / °C", (1, 2, 1), power)

    def _chart(self, key: str, title: str, unit: str, cell: tuple[int, int, int], lines: list, *,
               right: dict[str, tuple[str, str, str]] | None = None, left_color: str | None = None) -> QChart:
        """A running chart; `right` puts some lines on a second axis at the right:
        {line name: (axis key, axis title, colour)}."""
        pal = self.palette()
        chart = self._new_chart(title, cell)
        x_axis = QValueAxis()
        x_axis.setRange(-self.window_s, 0.0)
        x_axis.setLabelFormat("%.0f")
        x_axis.setTickType(QValueAxis.TickType.TicksDynamic)
        x_axis.setTickAnchor(0.0)
        x_axis.setTickInterval(next(t for t in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1e9)
                                    if self.window_s / t <= 8))
        style_axis(x_axis, pal, "seconds (0 = now)")
        y_axis = value_axis(0.0, 1.0, pal, unit)
        if key == "load":
            # a little headroom so a core busy at 100% is not drawn on the frame; ticks
            # stay at 0, 20 ... 100
            y_axis.setRange(0.0, 105.0)
            y_axis.setTickType(QValueAxis.TickType.TicksDynamic)
            y_axis.setTickAnchor(0.0)
            y_axis.setTickInterval(20.0)
            y_axis.setLabelFormat("%.0f")
        chart.addAxis(x_axis, Qt.AlignmentFlag.AlignBottom)
        chart.addAxis(y_axis, Qt.AlignmentFlag.AlignLeft)
        self._axes[key] = y_axis
        if cell[2] == 1:
            # narrow charts: one legend entry per line, at the side, so none is cut short
            chart.legend().setAlignment(Qt.AlignmentFlag.AlignRight)
        if left_color:
            _color_axis(y_axis, left_color)
        right_axes: dict[str, QValueAxis] = {}
        for axis_key, axis_title, color in (right or {}).values():
            if axis_key not in right_axes:
                axis = value_axis(0.0, 1.0, pal, axis_title)
                _color_axis(axis, color)
                chart.addAxis(axis, Qt.AlignmentFlag.AlignRight)
                right_axes[axis_key] = self._axes[axis_key] = axis
        for name, label, pen in lines:
            series = QLineSeries()
            series.setName(label)
            chart.addSeries(series)
            series.setPen(pen)  # after addSeries: adding applies the theme's colours
            series.attachAxis(x_axis)
            series.attachAxis(right_axes[right[name][0]] if right and name in right else y_axis)
            self._series[name] = series
        return chart

    def _redraw(self) -> None:
        latest = self._samples[-1]
        if self._layout_key != self._gpu_key(latest):
            self._build(latest)
        now = latest.time
        values: dict[str, list[QPointF]] = {name: [] for name in self._series}

        def put(name: str, x: float, y: float | None) -> None:
            if name in values and y is not None:
                values[name].append(QPointF(x, y))

        for s in self._samples:
            x = s.time - now
            # an idle model makes no tokens: 0 tok/s, not a line drawn across the gap
            put("decode", x, s.decode_tok_s or 0.0)
            put("prompt", x, s.prompt_tok_s or 0.0)
            put("ram", x, s.ram_used_bytes / GB)
            put("ram_total", x, s.ram_total_bytes / GB)
            put("rss", x, s.process_rss_bytes / GB)
            put("cpu", x, s.cpu_percent)
            for g in s.gpus:
                i = g.index
                put(f"vram{i}", x, g.vram_used_bytes / GB if g.vram_used_bytes is not None else None)
                put(f"vram_total{i}", x, g.vram_total_bytes / GB if g.vram_total_bytes is not None else None)
                put(f"util{i}", x, g.util_percent)
                put(f"power{i}", x, g.power_watts)
                put(f"temp{i}", x, g.temperature_c)
        for name, points in values.items():
            self._series[name].replace(points)
        self._fit_axis("speed", [p.y() for p in values.get("decode", [])], 10.0)
        self._fit_axis("prompt", [p.y() for p in values.get("prompt", [])], 10.0)
        self._fit_axis("memory", [p.y() for n, pts in values.items()
                                  if n.startswith(("ram", "rss", "vram")) for p in pts], 1.0)
        self._fit_axis("gpu", [p.y() for n, pts in values.items() if n.startswith(("power", "temp")) for p in pts], 100.0)
        self.samples_drawn += 1
        self.set_caption(self._now_text(latest))

    def _fit_axis(self, key: str, ys: list[float], floor: float) -> None:
        axis = self._axes.get(key)
        if axis is None:
            return
        top = max(ys + [floor]) * 1.1
        # grow at once, shrink only when well below: the axis should not jitter
        if top > axis.max() or top < 0.5 * axis.max():
            nice_range(axis, 0.0, top)

    @staticmethod
    def _now_text(s: Sample) -> str:
        parts = [time.strftime("%H:%M:%S", time.localtime(s.time))]
        parts.append(f"decode {s.decode_tok_s:.1f} tok/s" if s.decode_tok_s is not None else "decode idle")
        if s.prompt_tok_s is not None:
            parts.append(f"prompt {s.prompt_tok_s:.0f} tok/s")
        parts.append(f"RAM {s.ram_used_bytes / GB:.1f} of {s.ram_total_bytes / GB:.1f} GB")
        parts.append(f"CPU {s.cpu_percent:.0f}%")
        for g in s.gpus:
            bits = [f"GPU {g.index}"]
            if g.vram_used_bytes is not None and g.vram_total_bytes:
                bits.append(f"{g.vram_used_bytes / GB:.1f} of {g.vram_total_bytes / GB:.1f} GB")
            if g.util_percent is not None:
                bits.append(f"{g.util_percent:.0f}%")
            if g.power_watts is not None:
                bits.append(f"{g.power_watts:.0f} W")
            if g.temperature_c is not None:
                bits.append(f"{g.temperature_c:.0f} °C")
            parts.append(" ".join(bits))
        return "  ·  ".join(parts)
