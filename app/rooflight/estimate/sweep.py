"""plan() over a range of context lengths: the data behind the memory and speed plots and
the stress test's predictions.

At context N the model is planned as a stress run uses it: the context filled with a
prompt of N - gen_tokens tokens, then gen_tokens generated (stress_wishes). So "decode at
8k" is the decode rate with 8k tokens already in the cache, and the predicted line and
the stress test's measured points describe the same thing.

Pure functions over ModelSpec and HardwareProfile, like plan() itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from rooflight.estimate.calibration import Calibration
from rooflight.estimate.config import padded_ctx
from rooflight.estimate.memory import DeviceMemory
from rooflight.estimate.plan import Estimate, Wishes, plan
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile

# Tokens a stress point generates after filling its context: enough for a stable decode
# rate (llama-bench's tg default is 128), few enough to keep a long sweep short.
STRESS_GEN_TOKENS = 32

# The stress test's default contexts (issue 10: 512, 2k, 8k, 32k "up to what fits"),
# extended by 4x steps to the largest trained contexts of current models.
STRESS_CONTEXTS = (512, 2048, 8192, 32768, 131072, 524288)

MIN_CTX = 256  # llama.cpp pads contexts to 256 cells: nothing smaller is worth plotting


def stress_wishes(wishes: Wishes, n_ctx: int, gen_tokens: int = STRESS_GEN_TOKENS) -> Wishes:
    """Wishes for the point `n_ctx` of a sweep: the context filled with a prompt and a
    few generated tokens (the prompt is at least one token, for very small contexts)."""
    gen = max(1, min(gen_tokens, n_ctx - 1))
    return replace(wishes, n_ctx=n_ctx, prompt_tokens=max(1, n_ctx - gen), gen_tokens=gen)


@dataclass(frozen=True)
class ContextPoint:
    """One context length planned: memory per device and predicted speeds."""

    n_ctx: int
    estimate: Estimate
    prompt_tokens: int  # the fill the speeds were estimated for (stress_wishes)
    gen_tokens: int

    @property
    def fit(self) -> str:
        return self.estimate.fit

    @property
    def fits(self) -> bool:
        return self.estimate.memory.fits

    @property
    def n_gpu_layers(self) -> int:
        return self.estimate.config.n_gpu_layers

    @property
    def devices(self) -> tuple[DeviceMemory, ...]:
        return self.estimate.memory.devices

    @property
    def decode_tok_s(self) -> float:
        return self.estimate.performance.decode_tok_s

    @property
    def prefill_tok_s(self) -> float:
        return self.estimate.performance.prefill_tok_s

    def to_dict(self) -> dict:
        p = self.estimate.performance
        return {
            "n_ctx": self.n_ctx,
            "prompt_tokens": self.prompt_tokens,
            "gen_tokens": self.gen_tokens,
            "fit": self.fit,
            "n_gpu_layers": self.n_gpu_layers,
            "devices": [d.to_dict() for d in self.devices],
            "decode_tok_s": round(p.decode_tok_s, 3),
            "prefill_tok_s": round(p.prefill_tok_s, 3),
            "decode_tok_s_range": [round(x, 3) for x in p.decode_tok_s_range],
            "prefill_tok_s_range": [round(x, 3) for x in p.prefill_tok_s_range],
        }


def plan_at(
    spec: ModelSpec,
    hardware: HardwareProfile,
    n_ctx: int,
    wishes: Wishes | None = None,
    *,
    gen_tokens: int = STRESS_GEN_TOKENS,
    calibration: Calibration | None = None,
) -> ContextPoint:
    w = stress_wishes(wishes or Wishes(), n_ctx, gen_tokens)
    est = plan(spec, hardware, w, calibration=calibration)
    return ContextPoint(n_ctx, est, w.prompt_tokens, w.gen_tokens)


def trained_context(spec: ModelSpec) -> int | None:
    return spec.context_length or None


def context_grid(spec: ModelSpec, *, lo: int = 512, hi: int | None = None, per_doubling: int = 2) -> list[int]:
    """Contexts from lo to hi (default: the model's trained context) spaced evenly on a
    log scale, each a multiple of 256 as llama.cpp allocates them, hi itself included."""
    hi = hi or trained_context(spec) or 131072
    lo = max(MIN_CTX, min(lo, hi))
    steps = max(1, round(math.log2(hi / lo) * per_doubling))
    out: list[int] = []
    for i in range(steps + 1):
        n = padded_ctx(round(lo * (hi / lo) ** (i / steps)))
        n = min(n, hi)
        if not out or n > out[-1]:
            out.append(n)
    return out


def memory_vs_context(
    spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes | None = None,
    contexts: list[int] | None = None, *, gen_tokens: int = STRESS_GEN_TOKENS,
) -> list[ContextPoint]:
    """One planned point per context (memory per device, fit, offload), smallest first."""
    contexts = sorted(set(contexts or context_grid(spec)))
    return [plan_at(spec, hardware, n, wishes, gen_tokens=gen_tokens) for n in contexts]


def speed_vs_context(
    spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes | None = None,
    contexts: list[int] | None = None, *, gen_tokens: int = STRESS_GEN_TOKENS,
    calibration: Calibration | None = None,
) -> list[ContextPoint]:
    """Like memory_vs_context; the points' decode/prefill speeds are the predicted lines.
    A calibration (this machine's measured/predicted ratios) scales them."""
    contexts = sorted(set(contexts or context_grid(spec)))
    return [plan_at(spec, hardware, n, wishes, gen_tokens=gen_tokens, calibration=calibration) for n in contexts]


def largest_context(
    spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes | None = None, *,
    where: Callable[[ContextPoint], bool], hi: int | None = None, gen_tokens: int = STRESS_GEN_TOKENS,
) -> int | None:
    """The largest context (a multiple of 256, at most hi / the trained context) whose
    planned point satisfies `where`, or None when not even 256 tokens do. `where` must
    hold up to some context and fail beyond it; the fit states do: memory only grows with
    the context, and with "auto" offload a longer context moves layers to the CPU, never
    back (full_gpu -> partial_gpu -> cpu_only -> too_large). So a binary search over
    multiples of 256 is exact, about a dozen plans."""
    hi = hi or trained_context(spec) or 131072

    def ok(n: int) -> bool:
        return where(plan_at(spec, hardware, n, wishes, gen_tokens=gen_tokens))

    if not ok(MIN_CTX):
        return None
    if ok(hi):
        return hi
    # invariant: ok(lo_k * 256) and not ok(hi_k * 256) (hi_k * 256 >= hi)
    lo_k, hi_k = 1, -(-hi // 256)
    while lo_k + 1 < hi_k:
        mid = (lo_k + hi_k) // 2
        if ok(mid * 256):
            lo_k = mid
        else:
            hi_k = mid
    return lo_k * 256


def max_fitting_context(
    spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes | None = None, *,
    hi: int | None = None, gen_tokens: int = STRESS_GEN_TOKENS,
) -> int | None:
    """The largest context the plan says fits this machine (None: not even 256 tokens)."""
    return largest_context(spec, hardware, wishes, where=lambda p: p.fits, hi=hi, gen_tokens=gen_tokens)


def max_full_gpu_context(
    spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes | None = None, *,
    hi: int | None = None, gen_tokens: int = STRESS_GEN_TOKENS,
) -> int | None:
    """The largest context at which every layer still runs on the GPU (None: never)."""
    return largest_context(spec, hardware, wishes, where=lambda p: p.fit == "full_gpu", hi=hi, gen_tokens=gen_tokens)
