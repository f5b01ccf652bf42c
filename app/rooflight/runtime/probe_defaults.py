"""The machine probe's defaults, apart from the probe itself, so that the CLI can name them
in its help without importing the probe (and psutil, numpy, gguf under it) on every start."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# Weight types the probe measures where this llama.cpp build and the writer support them, in
# the order measured (a slow or busy machine's budget runs out at the end): F16 first (the
# other figures' derivation prices the probe's own F16 models with it), then by their share
# of the weight bytes of the catalog's 293 files (catalog/models.json, 2026-12-02): Q4_K 33%,
# Q8_0 23%, Q6_K 23%, Q5_K 12%; then MXFP4 (2.1%, gpt-oss) ahead of BF16's 2.2%, because a
# third of those bytes are routed experts, 23% in the three expert types the probe prompts
# (EXPERT_TYPES: Q4_K, Q8_0, MXFP4), which runtime/probe.py measures as soon as their dense
# types are; then BF16, Q4_0 1.3%, Q5_0 1.0%, IQ4_XS (no catalog file) and NVFP4 0.5%.
# Q5_0: the fallback of Q4_K_M files for rows not a multiple of 256 wide (most of Gemma 3
# 270M's and 1B's blocks);
# its prompt kernel is Q8_0's tinyBLAS template plus unpacking the fifth bit, which cost
# x1.15-1.42 of Q8_0 per weight on three VMs (bench/probe_width.py), so Q8_0's figure stands
# in for it only with the mean of those (probe_roofline._X86_PROMPT_STAND_IN), and a figure
# of its own is better.
ALL_TYPES = ("F16", "Q4_K", "Q8_0", "Q6_K", "Q5_K", "MXFP4", "BF16", "Q4_0", "Q5_0", "IQ4_XS", "NVFP4")
# The catalog's shares say what users run in general; the models on this machine's disk say
# what this user runs: their types come right after F16 (measurement_order), so that a Gemma
# QAT Q4_0 or an IQ4_XS file is priced by its own kernel even when a slow spell of the machine
# ends the budget before the catalog's order would reach it.
BUDGET_S = 30.0  # the whole probe, generation of its models included (issue 14)
# what "more time" gives it, asked for (`rooflight probe --budget`, the app's "Measure with
# more time"): every part took 35-42 s on the project's 2-core Xeon VM (120 s budgets,
# 2026-12-07: docs/PROBE_NOTES.md)
LONGER_BUDGET_S = 60.0
# Others may use this share of the machine's total CPU time during a measurement (10% is a
# fifth of one core on two: a desktop's idle background, not a compile or a second model).
DEFAULT_BUSY_THRESHOLD = 0.10


def disturbed(others_share: float) -> bool:
    """Whether other programs took more of the CPU during a measurement than it may keep
    (bench runs, chat replies, stress points: runtime/busy.py measures the share)."""
    return others_share > DEFAULT_BUSY_THRESHOLD


def main_type(label: str | None) -> str | None:
    """The weight type most of a file's matrices have, from the quant label in its name
    (catalog.hub_files.parse_quant): "Q4_K_M" -> "Q4_K", "UD-Q5_K_XL" -> "Q5_K",
    "MXFP4_MOE" -> "MXFP4"; None where the probe has no kernel of that type (IQ3_XXS, Q3_K...)."""
    if not label:
        return None
    name = re.sub(r"^(Q[2-8]_K)_\w+$", r"\1", label.upper().removeprefix("UD-"))
    name = {"MXFP4_MOE": "MXFP4", "FP16": "F16"}.get(name, name)
    return name if name in ALL_TYPES else None


def measurement_order(installed_bytes: Mapping[str, int]) -> tuple[str, ...]:
    """ALL_TYPES in the order a probe measures them on a machine with these models on disk
    ({weight type: bytes of the files whose main type it is}): F16 first (the other figures'
    derivation needs it), then the types the installed models use, most bytes first, then
    the rest in ALL_TYPES's order."""
    mine = sorted((t for t, n in installed_bytes.items() if t in ALL_TYPES and t != "F16" and n > 0),
                  key=lambda t: (-installed_bytes[t], ALL_TYPES.index(t)))
    return ("F16", *mine, *(t for t in ALL_TYPES[1:] if t not in mine))


def installed_order(files: Iterable | None = None) -> tuple[str, ...]:
    """measurement_order for the models on this machine's disk (catalog.local.find_installed;
    files: those InstalledFile records instead)."""
    if files is None:
        from rooflight.catalog.local import find_installed

        files = find_installed()
    totals: dict[str, int] = {}
    for f in files:
        kind = main_type(f.quant) if f.complete else None
        if kind:
            totals[kind] = totals.get(kind, 0) + f.size
    return measurement_order(totals)
