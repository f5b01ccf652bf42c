"""The "what if" machine: this machine's CPU with another GPU, a second GPU, or more RAM.

Plain functions over the core (no Qt): the profile is built through profile_from_dict, so
the GPU figures come from the bundled table exactly as for `--hardware FILE`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

from rooflight.hardware import HardwareProfile, gpu_table, profile_from_dict
from rooflight.hardware.enrich import ram_assumption
from rooflight.hardware.gpu_table import lookup_gpu, shared_memory_bytes


@dataclass(frozen=True)
class WhatIf:
    """What to change; None means "as detected"."""

    gpu: str | None = None  # table name replacing the detected GPUs ("" removes them)
    second_gpu: str | None = None  # table name of one more GPU
    ram_total_bytes: int | None = None
    remote_gpu: str | None = None  # table name of the GPU of a second PC, reached over llama.cpp RPC
    remote_link_gbps: float = 1.0  # its network link

    @property
    def is_empty(self) -> bool:
        return (self.gpu is None and self.second_gpu is None and self.ram_total_bytes is None
                and self.remote_gpu is None)

    def describe(self, short: bool = False) -> str:
        name = short_gpu if short else str
        parts = []
        if self.gpu == "":
            parts.append("no GPU")
        elif self.gpu:
            parts.append(name(self.gpu))
        if self.second_gpu:
            parts.append(f"+ {name(self.second_gpu)}")
        if self.ram_total_bytes:
            parts.append(f"{self.ram_total_bytes / 1e9:.0f} GB RAM")
        elif self.gpu and not short and (pool := shared_memory_bytes(self.gpu)):
            parts[-1] += f", {pool / 1e9:.0f} GB shared with the CPU"  # the app's decimal GB
        if self.remote_gpu:
            parts.append(f"+ a second PC with {name(self.remote_gpu)} over {link_name(self.remote_link_gbps)}")
        return " ".join(parts) or "this machine"


# Network links a what-if second PC can be reached over (Gbit/s)
LINKS = {1.0: "1 GbE", 2.5: "2.5 GbE", 10.0: "10 GbE", 0.3: "Wi-Fi"}

# The endpoint a planned second PC is given: nothing connects to it, it only names rpc0
WHAT_IF_ENDPOINT = "second-pc:50052"


def link_name(gbps: float) -> str:
    return LINKS.get(gbps, f"{gbps:g} Gbit/s")


def short_gpu(name: str) -> str:
    """"NVIDIA GeForce RTX 4090" -> "RTX 4090": the vendor words say nothing new."""
    for prefix, keep in (("NVIDIA GeForce ", ""), ("NVIDIA ", ""), ("AMD Radeon ", "Radeon "),
                         ("AMD Instinct ", "Instinct ")):
        if name.startswith(prefix):
            return keep + name[len(prefix):]
    return name


# The pick lists group the table's GPUs the way a buyer scans them: by vendor, then desktop
# cards before workstation and data-centre parts and integrated GPUs, then by number (the
# table file itself is in the order entries were added).
_VENDOR_ORDER = {"nvidia": 0, "amd": 1, "intel": 2, "apple": 3}
_FAMILIES = (  # (vendor, name fragment, rank): the first fragment found in the name decides
    ("nvidia", "GeForce", 0), ("nvidia", "TITAN", 0), ("nvidia", "NVIDIA RTX", 1), ("nvidia", "Quadro", 1),
    ("nvidia", "Jetson", 3),
    ("amd", "Radeon RX", 0), ("amd", "Radeon VII", 0), ("amd", "PRO", 1), ("amd", "Instinct", 2),
    ("intel", "Arc Pro", 1), ("intel", "Arc A", 0), ("intel", "Arc B5", 0),
)
_TIERS = {"Pro": 1, "Max": 2, "Ultra": 3}  # Apple: M4, M4 Pro, M4 Max, M4 Ultra


def _display_key(entry: dict) -> tuple:
    name, vendor = entry["name"], entry["vendor"]
    family = next((rank for v, fragment, rank in _FAMILIES if v == vendor and fragment in name),
                  3 if entry.get("unified_memory") else 2)
    # numbers compare as numbers (RTX 4060 < 4060 Ti < 4070); the MI50, sold as "Radeon
    # Instinct", sorts with the Instincts
    words = tuple((0, int(w), "") if w.isdigit() else (1, _TIERS.get(w, 0), w)
                  for w in re.findall(r"\d+|[^\d\s]+", name.replace("Radeon Instinct", "Instinct")))
    return _VENDOR_ORDER.get(vendor, 9), family, words


def table_gpu_names() -> list[str]:
    """Every GPU of the bundled table, as the what-if pick lists show them (_display_key)."""
    return [g["name"] for g in sorted(gpu_table(), key=_display_key)]


def what_if_profile(detected: HardwareProfile, what: WhatIf) -> HardwareProfile:
    """This machine with the changes in `what`. Hypothetical GPUs are assumed idle (all
    VRAM free) and driven by their vendor's native llama.cpp build."""
    if what.is_empty:
        return detected
    # the profile reader treats empty values as malformed: leave unknown fields out
    cpu = {k: v for k, v in asdict(detected.cpu).items() if v not in (None, "")}
    cpu["isa"] = list(detected.cpu.isa)
    # a GPU that shares the system's memory (DGX Spark, Strix Halo, Apple, Jetson) comes with
    # it: the planned machine's RAM is that one pool, which the GPU's share is taken out of,
    # not this machine's RAM beside a pool of its own
    pool = shared_memory_bytes(what.gpu) if what.gpu else None
    ram_total = what.ram_total_bytes or pool
    if what.gpu is None:
        gpus = [_as_input(g) for g in detected.gpus]
        backend = detected.backend if what.second_gpu is None else None
    else:
        gpus = [{"name": what.gpu, **({"unified_memory": True} if pool else {})}] if what.gpu else []
        backend = None
    if what.second_gpu:
        gpus.append({"name": what.second_gpu})
    for i, g in enumerate(gpus):
        g["index"] = i
    doc = {"cpu": cpu, "gpus": gpus}
    if backend is not None:
        doc["backend"] = backend
    if what.remote_gpu:
        doc["remotes"] = [{"endpoint": WHAT_IF_ENDPOINT, "name": "a second PC", "gpus": [{"name": what.remote_gpu}],
                           "link_gbps": what.remote_link_gbps, "rtt_ms": 0.5}]
    planned = profile_from_dict(doc, detect_cpu_if_missing=False, measure_bandwidth=False,
                                origin="the what-if machine")
    if ram_total:
        planned = replace(planned, cpu=detected.cpu.with_ram_total(int(ram_total)))
    return replace(planned, warnings=(*planned.warnings, *_ram_notes(planned)))


def _ram_notes(planned: HardwareProfile) -> list[str]:
    """A planned integrated GPU reads a machine's RAM, whose type its platform leaves open:
    say which one the plan assumes (the table's `ram_varies`)."""
    notes = []
    for g in planned.gpus:
        entry = lookup_gpu(g.name)
        if entry and entry.get("ram_varies") and g.bandwidth_gbs:
            notes.append(f"The planned {entry['name']} reads its machine's RAM: {ram_assumption(entry, g.bandwidth_gbs)}")
    return notes


def _as_input(g) -> dict:
    d = {k: v for k, v in asdict(g).items() if v not in (None, "")}
    d.pop("source", None)
    return d
