"""Stress test: run a model over growing contexts, measured beside the plan, until the
plan says the next context would not fit.

For each context N (default 512, 2k, 8k, 32k ... capped at the model's trained context)
the planner chooses the configuration for N (estimate.sweep.plan_at: the context filled
with N - gen_tokens prompt tokens, then gen_tokens generated); the model is loaded with
exactly that config (runtime/measure.py: llama_cpp.Llama(**config.runtime_kwargs())), the
context filled (prefill) and a few tokens generated (decode); llama.cpp's own buffer
report is kept beside the plan's figures. A context the plan says is too large is not
loaded: the run stops before it and says where and why. Nothing here raises for a
failed point: a load llama.cpp refuses also ends the run as a stop, with the points so far.

One load per context, deliberately. llama.cpp sizes the KV cache and the compute buffers
when the context is created, from n_ctx, and the plan may choose a different offload
(n_gpu_layers) at each context; a single load at the largest context would measure the
speeds of smaller fills, but neither the memory figures of the smaller contexts nor their
planned configuration. Reloads are cheap where it matters: CPU weights are mmapped (the
page cache keeps them between loads), and small contexts load in well under a second;
the prefill of the large contexts dominates the run anyway.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rooflight.errors import RooflightError
from rooflight.estimate.plan import Wishes
from rooflight.estimate.sweep import STRESS_CONTEXTS, STRESS_GEN_TOKENS, ContextPoint, plan_at
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile
from rooflight.runtime.amx import AMX_BUFFER
from rooflight.runtime.busy import Watch
from rooflight.runtime.llama_log import ReportedBuffers
from rooflight.runtime.measure import Measured, measure
from rooflight.units import size_text

log = logging.getLogger(__name__)

GB = 1e9


def default_contexts(spec: ModelSpec) -> list[int]:
    """512, 2k, 8k, 32k ... below the trained context, then the trained context itself."""
    trained = spec.context_length or STRESS_CONTEXTS[-1]
    return [n for n in STRESS_CONTEXTS if n < trained] + [trained]


def buffer_device(name: str) -> str:
    """The plan's device for a llama.cpp buffer name: CPU, CPU_Mapped, CPU_REPACK, AMX and
    the pinned host buffers (CUDA_Host...) are RAM; CUDA0 / ROCm1 / Vulkan0 / MTL0 are gpu0..."""
    if name.upper().startswith("CPU") or name.endswith("_Host") or name == AMX_BUFFER:
        return "cpu"
    m = re.search(r"(\d+)$", name)
    return f"gpu{m.group(1) if m else 0}"


@dataclass(frozen=True)
class ReportedMemory:
    """llama.cpp's buffers summed per plan device, repacked weight copies left out."""

    devices: dict[str, dict[str, int]]  # device -> weights_bytes, kv_bytes, compute_bytes, total_bytes
    repacked_bytes: int  # weights llama.cpp copied into its repacked CPU layout (counted once)
    buffers: ReportedBuffers

    @property
    def total_bytes(self) -> int:
        return sum(d["total_bytes"] for d in self.devices.values())

    def to_dict(self) -> dict:
        b = self.buffers
        return {
            "devices": [{"device": k, **v} for k, v in sorted(self.devices.items())],
            "total_bytes": self.total_bytes,
            "repacked_bytes": self.repacked_bytes,
            "buffers": {"model": b.model, "kv": b.kv, "compute": b.compute, "output": b.output},
        }


def reported_memory(spec: ModelSpec, buffers: ReportedBuffers) -> ReportedMemory:
    """Sum llama.cpp's buffer report per device, in the plan's terms.

    Repacked tensors (CPU_REPACK) are reported on top of the mapped file that still holds
    them; the weights are counted once, as tests/test_integration_plan_vs_llama.py does.
    The output buffer (logits) goes with compute, where the plan counts it."""
    devices: dict[str, dict[str, int]] = {}

    def add(kind: str, per_buffer: dict[str, int]) -> None:
        for name, nbytes in per_buffer.items():
            d = devices.setdefault(buffer_device(name), {"weights_bytes": 0, "kv_bytes": 0, "compute_bytes": 0})
            d[kind] += nbytes

    add("weights_bytes", buffers.model)
    add("kv_bytes", buffers.kv)
    add("compute_bytes", buffers.compute)
    add("compute_bytes", buffers.output)
    repacked = 0
    for name in buffers.repacked_tensors:
        tensor = spec.tensor(name)
        if tensor is None:
            log.debug("repacked tensor %s is not in the spec", name)
        else:
            repacked += tensor.n_bytes
    if repacked and "cpu" in devices:
        devices["cpu"]["weights_bytes"] -= repacked
    for d in devices.values():
        d["total_bytes"] = d["weights_bytes"] + d["kv_bytes"] + d["compute_bytes"]
    return ReportedMemory(devices, repacked, buffers)


