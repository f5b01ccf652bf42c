"""Downloads: the queue of model downloads, each with a progress bar, speed, time left and
its checksum check; pause, resume, cancel (asking whether to delete the partial data),
retry, and errors in one plain sentence.

Over rooflight.download.DownloadQueue (plain threads, no Qt): its events arrive on download
threads and are turned into a queued signal here, so widgets are only touched on the GUI
thread. The page registers ctx.actions' download handler (the Models page's Download
buttons), marks finished files installed in ctx.installed (the Models page then offers
Chat), and, with "Open a chat when done", asks for a chat with what it just downloaded.

Closing the window pauses every download (the partial files stay); the next start lists
them again from the installed store and resumes those that were running. The queue (and
its store) is opened in a worker after the first paint: rooflight.download is imported
there, not at start-up.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from rooflight.errors import RooflightError
from rooflight.ui.pages.base import Page
from rooflight.ui.widgets import Note, label

log = logging.getLogger(__name__)

BAR_STEPS = 1000
SHUTDOWN_WAIT_S = 10.0  # a transfer notices a pause between two chunks: well under a second


class JobState:
    """download.queue.JobState's values (a StrEnum, so equal to these strings): the page
    compares states without importing rooflight.download on the GUI thread."""

    QUEUED, RUNNING, PAUSED = "queued", "running", "paused"
    DONE, FAILED, CANCELLED = "done", "failed", "cancelled"


# download.progress phases
RESOLVING, WAITING, DOWNLOADING, VERIFYING, DONE = "resolving", "waiting", "downloading", "verifying", "done"
ACTIVE = (JobState.QUEUED, JobState.RUNNING)


def format_bytes(n: int) -> str:
    from rooflight.download.diskspace import format_bytes as fmt  # loaded with the queue

    return fmt(n)


def open_queue(on_event, opened: list):
    """Worker side: the download queue, with last time's unfinished downloads listed
    (paused, bytes on disk). `opened` also gets it, for a window closed meanwhile."""
    from rooflight.download import DownloadQueue

    queue = DownloadQueue(on_event, restore=True)
    opened.append(queue)
    return queue


# -- words (plain functions, tested without widgets) -----------------------------------------

def duration(seconds: float) -> str:
    """under a second, 45 s, 3 min 20 s, 1 h 05 min."""
    if seconds < 0.5:
        return "under a second"
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m} min {s:02d} s" if m < 10 else f"{m} min"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def _short_hash(h: str) -> str:
    return h[:12] + "…" if len(h) > 12 else h


STATE_WORDS = {
    JobState.QUEUED: "Queued",
    JobState.RUNNING: "Downloading",
    JobState.PAUSED: "Paused",
    JobState.DONE: "Verified",
    JobState.FAILED: "Failed",
    JobState.CANCELLED: "Cancelled",
}

PHASE_WORDS = {RESOLVING: "Starting", WAITING: "Waiting", DOWNLOADING: "Downloading",
               VERIFYING: "Verifying", DONE: "Installing"}


def state_word(job) -> str:
    if job.state == JobState.RUNNING and job.progress is not None:
        return PHASE_WORDS.get(job.progress.phase, "Downloading")
    return STATE_WORDS[job.state]


def status_text(job, *, partial_removed: bool = False) -> str:
    """One line under the bar: how far, how fast, how long; or what happened."""
    p = job.progress
    if job.state == JobState.QUEUED:
        return "Waiting for the download before it to finish."
    if job.state == JobState.RUNNING:
        if p is None or p.phase == RESOLVING:
            return p.note if p is not None and p.note else "Asking the Hub for the file's size and checksum…"
        if p.phase == WAITING:
            return p.note or "Waiting for another program that downloads the same file."
        part = f" · part {p.part} of {p.parts}" if p.parts > 1 else ""
        if p.phase == VERIFYING:
            return (f"Checking the sha256 checksum against the Hub's: {p.fraction * 100:.0f}% of "
                    f"{format_bytes(p.total_bytes)}{part}")
        if p.phase == DONE:
            return "Checksum matches; placing the file in the Hugging Face cache…"
        line = f"{format_bytes(p.done_bytes)} of {format_bytes(p.total_bytes)}"
        if p.speed_bps > 0:
            line += f" · {format_bytes(int(p.speed_bps))}/s"
        if p.eta_s is not None and p.done_bytes < p.total_bytes:
            line += f" · {duration(p.eta_s)} left"
        line += part
        return f"{line} · {p.note}" if p.note else line
    if job.state == JobState.PAUSED:
        if p is not None and p.done_bytes and p.total_bytes:
            return (f"Paused at {format_bytes(p.done_bytes)} of {format_bytes(p.total_bytes)}; the data "
                    "is kept on disk and Resume continues from there.")
        return "Paused; Resume starts it."
    if job.state == JobState.DONE:
        r = job.result
        if r is None:
            return "Downloaded and verified."
        m = r.model
        if r.already_installed:
            return (f"Already installed and verified ({format_bytes(m.size_bytes)}, sha256 "
                    f"{_short_hash(m.sha256)}); nothing was downloaded.")
        took = f" in {duration(r.download_seconds)}" if r.download_seconds >= 0.5 else ""
        resumed = f", {format_bytes(r.resumed_bytes)} of it resumed from disk" if r.resumed_bytes else ""
        return (f"Downloaded {format_bytes(r.downloaded_bytes)}{took}{resumed}; sha256 "
                f"{_short_hash(m.sha256)} matches the Hub's. Saved as {m.path}")
    if job.state == JobState.FAILED:
        return job.error or "The download failed."
    if partial_removed:
        return "Cancelled; the partial data was deleted."
    if p is not None and p.done_bytes and p.phase == DOWNLOADING:
        return (f"Cancelled; the {format_bytes(p.done_bytes)} received are kept, so downloading it "
                "again continues from there.")
    return "Cancelled."


def bar_fraction(job) -> float | None:
    """The bar's fill (0..1), or None for a busy bar (asking the Hub, waiting)."""
    p = job.progress
    if job.state == JobState.DONE:
        return 1.0
    if p is None:
        return None if job.state == JobState.RUNNING else 0.0
    if job.state == JobState.RUNNING and p.phase in (RESOLVING, WAITING):
        return None
    return min(1.0, p.fraction)


