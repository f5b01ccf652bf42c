"""The model detail's 'Check with llama.cpp' row: llama.cpp's own no-alloc numbers for the
plan shown ("llama.cpp confirms: 9.4 GB on GPU 0"), or the difference when it disagrees.

On demand (a click), not on every re-plan: each check reads the model's header (remotely
for a file not on disk) and starts llama.cpp in a child process (runtime/confirm.py). A
new plan makes the last answer stale, so it is cleared; a what-if machine cannot be checked
(llama.cpp can only answer for this machine's build).
"""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget

from rooflight.ui.chat_load import is_this_machine
from rooflight.ui.latest import LatestTask
from rooflight.ui.widgets import label


def model_source(ranked, option, installed) -> str | None:
    """The model file behind a quant option: its local path when downloaded, else hf:REPO/FILE."""
    if ranked is None or option is None:
        return None
    local = installed.quants_of(ranked.model).get(option.quant) if installed is not None else None
    if local:
        return local
    repo, file = (option.repo, option.filename) if option.filename else ranked.model.file_for(option.quant)
    return f"hf:{repo}/{file}" if repo and file else None


def _confirm(source, est, hardware):
    from rooflight.runtime.confirm import confirm, describe

    return describe(confirm(source, est, hardware))


class ConfirmRow(QWidget):
    def __init__(self, ctx, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._subject: tuple | None = None  # (source, estimate, hardware)
        self._latest = LatestTask(self, ctx.runner)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.button = QPushButton("Check with llama.cpp")
        self.button.setAccessibleName("Check the plan with llama.cpp")
        self.button.clicked.connect(self.check)
        self.text = label("", "muted", wrap=True, selectable=True)
        self.text.setAccessibleName("llama.cpp's check of the plan")
        row.addWidget(self.button)
        row.addWidget(self.text, 1)

    def set_subject(self, source: str | None, est, hardware, what_if: bool) -> None:
        """The plan now shown; the last answer was for another one, so it goes."""
        self._latest.cancel()
        self.text.setText("")
        self._subject = (source, est, hardware) if source and est is not None and hardware is not None else None
        elsewhere = what_if or (hardware is not None and not is_this_machine(hardware))
        why = ("llama.cpp can only check plans for this machine, not a what-if machine or a profile" if elsewhere
               else "" if self._subject else "no model file to check")
        self.button.setEnabled(not elsewhere and self._subject is not None)
        self.button.setToolTip(why or "Ask this machine's llama.cpp what it would allocate for this plan "
                                      "(reads the header only, no download)")

    def check(self) -> None:
        if self._subject is None:
            return
        self.text.setText("Asking llama.cpp…")
        self._latest.run(_confirm, *self._subject, on_done=self.text.setText, what="checking the plan with llama.cpp")

    @property
    def busy(self) -> bool:
        return self._latest.busy
