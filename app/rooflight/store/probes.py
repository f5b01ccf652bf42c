"""Machine probes (runtime/probe.py), kept per machine and llama.cpp build.

A probe describes one machine running one llama.cpp build: a changed machine (another
CPU, RAM size or GPU: store.calibration.machine_key) or a new build (runtime/probe.py
llama_build) makes it stale, and estimates go back to the table until the next probe.
Kept beside the calibration measurements (the same SQLite file, WAL mode); the latest
probe per machine and build replaces the one before.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, replace
from pathlib import Path

from rooflight.estimate.probe import MachineProbe
from rooflight.store.paths import data_dir
from rooflight.store.schema import apply_schema

_SCHEMA = """
CREATE TABLE IF NOT EXISTS probes (
    machine TEXT NOT NULL,
    build TEXT NOT NULL,
    created_at REAL NOT NULL,
    disturbed INTEGER NOT NULL,
    probe TEXT NOT NULL,
    PRIMARY KEY (machine, build)
)
"""


@dataclass(frozen=True)
class ProbeStatus:
    probe: MachineProbe | None  # valid for this machine and build, or None
    state: str  # current | none | outdated | new_build | other_machine
    message: str  # one sentence for This machine and `rooflight probe`


class ProbeStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or data_dir() / "calibration.sqlite3"
        self._db = sqlite3.connect(self.path)
        self._db.execute("PRAGMA journal_mode=WAL")
        apply_schema(self._db, _SCHEMA)
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def put(self, probe: MachineProbe) -> None:
        with self._db:  # one transaction: the old probe or the new, never half of one
            self._db.execute(
                "INSERT OR REPLACE INTO probes (machine, build, created_at, disturbed, probe) VALUES (?,?,?,?,?)",
                (probe.machine, probe.build, probe.created_at or time.time(), int(probe.disturbed),
                 json.dumps(probe.to_dict())),
            )

    def _stored(self, machine: str, build: str) -> tuple[bool, MachineProbe | None]:
        """(whether a probe of this machine and build is stored, the probe if this version
        can use it: one from an incompatible version is measured again)."""
        row = self._db.execute("SELECT probe FROM probes WHERE machine = ? AND build = ?",
                               (machine, build)).fetchone()
        if row is None:
            return False, None
        try:
            return True, MachineProbe.from_dict(json.loads(row[0]))
        except (ValueError, KeyError, TypeError):
            return True, None

    def get(self, machine: str, build: str) -> MachineProbe | None:
        return self._stored(machine, build)[1]

    def status(self, machine: str, build: str) -> ProbeStatus:
        stored, probe = self._stored(machine, build)
        if probe is not None:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(probe.created_at))
            busy = " on a busy machine" if probe.disturbed else ""
            # (a spread past MAX_CLEAN_SPREAD is the machine's drift: the probe's notes say so)
            return ProbeStatus(probe, "current", f"Measured {when}{busy} with {build}; the runs of a figure "
                                                 f"agreed within {probe.spread:.0%}.")
        if stored:
            # stored for this machine and build, but measured the way an older version did
            return ProbeStatus(None, "outdated", "The stored probe was measured by an older version of Rooflight, "
                                                 "which derived its figures otherwise: measure this machine again.")
        same_machine = self._db.execute("SELECT build FROM probes WHERE machine = ? ORDER BY created_at DESC",
                                        (machine,)).fetchone()
        if same_machine:
            return ProbeStatus(None, "new_build", f"llama.cpp changed since the last probe ({same_machine[0]} -> "
                                                  f"{build}): measure this machine again.")
        if self._db.execute("SELECT 1 FROM probes LIMIT 1").fetchone():
            return ProbeStatus(None, "other_machine", "The stored probe is of another machine (its CPU, RAM or GPU "
                                                      "differ): measure this one.")
        return ProbeStatus(None, "none", "Not measured yet: estimates use the table constants.")


def probe_scope(profile) -> str:
    """What the probe's figures price on a machine with a GPU llama.cpp offloads to: one
    sentence for This machine and `rooflight probe`, or "" on a CPU-only machine."""
    from rooflight.estimate.placement import has_offload_devices

    if profile is None or not has_offload_devices(profile):
        return ""
    return ("The probe measures the CPU's kernels and each GPU's roofline constants: the "
            "CPU's share of every plan stands on the first, what runs on a measured GPU on the second (its range "
            "still the GPU backend's table band, until probed GPUs have been checked against measurements).")


def probe_status(profile, path: Path | None = None) -> ProbeStatus:
    """The probe state of this machine (profile as detected here) and build, with what a
    user is told about it."""
    status = _valid_status(profile, path)
    if status.probe is not None and not status.probe.gpu_half and _gpu_half_would_run(profile):
        # still valid for the CPU; its GPUs stand on the table until a probe measures them
        return replace(status, message=status.message + " It predates the probe's GPU half: measure again to "
                                                        "add each GPU's figures.")
    return status


def _valid_status(profile, path: Path | None) -> ProbeStatus:
    """The stored probe's state for this machine and build, without the advice on its GPU
    half (which asks llama.cpp whether the build offloads: current_probe need not)."""
    from rooflight.runtime.build import llama_build
    from rooflight.store.calibration import machine_key

    store = ProbeStore(path)
    try:
        status = store.status(machine_key(profile), llama_build())
    finally:
        store.close()
    if status.probe is not None and status.probe.extra_buffers != _loads_use_extra_buffers():
        # the same build now places weights otherwise (runtime/amx.py): other kernels run
        return ProbeStatus(None, "outdated", "The stored probe measured other llama.cpp CPU kernels than loads "
                                             "now use on this machine: measure it again.")
    return status


def _gpu_half_would_run(profile) -> bool:
    from rooflight.estimate.placement import has_offload_devices
    from rooflight.runtime.loader import gpu_offload_supported

    return has_offload_devices(profile) and profile.backend != "cpu" and gpu_offload_supported()


def _loads_use_extra_buffers() -> bool:
    from rooflight.runtime.amx import loads_use_extra_buffers

    return loads_use_extra_buffers()


def current_probe(profile, path: Path | None = None) -> MachineProbe | None:
    """The probe valid for this machine and llama.cpp build, or None."""
    return _valid_status(profile, path).probe
