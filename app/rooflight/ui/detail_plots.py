"""The plots in the model detail (issue 10): memory vs context, speed vs context and the
quant comparison of ui/plots.py, for the chosen quant and settings on the machine in use,
each exportable as PNG or SVG.

The sweeps (a few dozen plans) and the stored measurements are read in a worker; the
charts are drawn on the GUI thread. A stress test run from the detail adds its points as
they are measured (add_measured), so they show before the store is read again. QtCharts is imported when the tab is first shown, so
it costs nothing at start-up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QFileDialog,
    QHBoxLayout,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from rooflight.estimate import Wishes
from rooflight.ui.latest import LatestTask
from rooflight.ui.stack_page import StackPage
from rooflight.ui.widgets import label

log = logging.getLogger(__name__)

DEBOUNCE_MS = 120
KINDS = (("memory", "Memory vs context"), ("speed", "Speed vs context"), ("quants", "Quantizations"))
CHART_HEIGHT = 300  # per chart row: the detail scrolls, the charts stay readable


@dataclass(frozen=True)
class PlotData:
    memory: list  # estimate.sweep.ContextPoint
    full_gpu_until: int | None
    fits_until: int | None
    speed: list  # ContextPoint, with the calibration applied
    measured: list  # runtime.stress.MeasuredSpeed on this machine


def sweep(spec, hardware, wishes: Wishes, calibration, measured_key: tuple | None) -> PlotData:
    """Worker side: the model planned over contexts (256 tokens to its trained context,
    four points per doubling), the two limits, and what was measured here before."""
    from rooflight.estimate.sweep import (
        context_grid,
        max_fitting_context,
        max_full_gpu_context,
        memory_vs_context,
        speed_vs_context,
    )

    contexts = context_grid(spec, lo=256, per_doubling=4)
    hi = max(contexts)
    memory = memory_vs_context(spec, hardware, wishes, contexts)
    gpu = bool(hardware.offload_gpus)
    full = max_full_gpu_context(spec, hardware, wishes, hi=hi) if gpu else None
    fits = max_fitting_context(spec, hardware, wishes, hi=hi)
    speed = speed_vs_context(spec, hardware, wishes, contexts, calibration=calibration)
    measured = []
    if measured_key is not None:  # stress runs, benchmarks and chats of this file on this machine
        try:
            from rooflight.runtime.stress import stored_speeds

            measured = stored_speeds(*measured_key)
        except Exception as exc:  # an unreadable store: the predicted lines still help
            log.warning("measured speeds not read: %s", exc)
    return PlotData(memory, full, fits, speed, measured)


class DetailPlots(QWidget):
    plotted = Signal()  # charts drawn for the current subject (tests, screenshots)

    def __init__(self, ctx, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.panels: dict[str, QWidget] = {}
        self._pages: dict[str, StackPage] = {}
        self._subject: tuple | None = None
        self._drawn: tuple | None = None
        self._data: PlotData | None = None
        self._extra: dict[tuple, list] = {}  # (model id, quant) -> MeasuredSpeed from stress runs
        self.setAccessibleName("Plots")
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 8, 0, 0)
        col.setSpacing(8)
        row = QHBoxLayout()
        row.setSpacing(6)
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.kind_buttons: dict[str, QPushButton] = {}
        for i, (key, text) in enumerate(KINDS):
            b = QPushButton(text)
            b.setCheckable(True)
            b.setAccessibleName(f"Show {text.lower()}")
            self.group.addButton(b, i)
            self.kind_buttons[key] = b
            row.addWidget(b)
        row.addStretch(1)
        self.png = QPushButton("Export PNG…")
        self.svg = QPushButton("Export SVG…")
        self.png.setAccessibleName("Export the plot as PNG")
        self.svg.setAccessibleName("Export the plot as SVG")
        self.png.clicked.connect(lambda: self._export_dialog("png"))
        self.svg.clicked.connect(lambda: self._export_dialog("svg"))
        row.addWidget(self.png)
        row.addWidget(self.svg)
        col.addLayout(row)
        self.status = label("", "muted", wrap=True)
        col.addWidget(self.status)
        self.stack = QStackedWidget()
        col.addWidget(self.stack, 1)
        self.kind_buttons["memory"].setChecked(True)
        self.group.idToggled.connect(self._kind_toggled)
        self._latest = LatestTask(self, ctx.runner, self._run, debounce_ms=DEBOUNCE_MS, when_visible=True)
        ctx.theme_changed.connect(self._theme_changed)

    # -- input -------------------------------------------------------------------------------
    def set_subject(self, model, option, options, wishes: Wishes, hardware, calibration, what_if: bool) -> None:
        """The chosen quant (a QuantOption), all options (for the comparison), the plan's
        settings and the machine. Drawn when the tab is visible."""
        self._subject = (model, option, tuple(options), wishes, hardware, calibration, what_if)
        self._latest.request()

    def add_measured(self, key: tuple, point) -> None:
        """A stress point (runtime.stress.StressPoint) measured for (model id, quant): a
        measured dot on its speed plot, drawn at once when that plot is the one shown."""
        from rooflight.runtime.stress import MeasuredSpeed

        speed = MeasuredSpeed(point.prompt_tokens + point.gen_tokens, point.measured.decode_tok_s,
                              point.measured.prefill_tok_s, point.planned.n_gpu_layers)
        self._extra.setdefault(key, []).append(speed)
        drawn = self._drawn
        if (drawn is not None and self._data is not None and not self._latest.running
                and (drawn[0].id, drawn[1].quant) == key):  # (a sweep on its way draws it too)
            self._draw(drawn, self._data)

    def measured_for(self, model, quant: str, stored: list) -> list:
        """The stored measurements and this session's stress points, each once."""
        return stored + [m for m in self._extra.get((model.id, quant), []) if m not in stored]

    def clear(self) -> None:
        self._subject = self._drawn = self._data = None
        self._latest.cancel_task()

    def _theme_changed(self, _colors) -> None:
        # charts take the palette when they are made: make them again
        self._drawn = None
        self._latest.request()

    @property
    def kind(self) -> str:
        return KINDS[max(0, self.group.checkedId())][0]

    def current_panel(self):
        return self.panels.get(self.kind)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self._ensure_panels()
        if self._subject is not None and self._subject != self._drawn:
            self._latest.schedule()

    @property
    def busy(self) -> bool:
        return self._latest.busy

    def _ensure_panels(self) -> None:
        if self.panels:
            return
        from rooflight.ui.plots import MemoryContextPlot, QuantComparisonPlot, SpeedContextPlot

        for key, cls in (("memory", MemoryContextPlot), ("speed", SpeedContextPlot), ("quants", QuantComparisonPlot)):
            panel = cls()
            panel.setAccessibleName(dict(KINDS)[key])
            self.panels[key] = panel
            self._pages[key] = StackPage(panel)
            self.stack.addWidget(self._pages[key])
        self._kind_toggled(self.group.checkedId(), True)

    def _kind_toggled(self, index: int, on: bool) -> None:
        button = self.group.button(index)
        button.setProperty("primary", on)  # the style sheet's accent: which plot is shown
        button.style().unpolish(button)
        button.style().polish(button)
        if on and self.panels:
            key = KINDS[index][0]
            self.stack.setCurrentWidget(self._pages[key])
            self._fit_height(self.panels[key])

    def _fit_height(self, panel) -> None:
        # the panel's size hint counts its rows of charts (300 px each) and its captions
        self.stack.setMinimumHeight(max(CHART_HEIGHT, panel.sizeHint().height()))

    def _run(self) -> None:
        subject = self._subject
        if subject is None or subject == self._drawn:
            return
        from rooflight.store.calibration import machine_key

        model, option, _options, wishes, hardware, calibration, what_if = subject
        spec = option.estimate.spec
        key = None if what_if else (spec.name, spec.file_type, machine_key(hardware), hardware.backend)
        self.status.setText("Planning over contexts…")
        self._latest.run(sweep, spec, hardware, wishes, calibration, key,
                         on_done=lambda data, s=subject: self._draw(s, data),
                         on_error=self._failed, what="planning the plots")

    def _failed(self, exc: BaseException) -> None:
        self.status.setText("")
        self.ctx.report(exc, "planning the plots")

    def _draw(self, subject: tuple, data: PlotData) -> None:
        from rooflight.catalog.quality import quant_kld
        from rooflight.ui.plots import QuantPoint, ctx_label, machine_label

        self._ensure_panels()
        model, option, options, wishes, hardware, calibration, what_if = subject
        on = machine_label(hardware) + (" (what if)" if what_if else "")
        names = {f"gpu{g.index}": g.name for g in hardware.gpus}
        self.panels["memory"].set_points(
            data.memory, full_gpu_until=data.full_gpu_until, fits_until=data.fits_until, device_names=names,
            title=f"{model.name} {option.quant}: memory by context on {on}")
        calibrated = ", calibrated on this machine" if calibration is not None and calibration.active else ""
        measured = [] if what_if else self.measured_for(model, option.quant, data.measured)
        self.panels["speed"].set_data(data.speed, measured,
                                      title=f"{model.name} {option.quant}: speed by context on {on}{calibrated}")
        points = [QuantPoint(o.quant, o.estimate.spec.file_bytes, o.estimate.performance.decode_tok_s,
                             o.estimate.performance.prefill_tok_s, quant_kld(o.quant, model.params_total),
                             o.estimate.fit) for o in options]
        n_ctx = option.estimate.config.n_ctx
        self.panels["quants"].set_points(
            points, title=f"{model.name}: quantizations at {ctx_label(n_ctx)} context on {on}")
        self._fit_height(self.current_panel())
        cfg = option.estimate.config
        settings = f"Planned with KV cache {cfg.kv_type}, flash attention {'on' if cfg.flash_attn else 'off'}, " + (
            "the most GPU layers that fit" if wishes.n_gpu_layers == "auto" else f"{wishes.n_gpu_layers} GPU layers")
        if what_if:
            self.status.setText(f"{settings}; a what-if machine has no measurements.")
        else:
            self.status.setText(f"{settings}; {len(measured)} measured point(s) of this file on this machine.")
        self._drawn, self._data = subject, data
        self.plotted.emit()

    # -- export ------------------------------------------------------------------------------
    def export(self, path: str | Path, kind: str | None = None) -> Path:
        """Write one plot as PNG or SVG, by the file's suffix; `kind` (memory | speed |
        quants) is shown first, as a chart view draws nothing while it is hidden."""
        self._ensure_panels()
        if kind is not None and kind != self.kind:
            self.kind_buttons[kind].setChecked(True)
        panel = self.panels[self.kind]
        # charts drawn a moment ago are built and laid out by posted events (layouts,
        # QtCharts' own): deliver them, or the export is an empty canvas
        QCoreApplication.sendPostedEvents()
        path = Path(path)
        if path.suffix.lower() == ".svg":
            return panel.export_svg(path)
        return panel.export_png(path.with_suffix(".png") if path.suffix.lower() != ".png" else path)

    def _export_dialog(self, fmt: str) -> None:
        panel = self.current_panel()
        if panel is None or not panel.charts():
            return
        default = f"{self.kind}.{fmt}"
        filters = "PNG image (*.png)" if fmt == "png" else "SVG drawing (*.svg)"
        path, _ = QFileDialog.getSaveFileName(self, "Export the plot", default, filters)
        if not path:
            return
        if not path.lower().endswith(f".{fmt}"):
            path += f".{fmt}"
        try:
            written = self.export(path)
        except OSError as exc:
            self.ctx.show_error(str(exc) if str(exc).endswith(".") else f"Could not export the plot: {exc}.")
            return
        self.ctx.show_info(f"Plot saved as {written}.")
