"""Measurements taken on this machine, and the calibration they give the estimator.

Each `rooflight bench` (and, later, each chat reply) stores what was predicted and what
was measured. The estimator's constants come from other machines; the median
measured/predicted ratio of recent runs on this machine and backend corrects them
(estimate.perf.Calibration). SQLite in WAL mode, one row per measurement.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from rooflight.estimate.perf import Calibration
from rooflight.store.paths import data_dir

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


class CalibrationStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or data_dir() / "calibration.sqlite3"
        self._db = sqlite3.connect(self.path)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def add(self, m: Measurement) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO measurements (created_at, machine, backend, model, quant, n_ctx,"
                " n_gpu_layers, prompt_tokens, gen_tokens, predicted_decode, measured_decode,"
                " predicted_prefill, measured_prefill) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (time.time(), m.machine, m.backend, m.model, m.quant, m.n_ctx, m.n_gpu_layers,
                 m.prompt_tokens, m.gen_tokens, m.predicted_decode, m.measured_decode,
                 m.predicted_prefill, m.measured_prefill),
            )

    def calibration(self, machine: str, backend: str) -> Calibration:
        rows = self._db.execute(
            "SELECT predicted_decode, measured_decode, predicted_prefill, measured_prefill"
            " FROM measurements WHERE machine = ? AND backend = ? ORDER BY id DESC LIMIT ?",
            (machine, backend, RECENT),
        ).fetchall()
        rows = [r for r in rows if min(r) > 0]
        if not rows:
            return Calibration()
        return Calibration(
            decode_factor=statistics.median(r[1] / r[0] for r in rows),
            prefill_factor=statistics.median(r[3] / r[2] for r in rows),
            samples=len(rows),
        )


def machine_key(profile) -> str:
    """Identifies a machine for calibration: CPU model, RAM size, GPU models."""
    gpus = ",".join(g.name for g in profile.gpus)
    ram_gb = round(profile.cpu.ram_total_bytes / 1e9)
    return f"{profile.cpu.name}|{profile.cpu.cores}c|{ram_gb}GB|{gpus}"
