"""Write a bench/fit_constants.py result into estimate/backend_constants.py, in place.

    .venv/bin/python bench/fit_constants.py --write   # fit, write, and again until stable

The fit is a fixed point (a prompt's fixed part depends on the decode constants in the file),
so `--write` refits, in a fresh process each time, after each write until the file stops
changing (two rounds, usually).
Each constant's line is found by its shape and rewritten with the fitted number; a line that
is not where it is expected stops the write with an error, leaving the file as it was.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import rooflight.estimate.backend_constants as bc

PATH = Path(bc.__file__)
GPU_NAMES = {"cuda": "CUDA", "metal": "METAL", "rocm": "ROCM", "vulkan": "VULKAN", "sycl": "SYCL"}
# fit_constants.py's band kinds and the basis each is written with (backend_constants.py)
BAND_BASES = {"own": "_OWN", "pooled": "_POOLED", "widened": "_WIDENED"}


def _sub(pattern: str, new: str, text: str, what: str) -> str:
    out, n = re.subn(pattern, new, text, flags=re.M)
    if n != 1:
        raise SystemExit(f"backend_constants.py: expected one {what} line, found {n}; nothing written.")
    return out


def render(res: dict, text: str) -> str:
    """backend_constants.py's text with the fitted numbers of res (fit_constants.run())."""
    for b, name in GPU_NAMES.items():
        c, band = res["fitted"][b], res["bands"][b]
        new = (f"{name} = BackendConstants({c['decode_efficiency']:.3f}, {c['layer_overhead_s'] * 1e6:.1f}e-6, "
               f"{c['prefill_float']:.3f}, {c['prefill_quant']:.3f}, _FIT, "
               f"moe_expert_overhead_tokens={c['moe_overhead_tokens']:.0f},\n    decode_band=({band['decode'][0]}, "
               f"{band['decode'][1]}), prefill_band=({band['prefill'][0]}, {band['prefill'][1]}), "
               f"band_basis={BAND_BASES[res['band_kinds'][b]]})")
        text = _sub(rf"^{name} = BackendConstants\([^,]+, [^,]+, [^,]+, [^,]+, _FIT, moe_expert_overhead_tokens=[^,]+,\n"
                    r"    decode_band=\([^)]*\), prefill_band=\([^)]*\), band_basis=_[A-Z]+\)",
                    new.replace("\\", "\\\\"), text, name)
    for family, c in res["fitted"]["cpu"].items():
        new = (f'    "{family}": CpuShares(peak_read={c["peak_read_share"]:.2f}, clock={c["clock_share"]:.3f}, '
               f'matmul_clock={c["matmul_clock_share"]:.3f}),')
        text = _sub(rf'^    "{family}": CpuShares\([^)]*\),$', new, text, f"CPU_SHARES[{family}]")
    text = _sub(r"^BAND_TAIL = [0-9.]+$", f"BAND_TAIL = {res['band_tail']:g}", text, "BAND_TAIL")
    band = res["bands"]["cpu"]
    return _sub(r"decode_band=\([^)]*\), prefill_band=\([^)]*\), band_basis=_CPU_BAND",
                f"decode_band=({band['decode'][0]}, {band['decode'][1]}), "
                f"prefill_band=({band['prefill'][0]}, {band['prefill'][1]}), band_basis=_CPU_BAND", text, "CPU band")


def write_until_stable(max_rounds: int = 5) -> int:
    """Fit in a fresh process (the estimator reads the constants at import), write, until
    the file stops changing; returns the rounds that wrote."""
    for rounds in range(max_rounds):
        done = subprocess.run([sys.executable, str(Path(__file__).with_name("fit_constants.py")), "--json"],
                              capture_output=True, text=True, check=True)
        old = PATH.read_text(encoding="utf-8")
        new = render(json.loads(done.stdout), old)
        if new == old:
            return rounds
        PATH.write_text(new, encoding="utf-8")
    raise SystemExit(f"backend_constants.py still changed after {max_rounds} rounds of the fit.")
