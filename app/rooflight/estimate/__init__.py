"""Memory plan and roofline performance estimate: pure functions over ModelSpec and
HardwareProfile (no llama.cpp, no Qt, no network)."""

from rooflight.estimate.calibration import Calibration
from rooflight.estimate.config import RunConfig
from rooflight.estimate.memory import DeviceMemory, MemoryPlan, plan_memory
from rooflight.estimate.perf import PerfEstimate, estimate_performance
from rooflight.estimate.plan import Estimate, Wishes, plan

__all__ = [
    "Calibration", "DeviceMemory", "Estimate", "MemoryPlan", "PerfEstimate", "RunConfig",
    "Wishes", "estimate_performance", "plan", "plan_memory",
]
