"""The model the Chat page talks to: loads the model bar's plan (chat_load.LoadPanel) in a
worker, holds the loaded runtime.engine.Engine, and frees it.

The model loaded before is freed in the same worker, before the new one loads (two models
at once may not fit). A load the user cancels, or one refused because free memory fell
since planning, ends with the panel saying so; an engine that arrives after the window
closed is closed at once.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from rooflight.ui.chat_workers import load_model


class ModelSlot(QObject):
    loaded = Signal(object)  # the Engine, ready
    ended = Signal()  # a load ended (done, failed or cancelled): what the page shows may change

    def __init__(self, ctx, panel, monitor_tab, parent: QObject | None = None) -> None:
        """`panel`: the LoadPanel (progress, refusals, what is loaded); `monitor_tab`: the
        chat's MonitorTab, whose monitor runs while a model loads or is loaded."""
        super().__init__(parent)
        self.ctx, self.panel, self.monitor_tab = ctx, panel, monitor_tab
        self.engine = None
        self.task = None
        self.holder: list = []  # engines a worker made, closed at shutdown if not delivered
        self.closed = False
        self._cancel: threading.Event | None = None

    @property
    def loading(self) -> bool:
        return self.task is not None

    def load(self, lp, force: bool = False) -> None:
        """Load `lp` in a worker; the engine loaded before is freed first."""
        previous, self.engine = self.engine, None
        self.panel.set_loaded(None)
        self._cancel = threading.Event()
        self.holder = []
        self.panel.set_loading(True, f"Loading {lp.path.name}…")
        self.monitor_tab.start()
        self.task = self.ctx.runner.run(
            load_model, lp, force, self._cancel, previous, self.holder, with_task=True,
            on_progress=self.panel.set_progress, on_done=self._done, on_error=self._failed,
            on_cancelled=self._ended, what="loading the model")

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    def release(self) -> None:
        """Free the loaded engine (in a worker: closing waits for a reply still finishing)."""
        engine, self.engine = self.engine, None
        self.panel.set_loaded(None)
        self.monitor_tab.stop()
        if engine is not None:
            self.ctx.runner.run(engine.close, what="unloading the model")

    def _ended(self) -> None:
        self.task = None
        self._cancel = None
        self.panel.set_loading(False)
        if self.engine is None:
            self.monitor_tab.stop()
        self.ended.emit()

    def _done(self, engine) -> None:
        if self.closed:
            engine.close()
            return
        self.engine = engine
        self._ended()
        self.panel.set_loaded(str(engine.plan.path), engine.config)
        self.loaded.emit(engine)

    def _failed(self, exc: BaseException) -> None:
        from rooflight.runtime.engine import LoadCancelledError, LoadRefusedError

        self._ended()
        if isinstance(exc, LoadRefusedError):
            self.panel.show_refusal(str(exc))  # free memory fell since planning
        elif not isinstance(exc, LoadCancelledError):
            self.ctx.report(exc, "loading the model")

    def shutdown(self, wait_s: float) -> None:
        """The window closes: cancel a load, wait for it, close every engine made."""
        self.closed = True
        self.cancel()
        if self.task is not None:
            self.task.wait(wait_s)

    def close_engines(self) -> None:
        engines = [self.engine, *self.holder]
        self.engine = None
        for engine in engines:
            if engine is not None:
                engine.close()
