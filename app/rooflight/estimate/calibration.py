"""What this machine's measurements do to an estimate: the stored measured / predicted ratios
(`Ratio`), the probe they were taken with, and how both correct a run (`Calibration`,
`Correction`). store/calibration.py keeps them; perf.estimate_performance applies them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from rooflight.estimate import ranges
from rooflight.estimate.config import RunConfig
from rooflight.estimate.kernel_calibration import MIN_COVERAGE as _MIN_KERNEL_COVERAGE
from rooflight.estimate.kernel_calibration import KernelShares, corrections
from rooflight.estimate.kernel_calibration import factor as _kernel_factor
from rooflight.estimate.probe import MachineProbe


@dataclass(frozen=True)
class Ratio:
    """One stored measurement as calibration sees it: measured / predicted on this machine."""

    weight_type: str  # the model's main weight type (file type): Q4_K_M, Q8_0, ...
    n_threads: int  # 0: not recorded
    model_bytes: int  # 0: not recorded
    decode: float
    prefill: float
    basis: str = "table"  # what the prediction stood on: table | probe
    kernels: KernelShares | None = None  # a probe-based prediction's kernel shares (None: not kept)


@dataclass(frozen=True)
class Calibration:
    """What this machine told us: a probe of its kernels (estimate/probe.py), and measured /
    predicted ratios of real models (median of stored measurements).

    Why one model's ratio corrects another's: what the constants above cannot know about
    a machine (how many cycles its cores really spend per quantized weight, what thread
    synchronisation costs, how much of the measured bandwidth decode reaches, whether the
    OS or a hypervisor takes time away) scales the time of every model run the same way
    on that machine, so the ratio carries over to other sizes of the same kind of model.
    It carries over less well across thread counts (a 1-thread run pays no
    synchronisation), across sizes far apart (a model that fits the CPU caches decodes
    from cache, one ten times larger from RAM) and across weight types (other kernels),
    so `ratios` keeps each measurement's thread count, size and type, and factors()
    uses the measurements that match best. With a probe, the kernels, caches and fixed
    costs are measured, so what is left to correct is per kernel: a measurement against a
    probe-based prediction corrects the kernels that prediction used, by their shares of it
    (a least-squares split over the kernels), and an estimate takes those corrections by its
    own shares (kernel_calibration.py);
    measurements stored before shares were kept correct models of their own file type.
    """

    decode_factor: float = 1.0  # median over all measurements: the fallback
    prefill_factor: float = 1.0
    samples: int = 0
    # Thread counts a sweep found fastest here (runtime/threads.py): (model bytes, n_threads)
    threads: tuple[tuple[int, int], ...] = ()
    ratios: tuple[Ratio, ...] = ()
    probe: MachineProbe | None = None  # this machine's probe, valid for this llama.cpp build

    @property
    def active(self) -> bool:
        return self.samples > 0

    def uncalibrated(self) -> Calibration:
        """What a new measurement is compared with: the probe (a property of the machine,
        like its bandwidth) without the ratios learnt from earlier measurements."""
        return Calibration(threads=self.threads, probe=self.probe)

    def probe_for(self, cfg: RunConfig) -> MachineProbe | None:
        """The probe, when it was taken at this plan's thread count."""
        p = self.probe
        return p if p is not None and p.n_threads == cfg.n_threads else None

    def matching(self, file_type: str, n_threads: int, model_bytes: int = 0, basis: str = "table",
                 kernels: KernelShares | None = None) -> tuple[Ratio, ...]:
        """The measurements that correct a run: with a probe, those against probe-based
        predictions at its thread count that used one of the run's kernels (or, without
        kernel shares on either side, those of the same file type); otherwise at the same
        thread count, narrowed to those within 4x in size and then of the same type where
        there are any."""
        if basis == "probe":
            probed = [r for r in self.ratios if r.basis == "probe" and r.n_threads == n_threads]
            if kernels is not None and any(r.kernels for r in probed):
                used = {k for k, _ in kernels.decode} | {k for k, _ in kernels.prefill}
                return tuple(r for r in probed if r.kernels
                             and used & ({k for k, _ in r.kernels.decode} | {k for k, _ in r.kernels.prefill}))
            return tuple(r for r in probed if r.weight_type == file_type.upper())
        chosen = [r for r in self.ratios if r.n_threads == n_threads and r.basis == "table"]
        for keep in (lambda r: r.model_bytes > 0 and abs(math.log(max(model_bytes, 1) / r.model_bytes)) <= math.log(4),
                     lambda r: r.weight_type == file_type.upper()):
            chosen = [r for r in chosen if keep(r)] or chosen
        return tuple(chosen)

    def factors(self, file_type: str, n_threads: int, model_bytes: int = 0, basis: str = "table",
                kernels: KernelShares | None = None) -> tuple[float, float]:
        """(decode, prefill) factors for a run (correction())."""
        c = self.correction(file_type, n_threads, model_bytes, basis, kernels)
        return c.decode, c.prefill

    def correction(self, file_type: str, n_threads: int, model_bytes: int = 0, basis: str = "table",
                   kernels: KernelShares | None = None) -> Correction:
        """What this machine's measurements do to a run. With a probe and kernel shares on
        both sides: the per-kernel corrections of the matching() measurements combined by
        the run's shares, calibrated once they cover MIN_COVERAGE of its time; otherwise the
        median over matching() measurements; without a probe and with none at this thread
        count, all measurements'; with a probe and none that match, 1 (the probe stands)."""
        matched = self.matching(file_type, n_threads, model_bytes, basis, kernels)
        if not matched:
            if basis == "probe":
                return Correction(1.0, 1.0, (), False, ([], []))
            return Correction(_bounded(self.decode_factor, basis), _bounded(self.prefill_factor, basis), (),
                              self.active, ([], []))
        if basis == "probe" and kernels is not None and all(r.kernels for r in matched):
            decode, prefill, covered = _kernel_fit(kernels, matched)
            calibrated = covered >= _MIN_KERNEL_COVERAGE
            # each measurement priced by the others (leave one out): a least-squares split
            # with as many kernels as measurements fits each exactly, and would leave a
            # range of nothing; a run the measurements hardly cover keeps the probe's band
            own = [_kernel_fit(r.kernels, [o for o in matched if o is not r])[:2] if r.kernels else (1.0, 1.0)
                   for r in matched]
            residuals = (([r.decode / f[0] for r, f in zip(matched, own, strict=True)],
                          [r.prefill / f[1] for r, f in zip(matched, own, strict=True)]) if calibrated else ([], []))
            return Correction(decode, prefill, matched, calibrated, residuals)
        decode = _bounded(statistics.median(r.decode for r in matched), basis)
        prefill = _bounded(statistics.median(r.prefill for r in matched), basis)
        return Correction(decode, prefill, matched, basis == "probe" or self.active,
                          ([r.decode / decode for r in matched], [r.prefill / prefill for r in matched]))

    def preferred_threads(self, model_bytes: int) -> int | None:
        """The fastest thread count measured for the model nearest in size, if within 8x.

        Size matters: small models are bound by per-token synchronisation (fewer threads
        can win), large ones by memory bandwidth, which saturates before all cores do.
        """
        best, best_dist = None, math.log(THREAD_SIZE_REACH)
        for nbytes, n_threads in self.threads:
            dist = abs(math.log(max(model_bytes, 1) / max(nbytes, 1)))
            if dist <= best_dist:
                best, best_dist = n_threads, dist
        return best


