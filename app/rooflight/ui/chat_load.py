"""The Chat page's model bar: pick an installed model (or any .gguf), see the planned
configuration and its estimate, change any field and see the estimate follow, then load.

A model comes planned at the default context of the settings (a plan not loaded yet
follows that default when it changes), or with the settings the model detail showed
(select_path(path, wishes): its context, GPU layers, KV cache, flash attention, threads
and batch sizes), so "Chat" there loads the plan that was on screen.

Planning reads the file's header and runs the estimator: both in workers, newest request
wins (a field changed twice quickly plans once more, not twice). A plan that does not fit
shows the runtime's own refusal sentence and a "Load anyway" button; loading itself is
the page's (it owns the engine), this panel shows its progress and a Cancel button.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from rooflight.ui.experts_control import ExpertsInRam
from rooflight.ui.widgets import FitBadge, Note, gb, label, tok_s

FORCE_HINT = "choose Load anyway"
REPLAN_DELAY_MS = 150  # fields settle (a spin box held down) before planning again
OPEN_FILE = "__open__"
KV_TYPES = ("f16", "q8_0", "q4_0")
FLASH = ("auto", "on", "off")


@dataclass(frozen=True)
class Planned:
    """What a planning worker hands back: the plan, and its refusal sentence if too large."""

    plan: object  # runtime.loader.LoadPlan
    refusal: str | None


def is_this_machine(profile) -> bool:
    """A profile detected here (bandwidth measured or cached, GPUs detected), as opposed to
    a --hardware file: only then is free memory re-read before loading and a reply's
    speed stored as a calibration of this machine."""
    return (profile.cpu.ram_bandwidth_source in ("measured", "cached")
            and all(g.source.startswith("detected") for g in profile.gpus))


def plan_model(path: str, default_ctx: int, hardware, calibration, live: bool, wishes=None) -> Planned:
    """Worker side: the plan for a .gguf with `wishes` (an estimate.Wishes; None: the
    defaults), at their context or else the default one, capped at the model's."""
    from rooflight.estimate import Calibration, Wishes
    from rooflight.gguf import load_model_spec
    from rooflight.gguf.projector import pair_local
    from rooflight.runtime.loader import plan_load

    spec = pair_local(load_model_spec(str(path)), path)  # a vision model: with its projector
    wishes = wishes or Wishes()
    wanted = wishes.n_ctx or default_ctx
    n_ctx = min(wanted, spec.context_length or wanted)
    lp = plan_load(path, replace(wishes, n_ctx=n_ctx), hardware=hardware, spec=spec,
                   calibration=calibration or Calibration())
    return _planned(replace(lp, live_hardware=live))


def replan_model(lp, overrides: dict) -> Planned:
    """Worker side: the same model planned with some wishes changed."""
    from rooflight.runtime.loader import replan

    return _planned(replan(lp, **overrides))


def _planned(lp) -> Planned:
    from rooflight.runtime.loader import refusal

    return Planned(lp, None if lp.fits else refusal(lp, force_hint=FORCE_HINT))


def plan_text(lp) -> str:
    """The estimate in one line (the fit badge sits beside it): where the layers go,
    memory per device against what is usable, and the predicted speed."""
    est, cfg = lp.estimate, lp.config
    parts = [f"{cfg.n_ctx}-token context"]
    if lp.hardware.backend != "cpu":
        parts.append(f"{cfg.n_gpu_layers} of {lp.spec.n_layer + 1} layers on the GPU")
    if cfg.n_cpu_moe:
        parts.append(f"MoE experts of {cfg.n_cpu_moe} layers in RAM")
    for d in est.memory.devices:
        where = "RAM" if d.device == "cpu" else f"GPU {d.device.removeprefix('gpu')}"
        parts.append(f"{where} {gb(d.total_bytes, 2)} of {gb(d.available_bytes)} usable")
    perf = est.performance
    parts.append(f"predicted {tok_s(perf.decode_tok_s)} tok/s decode, {tok_s(perf.prefill_tok_s)} tok/s prefill"
                 + (" (calibrated)" if perf.calibrated else ""))
    return " · ".join(parts)


