"""llama.cpp's own word on a plan, before the download (`estimate --confirm`).

The model's header (read locally or with range requests) is written to a sparse file of
the model's real size: header bytes, then a hole. The installed llama.cpp loads that file
with no_alloc in a child process (runtime/noalloc_worker.py) at exactly the plan's
RunConfig and reports the buffers it would allocate per device: weights, KV cache,
compute. No weight is read (there are none in the file), a hang or crash costs only the
child (it has a deadline), and the sparse file is removed whatever happens.

The answer is exact for this machine's build and backend (CUDA compute buffers included)
and a standing test of the analytic plan; where it cannot be had (no no-alloc load in this
build, another platform, a --hardware profile, a failure), Confirmation.by is None and
`reason` says why in one sentence: the plan stands on its own then.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rooflight.errors import RooflightError
from rooflight.estimate import Estimate
from rooflight.estimate.layers import layer_table
from rooflight.estimate.placement import CPU
from rooflight.gguf.header_copy import HeaderCopy, header_copies
from rooflight.hardware.device_order import pci_order_environ
from rooflight.hardware.profile import HardwareProfile
from rooflight.units import size_text

from .amx import AMX_BUFFER
from .noalloc_worker import ANSWER_PREFIX
from .stress import buffer_device

DEFAULT_TIMEOUT_S = 60.0  # a no-alloc load takes well under a second; a big vocabulary a few
AGREES_PCT = 5.0  # the plan's memory target (bench/accuracy.py): within 5% is "confirms"
GB = 1e9


@dataclass(frozen=True)
class ConfirmedDevice:
    device: str  # "cpu" | "gpu0" ... (the plan's names)
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int  # compute buffers plus the host output buffer, as the plan counts it

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes

    def to_dict(self) -> dict:
        return {"device": self.device, "weights_bytes": self.weights_bytes, "kv_bytes": self.kv_bytes,
                "compute_bytes": self.compute_bytes, "total_bytes": self.total_bytes}


@dataclass(frozen=True)
class Confirmation:
    by: str | None  # "llama.cpp", or None where it could not be asked
    devices: tuple[ConfirmedDevice, ...] = ()
    max_difference_pct: float | None = None  # largest |plan - llama.cpp| / llama.cpp per device
    planned: tuple[tuple[str, int], ...] = ()  # (device, plan's weights + KV + compute)
    reason: str | None = None
    read_bytes_during_load: int | None = None  # what the child read() while loading (Linux)
    # a tied output matrix llama.cpp's answer held twice, counted once (tied_output_counted_twice)
    tied_output_counted_once_bytes: int = 0

    @property
    def agrees(self) -> bool:
        return self.by is not None and (self.max_difference_pct or 0.0) <= AGREES_PCT

    def to_dict(self) -> dict:
        if self.by is None:
            return {"by": None, "reason": self.reason}
        d = {"by": self.by, "devices": [d.to_dict() for d in self.devices],
             "max_difference_pct": self.max_difference_pct}
        if self.tied_output_counted_once_bytes:
            d["tied_output_counted_once_bytes"] = self.tied_output_counted_once_bytes
        return d


def unavailable(reason: str) -> Confirmation:
    return Confirmation(by=None, reason=reason)


# ---- the sparse copy --------------------------------------------------------------------


def write_sparse_copy(copies: Sequence[HeaderCopy], folder: Path) -> Path:
    """Write each part as header bytes + a hole up to its size; the first part's path.

    Refuses (OSError) where the file system would store the hole as real zeros: a model
    of 40 GB must not cost 40 GB of disk for a check."""
    first = None
    for c in copies:
        path = folder / c.name
        with open(path, "wb") as f:
            f.write(c.header)
            if os.name == "nt" and shutil.disk_usage(folder).free < c.file_size:
                raise OSError("not enough free disk space for a sparse copy on this file system")
            f.truncate(c.file_size)  # NTFS keeps no hole without the sparse flag: checked above
        blocks = getattr(os.stat(path), "st_blocks", None)
        if blocks is not None and blocks * 512 > len(c.header) + (4 << 20):
            raise OSError(f"the file system of {folder} does not keep sparse files sparse")
        first = first or path
    assert first is not None
    return first


# ---- asking llama.cpp -------------------------------------------------------------------


def worker_command() -> list[str]:
    """How to start the child: this Python with the worker module, or the frozen app itself
    (packaging/rooflight_main.py dispatches the flag)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--noalloc-worker"]
    return [sys.executable, "-m", "rooflight.runtime.noalloc_worker"]


