"""Images in the Chat page: attach them to the next message (a button, drag and drop onto
the conversation or the message box, paste), see them waiting, and in the transcript.

The checks are the runtime's (runtime/images.check_image): a bad image gets its one
sentence in the page's error banner and nothing else changes (the message being written
and the images already attached stay). A model loaded without a projector cannot see
images: the button says why, and a dropped or pasted image gets the runtime's sentence.
Sending takes the waiting images with the text (TurnsPane._start_turn); the session
stores them with the chat, by hash.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QEvent, QIODevice, QObject, Qt, Signal
from PySide6.QtGui import QImage, QKeySequence, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from rooflight.errors import BadInputError
from rooflight.runtime.images import ImageData, check_image, read_image

THUMB_PX = 72
IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.gif *.bmp);;All files (*)"


def thumbnail(data: bytes, px: int = THUMB_PX) -> QLabel:
    """A small picture of the image (Qt decodes it; only for display)."""
    pm = QPixmap()
    pm.loadFromData(QByteArray(data))
    lab = QLabel()
    if not pm.isNull():
        lab.setPixmap(pm.scaled(px, px, Qt.AspectRatioMode.KeepAspectRatio,
                                Qt.TransformationMode.SmoothTransformation))
    else:
        lab.setText("(image)")
    lab.setFixedSize(px, px)
    lab.setAlignment(Qt.AlignmentFlag.AlignCenter)
    return lab


def add_thumbnails(message_widget, images: list[ImageData]) -> None:
    """Show a message's images in the transcript, above its text."""
    if not images or getattr(message_widget, "_images_row", None) is not None:
        return
    row = QHBoxLayout()
    row.setSpacing(6)
    for i, img in enumerate(images):
        t = thumbnail(img.data)
        t.setToolTip(f"{img.name or 'image'} · {img.width} x {img.height} · {img.format.upper()}")
        t.setAccessibleName(f"Image {i + 1} of message {message_widget.index + 1}")
        row.addWidget(t)
    row.addStretch(1)
    message_widget._images_row = row
    message_widget.layout().insertLayout(1, row)  # under the author line


def image_from_qimage(img: QImage, name: str = "pasted image") -> ImageData:
    """A pasted picture, as PNG bytes, through the same checks as a file."""
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    img.save(buf, "PNG")
    return check_image(bytes(buf.data()), name)


class AttachmentBar(QWidget):
    """The images waiting to go with the next message; each can be removed."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.images: list[ImageData] = []
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.setSpacing(6)
        self.setAccessibleName("Images attached to the next message")
        self.hide()

    def add(self, img: ImageData) -> None:
        if any(i.sha256 == img.sha256 for i in self.images):
            return  # the same picture twice adds nothing
        self.images.append(img)
        self._rebuild()

    def remove(self, index: int) -> None:
        if 0 <= index < len(self.images):
            del self.images[index]
            self._rebuild()

    def take(self) -> list[ImageData]:
        out, self.images = self.images, []
        self._rebuild()
        return out

    def put_back(self, images: list[ImageData]) -> None:
        for img in images:
            self.add(img)

    def _rebuild(self) -> None:
        while self._row.count():
            item = self._row.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        for i, img in enumerate(self.images):
            box = QWidget()
            col = QVBoxLayout(box)
            col.setContentsMargins(0, 0, 0, 0)
            col.setSpacing(0)
            col.addWidget(thumbnail(img.data, 56))
            rm = QToolButton()
            rm.setText("Remove")
            rm.setAccessibleName(f"Remove image {i + 1}")
            rm.setToolTip(f"Do not send {img.name or 'this image'}")
            rm.setAutoRaise(True)
            rm.clicked.connect(lambda _=False, i=i: self.remove(i))
            col.addWidget(rm)
            box.setToolTip(f"{img.name or 'image'} · {img.width} x {img.height}")
            self._row.addWidget(box)
        self._row.addStretch(1)
        self.setVisible(bool(self.images))
        self.changed.emit()


class ImageAttacher(QObject):
    """Wires a TurnsPane: the Image button, drops on the conversation and the composer,
    paste into the composer."""

    def __init__(self, turns) -> None:
        super().__init__(turns)
        self.turns = turns
        self.bar = AttachmentBar()
        self.button = QPushButton("Image…")
        self.button.setAccessibleName("Attach an image")
        self.button.clicked.connect(self.choose_file)
        turns.tools.insertWidget(turns.tools.count() - 1, self.button)  # before the stretch
        for w in (turns.composer, turns.composer.viewport(), turns.view, turns.view.viewport()):
            w.setAcceptDrops(True)
            w.installEventFilter(self)
        turns.composer.installEventFilter(self)

    # -- can the model see? ----------------------------------------------------------------
    def _why_not(self) -> str | None:
        engine = self.turns.engine
        if engine is None:
            return "Load a model first: images go with a message to a vision model."
        if engine.vision is None:
            from rooflight.runtime.chat_images import no_projector_sentence

            return no_projector_sentence(engine)
        return None

    def update_controls(self) -> None:
        why = self._why_not()
        self.button.setEnabled(why is None and not self.turns.generating and not self.turns.loading)
        self.button.setToolTip(why or "Attach a PNG, JPEG, GIF or BMP image to the next message "
                                      "(or drop one here, or paste it)")

    # -- adding ----------------------------------------------------------------------------
    def attach(self, make) -> bool:
        """make() -> ImageData; a refusal is one sentence in the banner, nothing else changes."""
        why = self._why_not()
        if why is not None:
            self.turns.ctx.show_error(why)
            return False
        try:
            img = make()
        except BadInputError as exc:
            self.turns.ctx.show_error(str(exc))
            return False
        self.bar.add(img)
        return True

    def attach_file(self, path: str | Path) -> bool:
        return self.attach(lambda: read_image(path))

    def attach_qimage(self, img: QImage, name: str = "pasted image") -> bool:
        return self.attach(lambda: image_from_qimage(img, name))

    def choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.turns, "Attach an image", "", IMAGE_FILTER)
        if path:
            self.attach_file(path)

    def attach_mime(self, mime) -> bool:
        """Dropped or pasted data: files (each checked), else a picture."""
        files = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()] if mime.hasUrls() else []
        if files:
            ok = False
            for f in files:
                ok = self.attach_file(f) or ok
            return ok
        if mime.hasImage():
            img = mime.imageData()
            if isinstance(img, QImage) and not img.isNull():
                return self.attach_qimage(img)
        return False

    @staticmethod
    def _is_attachment(mime) -> bool:
        return (mime.hasUrls() and any(u.isLocalFile() for u in mime.urls())) or mime.hasImage()

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt's name
        t = event.type()
        if t in (QEvent.Type.DragEnter, QEvent.Type.DragMove) and self._is_attachment(event.mimeData()):
            event.acceptProposedAction()
            return True
        if t == QEvent.Type.Drop and self._is_attachment(event.mimeData()):
            self.attach_mime(event.mimeData())
            event.acceptProposedAction()
            return True
        if t == QEvent.Type.KeyPress and event.matches(QKeySequence.StandardKey.Paste):
            from PySide6.QtWidgets import QApplication

            mime = QApplication.clipboard().mimeData()
            if mime is not None and ((mime.hasImage() and not mime.hasText())
                                     or (mime.hasUrls() and any(u.isLocalFile() for u in mime.urls()))):
                self.attach_mime(mime)
                return True
        return super().eventFilter(obj, event)
