"""This machine's probe on the This machine page: what was measured, and a "Measure this
machine" action (runtime/probe.py in a worker, with progress, time left and Cancel).

Offered once on first start (Settings.probe_offered), never run without the user's say:
it keeps both cores busy for about 30 s.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QPushButton

from rooflight.runtime.probe_defaults import BUDGET_S, LONGER_BUDGET_S
from rooflight.ui.latest import LatestTask
from rooflight.ui.widgets import Card, Note, label

TOOLTIP = ("The probe times llama.cpp's own kernels on this machine with small generated models: "
           "decode and prompt speed per weight type, attention, the fixed cost per token, what a "
           "MoE model's routed experts cost in a prompt, and how fast an image is encoded through a "
           "vision projector. "
           "Estimates then stand on these figures (basis: probe) instead of table constants, and "
           "their ranges are the band 8 of 10 measurements fall inside.")


def scope_line(profile) -> str:
    """store/probes.probe_scope, after the status sentence ("" on a CPU-only machine)."""
    from rooflight.store.probes import probe_scope

    scope = probe_scope(profile)
    return f" {scope}" if scope else ""


def read_probe_status(profile, ratios=()):
    """Worker side: the stored probe's state for this machine and llama.cpp build, and the
    card's figures (what measurements corrected in them is a least-squares fit: not on
    the GUI thread)."""
    from rooflight.store.probes import probe_status

    status = probe_status(profile)
    return status, summary(status.probe, ratios) if status.probe else ""


def run_probe(task, profile, options: dict):
    """Worker side: measure, then the machine's calibration with the new probe in it."""
    from rooflight.runtime.probe import probe_machine
    from rooflight.runtime.probe_defaults import installed_order
    from rooflight.store.calibration import machine_calibration

    # the weight types of the models on this disk first (unless the options name the types)
    options = {"weight_types": installed_order(), **options}
    run = probe_machine(profile, progress=lambda f, m, s: task.progress((f, m, s)),
                        check_cancel=task.raise_if_cancelled, **options)
    return run, machine_calibration(profile)


def summary(probe, ratios=()) -> str:
    """The weight types' figures on one line, what benches and chats corrected in them on
    the next (estimate/kernel_calibration.py; none yet: no line), the image encode, then the
    probe's notes (types not stored and why, a drift the ranges carry)."""
    from rooflight.estimate.kernel_calibration import learnt_line

    parts = []
    for k in probe.kernels:
        parts.append(f"{k.weight_type}: {k.decode_gbs:.0f} GB/s decode ({k.bound}-bound)")
    learnt = learnt_line(ratios, probe.n_threads)
    # a note on the image encode says why it was not measured: it stands for the plain line
    image_note = probe.encode is None and any(n.startswith("Image encode") for n in probe.notes)
    missing = unmeasured_line(probe)
    return "\n".join(["; ".join(parts), *([learnt] if learnt else []), experts_line(probe.expert_costs),
                      *([missing] if missing else []), *([] if image_note else [encode_line(probe.encode)]),
                      *(gpu_line(g) for g in probe.gpus), *probe.notes])


def gpu_line(g) -> str:
    """One GPU's constants from the GPU half (estimate/probe_gpu.GpuFigures), in one line."""
    def pct(x: float | None) -> str:
        return "table" if x is None else f"{x:.0%}"

    return (f"GPU {g.device[3:]} ({g.name}): decode at {g.decode_efficiency:.0%} of its bandwidth figure, "
            f"{g.layer_overhead_s * 1e6:.0f} us per layer, prompts at {pct(g.prefill_efficiency_quant)} "
            f"(quantized) / {pct(g.prefill_efficiency_float)} (F16) of its matrix rate"
            + (f", weights copied to it at {g.h2d_gbs:.1f} GB/s" if g.h2d_gbs else "")
            + (f", {g.moe_layer_overhead_s * 1e6:.0f} us more per block with experts"
               if g.moe_layer_overhead_s is not None else "")
            + (f", MoE prompts at {g.moe_expert_overhead_tokens:.0f} tokens' cost per expert"
               if g.moe_expert_overhead_tokens is not None else "")
            + "; estimates on it use these")


