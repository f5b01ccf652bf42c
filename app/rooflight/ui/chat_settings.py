"""The Chat page's side panel: system prompt and sampling settings of the chat shown.

Values go into the session right before each reply (runtime.sampling.Sampling checks
them); a stored chat brings its own settings back when it is opened.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from rooflight.runtime.sampling import Sampling
from rooflight.ui.widgets import label

SEED_RANDOM = -1


def _double(name: str, lo: float, hi: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    s = QDoubleSpinBox()
    s.setRange(lo, hi)
    s.setSingleStep(step)
    s.setDecimals(decimals)
    s.setAccessibleName(name)
    s.lineEdit().setAccessibleName(name)
    return s


def _int(name: str, lo: int, hi: int, special: str = "") -> QSpinBox:
    s = QSpinBox()
    s.setRange(lo, hi)
    s.setAccessibleName(name)
    s.lineEdit().setAccessibleName(name)
    if special:
        s.setSpecialValueText(special)
    return s


class SamplingPanel(QFrame):
    """System prompt, temperature, top-p, top-k, min-p, repeat penalty, max tokens, seed."""

    defaults_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setProperty("role", "card")
        self.setAccessibleName("Chat settings")
        col = QVBoxLayout(self)
        col.setContentsMargins(14, 12, 14, 12)
        col.setSpacing(8)
        col.addWidget(label("Chat settings", "heading"))
        col.addWidget(label("System prompt", "muted"))
        self.system = QPlainTextEdit()
        self.system.setAccessibleName("System prompt")
        self.system.setPlaceholderText("Instructions the model follows in this chat (optional)")
        self.system.setTabChangesFocus(True)
        self.system.setFixedHeight(self.fontMetrics().lineSpacing() * 4 + 16)
        col.addWidget(self.system)

        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        form.setHorizontalSpacing(10)
        form.setVerticalSpacing(6)
        self.temperature = _double("Temperature", 0.0, 5.0, 0.05)
        self.temperature.setToolTip("0: always the most likely token; higher: more varied")
        self.top_p = _double("Top-p", 0.01, 1.0, 0.05)
        self.top_k = _int("Top-k", 0, 1000, special="off")
        self.min_p = _double("Min-p", 0.0, 0.99, 0.01)
        self.repeat_penalty = _double("Repeat penalty", 0.5, 3.0, 0.05)
        self.repeat_penalty.setToolTip("1.00: off")
        self.max_tokens = _int("Max tokens", 1, 1 << 20)
        self.max_tokens.setToolTip("The most tokens one reply may have")
        self.seed = _int("Seed", SEED_RANDOM, 2**31 - 1, special="random")
        self.seed.setToolTip("random: a new seed for every reply; a number repeats a reply exactly")
        for text, w in (("Temperature", self.temperature), ("Top-p", self.top_p), ("Top-k", self.top_k),
                        ("Min-p", self.min_p), ("Repeat penalty", self.repeat_penalty),
                        ("Max tokens", self.max_tokens), ("Seed", self.seed)):
            form.addRow(label(text), w)
        col.addLayout(form)
        self.defaults = QPushButton("Model defaults")
        self.defaults.setAccessibleName("Reset sampling to the model's defaults")
        self.defaults.setToolTip("The settings the model's makers recommend (or llama.cpp's)")
        self.defaults.clicked.connect(self.defaults_requested)
        col.addWidget(self.defaults, 0, Qt.AlignmentFlag.AlignLeft)
        col.addStretch(1)
        self.set_sampling(Sampling())

    def sampling(self) -> Sampling:
        """The fields as Sampling (BadInputError if a combination is out of range)."""
        seed = self.seed.value()
        return Sampling(
            temperature=round(self.temperature.value(), 3), top_p=round(self.top_p.value(), 3),
            top_k=self.top_k.value(), min_p=round(self.min_p.value(), 3),
            repeat_penalty=round(self.repeat_penalty.value(), 3), max_tokens=self.max_tokens.value(),
            seed=None if seed == SEED_RANDOM else seed)

    def set_sampling(self, s: Sampling) -> None:
        self.temperature.setValue(s.temperature)
        self.top_p.setValue(s.top_p)
        self.top_k.setValue(s.top_k)
        self.min_p.setValue(s.min_p)
        self.repeat_penalty.setValue(s.repeat_penalty)
        self.max_tokens.setValue(s.max_tokens)
        self.seed.setValue(SEED_RANDOM if s.seed is None else s.seed)

    @property
    def system_prompt(self) -> str:
        return self.system.toPlainText().strip()

    def set_system_prompt(self, text: str) -> None:
        self.system.setPlainText(text)
