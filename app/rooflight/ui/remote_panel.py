"""Remote machines on the This machine page: the llama.cpp RPC servers the user names,
checked in a worker (runtime/rpc.py query_servers) and listed with their devices and
memory; one that does not answer gets its sentence. The security note stands beside the
field where servers are set up (issue 20)."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QPushButton

from rooflight.ui.widgets import Card, Note, label


def check_servers(text: str) -> list[tuple[str, str]]:
    """Worker side: (endpoint, what it offers) for each server named in `text`."""
    from rooflight.commands.rpc import endpoints_of
    from rooflight.runtime import rpc

    endpoints = endpoints_of(text)
    devices = rpc.query_servers(endpoints)
    rows = []
    for ep in endpoints:
        mine = [d for d in devices if d.endpoint == ep]
        offers = ", ".join(f"device {d.index}: {d.free_bytes / 1e9:.1f} GB free of {d.total_bytes / 1e9:.1f} GB"
                           for d in mine)
        rows.append((ep, f"reachable · {offers}"))
    return rows


class RemotePanel(Card):
    def __init__(self, ctx, parent=None) -> None:
        from rooflight.runtime.rpc import SECURITY_NOTE

        super().__init__("Remote machines (llama.cpp RPC)", "Machines whose devices can take layers", parent)
        self.ctx = ctx
        self.setAccessibleName("Remote machines")
        row = QHBoxLayout()
        self.field = QLineEdit()
        self.field.setAccessibleName("RPC servers")
        self.field.setPlaceholderText("host:port, host:port (each running `rooflight rpc-server`)")
        self.check_button = QPushButton("Check")
        self.check_button.setAccessibleName("Check RPC servers")
        self.check_button.clicked.connect(self.check)
        self.field.returnPressed.connect(self.check)
        row.addWidget(self.field, 1)
        row.addWidget(self.check_button)
        self.body.addLayout(row)
        self.result = label("", "muted", wrap=True)
        self.result.setAccessibleName("RPC servers found")
        self.body.addWidget(self.result)
        self.body.addWidget(Note("warning", SECURITY_NOTE))

    def check(self) -> None:
        text = self.field.text().strip()
        if not text:
            self.result.setText("Name at least one server as host:port.")
            return
        self.check_button.setEnabled(False)
        self.result.setText("Asking the servers…")
        self.ctx.runner.run(check_servers, text, on_done=self._shown, on_error=self._failed,
                            what="checking the RPC servers")

    def _shown(self, rows) -> None:
        self.check_button.setEnabled(True)
        self.result.setText("\n".join(f"{ep}: {what}" for ep, what in rows))

    def _failed(self, exc: BaseException) -> None:
        self.check_button.setEnabled(True)
        self.result.setText(str(exc))
