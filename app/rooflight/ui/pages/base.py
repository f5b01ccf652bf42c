"""The base class of every page, and what a page may tell the screenshot tool."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:
    from rooflight.ui.context import AppContext


@dataclass(frozen=True)
class Shot:
    """One screenshot of a page: `prepare(wait_until)` puts the page in the state to show
    (select a row, open a chat...) and may wait for workers with
    wait_until(predicate, timeout_s); the window is grabbed afterwards, then `after(wait_until)`
    undoes what later shots should not see."""

    file: str
    prepare: Callable[[Callable[..., None]], None] | None = None
    after: Callable[[Callable[..., None]], None] | None = None


class Page(QWidget):
    """A page of the main window. Subclasses set the class attributes and build their
    widgets in __init__(ctx); everything long runs through ctx.runner."""

    key: ClassVar[str] = ""  # stable id: QSettings keys, ctx.show_page(key), screenshots
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

    def screenshots(self) -> list[Shot]:
        """What screenshots.py saves for this page (default: the page as it is)."""
        return [Shot(f"{self.key}.png")]

    def shutdown(self) -> None:
        """The window is closing: stop this page's work (workers are cancelled after)."""
