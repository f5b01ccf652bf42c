"""A page for a QStackedWidget or QTabWidget that does not make it taller while hidden.

QStackedLayout.heightForWidth asks every page, shown or not, so a stack whose pages wrap
text is as tall as its tallest page at that width: the model detail then scrolls through
empty space under a short page (the plots) because a hidden one (the advice cards) is
long. A StackPage answers only while it is shown.
"""

from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout, QWidget


class StackPage(QWidget):
    def __init__(self, inner: QWidget | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        if inner is not None:
            box = QVBoxLayout(self)
            box.setContentsMargins(0, 0, 0, 0)
            box.addWidget(inner)

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt's name
        return super().heightForWidth(width) if self.isVisible() else -1