def ask_llama_cpp(model_path: Path, config: dict, timeout_s: float, *, gpu_bus_ids: Sequence[str | None] = (),
                  backend: str = "cpu") -> dict:
    """The worker's answer for one load; {"ok": False, "reason": ...} on any failure."""
    request = json.dumps({"path": str(model_path), "config": config, "gpu_bus_ids": list(gpu_bus_ids),
                          "backend": backend})
    env = pci_order_environ(os.environ)
    try:
        proc = subprocess.run(worker_command(), input=request, capture_output=True, text=True,
                              timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:  # run() has killed the child and reaped it
        return {"ok": False, "reason": f"llama.cpp did not answer within {timeout_s:g} s"}
    except OSError as exc:
        return {"ok": False, "reason": f"the llama.cpp check could not start ({exc})"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(ANSWER_PREFIX):
            try:
                return json.loads(line[len(ANSWER_PREFIX):])
            except ValueError:
                break
    tail = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    why = tail[-1][:200] if tail else f"exit status {proc.returncode}"
    return {"ok": False, "reason": f"the llama.cpp check ended without an answer ({why})"}


def _cpu_extra_buffer(name: str) -> bool:
    """A CPU buffer type llama.cpp converts weights into for its own kernels (AMX, CPU_REPACK,
    CPU_KLEIDIAI...), not a plain or mapped one."""
    return name == AMX_BUFFER or (name.startswith("CPU_") and name != "CPU_Mapped")


def tied_output_counted_twice(est: Estimate, answer: dict) -> int:
    """Bytes of a tied output matrix that llama.cpp's no-alloc answer holds twice in RAM, else 0.

    A model whose output matrix is its token embedding (tied) keeps that tensor in a plain CPU
    buffer for the input's row lookups; where one of the CPU's extra buffer types takes the
    output's matrix multiply (AMX; the repack kernels: Q4_0, Q4_K, IQ4_NL, MXFP4 with AVX2, more
    types on ARM), llama.cpp loads a second, converted copy for it (TENSOR_DUPLICATED,
    llama-model-loader.cpp). The worker loads without mmap, so its answer counts both; a chat's
    load maps the file, and the first copy is then page cache of which only the looked-up rows
    stay in use. The plan counts the tensor once, as a real load's report does
    (stress.reported_memory, which counts converted tensors once). Seen as: the answer's RAM
    weights exceed the plan's by at least 90% of the tensor, with an extra buffer in it (AMX
    pads its converted rows a few percent, so the excess can be a little more)."""
    tied = layer_table(est.spec).tied_output_bytes
    if not tied or est.memory.layer_devices[est.spec.n_layer] != CPU:
        return 0
    ram = {n: b for n, b in answer["buffers"].items() if buffer_device(n) == "cpu"}
    planned = est.memory.device(CPU)
    if planned is None or not any(_cpu_extra_buffer(n) for n in ram):
        return 0
    excess = sum(int(b["model"]) for b in ram.values()) - planned.weights_bytes
    return tied if excess >= 0.9 * tied else 0


def _devices(answer: dict, counted_twice: int = 0) -> tuple[ConfirmedDevice, ...]:
    sums: dict[str, list[int]] = {}
    for name, b in answer["buffers"].items():
        d = sums.setdefault(buffer_device(name), [0, 0, 0])
        d[0] += int(b["model"])
        d[1] += int(b["context"])
        d[2] += int(b["compute"])
    for name, nbytes in answer.get("output", {}).items():
        sums.setdefault(buffer_device(name), [0, 0, 0])[2] += int(nbytes)
    if counted_twice:
        sums[CPU][0] -= counted_twice
    order = sorted(sums, key=lambda k: (k != "cpu", len(k), k))
    return tuple(ConfirmedDevice(k, *sums[k]) for k in order)


def _difference(est: Estimate, devices: Sequence[ConfirmedDevice]) -> tuple[float, tuple[tuple[str, int], ...]]:
    planned = {d.device: d.weights_bytes + d.kv_bytes + d.compute_bytes for d in est.memory.devices}
    told = {d.device: d.total_bytes for d in devices}
    worst = 0.0
    for dev in set(planned) | set(told):
        p, t = planned.get(dev, 0), told.get(dev, 0)
        if max(p, t) < (1 << 20):  # an empty device (a few KiB of output) says nothing
            continue
        worst = max(worst, abs(p - t) / max(t, 1) * 100)
    return round(worst, 2), tuple(sorted(planned.items()))


def confirm(source: str | Path, est: Estimate, hardware: HardwareProfile | None = None, *,
            timeout_s: float = DEFAULT_TIMEOUT_S, work_dir: str | Path | None = None) -> Confirmation:
    """Ask the installed llama.cpp what the plan `est` of model `source` would allocate.

    hardware: the (detected) machine the plan is for, to put per-GPU settings on the right
    llama.cpp devices."""
    try:
        copies = header_copies(source)
    except RooflightError as exc:
        return unavailable(f"the model's header could not be read ({exc})")
    try:
        folder = Path(tempfile.mkdtemp(prefix="rooflight-confirm-", dir=work_dir))
    except OSError as exc:
        return unavailable(f"no folder for the header-only copy ({exc})")
    try:
        try:
            model_path = write_sparse_copy(copies, folder)
        except OSError as exc:
            return unavailable(f"the header-only copy could not be written ({exc})")
        answer = ask_llama_cpp(model_path, est.config.to_dict(), timeout_s,
                               gpu_bus_ids=[g.pci_bus_id for g in hardware.offload_gpus] if hardware else [],
                               backend=hardware.backend if hardware else "cpu")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not answer.get("ok"):
        reason = str(answer.get("reason") or "no reason given")
        if not answer.get("unsupported"):
            reason = f"llama.cpp could not simulate this load: {reason}"
        return unavailable(reason)
    counted_twice = tied_output_counted_twice(est, answer)
    devices = _devices(answer, counted_twice)
    worst, planned = _difference(est, devices)
    return Confirmation("llama.cpp", devices, worst, planned,
                        read_bytes_during_load=answer.get("read_bytes_during_load"),
                        tied_output_counted_once_bytes=counted_twice)


# ---- in words ---------------------------------------------------------------------------


def _size(n: int) -> str:
    return size_text(n, 1, mb_digits=0, mb_below=0.95 * GB)


def _where(device: str) -> str:
    return "RAM" if device == "cpu" else f"GPU {device.removeprefix('gpu')}"


def describe(c: Confirmation) -> str:
    """'llama.cpp confirms: 9.4 GB on GPU 0, 1.2 GB of RAM', or the difference, or why not."""
    if c.by is None:
        return f"llama.cpp could not confirm the plan: {c.reason}."
    shown = [d for d in c.devices if d.total_bytes >= (1 << 20)] or list(c.devices)
    parts = [f"{_size(d.total_bytes)} {'of' if d.device == 'cpu' else 'on'} {_where(d.device)}" for d in shown]
    if c.agrees:
        how = ("exactly the plan's figures" if not c.max_difference_pct
               else f"within {c.max_difference_pct:g}% of the plan")
        return f"llama.cpp confirms: {', '.join(parts)} ({how})."
    planned = dict(c.planned)
    diffs = []
    for d in shown:
        p = planned.get(d.device, 0)
        if d.total_bytes and abs(p - d.total_bytes) / d.total_bytes * 100 > AGREES_PCT:
            diffs.append(f"{_where(d.device)}: llama.cpp {_size(d.total_bytes)}, plan {_size(p)}")
    return f"llama.cpp differs from the plan by up to {c.max_difference_pct:g}% ({'; '.join(diffs) or ', '.join(parts)})."
