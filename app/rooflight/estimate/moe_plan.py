"""--n-cpu-moe auto: experts in RAM, or a plain layer split, whichever the estimate says is faster.

A MoE model too large for the GPU can leave whole blocks on the CPU (a layer split: their
attention and KV cache too) or keep every block on the GPU and only the routed experts of
the first N blocks in RAM (llama.cpp's --n-cpu-moe N). The second reads only the routed
experts' share from RAM per token, so it is usually much faster (Unsloth measured 13.6 vs
1.03 tok/s for the two placements of one model), but not always (a small model with few,
large experts). So both are planned with the same estimator and the faster is taken:

- experts in RAM: all blocks on the GPU (or the GPU layers the user asked for) and the
  fewest expert blocks in RAM that make every GPU fit; GPU memory only falls as N grows, so
  a binary search is exact. If even all experts in RAM do not fit, the layer split is
  searched on top of that (all experts in RAM, as many blocks on the GPU as fit).
- layer split: the planner's usual choice with no experts moved.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rooflight.estimate.memory import plan_memory
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile


@dataclass(frozen=True)
class MoeChoice:
    placement: str  # "experts_in_ram" | "layer_split" | "full_gpu"
    reason: str  # the choice in plain words, with both speeds
    experts_in_ram: dict | None  # {n_gpu_layers, n_cpu_moe, fit, decode_tok_s, prefill_tok_s}
    layer_split: dict

    def to_dict(self) -> dict:
        return {"placement": self.placement, "reason": self.reason,
                "experts_in_ram": self.experts_in_ram, "layer_split": self.layer_split}


def _summary(est) -> dict:
    return {"n_gpu_layers": est.config.n_gpu_layers, "n_cpu_moe": est.config.n_cpu_moe, "fit": est.fit,
            "decode_tok_s": round(est.performance.decode_tok_s, 3),
            "prefill_tok_s": round(est.performance.prefill_tok_s, 3)}


def _gpus_fit(mem) -> bool:
    return all(d.fits for d in mem.devices if d.device != "cpu")


def fewest_experts_in_ram(spec: ModelSpec, hardware: HardwareProfile, wishes, n_gpu_layers: int) -> int | None:
    """Fewest leading blocks whose experts must be in RAM for the GPUs to fit with
    n_gpu_layers offloaded, or None when all of them are not enough."""
    from rooflight.estimate.plan import _config

    def fits(n: int) -> bool:
        cfg = _config(spec, hardware, replace(wishes, n_cpu_moe=n), n_gpu_layers)
        return _gpus_fit(plan_memory(spec, hardware, cfg))

    lo, hi = 0, spec.n_layer
    if fits(lo):
        return 0
    if not fits(hi):
        return None
    while lo + 1 < hi:  # fits(hi), not fits(lo)
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi


def experts_in_ram_plan(spec: ModelSpec, hardware: HardwareProfile, wishes, calibration=None):
    """The experts-in-RAM candidate (wishes.n_cpu_moe is ignored)."""
    from rooflight.estimate.plan import plan

    ngl = wishes.n_gpu_layers if isinstance(wishes.n_gpu_layers, int) else spec.n_layer + 1
    ngl = min(ngl, spec.n_layer + 1)
    n = fewest_experts_in_ram(spec, hardware, wishes, ngl)
    if n is None:  # all experts in RAM and still too big: split the layers on top of that
        return plan(spec, hardware, replace(wishes, n_cpu_moe=spec.n_layer), calibration=calibration)
    return plan(spec, hardware, replace(wishes, n_cpu_moe=n, n_gpu_layers=ngl), calibration=calibration)


def choose(spec: ModelSpec, hardware: HardwareProfile, wishes, calibration=None):
    """plan() for --n-cpu-moe auto: the faster of experts in RAM and a layer split, with a
    MoeChoice saying which and why. wishes.n_cpu_moe must be 0 here."""
    from rooflight.estimate.plan import plan

    split = plan(spec, hardware, wishes, calibration=calibration)
    if split.fit == "full_gpu":
        choice = MoeChoice("full_gpu", "The whole model fits on the GPU: no experts need to stay in RAM.",
                           None, _summary(split))
        return replace(split, moe_choice=choice)
    moe = experts_in_ram_plan(spec, hardware, wishes, calibration)
    s, m = split.performance.decode_tok_s, moe.performance.decode_tok_s
    fits_rank = {"too_large": 0}
    better = (fits_rank.get(moe.fit, 1), m) > (fits_rank.get(split.fit, 1), s)
    n_blocks = spec.n_layer + 1
    moe_words = (f"experts of {moe.config.n_cpu_moe} of {spec.n_layer} layers in RAM with "
                 f"{moe.config.n_gpu_layers} of {n_blocks} layers on the GPU: {m:.1f} tok/s")
    split_words = f"{split.config.n_gpu_layers} of {n_blocks} layers on the GPU and no experts moved: {s:.1f} tok/s"
    if better:
        chosen, placement = moe, "experts_in_ram"
        reason = f"Keeping MoE experts in RAM is faster: {moe_words}, against {split_words} (a layer split)."
    else:
        chosen, placement = split, "layer_split"
        reason = (f"A layer split is as fast or faster: {split_words}, against {moe_words}.")
    choice = MoeChoice(placement, reason, _summary(moe), _summary(split))
    return replace(chosen, moe_choice=choice)
