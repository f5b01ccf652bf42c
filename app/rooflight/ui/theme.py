"""Light and dark themes: a Fusion palette, a small style sheet, fit colours, SVG icons.

The style sheet (resources/ui-style.qss) and the icons (resources/icon-*.svg) name colours
as @tokens that are filled in per theme, so both themes share one file each. "system"
follows QStyleHints.colorScheme() and switches live when the desktop does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from PySide6.QtCore import QByteArray, QObject, QRectF, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QApplication


@dataclass(frozen=True)
class Colors:
    dark: bool
    window: str
    base: str
    alt_base: str
    text: str
    muted: str
    border: str
    accent: str
    accent_text: str
    selection: str
    nav: str
    card: str
    warn_bg: str
    warn_text: str
    error_bg: str
    error_text: str
    info_bg: str
    info_text: str
    # fit badge (background, text): full GPU green, partial amber, CPU blue, too large red
    fit: dict[str, tuple[str, str]]
    # memory kinds in the stacked bars
    weights: str
    kv: str
    compute: str
    overhead: str
    free: str


LIGHT = Colors(
    dark=False, window="#f4f6f9", base="#ffffff", alt_base="#f8f9fb", text="#1b1f24",
    muted="#5a6372", border="#d8dde4", accent="#2563eb", accent_text="#ffffff",
    selection="#e2e8f2", nav="#e9edf3", card="#ffffff",
    warn_bg="#fff4d6", warn_text="#6b4700", error_bg="#fde2e2", error_text="#8a1c1c",
    info_bg="#e0ecff", info_text="#183f8c",
    fit={"full_gpu": ("#d3f0dc", "#0f5c2b"), "partial_gpu": ("#fde8c0", "#734600"),
         "cpu_only": ("#dbe7fb", "#1b4a9e"), "too_large": ("#f9d6d6", "#8f1b1b")},
    weights="#3b6fe0", kv="#8a5cf0", compute="#12a594", overhead="#98a1ae", free="#e6eaf0",
)

DARK = Colors(
    dark=True, window="#191b1f", base="#22252a", alt_base="#272a30", text="#e7e9ec",
    muted="#a2a9b4", border="#3a3f47", accent="#2f6be0", accent_text="#ffffff",
    selection="#2a3c5c", nav="#141619", card="#22252a",
    warn_bg="#4a3a12", warn_text="#ffe2a0", error_bg="#4f1f1f", error_text="#ffc9c9",
    info_bg="#1d3256", info_text="#cfe0ff",
    fit={"full_gpu": ("#1d4a2e", "#b4f0c8"), "partial_gpu": ("#564010", "#ffd98c"),
         "cpu_only": ("#1e365f", "#bed4ff"), "too_large": ("#5a2121", "#ffc4c4")},
    weights="#5b8cff", kv="#a37dff", compute="#2cc5b0", overhead="#7c8593", free="#33373f",
)


def _resource_text(name: str) -> str:
    """A file of rooflight.resources, else of the source tree (editable installs)."""
    try:
        return (resources.files("rooflight.resources") / name).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        return (Path(__file__).resolve().parents[3] / "resources" / name).read_text(encoding="utf-8")


def _resource_path(name: str) -> str:
    """A resource as a file path (style sheets name images by path)."""
    try:
        path = resources.files("rooflight.resources") / name
        if isinstance(path, Path) and path.is_file():
            return path.as_posix()
    except ModuleNotFoundError:
        pass
    return (Path(__file__).resolve().parents[3] / "resources" / name).as_posix()


def _fill(template: str, colors: Colors) -> str:
    images = {"check_icon": _resource_path("icon-check.svg")}

    def sub(m: re.Match[str]) -> str:
        if m.group(1) in images:
            return images[m.group(1)]
        value = getattr(colors, m.group(1), None)
        return value if isinstance(value, str) else m.group(0)

    return re.sub(r"@([a-z_]+)", sub, template)


def system_is_dark() -> bool:
    app = QGuiApplication.instance()
    if app is None:
        return False
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def resolve(theme: str) -> Colors:
    """"light", "dark", or "system" (the desktop's current choice)."""
    if theme == "dark":
        return DARK
    if theme == "light":
        return LIGHT
    return DARK if system_is_dark() else LIGHT


_current: Colors = LIGHT


def current() -> Colors:
    """The colours in use (widgets that paint themselves ask here)."""
    return _current


def palette(c: Colors) -> QPalette:
    p = QPalette()
    role = QPalette.ColorRole
    for r, value in (
        (role.Window, c.window), (role.WindowText, c.text), (role.Base, c.base),
        (role.AlternateBase, c.alt_base), (role.Text, c.text), (role.Button, c.base),
        (role.ButtonText, c.text), (role.ToolTipBase, c.base), (role.ToolTipText, c.text),
        (role.Highlight, c.accent), (role.HighlightedText, c.accent_text),
        (role.PlaceholderText, c.muted), (role.Link, c.accent), (role.Mid, c.border),
        (role.Midlight, c.border), (role.Light, c.base), (role.Dark, c.border),
    ):
        p.setColor(r, QColor(value))
    for r in (role.Text, role.WindowText, role.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, r, QColor(c.muted))
    return p


def apply(app: QApplication, theme: str) -> Colors:
    """Apply a theme to the whole application; returns its colours."""
    global _current
    _current = resolve(theme)
    if app.style().name().lower() != "fusion":
        app.setStyle("Fusion")  # the same look everywhere, and palettes are honoured
    app.setPalette(palette(_current))
    app.setStyleSheet(_fill(_resource_text("ui-style.qss"), _current))
    _icon.cache_clear()
    return _current


class SystemThemeFollower(QObject):
    """Re-applies the theme when the desktop switches light/dark and the setting is
    "system"; `theme` is read through a callable so it always sees the saved setting."""

    def __init__(self, app: QApplication, theme_of, on_applied) -> None:
        super().__init__(app)
        self._app, self._theme_of, self._on_applied = app, theme_of, on_applied
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._changed)

    def _changed(self, *_args) -> None:
        if self._theme_of() == "system":
            self._on_applied(apply(self._app, "system"))


@lru_cache(maxsize=64)
def _icon(name: str, color: str, size: int) -> QIcon:
    try:
        svg = _resource_text(f"icon-{name}.svg")
    except OSError:
        return QIcon()
    renderer = QSvgRenderer(QByteArray(svg.replace("@color", color).encode()))
    icon = QIcon()
    for scale in (1, 2):
        pix = QPixmap(size * scale, size * scale)
        pix.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pix)
        renderer.render(painter, QRectF(0, 0, size * scale, size * scale))
        painter.end()
        pix.setDevicePixelRatio(scale)
        icon.addPixmap(pix)
    return icon


def icon(name: str, size: int = 20, color: str | None = None) -> QIcon:
    """resources/icon-NAME.svg drawn in the theme's text colour (empty icon if missing)."""
    return _icon(name, color or _current.text, size)


def app_icon() -> QIcon:
    """The application icon (resources/icons/rooflight.svg, from the packaging work)."""
    path = Path(_resource_path("icons/rooflight.svg"))
    return QIcon(str(path)) if path.is_file() else QIcon()
