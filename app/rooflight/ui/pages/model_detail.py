"""One model in detail: every quantization at a chosen context with fit and speed, the
memory of the chosen one per device against capacity, and a GPU-layers slider that shows
how memory and speed move. Each quant has a Download button (Chat when it is on disk).

Four tabs: Plan (the above), Advice (the optimization advisor, ui/advice_panel.py: its
"Use these settings" puts a card's settings into the plan), Plots (memory and speed
against the context, the quant comparison: ui/detail_plots.py) and Stress test (the
chosen quant's file measured on this machine over growing contexts beside the plan:
ui/stress_panel.py; its points join the speed plot). The settings besides
context and GPU layers (KV cache type, flash attention, threads, batch sizes, SWA cache)
are `tuning`: the defaults until the advisor changes them, per model.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSlider,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from rooflight.catalog.rank import QuantOption, RankedModel
from rooflight.estimate import Calibration, Estimate, Wishes, plan
from rooflight.estimate.fit import Fit
from rooflight.estimate.placement import has_offload_devices
from rooflight.format import (
    FIT_BADGES,
    FIT_LABELS,
    amx_layout_sentence,
    network_sentence,
    speed_basis,
)
from rooflight.hardware import HardwareProfile
from rooflight.hardware.profile import plural
from rooflight.hardware.remote import is_remote, remote_device
from rooflight.ui import theme
from rooflight.ui.advice_panel import AdvicePanel
from rooflight.ui.confirm_row import ConfirmRow, model_source
from rooflight.ui.detail_plots import DetailPlots
from rooflight.ui.experts_control import ExpertsInRam
from rooflight.ui.latest import LatestTask
from rooflight.ui.stack_page import StackPage
from rooflight.ui.stress_panel import StressPanel
from rooflight.ui.widgets import (
    FIT_ROLE,
    DeviceUse,
    FitBadge,
    FitBadgeDelegate,
    MemoryBar,
    ctx_label,
    gb,
    label,
    readonly_table,
    tok_s,
)

DEBOUNCE_MS = 60  # re-plan once a slider stops for a moment, not on every pixel
MIN_CTX = 512
NO_DOWNLOADS = "Downloading needs the Downloads page, which this build does not have."
NO_CHAT = "Chatting needs the Chat page, which this build does not have."


# -- worker side (plain functions over the core) ------------------------------------------

def plan_quants(ranked: RankedModel, hardware: HardwareProfile, n_ctx: int,
                calibration: Calibration | None, tuning: Wishes | None = None) -> list[QuantOption]:
    """Every quant of the model re-planned at this context (auto GPU layers) with the
    tuning settings (KV cache, flash attention, threads, batches)."""
    wishes = replace(tuning or Wishes(), n_ctx=n_ctx, n_gpu_layers="auto")
    return [replace(o, estimate=plan(o.estimate.spec, hardware, wishes, calibration=calibration))
            for o in ranked.options]


def plan_layers(option: QuantOption, hardware: HardwareProfile, n_ctx: int, n_gpu_layers: int | str,
                calibration: Calibration | None, tuning: Wishes | None = None) -> Estimate:
    return plan(option.estimate.spec, hardware, replace(tuning or Wishes(), n_ctx=n_ctx, n_gpu_layers=n_gpu_layers),
                calibration=calibration)


def tuning_text(tuning: Wishes) -> str:
    """The tuning settings that differ from the defaults, in words ("" when none do)."""
    d = Wishes()
    parts = []
    if tuning.kv_type != d.kv_type:
        parts.append(f"KV cache {tuning.kv_type}")
    if tuning.flash_attn != d.flash_attn:
        parts.append(f"flash attention {tuning.flash_attn}")
    if tuning.swa_full != d.swa_full:
        parts.append("full-size sliding-window cache" if tuning.swa_full else "windowed sliding-window cache")
    if tuning.n_threads != d.n_threads:
        parts.append(plural(tuning.n_threads, 'thread'))
    if (tuning.n_batch, tuning.n_ubatch) != (d.n_batch, d.n_ubatch):
        parts.append(f"batch {tuning.n_batch}/{tuning.n_ubatch}")
    return ", ".join(parts)


def context_steps(max_ctx: int) -> list[int]:
    """512, 1K, 2K ... up to the model's maximum (which is included even if not a power of 2)."""
    steps, n = [], MIN_CTX
    while n < max_ctx:
        steps.append(n)
        n *= 2
    steps.append(max_ctx)
    return steps


