"""Attaching images in the Chat page, over real llama.cpp with a generated vision model:
the button, a drop, a paste; hostile images and a model that cannot see get one sentence
and lose nothing; the reply's prompt holds the image's tokens; a stored chat shows its
images again."""

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QColor, QDragEnterEvent, QDropEvent, QImage
from PySide6.QtWidgets import QApplication

from rooflight.gguf.synthetic import write_model
from test_ui_support import cpu_box, make_window
from vision_files import png_bytes, vision_model

pytest.importorskip("llama_cpp")


def loaded(qtbot, window, path):
    page = window.page("chat")
    page.chat_with(str(path))
    qtbot.waitUntil(lambda: page.load_panel.lp is not None and page.load_panel._task is None, timeout=30000)
    qtbot.mouseClick(page.load_panel.load_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.session is not None, timeout=60000)
    page.sampling.max_tokens.setValue(4)
    return page


def drop(widget, mime: QMimeData) -> None:
    """A drag entering the widget, then the drop (Qt delivers a drop only after an enter)."""
    enter = QDragEnterEvent(QPoint(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                            Qt.KeyboardModifier.NoModifier)
    assert QApplication.sendEvent(widget, enter) and enter.isAccepted()
    ev = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                    Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, ev)


def test_attach_by_button_drop_and_paste_then_send(qtbot, tmp_path, monkeypatch):
    lm, _ = vision_model(tmp_path / "m")
    window = make_window(qtbot, cpu_box())
    page = loaded(qtbot, window, lm)
    turns = page.turns
    att = turns.attacher
    assert att.button.isEnabled() and page.engine.vision is not None
    good = tmp_path / "cat.png"
    good.write_bytes(png_bytes(30, 20, seed=1))
    # the button: a file dialog
    monkeypatch.setattr("rooflight.ui.chat_attach.QFileDialog.getOpenFileName",
                        lambda *a, **k: (str(good), ""))
    qtbot.mouseClick(att.button, Qt.MouseButton.LeftButton)
    assert [i.name for i in att.bar.images] == ["cat.png"] and att.bar.isVisible()
    # a drop of a file onto the conversation; the same picture twice adds nothing
    other = tmp_path / "dog.png"
    other.write_bytes(png_bytes(16, 16, seed=2))
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(other)), QUrl.fromLocalFile(str(good))])
    drop(turns.view.viewport(), mime)
    assert [i.name for i in att.bar.images] == ["cat.png", "dog.png"]
    # a paste of a picture into the message box
    pic = QImage(12, 12, QImage.Format.Format_RGB32)
    pic.fill(QColor("red"))
    # (setImage, not setMimeData: a QMimeData made in Python and handed to the clipboard
    # is owned twice and crashes the interpreter's exit)
    QApplication.clipboard().setImage(pic)
    turns.composer.setFocus()
    qtbot.keyClick(turns.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    QApplication.clipboard().clear()
    assert len(att.bar.images) == 3 and att.bar.images[2].format == "png"
    att.bar.remove(2)
    assert len(att.bar.images) == 2

    # a hostile file: one sentence in the banner, the waiting images and the text stay
    bad = tmp_path / "broken.png"
    bad.write_bytes(png_bytes(30, 20)[:-25])
    qtbot.keyClicks(turns.composer, "what are these?")
    errors = []
    monkeypatch.setattr(window.ctx, "show_error", errors.append)
    assert not att.attach_file(bad)
    assert errors and "cut short" in errors[-1] and "\n" not in errors[-1]
    assert len(att.bar.images) == 2 and turns.composer.toPlainText() == "what are these?"

    qtbot.keyClick(turns.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not page.generating, timeout=60000)
    reply = page.last_reply
    assert reply.stats.image_tokens == 32  # two images of 16 tokens reached the model
    assert att.bar.images == [] and not att.bar.isVisible()
    user = turns.view.messages[0]
    assert user._images_row is not None and user._images_row.count() == 3  # two pictures + stretch
    # the stored chat shows its images when opened again
    chat_id = page.session.chat_id
    msgs = page.store.messages(chat_id)
    assert len(msgs[0].images) == 2
    turns.view.set_messages(page.session.messages)
    assert turns.view.messages[0]._images_row is not None


def test_model_without_projector_says_so_and_keeps_the_message(qtbot, tmp_path, monkeypatch):
    lm = write_model(tmp_path / "plain.gguf", n_layer=1, n_embd=64, n_vocab=400, context_length=2048)
    window = make_window(qtbot, cpu_box())
    page = loaded(qtbot, window, lm)
    att = page.turns.attacher
    assert not att.button.isEnabled() and "no vision projector" in att.button.toolTip()
    errors = []
    monkeypatch.setattr(window.ctx, "show_error", errors.append)
    img = tmp_path / "p.png"
    img.write_bytes(png_bytes(8, 8))
    assert not att.attach_file(img)
    assert "no vision projector" in errors[-1] and att.bar.images == []
