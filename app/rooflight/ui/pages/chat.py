"""Chat: load a local model at a plan shown (and editable) beforehand, then talk to it.

The page puts together widgets with one job each and keeps which model is loaded and
which chat is shown:
- left, the stored chats (chat_list.ChatList: new, rename, delete, export);
- in the middle the model bar (chat_load.LoadPanel: plan, load, cancel, unload; the engine
  it loads is held by chat_model.ModelSlot), then the
  conversation (chat_turns.TurnsPane: transcript, composer, running each turn) with the
  live monitor (chat_monitor.MonitorTab) as a second tab;
- right, the system prompt and sampling settings (chat_settings.SamplingPanel).

Threads: loading (runtime.engine.load_engine) and every reply (runtime.chat.ChatSession)
run in ctx.runner's workers. The chat store (store/chats.py) is written as the reply
streams, so closing the window mid-reply keeps it: shutdown() stops the reply, waits for
its worker and closes the engine.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QSplitter, QTabWidget, QVBoxLayout, QWidget

from rooflight.errors import RooflightError
from rooflight.ui.chat_list import ChatList
from rooflight.ui.chat_load import LoadPanel
from rooflight.ui.chat_model import ModelSlot
from rooflight.ui.chat_monitor import MonitorTab
from rooflight.ui.chat_settings import SamplingPanel
from rooflight.ui.chat_turns import TurnsPane
from rooflight.ui.pages.base import Page
from rooflight.ui.widgets import label

SHUTDOWN_WAIT_S = 10.0


class ChatPage(Page):
    key = "chat"
    title = "Chat"
    icon = "chat"

    def __init__(self, ctx, parent=None) -> None:
        super().__init__(ctx, parent)
        self.store = self._open_store()
        self.chat_id: int | None = None
        self._closed = False
        self._sizes: list[int] = []

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

        self.chats = ChatList(ctx, self.store)
        self.chats.selected.connect(self.show_chat)
        self.chats.new_requested.connect(self.new_chat)
        self.chats.renamed.connect(self._renamed)
        self.chats.deleted.connect(self._deleted)
        self.sampling = SamplingPanel()
        self.sampling.setMinimumWidth(230)
        self.sampling.defaults_requested.connect(self._sampling_defaults)
        self.monitor_tab = MonitorTab()
        self.turns = TurnsPane(ctx, self.sampling, lambda: self.monitor_tab.monitor)
        self.turns.busy_changed.connect(lambda _busy: self._update_controls())
        self.turns.stored.connect(self._stored)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("chatSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.chats)
        self.splitter.addWidget(self._center())
        self.settings_button.toggled.connect(lambda _on: self._tab_changed(self.tabs.currentIndex()))
        self.splitter.addWidget(self.sampling)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes([230, 560, 250])
        outer.addWidget(self.splitter, 1)

        esc = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        esc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        esc.activated.connect(self.turns.on_escape)

        ctx.actions.set_chat_handler(self.chat_with)
        self.refresh_chats()
        self._update_controls()

    def _center(self) -> QWidget:
        center = QWidget()
        col = QVBoxLayout(center)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(8)
        self.load_panel = LoadPanel(self.ctx)
        self.model = ModelSlot(self.ctx, self.load_panel, self.monitor_tab, self)
        self.model.loaded.connect(self._loaded)
        self.model.ended.connect(self._load_ended)
        self.load_panel.load_requested.connect(self.load)
        self.load_panel.cancel_requested.connect(self.cancel_load)
        self.load_panel.unload_requested.connect(self.unload)
        col.addWidget(self.load_panel)
        self.tabs = QTabWidget()
        self.tabs.setAccessibleName("Conversation and monitor")
        self.tabs.addTab(self.turns, "Conversation")
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

    # -- the parts, by the names the tests and the window use ------------------------------------
    view = property(lambda self: self.turns.view)
    composer = property(lambda self: self.turns.composer)
    edit_note = property(lambda self: self.turns.edit_note)
    send_button = property(lambda self: self.turns.send_button)
    stop_button = property(lambda self: self.turns.stop_button)
    regen_button = property(lambda self: self.turns.regen_button)
    last_reply = property(lambda self: self.turns.last_reply)
    stop_tokens = property(lambda self: self.turns.stop_tokens)
    chat_list = property(lambda self: self.chats.list)
    new_button = property(lambda self: self.chats.new_button)
    monitor = property(lambda self: self.monitor_tab.monitor)
    engine = property(lambda self: self.model.engine)
    _load_holder = property(lambda self: self.model.holder)
    monitor_panel = property(lambda self: self.monitor_tab.panel)

    @property
    def session(self):
        return self.turns.session

    @session.setter
    def session(self, session) -> None:
        self.turns.session = session

    def send(self) -> None:
        self.turns.send()

    def regenerate(self) -> None:
        self.turns.regenerate()

    def stop(self) -> None:
        self.turns.stop()

    def edit_message(self, index: int) -> None:
        self.turns.edit_message(index)

    def cancel_edit(self) -> None:
        self.turns.cancel_edit()

    def chat_ids(self) -> list[int]:
        return self.chats.chat_ids()

    def rename_chat(self, chat_id: int, title: str) -> None:
        self.chats.rename_chat(chat_id, title)

    def delete_chat(self, chat_id: int, *, confirm: bool = True) -> None:
        self.chats.delete_chat(chat_id, confirm=confirm)

    def export_chat(self, chat_id: int, path: str, fmt: str = "markdown"):
        return self.chats.export_chat(chat_id, path, fmt)

    # -- state of the controls ------------------------------------------------------------------
    @property
    def generating(self) -> bool:
        return self.turns.generating

    @property
    def loading(self) -> bool:
        return self.model.loading

    def _update_controls(self) -> None:
        busy = self.generating
        self.turns.loading = self.loading
        self.turns.update_controls()
        self.chats.set_busy(busy)
        self.load_panel.setEnabled(not busy)  # a reply runs on the loaded model

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
        self.chats.refresh(self.chat_id if select is None else select)
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
            self.chats.clear_selection()
        self._update_controls()

    def new_chat(self) -> None:
        self.show_chat(None)
        self.composer.setFocus()

    def _renamed(self, chat_id: int, title: str) -> None:
        if self.session is not None and self.session.chat_id == chat_id:
            self.session.title = title
        self.refresh_chats()

    def _deleted(self, chat_id: int) -> None:
        if chat_id == self.chat_id:
            self.show_chat(None)
        self.refresh_chats()

    def _stored(self, when: str) -> None:
        made = self.session.chat_id if self.session is not None else None
        if when == "streaming":
            if made is not None and made != self.chat_id:
                self.chat_id = made  # the store made the chat for the first message
                self.refresh_chats()
            return
        if when == "done" and made is not None:
            self.chat_id = made
        self.refresh_chats()

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
        self.session = None
        self.model.load(lp, force)
        self._set_status()
        self._update_controls()

    def cancel_load(self) -> None:
        self.model.cancel()

    def _load_ended(self) -> None:
        self._set_status()
        self._update_controls()

    def _loaded(self, engine) -> None:
        from rooflight.runtime.chat import ChatSession

        self.session = ChatSession(engine, store=self.store)
        self.view.author = engine.model_name
        if self.chat_id is not None:
            self.show_chat(self.chat_id)  # continue the chat shown
        else:
            self.session.system_prompt = self.sampling.system_prompt
            self.sampling.set_sampling(self.session.sampling)
            self.view.clear()
        self._set_status()
        self._update_controls()
        self.composer.setFocus()

    def unload(self) -> None:
        if self.loading:
            return
        if self.generating:
            self.stop()
        self.session = None
        self.model.release()
        self._set_status()
        self.show_chat(self.chat_id)
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

    def _tab_changed(self, index: int) -> None:
        # the monitor's charts need the width: the chat settings step aside meanwhile
        monitor = self.tabs.widget(index) is self.monitor_tab
        if monitor:
            self.monitor_tab.ensure()
        show = self.settings_button.isChecked() and not monitor
        if show == (not self.sampling.isHidden()):
            return
        if not show:
            self._sizes = self.splitter.sizes()
        self.sampling.setVisible(show)
        if show and self._sizes and self._sizes[2] > 0:
            self.splitter.setSizes(self._sizes)  # the chats keep their width

    def theme_changed(self) -> None:
        self.view.restyle()
        self.chats.restyle()
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
        self.turns.shutdown()
        self.model.closed = True
        self.model.cancel()
        if self.turns.task is not None:
            self.turns.task.wait(SHUTDOWN_WAIT_S)
        self.model.shutdown(SHUTDOWN_WAIT_S)
        self.session = None
        self.model.close_engines()
        self.monitor_tab.shutdown()
        if self.store is not None:
            self.store.close()
            self.store = None
