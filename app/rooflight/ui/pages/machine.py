"""This machine: a card per GPU and one for the CPU, warnings in plain words, and the
"what if" selector (another GPU, a second GPU, more RAM) that every estimate follows."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from rooflight.estimate.tensor_rates import matmul_tflops
from rooflight.hardware import GPUInfo, HardwareProfile
from rooflight.hardware.format import build_words
from rooflight.hardware.gpu_table import shared_memory_bytes
from rooflight.hardware.profile import PEAK_BANDWIDTH_SOURCE
from rooflight.hardware.remote import RemoteDevice, remote_devices
from rooflight.ui.gpu_build_panel import add_gpu_build_action, gpu_needing_build
from rooflight.ui.pages.base import Page
from rooflight.ui.probe_panel import ProbePanel
from rooflight.ui.remote_panel import RemotePanel
from rooflight.ui.whatif import LINKS, WhatIf, link_name, short_gpu, table_gpu_names
from rooflight.ui.widgets import Card, Note, UsageBar, gb, label, make_searchable

RAM_CHOICES_GB = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512)
# below this share of free VRAM, other programs visibly shrink what models can use
LOW_FREE_SHARE = 0.75
BACKEND_WORDS = {
    "cuda": "CUDA", "rocm": "ROCm", "metal": "Metal", "vulkan": "Vulkan", "sycl": "SYCL",
    "cpu": "CPU only",
}
ISA_SHOWN = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "neon", "dotprod", "sve")
SOURCE_WORDS = {
    "detected": "detected", "detected+table": "detected, peak figures from the GPU table",
    "detected+table+RAM": "detected, bandwidth from this machine's RAM, the rest from the GPU table",
    "table": "from the GPU table", "profile": "from a profile", "profile+table": "profile and GPU table",
}




def low_vram_warnings(profile: HardwareProfile) -> list[str]:
    """Plain words when other programs hold a good part of a GPU's memory."""
    out = []
    for g in profile.gpus:
        if g.unified_memory or g.vram_free_bytes is None or not g.vram_total_bytes:
            continue
        used = g.vram_total_bytes - g.vram_free_bytes
        if g.vram_free_bytes < LOW_FREE_SHARE * g.vram_total_bytes and used > 1e9:
            out.append(
                f"Other programs are using {gb(used)} of GPU {g.index}'s memory ({short_gpu(g.name)}), "
                f"so models get only the {gb(g.vram_free_bytes)} left; close them to fit bigger models."
            )
    return out


def _figures(rows: list[tuple[str, str]]) -> QGridLayout:
    grid = QGridLayout()
    grid.setHorizontalSpacing(18)
    grid.setVerticalSpacing(4)
    for i, (name, value) in enumerate(rows):
        n = label(name, "muted")
        v = label(value, wrap=True, selectable=True)
        v.setAccessibleName(name)
        grid.addWidget(n, i, 0, Qt.AlignmentFlag.AlignTop)
        grid.addWidget(v, i, 1)
    grid.setColumnStretch(1, 1)
    return grid


