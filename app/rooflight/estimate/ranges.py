"""What the speed range around an estimate means: the measured / predicted ratios that
8 of 10 measurements fall inside, taken from residuals, never chosen by hand where a
residual exists.

- table estimates: the backend's out-of-sample band (leave-one-device-out over published
  llama-bench rows: BackendConstants.decode_band / prefill_band / band_basis), joined, for a
  hybrid model's recurrent layers on a GPU, with the band of published hybrid rows
  (for_hybrid_gpu);
- probe estimates: the probe model's out-of-sample band on the machine it was checked on
  (bench/accuracy.py: shapes the probe does not use), widened by the run-to-run spread of
  the figures the estimate stands on;
- probe estimates with table-priced work (a mixed plan's GPUs, weight types the probe did
  not measure): the two bands combined by the table's share of the time (combined);
- calibrated estimates, and probe estimates with enough stored measurements of this
  machine: the 10th-90th percentile of those measurements' ratios to the prediction.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from rooflight.estimate import backend_constants as _bc

# An 80% band: 8 of 10 measurements fall inside.
COVERAGE = 0.8
# Fewer measurements than this cannot place a 10th and a 90th percentile.
MIN_RESIDUALS = 5

# Out-of-sample measured / predicted quantiles of the probe-based roofline (10th, 90th):
# what bench/accuracy_probe.py measured on shapes the probe never ran (25M-1.5B parameters,
# F16/Q8_0/Q4_0/Q4_K_M/Q6_K, with and without GQA, and Gemma-3-270M at 512 and 4096
# positions) on the project's 2-core EPYC VM, quiet (others used 0-2% of the CPU), right
# after a probe with its decode models at 8x the last-level cache (2026-12-01 11:19 UTC):
# decode ratios 0.72-1.37, prompt 0.66-0.96 (quantile_band of the nine of each). Checked
# on a later run with a new probe (docs/ACCURACY_NOTES.md, "This machine after a probe"). The prompt band is
# from the 14:11 run after prompts stopped counting the last block's FFN for every token
# (estimate/output_rows.py): ratios 0.84-1.23, checked on the 14:13 run (7 of 9 inside).
# Checked across machines by bench/probe_band_check.py (39 saved runs on four VMs, 2026-12-07:
# 91% of decode and 95% of prompt measurements inside, 84-99% per machine; a band derived from
# the other machines' runs held less of the one left out, so these were kept: README).
PROBE_DECODE_BAND = (0.80, 1.30)
PROBE_PREFILL_BAND = (0.88, 1.21)
PROBE_BAND_BASIS = ("the probe model's out-of-sample band on the machine it was checked on (bench/accuracy_probe.py: "
                    "shapes the probe never ran, measured against llama.cpp)")


@dataclass(frozen=True)
class Band:
    decode: tuple[float, float]  # measured / predicted, low and high
    prefill: tuple[float, float]
    basis: str  # what the band is, in one phrase (JSON range_basis)


def quantile_band(ratios: Sequence[float]) -> tuple[float, float]:
    """The 10th and 90th percentiles of measured / predicted ratios (linear interpolation),
    widened to contain 1.0: the estimate itself is always inside its range."""
    xs = sorted(ratios)
    if len(xs) == 1:
        return min(xs[0], 1.0), max(xs[0], 1.0)
    q = statistics.quantiles(xs, n=10, method="inclusive")
    return min(q[0], 1.0), max(q[-1], 1.0)


def table_band(backend: str, constants) -> Band:
    """The backend's out-of-sample band (BackendConstants.decode_band / prefill_band,
    fitted by bench/fit_constants.py), or, said plainly, a hand-chosen one where the
    backend has none."""
    basis = constants.band_basis
    if basis.startswith("hand-chosen"):
        return Band(tuple(constants.decode_band), tuple(constants.prefill_band),
                    f"chosen by hand: no out-of-sample band for the {backend} backend yet")
    return Band(tuple(constants.decode_band), tuple(constants.prefill_band),
                f"8 of 10 measurements fall inside: {basis}")


def probe_band(decode_spread: float, prefill_spread: float, disturbed: bool) -> Band:
    """The probe model's out-of-sample band, widened by half the run-to-run spread of the
    figures the estimate stands on each way (MachineProbe.spread_of: they are that uncertain)."""
    def widened(band: tuple[float, float], spread: float) -> tuple[float, float]:
        w = 1 + spread / 2  # a factor each way: a large spread never makes the low end negative
        return band[0] / w, band[1] * w
    busy = "; the probe ran on a busy machine" if disturbed else ""
    return Band(widened(PROBE_DECODE_BAND, decode_spread), widened(PROBE_PREFILL_BAND, prefill_spread),
                f"8 of 10 measurements fall inside: {PROBE_BAND_BASIS}, widened by the run-to-run spread of the "
                f"probe's figures it stands on (decode {decode_spread:.0%}, prompt {prefill_spread:.0%}){busy}")


def for_hybrid_gpu(table: Band) -> Band:
    """A table band joined with the band of hybrid models whose recurrent layers run on a GPU,
    which the estimate does not fully price there (backend_constants.HYBRID_GPU_*_BAND)."""
    def join(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
        return min(a[0], b[0]), max(a[1], b[1])
    return Band(join(table.decode, _bc.HYBRID_GPU_DECODE_BAND), join(table.prefill, _bc.HYBRID_GPU_PREFILL_BAND),
                f"{table.basis}; {_bc.HYBRID_GPU_BAND_BASIS}")


TABLE_SUFFIX = " (table)"  # the kernel-share names of table-priced work (probe_roofline.table_kernel)


def table_share(shares) -> float:
    """The table-priced share of an estimate's time, from its kernel shares ((name, share)
    pairs): a mixed plan's GPUs and the weight types the probe did not measure."""
    return sum(v for name, v in shares if name.endswith(TABLE_SUFFIX))


