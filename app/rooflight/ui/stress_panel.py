"""The model detail's Stress test tab (issue 10): run the chosen quant's file on this machine
over growing contexts and show, for each, the measured prefill and decode speed and
llama.cpp's own memory beside the plan; the run stops before a context the plan says will
not fit, and says so in the StressStop's sentence.

runtime.stress.run_stress does the work in a worker (one llama.cpp load per context);
each point comes back through task.stream as it is measured and joins the table and the
detail's speed plot (measured dots). Stop sets should_stop: the point being measured
completes, then the run ends. Only this machine as detected can be measured: a what-if
machine is not the one the runs would happen on, and a file not on disk cannot be loaded.
Points measured on this machine (not a --hardware profile) are stored for calibration.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rooflight.estimate import Wishes
from rooflight.ui.latest import LatestTask
from rooflight.ui.widgets import Note, ctx_label, label, readonly_table, tok_s
from rooflight.units import size_text

SHUTDOWN_WAIT_S = 10.0
ROW_HEIGHT = 30
MIN_ROWS = 4  # the table's height before the points come: room for a typical run
COLS = ("Context", "GPU layers", "Prefill tok/s", "Decode tok/s", "Memory (llama.cpp buffers)")
WHAT_IF_TIP = ("A stress test runs on this machine: clear “What if…” on the This machine page "
               "to run one.")
NOT_INSTALLED_TIP = "Download this quant first: a stress test loads the file on this machine."
NO_MACHINE_TIP = "Waiting for this machine to be detected."


# -- worker side -------------------------------------------------------------------------

def run_stress_test(task, path: str, hardware, wishes: Wishes, contexts: list[int] | None,
                    stop: threading.Event, this_machine: bool):
    """Worker side: run_stress on `path` with the detail's settings. On this machine the
    free memory is read again first (a chat may hold a model now) and the points are
    stored for calibration; task.progress gets each context's plan before its load,
    task.stream each measured point."""
    from rooflight.gguf import load_model_spec
    from rooflight.runtime.loader import effective_hardware, refresh_free_memory
    from rooflight.runtime.stress import default_contexts, run_stress
    from rooflight.store.calibration import CalibrationStore, machine_key

    spec = load_model_spec(str(path))
    hardware, _cpu_only = effective_hardware(hardware)  # as this llama-cpp-python build runs it
    if this_machine:
        hardware = refresh_free_memory(hardware)
    store = CalibrationStore() if this_machine else None
    machine = machine_key(hardware)
    try:
        if store is not None and wishes.n_threads is None:
            # the thread count plans on this machine use (as `rooflight stress` does)
            preferred = store.calibration(machine, hardware.backend).preferred_threads(spec.file_bytes)
            wishes = replace(wishes, n_threads=preferred)
        return run_stress(path, spec, hardware, contexts=contexts or default_contexts(spec), wishes=wishes,
                          store=store, machine=machine if this_machine else None,
                          on_plan=task.progress, on_point=task.stream, should_stop=stop.is_set)
    finally:
        if store is not None:
            store.close()


# -- words ---------------------------------------------------------------------------------

def _size(n: int) -> str:
    return size_text(n, 2, mb_digits=1)


def point_cells(point) -> list[str]:
    """One row: the context, GPU layers, and each figure measured beside the plan's."""
    est = point.planned.estimate
    p, m = est.performance, point.measured
    return [ctx_label(point.n_ctx), str(est.config.n_gpu_layers),
            f"{tok_s(m.prefill_tok_s)} (plan {tok_s(p.prefill_tok_s)})",
            f"{tok_s(m.decode_tok_s)} (plan {tok_s(p.decode_tok_s)})",
            f"{_size(point.memory.total_bytes)} (plan {_size(point.planned_bytes)})"]


# -- the panel -------------------------------------------------------------------------------

