"""Measurements taken on this machine, and the calibration they give the estimator.

Each `rooflight bench` (and, later, each chat reply) stores what was predicted and what
was measured. The estimator's constants come from other machines; the median
measured/predicted ratio of recent runs on this machine and backend corrects them,
preferring runs at the same thread count, of similar size and weight type
(estimate.calibration.Calibration).
Thread sweeps (runtime/threads.py) keep the fastest thread count per model-size band
here too. SQLite in WAL mode, one row per measurement.
"""

from __future__ import annotations

import math
import sqlite3
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from rooflight.estimate.calibration import Calibration, Ratio
from rooflight.estimate.kernel_calibration import KernelShares
from rooflight.estimate.ranges import PLAUSIBLE_RATIO, plausible_limit, plausible_ratio  # noqa: F401 (re-exported)
from rooflight.runtime import probe_defaults
from rooflight.runtime.probe_defaults import DEFAULT_BUSY_THRESHOLD
from rooflight.store.paths import data_dir
from rooflight.store.schema import apply_schema

# How many recent measurements calibrate: enough to damp noise, few enough to follow a
# driver or llama.cpp upgrade.
RECENT = 20

_SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY,
    created_at REAL NOT NULL,
    machine TEXT NOT NULL,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    quant TEXT NOT NULL,
    n_ctx INTEGER NOT NULL,
    n_gpu_layers INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    gen_tokens INTEGER NOT NULL,
    predicted_decode REAL NOT NULL,
    measured_decode REAL NOT NULL,
    predicted_prefill REAL NOT NULL,
    measured_prefill REAL NOT NULL
)
"""


# The fastest thread count per model-size band (factor-of-4 bands of file size), kept
# by runtime/threads.py sweeps; a newer sweep in the same band replaces the older one.
_THREADS_SCHEMA = """
CREATE TABLE IF NOT EXISTS thread_choices (
    machine TEXT NOT NULL,
    backend TEXT NOT NULL,
    size_band INTEGER NOT NULL,
    model TEXT NOT NULL,
    model_bytes INTEGER NOT NULL,
    n_threads INTEGER NOT NULL,
    decode_tok_s REAL NOT NULL,
    prefill_tok_s REAL NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (machine, backend, size_band)
)
"""


@dataclass(frozen=True)
class ThreadChoice:
    machine: str
    backend: str
    model: str
    model_bytes: int
    n_threads: int
    decode_tok_s: float  # measured at n_threads
    prefill_tok_s: float


def size_band(model_bytes: int) -> int:
    """Factor-of-4 size bands: 4-16 MB, 16-64 MB, ... 4-16 GB share a thread preference."""
    return round(math.log(max(model_bytes, 1), 4))


@dataclass(frozen=True)
class Measurement:
    machine: str
    backend: str
    model: str
    quant: str
    n_ctx: int
    n_gpu_layers: int
    prompt_tokens: int
    gen_tokens: int
    predicted_decode: float  # uncalibrated prediction, tok/s
    measured_decode: float
    predicted_prefill: float
    measured_prefill: float
    n_threads: int = 0  # 0: not recorded (rows from before the column existed)
    model_bytes: int = 0  # the GGUF file size; 0: not recorded
    basis: str = "table"  # what the prediction stood on: table | probe (PerfEstimate.basis)
    kernels: KernelShares | None = None  # a probe-based prediction's kernel shares (PerfEstimate.kernels)
    # share of all cores' time other programs used while it ran (runtime/busy.py Watch); on
    # few cores llama.cpp's threads stall at every barrier beside a busy process, so a run
    # past DEFAULT_BUSY_THRESHOLD measures the other program, not this machine
    others_cpu: float = 0.0

    @property
    def disturbed(self) -> bool:
        return probe_defaults.disturbed(self.others_cpu)

    @property
    def usable(self) -> bool:
        """Whether calibration will use it (plausible_limit, and taken on a quiet machine); it
        is stored either way."""
        rates = (self.predicted_decode, self.measured_decode, self.predicted_prefill, self.measured_prefill)
        return (min(rates) > 0 and not self.disturbed
                and plausible_ratio(self.measured_decode / self.predicted_decode, self.basis)
                and plausible_ratio(self.measured_prefill / self.predicted_prefill, self.basis))


class CalibrationStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or data_dir() / "calibration.sqlite3"
        self._db = sqlite3.connect(self.path)
        self._db.execute("PRAGMA journal_mode=WAL")
        # columns of databases from before these were kept
        apply_schema(self._db, _SCHEMA + ";" + _THREADS_SCHEMA, added={"measurements": [
            ("n_threads", "INTEGER NOT NULL DEFAULT 0"),
            ("model_bytes", "INTEGER NOT NULL DEFAULT 0"),
            ("basis", "TEXT NOT NULL DEFAULT 'table'"),
            ("kernel_shares", "TEXT NOT NULL DEFAULT ''"),
            ("others_cpu", "REAL NOT NULL DEFAULT 0"),
        ]})
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def add(self, m: Measurement) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO measurements (created_at, machine, backend, model, quant, n_ctx,"
                " n_gpu_layers, prompt_tokens, gen_tokens, predicted_decode, measured_decode,"
                " predicted_prefill, measured_prefill, n_threads, model_bytes, basis, kernel_shares, others_cpu)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (time.time(), m.machine, m.backend, m.model, m.quant, m.n_ctx, m.n_gpu_layers,
                 m.prompt_tokens, m.gen_tokens, m.predicted_decode, m.measured_decode,
                 m.predicted_prefill, m.measured_prefill, m.n_threads, m.model_bytes,
                 "probe" if m.basis == "probe" else "table",
                 m.kernels.to_json() if m.kernels is not None and m.basis == "probe" else "", m.others_cpu),
            )

    def calibration(self, machine: str, backend: str, probe=None) -> Calibration:
        """probe: this machine's valid probe (store/probes.py), carried along for the estimator."""
        rows = self._db.execute(
            "SELECT predicted_decode, measured_decode, predicted_prefill, measured_prefill, quant, n_threads,"
            " model_bytes, basis, kernel_shares"
            " FROM measurements WHERE machine = ? AND backend = ? AND others_cpu <= ? ORDER BY id DESC LIMIT ?",
            (machine, backend, DEFAULT_BUSY_THRESHOLD, RECENT),
        ).fetchall()
        rows = [r for r in rows
                if min(r[:4]) > 0 and plausible_ratio(r[1] / r[0], r[7]) and plausible_ratio(r[3] / r[2], r[7])]
        threads = self.thread_choices(machine, backend)
        if not rows:
            return Calibration(threads=threads, probe=probe)
        return Calibration(
            decode_factor=statistics.median(r[1] / r[0] for r in rows),
            prefill_factor=statistics.median(r[3] / r[2] for r in rows),
            samples=len(rows),
            threads=threads,
            ratios=tuple(Ratio(r[4].upper(), int(r[5]), int(r[6]), r[1] / r[0], r[3] / r[2], r[7],
                               KernelShares.from_json(r[8]) if r[7] == "probe" else None) for r in rows),
            probe=probe,
        )

    def set_thread_choice(self, c: ThreadChoice) -> None:
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO thread_choices (machine, backend, size_band, model, model_bytes,"
                " n_threads, decode_tok_s, prefill_tok_s, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (c.machine, c.backend, size_band(c.model_bytes), c.model, c.model_bytes, c.n_threads,
                 c.decode_tok_s, c.prefill_tok_s, time.time()),
            )

    def thread_choices(self, machine: str, backend: str) -> tuple[tuple[int, int], ...]:
        """(model bytes, fastest n_threads) per size band swept on this machine."""
        rows = self._db.execute(
            "SELECT model_bytes, n_threads FROM thread_choices WHERE machine = ? AND backend = ?"
            " ORDER BY model_bytes", (machine, backend),
        ).fetchall()
        return tuple((int(b), int(n)) for b, n in rows)