def device_uses(est: Estimate, hardware: HardwareProfile) -> list[DeviceUse]:
    out = []
    for d in est.memory.devices:
        if d.device == "cpu":
            name, capacity = "CPU RAM", hardware.cpu.ram_total_bytes
        elif is_remote(d.device):  # a device of another machine, over llama.cpp RPC
            r = remote_device(hardware, d.device)
            name = f"{d.device} · {r.gpu.name if r.gpu else 'CPU'} on {r.machine.name}"
            capacity = r.total_bytes or d.available_bytes
        else:
            i = int(d.device[3:])
            g = next((g for g in hardware.gpus if g.index == i), None)
            name = f"GPU {i}" + (f" · {g.name}" if g else "")
            capacity = (g.vram_total_bytes or d.available_bytes) if g else d.available_bytes
        out.append(DeviceUse(name, d.weights_bytes, d.kv_bytes, d.compute_bytes, d.overhead_bytes,
                             d.available_bytes, capacity))
    return out


def fit_sentence(est: Estimate) -> str:
    n, total = est.config.n_gpu_layers, est.spec.n_layer + 1
    return {
        Fit.FULL_GPU: f"All {total} layers on the GPU.",
        Fit.PARTIAL_GPU: f"Partial offload: {n} of {total} layers on the GPU, the rest on the CPU.",
        Fit.CPU_ONLY: "Runs on the CPU, from RAM.",
        Fit.TOO_LARGE: "Does not fit in memory at this context.",
    }.get(est.fit, est.fit)


# -- the panel ------------------------------------------------------------------------

QCOLS = ("Quant", "File", "Fit", "Decode", "Prefill", "Memory", "Quality", "")
ROW_HEIGHT = 34


