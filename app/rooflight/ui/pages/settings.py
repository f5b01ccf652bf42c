"""Settings: models folder, Hugging Face token, offline mode, default context, theme.

Each change is saved at once (store/settings.py writes atomically). The token goes to
huggingface_hub's own storage through a worker (login checks it with the Hub)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLayout,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from rooflight.store.settings import (
    THEMES,
    hf_token_source,
    remove_hf_token,
    save_hf_token,
    settings_path,
)
from rooflight.ui.pages.base import Page
from rooflight.ui.widgets import Card, ctx_label, label

CONTEXT_CHOICES = (2048, 4096, 8192, 16384, 32768, 65536, 131072)
TOKEN_SOURCES = {
    "login": "A token is stored (huggingface_hub's login, shared with the hf command line).",
    "environment": "The token in the HF_TOKEN environment variable is in use; it overrides a stored one.",
    None: "No token: public models only. Gated models (Llama, Gemma…) need one.",
}


COMBO_WIDTH = 260


LABEL_WIDTH = 140  # the same in every card, so the fields line up


class _Rows:
    """Label | field rows in a card, each with an optional hint under the field."""

    def __init__(self, card: Card) -> None:
        self.grid = QGridLayout()
        self.grid.setHorizontalSpacing(18)
        self.grid.setVerticalSpacing(6)
        self.grid.setColumnMinimumWidth(0, LABEL_WIDTH)
        self.grid.setColumnStretch(1, 1)
        card.body.addLayout(self.grid)

    def add(self, title: str, field: QWidget | QLayout, hint: str = "") -> None:
        row = self.grid.rowCount()
        if title:
            self.grid.addWidget(label(title), row, 0, Qt.AlignmentFlag.AlignVCenter)
        if isinstance(field, QLayout):
            self.grid.addLayout(field, row, 1)
        elif field.maximumWidth() < LABEL_WIDTH * 10:  # a narrow control stays at the left
            self.grid.addWidget(field, row, 1, Qt.AlignmentFlag.AlignLeft)
        else:
            self.grid.addWidget(field, row, 1)
        if hint:
            self.grid.addWidget(label(hint, "muted", wrap=True), row + 1, 1)
            self.grid.setRowMinimumHeight(row + 2, 6)


class SettingsPage(Page):
    key = "settings"
    title = "Settings"
    icon = "settings"

    token_changed = Signal()  # a token was saved or removed (the Hub pieces may re-check access)

    def __init__(self, ctx, parent=None) -> None:
        super().__init__(ctx, parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 18, 24, 18)
        outer.setSpacing(12)
        outer.addWidget(label("Settings", "title"))
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        body = QWidget()
        scroll.setWidget(body)
        col = QVBoxLayout(body)
        col.setContentsMargins(0, 0, 8, 0)
        col.setSpacing(14)
        outer.addWidget(scroll, 1)
        s = ctx.settings

        # models -------------------------------------------------------------------------
        models = Card("Models")
        form = _Rows(models)
        folder_row = QHBoxLayout()
        self.models_dir = QLineEdit(s.models_dir)
        self.models_dir.setPlaceholderText("None: only the Hugging Face cache")
        self.models_dir.setAccessibleName("Models folder")
        self.models_dir.editingFinished.connect(self._folder_edited)
        choose = QPushButton("Choose…")
        choose.setAccessibleName("Choose the models folder")
        choose.clicked.connect(self._choose_folder)
        folder_row.addWidget(self.models_dir, 1)
        folder_row.addWidget(choose)
        form.add("Models folder", folder_row, "GGUF files in this folder are shown as installed, "
                                              "beside the Hugging Face cache.")
        self.default_ctx = QComboBox()
        self.default_ctx.setAccessibleName("Default context")
        for c in sorted(set(CONTEXT_CHOICES) | {s.default_ctx}):
            self.default_ctx.addItem(f"{ctx_label(c)} tokens", c)
        self.default_ctx.setCurrentIndex(self.default_ctx.findData(s.default_ctx))
        self.default_ctx.currentIndexChanged.connect(
            lambda _i: ctx.update_settings(default_ctx=int(self.default_ctx.currentData())))
        self.default_ctx.setMaximumWidth(COMBO_WIDTH)
        form.add("Default context", self.default_ctx, "Rankings and plans use it, capped at each "
                                                      "model's maximum.")
        col.addWidget(models)

        # Hugging Face ----------------------------------------------------------------------
        hub = Card("Hugging Face Hub")
        form = _Rows(hub)
        self.token_status = label("", wrap=True)
        self.token_status.setAccessibleName("Token status")
        form.add("Token", self.token_status)
        token_row = QHBoxLayout()
        self.token = QLineEdit()
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("hf_…")
        self.token.setAccessibleName("Hugging Face token")
        self.token.returnPressed.connect(self._save_token)
        self.save_token = QPushButton("Save token")
        self.save_token.setAccessibleName("Save token")
        self.save_token.clicked.connect(self._save_token)
        self.remove_token = QPushButton("Remove")
        self.remove_token.setAccessibleName("Remove token")
        self.remove_token.clicked.connect(self._remove_token)
        token_row.addWidget(self.token, 1)
        token_row.addWidget(self.save_token)
        token_row.addWidget(self.remove_token)
        form.add("", token_row, "The token is kept by huggingface_hub (the file `hf auth login` "
                                "writes), never in Rooflight's settings.")
        self.offline = QCheckBox("Work offline")
        self.offline.setAccessibleName("Work offline")
        self.offline.setChecked(s.offline)
        self.offline.toggled.connect(lambda on: ctx.update_settings(offline=on))
        form.add("Network", self.offline, "Offline, nothing is fetched from the Hub (HF_HUB_OFFLINE): "
                                          "searches and headers come from the cache.")
        col.addWidget(hub)

        # appearance ------------------------------------------------------------------------
        look = Card("Appearance")
        form = _Rows(look)
        self.theme = QComboBox()
        self.theme.setAccessibleName("Theme")
        for t in THEMES:
            self.theme.addItem({"system": "Follow the system", "light": "Light", "dark": "Dark"}[t], t)
        self.theme.setCurrentIndex(self.theme.findData(s.theme))
        self.theme.currentIndexChanged.connect(lambda _i: ctx.update_settings(theme=self.theme.currentData()))
        self.theme.setMaximumWidth(COMBO_WIDTH)
        form.add("Theme", self.theme)
        col.addWidget(look)

        col.addWidget(label(f"Settings are saved in {settings_path()}.", "muted", wrap=True, selectable=True))
        col.addStretch(1)
        self._token_task = None
        self.token_source: str | None = None
        self.remove_token.setEnabled(False)
        ctx.settings_changed.connect(self._settings_changed)
        ctx.after_startup(self._refresh_token_status)

    # -- models folder ---------------------------------------------------------------------
    def _folder_edited(self) -> None:
        text = self.models_dir.text().strip()
        if text and not Path(text).expanduser().is_dir():
            self.ctx.show_error(f"The folder {text} does not exist; choose an existing folder.")
            self.models_dir.setText(self.ctx.settings.models_dir)
            return
        self.ctx.update_settings(models_dir=str(Path(text).expanduser()) if text else "")

    def _choose_folder(self) -> None:
        start = self.ctx.settings.models_dir or str(Path.home())
        folder = QFileDialog.getExistingDirectory(self, "Choose the models folder", start)
        if folder:
            self.models_dir.setText(folder)
            self._folder_edited()

    def _settings_changed(self, s) -> None:
        for widget, value in ((self.default_ctx, s.default_ctx), (self.theme, s.theme)):
            if widget.currentData() != value:
                widget.blockSignals(True)
                widget.setCurrentIndex(widget.findData(value))
                widget.blockSignals(False)
        if self.offline.isChecked() != s.offline:
            self.offline.blockSignals(True)
            self.offline.setChecked(s.offline)
            self.offline.blockSignals(False)
        if self.models_dir.text() != s.models_dir and not self.models_dir.hasFocus():
            self.models_dir.setText(s.models_dir)

    # -- token ------------------------------------------------------------------------------
    def _refresh_token_status(self) -> None:
        # huggingface_hub is imported and its token file read in a worker, not at first paint
        self.ctx.runner.run(hf_token_source, on_done=self._show_token_source, what="reading the token")

    def _show_token_source(self, source: str | None) -> None:
        self.token_source = source
        self.token_status.setText(TOKEN_SOURCES[source])
        self.remove_token.setEnabled(source == "login" and self._token_task is None)

    def _token_busy(self, busy: bool) -> None:
        self.save_token.setEnabled(not busy)
        self.token.setEnabled(not busy)
        if busy:
            self.remove_token.setEnabled(False)
            self.token_status.setText("Checking the token with the Hub…")

    def _save_token(self) -> None:
        token = self.token.text()
        if self._token_task is not None:
            return
        self._token_busy(True)
        self._token_task = self.ctx.runner.run(
            save_hf_token, token, on_done=self._token_done, on_error=self._token_failed,
            what="saving the token")

    def _remove_token(self) -> None:
        self._token_busy(True)
        self._token_task = self.ctx.runner.run(
            remove_hf_token, on_done=self._token_done, on_error=self._token_failed, what="removing the token")

    def _token_done(self, message: str) -> None:
        self._token_task = None
        self.token.clear()
        self._token_busy(False)
        self._refresh_token_status()
        self.ctx.show_info(message)
        self.token_changed.emit()

    def _token_failed(self, exc: BaseException) -> None:
        self._token_task = None
        self._token_busy(False)
        self._refresh_token_status()
        self.ctx.report(exc, "saving the token")
