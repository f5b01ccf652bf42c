"""The bundled GPU spec table (resources/gpus.json) and a robust name lookup.

Detection knows a GPU's name and memory but rarely its peak bandwidth or FP16 throughput;
profiles written by hand often give only a name. Both fill the gaps from this table.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

# Words vendors put in front of or after a model name that say nothing about which model it is.
_NOISE = frozenset(
    "nvidia geforce amd radeon intel apple tesla graphics gpu corporation tm r series".split()
)
# Tokens that make a different product when added to a name ("RTX 4090" + "D" is another GPU,
# "4060" + "Ti" is faster, "M2" + "Max" is bigger; "W" + "6800" is AMD's Radeon PRO W6800, a
# workstation board with twice the RX 6800's memory; "GTX" + "860M" is a GeForce, not the
# Radeon 860M, once the vendor words are dropped; an "OEM" board can have a configuration of its
# own, as the RTX 3050 OEM's PCI id says). A contained alias may not leave one over.
_VARIANT_MARKERS = frozenset(
    "ti super d laptop mobile max q xt xtx gre m pro ultra nvl s x mini xl se sff w gtx oem".split()
)


# Units after a number that make it a memory size, which a name may add to its alias ("RTX
# 4060 Ti 16GB"), not a model number of another board
_MEMORY_UNITS = frozenset("gb g gib mb mib".split())


def _resource_text() -> str:
    """gpus.json from the installed package, else from the source tree (editable installs
    map app/ only, so `rooflight.resources` may not be importable there)."""
    try:
        return (resources.files("rooflight.resources") / "gpus.json").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        path = Path(__file__).resolve().parents[3] / "resources" / "gpus.json"
        return path.read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    return json.loads(_resource_text())


def gpu_table() -> list[dict[str, Any]]:
    """Every entry of the bundled table (copies: callers may modify them)."""
    return copy.deepcopy(_load()["gpus"])


def table_sources() -> str:
    return str(_load().get("sources", ""))


def normalize(name: str) -> tuple[str, ...]:
    """Lower-case tokens without vendor noise; letters and digits are split so that
    "RTX4090", "rtx 4090" and "RTX-4090" agree ("a100" -> "a", "100")."""
    s = name.lower().replace("(tm)", " ").replace("(r)", " ")
    s = re.sub(r"[^a-z0-9]+", " ", s)
    s = re.sub(r"(?<=[a-z])(?=[0-9])|(?<=[0-9])(?=[a-z])", " ", s)
    # "16 gb" stays two tokens; that is fine: aliases are normalized the same way.
    return tuple(t for t in s.split() if t not in _NOISE)


@lru_cache(maxsize=1)
def _index() -> tuple[dict[tuple[str, ...], int], list[tuple[tuple[str, ...], int]]]:
    """Exact map from normalized alias to entry, and all (alias tokens, entry) pairs."""
    exact: dict[tuple[str, ...], int] = {}
    pairs: list[tuple[tuple[str, ...], int]] = []
    for i, e in enumerate(_load()["gpus"]):
        for alias in [e["name"], *e.get("aliases", [])]:
            key = normalize(alias)
            if not key:
                continue
            exact.setdefault(key, i)  # first entry wins: the table lists the default first
            pairs.append((key, i))
    return exact, pairs


def _match_index(name: str) -> int | None:
    tokens = normalize(name)
    if not tokens:
        return None
    exact, pairs = _index()
    if tokens in exact:
        return exact[tokens]
    have = Counter(tokens)
    # numbers that are a memory size ("16GB"), not part of a model name
    sizes = {t for t, unit in zip(tokens, tokens[1:], strict=False) if unit in _MEMORY_UNITS}
    best: tuple[int, int, int] | None = None  # (alias tokens, alias chars, -entry)
    best_i: int | None = None
    for key, i in pairs:
        need = Counter(key)
        if any(have[t] < n for t, n in need.items()):
            continue
        leftover = have - need
        if any(t in _VARIANT_MARKERS for t in leftover):
            continue  # "rtx 4090" inside "rtx 4090 d" is a different GPU
        if any(t.isdigit() and len(t) >= 3 and t not in sizes for t in leftover):
            continue  # a model number the alias lacks: "A800 40GB Active" is not the A40
        score = (len(key), sum(map(len, key)), -i)
        if best is None or score > best:
            best, best_i = score, i
    return best_i


def lookup_gpu(name: str, memory_bytes: int | None = None) -> dict[str, Any] | None:
    """The table entry for a GPU name, or None.

    Case and punctuation are ignored, and so are "NVIDIA", "GeForce", "AMD", "Radeon",
    "Intel", "Apple". An exact normalized match wins; otherwise the longest alias whose
    tokens all occur in the name, provided the rest of the name adds no variant word
    (Ti, SUPER, D, XT, Max, Laptop, W, GTX, OEM...) and no model number of its own (a
    memory size such as "16GB" may stay). Given `memory_bytes`, a board sold with several
    memory sizes under one name (RTX 4060 Ti 8/16 GB) resolves to the closest size.
    """
    if not isinstance(name, str):
        return None
    i = _match_index(name)
    if i is None:
        return None
    table = _load()["gpus"]
    entry = table[i]
    if memory_bytes:
        base = entry.get("memory_variant_of", entry["name"])
        family = [e for e in table if e["name"] == base or e.get("memory_variant_of") == base]
        entry = min(family, key=lambda e: abs(e["memory_bytes"] - memory_bytes))
    return copy.deepcopy(entry)


def similar_gpu_names(name: str, n: int = 3) -> list[str]:
    """Up to n table names closest to a name the table does not know, for an error message
    ("RX 7900" -> the RX 7900 XTX, XT and GRE): aliases ranked by the words they share with
    the name (a model number among them), then by spelling; none when nothing is close."""
    import difflib

    query = normalize(name)
    if not query:
        return []
    table = _load()["gpus"]
    scored: dict[str, tuple[float, float]] = {}  # entry name -> best (shared words, spelling)
    for key, i in _index()[1]:  # every entry's normalized name and aliases
        shared = set(query) & set(key)
        if not any(t.isdigit() for t in shared):
            continue  # a suggestion shares the model number, or part of it
        score = (len(shared) / max(len(set(query)), len(set(key))),
                 difflib.SequenceMatcher(None, " ".join(query), " ".join(key)).ratio())
        name_i = table[i]["name"]
        scored[name_i] = max(scored.get(name_i, score), score)
    return sorted(scored, key=lambda k: scored[k], reverse=True)[:n]


def shared_memory_bytes(name: str) -> int | None:
    """The memory a table GPU shares with its CPU (its entry's memory_bytes): Apple chips and
    the entries marked unified_memory (DGX Spark's GB10, Strix Halo, Jetson, the iGPUs).
    None for a card with memory of its own, or a name the table does not know."""
    entry = lookup_gpu(name)
    if entry is None or not (entry.get("unified_memory") or entry["vendor"] == "apple"):
        return None
    return int(entry["memory_bytes"])


def lookup_amd_target(gfx: str, compute_units: int) -> list[dict[str, Any]]:
    """AMD entries with this ISA target and compute-unit count (the table's sm_count):
    an RX 7900 XTX's gfx1100 with 96 CUs, Strix Halo's 8060S gfx1151 with 40. Several where
    boards differ only in memory (the RX 7900 XTX and the PRO W7900)."""
    return [copy.deepcopy(e) for e in _load()["gpus"]
            if e["vendor"] == "amd" and e.get("gfx") == gfx and e.get("sm_count") == compute_units]


def lookup_pci_id(vendor_id: str, device_id: str) -> list[dict[str, Any]]:
    """Entries whose PCI device id matches (several products can share one id)."""
    vendor_of = {"0x10de": "nvidia", "0x1002": "amd", "0x8086": "intel"}
    vendor = vendor_of.get(vendor_id.strip().lower())
    dev = device_id.strip().lower()
    return [
        copy.deepcopy(e)
        for e in _load()["gpus"]
        if e["vendor"] == vendor and dev in (p.lower() for p in e.get("pci_ids", []))
    ]
