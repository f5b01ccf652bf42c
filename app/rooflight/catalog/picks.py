"""What a careful user would pick: usable speed per use case, headroom, and the quant.

Thresholds (decode tokens per second, the planned context):
- chat (and vision, multilingual, tiny): 10 tok/s -- faster than most people read;
- coding and reasoning: 20 tok/s -- their answers run to thousands of tokens (a 2,000-token
  reasoning trace takes 100 s at 20 tok/s, over 3 minutes at 10).

Headroom: a pick leaves at least 10% of RAM free, and on a GPU 10% of its memory beyond the
planner's margin, for the system, a browser and the other programs people keep open.

The quant: Q4_K_M to Q6_K (their KL divergence against F16 is 0.031 to 0.0055, REFERENCE.md
§2; below Q4_K_M it climbs steeply); within that band the highest that keeps at least 75%
of the band's fastest speed; a higher one (Q8_0, F16) only where it costs nothing (the same
fit and at least 95% of the speed). Never a partial-offload quant when a full-GPU one of at
least Q4_K_M runs over 1.5x faster. A model whose release format is a quant (gpt-oss: its
experts were trained in MXFP4) gets that file where it is offered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

USABLE_TOK_S = {"chat": 10.0, "vision": 10.0, "multilingual": 10.0, "tiny": 10.0, "coding": 20.0,
                "reasoning": 20.0}
HEADROOM = 0.10  # of RAM, and of each GPU's memory beyond the planner's margin
BAND = ("Q4_K_M", "Q4_K_L", "Q4_K_XL", "Q5_K_S", "Q5_K_M", "Q5_K_L", "Q5_K_XL", "Q6_K", "Q6_K_L", "Q6_K_XL")
HIGHER = ("Q8_0", "Q8_K_XL", "BF16", "F16", "F32")
BAND_SPEED_KEPT = 0.75
FREE_SPEED = 0.95
FULL_GPU_MUCH_FASTER = 1.5


def usable_tok_s(use_case: str) -> float:
    return USABLE_TOK_S.get(use_case, USABLE_TOK_S["chat"])


def headroom_ok(estimate, hardware) -> bool:
    """Every device the plan uses keeps HEADROOM of its memory free beyond the margin."""
    gpus = {f"gpu{g.index}": g for g in hardware.gpus}
    for d in estimate.memory.devices:
        if d.total_bytes <= 0:
            continue
        if d.device == "cpu":
            size = hardware.cpu.ram_total_bytes
        elif d.device in gpus:
            size = gpus[d.device].vram_total_bytes or gpus[d.device].free_bytes
        else:  # a remote (RPC) device: its own margin only
            size = 0
        if d.total_bytes > d.available_bytes - HEADROOM * size:
            return False
    return True


def _decode(o) -> float:
    return o.estimate.performance.decode_tok_s


def at_least_q4_k_m(quant: str) -> bool:
    q = quant.upper().removeprefix("UD-")
    return q in BAND or q in HIGHER or q == "MXFP4"


def choose_best(options: Sequence, *, threshold: float = 10.0, native_quant: str | None = None):
    """The option a careful user would download (module docstring). Options carry
    .quant, .quality, .estimate and .headroom."""
    fitting = [o for o in options if o.estimate.fit != "too_large"]
    if not fitting:
        return min(options, key=lambda o: o.estimate.memory.total_bytes)
    roomy = [o for o in fitting if getattr(o, "headroom", True)] or fitting
    pool = [o for o in roomy if _decode(o) >= threshold] or roomy
    full = [o for o in pool if o.estimate.fit == "full_gpu" and at_least_q4_k_m(o.quant)]
    if full:
        fastest = max(_decode(o) for o in full)
        pool = [o for o in pool if o.estimate.fit == "full_gpu" or _decode(o) * FULL_GPU_MUCH_FASTER >= fastest]
    if native_quant:
        native = [o for o in pool if o.quant.upper() == native_quant.upper()]
        if native:
            return max(native, key=_decode)
    band = [o for o in pool if o.quant.upper().removeprefix("UD-") in BAND]
    if not band:
        return max(pool, key=lambda o: (o.quality, _decode(o)))
    keep = BAND_SPEED_KEPT * max(_decode(o) for o in band)
    best = max((o for o in band if _decode(o) >= keep), key=lambda o: (o.quality, _decode(o)))
    free = [o for o in pool if o.quant.upper() in HIGHER and o.estimate.fit == best.estimate.fit
            and _decode(o) >= FREE_SPEED * _decode(best)]
    return max(free, key=lambda o: (o.quality, _decode(o))) if free else best


def tier(best, threshold: float, offered: Sequence[str] = ()) -> int:
    """2: fits with headroom at a usable speed, at Q4_K_M or better where the model offers
    such a file; 1: fits, but slow, tight or only at a lower quant (tier_reasons); 0: too large."""
    if best.estimate.fit == "too_large":
        return 0
    return 1 if tier_reasons(best, threshold, offered) else 2


class Reason(NamedTuple):
    """Why a model ranks lower than its score alone would put it: a label the ranking's rows
    show, what it means, and a detail (the successor's name)."""

    label: str
    meaning: str
    detail: str = ""

    @property
    def short(self) -> str:
        """The label with its detail: what a row of the ranking shows."""
        return f"{self.label} by {self.detail}" if self.detail else self.label

    def __str__(self) -> str:
        return f"{self.short}: {self.meaning}"


def tier_reasons(best, threshold: float, offered: Sequence[str] = ()) -> tuple[Reason, ...]:
    """Why a pick that fits is not in tier 2; () when it is in tier 2 or does not fit at all."""
    e = best.estimate
    if e.fit == "too_large":
        return ()
    out = []
    if not getattr(best, "headroom", True):
        out.append(Reason("tight", f"leaves under {HEADROOM:.0%} of memory free"))
    if e.performance.decode_tok_s < threshold:
        out.append(Reason("slow", f"under {threshold:g} tok/s"))
    if not at_least_q4_k_m(best.quant) and any(at_least_q4_k_m(q) for q in offered):
        out.append(Reason("low quant", "fits only below Q4_K_M"))
    return tuple(out)