def gpu_card(g: GPUInfo, profile: HardwareProfile) -> Card:
    vendor = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel", "apple": "Apple"}.get(g.vendor, g.vendor)
    card = Card(f"GPU {g.index} · {g.name}", f"{vendor} · {SOURCE_WORDS.get(g.source, g.source)}")
    card.setAccessibleName(f"GPU {g.index}: {g.name}")
    bar = UsageBar()
    total = g.vram_total_bytes or 0
    free = g.free_bytes
    if g.unified_memory:
        bar.set_usage(total, free, f"{gb(total)} of unified memory usable by the GPU · {gb(free)} free now")
    else:
        bar.set_usage(total, free)
    card.body.addWidget(label("Unified memory" if g.unified_memory else "VRAM", "muted"))
    card.body.addWidget(bar)
    rows = [
        ("Bandwidth", f"{g.bandwidth_gbs:.0f} GB/s" if g.bandwidth_gbs else "unknown"),
        ("Compute", f"{g.fp16_tflops:.1f} TFLOPS FP16" if g.fp16_tflops else "unknown"),
    ]
    if profile.fp32_gemm:  # the rate this build's prompts run at (estimate/tensor_rates.py)
        rows.append(("Prompts at", f"{matmul_tflops(g, True, profile.backend, fp32_gemm=True):.1f} TFLOPS FP32 "
                                   "(this build)"))
    if g.compute_capability:
        rows.append(("Compute capability", g.compute_capability))
    if g.sm_count:
        unit = {"nvidia": "SMs", "amd": "CUs", "intel": "Xe cores", "apple": "GPU cores"}.get(g.vendor, "cores")
        rows.append(("Cores", f"{g.sm_count} {unit}"))
    if g.pcie_gbs:
        rows.append(("PCIe", f"{g.pcie_gbs:.0f} GB/s each way"))
    rows.append(("llama.cpp backend", BACKEND_WORDS.get(profile.backend, profile.backend) + build_words(profile)))
    card.body.addLayout(_figures(rows))
    return card


def remote_card(d: RemoteDevice) -> Card:
    """A device of a remote machine that llama.cpp reaches through its RPC backend."""
    m = d.machine
    what = short_gpu(d.gpu.name) if d.gpu else f"CPU ({m.cpu.name})"
    card = Card(f"{d.name} · {what}", f"{m.name} at {m.endpoint} · llama.cpp RPC")
    card.setAccessibleName(f"Remote device {d.name}: {what}")
    bar = UsageBar()
    bar.set_usage(d.total_bytes, d.free_bytes)
    card.body.addWidget(label("VRAM" if d.gpu else "RAM", "muted"))
    card.body.addWidget(bar)
    rows = [("Network", f"{link_name(m.link_gbps)}, {m.rtt_ms:g} ms round trip")]
    if d.gpu is not None and d.gpu.bandwidth_gbs:
        rows.append(("Bandwidth", f"{d.gpu.bandwidth_gbs:.0f} GB/s"))
    rows.append(("llama.cpp backend there", BACKEND_WORDS.get(d.backend, d.backend)))
    card.body.addLayout(_figures(rows))
    return card


def remote_note(profile: HardwareProfile) -> str:
    from rooflight.runtime.rpc import SECURITY_NOTE

    n = len(profile.remotes)
    return (f"Layers also run on {n} other machine{'s' if n > 1 else ''} through llama.cpp's RPC backend "
            f"(start one with `rooflight rpc-server`); every token crosses the network. {SECURITY_NOTE}")


def cpu_card(profile: HardwareProfile) -> Card:
    c = profile.cpu
    arch = f" · {c.arch}" if c.arch else ""
    freq = f" · up to {c.max_freq_mhz / 1000:.1f} GHz" if c.max_freq_mhz else ""
    card = Card(f"CPU · {c.name}", f"{c.counts_text()}{arch}{freq}")
    card.setAccessibleName(f"CPU: {c.name}")
    bar = UsageBar()
    bar.set_usage(c.ram_total_bytes, c.ram_available_bytes)
    card.body.addWidget(label("RAM", "muted"))
    card.body.addWidget(bar)
    source = {"measured": "measured now", "cached": "measured earlier on this machine",
              "profile": "from a profile", "table": "from a table", "assumed": "assumed",
              PEAK_BANDWIDTH_SOURCE: "datasheet peak, from a profile"}
    bw = (f"{c.ram_bandwidth_gbs:.1f} GB/s ({source.get(c.ram_bandwidth_source, c.ram_bandwidth_source)})"
          if c.ram_bandwidth_gbs else "unknown")
    isa = [x for x in ISA_SHOWN if x in c.isa]
    rows = [("RAM bandwidth", bw),
            ("Instruction sets", ", ".join(isa) if isa else "none of the fast ones detected"),
            ("llama.cpp backend", BACKEND_WORDS.get(profile.backend, profile.backend) + build_words(profile)
             + ("" if profile.backend == "cpu" or not profile.gpus else " (CPU takes what does not fit)"))]
    if c.amx_weights is not None:  # a CPU with AMX: where llama.cpp keeps its weights
        from rooflight.estimate.amx_layout import LAYOUT_COST_WORDS

        rows.append(("AMX buffer", f"weights packed there ({LAYOUT_COST_WORDS}, in every estimate)"
                     if c.amx_weights else "not used (plain and repacked CPU buffers)"))
    card.body.addLayout(_figures(rows))
    return card


