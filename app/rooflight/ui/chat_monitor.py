"""The Chat page's "Live monitor" tab: the hardware monitor (hardware/monitor.py, sampled
off the GUI thread) and its charts (monitor_panel.py).

Both are made when first needed (a model loads, or the tab opens), so the window's start
does not wait for QtCharts.
"""

from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout, QWidget

MONITOR_INTERVAL_S = 0.5


class MonitorTab(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Live monitor")
        QVBoxLayout(self).setContentsMargins(0, 0, 0, 0)
        self.monitor = None  # hardware.monitor.Monitor
        self.panel = None  # monitor_panel.MonitorPanel

    def ensure(self):
        """The monitor, with its charts in this tab (made now if not yet); returns it."""
        if self.monitor is None:
            from rooflight.hardware.monitor import Monitor
            from rooflight.ui.monitor_panel import MonitorPanel

            self.monitor = Monitor(interval_s=MONITOR_INTERVAL_S)
            self.panel = MonitorPanel(self.monitor)
            self.panel.setAccessibleName("Live monitor charts")
            self.layout().addWidget(self.panel)
        return self.monitor

    def start(self) -> None:
        monitor = self.ensure()
        if not monitor.running:
            monitor.start()

    def stop(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()

    def shutdown(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
            self.panel.detach()