def _spin(name: str, lo: int, hi: int, step: int = 1, special: str = "") -> QSpinBox:
    s = QSpinBox()
    s.setRange(lo, hi)
    s.setSingleStep(step)
    s.setAccessibleName(name)
    s.lineEdit().setAccessibleName(name)
    if special:
        s.setSpecialValueText(special)
    s.setKeyboardTracking(False)  # plan when typing ends, not at every digit
    return s


def _combo(name: str, items: tuple[str, ...]) -> QComboBox:
    c = QComboBox()
    c.setAccessibleName(name)
    for item in items:
        c.addItem(item, item)
    return c


class LoadPanel(QFrame):
    """Model picker, editable plan, estimate, refusal, load progress."""

    load_requested = Signal(object, bool)  # LoadPlan, force
    cancel_requested = Signal()
    unload_requested = Signal()
    planned = Signal()  # a plan (or a planning error) landed

    def __init__(self, ctx, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setProperty("role", "card")
        self.setAccessibleName("Model to chat with")
        self.lp = None
        self.refusal: str | None = None
        self.error: str | None = None
        self._task = None
        self._pending: dict | None = None
        self._planned_for = None  # the hardware the plan was made for
        self._extra: list[str] = []  # files opened by hand or asked for by the Models page
        self._loaded_path: str | None = None
        self._loaded_config = None
        self._loading = False
        self._requested = None  # the Wishes the model was asked for with (None: defaults)
        self._ubatch = 512  # the micro-batch asked for (no field: kept under the batch size)

        col = QVBoxLayout(self)
        col.setContentsMargins(14, 10, 14, 10)
        col.setSpacing(8)

        top = QHBoxLayout()
        top.setSpacing(8)
        top.addWidget(label("Model", "heading"))
        self.model = QComboBox()
        self.model.setAccessibleName("Model file")
        self.model.setMinimumContentsLength(16)
        self.model.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model.activated.connect(self._model_activated)
        top.addWidget(self.model, 1)
        self.settings_toggle = QPushButton("Load settings")
        self.settings_toggle.setCheckable(True)
        self.settings_toggle.setChecked(True)
        self.settings_toggle.setAccessibleName("Show the load settings")
        self.settings_toggle.toggled.connect(self._show_settings)
        top.addWidget(self.settings_toggle)
        self.load_button = QPushButton("Load")
        self.load_button.setProperty("primary", True)
        self.load_button.setAccessibleName("Load the model")
        self.load_button.clicked.connect(lambda: self._request_load(False))
        top.addWidget(self.load_button)
        self.unload_button = QPushButton("Unload")
        self.unload_button.setAccessibleName("Unload the model")
        self.unload_button.clicked.connect(self.unload_requested)
        self.unload_button.hide()
        top.addWidget(self.unload_button)
        col.addLayout(top)

        # the plan's fields ----------------------------------------------------------------
        self.fields = QWidget()
        grid = QGridLayout(self.fields)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(6)
        self.gpu_layers = _spin("GPU layers", -1, 999, special="auto")
        self.gpu_layers.setToolTip("Layers llama.cpp puts on the GPU (auto: as many as fit)")
        self.n_ctx = _spin("Context length", 256, 1 << 24, 1024)
        self.n_ctx.setSuffix(" tokens")
        self.threads = _spin("Threads", 1, 1024)
        self.kv_type = _combo("KV cache type", KV_TYPES)
        self.flash = _combo("Flash attention", FLASH)
        self.batch = _spin("Batch size", 32, 8192, 32)
        self.experts = ExpertsInRam()  # MoE files only (shown by _fill_fields)
        cells = [("GPU layers", self.gpu_layers), ("Context", self.n_ctx), ("Threads", self.threads),
                 ("KV cache", self.kv_type), ("Flash attention", self.flash), ("Batch", self.batch),
                 ("Experts in RAM", self.experts)]
        self._field_labels = {}
        for i, (text, w) in enumerate(cells):
            r, c = divmod(i, 2)  # two columns: the page keeps room for the chats and settings
            self._field_labels[text] = label(text, "muted")
            grid.addWidget(self._field_labels[text], r, 2 * c, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            grid.addWidget(w, r, 2 * c + 1)
            grid.setColumnStretch(2 * c + 1, 1)
            if isinstance(w, QSpinBox):
                w.valueChanged.connect(self._field_changed)
            else:
                w.currentIndexChanged.connect(self._field_changed)
        col.addWidget(self.fields)

        est = QHBoxLayout()
        est.setSpacing(8)
        self.badge = FitBadge()
        self.badge.hide()
        self.estimate = label("Choose a model to see how it will run here.", "muted", wrap=True, selectable=True)
        self.estimate.setAccessibleName("Planned configuration")
        # room for two lines whatever the layout's height-for-width pass says (it gave
        # the wrapped second line a few pixels short beside the badge)
        self.estimate.setMinimumHeight(self.estimate.fontMetrics().lineSpacing() * 2 + 4)
        est.addWidget(self.badge, 0, Qt.AlignmentFlag.AlignTop)
        est.addWidget(self.estimate, 1)
        col.addLayout(est)

        refuse = QHBoxLayout()
        self.refusal_note = Note("error", "")
        self.refusal_note.text.setAccessibleName("Why the model is not loaded")
        refuse.addWidget(self.refusal_note, 1)
        self.force_button = QPushButton("Load anyway")
        self.force_button.setAccessibleName("Load the model anyway")
        self.force_button.setToolTip("Load although the plan says it does not fit (it may fail or swap)")
        self.force_button.clicked.connect(lambda: self._request_load(True))
        refuse.addWidget(self.force_button, 0, Qt.AlignmentFlag.AlignVCenter)
        self.refusal_row = QWidget()
        self.refusal_row.setLayout(refuse)
        refuse.setContentsMargins(0, 0, 0, 0)
        self.refusal_row.hide()
        col.addWidget(self.refusal_row)

        prog = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setAccessibleName("Load progress")
        self.progress_text = label("", "muted")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setAccessibleName("Cancel loading")
        self.cancel_button.clicked.connect(self.cancel_requested)
        prog.addWidget(self.progress_text)
        prog.addWidget(self.progress, 1)
        prog.addWidget(self.cancel_button)
        self.progress_row = QWidget()
        self.progress_row.setLayout(prog)
        prog.setContentsMargins(0, 0, 0, 0)
        self.progress_row.hide()
        col.addWidget(self.progress_row)

        self._timer = QTimer(self, singleShot=True, interval=REPLAN_DELAY_MS)
        self._timer.timeout.connect(self._replan)
        ctx.installed.changed.connect(self.refresh_models)
        ctx.machine.changed.connect(self._machine_changed)
        ctx.settings_changed.connect(self._settings_changed)
        self._default_ctx = ctx.settings.default_ctx
        self.refresh_models()
        self._update_buttons()

    @property
    def planning(self) -> bool:
        """A plan for the chosen model is being made in a worker."""
        return self._task is not None

    # -- the model list ---------------------------------------------------------------------
    @property
    def path(self) -> str | None:
        data = self.model.currentData()
        return None if data in (None, OPEN_FILE) else str(data)

    def refresh_models(self) -> None:
        """Installed files, then files opened here; the selection is kept."""
        current = self.path
        self.model.blockSignals(True)
        self.model.clear()
        seen = set()
        for (repo, file), path in sorted(self.ctx.installed.files.items(), key=lambda kv: Path(kv[0][1]).name.lower()):
            if path in seen:
                continue
            seen.add(path)
            self.model.addItem(f"{Path(file).name}  ({repo})", path)
            self.model.setItemData(self.model.count() - 1, path, Qt.ItemDataRole.ToolTipRole)
        for path in self._extra:
            if path not in seen:
                seen.add(path)
                self.model.addItem(Path(path).name, path)
                self.model.setItemData(self.model.count() - 1, path, Qt.ItemDataRole.ToolTipRole)
        self.model.addItem("Open a .gguf file…", OPEN_FILE)
        i = self.model.findData(current) if current else -1
        self.model.setCurrentIndex(i if i >= 0 else (-1 if self.model.count() > 1 else 0))
        if self.model.currentData() == OPEN_FILE and self.model.count() > 1:
            self.model.setCurrentIndex(-1)
        self.model.blockSignals(False)
        if self.model.currentIndex() < 0:
            self.model.setPlaceholderText("Choose a model" if seen else "No models installed: open a .gguf file")

    def select_path(self, path: str, wishes=None) -> None:
        """Show `path` selected and plan it with `wishes` (an estimate.Wishes, e.g. the
        model detail's; None: the default context and settings). A file not installed
        joins the list."""
        path = str(path)
        self._requested = wishes
        if self.model.findData(path) < 0:
            if path not in self._extra:
                self._extra.append(path)
            self.refresh_models()
        self.model.setCurrentIndex(self.model.findData(path))
        self.plan()

    def _model_activated(self, _index: int) -> None:
        if self.model.currentData() == OPEN_FILE:
            start = str(Path(self._extra[-1]).parent) if self._extra else (self.ctx.settings.models_dir or "")
            path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", start, "GGUF models (*.gguf)")
            if path:
                self.select_path(path)
            else:
                self.refresh_models()
            return
        self._requested = None  # another model: its own default plan
        self.plan()

    # -- planning -----------------------------------------------------------------------------
    def plan(self) -> None:
        """Plan the selected file from scratch: with the settings it was asked for, or
        the default configuration."""
        path = self.path
        machine = self.ctx.machine.detected
        self._timer.stop()
        if path is None:
            return
        if machine is None:
            self._show_estimate_text("Waiting for this machine to be detected…")
            return
        self.lp = None
        self._planned_for = machine
        self._ubatch = self._requested.n_ubatch if self._requested is not None else 512
        self._start(plan_model, path, self.ctx.settings.default_ctx, machine, self.ctx.machine.calibration,
                    is_this_machine(machine), self._requested)

    def _field_changed(self, *_args) -> None:
        if self.lp is not None:
            self._timer.start()

    def wishes_from_fields(self) -> dict:
        batch = self.batch.value()
        return {
            "n_gpu_layers": "auto" if self.gpu_layers.value() < 0 else self.gpu_layers.value(),
            "n_ctx": self.n_ctx.value(),
            "n_threads": self.threads.value(),
            "kv_type": self.kv_type.currentData(),
            "flash_attn": self.flash.currentData(),
            "n_batch": batch,
            "n_ubatch": min(self._ubatch, batch),
            "n_cpu_moe": self.experts.value(),
        }

    def _replan(self) -> None:
        if self.lp is None:
            return
        self._start(replan_model, self.lp, self.wishes_from_fields())

    def _start(self, fn, *args) -> None:
        if self._task is not None:
            self._task.cancel()  # its result is stale now
        self._show_estimate_text("Planning…" if self.lp is None else self.estimate.text())
        self._task = self.ctx.runner.run(fn, *args, on_done=self._planned, on_error=self._plan_failed,
                                         what="planning the model load")
        self._update_buttons()

    def _planned(self, result: Planned) -> None:
        self._task = None
        self.error = None
        self.lp, self.refusal = result.plan, result.refusal
        self._fill_fields(self.lp)
        self.badge.set_fit(self.lp.estimate.fit)
        self.badge.show()
        self.estimate.setText(plan_text(self.lp))
        self._show_refusal(self.refusal)
        self._update_buttons()
        self.planned.emit()

    def _plan_failed(self, exc: BaseException) -> None:
        from rooflight.ui.tasks import error_sentence

        self._task = None
        self.error = error_sentence(exc, "planning the model load")
        self.badge.hide()
        self.estimate.setText(self.error)
        self._show_refusal(None)
        self._update_buttons()
        self.planned.emit()

    def _fill_fields(self, lp) -> None:
        cfg, spec = lp.config, lp.spec
        widgets = (self.gpu_layers, self.n_ctx, self.threads, self.kv_type, self.flash, self.batch, self.experts)
        for w in widgets:
            w.blockSignals(True)
        self.gpu_layers.setMaximum(spec.n_layer + 1)
        self.gpu_layers.setValue(-1 if lp.wishes.n_gpu_layers == "auto" else cfg.n_gpu_layers)
        gpu = lp.hardware.backend != "cpu"
        self.gpu_layers.setEnabled(gpu)
        self.gpu_layers.setToolTip("Layers llama.cpp puts on the GPU (auto: as many as fit)" if gpu
                                   else "No GPU in use: every layer runs on the CPU")
        self.n_ctx.setMaximum(max(spec.context_length or 0, cfg.n_ctx, 256))
        self.n_ctx.setValue(cfg.n_ctx)
        self.threads.setMaximum(max(lp.hardware.cpu.threads or 1, cfg.n_threads))
        self.threads.setValue(cfg.n_threads)
        self.kv_type.setCurrentIndex(self.kv_type.findData(cfg.kv_type))
        self.flash.setCurrentIndex(self.flash.findData(lp.wishes.flash_attn))
        self.batch.setValue(lp.wishes.n_batch)
        self.experts.set_layers(spec.n_layer)
        self.experts.set_value(lp.wishes.n_cpu_moe)
        self.experts.set_gpu(gpu)
        for w in (self.experts, self._field_labels["Experts in RAM"]):
            w.setVisible(spec.is_moe)
        for w in widgets:
            w.blockSignals(False)

    def _settings_changed(self, settings) -> None:
        """A new default context: a plan made at the old default (not loaded yet, its
        context not chosen by hand or by the model detail) is made again at the new one."""
        old, self._default_ctx = self._default_ctx, settings.default_ctx
        lp = self.lp
        if old == settings.default_ctx or lp is None or self._loading or self._task is not None:
            return
        if self._loaded_path == self.path and lp.config == self._loaded_config:
            return  # the plan shown is the model running now
        trained = lp.spec.context_length or None
        if lp.wishes.n_ctx != min(old, trained or old):
            return  # a context someone chose
        n_ctx = min(settings.default_ctx, trained or settings.default_ctx)
        self._requested = None if self._requested is None else replace(self._requested, n_ctx=n_ctx)
        self._start(replan_model, lp, {"n_ctx": n_ctx})

    def _machine_changed(self, _profile) -> None:
        # what-if machines change every estimate elsewhere; a load runs on this machine
        detected = self.ctx.machine.detected
        if detected is not None and detected is not self._planned_for and self.path and not self._loading:
            self.plan()

    # -- showing ------------------------------------------------------------------------------
    def _show_estimate_text(self, text: str) -> None:
        self.badge.hide()
        self.estimate.setText(text)

    def _show_refusal(self, text: str | None) -> None:
        self.refusal_note.text.setText(text or "")
        self.refusal_row.setVisible(bool(text))

    def show_refusal(self, text: str) -> None:
        """A refusal at load time (free memory fell since planning)."""
        self.refusal = text
        self._show_refusal(text)
        self._update_buttons()

    def _show_settings(self, on: bool) -> None:
        self.fields.setVisible(on)

    def _request_load(self, force: bool) -> None:
        if self.lp is not None and self._task is None:
            self.load_requested.emit(self.lp, force)

    def set_loading(self, loading: bool, text: str = "") -> None:
        self._loading = loading
        self.progress_row.setVisible(loading)
        self.progress.setValue(0)
        self.progress_text.setText(text)
        if loading:
            self._show_refusal(None)
        self._update_buttons()

    def set_progress(self, fraction: float) -> None:
        self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))

    def set_loaded(self, path: str | None, config=None) -> None:
        """The model now loaded with `config` (None: nothing); its settings fold away."""
        self._loaded_path, self._loaded_config = path, config
        if path is not None:
            self.settings_toggle.setChecked(False)
            self._show_refusal(None)
        self._update_buttons()

    def _update_buttons(self) -> None:
        loaded_here = self._loaded_path is not None and self._loaded_path == self.path
        same = loaded_here and self.lp is not None and self.lp.config == self._loaded_config
        idle = not self._loading
        can_plan = self.lp is not None and self._task is None
        self.load_button.setVisible(not same)
        self.load_button.setEnabled(idle and can_plan and self.refusal is None)
        self.load_button.setText("Reload" if loaded_here else "Load instead" if self._loaded_path else "Load")
        self.load_button.setAccessibleName("Load the model again with these settings" if loaded_here
                                           else "Load the model")
        self.unload_button.setVisible(self._loaded_path is not None)
        self.unload_button.setEnabled(idle)
        self.force_button.setEnabled(idle and can_plan)
        self.model.setEnabled(idle)
        self.fields.setEnabled(idle)
