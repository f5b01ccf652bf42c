"""The main window: side navigation, a banner area, and the pages in a stack.

Pages come from pages.PAGES; the window routes their requests (download_requested,
chat_requested signals) to ctx.actions, shows ctx messages as banners, and remembers its
geometry, the last page and each page's own state (splitters) in ctx.ui_state.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QIcon, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from rooflight.ui import theme
from rooflight.ui.context import AppContext
from rooflight.ui.pages import START_PAGE, page_classes
from rooflight.ui.pages.base import Page
from rooflight.ui.whatif import short_gpu
from rooflight.ui.widgets import Note, label

INFO_SECONDS = 8  # info banners go away by themselves; errors and warnings stay
MAX_BANNERS = 3


class BannerArea(QWidget):
    """Messages at the top of the window, newest last; the same sentence is shown once."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(16, 10, 16, 0)
        self._layout.setSpacing(6)
        self.setAccessibleName("messages")
        self.hide()

    def notes(self) -> list[Note]:
        return [n for n in self.findChildren(Note) if not n.isHidden()]

    def texts(self) -> list[str]:
        return [n.text.text() for n in self.notes()]

    def show_message(self, kind: str, text: str) -> None:
        for n in self.notes():
            if n.text.text() == text:
                return
        note = Note(kind, text, closable=True)
        note.closed.connect(lambda n=note: self._remove(n))
        self._layout.addWidget(note)
        while len(self.notes()) > MAX_BANNERS:
            self._remove(self.notes()[0])
        self.show()
        if kind == "info":
            QTimer.singleShot(INFO_SECONDS * 1000, note, lambda n=note: self._remove(n))

    def clear(self) -> None:
        for note in self.notes():
            self._remove(note)

    def _remove(self, note: Note) -> None:
        note.hide()
        note.deleteLater()
        if not self.notes():
            self.hide()


class MainWindow(QMainWindow):
    def __init__(self, ctx: AppContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.setWindowTitle("Rooflight")
        self.setObjectName("mainWindow")
        self.setMinimumSize(QSize(880, 560))

        central = QWidget(objectName="central")
        row = QHBoxLayout(central)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)

        nav_pane = QWidget(objectName="navPane")
        nav_pane.setFixedWidth(200)
        col = QVBoxLayout(nav_pane)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        brand = label("Rooflight")
        brand.setObjectName("brand")
        self.machine_line = label("Detecting this machine…", wrap=True)
        self.machine_line.setObjectName("machineLine")
        self.machine_line.setAccessibleName("machine in use")
        self.nav = QListWidget(objectName="nav")
        self.nav.setAccessibleName("Pages")
        self.nav.setIconSize(QSize(20, 20))
        self.nav.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        col.addWidget(brand)
        col.addWidget(self.machine_line)
        col.addWidget(self.nav, 1)
        row.addWidget(nav_pane)

        right = QWidget()
        rcol = QVBoxLayout(right)
        rcol.setContentsMargins(0, 0, 0, 0)
        rcol.setSpacing(0)
        self.banners = BannerArea()
        self.stack = QStackedWidget()
        rcol.addWidget(self.banners)
        rcol.addWidget(self.stack, 1)
        row.addWidget(right, 1)
        self.setCentralWidget(central)

        self.pages: dict[str, Page] = {}
        for cls in page_classes():
            self.add_page(cls(ctx))
        self.nav.currentRowChanged.connect(self._nav_changed)

        ctx.message.connect(self.banners.show_message)
        ctx.page_requested.connect(self.show_page)
        ctx.machine.changed.connect(self._machine_changed)
        ctx.machine.detecting_changed.connect(lambda _on: self._machine_changed(ctx.machine.profile))
        ctx.theme_changed.connect(self._theme_changed)
        ctx.settings_changed.connect(self._settings_changed)
        self._applied = ctx.settings

        find = QShortcut(QKeySequence(QKeySequence.StandardKey.Find), self)
        find.setContext(Qt.ShortcutContext.WindowShortcut)
        find.activated.connect(self.focus_search)
        self._restore()

    # -- pages --------------------------------------------------------------------
    def add_page(self, page: Page) -> None:
        if page.key in self.pages:
            raise ValueError(f"two pages use the key {page.key!r}")
        self.pages[page.key] = page
        self.stack.addWidget(page)
        item = QListWidgetItem(theme.icon(page.icon) if page.icon else QIcon(), page.title)
        item.setData(Qt.ItemDataRole.UserRole, page.key)
        item.setData(Qt.ItemDataRole.AccessibleTextRole, page.title)
        self.nav.addItem(item)
        # requests a page makes go through ctx.actions, whose handlers other pages register
        if hasattr(page, "download_requested"):
            page.download_requested.connect(self.ctx.actions.request_download)
        if hasattr(page, "chat_requested"):
            page.chat_requested.connect(self.ctx.actions.request_chat)

    def page(self, key: str) -> Page:
        return self.pages[key]

    def current_page(self) -> Page:
        return self.stack.currentWidget()  # type: ignore[return-value]

    def show_page(self, key: str) -> None:
        keys = list(self.pages)
        if key in keys:
            self.nav.setCurrentRow(keys.index(key))

    def _nav_changed(self, row: int) -> None:
        if row < 0:
            return
        self.stack.setCurrentIndex(row)
        self.current_page().page_shown()

    def focus_search(self) -> None:
        if self.current_page().focus_search():
            return
        for key, page in self.pages.items():
            if key == "models" or hasattr(page, "search"):
                self.show_page(key)
                if page.focus_search():
                    return

    # -- machine and theme ----------------------------------------------------------
    def _machine_changed(self, profile) -> None:
        m = self.ctx.machine
        if profile is None:
            self.machine_line.setText("Detecting this machine…" if m.detecting else "Machine unknown")
            return
        where = " + ".join(short_gpu(g.name) for g in profile.gpus) or "no GPU"
        text = f"What if: {m.what_if.describe(short=True)}" if m.is_what_if else f"{profile.cpu.name} · {where}"
        self.machine_line.setText(text)
        self.machine_line.setToolTip(text)

    def _settings_changed(self, settings) -> None:
        """Apply what affects the whole process: theme and offline mode."""
        from rooflight.store.settings import apply_offline

        old, self._applied = self._applied, settings
        if settings.offline != old.offline:
            apply_offline(settings.offline)
        if settings.theme != old.theme:
            app = QApplication.instance()
            if app is not None:
                self.ctx.theme_changed.emit(theme.apply(app, settings.theme))

    def _theme_changed(self, _colors) -> None:
        for i, page in enumerate(self.pages.values()):
            if page.icon:
                self.nav.item(i).setIcon(theme.icon(page.icon))
            page.theme_changed()

    # -- state ----------------------------------------------------------------------
    def _restore(self) -> None:
        state = self.ctx.ui_state
        geometry = state.value("window/geometry")
        if geometry is None or not self.restoreGeometry(geometry):
            self.resize(1280, 800)
        for page in self.pages.values():
            page.restore_state(state)
        last = state.value("window/page", START_PAGE)
        self.show_page(last if last in self.pages else START_PAGE)
        if self.nav.currentRow() < 0:
            self.nav.setCurrentRow(0)

    def save_state(self) -> None:
        state = self.ctx.ui_state
        state.setValue("window/geometry", self.saveGeometry())
        state.setValue("window/page", self.current_page().key)
        for page in self.pages.values():
            page.save_state(state)
        state.sync()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        self.save_state()
        for page in self.pages.values():
            page.shutdown()
        self.ctx.runner.shutdown()
        super().closeEvent(event)
