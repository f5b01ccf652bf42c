"""The RAM's configured speed and width, from the firmware's memory-device table (SMBIOS
type 17), for integrated GPUs whose bandwidth is the machine's RAM's.

Linux: the table itself is root's (/sys/firmware/dmi/tables/DMI), but systemd's udev runs its
`dmi_memory_id` helper at boot and keeps the result in its database, readable by everyone:
/run/udev/data/+dmi:id, lines such as `E:MEMORY_DEVICE_0_CONFIGURED_SPEED_MTS=5600`
(systemd src/udev/dmi_memory_id/dmi_memory_id.c: SIZE, PRESENT=0 for an empty slot,
FORM_FACTOR, TYPE, DATA_WIDTH, SPEED_MTS, CONFIGURED_SPEED_MTS per device).
Windows: GetSystemFirmwareTable('RSMB') gives the raw table to any desktop program, after an
8-byte RawSMBIOSData header (sysinfoapi.h); its type-17 fields are read at the offsets
dmi_memory_id reads them.
"""

from __future__ import annotations

import re
import struct
import sys
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
    socketed: bool = True  # every module a DIMM or SO-DIMM

    def peak_gbs(self, bus_bits: int) -> float:
        """Peak GB/s (1e9 B/s) over a memory bus of `bus_bits`, times the transfer rate: for
        DIMMs and SO-DIMMs their width, at most the bus's (one SO-DIMM in two slots is one
        channel; four DIMMs on two channels are still the bus); for soldered memory the bus,
        which a board populates whole, whatever widths the firmware gives its parts (some
        count an LPDDR channel's two halves twice, some list fewer parts)."""
        width = min(self.width_bits, bus_bits) if self.socketed else bus_bits
        return round(width / 8 * self.mts / 1000, 1)


def read_ram_modules(path: Path = UDEV_DMI) -> RamModules | None:
    """The populated modules, or None where the database is missing or does not give every
    module's speed, or a DIMM's width (then nothing is guessed; soldered memory is priced as
    the whole bus, its parts' widths unused)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    devices: dict[int, dict[str, str]] = {}  # udev's E:MEMORY_DEVICE_<n>_<KEY>=<value> lines
    for line in text.splitlines():
        if m := _LINE.match(line.strip()):
            devices.setdefault(int(m[1]), {})[m[2]] = m[3].strip()
    return _modules(list(devices.values()))


def _modules(devices: list[dict[str, str]]) -> RamModules | None:
    """RamModules from memory devices as dmi_memory_id names their fields (SIZE, PRESENT,
    FORM_FACTOR, TYPE, DATA_WIDTH, SPEED_MTS, CONFIGURED_SPEED_MTS)."""
    present = [d for d in devices if d.get("PRESENT") != "0" and _int(d.get("SIZE"))]
    socketed = all(d.get("FORM_FACTOR", "").upper() in _MODULE_WIDTH_BITS for d in present)
    speeds, widths = [], []
    for d in present:
        speed = _int(d.get("CONFIGURED_SPEED_MTS")) or _int(d.get("SPEED_MTS"))
        width = _int(d.get("DATA_WIDTH")) or _MODULE_WIDTH_BITS.get(d.get("FORM_FACTOR", "").upper(), 0)
        if not 800 <= speed <= 20000 or (socketed and not width):
            return None
        speeds.append(speed)
        widths.append(width)
    if not present:
        return None
    kinds = {d.get("TYPE") for d in present}
    return RamModules(min(speeds), sum(widths), len(present), kinds.pop() if len(kinds) == 1 else None, socketed)


def _int(value: str | None) -> int:
    try:
        return int(value) if value else 0
    except ValueError:
        return 0


# SMBIOS 3.x memory types (7.18.2) as dmi_memory_id names them, DDR5 and LPDDR5 added
_TYPES = {0x1A: "DDR4", 0x1B: "LPDDR", 0x1C: "LPDDR2", 0x1D: "LPDDR3", 0x1E: "LPDDR4", 0x22: "DDR5", 0x23: "LPDDR5"}
_FORM_FACTORS = {0x09: "DIMM", 0x0D: "SODIMM"}


def parse_smbios_memory(table: bytes) -> RamModules | None:
    """The populated memory devices of a raw SMBIOS structure table, as read_ram_modules
    reads udev's decoding of it: each structure is a formatted area (type, length, handle,
    fields) and its strings up to a double NUL. None where the table gives no usable one."""
    devices: list[dict[str, str]] = []
    at = 0
    while at + 4 <= len(table):
        kind, length = table[at], table[at + 1]
        if length < 4 or kind == 127:
            break
        data = table[at:at + length]
        if len(data) < length:  # a truncated table: what it lacks is not guessed
            break
        if kind == 17 and length >= 0x15:
            devices.append(_type17(data))
        end = table.find(b"\0\0", at + length)
        if end < 0:
            break
        at = end + 2
    return _modules(devices)


def _type17(data: bytes) -> dict[str, str]:
    def word(off: int) -> int:
        return struct.unpack_from("<H", data, off)[0] if len(data) >= off + 2 else 0

    out: dict[str, str] = {}
    size = word(0x0C)
    if size == 0:
        return {"PRESENT": "0"}
    if size == 0x7FFF and len(data) >= 0x20:
        out["SIZE"] = str(struct.unpack_from("<I", data, 0x1C)[0] << 20)
    elif size != 0xFFFF:
        out["SIZE"] = str((size & 0x7FFF) << (20 if size & 0x8000 == 0 else 10))
    if word(0x0A) not in (0, 0xFFFF):
        out["DATA_WIDTH"] = str(word(0x0A))
    out["FORM_FACTOR"] = _FORM_FACTORS.get(data[0x0E], "Other")
    out["TYPE"] = _TYPES.get(data[0x12], "Other")
    if len(data) >= 0x17 and word(0x15):
        out["SPEED_MTS"] = str(word(0x15))
    if len(data) >= 0x22 and word(0x20):
        out["CONFIGURED_SPEED_MTS"] = str(word(0x20))
    return out


def raw_smbios() -> bytes | None:
    """The raw SMBIOS table on Windows (GetSystemFirmwareTable 'RSMB', no administrator
    needed), without its 8-byte header; None elsewhere or where the call fails."""
    if sys.platform != "win32":
        return None
    import ctypes

    try:
        get = ctypes.windll.kernel32.GetSystemFirmwareTable
        signature = int.from_bytes(b"RSMB", "big")
        size = get(signature, 0, None, 0)
        if not size:
            return None
        buf = ctypes.create_string_buffer(size)
        if get(signature, 0, buf, size) != size:
            return None
        raw = buf.raw
        length = struct.unpack_from("<I", raw, 4)[0]
        return raw[8:8 + length]
    except (OSError, AttributeError, struct.error):
        return None
