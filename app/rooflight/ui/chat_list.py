"""The Chat page's left pane: the stored chats, newest first, with New, Rename, Delete and
Export (Markdown or JSON, written in a worker).

It owns the list and the store operations on it; what a change means for the chat shown
(continue another chat, start a new one) is the page's: it hears `selected`,
`new_requested`, `renamed` and `deleted`.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from rooflight.errors import BadInputError, RooflightError
from rooflight.ui import theme
from rooflight.ui.chat_workers import write_export


class ChatList(QWidget):
    selected = Signal(int)  # a stored chat was picked
    new_requested = Signal()
    renamed = Signal(int, str)
    deleted = Signal(int)

    def __init__(self, ctx, store, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.store = store
        self.busy = False  # a reply is running: the chat shown must not change
        self.setMinimumWidth(230)
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(6)
        self.new_button = QPushButton("New chat")
        self.new_button.setAccessibleName("Start a new chat")
        self.new_button.clicked.connect(self.new_requested)
        col.addWidget(self.new_button)
        self.list = QListWidget()
        self.list.setObjectName("chatList")
        self.list.setAccessibleName("Chats")
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.currentItemChanged.connect(self._picked)
        self.list.itemDoubleClicked.connect(lambda _item: self._rename_clicked())
        col.addWidget(self.list, 1)
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
        self.restyle()

    # -- the list -----------------------------------------------------------------------------
    def refresh(self, select: int | None) -> None:
        """The stored chats, newest first, with `select` selected (signals held)."""
        self.list.blockSignals(True)
        self.list.clear()
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
            self.list.addItem(item)
            if c.id == select:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)
        self.update_controls()

    def chat_ids(self) -> list[int]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())]

    def current_chat(self) -> int | None:
        item = self.list.currentItem()
        return None if item is None else item.data(Qt.ItemDataRole.UserRole)

    def clear_selection(self) -> None:
        self.list.blockSignals(True)
        self.list.setCurrentItem(None)
        self.list.clearSelection()
        self.list.blockSignals(False)
        self.update_controls()

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.update_controls()

    def update_controls(self) -> None:
        self.list.setEnabled(not self.busy)
        self.new_button.setEnabled(not self.busy)
        chosen = self.list.currentItem() is not None and self.store is not None
        for b in (self.rename_button, self.delete_button, self.export_button):
            b.setEnabled(chosen and not self.busy)

    def _picked(self, item, _previous=None) -> None:
        if item is not None:
            self.selected.emit(item.data(Qt.ItemDataRole.UserRole))
        self.update_controls()

    # -- store operations ------------------------------------------------------------------------
    def rename_chat(self, chat_id: int, title: str) -> None:
        title = " ".join(title.split())
        if not title or self.store is None:
            return
        try:
            self.store.rename_chat(chat_id, title)
        except RooflightError as exc:
            self.ctx.show_error(str(exc))
            return
        self.renamed.emit(chat_id, title)

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
        self.deleted.emit(chat_id)

    def export_chat(self, chat_id: int, path: str, fmt: str = "markdown"):
        """Write the chat to `path` as "markdown" or "json" in a worker; returns the task."""
        if fmt not in ("markdown", "json"):
            raise BadInputError(f"Unknown export format {fmt!r}; use markdown or json.")
        return self.ctx.runner.run(
            write_export, self.store, chat_id, str(path), fmt,
            on_done=lambda p: self.ctx.show_info(f"Chat exported to {p}."),
            on_error=lambda exc: self.ctx.report(exc, "exporting the chat"), what="exporting the chat")

    def _rename_clicked(self) -> None:
        chat_id = self.current_chat()
        if chat_id is None or self.busy:
            return
        title, ok = QInputDialog.getText(self, "Rename chat", "Title:", text=self.list.currentItem().text())
        if ok:
            self.rename_chat(chat_id, title)

    def _delete_clicked(self) -> None:
        chat_id = self.current_chat()
        if chat_id is not None and not self.busy:
            self.delete_chat(chat_id)

    def _export_clicked(self) -> None:
        chat_id = self.current_chat()
        if chat_id is None or self.store is None:
            return
        name = "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in self.list.currentItem().text())
        markdown, as_json = "Markdown (*.md)", "JSON (*.json)"
        path, chosen = QFileDialog.getSaveFileName(
            self, "Export chat", str(Path.home() / f"{name.strip() or 'chat'}.md"), f"{markdown};;{as_json}")
        if path:
            fmt = "json" if chosen == as_json or path.lower().endswith(".json") else "markdown"
            self.export_chat(chat_id, path, fmt)

    def restyle(self) -> None:
        c = theme.current()
        self.list.setStyleSheet(
            f"QListWidget#chatList {{ background: {c.base}; border: 1px solid {c.border}; border-radius: 8px;"
            f" padding: 4px; outline: 0; }}"
            f"QListWidget#chatList::item {{ padding: 6px 8px; border-radius: 6px; color: {c.text}; }}"
            f"QListWidget#chatList::item:hover {{ background: {c.alt_base}; }}"
            f"QListWidget#chatList::item:selected {{ background: {c.selection}; color: {c.text}; }}")
