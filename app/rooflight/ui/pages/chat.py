"""Chat: load a local model at a plan shown (and editable) beforehand, then talk to it.

Left, the stored conversations (new, rename, delete, export as Markdown or JSON); in the
middle the model bar (chat_load.py), the conversation (chat_view.py) and the composer,
with the live monitor as a second tab; right, the system prompt and sampling settings.

Threads: loading (runtime.engine.load_engine) and every reply (runtime.chat.ChatSession)
run in ctx.runner's workers. Tokens come back through task.stream and are rendered at
most 30 times a second; Stop (or Esc) sets the reply's stop event, which the chat loop
checks before each decode step, so a reply ends within one token. The chat store
(store/chats.py) is written as the reply streams, so closing the window mid-reply keeps
it: shutdown() stops the reply, waits for its worker and closes the engine.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from rooflight.errors import BadInputError, RooflightError
from rooflight.ui import theme
from rooflight.ui.chat_load import LoadPanel
from rooflight.ui.chat_settings import SamplingPanel
from rooflight.ui.chat_view import Composer, ConversationView
from rooflight.ui.chat_workers import load_model, run_turn, write_export
from rooflight.ui.pages.base import Page, Shot
from rooflight.ui.widgets import Note, label, tok_s

SHUTDOWN_WAIT_S = 10.0
SCREENSHOT_QUESTIONS = ("What is the capital of France?", "And what is the capital of Germany?")


# ---- the page --------------------------------------------------------------------------------


class ChatPage(Page):
    key = "chat"
    title = "Chat"
    icon = "chat"

    def __init__(self, ctx, parent=None) -> None:
        super().__init__(ctx, parent)
        self.store = self._open_store()
        self.engine = None
        self.session = None
        self.chat_id: int | None = None
        self.last_reply = None  # the runtime's Reply of the last finished turn
        self.stop_tokens: int | None = None  # tokens evaluated when Stop was pressed (tests)
        self._turn_task = None
        self._stop: threading.Event | None = None
        self._load_task = None
        self._load_cancel: threading.Event | None = None
        self._load_holder: list = []
        self._edit_index: int | None = None
        self._closed = False
        self._sizes: list[int] = []
        self.monitor = None  # hardware.monitor.Monitor, made with its panel when first needed
        self.monitor_panel = None

        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 18, 24, 12)
        outer.setSpacing(10)
        head = QHBoxLayout()
        head.addWidget(label("Chat", "title"))
        head.addStretch(1)
        self.status = label("No model loaded", "muted")
        self.status.setAccessibleName("Chat status")
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        head.addWidget(self.status)
        self.settings_button = QPushButton("Chat settings")
        self.settings_button.setCheckable(True)
        self.settings_button.setChecked(True)
        self.settings_button.setAccessibleName("Show the chat settings")
        head.addWidget(self.settings_button)
        outer.addLayout(head)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("chatSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self._chats_pane())
        self.splitter.addWidget(self._center())
        self.sampling = SamplingPanel()
        self.sampling.setMinimumWidth(230)
        self.sampling.defaults_requested.connect(self._sampling_defaults)
        self.settings_button.toggled.connect(lambda _on: self._tab_changed(self.tabs.currentIndex()))
        self.splitter.addWidget(self.sampling)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes([230, 560, 250])
        outer.addWidget(self.splitter, 1)

        esc = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        esc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        esc.activated.connect(self._escape)

        ctx.actions.set_chat_handler(self.chat_with)
        self._style_list()
        self.refresh_chats()
        self._update_controls()

    # -- building ---------------------------------------------------------------------------
    def _chats_pane(self) -> QWidget:
        pane = QWidget()
        pane.setMinimumWidth(230)
        col = QVBoxLayout(pane)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(6)
        self.new_button = QPushButton("New chat")
        self.new_button.setAccessibleName("Start a new chat")
        self.new_button.clicked.connect(self.new_chat)
        col.addWidget(self.new_button)
        self.chat_list = QListWidget()
        self.chat_list.setObjectName("chatList")
        self.chat_list.setAccessibleName("Chats")
        self.chat_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.chat_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.chat_list.currentItemChanged.connect(self._chat_selected)
        self.chat_list.itemDoubleClicked.connect(lambda _item: self._rename_clicked())
        col.addWidget(self.chat_list, 1)
        row = QHBoxLayout()
        row.setSpacing(4)
        self.rename_button = QPushButton("Rename")
        self.rename_button.setAccessibleName("Rename the chat")
        self.rename_button.clicked.connect(self._rename_clicked)
        self.delete_button = QPushButton("Delete")
        self.delete_button.setAccessibleName("Delete the chat")
        self.delete_button.clicked.connect(self._delete_clicked)
        self.export_button = QPushButton("Export")
        self.export_button.setAccessibleName("Export the chat")
        self.export_button.setToolTip("Save the chat as Markdown or JSON")
        self.export_button.clicked.connect(self._export_clicked)
        for b in (self.rename_button, self.delete_button, self.export_button):
            row.addWidget(b, 1)
        col.addLayout(row)
        return pane

    def _center(self) -> QWidget:
        center = QWidget()
        col = QVBoxLayout(center)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(8)
        self.load_panel = LoadPanel(self.ctx)
        self.load_panel.load_requested.connect(self.load)
        self.load_panel.cancel_requested.connect(self.cancel_load)
        self.load_panel.unload_requested.connect(self.unload)
        col.addWidget(self.load_panel)

        self.tabs = QTabWidget()
        self.tabs.setAccessibleName("Conversation and monitor")
        talk = QWidget()
        tcol = QVBoxLayout(talk)
        tcol.setContentsMargins(0, 8, 0, 0)
        tcol.setSpacing(8)
        self.view = ConversationView()
        self.view.edit_requested.connect(self.edit_message)
        tcol.addWidget(self.view, 1)
        self.edit_note = Note("info", "")
        self.edit_note.hide()
        tcol.addWidget(self.edit_note)
        row = QHBoxLayout()
        row.setSpacing(8)
        self.composer = Composer()
        self.composer.send.connect(self.send)
        self.composer.escape.connect(self._escape)
        row.addWidget(self.composer, 1)
        buttons = QVBoxLayout()
        buttons.setSpacing(4)
        self.send_button = QPushButton("Send")
        self.send_button.setProperty("primary", True)
        self.send_button.setAccessibleName("Send the message")
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setAccessibleName("Stop the reply")
        self.stop_button.setToolTip("Stop the reply (Esc)")
        self.stop_button.clicked.connect(self.stop)
        self.regen_button = QPushButton("Regenerate")
        self.regen_button.setAccessibleName("Generate the last reply again")
        self.regen_button.clicked.connect(self.regenerate)
        for b in (self.send_button, self.stop_button, self.regen_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        row.addLayout(buttons)
        tcol.addLayout(row)
        self.tabs.addTab(talk, "Conversation")
        # the charts (QtCharts) are made when a model first loads or the tab opens:
        # the window's start does not wait for them
        self.monitor_tab = QWidget()
        self.monitor_tab.setAccessibleName("Live monitor")
        QVBoxLayout(self.monitor_tab).setContentsMargins(0, 0, 0, 0)
        self.tabs.addTab(self.monitor_tab, "Live monitor")
        self.tabs.currentChanged.connect(self._tab_changed)
        col.addWidget(self.tabs, 1)
        return center

    def _open_store(self):
        from rooflight.store.chats import ChatStore, ChatStoreCorruptError

        try:
            return ChatStore()
        except ChatStoreCorruptError as exc:
            self.ctx.show_warning(str(exc))
            try:
                return ChatStore()
            except RooflightError as again:
                self.ctx.show_error(str(again))
        except RooflightError as exc:
            self.ctx.show_error(f"{exc} Chats will not be kept.")
        return None

    # -- state of the controls ------------------------------------------------------------------
    @property
    def generating(self) -> bool:
        return self._turn_task is not None

    @property
    def loading(self) -> bool:
        return self._load_task is not None

    def _update_controls(self) -> None:
        busy = self.generating
        ready = self.session is not None and not busy and not self.loading
        self.composer.setEnabled(self.session is not None)
        self.send_button.setVisible(not busy)
        self.send_button.setEnabled(ready)
        self.stop_button.setVisible(busy)
        has_user = self.session is not None and any(m.role == "user" for m in self.session.messages)
        self.regen_button.setEnabled(ready and has_user)
        self.chat_list.setEnabled(not busy)
        self.new_button.setEnabled(not busy)
        self.load_panel.setEnabled(not busy)  # a reply runs on the loaded model
        selected = self.chat_list.currentItem() is not None and self.store is not None
        for b in (self.rename_button, self.delete_button, self.export_button):
            b.setEnabled(selected and not busy)
        self.view.set_busy(busy)
        if self.session is None:
            self.view.set_empty_text("Load a model above to chat with it." if not self.loading
                                     else "Loading the model…")
        else:
            self.view.set_empty_text(f"Ask {self.engine.model_name} anything. Enter sends, "
                                     "Shift+Enter starts a new line, Esc stops a reply.\n\n"
                                     f"Chat format: {self.engine.format.describe()}.")

    def _set_status(self) -> None:
        e = self.engine
        if e is None:
            self.status.setText("No model loaded")
            self.status.setToolTip("")
            return
        cfg = e.config
        where = f"{cfg.n_gpu_layers} GPU layers" if e.plan.hardware.backend != "cpu" else "CPU"
        self.status.setText(f"{e.model_name} ({e.spec.file_type}) · {where} · {e.n_ctx}-token context · "
                            f"loaded in {e.load_s:.1f} s")
        self.status.setToolTip(f"Chat format: {e.format.describe()}")

    # -- conversations ------------------------------------------------------------------------------
    def refresh_chats(self, select: int | None = None) -> None:
        """The stored chats, newest first; `select` (or the chat shown) stays selected."""
        select = self.chat_id if select is None else select
        self.chat_list.blockSignals(True)
        self.chat_list.clear()
        chats = []
        if self.store is not None:
            try:
                chats = self.store.list_chats()
            except RooflightError as exc:
                self.ctx.show_error(str(exc))
        for c in chats:
            item = QListWidgetItem(c.title or "Untitled chat")
            item.setData(Qt.ItemDataRole.UserRole, c.id)
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.updated_at))
            item.setToolTip(f"{c.title}\n{Path(c.model).name} · {c.n_messages} messages · {when}")
            self.chat_list.addItem(item)
            if c.id == select:
                self.chat_list.setCurrentItem(item)
        self.chat_list.blockSignals(False)
        self._update_controls()

    def chat_ids(self) -> list[int]:
        return [self.chat_list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.chat_list.count())]

    def _chat_selected(self, item, _previous=None) -> None:
        if item is not None:
            self.show_chat(item.data(Qt.ItemDataRole.UserRole))
        self._update_controls()

    def show_chat(self, chat_id: int | None) -> None:
        """Show a stored chat (None: a new, empty one); with a model loaded it continues."""
        if self.generating:
            return
        self.cancel_edit()
        if chat_id is not None and self.store is None:
            chat_id = None
        self.chat_id = chat_id
        if self.session is not None:
            from rooflight.runtime.chat import ChatSession

            if chat_id is None:
                self.session.reset()
            else:
                try:
                    self.session = ChatSession(self.engine, store=self.store, chat_id=chat_id)
                except RooflightError as exc:
                    self.ctx.show_error(str(exc))
                    return self.show_chat(None)
                self.sampling.set_sampling(self.session.sampling)
                self.sampling.set_system_prompt(self.session.system_prompt)
                started_with = self.store.get_chat(chat_id).model
                if started_with and started_with != str(self.engine.plan.path):
                    self.ctx.show_info(f"This chat was started with {Path(started_with).name}; it "
                                       f"continues with the loaded {self.engine.plan.path.name}.")
            self.view.set_messages(self.session.messages)
        elif chat_id is not None:
            from rooflight.runtime.sampling import Sampling

            try:
                chat = self.store.get_chat(chat_id)
                messages = [m for m in self.store.messages(chat_id) if m.role in ("user", "assistant")]
            except RooflightError as exc:
                self.ctx.show_error(str(exc))
                return self.show_chat(None)
            try:
                self.sampling.set_sampling(Sampling.from_dict(chat.settings, self.sampling.sampling()))
            except RooflightError:
                pass  # settings of another version: keep the fields
            self.sampling.set_system_prompt(chat.system_prompt)
            self.view.set_messages(messages)
            # continue with the model the chat was made with: planned, one click from loading
            if chat.model and Path(chat.model).is_file() and self.load_panel.path != chat.model:
                self.load_panel.select_path(chat.model)
        else:
            self.view.clear()
        if chat_id is None:
            self.chat_list.blockSignals(True)
            self.chat_list.setCurrentItem(None)
            self.chat_list.clearSelection()
            self.chat_list.blockSignals(False)
        self._update_controls()

    def new_chat(self) -> None:
        self.show_chat(None)
        self.composer.setFocus()

    def rename_chat(self, chat_id: int, title: str) -> None:
        title = " ".join(title.split())
        if not title or self.store is None:
            return
        try:
            self.store.rename_chat(chat_id, title)
        except RooflightError as exc:
            self.ctx.show_error(str(exc))
            return
        if self.session is not None and self.session.chat_id == chat_id:
            self.session.title = title
        self.refresh_chats()

    def delete_chat(self, chat_id: int, *, confirm: bool = True) -> None:
        if self.store is None:
            return
        if confirm:
            answer = QMessageBox.question(self, "Delete chat", "Delete this chat and all its messages?")
            if answer != QMessageBox.StandardButton.Yes:
                return
        try:
            self.store.delete_chat(chat_id)
        except RooflightError as exc:
            self.ctx.show_error(str(exc))
            return
        if chat_id == self.chat_id:
            self.show_chat(None)
        self.refresh_chats()

    def export_chat(self, chat_id: int, path: str, fmt: str = "markdown"):
        """Write the chat to `path` as "markdown" or "json" in a worker; returns the task."""
        if fmt not in ("markdown", "json"):
            raise BadInputError(f"Unknown export format {fmt!r}; use markdown or json.")
        return self.ctx.runner.run(
            write_export, self.store, chat_id, str(path), fmt,
            on_done=lambda p: self.ctx.show_info(f"Chat exported to {p}."),
            on_error=lambda exc: self.ctx.report(exc, "exporting the chat"), what="exporting the chat")

    def _current_chat(self) -> int | None:
        item = self.chat_list.currentItem()
        return None if item is None else item.data(Qt.ItemDataRole.UserRole)

    def _rename_clicked(self) -> None:
        chat_id = self._current_chat()
        if chat_id is None or self.generating:
            return
        title, ok = QInputDialog.getText(self, "Rename chat", "Title:", text=self.chat_list.currentItem().text())
        if ok:
            self.rename_chat(chat_id, title)

    def _delete_clicked(self) -> None:
        chat_id = self._current_chat()
        if chat_id is not None and not self.generating:
            self.delete_chat(chat_id)

    def _export_clicked(self) -> None:
        chat_id = self._current_chat()
        if chat_id is None or self.store is None:
            return
        name = "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in self.chat_list.currentItem().text())
        markdown, as_json = "Markdown (*.md)", "JSON (*.json)"
        path, chosen = QFileDialog.getSaveFileName(
            self, "Export chat", str(Path.home() / f"{name.strip() or 'chat'}.md"), f"{markdown};;{as_json}")
        if path:
            fmt = "json" if chosen == as_json or path.lower().endswith(".json") else "markdown"
            self.export_chat(chat_id, path, fmt)

    # -- loading -------------------------------------------------------------------------------------
    def chat_with(self, path: str, wishes=None) -> None:
        """ctx.actions' chat handler (the Models page's and the model detail's Chat buttons,
        a finished download): this page, with that model selected and planned with
        `wishes` (an estimate.Wishes: the settings the detail showed; None: the defaults).
        The model already loaded stays as it is unless other settings are asked for."""
        self.ctx.show_page(self.key)
        if self.engine is not None and str(self.engine.plan.path) == str(path) and wishes is None:
            self.composer.setFocus()
            return
        self.load_panel.select_path(path, wishes)

    def load(self, lp, force: bool = False) -> None:
        """Load `lp` in a worker (the model loaded before is freed first)."""
        if self.loading or self.generating or self._closed:
            return
        previous, self.engine, self.session = self.engine, None, None
        self.load_panel.set_loaded(None)
        self._load_cancel = threading.Event()
        self._load_holder = []
        self.load_panel.set_loading(True, f"Loading {lp.path.name}…")
        self._ensure_monitor()
        if not self.monitor.running:
            self.monitor.start()
        self._load_task = self.ctx.runner.run(
            load_model, lp, force, self._load_cancel, previous, self._load_holder, with_task=True,
            on_progress=self.load_panel.set_progress, on_done=self._loaded, on_error=self._load_failed,
            on_cancelled=self._load_ended, what="loading the model")
        self._set_status()
        self._update_controls()

    def cancel_load(self) -> None:
        if self._load_cancel is not None:
            self._load_cancel.set()

    def _load_ended(self) -> None:
        self._load_task = None
        self._load_cancel = None
        self.load_panel.set_loading(False)
        if self.engine is None and self.monitor is not None:
            self.monitor.stop()
        self._update_controls()

    def _loaded(self, engine) -> None:
        if self._closed:
            engine.close()
            return
        from rooflight.runtime.chat import ChatSession

        self.engine = engine
        self._load_ended()
        self.session = ChatSession(engine, store=self.store)
        self.view.author = engine.model_name
        self.load_panel.set_loaded(str(engine.plan.path), engine.config)
        if self.chat_id is not None:
            self.show_chat(self.chat_id)  # continue the chat shown
        else:
            self.session.system_prompt = self.sampling.system_prompt
            self.sampling.set_sampling(self.session.sampling)
            self.view.clear()
        self._set_status()
        self._update_controls()
        self.composer.setFocus()

    def _load_failed(self, exc: BaseException) -> None:
        from rooflight.runtime.engine import LoadCancelledError, LoadRefusedError

        self._load_ended()
        if isinstance(exc, LoadRefusedError):
            self.load_panel.show_refusal(str(exc))  # free memory fell since planning
        elif not isinstance(exc, LoadCancelledError):
            self.ctx.report(exc, "loading the model")
        self._set_status()

    def unload(self) -> None:
        if self.loading:
            return
        if self.generating:
            self.stop()
        engine, self.engine, self.session = self.engine, None, None
        self.load_panel.set_loaded(None)
        if self.monitor is not None:
            self.monitor.stop()
        if engine is not None:
            # close waits for a reply still finishing: in a worker, never here
            self.ctx.runner.run(engine.close, what="unloading the model")
        self._set_status()
        self.show_chat(self.chat_id)
        self._update_controls()

    # -- talking --------------------------------------------------------------------------------------
    def send(self) -> None:
        """Send the composer's text (or, while editing a message, send the edit)."""
        text = self.composer.toPlainText().strip()
        if not text or self.session is None or self.generating or self.loading:
            return
        if self._edit_index is not None:
            index = self._edit_index
            self._start_turn("edit", index, text)
        else:
            self._start_turn("send", -1, text)

    def regenerate(self) -> None:
        if self.session is None or self.generating or self.loading:
            return
        self._start_turn("regenerate", -1, "")

    def edit_message(self, index: int) -> None:
        """Put user message `index` in the composer; sending replaces it and what follows."""
        if self.session is None or self.generating or not 0 <= index < len(self.session.messages):
            return
        self._edit_index = index
        self.composer.setPlainText(self.session.messages[index].content)
        self.composer.setFocus()
        self.edit_note.text.setText(f"Editing message {index + 1}: Enter sends it again and replaces the "
                                    "replies after it; Esc cancels.")
        self.edit_note.show()

    def cancel_edit(self) -> None:
        if self._edit_index is not None:
            self._edit_index = None
            self.composer.clear()
        self.edit_note.hide()

    def _start_turn(self, op: str, index: int, text: str) -> None:
        try:
            sampling = self.sampling.sampling()
        except BadInputError as exc:
            self.ctx.show_error(str(exc))
            return
        session = self.session
        try:
            if op == "regenerate":
                keep = session._last_user_index() + 1
            elif op == "edit":
                keep = index + 1
            else:
                keep = len(session.messages)
                if session.messages and session.messages[-1].role == "user":
                    raise BadInputError("The last message has no reply yet; regenerate or edit it instead.")
        except BadInputError as exc:
            self.ctx.show_error(str(exc))
            return
        self.view.truncate(keep)
        if op == "edit":
            self.view.messages[index].set_text(text)
        elif op == "send":
            self.view.add_message("user", text)
        self.cancel_edit()
        self.composer.clear()
        self.view.begin_stream()
        self._stop = threading.Event()
        self.stop_tokens = None
        self._turn_task = self.ctx.runner.run(
            run_turn, session, op, index, text, self.sampling.system_prompt, sampling, self._stop, self.monitor,
            with_task=True, on_stream=self._streamed, on_progress=self._live, on_done=self._turn_done,
            on_error=self._turn_failed, on_cancelled=self._turn_cancelled, what="generating the reply")
        self._update_controls()

    def stop(self) -> None:
        """Stop the reply: the chat loop sees it before its next decode step."""
        if self._stop is not None and not self._stop.is_set():
            engine = self.engine
            self.stop_tokens = engine.llm.n_tokens if engine is not None and engine.llm is not None else None
            self._stop.set()
            self.view.set_stream_status("Stopping…")

    def _escape(self) -> None:
        if self.generating:
            self.stop()
        elif self._edit_index is not None:
            self.cancel_edit()

    def _streamed(self, chunk: str) -> None:
        self.view.append(chunk)
        if self.session is not None and self.session.chat_id != self.chat_id and self.session.chat_id is not None:
            self.chat_id = self.session.chat_id  # the store made the chat for the first message
            self.refresh_chats()

    def _live(self, value) -> None:
        tokens, rate = value
        if self._stop is not None and self._stop.is_set():
            return
        speed = f" · {tok_s(rate)} tok/s" if rate else ""
        self.view.set_stream_status(f"Writing… {tokens} tokens{speed}")

    def _turn_finished(self) -> None:
        self._turn_task = None
        self._stop = None

    def _turn_done(self, reply) -> None:
        self._turn_finished()
        if self._closed:
            return
        w = self.view.end_stream()
        if w is not None:
            w.set_text(reply.text)
            w.set_stats(reply.stats.to_dict())
            w.set_notes(list(reply.notices))
        self.last_reply = reply
        if self.session is not None and self.session.chat_id is not None:
            self.chat_id = self.session.chat_id
        self.refresh_chats()
        self._update_controls()

    def _turn_failed(self, exc: BaseException) -> None:
        self._turn_finished()
        if self._closed:
            return
        self.view.end_stream()
        self.ctx.report(exc, "generating the reply")
        if self.session is not None:
            self.view.set_messages(self.session.messages)  # what the session really holds
        self.refresh_chats()
        self._update_controls()

    def _turn_cancelled(self) -> None:
        self._turn_finished()
        if not self._closed:
            self.view.end_stream()
            self._update_controls()

    # -- page hooks ---------------------------------------------------------------------------------------
    def _sampling_defaults(self) -> None:
        from rooflight.runtime.sampling import Sampling, default_sampling

        e = self.engine
        self.sampling.set_sampling(
            default_sampling(e.spec.architecture, e.metadata, completion=e.format.is_completion)
            if e is not None else Sampling())

    def page_shown(self) -> None:
        if self.session is not None:
            self.composer.setFocus()

    def _ensure_monitor(self) -> None:
        if self.monitor is not None:
            return
        from rooflight.hardware.monitor import Monitor
        from rooflight.ui.monitor_panel import MonitorPanel

        self.monitor = Monitor(interval_s=0.5)
        self.monitor_panel = MonitorPanel(self.monitor)
        self.monitor_panel.setAccessibleName("Live monitor charts")
        self.monitor_tab.layout().addWidget(self.monitor_panel)

    def _tab_changed(self, index: int) -> None:
        # the monitor's charts need the width: the chat settings step aside meanwhile
        monitor = self.tabs.widget(index) is self.monitor_tab
        if monitor:
            self._ensure_monitor()
        show = self.settings_button.isChecked() and not monitor
        if show == (not self.sampling.isHidden()):
            return
        if not show:
            self._sizes = self.splitter.sizes()
        self.sampling.setVisible(show)
        if show and self._sizes and self._sizes[2] > 0:
            self.splitter.setSizes(self._sizes)  # the chats keep their width

    def _style_list(self) -> None:
        c = theme.current()
        self.chat_list.setStyleSheet(
            f"QListWidget#chatList {{ background: {c.base}; border: 1px solid {c.border}; border-radius: 8px;"
            f" padding: 4px; outline: 0; }}"
            f"QListWidget#chatList::item {{ padding: 6px 8px; border-radius: 6px; color: {c.text}; }}"
            f"QListWidget#chatList::item:hover {{ background: {c.alt_base}; }}"
            f"QListWidget#chatList::item:selected {{ background: {c.selection}; color: {c.text}; }}")

    def theme_changed(self) -> None:
        self.view.restyle()
        self._style_list()
        super().theme_changed()

    def save_state(self, state) -> None:
        state.setValue("chat/splitter", self.splitter.saveState())
        state.setValue("chat/model", self.load_panel.path or "")
        state.setValue("chat/chat", self.chat_id if self.chat_id is not None else -1)
        state.setValue("chat/settings_shown", self.settings_button.isChecked())

    def restore_state(self, state) -> None:
        splitter = state.value("chat/splitter")
        if splitter is not None:
            self.splitter.restoreState(splitter)
        shown = state.value("chat/settings_shown")
        if shown is not None:
            self.settings_button.setChecked(shown in (True, "true"))
        model = state.value("chat/model")
        if model and Path(str(model)).is_file():
            self.load_panel.select_path(str(model))
        try:
            chat_id = int(state.value("chat/chat", -1))
        except (TypeError, ValueError):
            chat_id = -1
        if chat_id in self.chat_ids():
            self.refresh_chats(select=chat_id)
            self.show_chat(chat_id)

    def shutdown(self) -> None:
        """Window closing: stop the reply and the load, wait for them, free the model."""
        self._closed = True
        self.ctx.actions.set_chat_handler(None)
        if self._stop is not None:
            self._stop.set()
        if self._load_cancel is not None:
            self._load_cancel.set()
        for task in (self._turn_task, self._load_task):
            if task is not None:
                task.wait(SHUTDOWN_WAIT_S)
        engines = [self.engine, *self._load_holder]
        self.engine = self.session = None
        for engine in engines:
            if engine is not None:
                engine.close()
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor_panel.detach()
        if self.store is not None:
            self.store.close()
            self.store = None

    def screenshots(self) -> list[Shot]:
        def conversation(wait) -> None:
            from rooflight.gguf.synthetic import gemma_270m_path

            wait(lambda: self.ctx.machine.detected is not None, 120)
            self.load_panel.select_path(str(gemma_270m_path()))
            wait(lambda: self.load_panel.lp is not None and self.load_panel._task is None, 60)
            self.load(self.load_panel.lp)
            wait(lambda: self.session is not None or not self.loading, 120)
            if self.session is None:
                raise RuntimeError("the Gemma-3-270M model did not load")
            # greedy (shown in the settings): a 270M base model answers best that way,
            # and the screenshot shows the same replies every run
            self.sampling.temperature.setValue(0.0)
            for question in SCREENSHOT_QUESTIONS:
                self.composer.setPlainText(question)
                self.send()
                wait(lambda: not self.generating, 120)

        def monitor(wait) -> None:
            if self.engine is None:
                conversation(wait)
            self.tabs.setCurrentWidget(self.monitor_tab)
            wait(lambda: len(self.monitor.samples()) >= 10, 30)  # a few seconds of history

        def back(_wait) -> None:
            self.tabs.setCurrentIndex(0)

        return [Shot("chat.png", conversation), Shot("chat_monitor.png", monitor, back)]
