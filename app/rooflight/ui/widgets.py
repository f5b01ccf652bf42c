"""Small widgets the pages share: cards, notes, fit badges, usage and memory bars."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QModelIndex, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QCompleter,
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from rooflight.format import FIT_BADGES, FIT_LABELS
from rooflight.ui import theme
from rooflight.units import size_text

GB = 1e9


def gb(n: float | None, digits: int = 1) -> str:
    return size_text(n, digits)


def tok_s(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:.1f}k"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.1f}"


def ctx_label(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def readonly_table(columns: Sequence[str], name: str, *, selectable_rows: bool = False) -> QTableWidget:
    """A table of figures the user reads, not edits: no row numbers, no grid, no wrapping;
    whole rows selectable one at a time, or no selection at all."""
    table = QTableWidget(0, len(columns))
    table.setAccessibleName(name)
    table.setHorizontalHeaderLabels(list(columns))
    table.verticalHeader().hide()
    if selectable_rows:
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    else:
        table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setAlternatingRowColors(True)
    table.setShowGrid(False)
    table.setWordWrap(False)
    return table


def make_searchable(combo: QComboBox) -> None:
    """Let a long pick list (the GPU table's 200+ names) be searched: type any part of a name
    ("3090", "w7800") and pick it from the matches. Text that names no entry is put back to
    the chosen entry when editing ends, so the combo never holds a value it cannot plan."""
    combo.setEditable(True)
    combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
    completer = QCompleter(combo.model(), combo)
    completer.setFilterMode(Qt.MatchFlag.MatchContains)
    completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
    completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
    completer.setMaxVisibleItems(combo.maxVisibleItems())
    combo.setCompleter(completer)  # QComboBox selects the entry a completion activates
    line = combo.lineEdit()
    line.setAccessibleName(f"{combo.accessibleName()}, type to search")

    def restore() -> None:  # an editable combo's currentText() is the typed text: use the item's
        chosen = combo.itemText(combo.currentIndex())
        if line.text() != chosen:
            line.setText(chosen)
    line.editingFinished.connect(restore)


def label(text: str = "", role: str | None = None, *, wrap: bool = False, selectable: bool = False) -> QLabel:
    w = QLabel(text)
    if role:
        w.setProperty("role", role)
    w.setWordWrap(wrap)
    if selectable:
        w.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return w


class Card(QFrame):
    """A rounded panel with a heading; add content to `body` (a QVBoxLayout)."""

    def __init__(self, heading: str = "", subtitle: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setProperty("role", "card")
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 14, 16, 14)
        outer.setSpacing(8)
        self.heading = label(heading, "heading", wrap=True)
        self.subtitle = label(subtitle, "muted", wrap=True)
        outer.addWidget(self.heading)
        if subtitle:
            outer.addWidget(self.subtitle)
        self.body = QVBoxLayout()
        self.body.setSpacing(8)
        outer.addLayout(self.body)


class Note(QFrame):
    """A coloured one-paragraph note: kind is error | warning | info. With `closable`,
    an × button hides it and emits `closed`."""

    closed = Signal()

    def __init__(self, kind: str, text: str, *, closable: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setProperty("kind", kind)
        self.kind = kind
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 8, 8, 8)
        self.text = label(text, wrap=True, selectable=True)
        self.text.setAccessibleName(f"{kind} message")
        self.text.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        row.addWidget(self.text, 1)
        if closable:
            close = QToolButton()
            close.setText("×")
            close.setAccessibleName("Dismiss message")
            close.setToolTip("Dismiss")
            close.clicked.connect(self._close)
            row.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)

    def _close(self) -> None:
        self.hide()
        self.closed.emit()


def fit_colors(fit: str) -> tuple[QColor, QColor]:
    bg, fg = theme.current().fit.get(fit, theme.current().fit["too_large"])
    return QColor(bg), QColor(fg)


def paint_badge(painter: QPainter, rect: QRect, fit: str, text: str | None = None) -> None:
    """A pill with the fit's colour and its words (colour is never the only signal)."""
    text = text or FIT_BADGES.get(fit, fit)
    bg, fg = fit_colors(fit)
    fm = painter.fontMetrics()
    w = fm.horizontalAdvance(text) + 18
    h = fm.height() + 6
    r = QRectF(rect.left() + 6, rect.center().y() - h / 2 + 0.5, min(w, rect.width() - 8), h)
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    edge = QColor(fg)
    edge.setAlphaF(0.35)  # an outline keeps the pill visible on a selected row
    painter.setPen(QPen(edge, 1))
    painter.setBrush(bg)
    painter.drawRoundedRect(r, h / 2, h / 2)
    painter.setPen(fg)
    painter.drawText(r, Qt.AlignmentFlag.AlignCenter, text)
    painter.restore()


class FitBadge(QWidget):
    """The fit badge as a widget (detail panels, cards)."""

    def __init__(self, fit: str = "too_large", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.fit = fit
        self.setAccessibleName("fit")
        self.set_fit(fit)

    def set_fit(self, fit: str) -> None:
        self.fit = fit
        self.setToolTip(FIT_LABELS.get(fit, fit))
        self.setAccessibleDescription(FIT_LABELS.get(fit, fit))
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        fm = QFontMetrics(self.font())
        return QSize(fm.horizontalAdvance(FIT_BADGES.get(self.fit, self.fit)) + 30, fm.height() + 10)

    def paintEvent(self, _event) -> None:  # noqa: N802
        p = QPainter(self)
        paint_badge(p, self.rect().adjusted(-6, 0, 0, 0), self.fit)


FIT_ROLE = Qt.ItemDataRole.UserRole + 1


class FitBadgeDelegate(QStyledItemDelegate):
    """Paints the fit column of a table as a badge; the model gives the fit key in FIT_ROLE."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        fit = index.data(FIT_ROLE)
        if fit:
            painter.setFont(opt.font)
            paint_badge(painter, opt.rect, fit)

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex) -> QSize:  # noqa: N802
        fm = QFontMetrics(option.font)
        return QSize(fm.horizontalAdvance("partial GPU") + 34, fm.height() + 12)


class UsageBar(QWidget):
    """Used / free of a total, as a bar with the figures written under it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.total = 0
        self.free = 0
        self.caption = ""
        self.setMinimumHeight(38)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_usage(self, total: int, free: int, caption: str = "") -> None:
        self.total, self.free = max(0, total), max(0, min(free, total))
        used = self.total - self.free
        self.caption = caption or f"{gb(used)} used · {gb(self.free)} free · {gb(self.total)} total"
        self.setAccessibleName("memory use")
        self.setAccessibleDescription(self.caption)
        self.setToolTip(self.caption)
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(240, QFontMetrics(self.font()).height() + 20)

    def paintEvent(self, _event) -> None:  # noqa: N802
        c = theme.current()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        bar = QRectF(0, 2, self.width(), 10)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(c.free))
        p.drawRoundedRect(bar, 5, 5)
        if self.total:
            used = (self.total - self.free) / self.total
            if used > 0:
                fill = QColor(c.accent if used < 0.85 else c.fit["partial_gpu"][1])
                p.setBrush(fill)
                p.drawRoundedRect(QRectF(0, 2, max(10.0, self.width() * used), 10), 5, 5)
        p.setPen(QColor(c.muted))
        p.drawText(QRectF(0, 16, self.width(), self.height() - 16),
                   Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.caption)


@dataclass(frozen=True)
class DeviceUse:
    """One device's planned memory for MemoryBar (bytes)."""

    name: str
    weights: int
    kv: int
    compute: int
    overhead: int
    available: int  # what the plan may use on this device
    capacity: int  # the device's total memory

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.compute + self.overhead


KINDS = (("weights", "weights"), ("kv", "KV cache"), ("compute", "compute"), ("overhead", "overhead"))


class MemoryBar(QWidget):
    """Per device: a stacked bar of weights, KV cache, compute and overhead, drawn against
    the memory the plan may use (a marker) and the device's total; the part that does not
    fit is outlined in the "too large" colour."""

    ROW = 46

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.devices: list[DeviceUse] = []
        self.setAccessibleName("memory per device")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_devices(self, devices: Sequence[DeviceUse]) -> None:
        self.devices = list(devices)
        self._fit_height()
        text = "; ".join(
            f"{d.name}: {gb(d.total)} needed of {gb(d.available)} usable"
            + ("" if d.total <= d.available else " (does not fit)")
            for d in self.devices
        )
        self.setAccessibleDescription(text)
        self.setToolTip(text)
        self.update()

    def _legend(self, width: int) -> list[tuple[int, int, str, str | None]]:
        """(x, line, text, colour key or None for the limit mark) of each legend entry,
        wrapped to the width."""
        fm = QFontMetrics(self.font())
        items = [(name, key) for key, name in KINDS] + [("usable limit", None)]
        out, x, line = [], 0, 0
        for name, key in items:
            w = 14 + fm.horizontalAdvance(name) + 16
            if x and x + w > width:
                x, line = 0, line + 1
            out.append((x, line, name, key))
            x += w
        return out

    def _fit_height(self) -> None:
        lines = 1 + max((line for _x, line, _t, _k in self._legend(max(1, self.width()))), default=0)
        self.setFixedHeight(self.ROW * len(self.devices) + 20 * lines + 4)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit_height()

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(360, self.ROW * max(1, len(self.devices)) + 24)

    def paintEvent(self, _event) -> None:  # noqa: N802
        c = theme.current()
        colors = {"weights": c.weights, "kv": c.kv, "compute": c.compute, "overhead": c.overhead}
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = p.fontMetrics()
        w = self.width()
        for row, d in enumerate(self.devices):
            top = row * self.ROW
            scale = max(d.capacity, d.total, 1)
            p.setPen(QColor(c.text))
            p.drawText(QRectF(0, top, w, fm.height()), Qt.AlignmentFlag.AlignLeft, d.name)
            fits = d.total <= d.available
            summary = f"{gb(d.total)} of {gb(d.available)} usable" + ("" if fits else " — does not fit")
            p.setPen(QColor(c.muted if fits else c.fit["too_large"][1]))
            p.drawText(QRectF(0, top, w, fm.height()), Qt.AlignmentFlag.AlignRight, summary)
            y = top + fm.height() + 4
            bar = QRectF(0, y, w, 14)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(c.free))
            p.drawRoundedRect(bar, 4, 4)
            x = 0.0
            for key, _name in KINDS:
                part = getattr(d, key) / scale * w
                if part <= 0:
                    continue
                p.setBrush(QColor(colors[key]))
                p.drawRect(QRectF(x, y, part, 14))
                x += part
            if not fits:
                over = QRectF(d.available / scale * w, y, max(2.0, x - d.available / scale * w), 14)
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.setPen(QPen(QColor(c.fit["too_large"][1]), 2))
                p.drawRect(over)
            # the usable limit
            mx = d.available / scale * w
            p.setPen(QPen(QColor(c.text), 2))
            p.drawLine(int(mx), int(y - 3), int(mx), int(y + 17))
        # legend
        base = self.ROW * len(self.devices) + 4
        for x, line, name, key in self._legend(w):
            y = base + 20 * line
            if key is None:
                p.setPen(QPen(QColor(c.text), 2))
                p.drawLine(int(x + 5), int(y + 1), int(x + 5), int(y + 15))
            else:
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(QColor(colors[key]))
                p.drawRoundedRect(QRectF(x, y + 3, 10, 10), 2, 2)
            p.setPen(QColor(c.muted))
            p.drawText(int(x + 14), int(y + fm.ascent() + 1), name)