def unmeasured_line(probe) -> str:
    """The probe's parts with no stored figure (its budget ran out, a reduced probe, a type
    the build lacks), in one line: a model of those types is priced by the table there, and
    its range says so ("" when every part was measured)."""
    from rooflight.runtime.probe_defaults import ALL_TYPES

    measured = {k.weight_type for k in probe.kernels}
    parts = [t for t in ALL_TYPES if t not in measured]
    parts += [f"attention with flash attention {'on' if fa else 'off'}" for fa in (True, False)
              if probe.attention_for(fa) is None]
    if not parts:
        return ""
    return f"Not measured (the table prices them): {', '.join(parts)}"


def experts_line(expert_costs) -> str:
    """The probe's MoE expert costs (MachineProbe.expert_costs) in one line."""
    if not expert_costs:
        return "MoE experts in prompts: not measured (MoE prompts use the table's MUL_MAT_ID cost)"
    return ("MoE experts in prompts: " + ", ".join(f"{wt} x{cost:.1f}" for wt, cost in expert_costs)
            + " the dense kernel's time per multiply-add; MoE estimates use it")


def encode_line(encode) -> str:
    """The probe's image encode (estimate/probe.py EncodeFigure, or None) in one line."""
    if encode is None:
        return "Image encode: not measured (vision estimates count the encoder's FLOPs)"
    busy = ", measured on a busy machine" if encode.disturbed else ""
    return (f"Image encode: {encode.flops_per_s / 1e9:.0f} GFLOP/s ({encode.file_type} projector, "
            f"spread {encode.spread:.0%}{busy}); vision estimates use it")