class StressPanel(QWidget):
    """The Stress test button, Stop, the points measured so far and how the run ended."""

    point_measured = Signal(object)  # runtime.stress.StressPoint, as it lands
    finished = Signal(object)  # runtime.stress.StressResult (None if it failed)

    def __init__(self, ctx, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.contexts: list[int] | None = None  # None: 512, 2K, 8K, 32K ... to the trained context
        self.points: list = []
        self.result = None
        self._subject: tuple | None = None  # (path, title, wishes, hardware, key) of the quant shown
        self.run_key = None  # the key of the quant being (or last) measured
        self._run_title = ""
        self._reason = NO_MACHINE_TIP
        self._latest = LatestTask(self, ctx.runner)  # one run at a time; Stop ends it
        self._stop: threading.Event | None = None
        self.setAccessibleName("Stress test")

        col = QVBoxLayout(self)
        col.setContentsMargins(0, 8, 0, 0)
        col.setSpacing(8)
        self.intro = label("Loads the file on this machine at growing contexts (512, 2K, 8K, 32K … up to the "
                           "model's trained context), fills each with a prompt and generates a few tokens: "
                           "measured speed and llama.cpp's memory beside the plan, with the settings of the "
                           "Plan tab. It stops before a context the plan says will not fit.", "muted", wrap=True)
        col.addWidget(self.intro)
        row = QHBoxLayout()
        row.setSpacing(8)
        self.run_button = QPushButton("Stress test")
        self.run_button.setProperty("primary", True)
        self.run_button.setAccessibleName("Run a stress test")
        self.run_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setAccessibleName("Stop the stress test")
        self.stop_button.setToolTip("Stop after the context being measured")
        self.stop_button.clicked.connect(self.stop)
        self.status = label("", "muted", wrap=True)
        self.status.setAccessibleName("Stress test status")
        row.addWidget(self.run_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.stop_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.status, 1)
        col.addLayout(row)

        self.table = readonly_table(COLS, "Stress test points")
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setStretchLastSection(False)
        hh.setHighlightSections(False)
        self.table.verticalHeader().setDefaultSectionSize(ROW_HEIGHT)
        # as wide as its columns: the figures stay next to their headings
        self.table.setSizeAdjustPolicy(QAbstractScrollArea.SizeAdjustPolicy.AdjustToContents)
        col.addWidget(self.table, 0, Qt.AlignmentFlag.AlignLeft)
        self.stop_note = Note("warning", "")
        self.stop_note.text.setAccessibleName("Why the stress test stopped")
        self.stop_note.hide()
        col.addWidget(self.stop_note)
        col.addStretch(1)
        self._fit_table()
        self._update()

    # -- input ---------------------------------------------------------------------------
    def set_subject(self, path: str | None, title: str, wishes: Wishes, hardware, what_if: bool,
                    key=None) -> None:
        """The quant the detail shows: its local file (None: not downloaded), the plan's
        settings and the machine in use; `key` names it in point_measured's receivers."""
        if what_if:
            self._subject, self._reason = None, WHAT_IF_TIP
        elif hardware is None:
            self._subject, self._reason = None, NO_MACHINE_TIP
        elif not path:
            self._subject, self._reason = None, NOT_INSTALLED_TIP
        else:
            self._subject, self._reason = (path, title, wishes, hardware, key), ""
        self._update()

    @property
    def running(self) -> bool:
        return self._latest.running

    @property
    def can_run(self) -> bool:
        return self._subject is not None and not self.running

    # -- running ---------------------------------------------------------------------------
    def start(self) -> None:
        if not self.can_run:
            return
        from rooflight.ui.chat_load import is_this_machine

        path, _title, wishes, hardware, self.run_key = self._subject
        self.points, self.result = [], None
        self.table.setRowCount(0)
        self._fit_table()
        self.stop_note.hide()
        self._stop = threading.Event()
        self._run_title = Path(path).name  # the file measured, whatever the detail shows later
        self.status.setText(f"{self._run_title}: reading the file…")
        self._latest.run(
            run_stress_test, path, hardware, wishes, self.contexts, self._stop, is_this_machine(hardware),
            with_task=True, on_progress=self._planning, on_stream=self._point, on_done=self._done,
            on_error=self._failed, on_cancelled=self._ended, what="running the stress test")
        self._update()

    def stop(self) -> None:
        """Stop after the context being measured (llama.cpp cannot be interrupted mid-load)."""
        if self._stop is not None and not self._stop.is_set():
            self._stop.set()
            self.status.setText(f"{self._run_title}: stopping after the context being measured…")
            self._update()

    def _planning(self, point) -> None:
        if self._stop is not None and self._stop.is_set():
            return
        est = point.estimate
        self.status.setText(
            f"{self._run_title}: measuring {ctx_label(point.n_ctx)} context — {point.prompt_tokens} prompt tokens, "
            f"then {point.gen_tokens} generated (predicted {tok_s(est.performance.prefill_tok_s)} and "
            f"{tok_s(est.performance.decode_tok_s)} tok/s)…")

    def _point(self, point) -> None:
        self.points.append(point)
        row = self.table.rowCount()
        self.table.setRowCount(row + 1)
        for c, text in enumerate(point_cells(point)):
            item = QTableWidgetItem(text)
            if c:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(row, c, item)
        self._fit_table()
        self.point_measured.emit(point)

    def _fit_table(self) -> None:
        """As tall as its rows (a small table, not a box of empty space)."""
        rows = max(MIN_ROWS, self.table.rowCount())
        frame = 2 * self.table.frameWidth()
        self.table.setFixedHeight(self.table.horizontalHeader().sizeHint().height() + rows * ROW_HEIGHT + frame)

    def _done(self, result) -> None:
        self._ended()
        self.result = result
        n = len(result.points)
        stored = ("Stored for calibration: later estimates on this machine use it." if result.stored
                  else "Not stored for calibration (the machine is a profile, not the one measured).")
        self.status.setText(f"{self._run_title}: {n} context{'s' if n != 1 else ''} measured. {stored}"
                            if n else f"{self._run_title}: no context was measured.")
        if result.stopped is not None:
            kind = "info" if result.stopped.reason in ("cancelled", "beyond_trained_context") else "warning"
            self.stop_note.setProperty("kind", kind)
            self.stop_note.style().unpolish(self.stop_note)
            self.stop_note.style().polish(self.stop_note)
            self.stop_note.text.setText(result.stopped.message)
            self.stop_note.show()
        self.finished.emit(result)

    def _failed(self, exc: BaseException) -> None:
        from rooflight.ui.tasks import error_sentence

        self._ended()
        self.status.setText(error_sentence(exc, "running the stress test"))
        self.finished.emit(None)

    def _ended(self) -> None:
        self._stop = None
        self._update()

    def _update(self) -> None:
        self.run_button.setEnabled(self.can_run)
        self.run_button.setToolTip(self._reason if self._subject is None else
                                   f"Measure {self._subject[1]} on this machine over growing contexts")
        self.stop_button.setVisible(self.running)
        self.stop_button.setEnabled(self._stop is not None and not self._stop.is_set())
        if not self.running and not self.points and self.result is None:
            self.status.setText(self._reason)

    def shutdown(self) -> None:
        """Window closing: stop after the point being measured, and wait for it."""
        if self._stop is not None:
            self._stop.set()
        if self._latest.task is not None:
            self._latest.task.wait(SHUTDOWN_WAIT_S)
