"""The Chat page's conversation: the transcript (chat_view.ConversationView), the composer
with Send / Stop / Regenerate, editing a sent message, and running each turn in a worker.

A turn is runtime.chat.ChatSession's send, regenerate or edit_and_resend, run by
chat_workers.run_turn in ctx.runner's worker; tokens come back through task.stream, the
live rate through task.progress. Stop (or Esc) sets the turn's stop event, which the chat
loop checks before each decode step, so a reply ends within one token.

Extending the composer (attachments, say): `tools` is the column of buttons beside the
composer, and `_start_turn` is the one place a message goes to the session.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from rooflight.errors import BadInputError
from rooflight.ui.chat_view import Composer, ConversationView
from rooflight.ui.chat_workers import run_turn
from rooflight.ui.widgets import Note, tok_s


class TurnsPane(QWidget):
    busy_changed = Signal(bool)  # a turn started (True) or ended (False)
    # the chat store changed: "streaming" (the first message may have made the chat),
    # "done" or "failed" (the turn ended)
    stored = Signal(str)

    def __init__(self, ctx, sampling, monitor: Callable[[], object], parent: QWidget | None = None) -> None:
        """`sampling`: the chat_settings.SamplingPanel whose values a turn uses;
        `monitor`: the hardware monitor the live rate goes to (None: none yet)."""
        super().__init__(parent)
        self.ctx = ctx
        self.sampling = sampling
        self._monitor = monitor
        self.session = None
        self.loading = False  # a model is loading: nothing can be sent
        self.closed = False
        self.last_reply = None  # the runtime's Reply of the last finished turn
        self.stop_tokens: int | None = None  # tokens evaluated when Stop was pressed (tests)
        self.task = None
        self._stop: threading.Event | None = None
        self._edit_index: int | None = None

        col = QVBoxLayout(self)
        col.setContentsMargins(0, 8, 0, 0)
        col.setSpacing(8)
        self.view = ConversationView()
        self.view.edit_requested.connect(self.edit_message)
        col.addWidget(self.view, 1)
        self.edit_note = Note("info", "")
        self.edit_note.hide()
        col.addWidget(self.edit_note)
        row = QHBoxLayout()
        row.setSpacing(8)
        self.composer = Composer()
        self.composer.send.connect(self.send)
        self.composer.escape.connect(self.on_escape)
        row.addWidget(self.composer, 1)
        self.tools = QVBoxLayout()
        self.tools.setSpacing(4)
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
            self.tools.addWidget(b)
        self.tools.addStretch(1)
        row.addLayout(self.tools)
        from rooflight.ui.chat_attach import ImageAttacher

        self.attacher = ImageAttacher(self)  # images for the next message (button, drop, paste)
        col.addWidget(self.attacher.bar)
        col.addLayout(row)

    # -- state ----------------------------------------------------------------------------------
    @property
    def generating(self) -> bool:
        return self.task is not None

    @property
    def engine(self):
        return None if self.session is None else self.session.engine

    def update_controls(self) -> None:
        busy = self.generating
        ready = self.session is not None and not busy and not self.loading
        self.composer.setEnabled(self.session is not None)
        self.send_button.setVisible(not busy)
        self.send_button.setEnabled(ready)
        self.stop_button.setVisible(busy)
        has_user = self.session is not None and any(m.role == "user" for m in self.session.messages)
        self.regen_button.setEnabled(ready and has_user)
        self.view.set_busy(busy)
        self.attacher.update_controls()
        if self.session is None:
            self.view.set_empty_text("Load a model above to chat with it." if not self.loading
                                     else "Loading the model…")
        else:
            e = self.engine
            self.view.set_empty_text(f"Ask {e.model_name} anything. Enter sends, "
                                     "Shift+Enter starts a new line, Esc stops a reply.\n\n"
                                     f"Chat format: {e.format.describe()}.")

    # -- composing ------------------------------------------------------------------------------
    def send(self) -> None:
        """Send the composer's text (or, while editing a message, send the edit)."""
        text = self.composer.toPlainText().strip()
        if not text or self.session is None or self.generating or self.loading:
            return
        if self._edit_index is not None:
            self._start_turn("edit", self._edit_index, text)
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

    def stop(self) -> None:
        """Stop the reply: the chat loop sees it before its next decode step."""
        if self._stop is not None and not self._stop.is_set():
            engine = self.engine
            self.stop_tokens = engine.tokens_evaluated if engine is not None else None
            self._stop.set()
            self.view.set_stream_status("Stopping…")

    def on_escape(self) -> None:
        if self.generating:
            self.stop()
        elif self._edit_index is not None:
            self.cancel_edit()

    # -- a turn ---------------------------------------------------------------------------------
    def _start_turn(self, op: str, index: int, text: str) -> None:
        try:
            sampling = self.sampling.sampling()
        except BadInputError as exc:
            self.ctx.show_error(str(exc))
            return
        session = self.session
        try:
            if op == "regenerate":
                keep = session.last_user_index() + 1
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
        images = self.attacher.bar.take() if op == "send" else []
        self._sent = (text, images) if op == "send" else None
        if op == "edit":
            self.view.messages[index].set_text(text)
        elif op == "send":
            from rooflight.ui.chat_attach import add_thumbnails

            add_thumbnails(self.view.add_message("user", text), images)
        self.cancel_edit()
        self.composer.clear()
        self.view.begin_stream()
        self._stop = threading.Event()
        self.stop_tokens = None
        self.task = self.ctx.runner.run(
            run_turn, session, op, index, text, self.sampling.system_prompt, sampling, self._stop,
            self._monitor(), images=images, with_task=True, on_stream=self._streamed, on_progress=self._live,
            on_done=self._done, on_error=self._failed, on_cancelled=self._cancelled,
            what="generating the reply")
        self.busy_changed.emit(True)

    def _streamed(self, chunk: str) -> None:
        self.view.append(chunk)
        self.stored.emit("streaming")

    def _live(self, value) -> None:
        tokens, rate = value
        if self._stop is not None and self._stop.is_set():
            return
        speed = f" · {tok_s(rate)} tok/s" if rate else ""
        self.view.set_stream_status(f"Writing… {tokens} tokens{speed}")

    def _finished(self) -> None:
        self.task = None
        self._stop = None

    def _done(self, reply) -> None:
        self._finished()
        if self.closed:
            return
        w = self.view.end_stream()
        if w is not None:
            w.set_text(reply.text)
            w.set_stats(reply.stats.to_dict())
            w.set_notes(list(reply.notices))
        self.last_reply = reply
        self.stored.emit("done")
        self.busy_changed.emit(False)

    def _failed(self, exc: BaseException) -> None:
        self._finished()
        if self.closed:
            return
        self.view.end_stream()
        self.ctx.report(exc, "generating the reply")
        if self.session is not None:
            self.view.set_messages(self.session.messages)  # what the session really holds
            sent, self._sent = getattr(self, "_sent", None), None
            if sent is not None and not any(m.role == "user" and m.content == sent[0]
                                            for m in self.session.messages[-2:]):
                # refused before the session took it (a model that cannot see images):
                # the text and the images go back where they were
                self.composer.setPlainText(sent[0])
                self.attacher.bar.put_back(sent[1])
        self.stored.emit("failed")
        self.busy_changed.emit(False)

    def _cancelled(self) -> None:
        self._finished()
        if not self.closed:
            self.view.end_stream()
            self.busy_changed.emit(False)

    def shutdown(self) -> None:
        """The window closes: stop the reply (the page waits for `task`)."""
        self.closed = True
        if self._stop is not None:
            self._stop.set()
