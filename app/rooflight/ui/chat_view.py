"""The conversation as widgets: one frame per message (Markdown body, Copy and Edit
buttons, the reply's measured speed beside the prediction under it), a scroll area that
follows the newest text, and the composer (Enter sends, Shift+Enter a new line).

Streaming: tokens arrive many times a second; append() only collects them and a timer
renders the growing reply at most FLUSH_HZ times a second, so a fast model never floods
the event loop with Markdown layouts. A long reply costs more to lay out (about 2 ms per
2 KB here), so the timer also waits RENDER_SHARE times the last render's cost: the GUI
thread spends at most a fifth of its time on the streaming reply, however long it grows.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QKeyEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from rooflight.ui import theme
from rooflight.ui.markdown import MarkdownView
from rooflight.ui.widgets import label, tok_s

FLUSH_HZ = 30
RENDER_SHARE = 4  # wait this many times the last render's duration before the next one
MAX_FLUSH_MS = 500
STOP_REASONS = {
    "eos": "the model ended its turn",
    "stop_string": "the model ended its turn",
    "max_tokens": "reached max tokens",
    "context_full": "the context is full",
    "stopped": "stopped by you",
}


def _seconds(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


def _rate(v: float | None) -> str:
    return "—" if v is None else f"{tok_s(v)} tok/s"


def stats_text(stats: Mapping[str, Any] | None) -> str:
    """One line under a reply: first token, prefill and decode measured, each beside the
    estimator's prediction for the same work; then tokens and why it stopped."""
    if not stats:
        return ""
    p = stats.get("predicted") or {}

    def pair(name: str, measured: str, predicted: str | None) -> str:
        return f"{name} {measured}" + (f" (predicted {predicted})" if predicted else "")

    pred_ttft = p.get("time_to_first_token_s")
    pred_prefill = p.get("prefill_tok_s")
    pred_decode = p.get("decode_tok_s")
    parts = [
        pair("first token", _seconds(stats.get("time_to_first_token_s")),
             _seconds(pred_ttft) if pred_ttft is not None else None),
        pair("prefill", _rate(stats.get("prefill_tok_s")), _rate(pred_prefill) if pred_prefill else None),
        pair("decode", _rate(stats.get("decode_tok_s")), _rate(pred_decode) if pred_decode else None),
    ]
    tokens = f"{stats.get('generated_tokens', 0)} tokens"
    cached = stats.get("cached_tokens") or 0
    if cached:
        tokens += f", {cached} of {stats.get('prompt_tokens', 0)} prompt tokens reused"
    parts.append(tokens)
    reason = stats.get("stop_reason")
    if reason:
        parts.append(STOP_REASONS.get(reason, reason))
    if stats.get("dropped_messages"):
        parts.append(f"{stats['dropped_messages']} oldest messages left out of the context")
    if stats.get("truncated"):
        parts.append("message shortened to fit")
    return " · ".join(parts)


