"""The base class of every page."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:
    from rooflight.ui.context import AppContext


class Page(QWidget):
    """A page of the main window. Subclasses set the class attributes and build their
    widgets in __init__(ctx); everything long runs through ctx.runner."""

    key: ClassVar[str] = ""  # stable id: QSettings keys, ctx.show_page(key), screenshot names
    title: ClassVar[str] = ""  # shown in the navigation
    icon: ClassVar[str] = ""  # resources/icon-<icon>.svg

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setObjectName(f"page-{self.key}")
        self.setAccessibleName(self.title)

    def page_shown(self) -> None:
        """Called each time the page becomes the visible one."""

    def save_state(self, state: QSettings) -> None:
        """Remember splitter positions, column widths... under f"{self.key}/..."."""

    def restore_state(self, state: QSettings) -> None:
        """Restore what save_state wrote (values may be missing or stale)."""

    def focus_search(self) -> bool:
        """Give keyboard focus to the page's search box, if it has one (Ctrl+F)."""
        return False

    def theme_changed(self) -> None:
        """The palette changed: repaint anything drawn with theme colours."""
        self.update()

    def shutdown(self) -> None:
        """The window is closing: stop this page's work (workers are cancelled after)."""