@dataclass(frozen=True)
class Correction:
    """Calibration.correction: the factors for a run, the measurements they stand on,
    whether it counts as calibrated, and those measurements' residuals for its range."""

    decode: float
    prefill: float
    matched: tuple[Ratio, ...]
    calibrated: bool
    residuals: tuple[list[float], list[float]]  # (decode, prefill); empty: not the range's basis


def _kernel_fit(kernels: KernelShares, measured: Iterable[Ratio]) -> tuple[float, float, float]:
    """(decode factor, prefill factor, decode coverage) of a run with these shares from the
    per-kernel least-squares corrections of these measurements (kernel_calibration.py)."""
    known = [(r.kernels, r) for r in measured if r.kernels is not None]
    decode, covered = _kernel_factor(kernels.decode, corrections((k.decode, r.decode) for k, r in known))
    prefill, _ = _kernel_factor(kernels.prefill, corrections((k.prefill, r.prefill) for k, r in known))
    return _bounded(decode, "probe"), _bounded(prefill, "probe"), covered


def _bounded(factor: float, basis: str) -> float:
    """A correction within what calibration accepts of one measurement (ranges.plausible_limit:
    PLAUSIBLE_RATIO beyond the basis's band). Measurements past it, or taken beside a busy
    program, are never used (store/calibration.py), so this bounds only what combining them
    can reach (the per-kernel least squares). It was 4x until 2026-12-05: a quiet Zen-1-era
    EPYC VM ran 7-12x off the table, and a bench there could correct no more than 4x of it."""
    limit = ranges.plausible_limit(basis)
    return min(limit, max(1 / limit, factor))


# A thread preference measured on one model applies to models within this size factor.
THREAD_SIZE_REACH = 8.0
