"""Measurements correct a probe-based estimate per kernel, not per file.

With a probe (estimate/probe.py) a CPU estimate is a sum of measured kernel figures: each
weight type's seconds per weight, plus attention and fixed costs. What a bench or a chat
then finds wrong is a kernel's figure, so a measurement corrects each kernel by the share
of the predicted time it took there, and an estimate takes each kernel's correction by
the share of its own predicted time that kernel takes. So a bench of a Q4_K_M file
(Q4_K blocks, a Q6_K output layer) corrects a Q4_K_S or Q5_K_M model by as much as they
use those kernels, and not a Q8_0 model at all; a Gemma Q4_K_M file whose blocks are
mostly Q5_0 (priced by the Q8_0 prompt kernel on x86) is not corrected by a llama one.

Shares are of the time the probe's weight kernels take (seconds per weight x weights),
normalised over those kernels: the fixed and attention costs ride along with the kernels
of the models that paid them, as a measured ratio does. A kernel's correction is the
median of the measured / predicted ratios that used it, weighted by how much of each
prediction it was (one ratio: that ratio); an estimate's factor combines them as times
(harmonic), kernels nobody measured counting 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# An estimate counts as calibrated when measured kernels cover this much of its kernel time.
MIN_COVERAGE = 0.5

Shares = tuple[tuple[str, float], ...]  # (kernel, share of the predicted kernel time), sorted


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

    def to_json(self) -> str:
        return json.dumps({"decode": dict(self.decode), "prefill": dict(self.prefill)}, sort_keys=True)

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


def _weighted_median(pairs: list[tuple[float, float]]) -> float:
    """Median of values weighted by weights: pairs of (value, weight > 0)."""
    pairs = sorted(pairs)
    half = sum(w for _, w in pairs) / 2
    acc = 0.0
    for value, weight in pairs:
        acc += weight
        if acc >= half:
            return value
    return pairs[-1][0]


def kernel_ratios(measured: Iterable[tuple[Shares, float]]) -> dict[str, float]:
    """{kernel: its correction} from (shares of a prediction, measured / predicted) pairs."""
    per_kernel: dict[str, list[tuple[float, float]]] = {}
    for shares, ratio in measured:
        for kernel, share in shares:
            per_kernel.setdefault(kernel, []).append((ratio, share))
    return {k: _weighted_median(v) for k, v in per_kernel.items()}


def factor(target: Shares, ratios: Mapping[str, float]) -> tuple[float, float]:
    """(tokens/s factor, coverage) for an estimate with these shares: its kernel times each
    divided by their kernel's correction (1 where none was measured); coverage is the share
    of its kernel time that measured kernels account for."""
    if not target:
        return 1.0, 0.0
    time = sum(share / ratios.get(kernel, 1.0) for kernel, share in target)
    covered = sum(share for kernel, share in target if kernel in ratios)
    return 1.0 / time, covered