def read_build() -> tuple[object, str | None]:
    """Worker side: what the installed llama-cpp-python can do, and its version."""
    from importlib.metadata import PackageNotFoundError, version

    from rooflight.hardware.backend import installed_build

    try:
        v = version("llama-cpp-python")
    except PackageNotFoundError:
        v = None
    return installed_build(), v


def build_card(build, version: str | None) -> Card:
    """The llama.cpp that will run the models: this machine's install, whatever the what-if."""
    card = Card("llama.cpp", f"llama-cpp-python {version}" if version else "llama-cpp-python")
    card.setAccessibleName("llama.cpp build")
    if not build.importable:
        card.body.addWidget(label(f"Not usable: {build.error}", wrap=True, selectable=True))
        return card
    backends = sorted(build.backends)
    kind = "GPU build: " + ", ".join(BACKEND_WORDS.get(b, b) for b in backends) if backends else "CPU-only build"
    offload = {True: "yes", False: "no", None: "not reported"}[build.gpu_offload]
    libs = sorted({name.split(".so")[0].split(".dylib")[0].split(".dll")[0] for name in build.libraries})
    card.body.addLayout(_figures([("Build", kind), ("GPU offload", offload),
                                  ("Libraries", ", ".join(libs) or "none found")]))
    return card


class MachinePage(Page):
    key = "machine"
    title = "This machine"
    icon = "machine"

    def __init__(self, ctx, parent=None) -> None:
        super().__init__(ctx, parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 18, 24, 18)
        outer.setSpacing(12)
        head = QHBoxLayout()
        self.heading = label("This machine", "title")
        head.addWidget(self.heading)
        head.addStretch(1)
        outer.addLayout(head)
        self.subtitle = label("", "muted", wrap=True)
        outer.addWidget(self.subtitle)

        outer.addWidget(self._what_if_panel())
        # this machine's kernels measured (ui/probe_panel.py); estimates follow a new probe
        self.probe_panel = ProbePanel(ctx)
        self.probe_panel.calibration_changed.connect(ctx.machine.set_calibration)
        ctx.machine.changed.connect(lambda _p: self.probe_panel.refresh() if self.probe_panel.task is None else None)
        outer.addWidget(self.probe_panel)
        # llama.cpp RPC servers named by the user, checked in a worker (ui/remote_panel.py);
        # kept across re-draws of the cards, shown below them
        self.remote_panel = RemotePanel(ctx)

        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        self._content = QWidget()
        self._content_layout = QVBoxLayout(self._content)
        self._content_layout.setContentsMargins(0, 0, 0, 0)
        self._content_layout.setSpacing(12)
        scroll.setWidget(self._content)
        outer.addWidget(scroll, 1)

        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setAccessibleName("detecting")
        self.busy.setTextVisible(False)

        self._build: tuple[object, str | None] | None = None
        ctx.machine.changed.connect(self._show)
        ctx.machine.detecting_changed.connect(lambda _on: self._show(ctx.machine.profile))
        self._show(ctx.machine.profile)
        ctx.after_startup(lambda: ctx.runner.run(read_build, on_done=self._build_read,
                                                 what="reading the llama.cpp build"))

    def _build_read(self, result) -> None:
        self._build = result
        self._show(self.ctx.machine.profile)

    # -- what if ----------------------------------------------------------------------
    def _what_if_panel(self) -> QFrame:
        box = QFrame()
        box.setProperty("role", "card")
        col = QVBoxLayout(box)
        col.setContentsMargins(16, 12, 16, 12)
        col.setSpacing(8)
        col.addWidget(label("What if…", "heading"))
        col.addWidget(label("Plan a purchase: swap in another GPU, add a second one or more RAM. "
                            "Every estimate in the app follows.", "muted", wrap=True))
        row = QHBoxLayout()
        row.setSpacing(10)
        names = table_gpu_names()
        self.gpu_combo = QComboBox()
        self.gpu_combo.setAccessibleName("What-if GPU")
        self.gpu_combo.addItem("GPU as detected", None)
        self.gpu_combo.addItem("No GPU", "")
        for n in names:
            self.gpu_combo.addItem(n, n)
        self.second_combo = QComboBox()
        self.second_combo.setAccessibleName("What-if second GPU")
        self.second_combo.addItem("No second GPU", None)
        for n in names:
            self.second_combo.addItem(f"+ {n}", n)
        self.ram_combo = QComboBox()
        self.ram_combo.setAccessibleName("What-if RAM")
        self.ram_combo.addItem("RAM as detected", None)
        for g in RAM_CHOICES_GB:
            self.ram_combo.addItem(f"{g} GB RAM", g * 1_000_000_000)
        for combo in (self.gpu_combo, self.second_combo, self.ram_combo):
            combo.setMaxVisibleItems(20)
            combo.currentIndexChanged.connect(self._what_if_changed)
            row.addWidget(combo, 1)
        for combo in (self.gpu_combo, self.second_combo):
            make_searchable(combo)
        self.reset_button = QPushButton("Back to this machine")
        self.reset_button.setAccessibleName("Back to this machine")
        self.reset_button.clicked.connect(self.reset_what_if)
        row.addWidget(self.reset_button)
        col.addLayout(row)
        col.addLayout(self._remote_row(names))
        self.what_if_note = Note("info", "")
        self.what_if_note.hide()
        col.addWidget(self.what_if_note)
        return box

    def _remote_row(self, names: list[str]) -> QHBoxLayout:
        """A second PC lending its GPU over llama.cpp's RPC backend, and the link to it."""
        row = QHBoxLayout()
        row.setSpacing(10)
        self.remote_combo = QComboBox()
        self.remote_combo.setAccessibleName("What-if second PC")
        self.remote_combo.addItem("No second PC", None)
        for n in names:
            self.remote_combo.addItem(f"+ a second PC with {short_gpu(n)}", n)
        self.link_combo = QComboBox()
        self.link_combo.setAccessibleName("What-if network link")
        for gbps, name in LINKS.items():
            self.link_combo.addItem(f"over {name}", gbps)
        for combo in (self.remote_combo, self.link_combo):
            combo.setMaxVisibleItems(20)
            combo.currentIndexChanged.connect(self._what_if_changed)
            row.addWidget(combo, 1)
        make_searchable(self.remote_combo)
        row.addStretch(1)
        return row

    def set_what_if(self, what: WhatIf) -> None:
        """Select these values in the combos (and so apply them)."""
        for combo, value in ((self.gpu_combo, what.gpu), (self.second_combo, what.second_gpu),
                             (self.ram_combo, what.ram_total_bytes), (self.remote_combo, what.remote_gpu),
                             (self.link_combo, what.remote_link_gbps)):
            combo.blockSignals(True)
            i = combo.findData(value)
            combo.setCurrentIndex(max(0, i))
            combo.blockSignals(False)
        self._what_if_changed()

    def reset_what_if(self) -> None:
        self.set_what_if(WhatIf())

    def _what_if_changed(self, *_args) -> None:
        # with a GPU that shares its system's memory, "as detected" RAM is that GPU's pool
        pool = shared_memory_bytes(self.gpu_combo.currentData() or "")
        self.ram_combo.setItemText(0, f"RAM: its {pool / 1e9:.0f} GB shared pool" if pool else "RAM as detected")
        what = WhatIf(gpu=self.gpu_combo.currentData(), second_gpu=self.second_combo.currentData(),
                      ram_total_bytes=self.ram_combo.currentData(), remote_gpu=self.remote_combo.currentData(),
                      remote_link_gbps=self.link_combo.currentData())
        try:
            self.ctx.machine.set_what_if(what)
        except Exception as exc:  # a table entry the profile builder refuses
            self.ctx.report(exc, "building the what-if machine")

    # -- cards ------------------------------------------------------------------------
    def _clear(self) -> None:
        while self._content_layout.count():
            item = self._content_layout.takeAt(0)
            w = item.widget()
            if w is self.busy or w is self.remote_panel:
                w.setParent(None)
            elif w is not None:
                _discard(w)
            elif item.layout() is not None:
                _delete_layout(item.layout())

    def _show(self, profile: HardwareProfile | None) -> None:
        m = self.ctx.machine
        self._clear()
        self._cards: list[Card] = []
        self.reset_button.setEnabled(m.is_what_if)
        if profile is None:
            self.subtitle.setText("Detecting the GPUs, the CPU and how fast the RAM is…")
            self._content_layout.addWidget(self.busy)
            self._content_layout.addStretch(1)
            return
        if m.is_what_if:
            self.heading.setText("What if")
            self.subtitle.setText(f"A planned machine: {m.what_if.describe()}, with this machine's CPU.")
            self.what_if_note.text.setText(
                f"Every estimate in the app now uses this machine ({m.what_if.describe()}); "
                "“Back to this machine” returns to what was detected.")
            self.what_if_note.show()
        else:
            self.heading.setText("This machine")
            took = f" in {m.detect_seconds:.1f} s" if m.detect_seconds else ""
            self.subtitle.setText(f"Detected{took}. Estimates on every page are for this machine.")
            self.what_if_note.hide()
        warnings = list(profile.warnings)
        if not m.is_what_if:
            warnings += low_vram_warnings(profile)
        for w in warnings:
            text = w[0].upper() + w[1:]
            self._content_layout.addWidget(Note("warning", text if text.endswith(".") else text + "."))
        if not profile.gpus:
            self._content_layout.addWidget(Note(
                "info", "No GPU that llama.cpp can use was found: models run on the CPU, from RAM. "
                "Use “What if…” above to see what a GPU would change."))
        grid = QGridLayout()
        grid.setSpacing(12)
        if profile.remotes:
            self._content_layout.addWidget(Note("warning", remote_note(profile)))
        cards = ([gpu_card(g, profile) for g in profile.gpus] + [cpu_card(profile)]
                 + [remote_card(d) for d in remote_devices(profile)])
        if self._build is not None:
            cards.append(build_card(*self._build))
            needing = gpu_needing_build(m.detected, self._build[0])
            if needing is not None:  # this machine's build cannot use its GPU: offer the GPU build
                self.gpu_build_button = add_gpu_build_action(cards[-1], self, needing)
        self._cards = cards
        for i, card in enumerate(cards):
            # a lone last card spans the row rather than leave half of it empty
            span = 2 if i == len(cards) - 1 and i % 2 == 0 else 1
            grid.addWidget(card, i // 2, i % 2, 1, span, Qt.AlignmentFlag.AlignTop)
        grid.setColumnStretch(0, 1)
        grid.setColumnStretch(1, 1)
        self._content_layout.addLayout(grid)
        self._content_layout.addWidget(self.remote_panel)
        self._content_layout.addStretch(1)

    def cards(self) -> list[Card]:
        return list(self._cards)


def _discard(w: QWidget) -> None:
    # hidden and detached at once: deleteLater alone leaves it drawn until the event loop
    # it was called from runs again
    w.hide()
    w.setParent(None)
    w.deleteLater()


def _delete_layout(layout) -> None:
    while layout.count():
        item = layout.takeAt(0)
        if item.widget() is not None:
            _discard(item.widget())
        elif item.layout() is not None:
            _delete_layout(item.layout())
    layout.deleteLater()