def _ratio(measured: float, predicted: float) -> float | None:
    return round(measured / predicted, 3) if predicted > 0 else None


@dataclass(frozen=True)
class StressPoint:
    n_ctx: int
    prompt_tokens: int
    gen_tokens: int
    planned: ContextPoint  # the plan (config, memory per device, predicted speeds)
    measured: Measured
    memory: ReportedMemory
    # share of all cores other programs used during the run (runtime/busy.py); a disturbed
    # point is stored but does not calibrate (store/calibration.Measurement.usable)
    others_cpu: float = 0.0

    @property
    def planned_bytes(self) -> int:
        """What the plan puts in llama.cpp's buffers: weights + KV + compute (the per-GPU
        runtime overhead is no llama.cpp buffer, so it is left out of the comparison)."""
        return sum(d.weights_bytes + d.kv_bytes + d.compute_bytes for d in self.planned.devices)

    def to_dict(self) -> dict:
        est = self.planned.estimate
        p, m = est.performance, self.measured
        return {
            "n_ctx": self.n_ctx,
            "prompt_tokens": self.prompt_tokens,
            "gen_tokens": self.gen_tokens,
            "fit": est.fit,
            "config": est.config.to_dict(),
            "predicted": {
                "decode_tok_s": round(p.decode_tok_s, 3),
                "prefill_tok_s": round(p.prefill_tok_s, 3),
                "decode_tok_s_range": [round(x, 3) for x in p.decode_tok_s_range],
                "prefill_tok_s_range": [round(x, 3) for x in p.prefill_tok_s_range],
                "memory": {"devices": [d.to_dict() for d in est.memory.devices],
                           "llama_buffers_bytes": self.planned_bytes},
            },
            "measured": {
                "decode_tok_s": round(m.decode_tok_s, 3),
                "prefill_tok_s": round(m.prefill_tok_s, 3),
                "time_to_first_token_s": round(m.time_to_first_token_s, 4),
                "load_s": round(m.load_s, 3),
                "memory": self.memory.to_dict(),
                # share of all cores other programs used during the run (runtime/busy.py)
                "others_cpu_share": round(self.others_cpu, 3),
            },
            "ratio": {
                "decode": _ratio(m.decode_tok_s, p.decode_tok_s),
                "prefill": _ratio(m.prefill_tok_s, p.prefill_tok_s),
                "memory": _ratio(self.memory.total_bytes, self.planned_bytes),
            },
        }


# why a run ended before its last context
STOP_REASONS = ("too_large", "beyond_trained_context", "load_failed", "cancelled")


@dataclass(frozen=True)
class StressStop:
    n_ctx: int
    reason: str  # one of STOP_REASONS
    message: str  # one sentence for the user

    def to_dict(self) -> dict:
        return {"n_ctx": self.n_ctx, "reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class StressResult:
    model: dict  # Estimate.to_dict()["model"]
    contexts: tuple[int, ...]  # what was asked for
    points: tuple[StressPoint, ...]
    stopped: StressStop | None
    stored: bool = False
    used_for_calibration: int = 0  # stored points calibration uses (Measurement.usable)

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "contexts": list(self.contexts),
            "points": [p.to_dict() for p in self.points],
            "stopped": self.stopped.to_dict() if self.stopped else None,
            "stored": self.stored,
            "used_for_calibration": self.used_for_calibration,
        }


def _size(n: int) -> str:
    return size_text(n, 2, mb_digits=1)


def _too_large_message(point: ContextPoint) -> str:
    short = [d for d in point.devices if not d.fits]
    parts = [f"{d.device} needs {_size(d.total_bytes)} but {_size(d.available_bytes)} is usable"
             for d in short]
    return (f"At {point.n_ctx} tokens the plan does not fit ({'; '.join(parts)}); "
            "stopped before loading it.")