# -- one row --------------------------------------------------------------------------------

class DownloadRow(QFrame):
    """One download: its name, state, bar, status line, error and the buttons its state allows."""

    action = Signal(str, str)  # (what: pause | resume | retry | cancel | forget | chat, job id)

    def __init__(self, job, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.job = job
        self.partial_removed = False
        self.setProperty("role", "card")
        self.setAccessibleName(f"Download of {job.filename}")
        col = QVBoxLayout(self)
        col.setContentsMargins(16, 10, 12, 10)
        col.setSpacing(6)
        top = QHBoxLayout()
        top.setSpacing(8)
        self.name = label(Path(job.filename).name, "heading")
        self.repo = label(job.repo_id + ("" if job.revision == "main" else f" @ {job.revision}"), "muted")
        self.state = label("", "muted")
        self.state.setAccessibleName("state")
        top.addWidget(self.name)
        top.addWidget(self.repo)
        top.addStretch(1)
        top.addWidget(self.state)
        self.buttons: dict[str, QPushButton] = {}
        for key, text, tip in (
            ("chat", "Chat", "Open a chat with this model"),
            ("pause", "Pause", "Stop for now; the data received so far is kept"),
            ("resume", "Resume", "Continue from the data on disk"),
            ("retry", "Retry", "Try again; it continues from the data on disk"),
            ("cancel", "Cancel", "Stop this download for good"),
            ("forget", "Remove", "Remove from this list (the file stays installed)"),
        ):
            b = QPushButton(text)
            b.setAccessibleName(f"{text} {Path(job.filename).name}")
            b.setToolTip(tip)
            b.clicked.connect(lambda _=False, k=key: self.action.emit(k, self.job.id))
            if key == "chat":
                b.setProperty("primary", True)
            top.addWidget(b)
            self.buttons[key] = b
        col.addLayout(top)
        self.bar = QProgressBar()
        self.bar.setRange(0, BAR_STEPS)
        self.bar.setTextVisible(False)
        self.bar.setAccessibleName("progress")
        col.addWidget(self.bar)
        self.status = label("", "muted", wrap=True, selectable=True)
        self.status.setAccessibleName("status")
        col.addWidget(self.status)
        self.error = Note("error", "")
        self.error.hide()
        col.addWidget(self.error)
        self.update_job(job)

    def update_job(self, job, *, can_chat: bool = False) -> None:
        self.job = job
        word = state_word(job)
        self.state.setText(word)
        failed = job.state == JobState.FAILED
        self.status.setText("" if failed else status_text(job, partial_removed=self.partial_removed))
        self.status.setVisible(not failed)
        self.error.text.setText(job.error or "")
        self.error.setVisible(failed)
        fraction = bar_fraction(job)
        if fraction is None:
            self.bar.setRange(0, 0)  # busy
        else:
            self.bar.setRange(0, BAR_STEPS)
            self.bar.setValue(round(fraction * BAR_STEPS))
        self.bar.setAccessibleDescription(word if fraction is None else f"{word} {fraction * 100:.0f}%")
        self.bar.setVisible(job.state not in (JobState.FAILED, JobState.CANCELLED))
        s = job.state
        shown = {
            "pause": s in (JobState.QUEUED, JobState.RUNNING),
            "resume": s in (JobState.PAUSED, JobState.CANCELLED),
            "retry": s == JobState.FAILED,
            "cancel": s in (JobState.QUEUED, JobState.RUNNING, JobState.PAUSED, JobState.FAILED),
            "forget": s in (JobState.DONE, JobState.FAILED, JobState.CANCELLED),
            "chat": s == JobState.DONE and job.result is not None,
        }
        for key, b in self.buttons.items():
            b.setVisible(shown[key])
        self.buttons["resume"].setText("Download again" if s == JobState.CANCELLED else "Resume")
        chat = self.buttons["chat"]
        chat.setEnabled(can_chat)
        chat.setToolTip("Open a chat with this model" if can_chat
                        else "Chatting needs the Chat page, which this build does not have.")


class _Events(QObject):
    """Download threads emit this; Qt queues the call to the GUI thread."""

    event = Signal(object)  # download.DownloadEvent


# -- the page ------------------------------------------------------------------------------

class DownloadsPage(Page):
    key = "downloads"
    title = "Downloads"
    icon = "downloads"

    changed = Signal()  # a row was added, changed or removed (tests, screenshots)
    ready = Signal()  # the queue is open (restored rows listed)

    def __init__(self, ctx, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        self.rows: dict[str, DownloadRow] = {}
        self._asked_here: set[str] = set()  # ids enqueued in this session (chat when done)
        self._finished: set[str] = set()
        self._resume_keys: set[tuple[str, str, str]] = set()

        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 18, 24, 12)
        outer.setSpacing(10)
        head = QHBoxLayout()
        head.addWidget(label("Downloads", "title"))
        head.addStretch(1)
        self.status = label("", "muted")
        self.status.setAccessibleName("Downloads status")
        head.addWidget(self.status)
        outer.addLayout(head)

        self.offline_note = Note("warning", "Offline mode is on (Settings), so nothing is downloaded; "
                                            "switch it off to start or resume downloads.")
        outer.addWidget(self.offline_note)
        tools = QHBoxLayout()
        self.where = label("Models go to the Hugging Face cache, checked against the Hub's sha256, "
                           "where other tools find them too.", "muted", wrap=True)
        self.chat_when_done = QCheckBox("Open a chat when a download finishes")
        self.chat_when_done.setAccessibleName("Open a chat when a download finishes")
        self.chat_when_done.setChecked(True)
        self.clear_button = QPushButton("Clear finished")
        self.clear_button.setAccessibleName("Remove finished downloads from the list")
        self.clear_button.clicked.connect(self.clear_finished)
        tools.addWidget(self.where, 1)
        tools.addWidget(self.chat_when_done)
        tools.addWidget(self.clear_button)
        outer.addLayout(tools)

        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        holder = QWidget()
        self.list = QVBoxLayout(holder)
        self.list.setContentsMargins(0, 0, 0, 0)
        self.list.setSpacing(8)
        self.empty = label("Nothing is downloading. Press Download on a model of the Models page "
                           "(or on the top pick) and it appears here.", "muted", wrap=True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setMinimumHeight(120)
        self.list.addWidget(self.empty)
        self.list.addStretch(1)
        scroll.setWidget(holder)
        outer.addWidget(scroll, 1)

        self._events = _Events(self)
        self._events.event.connect(self._on_event)
        self.queue = None  # download.DownloadQueue, once opened
        self._waiting: list[tuple[str, str, str | None]] = []  # asked for before it was open
        self._opened: list = []
        self._opening = None
        self._open_asked = False
        ctx.after_startup(self._open_queue)
        ctx.actions.set_download_handler(self.enqueue)
        ctx.actions.changed.connect(self._refresh_rows)
        ctx.settings_changed.connect(self._settings_changed)
        self.offline_note.setVisible(ctx.settings.offline)
        self._update_status()

    def _open_queue(self) -> None:
        if self._open_asked:
            return  # once: a download asked for it before start-up did
        self._open_asked = True
        self._opening = self.ctx.runner.run(open_queue, self._events.event.emit, self._opened,
                                            on_done=self._queue_opened, on_error=self._queue_failed,
                                            what="opening the list of downloads")

    # -- public ------------------------------------------------------------------------------
    @property
    def opening(self) -> bool:
        """The list of downloads is being opened in a worker (queue is None until it is)."""
        return self._opening is not None

    def enqueue(self, repo: str, file: str, revision: str | None = None) -> str | None:
        """The download handler: queue (repo, file) and show this page. Returns its id;
        None if refused, or while the queue is still being opened (it is queued then)."""
        name = Path(file).name
        if self.ctx.settings.offline:
            self.ctx.show_error(f"Offline mode is on, so {name} cannot be downloaded; switch it off in "
                                "Settings, then press Download again.")
            return None
        if self.queue is None:
            if self._opening is None and not self._open_asked:
                self._open_queue()  # asked before start-up opened it: open it now
            if self._opening is not None:  # a click in the first moments: queued once open
                self._waiting.append((repo, file, revision))
                self.ctx.show_page(self.key)
            return None
        try:
            job_id = self.queue.add(repo, file, revision)
            if self.queue.job(job_id).state in (JobState.PAUSED, JobState.FAILED):
                self.queue.resume(job_id)  # asked again: go on from what is on disk
        except RooflightError as exc:
            self.ctx.show_error(str(exc))
            return None
        except RuntimeError:  # shut down: the window is closing
            return None
        self._asked_here.add(job_id)
        self.ctx.show_page(self.key)
        return job_id

    def _queue_opened(self, queue) -> None:
        self._opening = None
        self.queue = queue
        self._update_status()
        if self._resume_keys and not self.ctx.settings.offline:
            for job in self.jobs():
                if job.state == JobState.PAUSED and (job.repo_id, job.filename, job.revision) in self._resume_keys:
                    queue.resume(job.id)
        self._resume_keys = set()
        waiting, self._waiting = self._waiting, []
        for repo, file, revision in waiting:
            self.enqueue(repo, file, revision)
        self.ready.emit()

    def _queue_failed(self, exc: BaseException) -> None:
        # an unreadable store must not take the window down: no downloads this time
        self._opening = None
        self._waiting = []
        self.ctx.actions.set_download_handler(None)
        self.ctx.report(exc, "opening the list of downloads")

    def jobs(self) -> list:
        return [r.job for r in self.rows.values()]

    def row_for(self, filename: str) -> DownloadRow | None:
        return next((r for r in self.rows.values() if r.job.filename == filename), None)

    def pause(self, job_id: str) -> None:
        if self.queue is not None:
            self.queue.pause(job_id)

    def resume(self, job_id: str) -> None:
        if self.queue is None:
            return
        if self.ctx.settings.offline:
            self.ctx.show_error("Offline mode is on, so downloads cannot continue; switch it off in Settings first.")
            return
        self.rows[job_id].partial_removed = False
        self.queue.resume(job_id)

    def cancel(self, job_id: str, remove_partial: bool | None = None) -> bool:
        """Cancel a download; remove_partial None asks the user (a dialog). False if the
        user chose not to cancel after all."""
        if self.queue is None:
            return False
        job = self.queue.job(job_id)
        if remove_partial is None:
            remove_partial = self._ask_remove_partial(job)
            if remove_partial is None:
                return False
        row = self.rows.get(job_id)
        if row is not None:
            row.partial_removed = remove_partial
        self.queue.cancel(job_id, remove_partial=remove_partial)
        return True

    def forget(self, job_id: str) -> None:
        if self.queue is None:
            return
        try:
            self.queue.forget(job_id)
        except (RuntimeError, KeyError) as exc:
            log.debug("not forgotten: %s", exc)

    def clear_finished(self) -> None:
        for job in self.jobs():
            if job.state in (JobState.DONE, JobState.CANCELLED):
                self.forget(job.id)

    # -- events (GUI thread) ---------------------------------------------------------------------
    def _on_event(self, ev) -> None:
        job = ev.job
        if ev.kind == "forgotten":
            row = self.rows.pop(job.id, None)
            if row is not None:
                row.hide()
                row.setParent(None)
                row.deleteLater()
        else:
            row = self.rows.get(job.id)
            if row is None:
                row = DownloadRow(job)
                row.action.connect(self._row_action)
                self.list.insertWidget(self.list.count() - 1, row)  # before the stretch
                self.rows[job.id] = row
            elif ev.kind == "progress" and row.job.state != JobState.RUNNING:
                return  # a late progress event after the job stopped: keep the final state
            row.update_job(job, can_chat=self.ctx.actions.can_chat)
            if ev.kind == "state":
                self._state_changed(job)
        self._update_status()
        self.changed.emit()

    def _state_changed(self, job) -> None:
        if job.state == JobState.DONE and job.result is not None and job.id not in self._finished:
            self._finished.add(job.id)
            path = job.result.model.path
            self.ctx.installed.add(job.repo_id, job.filename, path)
            name = Path(job.filename).name
            if job.id in self._asked_here and self.chat_when_done.isChecked() and self.ctx.actions.can_chat:
                self.ctx.actions.request_chat(path)
            else:
                self.ctx.show_info(f"{name} is downloaded and verified; it is ready to chat with.")
        elif job.state == JobState.FAILED and job.error:
            self.ctx.show_error(job.error)

    def _row_action(self, what: str, job_id: str) -> None:
        if self.queue is None:
            return
        try:
            if what == "pause":
                self.pause(job_id)
            elif what in ("resume", "retry"):
                self.resume(job_id)
            elif what == "cancel":
                self.cancel(job_id)
            elif what == "forget":
                self.forget(job_id)
            elif what == "chat":
                job = self.rows[job_id].job
                if job.result is not None:
                    self.ctx.actions.request_chat(job.result.model.path)
        except RuntimeError:  # the queue was shut down: the window is closing
            pass

    def _ask_remove_partial(self, job) -> bool | None:
        """True: delete the partial data; False: keep it; None: do not cancel."""
        p = job.progress
        on_disk = p.done_bytes if p is not None and p.phase in (DOWNLOADING, VERIFYING) else 0
        if job.state == JobState.PAUSED and p is not None:
            on_disk = p.done_bytes
        name = Path(job.filename).name
        if not on_disk:
            return True  # nothing received: nothing to keep
        box = QMessageBox(self)
        box.setObjectName("cancelDownload")
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Cancel download")
        box.setText(f"Cancel the download of {name}?")
        box.setInformativeText(
            f"{format_bytes(on_disk)} of it are on disk. Delete them, or keep them so that downloading "
            "the same file later continues from there?")
        delete = box.addButton("Delete partial data", QMessageBox.ButtonRole.DestructiveRole)
        keep = box.addButton("Keep partial data", QMessageBox.ButtonRole.AcceptRole)
        back = box.addButton("Don't cancel", QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(back)
        box.setEscapeButton(back)
        box.exec()
        clicked = box.clickedButton()
        box.deleteLater()
        if clicked is delete:
            return True
        if clicked is keep:
            return False
        return None

    def _refresh_rows(self) -> None:
        for row in self.rows.values():
            row.update_job(row.job, can_chat=self.ctx.actions.can_chat)

    def _settings_changed(self, settings) -> None:
        self.offline_note.setVisible(settings.offline)
        if settings.offline and self.queue is not None:
            active = [j for j in self.jobs() if j.state in ACTIVE]
            for job in active:
                self.queue.pause(job.id)
            if active:
                self.ctx.show_info("Offline mode is on: downloads are paused; switch it off to resume them.")

    def _update_status(self) -> None:
        jobs = self.jobs()
        self.empty.setVisible(not jobs)
        self.clear_button.setEnabled(any(j.state in (JobState.DONE, JobState.CANCELLED) for j in jobs))
        if not jobs:
            self.status.setText("")
            return
        counts: dict[str, int] = {}
        for j in jobs:
            counts[STATE_WORDS[j.state].lower()] = counts.get(STATE_WORDS[j.state].lower(), 0) + 1
        running = [j for j in jobs if j.state == JobState.RUNNING and j.progress is not None]
        speed = sum(j.progress.speed_bps for j in running if j.progress.phase == DOWNLOADING)
        order = ("downloading", "queued", "paused", "failed", "verified", "cancelled")
        parts = [f"{counts[k]} {k}" for k in order if k in counts]
        if speed > 0:
            parts.append(f"{format_bytes(int(speed))}/s")
        self.status.setText(" · ".join(parts))

    # -- state and shutdown ------------------------------------------------------------------------
    def save_state(self, state) -> None:
        # what was running or queued resumes at the next start; what the user paused stays paused
        active = [[j.repo_id, j.filename, j.revision] for j in self.jobs() if j.state in ACTIVE]
        state.setValue("downloads/resume", json.dumps(active))
        state.setValue("downloads/chat_when_done", self.chat_when_done.isChecked())

    def restore_state(self, state) -> None:
        chat = state.value("downloads/chat_when_done")
        if chat is not None:
            self.chat_when_done.setChecked(str(chat).lower() in ("true", "1"))
        try:
            wanted = json.loads(str(state.value("downloads/resume") or "[]"))
        except ValueError:
            wanted = []
        if isinstance(wanted, list):  # resumed once the queue is open
            self._resume_keys = {tuple(str(x) for x in k) for k in wanted
                                 if isinstance(k, (list, tuple)) and len(k) == 3}

    def shutdown(self) -> None:
        """Pause everything cleanly: partial files and their records stay for next time."""
        self.ctx.actions.set_download_handler(None)
        if self._opening is not None:  # still opening: wait for it, then close it too
            self._opening.wait(SHUTDOWN_WAIT_S)
            self._opening = None
        if self.queue is None and self._opened:
            self.queue = self._opened[0]
        if self.queue is not None:
            queue, self.queue = self.queue, None
            try:
                queue.shutdown(SHUTDOWN_WAIT_S)
            finally:
                self._events.event.disconnect(self._on_event)
