"""The "Experts in RAM" control (llama.cpp's --n-cpu-moe) for MoE models.

A combo box beside GPU layers, in the model detail and the Chat load panel: None (0),
Auto (the faster of experts in RAM and a layer split, estimate/moe_plan.py), All, or the
experts of the first N layers. Its value is exactly Wishes.n_cpu_moe; hidden for dense models.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox

TIP = ("MoE models: keep the routed experts of the first N layers in RAM while attention and the KV "
       "cache stay on the GPU (llama.cpp's --n-cpu-moe). Auto takes whichever is faster: that, or "
       "a plain split of whole layers.")
CPU_TIP = " Without a GPU every buffer is in RAM already; the overrides are still applied."


class ExpertsInRam(QComboBox):
    """Value: 0, "auto", "all" or a layer count, as Wishes.n_cpu_moe takes it."""

    value_changed = Signal(object)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Experts in RAM")
        self.setToolTip(TIP)
        self._n_layer = 0
        self.set_layers(0)
        self.currentIndexChanged.connect(lambda _i: self.value_changed.emit(self.value()))

    def set_layers(self, n_layer: int) -> None:
        """Offer 1..n_layer for a model with that many blocks (keeps the value where it can)."""
        if n_layer == self._n_layer and self.count():
            return
        keep = self.value() if self.count() else 0
        self._n_layer = n_layer
        self.blockSignals(True)
        self.clear()
        self.addItem("None", 0)
        self.addItem("Auto", "auto")
        self.addItem("All layers", "all")
        for n in range(1, n_layer + 1):
            self.addItem(f"First {n} layer{'s' if n > 1 else ''}", n)
        self.blockSignals(False)
        self.set_value(keep, emit=False)

    def value(self) -> int | str:
        data = self.currentData()
        return 0 if data is None else data

    def set_value(self, value: int | str, *, emit: bool = False) -> None:
        if isinstance(value, int) and value >= self._n_layer > 0:
            value = "all"
        i = self.findData(value)
        self.blockSignals(not emit)
        self.setCurrentIndex(i if i >= 0 else 0)
        self.blockSignals(False)

    def set_gpu(self, gpu: bool) -> None:
        self.setToolTip(TIP if gpu else TIP + CPU_TIP)
