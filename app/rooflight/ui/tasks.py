"""One small task runner: core callables run on worker threads, results come back as
queued Qt signals on the GUI thread (Anki's TaskManager / Orange's FutureWatcher pattern).

    task = runner.run(rank_models, profile, ctx=8192,
                      on_done=show, on_error=None, what="ranking models")

- `on_done(result)` runs on the GUI thread, unless the task was cancelled first.
- `on_error(exc)` runs on the GUI thread; without one, the runner's `error` signal carries
  one sentence (str() of a RooflightError; for anything else a sentence naming `what`)
  and the window shows it as a banner. Tracebacks of unexpected errors go to the log.
- Progress: with `with_task=True` the callable gets the Task first and reports through
  `task.progress(value)` (coalesced: a fast producer such as a download never floods the
  event queue, the GUI sees the latest value) and `task.stream(value)` (every value, in
  order, delivered in batches: tokens of a reply). Core APIs take plain callbacks, so pass
  `task.progress` / `task.stream` / `task.is_cancelled` to them.
- Cancellation: `task.cancel()` sets a flag the callable polls (`task.cancelled`,
  `task.raise_if_cancelled()`); a cancelled task delivers nothing but `on_cancelled`.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from rooflight.errors import RooflightError

log = logging.getLogger(__name__)

# Long tasks (downloads, generation) hold a thread each; keep room for short ones beside them.
MAX_THREADS = 8
# While a worker runs Python, the GUI thread waits for the GIL up to this long each time it
# enters Python (a paint calls the table model many times). CPython's default is 5 ms.
GUI_SWITCH_INTERVAL_S = 0.001


_gc_lock = threading.Lock()
_gc_pauses = 0


@contextmanager
def full_gc_paused() -> Iterator[None]:
    """Hold off Python's cyclic garbage collector while a worker builds many long-lived
    objects (the catalog's model specs), then freeze them out of later collections.

    A full collection runs in whichever thread triggers it and holds the GIL throughout:
    during a cold ranking they took 60-190 ms each here, and the GUI thread stood still for
    as long. Nested and concurrent uses are counted; collection resumes after the last."""
    global _gc_pauses
    with _gc_lock:
        _gc_pauses += 1
        if _gc_pauses == 1:
            gc.disable()
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0:
                # what was built is long-lived (cached specs): move it out of the collector's
                # sight. A collection now would itself be the long pause (~200 ms measured).
                gc.freeze()
                gc.enable()


class TaskCancelled(Exception):
    """Raised inside a task by raise_if_cancelled(); ends it quietly."""


def error_sentence(exc: BaseException, what: str = "") -> str:
    """The one sentence a user sees for an error."""
    if isinstance(exc, RooflightError):
        return str(exc)
    doing = f" while {what}" if what else ""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"Something went wrong{doing} ({type(exc).__name__}{': ' + detail if detail else ''})."


class Task:
    """A handle on one submitted callable; its methods may be called from any thread."""

    def __init__(self, runner: TaskRunner, task_id: int, what: str) -> None:
        self._runner = runner
        self.id = task_id
        self.what = what
        self._cancel = threading.Event()
        self._finished = threading.Event()
        self._lock = threading.Lock()
        self._latest: Any = None
        self._progress_pending = False
        self._items: deque[Any] = deque()
        self._stream_pending = False

    # -- cancellation ----------------------------------------------------------------
    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def is_cancelled(self) -> bool:
        """The flag as a plain callable, for core APIs that poll one."""
        return self._cancel.is_set()

    def raise_if_cancelled(self) -> None:
        if self._cancel.is_set():
            raise TaskCancelled()

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the callable returned (for shutdown and tests, not the GUI thread)."""
        return self._finished.wait(timeout)

    # -- reporting from the worker ---------------------------------------------------
    def progress(self, value: Any = None) -> None:
        """Latest-value progress: one queued signal at a time, the newest value wins."""
        with self._lock:
            self._latest = value
            if self._progress_pending:
                return
            self._progress_pending = True
        self._runner._bridge.progress.emit(self.id)

    def stream(self, value: Any) -> None:
        """Every value, in order (batched into few queued signals)."""
        with self._lock:
            self._items.append(value)
            if self._stream_pending:
                return
            self._stream_pending = True
        self._runner._bridge.stream.emit(self.id)

    def _take_progress(self) -> Any:
        with self._lock:
            self._progress_pending = False
            return self._latest

    def _take_stream(self) -> list[Any]:
        with self._lock:
            self._stream_pending = False
            items = list(self._items)
            self._items.clear()
            return items


class _Bridge(QObject):
    """Lives on the GUI thread; workers emit its signals, so delivery is queued there."""

    done = Signal(int, object)
    failed = Signal(int, object)
    progress = Signal(int)
    stream = Signal(int)


class _Runnable(QRunnable):
    def __init__(self, task: Task, fn: Callable[..., Any], args: tuple, kwargs: dict, with_task: bool) -> None:
        super().__init__()
        self.setAutoDelete(True)
        self.task, self.fn, self.args, self.kwargs, self.with_task = task, fn, args, kwargs, with_task

    def run(self) -> None:  # worker thread
        task, bridge = self.task, self.task._runner._bridge
        try:
            if task.cancelled:
                raise TaskCancelled()
            args = (task, *self.args) if self.with_task else self.args
            result = self.fn(*args, **self.kwargs)
        except TaskCancelled:
            task._finished.set()
            bridge.done.emit(task.id, None)
            return
        except BaseException as exc:  # noqa: BLE001 - a worker must never take the app down
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            if not isinstance(exc, RooflightError):
                log.error("task %r failed:\n%s", task.what, traceback.format_exc())
            task._finished.set()
            bridge.failed.emit(task.id, exc)
            return
        task._finished.set()
        bridge.done.emit(task.id, result)


class _Callbacks:
    __slots__ = ("task", "on_done", "on_error", "on_progress", "on_stream", "on_cancelled")

    def __init__(self, task, on_done, on_error, on_progress, on_stream, on_cancelled) -> None:
        self.task, self.on_done, self.on_error = task, on_done, on_error
        self.on_progress, self.on_stream, self.on_cancelled = on_progress, on_stream, on_cancelled


class TaskRunner(QObject):
    """Runs callables on a private thread pool and delivers their outcome on the GUI thread.

    Create it on the GUI thread. `error(str)` carries the sentence of any failure that had
    no on_error handler; `busy_changed(bool)` says whether anything is running.
    """

    error = Signal(str)
    busy_changed = Signal(bool)

    def __init__(self, parent: QObject | None = None, max_threads: int = MAX_THREADS) -> None:
        super().__init__(parent)
        if sys.getswitchinterval() > GUI_SWITCH_INTERVAL_S:
            sys.setswitchinterval(GUI_SWITCH_INTERVAL_S)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(max_threads)
        self._bridge = _Bridge(self)
        self._bridge.done.connect(self._on_done)
        self._bridge.failed.connect(self._on_failed)
        self._bridge.progress.connect(self._on_progress)
        self._bridge.stream.connect(self._on_stream)
        self._tasks: dict[int, _Callbacks] = {}
        self._next_id = 1
        self._closed = False

    def run(
        self,
        fn: Callable[..., Any],
        *args: Any,
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        on_progress: Callable[[Any], None] | None = None,
        on_stream: Callable[[Any], None] | None = None,
        on_cancelled: Callable[[], None] | None = None,
        with_task: bool = False,
        what: str = "",
        **kwargs: Any,
    ) -> Task:
        """Start fn(*args, **kwargs) (or fn(task, *args, **kwargs)) on a worker thread."""
        task = Task(self, self._next_id, what or getattr(fn, "__name__", "working"))
        self._next_id += 1
        if self._closed:
            task.cancel()
            task._finished.set()
            return task
        self._tasks[task.id] = _Callbacks(task, on_done, on_error, on_progress, on_stream, on_cancelled)
        if len(self._tasks) == 1:
            self.busy_changed.emit(True)
        self._pool.start(_Runnable(task, fn, args, kwargs, with_task))
        return task

    @property
    def active(self) -> int:
        return len(self._tasks)

    def cancel_all(self) -> None:
        for cb in list(self._tasks.values()):
            cb.task.cancel()

    def shutdown(self, timeout_ms: int = 5000) -> bool:
        """Cancel everything and wait for the workers (window closing); True if all ended."""
        self._closed = True
        self.cancel_all()
        return self._pool.waitForDone(timeout_ms)

    def wait_idle(self, timeout_ms: int = 10000) -> bool:
        """Wait for the workers to finish (tests, shutdown); results are delivered later,
        when the event loop runs."""
        return self._pool.waitForDone(timeout_ms)

    # -- GUI thread ------------------------------------------------------------------
    def _finish(self, task_id: int) -> _Callbacks | None:
        cb = self._tasks.pop(task_id, None)
        if cb is not None and not self._tasks:
            self.busy_changed.emit(False)
        return cb

    def _flush(self, cb: _Callbacks) -> None:
        # deliver what a task reported before it ended, so a stream is never cut short
        if cb.on_stream is not None:
            for item in cb.task._take_stream():
                cb.on_stream(item)

    def _settle(self, task_id: int) -> _Callbacks | None:
        """The callbacks of a task that ended, with its stream delivered; None when it was
        cancelled (on_cancelled has run) or is unknown."""
        cb = self._finish(task_id)
        if cb is None:
            return None
        if cb.task.cancelled:
            if cb.on_cancelled is not None:
                cb.on_cancelled()
            return None
        self._flush(cb)
        return cb

    @Slot(int, object)
    def _on_done(self, task_id: int, result: object) -> None:
        cb = self._settle(task_id)
        if cb is not None and cb.on_done is not None:
            cb.on_done(result)

    @Slot(int, object)
    def _on_failed(self, task_id: int, exc: object) -> None:
        cb = self._settle(task_id)
        assert isinstance(exc, BaseException)
        if cb is None:
            return  # cancelled (on_cancelled has run) or unknown: its error concerns no one now
        if cb.on_error is not None:
            cb.on_error(exc)
        else:
            self.error.emit(error_sentence(exc, cb.task.what))

    @Slot(int)
    def _on_progress(self, task_id: int) -> None:
        cb = self._tasks.get(task_id)
        if cb is None:
            return
        value = cb.task._take_progress()
        if cb.on_progress is not None and not cb.task.cancelled:
            cb.on_progress(value)

    @Slot(int)
    def _on_stream(self, task_id: int) -> None:
        cb = self._tasks.get(task_id)
        if cb is None or cb.task.cancelled:
            return
        if cb.on_stream is not None:
            for item in cb.task._take_stream():
                cb.on_stream(item)
