"""The advisor's MoE candidates: every block offloaded with the routed experts of the first
N blocks kept in RAM (llama.cpp's --n-cpu-moe; estimate/experts.py prices them,
estimate/moe_plan.py finds the fewest that fit). Priced by plan() itself, as
`estimate --n-cpu-moe N` is."""

from __future__ import annotations

from dataclasses import replace

from rooflight.estimate.calibration import Calibration
from rooflight.estimate.moe_plan import fewest_experts_in_ram
from rooflight.estimate.plan import Estimate, Wishes, plan
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile


def plan_experts_on_cpu(
    spec: ModelSpec,
    hardware: HardwareProfile,
    wishes: Wishes,
    n_cpu_moe: int,
    *,
    calibration: Calibration | None = None,
) -> Estimate:
    """Every block offloaded, the experts of the first n_cpu_moe blocks in RAM: plan() with
    RunConfig.n_cpu_moe, the same estimator (and the same load) as `estimate --n-cpu-moe N`."""
    return plan(spec, hardware, replace(wishes, n_gpu_layers=spec.n_layer + 1, n_cpu_moe=n_cpu_moe),
                calibration=calibration)


def min_experts_on_cpu(spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes) -> int | None:
    """Fewest leading blocks whose experts must stay in RAM for the rest of the model to
    fit on the GPU(s) with every block offloaded, or None when all of them are not enough."""
    return fewest_experts_in_ram(spec, hardware, replace(wishes, n_cpu_moe=0), spec.n_layer + 1)