class ProbePanel(Card):
    """`calibration_changed(Calibration)` after a stored probe: estimates follow."""

    calibration_changed = Signal(object)

    def __init__(self, ctx, parent=None) -> None:
        super().__init__("Measure this machine", "", parent)
        self.ctx = ctx
        self.setAccessibleName("Machine probe")
        self.setToolTip(TOOLTIP)
        # options for probe_machine (tests ask for a reduced probe)
        self.probe_options: dict = {}
        self.task = None
        self.last_run = None
        self.status = None
        self._status_reads = LatestTask(self, ctx.runner)  # refresh's reads of the stored probe

        self.offer = Note("info", "Measure this machine? For about 30 seconds Rooflight times llama.cpp's "
                                  "kernels here, so that every estimate fits this machine rather than "
                                  "the ones its tables came from.")
        self.offer.setAccessibleName("Probe offer")
        self.offer.hide()
        self.body.addWidget(self.offer)
        self.state = label("Reading the stored probe…", "muted", wrap=True, selectable=True)
        self.state.setAccessibleName("Probe state")
        self.body.addWidget(self.state)
        self.figures = label("", wrap=True, selectable=True)
        self.figures.setAccessibleName("Probe figures")
        self.figures.setToolTip(TOOLTIP)
        self.body.addWidget(self.figures)

        row = QHBoxLayout()
        self.measure_button = QPushButton("Measure this machine")
        self.measure_button.setAccessibleName("Measure this machine")
        self.measure_button.setToolTip(TOOLTIP)
        self.measure_button.clicked.connect(self.start)
        # shown after a probe whose budget left parts to the table: the same probe with more time
        self.longer_button = QPushButton("Measure with more time")
        self.longer_button.setAccessibleName("Measure with more time")
        self.longer_button.setToolTip(f"Measures again for up to {LONGER_BUDGET_S:.0f} s, so that the parts the "
                                      f"{BUDGET_S:.0f} s probe left to the table get figures of their own.")
        self.longer_button.clicked.connect(lambda: self.start(LONGER_BUDGET_S))
        self.longer_button.hide()
        self.not_now = QPushButton("Not now")
        self.not_now.setAccessibleName("Not now")
        self.not_now.clicked.connect(self._decline)
        self.not_now.hide()
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setAccessibleName("Probe progress")
        self.progress.hide()
        self.time_left = label("", "muted")
        self.time_left.setAccessibleName("Probe time left")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setAccessibleName("Cancel the probe")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.hide()
        for w in (self.measure_button, self.longer_button, self.not_now, self.progress, self.time_left,
                  self.cancel_button):
            row.addWidget(w)
        row.addStretch(1)
        self.body.addLayout(row)
        self.refresh()

    # -- state ------------------------------------------------------------------------
    def refresh(self) -> None:
        profile = self.ctx.machine.detected
        if profile is None:
            self.state.setText("Waiting for detection to finish…")
            self.measure_button.setEnabled(False)
            return
        self.measure_button.setEnabled(self.task is None)
        ratios = getattr(self.ctx.machine.calibration, "ratios", ())  # none for a what-if machine
        # a later refresh (new measurements) outdates an earlier one still in its worker,
        # which on a busy machine may finish last: only the latest request's answer is shown
        self._status_reads.run(read_probe_status, profile, ratios, on_done=self._status_read, what="reading the probe")

    def _status_read(self, result) -> None:
        status, figures = result
        self.status = status
        scope = scope_line(self.ctx.machine.detected)
        self.state.setText(status.message + scope)
        self.figures.setText(figures)
        self.measure_button.setText("Measure again" if status.probe else "Measure this machine")
        # a stored probe whose budget left parts to the table: offered more time, this start or a later one
        self.longer_button.setVisible(self._offers_more_time())
        if status.probe is None and not getattr(self.ctx.settings, "probe_offered", True) and self.task is None:
            # first start: offer once, and remember that it was offered
            if scope:  # a GPU machine: the GPU half measures each GPU too, on a budget of its own
                self.offer.text.setText("Measure this machine? For about 30 seconds, and up to 30 more for each GPU, "
                                        "Rooflight times llama.cpp's CPU kernels and each GPU here, so that estimates "
                                        "fit this machine rather than the ones its tables came from.")
            self.offer.show()
            self.not_now.show()
            self.ctx.update_settings(probe_offered=True)

    def _decline(self) -> None:
        self.offer.hide()
        self.not_now.hide()

    # -- the action -------------------------------------------------------------------
    def start(self, budget_s: float | None = None) -> None:
        """Measure, within the probe's own budget or, asked for, budget_s."""
        profile = self.ctx.machine.detected
        if profile is None or self.task is not None:
            return
        self._decline()
        self.measure_button.setEnabled(False)
        self.longer_button.hide()
        self.progress.setValue(0)
        self.progress.show()
        self.cancel_button.show()
        self.cancel_button.setEnabled(True)
        options = dict(self.probe_options, **({"budget_s": budget_s} if budget_s else {}))
        self.time_left.setText(f"about {options.get('budget_s', BUDGET_S):.0f} s left")
        self.state.setText("Measuring: keep other programs quiet, they slow the measurements down.")
        self.task = self.ctx.runner.run(
            run_probe, profile, options, with_task=True, on_progress=self._progress,
            on_done=self._done, on_error=self._failed, on_cancelled=self._cancelled, what="measuring this machine")

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.cancel_button.setEnabled(False)
            self.time_left.setText("stopping…")

    def _progress(self, value) -> None:
        if value is None:
            return
        fraction, message, left = value
        self.progress.setValue(int(round(fraction * 100)))
        self.progress.setFormat(message)
        self.time_left.setText(f"about {left:.0f} s left")

    def _idle(self) -> None:
        self.task = None
        self.progress.hide()
        self.cancel_button.hide()
        self.time_left.setText("")
        self.measure_button.setEnabled(True)
        self.longer_button.setVisible(self._offers_more_time())

    def _offers_more_time(self) -> bool:
        """Whether the stored probe's budget left parts to the table (MachineProbe.out_of_time)."""
        probe = self.status.probe if self.status is not None else None
        return bool(probe and probe.out_of_time) and self.task is None

    def _done(self, result) -> None:
        self._idle()  # "Measure with more time" as the stored probe says; refresh() below re-reads it
        run, calibration = result
        self.last_run = run
        if run.stored:
            self.calibration_changed.emit(calibration)
            self.refresh()
        else:
            self.state.setText(run.refused or "Not stored.")

    def _failed(self, exc) -> None:
        from rooflight.ui.tasks import error_sentence

        self._idle()
        self.state.setText(error_sentence(exc, "measuring this machine"))

    def _cancelled(self) -> None:
        self._idle()
        self.state.setText("Cancelled: nothing was stored. Estimates stay as they were.")