def run_stress(
    model_path: str | Path,
    spec: ModelSpec,
    hardware: HardwareProfile,
    *,
    contexts: list[int] | None = None,
    wishes: Wishes | None = None,
    gen_tokens: int = STRESS_GEN_TOKENS,
    store=None,
    machine: str | None = None,
    on_plan: Callable[[ContextPoint], None] | None = None,
    on_point: Callable[[StressPoint], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> StressResult:
    """Measure `model_path` at each context in turn (ascending) until the plan says the
    next one does not fit, a context exceeds the trained one, llama.cpp refuses a load, or
    should_stop() says so (checked between points; a point in progress completes).

    store: a CalibrationStore; each point is added as a Measurement under `machine`
    (store.calibration.machine_key of THIS machine; pass no store when `hardware` is a
    profile of another machine: its predictions would not calibrate this one).
    on_plan(point) before each load (the GUI shows what is being measured), on_point after.
    """
    wishes = wishes or Wishes()
    # this machine (a store to keep the points): planned on its probe where it has one, as
    # estimates are, and uncorrected by earlier measurements (what a new one is compared with)
    from rooflight.estimate import Calibration
    from rooflight.store.probes import current_probe

    baseline = Calibration(probe=current_probe(hardware)) if store is not None and machine else None
    asked = sorted(set(contexts or default_contexts(spec)))
    trained = spec.context_length or None
    points: list[StressPoint] = []
    stopped: StressStop | None = None
    stored = used = 0
    model_doc: dict | None = None
    for n_ctx in asked:
        if should_stop and should_stop():
            stopped = StressStop(n_ctx, "cancelled", f"Stopped by request before {n_ctx} tokens.")
            break
        if trained and n_ctx > trained:
            stopped = StressStop(
                n_ctx, "beyond_trained_context",
                f"{n_ctx} tokens is beyond the model's trained context of {trained}; stopped there.",
            )
            break
        planned = plan_at(spec, hardware, n_ctx, wishes, gen_tokens=gen_tokens, calibration=baseline)
        model_doc = model_doc or planned.estimate.to_dict()["model"]
        if not planned.fits:
            stopped = StressStop(n_ctx, "too_large", _too_large_message(planned))
            break
        if on_plan:
            on_plan(planned)
        est = planned.estimate
        prompt, gen = planned.prompt_tokens, planned.gen_tokens
        try:
            with Watch() as watch:
                got = measure(model_path, est.config, prompt_tokens=prompt, gen_tokens=gen)
        except (RooflightError, RuntimeError, ValueError, MemoryError) as exc:
            # the plan said it fits but llama.cpp could not allocate it (other programs
            # took the memory meanwhile, or the plan is wrong): the run ends here, kept
            stopped = StressStop(n_ctx, "load_failed", f"llama.cpp failed at {n_ctx} tokens: {exc}")
            break
        assert watch.window is not None
        point = StressPoint(n_ctx, prompt, gen, planned, got, reported_memory(spec, got.buffers),
                            watch.window.others_share)
        points.append(point)
        if store is not None and machine:
            measurement = _measurement(point, spec, hardware, machine)
            store.add(measurement)
            stored += 1
            used += measurement.usable
        if on_point:
            on_point(point)
    if model_doc is None:
        model_doc = plan_at(spec, hardware, asked[0], wishes, gen_tokens=gen_tokens).estimate.to_dict()["model"]
    return StressResult(model_doc, tuple(asked), tuple(points), stopped, stored > 0, used)


def _measurement(point: StressPoint, spec: ModelSpec, hardware: HardwareProfile, machine: str):
    from rooflight.store.calibration import Measurement

    est = point.planned.estimate
    p = est.performance
    return Measurement(
        machine=machine, backend=hardware.backend, model=spec.name, quant=spec.file_type,
        n_ctx=est.config.n_ctx, n_gpu_layers=est.config.n_gpu_layers,
        prompt_tokens=point.prompt_tokens, gen_tokens=point.gen_tokens,
        predicted_decode=p.decode_tok_s, measured_decode=point.measured.decode_tok_s,
        predicted_prefill=p.prefill_tok_s, measured_prefill=point.measured.prefill_tok_s,
        n_threads=est.config.n_threads, model_bytes=spec.file_bytes,
        # against this machine's probe when it has one: the points then correct its kernels,
        # attention most of all at large contexts (estimate/kernel_calibration.py)
        basis=p.basis, kernels=p.kernels, others_cpu=point.others_cpu,
    )


@dataclass(frozen=True)
class MeasuredSpeed:
    """A measured run as stored for calibration: the context it reached and its rates."""

    n_ctx: int  # prompt_tokens + gen_tokens: the fill at the end of the run
    decode_tok_s: float
    prefill_tok_s: float
    n_gpu_layers: int


def measured_speeds(result: StressResult) -> list[MeasuredSpeed]:
    """A stress run's points as the speed plot's measured points."""
    return [MeasuredSpeed(p.prompt_tokens + p.gen_tokens, p.measured.decode_tok_s, p.measured.prefill_tok_s,
                          p.planned.n_gpu_layers) for p in result.points]


def stored_speeds(model: str, quant: str, machine: str, backend: str, path: Path | None = None) -> list[MeasuredSpeed]:
    """Every stored measurement of this model file on this machine (stress points, bench
    runs, chats), for the speed plot's measured points. Read-only: its own connection."""
    from rooflight.store.calibration import CalibrationStore

    store = CalibrationStore(path)  # creates the schema on a first run
    db_path = store.path
    store.close()
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT prompt_tokens, gen_tokens, measured_decode, measured_prefill, n_gpu_layers"
            " FROM measurements WHERE model = ? AND quant = ? AND machine = ? AND backend = ?"
            " ORDER BY id",
            (model, quant, machine, backend),
        ).fetchall()
    return [MeasuredSpeed(int(p) + int(g), float(d), float(f), int(n)) for p, g, d, f, n in rows]
