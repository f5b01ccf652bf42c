"""The optimization advisor in the model detail (issue 9): which llama.cpp settings buy the
most for this model on the machine in use, as cards ranked by gain, each with its numbers
before and after, its quality effect and source, and a "Use these settings" button that
puts them into the detail's plan; below them the Pareto front over quality, decode speed,
prefill speed and memory.

estimate.advise does the search (tens of milliseconds); it runs in a worker whenever the
model, the quant, the context, the settings or the machine change while the panel is
visible, and when it is shown after such a change.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rooflight.estimate import Wishes
from rooflight.format import FIT_BADGES
from rooflight.ui.latest import LatestTask
from rooflight.ui.widgets import (
    FIT_ROLE,
    FitBadgeDelegate,
    Note,
    ctx_label,
    label,
    readonly_table,
    tok_s,
)
from rooflight.units import size_text

DEBOUNCE_MS = 80


# -- worker side ---------------------------------------------------------------------------

def advise_options(options: Sequence, sources: Sequence[str | None], hardware, wishes: Wishes, quant: str,
                   calibration):
    """advise() over the detail's quant options (each its own file of the same model)."""
    from rooflight.estimate.advise import Variant, advise

    variants = tuple(Variant(o.quant, o.estimate.spec, src) for o, src in zip(options, sources, strict=True))
    return advise(variants, hardware, wishes, current=quant, calibration=calibration)


# -- words ---------------------------------------------------------------------------------

_SETTING_WORDS = (
    ("quant", "{} file"),
    ("n_ctx", "{} context"),
    ("kv_type", "KV cache {}"),
    ("flash_attn", "flash attention {}"),
    ("swa_full", "{} sliding-window cache"),
    ("n_gpu_layers", "{} GPU layers"),
    ("n_threads", "{} threads"),
    ("n_batch", "batch {}"),
    ("n_ubatch", "micro-batch {}"),
    ("n_cpu_moe", "experts of {} layers on the CPU"),
)


def _setting_value(key: str, value) -> str:
    if key == "flash_attn":
        return "on" if value else "off"
    if key == "swa_full":
        return "full-size" if value else "windowed"
    if key == "n_ctx":
        return ctx_label(int(value))
    return str(value)


def setting_changes(before: dict, after: dict) -> list[str]:
    """What a card changes, in words: ["KV cache q8_0", "flash attention on"]."""
    return [text.format(_setting_value(key, after.get(key))) for key, text in _SETTING_WORDS
            if after.get(key) != before.get(key) and after.get(key) is not None]


def _gb(n: float) -> str:
    return size_text(n, 1)


def figures(card) -> str:
    """'decode 20 → 33 tok/s · prefill 310 → 350 tok/s · memory 13.2 → 10.5 GB · partial GPU → full GPU'."""
    b, a = card.before, card.after
    parts = [f"decode {tok_s(b['decode_tok_s'])} → {tok_s(a['decode_tok_s'])} tok/s",
             f"prefill {tok_s(b['prefill_tok_s'])} → {tok_s(a['prefill_tok_s'])} tok/s",
             f"memory {_gb(b['memory_bytes'])} → {_gb(a['memory_bytes'])}"]
    if b["fit"] != a["fit"]:
        parts.append(f"{FIT_BADGES.get(b['fit'], b['fit'])} → {FIT_BADGES.get(a['fit'], a['fit'])}")
    return " · ".join(parts)


def quality_line(card) -> str:
    text = f"Quality: {card.quality_effect}"
    return f"{text} (source: {card.source})" if card.source else text


# -- widgets ---------------------------------------------------------------------------------

class AdviceCardView(QFrame):
    """One card: the advice, its numbers, its quality effect, and the button."""

    use = Signal(object)  # the AdviceCard

    def __init__(self, card, baseline_settings: dict, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from rooflight.estimate.advise import RUNTIME_NOTE

        self.card = card
        self.setProperty("role", "card")
        self.setAccessibleName(f"Advice: {card.title}")
        row = QHBoxLayout(self)
        row.setContentsMargins(14, 10, 12, 10)
        row.setSpacing(12)
        col = QVBoxLayout()
        col.setSpacing(3)
        self.title = label(card.title.replace(" -> ", " → "), "heading", wrap=True)
        self.detail = label(card.detail, "muted", wrap=True)
        self.figures = label(figures(card), wrap=True)
        self.figures.setAccessibleName("before and after")
        self.quality = label(quality_line(card), "muted", wrap=True)
        self.quality.setAccessibleName("quality effect")
        for w in (self.title, self.detail, self.figures, self.quality):
            col.addWidget(w)
        row.addLayout(col, 1)
        self.button = QPushButton("Use these settings")
        self.button.setAccessibleName(f"Use these settings: {card.title}")
        changes = setting_changes(baseline_settings, card.settings)
        if card.runtime_supported:
            self.button.setProperty("primary", True)
            self.button.setToolTip("Plan with " + (", ".join(changes) if changes else "these settings"))
        else:
            self.button.setEnabled(False)
            self.button.setToolTip(f"Estimate only: this is {RUNTIME_NOTE}.")
        self.button.clicked.connect(lambda: self.use.emit(self.card))
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignTop)


PARETO_COLS = ("Quant", "KV cache", "Flash attn", "Context", "GPU layers", "Fit", "Decode", "Prefill",
               "Memory", "Quality loss")


