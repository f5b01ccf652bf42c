"""The CPU roofline with a machine probe's figures in place of table constants.

perf.py calls these for the work a plan leaves on the CPU when this machine has a probe
taken at the plan's thread count (Calibration.probe_for). Weight types the probe did not
measure are priced by the table roofline (the caller's fallback), so a model with one
unmeasured tensor type still gets the probe for the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rooflight.estimate.probe import MachineProbe


def decode_weights_s(
    probe: MachineProbe, by_type: Iterable[dict[str, float]], table_s: Callable[[str, float], float]
) -> dict[str, float]:
    """Seconds one token's matrix-vector products take, split by bound ("memory" |
    "compute"): elements of each type x the probe's seconds per weight; table_s(type,
    elements) for types it has no figure for (counted as memory-bound, as the table's
    bandwidth term usually is)."""
    out = {"memory": 0.0, "compute": 0.0}
    for counts in by_type:
        for kind, n in counts.items():
            k = probe.kernel(kind)
            if k is None:
                out["memory"] += table_s(kind, n)
            else:
                out[k.bound] += n * k.decode_s_per_weight
    return out


def prefill_weights_s(
    probe: MachineProbe, counts: dict[str, float], n_tokens: int, table_s: Callable[[str, float], float]
) -> float:
    """Seconds a micro-batch of n_tokens spends in matrix-matrix products: per type,
    elements x tokens x the probe's per-weight figure, never less than one matrix-vector
    pass over the weights (a small batch still reads them all once); table_s(type,
    elements x tokens) for types without a figure."""
    total = 0.0
    for kind, n in counts.items():
        k = probe.kernel(kind)
        if k is None:
            total += table_s(kind, n * n_tokens)
        else:
            total += max(n * n_tokens * k.prefill_s_per_weight, n * k.decode_s_per_weight)
    return total


def covered_share(probe: MachineProbe, by_type: Iterable[dict[str, float]]) -> float:
    """Share of the weight elements whose type the probe measured (1.0: all)."""
    total = known = 0.0
    for counts in by_type:
        for kind, n in counts.items():
            total += n
            if probe.kernel(kind) is not None:
                known += n
    return known / total if total else 1.0


def fixed_s(probe: MachineProbe, n_layers: int, n_vocab: int) -> float:
    """Per-token fixed cost: graph and Python per token, per layer, per vocabulary entry."""
    f = probe.fixed
    return f.token_s + f.layer_s * n_layers + f.vocab_cost_s(n_vocab)
