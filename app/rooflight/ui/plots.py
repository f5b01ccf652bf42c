"""Plots for a model's detail view (QtCharts): memory vs context, speed vs context, and a
quant comparison. Every plot widget exports itself as PNG or SVG.

The data comes from the core (estimate/sweep.py plans a model over contexts;
runtime/stress.py and the calibration store give measured points; catalog/rank.py the
per-quant estimates); these widgets only draw it. Contexts are drawn on a log2 axis
labelled 512, 1k, 2k ... because what matters is each doubling.

    plot = MemoryContextPlot(); plot.plot(spec, hardware)       # or .set_points(points)
    speed = SpeedContextPlot(); speed.plot(spec, hardware, measured=stored_points)
    quants = QuantComparisonPlot(); quants.plot(catalog_model, hardware, n_ctx=8192)
    plot.export_png("memory.png"); plot.export_svg("memory.svg")
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from PySide6.QtCharts import (
    QAbstractBarSeries,
    QAreaSeries,
    QBarCategoryAxis,
    QBarSet,
    QCategoryAxis,
    QChart,
    QChartView,
    QHorizontalBarSeries,
    QLineSeries,
    QScatterSeries,
    QValueAxis,
)
from PySide6.QtCore import QMargins, QPoint, QPointF, QRect, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QImage, QPainter, QPalette, QPen
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGridLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from rooflight.atomic import write_file_atomic
from rooflight.estimate.plan import Wishes
from rooflight.estimate.sweep import (
    ContextPoint,
    context_grid,
    max_fitting_context,
    max_full_gpu_context,
    memory_vs_context,
    speed_vs_context,
)

GB = 1e9

# Memory kinds: the same hues as the app's stacked bars (ui/theme.py), readable on light
# and dark backgrounds alike.
KIND_COLORS = {"weights": "#3b6fe0", "kv": "#8a5cf0", "compute": "#12a594", "overhead": "#98a1ae"}
KIND_LABELS = {"weights": "weights", "kv": "KV cache", "compute": "compute", "overhead": "GPU overhead"}
CAPACITY_COLOR = "#d62828"
GPU_LIMIT_COLOR = "#e08a00"
DECODE_COLOR = "#2563eb"
PREFILL_COLOR = "#c2410c"
MEASURED_COLOR = "#111827"
QUANT_SIZE_COLOR = "#64748b"
QUALITY_LOSS_COLOR = "#dc2626"


def ctx_label(n: int) -> str:
    """512, 1k, 2k ... 128k, 1M: context lengths as people say them."""
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10}k"
    if n >= 1024:
        return f"{n / 1024:.1f}k"
    return str(n)


def machine_label(hardware) -> str:
    """"RTX 4090 + 16 GB RAM", "CPU only, 25 GB RAM": the machine a plot was planned for."""
    ram = f"{hardware.cpu.ram_total_bytes / GB:.0f} GB RAM"
    if hardware.offload_gpus:
        return " + ".join(g.name for g in hardware.offload_gpus) + f" + {ram}"
    return f"CPU only, {ram}"


# -- styling ---------------------------------------------------------------------------------


def _is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def _style_chart(chart: QChart, palette: QPalette, title: str = "") -> None:
    """Follow the application palette (ui/theme.py sets it), with no animation: charts are
    redrawn on every data change and exported as they are."""
    chart.setTheme(QChart.ChartTheme.ChartThemeDark if _is_dark(palette) else QChart.ChartTheme.ChartThemeLight)
    chart.setBackgroundBrush(QBrush(palette.color(QPalette.ColorRole.Base)))
    chart.setBackgroundRoundness(0)
    chart.setAnimationOptions(QChart.AnimationOption.NoAnimation)
    chart.setMargins(QMargins(6, 6, 6, 6))
    text = palette.color(QPalette.ColorRole.Text)
    font = QFont(chart.titleFont())
    font.setBold(True)
    font.setPointSizeF(max(font.pointSizeF(), 10.0))
    chart.setTitleFont(font)
    chart.setTitleBrush(QBrush(text))
    chart.setTitle(title)
    legend = chart.legend()
    legend.setAlignment(Qt.AlignmentFlag.AlignBottom)
    legend.setLabelColor(text)


def style_axis(axis, palette: QPalette, title: str) -> None:
    text = palette.color(QPalette.ColorRole.Text)
    axis.setTitleText(title)
    axis.setTitleBrush(QBrush(text))
    axis.setLabelsColor(text)
    grid = QColor(palette.color(QPalette.ColorRole.Mid))
    grid.setAlpha(110)
    axis.setGridLineColor(grid)
    axis.setLinePenColor(palette.color(QPalette.ColorRole.Mid))


def make_pen(color: str, width: float = 2.0, style: Qt.PenStyle = Qt.PenStyle.SolidLine) -> QPen:
    pen = QPen(QColor(color))
    pen.setWidthF(width)
    pen.setStyle(style)
    return pen


def _x(n_ctx: float) -> float:
    return math.log2(max(n_ctx, 1))


def context_axis(lo: int, hi: int, palette: QPalette) -> QCategoryAxis:
    """A log2 context axis (values are log2 of the context) labelled at powers of two."""
    axis = QCategoryAxis()
    axis.setLabelsPosition(QCategoryAxis.AxisLabelsPosition.AxisLabelsPositionOnValue)
    x_lo, x_hi = _x(lo), _x(hi)
    if x_hi - x_lo < 1:
        x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    axis.setRange(x_lo, x_hi)
    axis.setStartValue(x_lo)
    first, last = math.ceil(x_lo - 1e-9), math.floor(x_hi + 1e-9)
    step = 2 if last - first > 10 else 1  # at most ~10 labels
    for e in range(first, last + 1, step):
        axis.append(ctx_label(2**e), float(e))
    style_axis(axis, palette, "context length (tokens, log scale)")
    return axis


def nice_range(axis: QValueAxis, lo: float, hi: float) -> None:
    """Set the axis to round numbers covering lo..hi, with as many decimals as its tick
    step needs (0, 5, 10 - not 0.0, 5.0, 10.0)."""
    axis.setRange(lo, hi if hi > lo else lo + 1)
    axis.applyNiceNumbers()
    step = (axis.max() - axis.min()) / max(1, axis.tickCount() - 1)
    decimals = 0 if step >= 1 else min(4, math.ceil(-math.log10(step) - 1e-9))
    axis.setLabelFormat(f"%.{decimals}f")


def value_axis(lo: float, hi: float, palette: QPalette, title: str) -> QValueAxis:
    axis = QValueAxis()
    nice_range(axis, lo, hi)
    style_axis(axis, palette, title)
    return axis


def _attach(chart: QChart, series, *axes) -> None:
    chart.addSeries(series)
    for axis in axes:
        series.attachAxis(axis)


def _line(points: Iterable[tuple[float, float]], name: str, pen: QPen) -> QLineSeries:
    s = QLineSeries()
    s.setName(name)
    s.append([QPointF(x, y) for x, y in points])
    s.setPen(pen)
    return s


def _area(upper: QLineSeries, lower: QLineSeries, name: str, color: str, alpha: int = 255) -> QAreaSeries:
    area = QAreaSeries(upper, lower)
    # the area draws from its two line series: they live as long as it does
    upper.setParent(area)
    lower.setParent(area)
    area.setName(name)
    fill = QColor(color)
    fill.setAlpha(alpha)
    area.setBrush(QBrush(fill))
    edge = QColor(color).darker(115)
    edge.setAlpha(min(255, alpha + 60))
    area.setPen(make_pen(edge.name(QColor.NameFormat.HexArgb), 1.0))
    return area


def _vertical(x: float, y_hi: float, name: str, color: str) -> QLineSeries:
    return _line([(x, 0.0), (x, y_hi)], name, make_pen(color, 2.0, Qt.PenStyle.DashDotLine))


# -- the base widget -----------------------------------------------------------------------


class ChartPanel(QWidget):
    """One or more QtCharts in a grid, exportable as PNG and SVG as a whole."""

    def __init__(self, parent: QWidget | None = None, *, columns: int = 1) -> None:
        super().__init__(parent)
        self._columns = columns
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(4)
        self._title = QLabel(self)
        font = QFont(self._title.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.2)
        self._title.setFont(font)
        self._title.setContentsMargins(8, 4, 8, 0)
        self._title.setVisible(False)
        self._caption = QLabel(self)
        self._caption.setWordWrap(True)
        self._caption.setContentsMargins(8, 0, 8, 6)
        self._caption.setVisible(False)
        self._grid = QGridLayout()
        self._grid.setSpacing(6)
        outer.addWidget(self._title)
        outer.addLayout(self._grid, 1)
        outer.addWidget(self._caption)
        self._views: list[QChartView] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setAutoFillBackground(True)

    # charts
    def charts(self) -> list[QChart]:
        return [v.chart() for v in self._views]

    def _clear(self) -> None:
        for view in self._views:
            self._grid.removeWidget(view)
            view.deleteLater()
        self._views = []

    def _new_chart(self, title: str, cell: tuple[int, int, int] | None = None) -> QChart:
        """A new chart in the grid: in the next free cell, or at cell = (row, column, span)."""
        chart = QChart()
        _style_chart(chart, self.palette(), title)
        view = QChartView(chart, self)
        view.setRenderHint(QPainter.RenderHint.Antialiasing)
        view.setMinimumSize(QSize(320, 220))
        if cell is None:
            i = len(self._views)
            cell = (i // self._columns, i % self._columns, 1)
        row, column, span = cell
        self._grid.addWidget(view, row, column, 1, span)
        self._views.append(view)
        return chart

    def set_title(self, text: str) -> None:
        """A heading over the charts (the model, the machine); empty hides it."""
        self._title.setText(text)
        self._title.setVisible(bool(text))

    def title(self) -> str:
        return self._title.text()

    def set_caption(self, text: str) -> None:
        """A line of text under the charts (what the plot assumed); empty hides it."""
        self._caption.setText(text)
        self._caption.setVisible(bool(text))

    def caption(self) -> str:
        return self._caption.text()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        rows = max(1, math.ceil(len(self._views) / self._columns))
        extra = (30 if self._caption.isVisible() else 0) + (30 if self._title.isVisible() else 0)
        return QSize(480 * self._columns, 300 * rows + extra)

    # export
    def export_png(self, path: str | os.PathLike[str], scale: float = 2.0) -> Path:
        """Render the whole panel (charts and caption) to a PNG at `scale` x its size,
        written atomically. Returns the path."""
        self._ready()
        size = self.size()
        image = QImage(round(size.width() * scale), round(size.height() * scale), QImage.Format.Format_ARGB32)
        image.setDevicePixelRatio(scale)
        image.fill(self.palette().color(QPalette.ColorRole.Window))
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.render(painter, QPoint(0, 0))
        painter.end()
        return _atomic_write(Path(path), lambda tmp: image.save(str(tmp), "PNG"))

    def export_svg(self, path: str | os.PathLike[str], title: str | None = None) -> Path:
        """Render the whole panel as vector graphics (QSvgGenerator), written atomically."""
        self._ready()
        size = self.size()

        def write(tmp: Path) -> bool:
            gen = QSvgGenerator()
            gen.setFileName(str(tmp))
            gen.setSize(size)
            gen.setViewBox(QRect(QPoint(0, 0), size))
            gen.setTitle(title or self.title() or " / ".join(c.title() for c in self.charts() if c.title())
                         or "Rooflight plot")
            gen.setDescription("Exported by Rooflight")
            painter = QPainter()
            if not painter.begin(gen):
                return False
            self.render(painter, QPoint(0, 0))
            return painter.end()

        return _atomic_write(Path(path), write)

    def _ready(self) -> None:
        """Lay out a panel that was never shown (exports from a background window)."""
        if not self.isVisible() and self.layout() is not None:
            if self.size().width() < 50 or self.size().height() < 50:
                self.resize(self.sizeHint())
            self.layout().activate()


_atomic_write = write_file_atomic  # rooflight/atomic.py


# -- memory vs context ---------------------------------------------------------------------


def _device_title(device: str, names: dict[str, str]) -> str:
    if device == "cpu":
        return "RAM (CPU)"
    label = f"GPU {device[3:]}"
    return f"{label} VRAM ({names[device]})" if device in names else f"{label} VRAM"


class MemoryContextPlot(ChartPanel):
    """Memory per device against the context length: stacked weights / KV cache / compute
    (and the GPU runtime overhead), the usable capacity, where the model leaves the GPU
    and where it stops fitting. One chart per device."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, columns=1)
        self.points: list[ContextPoint] = []
        self.full_gpu_until: int | None = None
        self.fits_until: int | None = None

    def plot(self, spec, hardware, wishes: Wishes | None = None, contexts: Sequence[int] | None = None) -> None:
        """Plan `spec` on `hardware` over `contexts` (default: 256 tokens to the trained
        context, four points per doubling) and draw it. A few milliseconds to a few tens."""
        contexts = list(contexts or context_grid(spec, lo=256, per_doubling=4))
        points = memory_vs_context(spec, hardware, wishes, contexts)
        hi = max(contexts)
        full = max_full_gpu_context(spec, hardware, wishes, hi=hi) if hardware.offload_gpus else None
        fits = max_fitting_context(spec, hardware, wishes, hi=hi)
        names = {f"gpu{g.index}": g.name for g in hardware.gpus}
        self.set_points(points, full_gpu_until=full, fits_until=fits, device_names=names,
                        title=f"{spec.name} {spec.file_type}: memory by context on {machine_label(hardware)}")

    def set_points(
        self, points: Sequence[ContextPoint], *, full_gpu_until: int | None = None,
        fits_until: int | None = None, device_names: dict[str, str] | None = None, title: str = "",
    ) -> None:
        """Draw planned points (estimate.sweep.memory_vs_context). full_gpu_until /
        fits_until: the largest context with every layer on the GPU / that fits at all
        (estimate.sweep.max_full_gpu_context / max_fitting_context); None: not marked."""
        self._clear()
        self.set_title(title)
        self.points = sorted(points, key=lambda p: p.n_ctx)
        self.full_gpu_until, self.fits_until = full_gpu_until, fits_until
        if not self.points:
            self.set_caption("Nothing to plot.")
            return
        names = device_names or {}
        lo, hi = self.points[0].n_ctx, self.points[-1].n_ctx
        devices = [d.device for d in self.points[0].devices]
        for device in devices:
            self._device_chart(device, names, lo, hi, _device_title(device, names))
        self.set_caption(self._summary())

    def _summary(self) -> str:
        first, last = self.points[0], self.points[-1]
        parts = []
        if self.full_gpu_until is not None and self.full_gpu_until < last.n_ctx:
            parts.append(f"every layer on the GPU up to {ctx_label(self.full_gpu_until)} tokens; beyond that "
                         "layers move to the CPU")
        if self.fits_until is None:
            parts.append(f"does not fit even at {ctx_label(first.n_ctx)} tokens")
        elif self.fits_until < last.n_ctx:
            parts.append(f"fits up to {ctx_label(self.fits_until)} tokens")
        else:
            parts.append(f"fits up to {ctx_label(last.n_ctx)} tokens (the whole range)")
        return "Plan: " + "; ".join(parts) + ". Capacity = free memory minus a safety margin."

    def _device_chart(self, device: str, names: dict[str, str], lo: int, hi: int, title: str) -> None:
        pal = self.palette()
        chart = self._new_chart(title)
        mems = [(p, p.estimate.memory.device(device)) for p in self.points]
        mems = [(p, m) for p, m in mems if m is not None]
        kinds = ["weights", "kv", "compute"]
        if any(m.overhead_bytes for _, m in mems):
            kinds.append("overhead")
        top = max(max(m.total_bytes for _, m in mems), max(m.available_bytes for _, m in mems)) / GB
        x_axis = context_axis(lo, hi, pal)
        y_axis = value_axis(0.0, top * 1.08, pal, "GB")
        chart.addAxis(x_axis, Qt.AlignmentFlag.AlignBottom)
        chart.addAxis(y_axis, Qt.AlignmentFlag.AlignLeft)
        y_top = y_axis.max()

        # past the last fitting context: a light red band behind everything
        if self.fits_until is None or self.fits_until < hi:
            start = _x(self.fits_until) if self.fits_until is not None else _x(lo)
            band_hi = _line([(start, y_top), (_x(hi), y_top)], "", QPen(Qt.PenStyle.NoPen))
            band_lo = _line([(start, 0.0), (_x(hi), 0.0)], "", QPen(Qt.PenStyle.NoPen))
            band = _area(band_hi, band_lo, "too large", CAPACITY_COLOR, 38)
            band.setPen(QPen(Qt.PenStyle.NoPen))
            _attach(chart, band, x_axis, y_axis)

        base = [0.0] * len(mems)
        for kind in kinds:
            values = [getattr(m, f"{kind}_bytes") / GB for _, m in mems]
            upper = [b + v for b, v in zip(base, values, strict=True)]
            xs = [_x(p.n_ctx) for p, _ in mems]
            area = _area(_line(zip(xs, upper, strict=True), "", QPen()), _line(zip(xs, base, strict=True), "", QPen()),
                         KIND_LABELS[kind], KIND_COLORS[kind], 215)
            _attach(chart, area, x_axis, y_axis)
            base = upper

        cap = _line(((_x(p.n_ctx), m.available_bytes / GB) for p, m in mems),
                    "capacity", make_pen(CAPACITY_COLOR, 2.0, Qt.PenStyle.DashLine))
        _attach(chart, cap, x_axis, y_axis)
        if device != "cpu" and self.full_gpu_until is not None and lo <= self.full_gpu_until < hi:
            marker = _vertical(_x(self.full_gpu_until), y_top, f"leaves GPU: {ctx_label(self.full_gpu_until)}",
                               GPU_LIMIT_COLOR)
            _attach(chart, marker, x_axis, y_axis)
        if self.fits_until is not None and lo <= self.fits_until < hi:
            marker = _vertical(_x(self.fits_until), y_top, f"fits to {ctx_label(self.fits_until)}",
                               CAPACITY_COLOR)
            _attach(chart, marker, x_axis, y_axis)
        # the empty-name helper series (band edges) stay out of the legend
        for marker in chart.legend().markers():
            if not marker.label():
                marker.setVisible(False)


