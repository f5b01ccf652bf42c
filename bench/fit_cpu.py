"""The CPU half of bench/fit_constants.py: fit the three datasheet shares the table prices
a CPU by, per ISA family (estimate/backend_constants.py CPU_SHARES: x86, arm), and say how
good they are leaving one CPU out of its family's fit.

A published CPU is given by its datasheet: peak RAM bandwidth (channels x 8 B x MT/s,
ram_bandwidth_source "peak") and its maximum (boost) clock. The estimator prices a row as
t = max(M / read_share, C / clock_share) + F: M the time to read what it reads at the full
peak, C the time its cycle tables take at the full boost clock, F what depends on neither
(per-layer and per-token costs); the clock share is CPU_CLOCK_SHARE for decode rows and
CPU_MATMUL_CLOCK_SHARE for prompt rows. Each row's M, C and F come from three runs of the
estimator itself with the shares pinned. The fit: decode rows give the read share and the
decode clock share, prompt rows then the matmul clock share, each a search over a grid
minimising the squared log error of the rows' times with every CPU weighted alike (one
benchmark page with 24 rows of a Raspberry Pi must not outvote the other CPUs). numpy only,
deterministic.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable

import numpy as np

from rooflight.estimate import backend_constants as bc

READ_SHARES = np.round(np.linspace(0.15, 1.2, 106), 2)
CLOCK_SHARES = np.round(np.geomspace(0.1, 4.0, 161), 3)
_HUGE = 1e6  # a share this large takes its term out of the max()


@contextlib.contextmanager
def shares(read: float, clock: float):
    """Pin every family's shares (both clock shares to `clock`: a row uses one of them)."""
    old = bc.CPU_SHARES
    bc.CPU_SHARES = {f: bc.CpuShares(peak_read=read, clock=clock, matmul_clock=clock) for f in old}
    try:
        yield
    finally:
        bc.CPU_SHARES = old


def coefficients(row: dict, seconds: Callable[[dict], float]) -> tuple[float, float, float]:
    """(M, C, F) of t = max(M / read_share, C / clock_share) + F for one row."""
    with shares(1.0, _HUGE):
        t1 = seconds(row)
    with shares(0.5, _HUGE):
        t2 = seconds(row)
    with shares(_HUGE, 1.0):
        t3 = seconds(row)
    m = t2 - t1
    f = t1 - m
    return m, max(0.0, t3 - f), f


def predict_s(coef: tuple[float, float, float], read: float, clock: float) -> float:
    m, c, f = coef
    return max(m / read, c / clock) + f


def _weights(rows: list[dict]) -> np.ndarray:
    n = Counter(r["device"] for r in rows)
    return np.array([1.0 / n[r["device"]] for r in rows])


def _arrays(rows, coef, measured_s):
    m, c, f = (np.array([coef[id(r)][i] for r in rows]) for i in range(3))
    return m, c, f, np.array([measured_s(r) for r in rows]), _weights(rows)


def fit(rows: list[dict], coef: dict[int, tuple], measured_s: Callable[[dict], float]) -> dict[str, float]:
    """{"peak_read_share", "clock_share", "matmul_clock_share"} for these rows."""
    tg = [r for r in rows if r["n_gen"]]
    pp = [r for r in rows if not r["n_gen"]]
    read, clock = 1.0, 1.0  # a family without decode rows: the datasheet itself
    if tg:
        m, c, f, meas, w = _arrays(tg, coef, measured_s)
        pred = np.maximum(m[:, None, None] / READ_SHARES[None, :, None],
                          c[:, None, None] / CLOCK_SHARES[None, None, :]) + f[:, None, None]
        loss = (w[:, None, None] * np.log(pred / meas[:, None, None]) ** 2).sum(axis=0)
        i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
        read, clock = float(READ_SHARES[i]), float(CLOCK_SHARES[j])
    matmul = 1.0
    if pp:
        m, c, f, meas, w = _arrays(pp, coef, measured_s)
        pred = np.maximum((m / read)[:, None], c[:, None] / CLOCK_SHARES[None, :]) + f[:, None]
        loss = (w[:, None] * np.log(pred / meas[:, None]) ** 2).sum(axis=0)
        matmul = float(CLOCK_SHARES[int(np.argmin(loss))])
    return {"peak_read_share": read, "clock_share": clock, "matmul_clock_share": matmul}


def row_share(row: dict, fitted: dict[str, float]) -> tuple[float, float]:
    """(read share, clock share) a row is priced with."""
    return fitted["peak_read_share"], fitted["clock_share" if row["n_gen"] else "matmul_clock_share"]


def family(row: dict, cpus: dict) -> str:
    spec = cpus[row["device"]]
    return bc.cpu_family(spec["isa"], spec.get("arch", ""))


def leave_one_cpu_out(rows: list[dict], coef: dict[int, tuple], measured_s: Callable[[dict], float],
                      cpus: dict) -> tuple[dict, list[tuple[dict, float]]]:
    """({family: shares fitted on its rows}, [(row, measured / predicted tokens/s with the
    row's CPU held out of its family's fit)])."""
    out = []
    for cpu in sorted({r["device"] for r in rows}):
        held = [r for r in rows if r["device"] == cpu]
        fam = family(held[0], cpus)
        fitted = fit([r for r in rows if r["device"] != cpu and family(r, cpus) == fam], coef, measured_s)
        out += [(r, predict_s(coef[id(r)], *row_share(r, fitted)) / measured_s(r)) for r in held]
    families = sorted({family(r, cpus) for r in rows})
    return {f: fit([r for r in rows if family(r, cpus) == f], coef, measured_s) for f in families}, out
