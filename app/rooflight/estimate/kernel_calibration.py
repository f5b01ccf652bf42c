"""Measurements correct a probe-based estimate per kernel, not per file.

With a probe (estimate/probe.py) a CPU estimate is a sum of measured kernel figures: each
weight type's seconds per weight, plus attention and fixed costs. What a bench or a chat
then finds wrong is a kernel's figure, so each measurement is kept with how its
prediction's kernel time split over the kernels (its shares), and the corrections are the
per-kernel factors that explain the measured / predicted ratios: log ratio of a
measurement = sum over kernels of share x log correction, solved by least squares, and
where the measurements cannot tell kernels apart (one measurement, many kernels), the
smallest corrections that explain them (minimum norm). So one bench of a Q4_K_M file
(about 80% Q4_K, 20% Q6_K) reproduces its own measurement, puts most of the discrepancy on
Q4_K, and corrects a Q6_K model only a little; a bench of a Q8_0 model never touches an F16
one; a Gemma Q4_K_M file, whose blocks are mostly Q5_0 (priced by the table in decode),
spreads its discrepancy over those and its Q8_0 output layer, not over Q4_K alone.

Work the probe has no figure for is priced by the table; it counts as a kernel of its own,
"TYPE (table)", so a discrepancy there is not laid on the probe's kernels. The probe's
attention and fixed-cost figures count as kernels too ("attention", "fixed"): a chat turn
after a long conversation or a stress point at a large context, mostly attention, then
corrects attention, and measurements at several contexts tell it apart from the weights.
Shares are of the probe-priced time of a token (decode) or a prompt, normalised. An
estimate's factor is exp(sum of its shares x log corrections); its coverage, how much of
its kernel time the measurements speak for, counts each kernel's share up to the total
share the measurements gave that kernel (a benched model covers itself fully; a model all
in a kernel that was 4% of one bench is 4% covered).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# The probe's other figures, corrected like its weight kernels: attention over the cache
# (a long chat or a stress run at a large context is mostly attention) and the fixed costs
# per token and layer (most of a tiny model's time).
ATTENTION_KERNEL = "attention"
FIXED_KERNEL = "fixed"

# An estimate counts as calibrated when measured kernels cover this much of its kernel time.
MIN_COVERAGE = 0.5

Shares = tuple[tuple[str, float], ...]  # (kernel, share of the predicted kernel time), sorted


def tally(seconds_by_kernel: dict[str, float] | None, kernel: str, seconds: float) -> None:
    """Add to a kernel's seconds where the caller gathers them (None: it does not)."""
    if seconds_by_kernel is not None:
        seconds_by_kernel[kernel] = seconds_by_kernel.get(kernel, 0.0) + seconds


def shares_of(seconds: Mapping[str, float]) -> Shares:
    """Normalised shares from seconds per kernel (empty when there are none)."""
    total = sum(s for s in seconds.values() if s > 0)
    if total <= 0:
        return ()
    return tuple(sorted((k, s / total) for k, s in seconds.items() if s > 0))


@dataclass(frozen=True)
class KernelShares:
    """How a probe-based prediction's kernel time splits over the probe's kernels."""

    decode: Shares = ()
    prefill: Shares = ()

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {"decode": dict(self.decode), "prefill": dict(self.prefill)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_json(text: str | None) -> KernelShares | None:
        """None for an empty or unreadable column (rows stored before kernels were kept)."""
        if not text:
            return None
        try:
            d = json.loads(text)
            return KernelShares(shares_of({str(k): float(v) for k, v in d.get("decode", {}).items()}),
                                shares_of({str(k): float(v) for k, v in d.get("prefill", {}).items()}))
        except (ValueError, TypeError, AttributeError):
            return None


@dataclass(frozen=True)
class Corrections:
    """Per-kernel log corrections and how much measurement stands behind each."""

    log_factor: Mapping[str, float]
    evidence: Mapping[str, float]  # the sum of the kernel's shares over the measurements


def corrections(measured: Iterable[tuple[Shares, float]]) -> Corrections:
    """Least-squares (minimum-norm) per-kernel corrections from (shares of a prediction,
    measured / predicted) pairs."""
    rows = [(dict(shares), math.log(ratio)) for shares, ratio in measured if shares and ratio > 0]
    kernels = sorted({k for shares, _ in rows for k in shares})
    if not kernels:
        return Corrections({}, {})
    import numpy as np  # here, not above: ranking without measurements must not load numpy (startup)

    a = np.array([[shares.get(k, 0.0) for k in kernels] for shares, _ in rows])
    x = np.linalg.lstsq(a, np.array([y for _, y in rows]), rcond=None)[0]
    return Corrections(dict(zip(kernels, map(float, x), strict=True)),
                       dict(zip(kernels, map(float, a.sum(axis=0)), strict=True)))


def factor(target: Shares, fitted: Corrections) -> tuple[float, float]:
    """(tokens/s factor, coverage) for an estimate with these shares."""
    if not target:
        return 1.0, 0.0
    log_f = sum(share * fitted.log_factor.get(kernel, 0.0) for kernel, share in target)
    covered = sum(min(share, fitted.evidence.get(kernel, 0.0)) for kernel, share in target)
    return math.exp(log_f), covered


def learnt_line(ratios: Iterable, n_threads: int, most: int = 4) -> str:
    """What measurements against a probe taught it, per kernel, in one line for the This
    machine page ('' when nothing has): the kernels with the most evidence behind them and
    their decode (and prompt) corrections. ratios: calibration.Ratio, those against probe-based
    predictions at the probe's thread count count."""
    used = [r for r in ratios if r.basis == "probe" and r.kernels and r.n_threads == n_threads]
    if not used:
        return ""
    decode = corrections((r.kernels.decode, r.decode) for r in used)
    prompt = corrections((r.kernels.prefill, r.prefill) for r in used)
    parts = []
    for kernel in sorted(decode.evidence, key=lambda k: -decode.evidence[k])[:most]:
        text = f"{kernel} decode x{math.exp(decode.log_factor[kernel]):.2f}"
        if kernel in prompt.log_factor:
            text += f", prompt x{math.exp(prompt.log_factor[kernel]):.2f}"
        parts.append(text)
    n = len(used)
    return (f"Corrected by {n} measurement{'s' if n != 1 else ''} against this probe (benches and chats): "
            + "; ".join(parts))