# -- speed vs context ------------------------------------------------------------------------


class SpeedLike(Protocol):
    """A measured point: what runtime.stress.MeasuredSpeed (and StressPoint via
    runtime.stress.measured_speeds) provide."""

    n_ctx: int
    decode_tok_s: float
    prefill_tok_s: float


class SpeedContextPlot(ChartPanel):
    """Decode and prefill speed against the context: the predicted line with its range,
    measured points (stress tests, benchmarks, chats) on top. Two charts, side by side."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, columns=2)
        self.points: list[ContextPoint] = []
        self.measured: list[SpeedLike] = []

    def plot(self, spec, hardware, wishes: Wishes | None = None, contexts: Sequence[int] | None = None, *,
             measured: Sequence[SpeedLike] = (), calibration=None) -> None:
        contexts = list(contexts or context_grid(spec, lo=256, per_doubling=4))
        points = speed_vs_context(spec, hardware, wishes, contexts, calibration=calibration)
        calibrated = ", calibrated on this machine" if calibration is not None and calibration.active else ""
        self.set_data(points, measured,
                      title=f"{spec.name} {spec.file_type}: speed by context on {machine_label(hardware)}{calibrated}")

    def set_data(self, predicted: Sequence[ContextPoint], measured: Sequence[SpeedLike] = (), *, title: str = "") -> None:
        self._clear()
        self.set_title(title)
        self.points = sorted(predicted, key=lambda p: p.n_ctx)
        self.measured = sorted(measured, key=lambda m: m.n_ctx)
        if not self.points:
            self.set_caption("Nothing to plot.")
            return
        lo = min([self.points[0].n_ctx] + [m.n_ctx for m in self.measured])
        hi = max([self.points[-1].n_ctx] + [m.n_ctx for m in self.measured])
        self._chart("decode (generation)", "decode", DECODE_COLOR, lo, hi)
        self._chart("prefill (prompt processing)", "prefill", PREFILL_COLOR, lo, hi)
        fitting = [p for p in self.points if p.fits]
        g = self.points[0].gen_tokens
        caption = f"Predicted for the context filled with a prompt (context minus {g} tokens), then {g} tokens generated."
        if len(fitting) < len(self.points):
            last = fitting[-1].n_ctx if fitting else None
            caption += (f" No prediction past {ctx_label(last)} tokens: the plan does not fit there." if last
                        else " The plan does not fit at any of these contexts.")
        if self.measured:
            caption += f" Dots: {len(self.measured)} measured point(s) (stress tests, benchmarks, chats)."
        self.set_caption(caption)

    def _chart(self, title: str, kind: str, color: str, lo: int, hi: int) -> None:
        pal = self.palette()
        chart = self._new_chart(title)
        fitting = [p for p in self.points if p.fits]

        def rate(p: ContextPoint) -> float:
            return getattr(p.estimate.performance, f"{kind}_tok_s")

        def band(p: ContextPoint) -> tuple[float, float]:
            return getattr(p.estimate.performance, f"{kind}_tok_s_range")

        measured = [(m.n_ctx, getattr(m, f"{kind}_tok_s")) for m in self.measured]
        top = max([band(p)[1] for p in fitting] + [v for _, v in measured] + [1.0])
        x_axis = context_axis(lo, hi, pal)
        y_axis = value_axis(0.0, top * 1.1, pal, "tokens / s")
        chart.addAxis(x_axis, Qt.AlignmentFlag.AlignBottom)
        chart.addAxis(y_axis, Qt.AlignmentFlag.AlignLeft)
        if fitting:
            xs = [_x(p.n_ctx) for p in fitting]
            lo_hi = [band(p) for p in fitting]
            area = _area(_line(zip(xs, [b[1] for b in lo_hi], strict=True), "", QPen()),
                         _line(zip(xs, [b[0] for b in lo_hi], strict=True), "", QPen()),
                         "predicted range", color, 45)
            area.setPen(QPen(Qt.PenStyle.NoPen))
            _attach(chart, area, x_axis, y_axis)
            _attach(chart, _line(zip(xs, [rate(p) for p in fitting], strict=True), "predicted", make_pen(color, 2.5)),
                    x_axis, y_axis)
        if len(fitting) < len(self.points):
            edge = fitting[-1].n_ctx if fitting else lo
            _attach(chart, _vertical(_x(edge), y_axis.max(), "does not fit beyond", CAPACITY_COLOR), x_axis, y_axis)
        if measured:
            dots = QScatterSeries()
            dots.setName("measured")
            dots.append([QPointF(_x(n), v) for n, v in measured])
            dots.setMarkerSize(11.0)
            dots.setColor(QColor(MEASURED_COLOR if not _is_dark(pal) else "#f9fafb"))
            dots.setBorderColor(QColor(color))
            _attach(chart, dots, x_axis, y_axis)
        for marker in chart.legend().markers():
            if not marker.label():
                marker.setVisible(False)


# -- quant comparison ------------------------------------------------------------------------


@dataclass(frozen=True)
class QuantPoint:
    quant: str
    file_bytes: int
    decode_tok_s: float
    prefill_tok_s: float
    kld: float  # mean KL divergence vs F16, scaled for the model's size (catalog/quality.py)
    fit: str


def quant_points(model, hardware, *, n_ctx: int | None = None, calibration=None) -> list[QuantPoint]:
    """Every published quant of a catalog model, planned on `hardware` at n_ctx (default
    the ranking's context) with the ranking's own per-quant estimates (catalog/rank.py)."""
    from rooflight.catalog.quality import quant_kld
    from rooflight.catalog.rank import rank_models

    ranked = rank_models(hardware, ctx=n_ctx, use_case="chat", models=(model,), calibration=calibration)
    if not ranked:
        return []
    return [
        QuantPoint(o.quant, o.estimate.spec.file_bytes, o.estimate.performance.decode_tok_s,
                   o.estimate.performance.prefill_tok_s, quant_kld(o.quant, model.params_total), o.estimate.fit)
        for o in ranked[0].options
    ]


class QuantComparisonPlot(ChartPanel):
    """Each quant of a model side by side in three bar charts that share the quant axis:
    file size, decode speed on this machine, and quality lost to quantization (mean KL
    divergence against F16). Quants that do not fit are marked in their label."""

    METRICS = (
        ("file_bytes", "file size", "GB", QUANT_SIZE_COLOR),
        ("decode_tok_s", "decode speed", "tokens / s", DECODE_COLOR),
        ("kld", "quality loss (lower is better)", "KL divergence vs F16", QUALITY_LOSS_COLOR),
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, columns=3)
        self.points: list[QuantPoint] = []

    def plot(self, model, hardware, *, n_ctx: int | None = None, calibration=None, title: str = "") -> None:
        points = quant_points(model, hardware, n_ctx=n_ctx, calibration=calibration)
        ctx = n_ctx or min(8192, model.hparams.context_length)
        self.set_points(points, title=title or f"{model.name}: quantizations at {ctx_label(ctx)} context on "
                        f"{machine_label(hardware)}")

    def set_points(self, points: Sequence[QuantPoint], *, title: str = "") -> None:
        self._clear()
        self.set_title(title)
        # largest file on top: the bar axis lists categories bottom-up
        self.points = sorted(points, key=lambda q: q.file_bytes)
        if not self.points:
            self.set_caption("Nothing to plot.")
            return
        labels = [q.quant if q.fit != "too_large" else f"{q.quant} (too large)" for q in self.points]
        for attr, name, unit, color in self.METRICS:
            values = [getattr(q, attr) / (GB if attr == "file_bytes" else 1.0) for q in self.points]
            self._bars(f"{name}", unit, labels, values, color, attr)
        self.set_caption(
            "Quality loss: mean KL divergence of the quantized model's next-token distribution from F16's "
            "(llama.cpp perplexity tool, Llama-3-8B, scaled for model size). Decode: predicted for the machine above.")

    def _bars(self, title: str, unit: str, labels: list[str], values: list[float], color: str, attr: str) -> None:
        pal = self.palette()
        chart = self._new_chart(title)
        chart.legend().setVisible(False)
        bar_set = QBarSet(title)
        bar_set.append(values)
        bar_set.setColor(QColor(color))
        bar_set.setBorderColor(QColor(color).darker(130))
        bar_set.setLabelColor(pal.color(QPalette.ColorRole.Text))
        series = QHorizontalBarSeries()
        series.append(bar_set)
        series.setBarWidth(0.7)
        series.setLabelsVisible(True)
        series.setLabelsPosition(QAbstractBarSeries.LabelsPosition.LabelsOutsideEnd)
        top = max(values) or 1.0
        series.setLabelsFormat("@value")
        # significant digits: KLD spans decades (0.0014 to 0.04), the others one
        series.setLabelsPrecision(2 if attr == "kld" else max(2, len(str(int(top))) + (1 if top < 100 else 0)))
        chart.addSeries(series)
        y_axis = QBarCategoryAxis()
        y_axis.append(labels)
        style_axis(y_axis, pal, "")
        x_axis = value_axis(0.0, top * 1.3, pal, unit)
        chart.addAxis(y_axis, Qt.AlignmentFlag.AlignLeft)
        chart.addAxis(x_axis, Qt.AlignmentFlag.AlignBottom)
        series.attachAxis(y_axis)
        series.attachAxis(x_axis)
