"""'Get the GPU build' on This machine: where the installed llama-cpp-python cannot use the detected GPU.

Shows the exact command for this GPU (its backend, CUDA architecture from its compute
capability, the toolkit it needs), runs it in a worker (runtime/gpu_build_run.py) with its
output, progress and Cancel, and asks for a restart when the new build can offload. A
failure keeps the working CPU build and says why in one sentence.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QProcess, Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from rooflight.hardware import GPUInfo, HardwareProfile
from rooflight.hardware.gpu_build import GPUBuild, gpu_build_for
from rooflight.runtime import gpu_build_run
from rooflight.ui.widgets import Note, label

MAX_OUTPUT_LINES = 5000  # a CUDA build prints thousands of lines; older ones scroll away


def gpu_needing_build(detected: HardwareProfile | None, build) -> GPUInfo | None:
    """The first detected GPU the installed build cannot drive, or None (build: BuildInfo)."""
    if detected is None or build is None or not detected.gpus or not getattr(build, "importable", False):
        return None
    return detected.gpus[0] if detected.backend == "cpu" else None


def add_gpu_build_action(card, page, gpu: GPUInfo) -> QPushButton:
    """A 'Get the GPU build' button in the llama.cpp card; it opens the page's build panel,
    which lives outside the cards (they are rebuilt whenever the machine changes), so a
    build keeps running and showing its output whatever the page redraws."""
    button = QPushButton("Get the GPU build")
    button.setAccessibleName("Get the GPU build")
    button.setToolTip(f"Build llama-cpp-python for the {gpu.name} and install it")

    def open_panel() -> None:
        panel = getattr(page, "_gpu_build_panel", None)
        if panel is None or (panel.gpu != gpu and not panel.running):
            if panel is not None:
                panel.hide()
                panel.deleteLater()
            panel = page._gpu_build_panel = GPUBuildPanel(page.ctx, gpu, page)
            page.layout().insertWidget(2, panel)  # under the heading, above "What if…"
        panel.show()

    button.clicked.connect(open_panel)
    card.body.addWidget(button, 0, Qt.AlignmentFlag.AlignLeft)
    return button


class GPUBuildPanel(QFrame):
    """The command, its output while it runs, and the outcome (a panel on This machine)."""

    def __init__(self, ctx, gpu: GPUInfo, parent: QWidget | None = None, build: GPUBuild | None = None) -> None:
        super().__init__(parent)
        self.setProperty("role", "card")
        self.ctx = ctx
        self.gpu = gpu
        self.build = build or gpu_build_for(gpu)
        self.task = None
        self.outcome: gpu_build_run.BuildOutcome | None = None
        self.setAccessibleName("Get the GPU build")
        col = QVBoxLayout(self)
        col.setContentsMargins(16, 12, 16, 12)
        col.addWidget(label("Get the GPU build", "heading"))
        col.addWidget(label(f"The installed llama-cpp-python cannot use the {gpu.name}. This builds it for "
                            f"{self.build.backend.upper()} from source with this command (about 5-20 minutes) "
                            "and installs it; the CPU build stays if anything fails.", wrap=True))
        self.command = label(self.build.command, wrap=True, selectable=True)
        self.command.setAccessibleName("GPU build command")
        self.command.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        col.addWidget(self.command)
        needs = f"Needs {self.build.needs}"
        if self.build.backend == "cuda":
            needs += f": found at {self.build.toolkit}." if self.build.toolkit else ", which was not found."
        else:
            needs += "."
        self.needs = label(needs, "muted", wrap=True)
        self.needs.setAccessibleName("GPU build needs")
        col.addWidget(self.needs)
        self.progress = QProgressBar()
        self.progress.setAccessibleName("GPU build progress")
        self.progress.setRange(0, 100)
        self.progress.hide()
        col.addWidget(self.progress)
        self.output = QPlainTextEdit()
        self.output.setReadOnly(True)
        self.output.setMaximumBlockCount(MAX_OUTPUT_LINES)
        self.output.setAccessibleName("GPU build output")
        self.output.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.output.setMinimumHeight(160)
        col.addWidget(self.output, 1)
        self.result = Note("info", "")
        self.result.hide()
        col.addWidget(self.result)
        row = QHBoxLayout()
        row.addStretch(1)
        self.run_button = QPushButton("Build and install")
        self.run_button.setAccessibleName("Build and install")
        self.run_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setAccessibleName("Cancel the GPU build")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.restart_button = QPushButton("Restart Rooflight")
        self.restart_button.setAccessibleName("Restart Rooflight")
        self.restart_button.hide()
        self.restart_button.clicked.connect(restart_app)
        self.close_button = QPushButton("Close")
        self.close_button.setAccessibleName("Close the GPU build panel")
        self.close_button.clicked.connect(self.hide)  # a running build goes on; the button shows it again
        for b in (self.run_button, self.cancel_button, self.restart_button, self.close_button):
            row.addWidget(b)
        col.addLayout(row)

    @property
    def running(self) -> bool:
        return self.task is not None

    def start(self) -> None:
        if self.running:
            return
        self.output.clear()
        self.result.hide()
        self.progress.setValue(0)
        self.progress.show()
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        build = self.build

        def work(task):
            return gpu_build_run.build_and_install(build, on_line=task.stream, on_progress=task.progress,
                                                   should_stop=task.is_cancelled, runner=gpu_build_run.RUNNER)

        self.task = self.ctx.runner.run(work, with_task=True, what="building llama-cpp-python for the GPU",
                                        on_stream=self.output.appendPlainText,
                                        on_progress=lambda v: self.progress.setValue(round(100 * float(v))),
                                        on_done=self._done, on_error=self._failed, on_cancelled=self._cancelled)

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.cancel_button.setEnabled(False)

    def _finish(self, outcome: gpu_build_run.BuildOutcome) -> None:
        self.task = None
        self.outcome = outcome
        self.run_button.setEnabled(not outcome.ok)
        self.run_button.setText("Try again")
        self.cancel_button.setEnabled(False)
        self.result.setProperty("kind", "info" if outcome.ok else "error")
        self.result.style().unpolish(self.result)
        self.result.style().polish(self.result)
        self.result.text.setText(outcome.message)
        self.result.show()
        self.restart_button.setVisible(outcome.ok)

    def _done(self, outcome) -> None:
        self._finish(outcome)

    def _failed(self, exc: BaseException) -> None:
        self._finish(gpu_build_run.BuildOutcome(False, f"The build could not run ({exc}); the CPU build stays "
                                                       "installed."))

    def _cancelled(self) -> None:
        self._finish(gpu_build_run.BuildOutcome(False, "The build was cancelled; the CPU build stays installed.",
                                                cancelled=True))


def restart_app() -> None:
    """Start Rooflight again the way it was started, then quit this one (the new llama.cpp
    library can only be loaded by a new process)."""
    args = list(getattr(sys, "orig_argv", sys.argv))[1:]
    started = QProcess.startDetached(sys.executable, args)
    if isinstance(started, tuple):  # PySide6 returns (ok, pid)
        started = started[0]
    if started:
        QApplication.quit()