class MessageWidget(QFrame):
    """One message: who wrote it, its Markdown, Copy (and Edit for the user's), stats."""

    copy_clicked = Signal(int)
    edit_clicked = Signal(int)

    def __init__(self, index: int, role: str, text: str, *, author: str = "",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.index = index
        self.role = role
        self.setObjectName("message")
        self.setProperty("messageRole", role)
        col = QVBoxLayout(self)
        col.setContentsMargins(12, 8, 12, 10)
        col.setSpacing(4)
        head = QHBoxLayout()
        head.setSpacing(6)
        self.author = label(author or ("You" if role == "user" else "Model"))
        self.author.setObjectName("messageAuthor")
        head.addWidget(self.author)
        head.addStretch(1)
        self.copy_button = self._tool("Copy", f"Copy message {index + 1}", "Copy the message as Markdown")
        self.copy_button.clicked.connect(lambda: self.copy_clicked.emit(self.index))
        head.addWidget(self.copy_button)
        self.edit_button = None
        if role == "user":
            self.edit_button = self._tool("Edit", f"Edit message {index + 1}",
                                          "Edit this message and send it again (later messages are replaced)")
            self.edit_button.clicked.connect(lambda: self.edit_clicked.emit(self.index))
            head.addWidget(self.edit_button)
        col.addLayout(head)
        self.body = MarkdownView(text)
        self.body.setAccessibleName(f"Message {index + 1} from {'you' if role == 'user' else 'the model'}")
        col.addWidget(self.body)
        self.stats = label("", "muted", wrap=True, selectable=True)
        self.stats.setObjectName("messageStats")
        self.stats.setAccessibleName("Reply speed")
        self.stats.hide()
        col.addWidget(self.stats)
        self.notes = label("", "muted", wrap=True, selectable=True)
        self.notes.setObjectName("messageNotes")
        self.notes.hide()
        col.addWidget(self.notes)
        self.restyle()

    def _tool(self, text: str, name: str, tip: str) -> QToolButton:
        b = QToolButton()
        b.setText(text)
        b.setAccessibleName(name)
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.setCursor(Qt.CursorShape.PointingHandCursor)
        return b

    @property
    def text(self) -> str:
        return self.body.markdown

    def set_text(self, text: str) -> None:
        self.body.set_markdown(text)

    def set_stats(self, stats: Mapping[str, Any] | None, *, complete: bool = True, status: str = "") -> None:
        """The line under a reply: its stats, or a status while it streams / if it broke off."""
        line = status or stats_text(stats)
        if not complete and not status:
            line = "Reply interrupted (the app closed before it finished)." + (f" {line}" if line else "")
        self.stats.setText(line)
        self.stats.setVisible(bool(line))

    def set_notes(self, notes: list[str] | tuple[str, ...]) -> None:
        self.notes.setText("\n".join(f"Note: {n}" for n in notes))
        self.notes.setVisible(bool(notes))

    def set_busy(self, busy: bool) -> None:
        """While a reply streams its buttons wait (editing mid-reply would race it)."""
        self.copy_button.setEnabled(not busy)
        if self.edit_button is not None:
            self.edit_button.setEnabled(not busy)

    def restyle(self) -> None:
        c = theme.current()
        bg = c.selection if self.role == "user" else c.card
        self.setStyleSheet(
            f"QFrame#message {{ background: {bg}; border: 1px solid {c.border}; border-radius: 10px; }}"
            f"QLabel#messageAuthor {{ font-weight: 600; color: {c.text}; }}"
            f"QToolButton {{ color: {c.info_text}; border: none; padding: 1px 6px; background: transparent; }}"
            f"QToolButton:hover {{ text-decoration: underline; }}"
            f"QToolButton:disabled {{ color: {c.muted}; }}")
        self.body.restyle()


class ConversationView(QScrollArea):
    """The messages of one chat, newest at the bottom; follows the bottom while it is
    there (scrolling up to read stops the following until the bottom is reached again)."""

    edit_requested = Signal(int)  # index of a user message

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setAccessibleName("Conversation")
        inner = QWidget()
        inner.setObjectName("conversation")
        self._col = QVBoxLayout(inner)
        self._col.setContentsMargins(4, 4, 12, 4)
        self._col.setSpacing(10)
        self.empty = label("", "muted", wrap=True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self._col.addWidget(self.empty)
        self._col.addStretch(1)
        self.setWidget(inner)
        self.messages: list[MessageWidget] = []
        self.author = "Model"
        self._follow = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._scrolled)
        bar.rangeChanged.connect(self._range_changed)
        # streaming
        self._streaming: MessageWidget | None = None
        self._stream_text = ""
        self._dirty = False
        self.renders = 0  # how many times the streaming reply was laid out (tests: batching)
        self._timer = QTimer(self)
        self._timer.setInterval(1000 // FLUSH_HZ)
        self._timer.timeout.connect(self.flush)

    # -- messages -----------------------------------------------------------------------
    def set_empty_text(self, text: str) -> None:
        self.empty.setText(text)
        self.empty.setVisible(not self.messages)

    def clear(self) -> None:
        self.end_stream()
        self.truncate(0)

    def set_messages(self, messages) -> None:
        """Show `messages` (objects with role, content, stats, complete), replacing all."""
        self.clear()
        for m in messages:
            w = self.add_message(m.role, m.content)
            if getattr(m, "images", None):  # a message with images shows them
                from rooflight.ui.chat_attach import add_thumbnails

                add_thumbnails(w, m.images)
            if m.role == "assistant":
                w.set_stats(m.stats, complete=m.complete)
        self._follow = True
        self._to_bottom()

    def add_message(self, role: str, text: str) -> MessageWidget:
        w = MessageWidget(len(self.messages), role, text, author=self.author if role == "assistant" else "")
        w.copy_clicked.connect(self.copy_message)
        w.edit_clicked.connect(self.edit_requested)
        self._col.insertWidget(self._col.count() - 1, w)  # before the stretch
        self.messages.append(w)
        self.empty.hide()
        self._follow = True
        return w

    def truncate(self, keep: int) -> None:
        """Keep the first `keep` messages."""
        while len(self.messages) > keep:
            w = self.messages.pop()
            if w is self._streaming:
                self.end_stream()
            self._col.removeWidget(w)
            w.hide()
            w.deleteLater()
        self.empty.setVisible(not self.messages)

    def texts(self) -> list[tuple[str, str]]:
        return [(w.role, w.text) for w in self.messages]

    def copy_message(self, index: int) -> None:
        QGuiApplication.clipboard().setText(self.messages[index].text)

    def set_busy(self, busy: bool) -> None:
        for w in self.messages:
            w.set_busy(busy)

    def restyle(self) -> None:
        for w in self.messages:
            w.restyle()

    # -- streaming ------------------------------------------------------------------------
    def begin_stream(self) -> MessageWidget:
        """Add the reply that tokens will stream into."""
        w = self.add_message("assistant", "")
        w.set_stats(None, status="Thinking…")
        self._streaming, self._stream_text, self._dirty = w, "", False
        self._timer.start(1000 // FLUSH_HZ)
        return w

    @property
    def streaming(self) -> MessageWidget | None:
        return self._streaming

    @property
    def stream_text(self) -> str:
        return self._stream_text

    def append(self, chunk: str) -> None:
        """Text of the streaming reply (rendered by the timer, not here)."""
        if self._streaming is None:
            return
        self._stream_text += chunk
        self._dirty = True

    def set_stream_status(self, text: str) -> None:
        if self._streaming is not None:
            self._streaming.set_stats(None, status=text)

    def flush(self) -> None:
        if self._streaming is not None and self._dirty:
            self._dirty = False
            started = time.perf_counter()
            self._streaming.set_text(self._stream_text)
            self.renders += 1
            cost_ms = (time.perf_counter() - started) * 1000
            self._timer.setInterval(int(min(MAX_FLUSH_MS, max(1000 / FLUSH_HZ, RENDER_SHARE * cost_ms))))

    def end_stream(self) -> MessageWidget | None:
        """Stop streaming; the reply widget (if any) is returned for its final text."""
        self._timer.stop()
        self.flush()
        w, self._streaming = self._streaming, None
        return w

    # -- following the bottom -------------------------------------------------------------
    def _scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - 4

    def _range_changed(self, _lo: int, hi: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(hi)

    def _to_bottom(self) -> None:
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())


class Composer(QPlainTextEdit):
    """The message box: Enter sends, Shift+Enter starts a new line, Esc is passed up."""

    send = Signal()
    escape = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Message")
        self.setPlaceholderText("Message (Enter sends, Shift+Enter for a new line)")
        self.setTabChangesFocus(True)
        fm = self.fontMetrics()
        self.setFixedHeight(fm.lineSpacing() * 3 + 18)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt's name
        key = event.key()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
            else:
                self.send.emit()
            event.accept()
            return
        if key == Qt.Key.Key_Escape:
            self.escape.emit()
            event.accept()
            return
        super().keyPressEvent(event)
