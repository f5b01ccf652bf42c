"""Markdown for chat messages: Qt's own GitHub-dialect parser (QTextDocument.setMarkdown),
with code blocks given a tinted background, wrapped instead of clipped, and a view that
is exactly as tall as its text (messages stack in a scroll area, which scrolls them).
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtGui import (
    QColor,
    QTextBlockFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextOption,
)
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser, QWidget

from rooflight.ui import theme

CODE_PADDING = 8  # px each side of a code block's text


def _is_code(fmt: QTextBlockFormat) -> bool:
    # fenced blocks carry the fence; indented ones an (empty) language property
    return fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.hasProperty(
        QTextFormat.Property.BlockCodeLanguage)


def render_markdown(doc: QTextDocument, text: str) -> int:
    """Replace `doc`'s content with `text` parsed as GitHub Markdown; returns the number
    of code-block lines styled."""
    doc.setMarkdown(text, QTextDocument.MarkdownFeature.MarkdownDialectGitHub)
    colors = theme.current()
    code_bg = QColor(colors.free)
    styled = 0
    cursor = QTextCursor(doc)
    block = doc.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if _is_code(fmt):
            fmt.setBackground(code_bg)
            fmt.setLeftMargin(CODE_PADDING)
            fmt.setRightMargin(CODE_PADDING)
            # long code lines wrap: a message view has no horizontal scroll bar to reach them
            fmt.setNonBreakableLines(False)
            cursor.setPosition(block.position())
            cursor.setBlockFormat(fmt)
            styled += 1
        block = block.next()
    return styled


class MarkdownView(QTextBrowser):
    """Read-only Markdown whose height follows its text at the current width: no scroll
    bars of its own, links open in the browser, text selectable with mouse and keyboard."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setOpenExternalLinks(True)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet("QTextBrowser { background: transparent; }")
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit())
        self.markdown = ""
        self.set_markdown(text)

    def set_markdown(self, text: str) -> None:
        self.markdown = text
        render_markdown(self.document(), text)
        self._fit()

    def restyle(self) -> None:
        """The theme changed: code blocks take the new colours."""
        render_markdown(self.document(), self.markdown)

    def _fit(self) -> None:
        doc = self.document()
        width = self.viewport().width()
        if width > 0 and doc.textWidth() != width:  # setting it lays the text out again
            doc.setTextWidth(width)
        margins = self.contentsMargins()
        height = math.ceil(doc.size().height()) + margins.top() + margins.bottom()
        if height != self.height():
            self.setFixedHeight(max(height, 1))

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit()
