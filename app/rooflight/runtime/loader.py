"""Plan a model load, and refuse one that will not fit, with numbers and alternatives.

plan_load() is the estimator's plan() for a local GGUF on this machine, plus what the
runtime must add: the llama-cpp-python build (a CPU-only wheel on a GPU machine runs on
the CPU, and the plan says so) and the calibration measured here. replan() applies a
user's override of any RunConfig field by planning again, so the estimate shown is always
the one that will run. refusal() turns a `too_large` plan into one sentence that gives the
numbers and what would fit instead, each alternative computed with plan() too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

from rooflight.errors import BadInputError, RooflightError
from rooflight.estimate import Calibration, Estimate, Wishes, plan
from rooflight.estimate.config import RunConfig
from rooflight.estimate.memory import MemoryPlan, plan_memory
from rooflight.gguf import load_model_spec
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile, RemoteMachine
from rooflight.store.calibration import machine_calibration

log = logging.getLogger(__name__)
GB = 1e9
MIN_CTX = 256  # llama.cpp pads the context to 256; less is not a useful chat


class LoadRefusedError(RooflightError):
    """The plan says the model does not fit; the message gives the numbers and alternatives."""


@dataclass(frozen=True)
class Suggestion:
    """A configuration that would fit, as plan() computed it."""

    kind: str  # "context" | "gpu_layers" | "quant"
    text: str  # how to ask for it: "--ctx 4096", "Q3_K_M (model-Q3_K_M.gguf, same folder)"
    estimate: Estimate
    wishes: Wishes
    path: str | None = None  # another local file (kind "quant"), when it is on disk
    repo_file: tuple[str, str] | None = None  # (repo, file) to download (kind "quant", catalog)


@dataclass(frozen=True)
class LoadPlan:
    path: Path
    spec: ModelSpec
    hardware: HardwareProfile
    wishes: Wishes
    estimate: Estimate  # calibrated when measurements of this machine exist
    calibration: Calibration = field(default_factory=Calibration)
    cpu_only_build: str | None = None  # why the plan runs on the CPU despite a GPU, with the fix
    live_hardware: bool = True  # hardware is this machine, detected (free memory can be re-read)

    @property
    def config(self) -> RunConfig:
        return self.estimate.config

    @property
    def fits(self) -> bool:
        return self.estimate.fit != "too_large"


def _this_machine() -> HardwareProfile:
    from rooflight.hardware import detect

    return detect()


def gpu_offload_supported() -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


def effective_hardware(hardware: HardwareProfile, *, offload: bool | None = None) -> tuple[HardwareProfile, str | None]:
    """The profile as this llama-cpp-python build can use it, and why, if it falls back to CPU.

    Hardware detection already picks the CPU backend for a CPU-only build; a profile that
    names a GPU backend the build cannot drive is planned for the CPU here, so the plan
    matches what will run.
    """
    from rooflight.hardware.gpu_build import install_hint

    if not hardware.gpus:
        return hardware, None
    offload = gpu_offload_supported() if offload is None else offload
    if hardware.backend != "cpu" and offload:
        return hardware, None
    gpu = hardware.gpus[0]
    hint = install_hint(gpu)  # the exact command for this GPU (backend, CUDA architecture)
    reason = (f"This llama-cpp-python build cannot use the {gpu.name}, so the model runs on the CPU; "
              f"install a GPU build with: {hint}")
    return replace(hardware, backend="cpu"), reason


def plan_load(
    model_path: str | Path,
    wishes: Wishes | None = None,
    *,
    hardware: HardwareProfile | None = None,
    calibration: Calibration | None = None,
    spec: ModelSpec | None = None,
    remotes: tuple[RemoteMachine, ...] = (),
) -> LoadPlan:
    """Plan loading a local GGUF on this machine (or on `hardware`, for tests), with
    layers also on the `remotes` (llama.cpp RPC servers; runtime/rpc.py), if any."""
    path = Path(model_path)
    if not path.is_file():
        raise BadInputError(f"{path} is not a file; give the path of a downloaded .gguf model.")
    live = hardware is None
    hw = _this_machine() if hardware is None else hardware
    if remotes:
        hw = replace(hw, remotes=tuple(remotes))
    hw, cpu_only = effective_hardware(hw)
    if calibration is None:
        calibration = machine_calibration(hw) if live else Calibration()
    if spec is None:
        from rooflight.gguf.projector import pair_local

        # a vision model's projector beside it is planned and loaded with it
        spec = pair_local(load_model_spec(str(path)), path)
    wishes = wishes or Wishes()
    est = plan(spec, hw, wishes, calibration=calibration)
    return LoadPlan(path, spec, hw, wishes, est, calibration, cpu_only, live)


def replan(lp: LoadPlan, **overrides) -> LoadPlan:
    """Plan again with some wishes changed (n_ctx=..., n_gpu_layers=..., n_threads=...,
    kv_type=..., flash_attn=..., n_batch=..., n_ubatch=...); the estimate updates."""
    wishes = replace(lp.wishes, **overrides)
    est = plan(lp.spec, lp.hardware, wishes, calibration=lp.calibration)
    return replace(lp, wishes=wishes, estimate=est)


# ---- free memory now --------------------------------------------------------------------


def refresh_free_memory(hardware: HardwareProfile) -> HardwareProfile:
    """The same machine with free RAM and VRAM read again: other programs' use (and models
    this process has loaded: NVML counts their VRAM, runtime/resident.py their mapped RAM)
    is what is not free."""
    from rooflight.hardware.detection import Probes, detect_gpus
    from rooflight.hardware.limits import memory_now
    from rooflight.runtime.resident import resident_mapped_bytes

    available = memory_now()[1] - resident_mapped_bytes()
    cpu = replace(hardware.cpu, ram_available_bytes=max(0, available))
    gpus = list(hardware.gpus)
    if gpus:
        try:
            fresh, _ = detect_gpus(Probes(), hardware.cpu)
        except Exception as exc:  # a probe failure must not block a load the plan allowed
            log.debug("free VRAM could not be re-read: %s", exc)
            fresh = []
        by_key = {(g.index, g.name): g for g in fresh}
        for i, g in enumerate(gpus):
            now = by_key.get((g.index, g.name))
            if g.unified_memory and g.vram_total_bytes is not None:
                gpus[i] = replace(g, vram_free_bytes=min(g.vram_total_bytes, cpu.ram_available_bytes))
            elif now is not None and now.vram_free_bytes is not None:
                gpus[i] = replace(g, vram_free_bytes=now.vram_free_bytes)
    return replace(hardware, cpu=cpu, gpus=tuple(gpus))


def memory_now(lp: LoadPlan, hardware_now: HardwareProfile) -> MemoryPlan:
    """The planned configuration against the memory free now."""
    return plan_memory(lp.spec, hardware_now, lp.config)


# ---- refusal and alternatives ----------------------------------------------------------


def _device_word(device: str) -> str:
    return "RAM" if device == "cpu" else f"GPU {device.removeprefix('gpu')} memory"


def shortfall(memory: MemoryPlan) -> str:
    """'needs 5.2 GB of RAM but 3.1 GB is available' for the devices that do not fit."""
    parts = [f"needs {d.total_bytes / GB:.1f} GB of {_device_word(d.device)} but {d.available_bytes / GB:.1f} GB is available"
             for d in memory.devices if not d.fits]
    return " and ".join(parts) or "fits"


def _fits(est: Estimate) -> bool:
    return est.fit != "too_large"


def _shorter_context(lp: LoadPlan) -> Suggestion | None:
    n_ctx = lp.config.n_ctx
    if n_ctx <= MIN_CTX:
        return None
    lo, hi = 0, (n_ctx - 1) // MIN_CTX  # candidates k * 256, k in 1..hi
    best: Estimate | None = None
    while lo < hi:  # fit is monotone in the context length
        mid = (lo + hi + 1) // 2
        est = plan(lp.spec, lp.hardware, replace(lp.wishes, n_ctx=mid * MIN_CTX), calibration=lp.calibration)
        if _fits(est):
            lo, best = mid, est
        else:
            hi = mid - 1
    if best is None:
        return None
    wishes = replace(lp.wishes, n_ctx=best.config.n_ctx)
    return Suggestion("context", f"--ctx {best.config.n_ctx}", best, wishes)


def _fewer_gpu_layers(lp: LoadPlan) -> Suggestion | None:
    if lp.wishes.n_gpu_layers == "auto" or not lp.config.n_gpu_layers:
        return None
    wishes = replace(lp.wishes, n_gpu_layers="auto")
    est = plan(lp.spec, lp.hardware, wishes, calibration=lp.calibration)
    if not _fits(est) or est.config.n_gpu_layers >= lp.config.n_gpu_layers:
        return None
    return Suggestion("gpu_layers", f"--gpu-layers {est.config.n_gpu_layers}", est,
                      replace(wishes, n_gpu_layers=est.config.n_gpu_layers))


def _sibling_specs(lp: LoadPlan) -> list[tuple[Path, ModelSpec]]:
    """Other GGUF files beside this one (a Hub snapshot folder holds one repo's files)."""
    out = []
    for other in sorted(lp.path.parent.glob("*.gguf")):
        if other.resolve() == lp.path.resolve() or "mmproj" in other.name.lower():
            continue
        try:
            spec = load_model_spec(str(other))
        except RooflightError:
            continue
        same_model = (spec.architecture == lp.spec.architecture and spec.n_layer == lp.spec.n_layer
                      and spec.n_embd == lp.spec.n_embd)
        if same_model and spec.file_bytes < lp.spec.file_bytes:
            # the same projector goes with any quant of a vision model
            out.append((other, replace(spec, projector=lp.spec.projector)))
    return out


def _catalog_specs(lp: LoadPlan) -> list[tuple[tuple[str, str], ModelSpec, str]]:
    """Smaller quants of the same model from the catalog, when this file is one of its files."""
    try:
        from rooflight.catalog.models import load_catalog
    except ImportError:
        return []
    name = lp.path.name
    try:
        catalog = load_catalog()
    except RooflightError:
        return []
    for model in catalog:
        for source in model.gguf:
            if any(Path(f).name == name for f in source.files.values()):
                out = []
                for quant in model.quants:
                    if source.files.get(quant) and Path(source.files[quant]).name == name:
                        continue
                    try:
                        spec = model.spec(quant)
                    except RooflightError:
                        continue
                    if spec.file_bytes < lp.spec.file_bytes:
                        out.append((model.file_for(quant), spec, quant))
                return out
    return []


def _smaller_quant(lp: LoadPlan) -> Suggestion | None:
    best: Suggestion | None = None
    for path, spec in _sibling_specs(lp):
        est = plan(spec, lp.hardware, lp.wishes, calibration=lp.calibration)
        if _fits(est) and (best is None or spec.file_bytes > best.estimate.spec.file_bytes):
            best = Suggestion("quant", f"{spec.file_type} ({path.name}, in the same folder)", est, lp.wishes,
                              path=str(path))
    if best is not None:
        return best
    for repo_file, spec, quant in _catalog_specs(lp):
        est = plan(spec, lp.hardware, lp.wishes, calibration=lp.calibration)
        if _fits(est) and (best is None or spec.file_bytes > best.estimate.spec.file_bytes):
            best = Suggestion("quant", f"{quant} ({repo_file[1]} from {repo_file[0]}, to download)", est,
                              lp.wishes, repo_file=repo_file)
    return best


def suggestions(lp: LoadPlan) -> list[Suggestion]:
    """What would fit instead: a shorter context, fewer GPU layers, a smaller quant."""
    found = [_shorter_context(lp), _fewer_gpu_layers(lp), _smaller_quant(lp)]
    return [s for s in found if s is not None]


def refusal(lp: LoadPlan, memory: MemoryPlan | None = None, *, since_planning: bool = False,
            force_hint: str = "force the load anyway") -> str:
    """One sentence: what the load needs, what is available, and what would fit."""
    memory = memory or lp.estimate.memory
    what = f"{lp.spec.name} ({lp.spec.file_type}) with a {lp.config.n_ctx}-token context"
    when = " now (other programs took memory since it was planned)" if since_planning else ""
    alternatives = [s.text for s in suggestions(lp)] if not since_planning else []
    fix = (f"; it would fit with {', or with '.join(alternatives)}" if alternatives
           else "; close other programs or choose a smaller model")
    return f"{what} does not fit{when}: it {shortfall(memory)}{fix} (or {force_hint})."
