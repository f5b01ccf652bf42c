"""plan(): choose the RunConfig for a model on a machine, and estimate it.

The runtime loads exactly the returned RunConfig, so what the user is promised is what
runs (DESIGN.md). Wishes the user gave are kept as given; only "auto" values are chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from rooflight.errors import BadInputError
from rooflight.estimate import experts, moe_plan
from rooflight.estimate.calibration import Calibration
from rooflight.estimate.config import KV_TYPES, RunConfig
from rooflight.estimate.memory import MemoryPlan, plan_memory
from rooflight.estimate.perf import PerfEstimate, estimate_performance
from rooflight.estimate.placement import has_offload_devices
from rooflight.estimate.support import check_supported
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile

if TYPE_CHECKING:
    from rooflight.estimate.vision import VisionPlan

DEFAULT_CTX = 8192


@dataclass(frozen=True)
class Wishes:
    """What the user asked for; None or "auto" means: let the planner choose."""

    n_ctx: int | None = None
    n_gpu_layers: int | str = "auto"
    kv_type: str = "f16"
    flash_attn: str = "auto"  # on | off | auto
    n_threads: int | None = None
    n_batch: int = 512
    n_ubatch: int = 512
    swa_full: bool = False
    prompt_tokens: int = 512
    gen_tokens: int = 128
    n_cpu_moe: int | str = 0  # MoE experts of the first N blocks in RAM; "all"; "auto" (estimate/moe_plan.py)


@dataclass(frozen=True)
class Estimate:
    spec: ModelSpec
    config: RunConfig
    memory: MemoryPlan
    performance: PerfEstimate
    moe_choice: moe_plan.MoeChoice | None = field(default=None, compare=False)  # --n-cpu-moe auto
    vision: VisionPlan | None = None  # for a model with a projector (estimate/vision.py)

    @property
    def fit(self) -> str:
        return self.memory.fit

    def to_dict(self) -> dict:
        d = self._to_dict()
        if self.moe_choice is not None:
            d["config"]["moe_placement"] = self.moe_choice.placement
            d["moe_choice"] = self.moe_choice.to_dict()
        return d

    def _to_dict(self) -> dict:
        s = self.spec
        return {
            "model": {
                "name": s.name,
                "architecture": s.architecture,
                "params": s.params,
                "file_bytes": s.file_bytes,
                "quant": s.file_type,
                "n_layer": s.n_layer,
                "context_length": s.context_length,
                "active_params": s.active_params,
                "n_vocab": s.n_vocab,
                "sliding_window": s.sliding_window,
                "n_expert": s.n_expert,
                "n_expert_used": s.n_expert_used,
                # layers keeping a recurrent state instead of KV cells (hybrid / SSM models)
                "recurrent_layers": sum(s.recurrent_layers),
            },
            "config": self.config.to_dict(),
            "memory": self.memory.to_dict(),
            "performance": self.performance.to_dict(),
            **({"vision": self.vision.to_dict(self.spec.projector)} if self.vision else {}),
        }


def _validate(spec: ModelSpec, wishes: Wishes) -> None:
    if wishes.kv_type not in KV_TYPES:
        raise BadInputError(f"Unknown KV cache type {wishes.kv_type!r}; use one of {', '.join(KV_TYPES)}.")
    if wishes.flash_attn not in ("on", "off", "auto"):
        raise BadInputError(f"--flash-attn must be on, off or auto, not {wishes.flash_attn!r}.")
    if wishes.n_ctx is not None and not 1 <= wishes.n_ctx <= 16 * 1024 * 1024:
        raise BadInputError(f"Context length {wishes.n_ctx} is out of range (1 to 16M tokens).")
    if wishes.kv_type != "f16" and wishes.flash_attn == "off":
        # llama.cpp refuses a quantized V cache without flash attention
        raise BadInputError(f"A {wishes.kv_type} KV cache needs flash attention; use --flash-attn on or auto.")
    for name in ("n_batch", "n_ubatch", "prompt_tokens", "gen_tokens"):
        if getattr(wishes, name) < 1:
            raise BadInputError(f"{name} must be at least 1.")
    if isinstance(wishes.n_gpu_layers, int) and wishes.n_gpu_layers < 0:
        raise BadInputError("--gpu-layers must be 0 or more, or auto.")


def _config(spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes, n_gpu_layers: int) -> RunConfig:
    n_ctx = wishes.n_ctx or min(DEFAULT_CTX, spec.context_length or DEFAULT_CTX)
    # flash attention: llama.cpp's "auto" turns it on wherever the backend supports it,
    # which all current backends do; it shrinks the compute buffer and is needed for a
    # quantized V cache.
    flash = wishes.flash_attn != "off"
    n_batch = min(wishes.n_batch, n_ctx)  # what llama-cpp-python does with n_batch
    return RunConfig(
        n_ctx=n_ctx,
        n_gpu_layers=n_gpu_layers,
        n_threads=wishes.n_threads or max(1, hardware.cpu.cores or 1),
        kv_type=wishes.kv_type,
        flash_attn=flash,
        swa_full=wishes.swa_full,
        n_batch=n_batch,
        n_ubatch=min(wishes.n_ubatch, n_batch),
        n_cpu_moe=wishes.n_cpu_moe if isinstance(wishes.n_cpu_moe, int) else 0,
    )


def _gpus_fit(mem: MemoryPlan) -> bool:
    return all(d.fits for d in mem.devices if d.device != "cpu")


def choose_gpu_layers(spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes) -> int:
    """Largest offload (0..n_layer+1) whose GPU side fits, as the runtime will load it.

    GPU memory only grows with more offloaded layers, so a binary search is exact.
    """
    return _choose_gpu_layers(spec, hardware, wishes)[0]


def _choose_gpu_layers(
    spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes
) -> tuple[int, MemoryPlan | None]:
    """choose_gpu_layers, with the memory plan of the chosen count when the search made
    it (plan() then need not make it again)."""
    if not has_offload_devices(hardware):
        return 0, None
    lo, hi = 0, spec.n_layer + 1
    mem = plan_memory(spec, hardware, _config(spec, hardware, wishes, hi))
    if _gpus_fit(mem):
        return hi, mem
    lo_mem = None
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        mem = plan_memory(spec, hardware, _config(spec, hardware, wishes, mid))
        if _gpus_fit(mem):
            lo, lo_mem = mid, mem
        else:
            hi = mid
    return lo, lo_mem


def plan(
    spec: ModelSpec,
    hardware: HardwareProfile,
    wishes: Wishes | None = None,
    *,
    calibration: Calibration | None = None,
) -> Estimate:
    wishes = wishes or Wishes()
    check_supported(spec)  # an architecture we cannot size gets a sentence, not a number
    _validate(spec, wishes)
    n_cpu_moe = experts.resolve(wishes.n_cpu_moe, spec)
    if n_cpu_moe == "auto":
        if not hardware.offload_gpus:
            n_cpu_moe = 0  # everything is in RAM already
        else:  # experts in RAM or a layer split, whichever is faster
            return moe_plan.choose(spec, hardware, replace(wishes, n_cpu_moe=0), calibration)
    wishes = replace(wishes, n_cpu_moe=n_cpu_moe)
    if wishes.n_threads is None and calibration is not None:
        # a thread sweep on this machine (rooflight bench --threads-sweep) beats the
        # physical-core default it started from
        wishes = replace(wishes, n_threads=calibration.preferred_threads(spec.file_bytes))
    mem = None
    if wishes.n_gpu_layers == "auto":
        n_gpu, mem = _choose_gpu_layers(spec, hardware, wishes)
    elif isinstance(wishes.n_gpu_layers, int):
        n_gpu = min(wishes.n_gpu_layers, spec.n_layer + 1)
        if not has_offload_devices(hardware):
            n_gpu = 0
    else:
        raise BadInputError(f"--gpu-layers must be a number or auto, not {wishes.n_gpu_layers!r}.")
    cfg = _config(spec, hardware, wishes, n_gpu)
    if mem is None:  # the GPU-layer search already planned this exact config otherwise
        mem = plan_memory(spec, hardware, cfg)
    perf = estimate_performance(
        spec, hardware, cfg, mem,
        prompt_tokens=wishes.prompt_tokens, gen_tokens=wishes.gen_tokens, calibration=calibration,
    )
    vision = None
    if spec.projector is not None:
        from rooflight.estimate.vision import vision_for_plan

        vision = vision_for_plan(spec.projector, hardware, cfg, calibration.probe_for(cfg) if calibration else None)
    return Estimate(spec, cfg, mem, perf, vision=vision)
