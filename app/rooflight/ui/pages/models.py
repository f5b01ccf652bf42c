"""Models: the catalog ranked for the machine in use, filters, search, and the detail of
the selected model. Ranking runs in a worker and follows every machine change.

Hooks for later pieces:
- set_search_provider(fn): live Hub search. fn(query, hardware, n_ctx) -> list[RankedModel]
  runs in a worker when the search box settles; its rows join the table, marked "Hub".
- ctx.installed: the "On disk" column, the "Installed" filter and the Chat buttons.
- download_requested(repo, file) / chat_requested(path, wishes): routed by the window to
  ctx.actions; buttons are disabled while no page serves them. The detail's Chat sends
  the settings its plan was made with (wishes), the top pick's None (the defaults).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from PySide6.QtCore import QItemSelectionModel, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
)

from rooflight.catalog.rank import USE_CASES, RankedModel
from rooflight.format import FIT_LABELS
from rooflight.hardware import HardwareProfile
from rooflight.ui.pages.base import Page
from rooflight.ui.pages.model_detail import NO_DOWNLOADS, ModelDetail
from rooflight.ui.pages.rank_table import (
    COL_CTX,
    COL_DECODE,
    COL_FIT,
    COL_INSTALLED,
    COL_MEMORY,
    COL_NAME,
    COL_PREFILL,
    COL_QUALITY,
    COL_QUANT,
    COL_RANK,
    COL_SIZE,
    SIZE_RANGES,
    RankFilter,
    RankModel,
)
from rooflight.ui.tasks import full_gc_paused
from rooflight.ui.widgets import FitBadge, FitBadgeDelegate, ctx_label, label, tok_s

SearchProvider = Callable[[str, HardwareProfile, int], Sequence[RankedModel]]
CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536, 131072)
USE_CASE_CHOICES = (*USE_CASES, "vision", "multilingual")
SEARCH_DEBOUNCE_MS = 400


_warm_up = None  # the process's catalog warm-up task, if one was started


def warm_catalog() -> None:
    """Worker side: build (or restore from the spec cache) the catalog specs rank_models
    plans, while this machine is still being detected; the ranking itself waits for the
    detected machine."""
    from rooflight.catalog.rank import prepare_catalog_specs

    with full_gc_paused():
        prepare_catalog_specs()


def rank_catalog(hardware: HardwareProfile, n_ctx: int, use_case: str, calibration) -> tuple[list[RankedModel], float]:
    """Worker side: the whole catalog ranked, and how long it took."""
    from rooflight.catalog.rank import rank_models

    if _warm_up is not None:
        _warm_up.wait(10)  # building the same specs twice at once would only slow both
    started = time.perf_counter()
    with full_gc_paused():  # the first ranking builds every catalog spec: see full_gc_paused
        ranked = rank_models(hardware, ctx=n_ctx, use_case=use_case, calibration=calibration)
    return ranked, time.perf_counter() - started


class ModelsPage(Page):
    key = "models"
    title = "Models"
    icon = "models"

    download_requested = Signal(str, str)
    chat_requested = Signal(str, object)  # path, estimate.Wishes or None
    ranked = Signal()  # a ranking landed in the table

    def __init__(self, ctx, parent=None) -> None:
        super().__init__(ctx, parent)
        self._rank_task = None
        self._search_task = None
        self._search_provider: SearchProvider | None = None
        self._ranking = False
        self._searching = False
        self.rank_seconds: float | None = None
        self._rank_ctx: int | None = None  # the context of the ranking being made
        self._shown_ctx: int | None = None  # ... and of the one in the table
        self._keep_detail_ctx = True

        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 18, 24, 12)
        outer.setSpacing(10)
        head = QHBoxLayout()
        head.addWidget(label("Models", "title"))
        head.addStretch(1)
        self.status = label("", "muted")
        self.status.setAccessibleName("Ranking status")
        head.addWidget(self.status)
        outer.addLayout(head)

        outer.addWidget(self._top_pick())
        outer.addLayout(self._toolbar())

        self.model = RankModel(is_installed=lambda r: ctx.installed.has_any(r.model), parent=self)
        self.proxy = RankFilter(self)
        self.proxy.setSourceModel(self.model)
        self.table = QTableView()
        self.table.setAccessibleName("Ranked models")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(COL_RANK, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(34)
        self.table.setItemDelegateForColumn(COL_FIT, FitBadgeDelegate(self.table))
        hh = self.table.horizontalHeader()
        hh.setHighlightSections(False)
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setSectionResizeMode(COL_NAME, QHeaderView.ResizeMode.Stretch)
        for col, width in ((COL_RANK, 40), (COL_SIZE, 92), (COL_QUANT, 78), (COL_FIT, 112),
                           (COL_DECODE, 76), (COL_PREFILL, 76), (COL_MEMORY, 128), (COL_CTX, 74),
                           (COL_QUALITY, 70), (COL_INSTALLED, 72)):
            self.table.setColumnWidth(col, width)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)

        self.detail = ModelDetail(ctx)
        self.detail.download_requested.connect(self.download_requested)
        self.detail.chat_requested.connect(self.chat_requested)
        self.detail.closed.connect(self.table.clearSelection)
        self.detail.hide()  # until a model is selected: the table gets the whole height

        # table above, detail below: both are wide, and the detail's two columns need the width
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.setObjectName("modelsSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.table)
        self.splitter.addWidget(self.detail)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setSizes([250, 400])
        outer.addWidget(self.splitter, 1)

        self._search_timer = QTimer(self, singleShot=True, interval=SEARCH_DEBOUNCE_MS)
        self._search_timer.timeout.connect(self._search_remote)

        ctx.machine.changed.connect(self._machine_changed)
        ctx.machine.detecting_changed.connect(lambda _on: self._update_status())
        ctx.installed.changed.connect(self._installed_changed)
        ctx.actions.changed.connect(self._update_top_pick)
        ctx.settings_changed.connect(self._settings_changed)
        self._set_context_choice(ctx.settings.default_ctx)
        self._update_status()
        global _warm_up
        if ctx.machine.profile is not None:
            self.rerank()
        elif _warm_up is None:  # once per process, while detection runs
            _warm_up = ctx.runner.run(warm_catalog, what="preparing the catalog")

    # -- building -------------------------------------------------------------------------
    def _top_pick(self) -> QFrame:
        box = QFrame()
        box.setProperty("role", "card")
        box.setAccessibleName("Top pick")
        row = QHBoxLayout(box)
        row.setContentsMargins(16, 10, 12, 10)
        row.setSpacing(12)
        self.pick_title = label("", "heading")
        self.pick_badge = FitBadge()
        self.pick_text = label("", "muted", wrap=True)
        self.pick_details = QPushButton("Details")
        self.pick_details.setAccessibleName("Show the top pick's details")
        self.pick_download = QPushButton("Download")
        self.pick_download.setProperty("primary", True)
        self.pick_download.setAccessibleName("Download the top pick")
        row.addWidget(label("Top pick", "muted"))
        row.addWidget(self.pick_title)
        row.addWidget(self.pick_badge)
        row.addWidget(self.pick_text, 1)
        row.addWidget(self.pick_details)
        row.addWidget(self.pick_download)
        self.pick_details.clicked.connect(lambda: self.select_model(self._pick.model.id) if self._pick else None)
        self.pick_download.clicked.connect(self._download_pick)
        self._pick: RankedModel | None = None
        self.pick_box = box
        box.hide()
        return box

    def _toolbar(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setSpacing(8)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search models (Ctrl+F)")
        self.search.setAccessibleName("Search models")
        self.search.setClearButtonEnabled(True)
        self.search.setMinimumWidth(220)
        self.search.textChanged.connect(self._search_changed)
        self.search.returnPressed.connect(self._search_remote)
        self.use_case = QComboBox()
        self.use_case.setAccessibleName("Use case")
        for uc in USE_CASE_CHOICES:
            self.use_case.addItem(f"For {uc}", uc)
        self.use_case.currentIndexChanged.connect(lambda _i: self.rerank())
        self.size = QComboBox()
        self.size.setAccessibleName("Model size")
        for text, lo, hi in SIZE_RANGES:
            self.size.addItem(text, (lo, hi))
        self.size.currentIndexChanged.connect(lambda _i: self._filters_changed())
        self.context = QComboBox()
        self.context.setAccessibleName("Context length")
        self.context.setToolTip("Context the estimates plan for (capped at each model's maximum)")
        self.context.currentIndexChanged.connect(lambda _i: self.rerank())
        self.fits_only = QCheckBox("Fits only")
        self.fits_only.setAccessibleName("Show only models that fit")
        self.fits_only.toggled.connect(lambda _on: self._filters_changed())
        self.installed_only = QCheckBox("Installed")
        self.installed_only.setAccessibleName("Show only installed models")
        self.installed_only.toggled.connect(lambda _on: self._filters_changed())
        row.addWidget(self.search, 2)
        row.addWidget(self.use_case)
        row.addWidget(self.size)
        row.addWidget(self.context)
        row.addWidget(self.fits_only)
        row.addWidget(self.installed_only)
        return row

    def _set_context_choice(self, n: int) -> None:
        self.context.blockSignals(True)
        self.context.clear()
        for c in sorted(set(CONTEXTS) | {n}):
            self.context.addItem(f"{ctx_label(c)} context", c)
        self.context.setCurrentIndex(self.context.findData(n))
        self.context.blockSignals(False)

    # -- public ----------------------------------------------------------------------------
    def set_search_provider(self, provider: SearchProvider | None) -> None:
        """Live search: provider(query, hardware, n_ctx) -> RankedModel list, run in a
        worker when the search text settles (or Enter); rows join the table as "Hub"."""
        self._search_provider = provider
        if provider is not None and self.search.text().strip():
            self._search_timer.start()

    def focus_search(self) -> bool:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()
        return True

    @property
    def n_ctx(self) -> int:
        return int(self.context.currentData() or self.ctx.settings.default_ctx)

    @property
    def ranking(self) -> bool:
        """A ranking is being made in a worker (the table shows the previous one)."""
        return self._rank_task is not None

    @property
    def top_pick(self) -> RankedModel | None:
        """The model the "top pick" box offers: the best-ranked one that fits."""
        return self._pick

    def visible_rows(self) -> list[RankedModel]:
        return [self.proxy.ranked(i) for i in range(self.proxy.rowCount())]

    def select_model(self, model_id: str) -> bool:
        for i in range(self.proxy.rowCount()):
            if self.proxy.ranked(i).model.id == model_id:
                self.table.selectionModel().select(
                    self.proxy.index(i, 0),
                    QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
                self.table.scrollTo(self.proxy.index(i, 0))
                return True
        return False

    def rerank(self) -> None:
        """Rank the catalog for the machine in use (in a worker); the previous ranking,
        if still running, is dropped."""
        profile = self.ctx.machine.profile
        if profile is None:
            return
        if self._rank_task is not None:
            self._rank_task.cancel()
        self._ranking = True
        self._rank_ctx = self.n_ctx
        self._update_status()
        self._rank_task = self.ctx.runner.run(
            rank_catalog, profile, self.n_ctx, self.use_case.currentData(), self.ctx.machine.calibration,
            on_done=self._ranked, on_error=self._rank_failed, what="ranking the models")

    # -- reacting ----------------------------------------------------------------------------
    def _machine_changed(self, _profile) -> None:
        self.rerank()

    def _settings_changed(self, settings) -> None:
        if settings.default_ctx != self.context.currentData():
            self._set_context_choice(settings.default_ctx)
            self.rerank()

    def _ranked(self, result) -> None:
        ranked, seconds = result
        self._rank_task = None
        self._ranking = False
        self.rank_seconds = seconds
        selected = self.selected()
        # another context (the toolbar's, or the default one in Settings): the detail
        # moves to it; another machine or use case keeps the context chosen in the detail
        context_changed = self._shown_ctx is not None and self._rank_ctx != self._shown_ctx
        self._shown_ctx = self._rank_ctx
        self.model.set_rows(ranked)
        self.model.set_extra([])
        self._update_status()
        self._update_top_pick()
        if self.search.text().strip() and self._search_provider is not None:
            self._search_remote()
        self._keep_detail_ctx = not context_changed
        try:
            if selected is not None and not self.select_model(selected.model.id):
                self.detail.hide()
        finally:
            self._keep_detail_ctx = True
        self.ranked.emit()

    def _rank_failed(self, exc: BaseException) -> None:
        self._rank_task = None
        self._ranking = False
        self._update_status()
        self.ctx.report(exc, "ranking the models")

    def selected(self) -> RankedModel | None:
        rows = self.table.selectionModel().selectedRows()
        return self.proxy.ranked(rows[0].row()) if rows else None

    def _selection_changed(self, *_args) -> None:
        ranked = self.selected()
        self.detail.setVisible(ranked is not None)
        self.detail.show_model(ranked, keep_context=self._keep_detail_ctx)
        if ranked is not None:
            rows = self.table.selectionModel().selectedRows()
            self.table.scrollTo(rows[0])

    def _filters_changed(self) -> None:
        self.proxy.set_filters(fits_only=self.fits_only.isChecked(),
                               installed_only=self.installed_only.isChecked(),
                               size=self.size.currentData(), search=self.search.text())
        self._update_status()

    def _search_changed(self, text: str) -> None:
        self._filters_changed()
        if self._search_task is not None:
            self._search_task.cancel()
            self._search_task = None
        if self.model.extra:
            self.model.set_extra([])
        if text.strip() and self._search_provider is not None:
            self._search_timer.start()

    def _search_remote(self) -> None:
        query = self.search.text().strip()
        profile = self.ctx.machine.profile
        if not query or self._search_provider is None or profile is None:
            return
        self._search_timer.stop()
        if self._search_task is not None:
            self._search_task.cancel()
        self._searching = True
        self._update_status()
        self._search_task = self.ctx.runner.run(
            self._search_provider, query, profile, self.n_ctx,
            on_done=self._search_done, on_error=self._search_failed, what=f"searching the Hub for {query!r}")

    def _search_done(self, rows) -> None:
        self._search_task = None
        self._searching = False
        self.model.set_extra(list(rows))
        self._update_status()

    def _search_failed(self, exc: BaseException) -> None:
        self._search_task = None
        self._searching = False
        self._update_status()
        self.ctx.report(exc, "searching the Hub")

    def _installed_changed(self) -> None:
        self.model.installed_changed()
        self._filters_changed()
        self._update_top_pick()  # a pick just downloaded offers Chat

    # -- status and top pick --------------------------------------------------------------------
    def _update_status(self) -> None:
        m = self.ctx.machine
        if m.profile is None:
            self.status.setText("Detecting this machine…")
            return
        if self._ranking and not self.model.rows:
            self.status.setText("Ranking the catalog for this machine…")
            return
        total, shown = len(self.model.all()), self.proxy.rowCount()
        machine = f"what if: {m.what_if.describe(short=True)}" if m.is_what_if else "this machine"
        count = f"{shown} of {total} models" if shown != total else f"{total} models"
        parts = [f"{count} ranked for {machine} at {ctx_label(self.n_ctx)} context", "speeds in tokens/s"]
        if self._ranking:
            parts.append("re-ranking…")
        elif self.rank_seconds is not None:
            parts.append(f"in {self.rank_seconds:.2f} s")
        if self._searching:
            parts.append("searching the Hub…")
        from rooflight.catalog.rank import unavailable_models

        unavailable = unavailable_models()
        if unavailable:  # never a number for what the estimator cannot model
            parts.append(f"{len(unavailable)} more not estimated (architecture not modeled yet)")
            self.status.setToolTip("\n".join(f"{u['name']}: {u['reason']}" for u in unavailable))
        self.status.setText(" · ".join(parts))

    def _update_top_pick(self) -> None:
        rows = self.model.rows
        pick = next((r for r in rows if r.fit != "too_large"), None)
        self._pick = pick
        if pick is None:
            self.pick_box.setVisible(bool(rows))
            self.pick_title.setText("Nothing in the catalog fits")
            self.pick_badge.set_fit("too_large")
            self.pick_text.setText("Try a shorter context, or “What if…” on the This machine page.")
            self.pick_download.hide()
            self.pick_details.hide()
            return
        e = pick.best.estimate
        self.pick_title.setText(f"{pick.model.name} · {pick.best.quant}")
        self.pick_badge.set_fit(e.fit)
        self.pick_text.setText(f"{tok_s(e.performance.decode_tok_s)} tok/s decode, "
                               f"{tok_s(e.performance.prefill_tok_s)} tok/s prefill · "
                               f"{FIT_LABELS[e.fit]}")
        installed = self.ctx.installed.quants_of(pick.model).get(pick.best.quant)
        self.pick_details.show()
        self.pick_download.show()
        if installed:
            self.pick_download.setText("Chat")
            self.pick_download.setEnabled(self.ctx.actions.can_chat)
            self.pick_download.setAccessibleName("Chat with the top pick")
        else:
            self.pick_download.setText("Download")
            self.pick_download.setEnabled(self.ctx.actions.can_download)
            self.pick_download.setAccessibleName("Download the top pick")
            self.pick_download.setToolTip("" if self.ctx.actions.can_download else NO_DOWNLOADS)
        self.pick_box.show()

    def _download_pick(self) -> None:
        pick = self._pick
        if pick is None:
            return
        installed = self.ctx.installed.quants_of(pick.model).get(pick.best.quant)
        if installed:
            self.chat_requested.emit(installed, None)
        else:
            repo, file = pick.model.file_for(pick.best.quant)
            self.download_requested.emit(repo, file)

    def shutdown(self) -> None:
        self.detail.shutdown()  # a stress test ends after the context being measured

    # -- state -----------------------------------------------------------------------------
    def save_state(self, state) -> None:
        state.setValue("models/splitter", self.splitter.saveState())
        state.setValue("models/header", self.table.horizontalHeader().saveState())
        state.setValue("models/use_case", self.use_case.currentData())

    def restore_state(self, state) -> None:
        splitter = state.value("models/splitter")
        if splitter is not None:
            self.splitter.restoreState(splitter)
        header = state.value("models/header")
        if header is not None:
            self.table.horizontalHeader().restoreState(header)
        uc = state.value("models/use_case")
        i = self.use_case.findData(uc) if uc else -1
        if i >= 0:
            self.use_case.blockSignals(True)
            self.use_case.setCurrentIndex(i)
            self.use_case.blockSignals(False)