def combined(probe: Band, table: Band, decode_table_share: float, prefill_table_share: float) -> Band:
    """The band of an estimate whose time is partly priced by the probe and partly by the
    table (a mixed plan's GPUs, weight types the probe did not measure): each part's time
    off by its own band's end, added by the parts' shares of the predicted time. Both ends
    taken at once is the worst case (the two parts off the same way together), so the band
    holds at least as many measurements as its parts' bands do."""
    def mix(a: tuple[float, float], b: tuple[float, float], s: float) -> tuple[float, float]:
        # a speed ratio r of a part is a time ratio 1/r: the parts' time ratios add by share
        return 1 / ((1 - s) / a[0] + s / b[0]), 1 / ((1 - s) / a[1] + s / b[1])
    if decode_table_share <= 0 and prefill_table_share <= 0:
        return probe
    return Band(mix(probe.decode, table.decode, decode_table_share),
                mix(probe.prefill, table.prefill, prefill_table_share),
                f"the probe's band and the table's, by their shares of the predicted time (the table's: decode "
                f"{decode_table_share:.0%}, prompt {prefill_table_share:.0%}): {probe.basis}; and {table.basis}")


def max_stored_spread() -> float:
    """The largest run-to-run spread of a probe figure worth storing: the spread s at which
    probe_band's decode band, widened by 1 + s/2 each way, is as wide (high over low) as the
    CPU table's out-of-sample band. Beyond it the probe would say no more than the table."""
    from rooflight.estimate.backend_constants import CPU

    table = CPU.decode_band[1] / CPU.decode_band[0]
    probe = PROBE_DECODE_BAND[1] / PROBE_DECODE_BAND[0]
    return 2 * (math.sqrt(table / probe) - 1) if table > probe else 0.0


def measured_band(decode_residuals: Sequence[float], prefill_residuals: Sequence[float]) -> Band | None:
    """From this machine's stored measurements (measured / the estimate as it now stands):
    None when there are too few to place the percentiles."""
    if min(len(decode_residuals), len(prefill_residuals)) < MIN_RESIDUALS:
        return None
    n = len(decode_residuals)
    return Band(quantile_band(decode_residuals), quantile_band(prefill_residuals),
                f"8 of 10 of this machine's {n} stored measurements of this kind fall inside")


# A measurement more than this factor beyond what its estimate's own out-of-sample band
# allows is not a property of the machine but of the run: a process fighting others for the
# cores, or a model so small that Python and llama.cpp's per-call overheads dominate. Such
# rows would drag every estimate on the machine; they are kept in the table (for `rooflight
# bench` history) but not used. Beyond the band, not the estimate: a table estimate may be
# far off a machine by itself (a quiet Zen-1-era EPYC VM ran small models' prompts 11-12x
# slower than the table; 8x of the estimate refused every bench there), a probe's is not.
PLAUSIBLE_RATIO = 8.0


def plausible_limit(basis: str = "table") -> float:
    """The largest measured / predicted factor (either way) calibration uses for a prediction
    of this basis: PLAUSIBLE_RATIO beyond the widest edge of that basis's band (the CPU
    table's, the widest table band; the probe's decode band)."""
    bands = (PROBE_DECODE_BAND,) if basis == "probe" else (_bc.CPU.decode_band, _bc.CPU.prefill_band)
    return PLAUSIBLE_RATIO * max(max(1 / lo, hi) for lo, hi in bands)


def plausible_ratio(ratio: float, basis: str = "table") -> bool:
    limit = plausible_limit(basis)
    return 1 / limit <= ratio <= limit
