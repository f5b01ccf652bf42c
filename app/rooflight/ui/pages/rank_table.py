"""The ranked-models table: a Qt model over RankedModel rows and the filters over it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QColor

from rooflight.catalog.rank import RankedModel
from rooflight.estimate.fit import Fit
from rooflight.format import FIT_BADGES, FIT_LABELS
from rooflight.ui import theme
from rooflight.ui.widgets import FIT_ROLE, ctx_label, gb, tok_s

SORT_ROLE = Qt.ItemDataRole.UserRole + 2
RANKED_ROLE = Qt.ItemDataRole.UserRole + 3

COLUMNS = ("#", "Model", "Size", "Quant", "Fit", "Decode", "Prefill", "Memory", "Context",
           "Quality", "On disk")
(COL_RANK, COL_NAME, COL_SIZE, COL_QUANT, COL_FIT, COL_DECODE, COL_PREFILL, COL_MEMORY,
 COL_CTX, COL_QUALITY, COL_INSTALLED) = range(len(COLUMNS))
TOOLTIPS = {
    COL_DECODE: "Predicted generation speed in tokens/s (llama-bench tg) at this context",
    COL_PREFILL: "Predicted prompt processing speed in tokens/s (llama-bench pp512)",
    COL_MEMORY: "Memory the plan needs on all devices / memory it may use (GB)",
    COL_SIZE: "Parameters in billions (MoE: mixture of experts, fewer active per token)",
    COL_QUALITY: "Benchmark prior of the model, reduced by the quantization's loss (0-100)",
    COL_FIT: "Where the model runs: full GPU, partial GPU offload, CPU only, or too large",
    COL_INSTALLED: "A file of this model is on disk",
}

SIZE_RANGES: tuple[tuple[str, float, float], ...] = (
    ("Any size", 0.0, float("inf")),
    ("Up to 2B", 0.0, 2.0),
    ("2B to 8B", 2.0, 8.0),
    ("8B to 16B", 8.0, 16.0),
    ("16B to 40B", 16.0, 40.0),
    ("Over 40B", 40.0, float("inf")),
)


def size_text(r: RankedModel) -> str:
    m = r.model
    total = f"{m.params_total:g}B"
    return f"{total} MoE" if m.params_active < m.params_total else total


def search_text(r: RankedModel) -> str:
    m = r.model
    return " ".join((m.id, m.name, m.family, m.architecture, m.license, *m.tags)).lower()


_FIT_ORDER = {f: 3 - f.rank for f in Fit}  # best first
_DISPLAY = Qt.ItemDataRole.DisplayRole
_TOOLTIP = Qt.ItemDataRole.ToolTipRole
_ALIGN = Qt.ItemDataRole.TextAlignmentRole
_FOREGROUND = Qt.ItemDataRole.ForegroundRole
_ACCESSIBLE = Qt.ItemDataRole.AccessibleTextRole
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_RIGHT_COLUMNS = (COL_DECODE, COL_PREFILL, COL_QUALITY, COL_RANK)
_MUTED_COLUMNS = (COL_RANK, COL_CTX, COL_SIZE)


class _Row:
    """Everything a row shows, computed once: painting only looks values up (a view asks
    for several roles of every visible cell on each paint)."""

    __slots__ = ("ranked", "display", "sort", "tooltips", "over", "installed", "search")

    def __init__(self, r: RankedModel, position: str, installed: bool) -> None:
        e = r.best.estimate
        p = e.performance
        m = r.model
        available = sum(d.available_bytes for d in e.memory.devices)
        fits = e.fit != "too_large"
        self.ranked = r
        self.installed = installed
        self.over = e.memory.total_bytes > available
        self.display = [
            position, m.name, size_text(r), r.best.quant, FIT_BADGES.get(e.fit, e.fit),
            tok_s(p.decode_tok_s) if fits else "—", tok_s(p.prefill_tok_s) if fits else "—",
            f"{e.memory.total_bytes / 1e9:.1f} / {gb(available)}", ctx_label(e.config.n_ctx),
            f"{r.best.quality:.0f}", "✓" if installed else "",
        ]
        self.sort = [
            0, m.name.lower(), m.params_total, r.best.quant, _FIT_ORDER.get(e.fit, 9), p.decode_tok_s,
            p.prefill_tok_s, e.memory.total_bytes, e.config.n_ctx, r.best.quality, int(installed),
        ]
        self.tooltips = {
            COL_FIT: FIT_LABELS.get(e.fit, e.fit),
            COL_NAME: f"{m.name} · {m.family} · {m.license} · {', '.join(m.tags)}",
        }
        if why := r.ranked_lower_because():
            # the ranking's second group and successors come after higher-scored ones: say why
            self.tooltips[COL_RANK] = "Listed lower: " + "; ".join(map(str, why)) + "."
            self.tooltips[COL_NAME] += "\nListed lower: " + ", ".join(w.short for w in why)
        if m.params_active < m.params_total:
            self.tooltips[COL_SIZE] = f"{m.params_total:g}B parameters, {m.params_active:g}B active per token"
        if self.over:
            self.tooltips[COL_MEMORY] = "Needs more memory than this machine can give it"
        self.search = search_text(r)


class RankModel(QAbstractTableModel):
    """Rows: the catalog ranking, then live search results (`extra`), each a RankedModel."""

    def __init__(self, is_installed: Callable[[RankedModel], bool] = lambda r: False, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[RankedModel] = []
        self.extra: list[RankedModel] = []
        self._installed = is_installed
        self._cells: list[_Row] = []

    def _rebuild(self) -> None:
        self._cells = [_Row(r, str(i + 1), self._installed(r)) for i, r in enumerate(self.rows)]
        self._cells += [_Row(r, "Hub", self._installed(r)) for r in self.extra]
        for i, row in enumerate(self._cells):
            row.sort[COL_RANK] = i

    def set_rows(self, rows: Sequence[RankedModel]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        have = {r.model.id for r in self.rows}
        self.extra = [r for r in self.extra if r.model.id not in have]
        self._rebuild()
        self.endResetModel()

    def set_extra(self, rows: Sequence[RankedModel]) -> None:
        self.beginResetModel()
        have = {r.model.id for r in self.rows}
        self.extra = [r for r in rows if r.model.id not in have]
        self._rebuild()
        self.endResetModel()

    def all(self) -> list[RankedModel]:
        return [c.ranked for c in self._cells]

    def ranked_at(self, row: int) -> RankedModel:
        return self._cells[row].ranked

    def is_extra(self, row: int) -> bool:
        return row >= len(self.rows)

    def installed_changed(self) -> None:
        self._rebuild()
        n = self.rowCount()
        if n:
            self.dataChanged.emit(self.index(0, 0), self.index(n - 1, len(COLUMNS) - 1))

    def is_installed(self, row: int) -> bool:
        return self._cells[row].installed

    def search_key(self, row: int) -> str:
        return self._cells[row].search

    # -- Qt model ---------------------------------------------------------------------
    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self._cells)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == _DISPLAY:
            return COLUMNS[section]
        if role == _TOOLTIP:
            return TOOLTIPS.get(section)
        if role == _ALIGN and section in _RIGHT_COLUMNS:
            return _RIGHT
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        row = self._cells[index.row()]
        col = index.column()
        if role == _DISPLAY:
            return row.display[col]
        if role == _ALIGN:
            return _RIGHT if col in _RIGHT_COLUMNS else None
        if role == _FOREGROUND:
            if col == COL_MEMORY and row.over:
                return QColor(theme.current().fit["too_large"][1])
            if col in _MUTED_COLUMNS:
                return QColor(theme.current().muted)
            return None
        if role == FIT_ROLE:
            return row.ranked.best.estimate.fit if col == COL_FIT else None
        if role == SORT_ROLE:
            return row.sort[col]
        if role == RANKED_ROLE:
            return row.ranked
        if role == _TOOLTIP:
            return row.tooltips.get(col)
        if role == _ACCESSIBLE and col == COL_INSTALLED:
            return "installed" if row.installed else "not installed"
        return None



class RankFilter(QSortFilterProxyModel):
    """Fits only, size range, installed only, and the search words (all must match the
    name, id, family, licence or tags). Live search results are not word-filtered: the
    Hub already answered the query."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.fits_only = False
        self.installed_only = False
        self.min_b, self.max_b = 0.0, float("inf")
        self.words: list[str] = []
        self.setSortRole(SORT_ROLE)

    def set_filters(self, *, fits_only: bool | None = None, installed_only: bool | None = None,
                    size: tuple[float, float] | None = None, search: str | None = None) -> None:
        begin = getattr(self, "beginFilterChange", None)  # Qt >= 6.9; invalidateFilter() before
        if begin is not None:
            begin()
        if fits_only is not None:
            self.fits_only = fits_only
        if installed_only is not None:
            self.installed_only = installed_only
        if size is not None:
            self.min_b, self.max_b = size
        if search is not None:
            self.words = search.lower().split()
        if begin is not None:
            self.endFilterChange()
        else:
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:  # noqa: N802
        model: RankModel = self.sourceModel()  # type: ignore[assignment]
        r = model.ranked_at(source_row)
        if self.fits_only and r.fit == "too_large":
            return False
        if not self.min_b <= r.model.params_total <= self.max_b:
            return False
        if self.installed_only and not model.is_installed(source_row):
            return False
        if self.words and not model.is_extra(source_row):
            key = model.search_key(source_row)
            return all(w in key for w in self.words)
        return True

    def ranked(self, proxy_row: int) -> RankedModel:
        return self.index(proxy_row, 0).data(RANKED_ROLE)
