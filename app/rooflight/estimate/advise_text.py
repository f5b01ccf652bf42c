"""The advisor's wording: figures as people read them and the before -> after phrase
that heads a card. No arithmetic of the estimate here: only how its numbers are said.
"""

from __future__ import annotations

from rooflight.estimate.advise_types import FIT_RANK, Candidate
from rooflight.estimate.fit import Fit
from rooflight.units import size_text


def _tok(x: float) -> str:
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def _gb(n: float) -> str:
    return size_text(n, 2 if abs(n) < 10e9 else 1)


def _ctx(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 and n >= 1024 else str(n)


_FIT_PHRASE: dict[str, str] = {
    Fit.FULL_GPU: "fit entirely on the GPU",
    Fit.PARTIAL_GPU: "fit partly on the GPU",
    Fit.CPU_ONLY: "fit in RAM",
    Fit.TOO_LARGE: "not fit",
}


def _numbers(before: Candidate, after: Candidate) -> str:
    """The before -> after figure that moved most: decode, else prefill, else memory."""
    d = f"decode {_tok(before.decode)} -> {_tok(after.decode)} tok/s"
    saved = before.memory_bytes - after.memory_bytes
    if abs(after.decode / before.decode - 1) >= 0.03:
        more = f", {_gb(saved)} less memory" if saved > 0.05 * before.memory_bytes else ""
        return d + more
    if abs(after.prefill / before.prefill - 1) >= 0.05:
        return f"prefill {_tok(before.prefill)} -> {_tok(after.prefill)} tok/s"
    if saved > 0:
        return f"{_gb(saved)} less memory ({_gb(before.memory_bytes)} -> {_gb(after.memory_bytes)})"
    return d


def _title(lever: str, before: Candidate, after: Candidate, subject: str = "the model") -> str:
    """'KV cache in q8_0 lets 32k context fit entirely on the GPU: decode 14 -> 41 tok/s',
    or '<lever>: <numbers>' when the fit does not improve."""
    if FIT_RANK[after.fit] > FIT_RANK[before.fit]:
        return f"{lever} lets {subject} {_FIT_PHRASE[after.fit]}: {_numbers(before, after)}"
    if after.fit == "too_large":
        return f"{lever}: {subject} still does not fit ({_gb(after.memory_bytes)})"
    return f"{lever}: {_numbers(before, after)}"


def _changes(before: dict, after: dict) -> list[str]:
    names = {"kv_type": "KV cache {}", "flash_attn": "flash attention {}", "swa_full": "full-size SWA cache {}",
             "n_gpu_layers": "{} GPU layers", "n_threads": "{} threads", "n_ubatch": "micro-batch {}",
             "n_batch": "batch {}"}
    out = []
    for k, fmt in names.items():
        if before.get(k) != after.get(k):
            val = after[k]
            if isinstance(val, bool):
                val = "on" if val else "off"
            out.append(fmt.format(val))
    return out