def machine_key(profile) -> str:
    """Identifies a machine for calibration: CPU model, RAM size, GPU models."""
    gpus = ",".join(g.name for g in profile.gpus)
    ram_gb = round(profile.cpu.ram_total_bytes / 1e9)
    return f"{profile.cpu.name}|{profile.cpu.cores}c|{ram_gb}GB|{gpus}"


def describe_machine_key(key: str) -> str:
    """A machine_key as a person reads it: "CPU, 2 cores, 25 GB RAM, GPU A, GPU B" (a key of
    another shape as it is)."""
    from rooflight.hardware.profile import plural

    parts = key.split("|")
    if len(parts) != 4 or not parts[1].endswith("c") or not parts[1][:-1].isdigit() or not parts[2].endswith("GB"):
        return key
    name, cores, ram, gpus = parts
    return ", ".join([name, plural(int(cores[:-1]), "core"), f"{ram[:-2]} GB RAM", *(g for g in gpus.split(",") if g)])


def machine_calibration(profile) -> Calibration:
    """The calibration stored for this machine (profile as detected here), with its probe
    when one was taken with this llama.cpp build, read and closed."""
    from rooflight.store.probes import current_probe

    probe = current_probe(profile)
    store = CalibrationStore()
    try:
        return store.calibration(machine_key(profile), profile.backend, probe)
    finally:
        store.close()