class ModelDetail(QWidget):
    download_requested = Signal(str, str)
    chat_requested = Signal(str, object)  # path, the Wishes of the plan shown
    replanned = Signal()  # after any re-plan landed (tests, screenshots)
    closed = Signal()  # the Close button

    def __init__(self, ctx, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.ranked: RankedModel | None = None
        self.options: list[QuantOption] = []
        self.current: QuantOption | None = None
        self.estimate: Estimate | None = None
        self._ctx_steps: list[int] = []
        self._wanted_quant: str | None = None
        self.tuning = Wishes()  # settings besides context and GPU layers (the advisor's)
        # re-plan once a slider stops for a moment; a newer plan replaces an older one
        self._quants = LatestTask(self, ctx.runner, self._replan_quants, debounce_ms=DEBOUNCE_MS)
        self._layers = LatestTask(self, ctx.runner, self._replan_layers, debounce_ms=DEBOUNCE_MS)
        self.setAccessibleName("Model detail")

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        outer.addWidget(scroll)
        self.content = QFrame()
        self.content.setProperty("role", "card")
        scroll.setWidget(self.content)
        col = QVBoxLayout(self.content)
        col.setContentsMargins(16, 12, 16, 12)
        col.setSpacing(8)
        col.addLayout(self._header())
        plan_tab = self._tabs(col)
        columns = QHBoxLayout(plan_tab)
        columns.setContentsMargins(0, 8, 0, 0)
        columns.setSpacing(18)
        columns.addLayout(self._quant_column(), 3)  # left: every quant at the chosen context
        columns.addLayout(self._plan_column(), 2)  # right: the chosen quant's memory and speed

        self.ctx_slider.valueChanged.connect(self._ctx_moved)
        self.layers_slider.valueChanged.connect(self._layers_moved)
        self.layers_auto.toggled.connect(self._auto_toggled)
        ctx.actions.changed.connect(self._fill_table)
        ctx.installed.changed.connect(self._fill_table)
        ctx.installed.changed.connect(self._update_stress)

    def _header(self) -> QHBoxLayout:
        head = QHBoxLayout()
        self.name = label("", "title")
        self.meta = label("", "muted", wrap=True)
        self.close_button = QPushButton("Close")
        self.close_button.setAccessibleName("Close the model detail")
        self.close_button.clicked.connect(self.closed)
        head.addWidget(self.name)
        head.addWidget(self.meta, 1)
        head.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        return head

    def _tabs(self, col: QVBoxLayout) -> StackPage:
        """The Plan, Advice, Plots and Stress test tabs; returns the Plan tab's page."""
        self.tabs = QTabWidget()
        self.tabs.setAccessibleName("Model detail views")
        self.tabs.setDocumentMode(True)
        col.addWidget(self.tabs, 1)
        plan_tab = StackPage()
        self.tabs.addTab(plan_tab, "Plan")
        self.advice = AdvicePanel(self.ctx)
        self.advice.apply_requested.connect(self.apply_card)
        self.tabs.addTab(StackPage(self.advice), "Advice")
        self.plots = DetailPlots(self.ctx)
        self.tabs.addTab(StackPage(self.plots), "Plots")
        self.stress = StressPanel(self.ctx)
        self.stress.point_measured.connect(lambda p: self.plots.add_measured(self.stress.run_key, p))
        self.tabs.addTab(StackPage(self.stress), "Stress test")
        self.tabs.currentChanged.connect(self._tab_changed)
        self._tab_changed(0)
        return plan_tab

    def _quant_column(self) -> QVBoxLayout:
        left = QVBoxLayout()
        left.setSpacing(8)
        row = QHBoxLayout()
        row.addWidget(label("Context", "heading"))
        self.ctx_slider = QSlider(Qt.Orientation.Horizontal)
        self.ctx_slider.setAccessibleName("Context length")
        self.ctx_slider.setPageStep(1)
        self.ctx_value = label("", "value")
        self.ctx_value.setMinimumWidth(100)
        self.ctx_value.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        row.addWidget(self.ctx_slider, 1)
        row.addWidget(self.ctx_value)
        left.addLayout(row)

        self.table = readonly_table(QCOLS, "Quantizations", selectable_rows=True)
        self.table.setItemDelegateForColumn(2, FitBadgeDelegate(self.table))
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(5, QHeaderView.ResizeMode.Stretch)  # memory takes what is left
        hh.setSectionResizeMode(len(QCOLS) - 1, QHeaderView.ResizeMode.Fixed)
        self.table.setColumnWidth(len(QCOLS) - 1, 50)  # the Download / Chat button
        hh.setStretchLastSection(False)
        hh.setHighlightSections(False)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.table.verticalHeader().setDefaultSectionSize(ROW_HEIGHT)
        self.table.itemSelectionChanged.connect(self._quant_selected)
        left.addWidget(self.table, 1)
        return left

    def _plan_column(self) -> QVBoxLayout:
        right = QVBoxLayout()
        right.setSpacing(8)
        sec = QHBoxLayout()
        self.section = label("", "heading")
        self.fit_badge = FitBadge()
        sec.addWidget(self.section)
        sec.addWidget(self.fit_badge)
        sec.addStretch(1)
        right.addLayout(sec)
        self.fit_text = label("", "muted", wrap=True)
        right.addWidget(self.fit_text)
        self.memory = MemoryBar()
        right.addWidget(self.memory)
        self.confirm_row = ConfirmRow(self.ctx)  # llama.cpp's own numbers, on demand
        right.addWidget(self.confirm_row)
        right.addLayout(self._layers_row())
        right.addWidget(self._experts_row())
        self.speed = label("", "heading", wrap=True)
        self.speed.setAccessibleName("Predicted speed")
        self.config = label("", "muted", wrap=True, selectable=True)
        self.config.setAccessibleName("Planned configuration")
        right.addWidget(self.speed)
        right.addWidget(self.config)
        trow = QHBoxLayout()
        self.tuning_note = label("", "muted", wrap=True)
        self.tuning_note.setAccessibleName("Settings from the advisor")
        self.tuning_reset = QPushButton("Reset")
        self.tuning_reset.setAccessibleName("Reset the settings to the defaults")
        self.tuning_reset.setToolTip("Back to the default KV cache, flash attention, threads and batch sizes")
        self.tuning_reset.clicked.connect(self.reset_tuning)
        trow.addWidget(self.tuning_note, 1)
        trow.addWidget(self.tuning_reset, 0, Qt.AlignmentFlag.AlignTop)
        right.addLayout(trow)
        self._show_tuning()
        right.addStretch(1)
        return right

    def _layers_row(self) -> QHBoxLayout:
        lrow = QHBoxLayout()
        lrow.addWidget(label("GPU layers", "heading"))
        self.layers_slider = QSlider(Qt.Orientation.Horizontal)
        self.layers_slider.setAccessibleName("GPU layers")
        self.layers_value = label("", "value")
        self.layers_value.setMinimumWidth(80)
        self.layers_value.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.layers_auto = QCheckBox("Auto")
        self.layers_auto.setAccessibleName("GPU layers automatic")
        self.layers_auto.setToolTip("The largest offload that fits, as the runtime will load it")
        self.layers_auto.setChecked(True)
        lrow.addWidget(self.layers_slider, 1)
        lrow.addWidget(self.layers_value)
        lrow.addWidget(self.layers_auto)
        return lrow

    def _experts_row(self) -> QWidget:
        """MoE models only: the experts of the first N layers in RAM (part of the tuning)."""
        self.experts_row = QWidget()
        erow = QHBoxLayout(self.experts_row)
        erow.setContentsMargins(0, 0, 0, 0)
        erow.addWidget(label("Experts in RAM", "heading"))
        self.experts = ExpertsInRam()
        self.experts.value_changed.connect(self._experts_changed)
        erow.addWidget(self.experts, 1)
        self.experts_row.hide()
        return self.experts_row

    def _experts_changed(self, value) -> None:
        self.tuning = replace(self.tuning, n_cpu_moe=value)
        self._replan_quants()  # every quant with the experts placed so; bars and speeds follow

    # -- public ------------------------------------------------------------------------
    @property
    def n_ctx(self) -> int:
        return self._ctx_steps[self.ctx_slider.value()] if self._ctx_steps else 0

    @property
    def wishes(self) -> Wishes:
        """The settings the plan shown was made with (context, GPU layers, tuning)."""
        layers: int | str = "auto" if self.layers_auto.isChecked() else self.layers_slider.value()
        return replace(self.tuning, n_ctx=self.n_ctx, n_gpu_layers=layers)

    def chat_wishes(self) -> Wishes:
        """The settings to load a chat with: the plan shown (context, GPU layers, KV cache,
        flash attention, threads, batch sizes). A what-if machine's GPU is not this one:
        its layer count would mean nothing here, so the chat chooses its own."""
        wishes = self.wishes
        if self.ctx.machine.is_what_if:
            wishes = replace(wishes, n_gpu_layers="auto")
        return wishes

    def show_model(self, ranked: RankedModel | None, *, keep_context: bool = True) -> None:
        """Show a ranking row (None: the placeholder). Keeps the chosen quant (and, with
        keep_context, the context) when the same model is shown again, ranked for another
        machine or context."""
        same = ranked is not None and self.ranked is not None and ranked.model.id == self.ranked.model.id
        keep_quant = self.current.quant if same and self.current else None
        keep_ctx = self.n_ctx if same and keep_context else None
        self.ranked = ranked
        self.current = None
        self.estimate = None
        self._quants.cancel_task()
        self._layers.cancel_task()
        if not same:  # advisor settings belong to one model
            self.tuning = Wishes()
            self._show_tuning()
            self.advice.clear()
            self.advice.applied.hide()
            self.plots.clear()
        self._update_stress()  # nothing chosen until the quants are planned
        if ranked is None:
            return
        m = ranked.model
        self.name.setText(m.name)
        active = f", {m.params_active:g}B active" if m.params_active < m.params_total else ""
        quality, quality_source = ranked.quality_text()
        released = f" · released {m.release}" if m.release else ""
        why = ranked.ranked_lower_because()  # why the ranking lists it below higher scores
        lower = f" · listed lower: {'; '.join(f'{w.short} ({w.meaning})' for w in why)}" if why else ""
        self.meta.setText(f"{m.params_total:g}B parameters{active} · {m.architecture} · licence {m.license} · "
                          f"{', '.join(m.tags)} · up to {ctx_label(m.hparams.context_length)} context{released} · "
                          f"{quality}{lower}")
        self.meta.setToolTip(f"Quality source: {quality_source}")
        self._ctx_steps = context_steps(m.hparams.context_length)
        self.experts.set_layers(m.hparams.n_layer)
        self.experts_row.setVisible(m.is_moe)
        target = keep_ctx or ranked.best.estimate.config.n_ctx
        self.ctx_slider.blockSignals(True)
        self.ctx_slider.setRange(0, len(self._ctx_steps) - 1)
        self.ctx_slider.setValue(min(range(len(self._ctx_steps)), key=lambda i: abs(self._ctx_steps[i] - target)))
        self.ctx_slider.blockSignals(False)
        self.ctx_value.setText(f"{ctx_label(self.n_ctx)} tokens")
        self._wanted_quant = keep_quant or ranked.best.quant
        if self.n_ctx == ranked.best.estimate.config.n_ctx and self.tuning == Wishes():
            self._set_options(list(ranked.options))
        else:
            self._replan_quants()

    def select_quant(self, quant: str) -> None:
        for row, o in enumerate(self.options):
            if o.quant == quant:
                self.table.selectRow(row)
                return

    def set_context(self, n_ctx: int) -> None:
        """Move the context slider to the nearest step (re-plans after the debounce)."""
        i = min(range(len(self._ctx_steps)), key=lambda k: abs(self._ctx_steps[k] - n_ctx))
        self.ctx_slider.setValue(i)

    def set_gpu_layers(self, n: int | None) -> None:
        """None: automatic; else exactly n layers on the GPU(s)."""
        if n is None:
            self.layers_auto.setChecked(True)
        else:
            self.layers_auto.blockSignals(True)
            self.layers_auto.setChecked(False)
            self.layers_auto.blockSignals(False)
            self.layers_slider.setValue(n)
            self._layers.request()

    def _tab_changed(self, index: int) -> None:
        # a tab widget is as tall as its tallest page (the advice cards): size the detail
        # by the page shown, so a short page does not scroll and the plots get the height
        for i in range(self.tabs.count()):
            policy = QSizePolicy.Policy.Preferred if i == index else QSizePolicy.Policy.Ignored
            self.tabs.widget(i).setSizePolicy(policy, policy)
        self.tabs.updateGeometry()
        self.content.layout().invalidate()

    # -- advisor settings ----------------------------------------------------------------
    def apply_card(self, card) -> None:
        """Use an advice card's settings: its file, context, GPU layers and tuning."""
        if not card.runtime_supported or self.ranked is None:
            return
        from rooflight.estimate.advise import settings_wishes

        w = card.candidate.wishes if card.candidate is not None else settings_wishes(card.settings)
        w = replace(w, n_cpu_moe=card.settings.get("n_cpu_moe", 0))  # experts in RAM load as planned
        self.apply_settings(card.settings["quant"], card.settings["n_ctx"], w)
        self.advice.show_applied(card)
        self.tabs.setCurrentIndex(0)  # the plan, with the new figures

    def apply_settings(self, quant: str, n_ctx: int, wishes: Wishes) -> None:
        """Plan `quant` at n_ctx with these settings (wishes.n_gpu_layers: "auto" or a number)."""
        self.tuning = replace(wishes, n_ctx=None, n_gpu_layers="auto")
        self._show_tuning()
        if self._ctx_steps:
            i = min(range(len(self._ctx_steps)), key=lambda k: abs(self._ctx_steps[k] - n_ctx))
            self.ctx_slider.blockSignals(True)
            self.ctx_slider.setValue(i)
            self.ctx_slider.blockSignals(False)
            self.ctx_value.setText(f"{ctx_label(self.n_ctx)} tokens")
        auto = wishes.n_gpu_layers == "auto"
        self.layers_auto.blockSignals(True)
        self.layers_auto.setChecked(auto)
        self.layers_auto.blockSignals(False)
        if not auto:
            self.layers_slider.blockSignals(True)
            self.layers_slider.setValue(int(wishes.n_gpu_layers))
            self.layers_slider.blockSignals(False)
        self._wanted_quant = quant
        self.current = None
        self._replan_quants()

    def reset_tuning(self) -> None:
        self.tuning = Wishes()
        self._show_tuning()
        self.advice.applied.hide()
        self._replan_quants()

    def _show_tuning(self) -> None:
        text = tuning_text(self.tuning)
        self.experts.set_value(self.tuning.n_cpu_moe)  # the advisor's or Reset's, shown in its control
        self.tuning_note.setText(f"Settings from the advisor: {text}." if text else "")
        self.tuning_note.setVisible(bool(text))
        self.tuning_reset.setVisible(bool(text))

    # -- context -------------------------------------------------------------------------
    def _ctx_moved(self, _value: int) -> None:
        self.ctx_value.setText(f"{ctx_label(self.n_ctx)} tokens")
        self._quants.request()

    def _replan_quants(self) -> None:
        profile = self.ctx.machine.profile
        if self.ranked is None or profile is None:
            return
        self._quants.run(
            plan_quants, self.ranked, profile, self.n_ctx, self.ctx.machine.calibration, self.tuning,
            on_done=self._set_options, what="planning the quantizations")

    def _set_options(self, options: list[QuantOption]) -> None:
        self.options = options
        wanted = self.current.quant if self.current else self._wanted_quant
        self._wanted_quant = wanted
        self._fill_table()
        self.select_quant(wanted or (options[0].quant if options else ""))
        self.replanned.emit()

    def _fill_table(self) -> None:
        if self.ranked is None:
            return
        selected = self.current.quant if self.current else self._wanted_quant
        installed = self.ctx.installed.quants_of(self.ranked.model)
        self.table.blockSignals(True)
        self.table.setRowCount(len(self.options))
        for row, o in enumerate(self.options):
            e = o.estimate
            p = e.performance
            avail = sum(d.available_bytes for d in e.memory.devices)
            cells = [o.quant, gb(e.spec.file_bytes), FIT_BADGES.get(e.fit, e.fit),
                     "—" if e.fit == "too_large" else tok_s(p.decode_tok_s),
                     "—" if e.fit == "too_large" else tok_s(p.prefill_tok_s),
                     f"{e.memory.total_bytes / 1e9:.1f} / {gb(avail)}", f"{o.quality:.0f}"]
            for colno, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if colno == 2:
                    item.setData(FIT_ROLE, e.fit)
                    item.setToolTip(FIT_LABELS.get(e.fit, e.fit))
                if colno in (3, 4, 6):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, colno, item)
            self.table.setCellWidget(row, len(QCOLS) - 1, self._buttons(o, installed.get(o.quant)))
        self.table.clearSelection()
        self.table.blockSignals(False)
        if selected:
            self.current = None
            self.select_quant(selected)

    def _buttons(self, option: QuantOption, local_path: str | None) -> QWidget:
        """A Download button, or Chat when the file is on disk: compact icon buttons whose
        accessible names and tooltips say what they do."""
        w = QWidget()
        row = QHBoxLayout(w)
        row.setContentsMargins(4, 1, 4, 1)
        row.setSpacing(4)
        repo, file = self.ranked.model.file_for(option.quant)
        if local_path:
            button = QPushButton(theme.icon("chat", 16), "")
            button.setAccessibleName(f"Chat with {option.quant}")
            button.setEnabled(self.ctx.actions.can_chat)
            button.setToolTip(f"Chat with {local_path}" if self.ctx.actions.can_chat else NO_CHAT)
            button.clicked.connect(lambda _=False, p=local_path: self.chat_requested.emit(p, self.chat_wishes()))
        else:
            button = QPushButton(theme.icon("downloads", 16), "")
            button.setAccessibleName(f"Download {option.quant}")
            can = self.ctx.actions.can_download
            button.setEnabled(can)
            button.setToolTip(f"Download {repo}/{file} ({gb(option.estimate.spec.file_bytes)})" if can
                              else NO_DOWNLOADS)
            button.clicked.connect(lambda _=False, r=repo, f=file: self.download_requested.emit(r, f))
        button.setProperty("compact", True)
        button.setFixedWidth(36)
        row.addWidget(button)
        row.addStretch(1)
        return w

    def quant_buttons(self, quant: str) -> list[QPushButton]:
        for row, o in enumerate(self.options):
            if o.quant == quant:
                return self.table.cellWidget(row, len(QCOLS) - 1).findChildren(QPushButton)
        return []

    # -- the chosen quant ------------------------------------------------------------------
    def _quant_selected(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self.options):
            return
        option = self.options[rows[0].row()]
        if self.current is not None and option.quant == self.current.quant and self.estimate is not None:
            return
        self.current = option
        self._wanted_quant = option.quant
        n_layer = option.estimate.spec.n_layer + 1
        self.layers_slider.blockSignals(True)
        self.layers_slider.setRange(0, n_layer)
        self.layers_slider.blockSignals(False)
        if self.layers_auto.isChecked():
            self._show_estimate(option.estimate)
        else:
            self._replan_layers()

    def _layers_moved(self, _value: int) -> None:
        if self.layers_auto.isChecked():
            self.layers_auto.blockSignals(True)
            self.layers_auto.setChecked(False)
            self.layers_auto.blockSignals(False)
        self._update_layers_label(self.layers_slider.value())
        self._layers.request()

    def _auto_toggled(self, on: bool) -> None:
        if on and self.current is not None:
            self._show_estimate(self.current.estimate)
        else:
            self._replan_layers()

    def _replan_layers(self) -> None:
        profile = self.ctx.machine.profile
        if self.current is None or profile is None:
            return
        layers: int | str = "auto" if self.layers_auto.isChecked() else self.layers_slider.value()
        self._layers.run(
            plan_layers, self.current, profile, self.n_ctx, layers, self.ctx.machine.calibration, self.tuning,
            on_done=self._layers_planned, what="planning the GPU offload")

    def _layers_planned(self, est: Estimate) -> None:
        self._show_estimate(est)
        self.replanned.emit()

    def _update_layers_label(self, n: int) -> None:
        total = self.layers_slider.maximum()
        self.layers_value.setText(f"{n} of {total}")

    def _show_estimate(self, est: Estimate) -> None:
        self.estimate = est
        profile = self.ctx.machine.profile
        s, cfg, p = est.spec, est.config, est.performance
        self.section.setText(f"{s.file_type} at {ctx_label(cfg.n_ctx)} context")
        self.fit_badge.set_fit(est.fit)
        self.fit_text.setText(fit_sentence(est))
        self.memory.set_devices(device_uses(est, profile))
        self.layers_slider.blockSignals(True)
        self.layers_slider.setValue(cfg.n_gpu_layers)
        self.layers_slider.blockSignals(False)
        self._update_layers_label(cfg.n_gpu_layers)
        gpu = profile is not None and has_offload_devices(profile)
        self.layers_slider.setEnabled(gpu)
        self.layers_auto.setEnabled(gpu)
        self.experts.set_gpu(gpu)
        tip = ("" if gpu else "No GPU that llama.cpp can use here; try “What if…” on the "
               "This machine page to plan for one.")
        self.layers_slider.setToolTip(tip or "Layers offloaded to the GPU(s); the rest run on the CPU")
        lo, hi = p.decode_tok_s_range
        if est.fit == "too_large":
            self.speed.setText("Does not fit: no speed to predict. Try a smaller quant, a shorter "
                               "context or fewer GPU layers.")
        else:
            self.speed.setText(f"Decode {tok_s(p.decode_tok_s)} tok/s (range {tok_s(lo)}–{tok_s(hi)}) · "
                               f"prefill {tok_s(p.prefill_tok_s)} tok/s · first token in "
                               f"{p.time_to_first_token_s:.2f} s"
                               + (f"\n{network_sentence(p.network)}" if p.network else ""))
        self.speed.setToolTip(speed_basis(p))  # what the range means ("8 of 10 ... fall inside")
        self.config.setText(
            f"Planned: {cfg.n_gpu_layers} of {s.n_layer + 1} layers on the GPU · KV cache {cfg.kv_type} · "
            f"flash attention {'on' if cfg.flash_attn else 'off'} · {plural(cfg.n_threads, 'thread')} · "
            f"batch {cfg.n_batch}/{cfg.n_ubatch} · decode {p.bound}-bound"
            + (f" · MoE experts of {cfg.n_cpu_moe} layers in RAM" if cfg.n_cpu_moe else "")
            + (" · calibrated on this machine" if p.calibrated else "")
            + (f"\n{est.moe_choice.reason}" if est.moe_choice is not None else "")
            + (f"\n{amx_layout_sentence(est.memory.amx_layout_bytes)}" if est.memory.amx_layout_bytes else ""))
        m = self.ctx.machine
        self.confirm_row.set_subject(model_source(self.ranked, self.current, self.ctx.installed), est,
                                     m.detected, m.is_what_if)
        self._update_panels()

    def _update_panels(self) -> None:
        """Tell the Advice and Plots tabs what the plan is now (they work when shown)."""
        profile, current = self.ctx.machine.profile, self.current
        if self.ranked is None or profile is None or current is None or not self.options:
            return
        m = self.ctx.machine
        machine = f"what if: {m.what_if.describe(short=True)}" if m.is_what_if else "this machine"
        sources = []
        for o in self.options:
            repo, file = (o.repo, o.filename) if o.filename else self.ranked.model.file_for(o.quant)
            sources.append(f"hf:{repo}/{file}")
        wishes = self.wishes
        self.advice.set_subject(self.options, sources, current.quant, wishes, profile, m.calibration, machine)
        shown = replace(current, estimate=self.estimate) if self.estimate is not None else current
        self.plots.set_subject(self.ranked.model, shown, self.options, wishes, profile, m.calibration,
                               m.is_what_if)
        self._update_stress()

    def _update_stress(self) -> None:
        """The Stress test tab measures the quant shown, from its file, on this machine."""
        current, m = self.current, self.ctx.machine
        if self.ranked is None or current is None:
            self.stress.set_subject(None, "", Wishes(), m.detected, m.is_what_if)
            return
        path = self.ctx.installed.quants_of(self.ranked.model).get(current.quant)
        self.stress.set_subject(path, f"{self.ranked.model.name} {current.quant}", self.wishes, m.detected,
                                m.is_what_if, key=(self.ranked.model.id, current.quant))

    def shutdown(self) -> None:
        self.stress.shutdown()