class AdvicePanel(QWidget):
    apply_requested = Signal(object)  # AdviceCard: put its settings into the plan
    advised = Signal()  # an advice is on screen (tests, screenshots)

    def __init__(self, ctx, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.advice = None
        self.cards: list[AdviceCardView] = []
        self._subject: tuple | None = None
        self._shown_subject: tuple | None = None
        self.setAccessibleName("Optimization advice")

        col = QVBoxLayout(self)
        col.setContentsMargins(0, 8, 0, 0)
        col.setSpacing(8)
        head = QHBoxLayout()
        head.addWidget(label("Settings that buy the most", "heading"))
        self.summary = label("", "muted", wrap=True)
        self.summary.setAccessibleName("Advice summary")
        head.addWidget(self.summary, 1)
        col.addLayout(head)
        self.applied = Note("info", "")
        self.applied.hide()
        col.addWidget(self.applied)
        self.none = label("", "muted", wrap=True)
        col.addWidget(self.none)
        self.card_list = QVBoxLayout()
        self.card_list.setSpacing(8)
        col.addLayout(self.card_list)
        self.pareto_title = label("Pareto front: no other settings beat these on quality, decode, prefill and "
                                  "memory all at once", "muted", wrap=True)
        col.addWidget(self.pareto_title)
        self.pareto = readonly_table(PARETO_COLS, "Pareto front")
        self.pareto.setItemDelegateForColumn(5, FitBadgeDelegate(self.pareto))
        self.pareto.verticalHeader().setDefaultSectionSize(30)
        self.pareto.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        hh = self.pareto.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setStretchLastSection(True)
        hh.setHighlightSections(False)
        col.addWidget(self.pareto)
        col.addStretch(1)

        self._latest = LatestTask(self, ctx.runner, self._run, debounce_ms=DEBOUNCE_MS, when_visible=True)

    # -- input -----------------------------------------------------------------------------
    def set_subject(self, options: Sequence, sources: Sequence[str | None], quant: str, wishes: Wishes,
                    hardware, calibration, machine: str) -> None:
        """What to advise on: the model's quant options, the one in use, the current
        settings (n_ctx and GPU layers included) and the machine. Runs when visible."""
        self._subject = (tuple(options), tuple(sources), quant, wishes, hardware, calibration, machine)
        self._latest.request()

    def clear(self) -> None:
        self._subject = None
        self._shown_subject = None
        self._latest.cancel_task()
        self._set_cards(None)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        if self._subject is not None and self._subject != self._shown_subject:
            self._latest.schedule()

    @property
    def busy(self) -> bool:
        return self._latest.busy

    def _run(self) -> None:
        subject = self._subject
        if subject is None or subject == self._shown_subject:
            return
        options, sources, quant, wishes, hardware, calibration, _machine = subject
        self.summary.setText("Searching the settings…")
        self._latest.run(
            advise_options, options, sources, hardware, wishes, quant, calibration,
            on_done=lambda advice, s=subject: self._done(s, advice),
            on_error=self._failed, what="searching the settings for advice")

    def _done(self, subject: tuple, advice) -> None:
        self._shown_subject = subject
        self.advice = advice
        self._set_cards(advice)
        self.advised.emit()

    def _failed(self, exc: BaseException) -> None:
        self.summary.setText("")
        self.ctx.report(exc, "searching the settings for advice")

    # -- output ----------------------------------------------------------------------------
    def show_applied(self, card) -> None:
        self.applied.text.setText(f"In the plan now: {card.title}. The advice below starts from these settings.")
        self.applied.show()

    def _set_cards(self, advice) -> None:
        for view in self.cards:
            view.hide()
            view.setParent(None)
            view.deleteLater()
        self.cards = []
        if advice is None:
            self.summary.setText("")
            self.none.hide()
            self.pareto.setRowCount(0)
            return
        base = advice.baseline
        _opts, _srcs, quant, _w, _hw, _cal, machine = self._shown_subject
        cfg = base.estimate.config
        self.summary.setText(
            f"for {quant} at {ctx_label(cfg.n_ctx)} context on {machine} · {advice.searched} settings searched "
            f"in {advice.elapsed_s * 1000:.0f} ms")
        for card in advice.cards:
            view = AdviceCardView(card, base.settings)
            view.use.connect(self.apply_requested)
            self.card_list.addWidget(view)
            self.cards.append(view)
        self.none.setVisible(not advice.cards)
        self.none.setText("Nothing to gain: no setting llama.cpp offers buys at least 3% speed or 10% memory "
                          "over the current plan on this machine.")
        self._fill_pareto(advice.pareto)

    def _fill_pareto(self, pareto) -> None:
        self.pareto.setRowCount(len(pareto))
        for row, c in enumerate(pareto):
            cfg = c.estimate.config
            kld = c.quality.kld
            cells = [c.variant.quant, cfg.kv_type, "on" if cfg.flash_attn else "off", ctx_label(cfg.n_ctx),
                     str(cfg.n_gpu_layers) + (f" (+{c.n_cpu_moe} experts on CPU)" if c.n_cpu_moe else ""),
                     FIT_BADGES.get(c.fit, c.fit), tok_s(c.decode), tok_s(c.prefill), _gb(c.memory_bytes),
                     "not measured" if kld is None else f"KLD {kld:.4f}"]
            for colno, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if colno == 5:
                    item.setData(FIT_ROLE, c.fit)
                if colno == 9:
                    item.setToolTip(c.quality.text + (f" (source: {c.quality.source})" if c.quality.source else ""))
                if colno in (6, 7, 8):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.pareto.setItem(row, colno, item)
        header = self.pareto.horizontalHeader().height()
        self.pareto.setFixedHeight(header + 30 * len(pareto) + 4)
        self.pareto_title.setVisible(bool(pareto))
        self.pareto.setVisible(bool(pareto))
