"""The latest-only task: a widget re-plans (or re-draws) whenever its subject changes, and
only the newest request counts.

    self.replan = LatestTask(self, ctx.runner, self._replan, debounce_ms=60, when_visible=True)
    self.replan.request()              # subject changed: run self._replan after the pause
    ...
    def _replan(self):                 # reads the subject, then
        self.replan.run(plan, spec, ..., on_done=self._show, what="planning")

- `request()` waits `debounce_ms` (a slider moving re-plans once it stops, not on every
  pixel); with `when_visible` it does nothing while the owner is hidden: the owner calls
  `request()` again from its showEvent when its subject changed meanwhile.
- `run()` cancels the task it ran before, so a slow old result never lands over a newer
  one (the runner delivers nothing but on_cancelled for a cancelled task), and forgets
  its task before any callback runs: inside on_done, `busy` is already False.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QWidget


class LatestTask(QObject):
    def __init__(self, owner: QWidget, runner, start: Callable[[], None] | None = None, *,
                 debounce_ms: int = 0, when_visible: bool = False) -> None:
        super().__init__(owner)
        self.owner = owner
        self.runner = runner
        self.when_visible = when_visible
        self.task = None
        self._timer = QTimer(self, singleShot=True, interval=debounce_ms)
        if start is not None:
            self._timer.timeout.connect(start)

    def request(self) -> None:
        """Start the owner's job after the debounce (restarting the wait if one is pending);
        with `when_visible`, only while the owner is visible."""
        if not self.when_visible or self.owner.isVisible():
            self._timer.start()

    def schedule(self) -> None:
        """Start the owner's job after the debounce, visible or not (its showEvent)."""
        self._timer.start()

    def run(self, fn: Callable[..., Any], *args: Any, on_done: Callable[[Any], None] | None = None,
            on_error: Callable[[BaseException], None] | None = None,
            on_cancelled: Callable[[], None] | None = None, **kwargs: Any):
        """ctx.runner.run(fn, *args, ...) in place of the task run before (cancelled).
        Without on_error a failure is the runner's banner, as with runner.run."""
        self.cancel_task()
        mine: list = []

        def then(callback: Callable | None) -> Callable:
            def settle(*value) -> None:
                if mine and self.task is mine[0]:
                    self.task = None
                if callback is not None:
                    callback(*value)
            return settle

        def failed(exc: BaseException) -> None:
            from rooflight.ui.tasks import error_sentence

            self.runner.error.emit(error_sentence(exc, mine[0].what))

        task = self.runner.run(fn, *args, on_done=then(on_done), on_error=then(on_error or failed),
                               on_cancelled=then(on_cancelled), **kwargs)
        mine.append(task)
        self.task = task
        return task

    def cancel_task(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None

    def cancel(self) -> None:
        """Forget the pending request and cancel the running task."""
        self._timer.stop()
        self.cancel_task()

    @property
    def running(self) -> bool:
        return self.task is not None

    @property
    def busy(self) -> bool:
        """A task runs or a request waits out its debounce."""
        return self.task is not None or self._timer.isActive()
