"""The RAM's configured speed and width, from the firmware's memory-device table as udev
decodes it, for integrated GPUs whose bandwidth is the machine's RAM's.

The SMBIOS table itself is root's (/sys/firmware/dmi/tables/DMI), but systemd's udev runs its
`dmi_memory_id` helper at boot and keeps the result in its database, readable by everyone:
/run/udev/data/+dmi:id, lines such as `E:MEMORY_DEVICE_0_CONFIGURED_SPEED_MTS=5600`
(systemd src/udev/dmi_memory_id/dmi_memory_id.c: SIZE, PRESENT=0 for an empty slot,
FORM_FACTOR, TYPE, DATA_WIDTH, SPEED_MTS, CONFIGURED_SPEED_MTS per device).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

UDEV_DMI = Path("/run/udev/data/+dmi:id")
# a module whose table gives no data width: a DIMM or SO-DIMM carries 64 bits
_MODULE_WIDTH_BITS = {"DIMM": 64, "SODIMM": 64}
_LINE = re.compile(r"^E:MEMORY_DEVICE_(\d+)_([A-Z_]+)=(.*)$")


@dataclass(frozen=True)
class RamModules:
    """The populated memory devices: their slowest speed (MT/s), summed data width (bits),
    count and type as the firmware names it ("DDR5", "LPDDR4", or out of spec)."""

    mts: int
    width_bits: int
    count: int
    kind: str | None

    def peak_gbs(self, bus_bits: int) -> float:
        """Peak GB/s (1e9 B/s) over a memory bus of `bus_bits`: the modules' width, at most the
        bus's (four DIMMs on two channels, or firmware that counts an LPDDR channel's two
        halves twice, are still the bus), times the transfer rate."""
        return round(min(self.width_bits, bus_bits) / 8 * self.mts / 1000, 1)


def read_ram_modules(path: Path = UDEV_DMI) -> RamModules | None:
    """The populated modules, or None where the database is missing or does not give every
    module's speed and width (then nothing is guessed)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    devices: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        if m := _LINE.match(line.strip()):
            devices.setdefault(int(m[1]), {})[m[2]] = m[3].strip()
    present = [d for d in devices.values() if d.get("PRESENT") != "0" and _int(d.get("SIZE"))]
    speeds, widths = [], []
    for d in present:
        speed = _int(d.get("CONFIGURED_SPEED_MTS")) or _int(d.get("SPEED_MTS"))
        width = _int(d.get("DATA_WIDTH")) or _MODULE_WIDTH_BITS.get(d.get("FORM_FACTOR", "").upper())
        if not speed or not width or not 800 <= speed <= 20000:
            return None
        speeds.append(speed)
        widths.append(width)
    if not present:
        return None
    kinds = {d.get("TYPE") for d in present}
    return RamModules(min(speeds), sum(widths), len(present), kinds.pop() if len(kinds) == 1 else None)


def _int(value: str | None) -> int:
    try:
        return int(value) if value else 0
    except ValueError:
        return 0
