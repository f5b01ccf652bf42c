"""The RAM's speed and width from udev's decoding of the firmware's memory-device table
(hardware/ram_speed.py), in the form systemd's dmi_memory_id writes to /run/udev/data/+dmi:id."""

from __future__ import annotations

from pathlib import Path

from rooflight.hardware.ram_speed import RamModules, read_ram_modules

TWO_SODIMMS = """\
E:MEMORY_ARRAY_LOCATION=System Board Or Motherboard
E:MEMORY_ARRAY_MAX_CAPACITY=137438953472
E:MEMORY_DEVICE_0_TOTAL_WIDTH=64
E:MEMORY_DEVICE_0_DATA_WIDTH=64
E:MEMORY_DEVICE_0_SIZE=34359738368
E:MEMORY_DEVICE_0_FORM_FACTOR=SODIMM
E:MEMORY_DEVICE_0_LOCATOR=DIMM A
E:MEMORY_DEVICE_0_TYPE=<OUT OF SPEC>
E:MEMORY_DEVICE_0_SPEED_MTS=5600
E:MEMORY_DEVICE_0_CONFIGURED_SPEED_MTS=5600
E:MEMORY_DEVICE_1_TOTAL_WIDTH=64
E:MEMORY_DEVICE_1_DATA_WIDTH=64
E:MEMORY_DEVICE_1_SIZE=34359738368
E:MEMORY_DEVICE_1_FORM_FACTOR=SODIMM
E:MEMORY_DEVICE_1_TYPE=<OUT OF SPEC>
E:MEMORY_DEVICE_1_SPEED_MTS=5600
E:MEMORY_DEVICE_1_CONFIGURED_SPEED_MTS=5600
E:MEMORY_ARRAY_NUM_DEVICES=2
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "+dmi:id"
    path.write_text(text)
    return path


def test_two_ddr5_sodimms_are_two_channels_at_their_configured_speed(tmp_path):
    ram = read_ram_modules(write(tmp_path, TWO_SODIMMS))
    assert ram == RamModules(mts=5600, width_bits=128, count=2, kind="<OUT OF SPEC>", socketed=True)  # DDR5 on an older systemd
    assert ram.peak_gbs(128) == 89.6


def test_one_module_in_two_slots_is_one_channel(tmp_path):
    text = TWO_SODIMMS.replace("E:MEMORY_DEVICE_1_SIZE=34359738368\n", "E:MEMORY_DEVICE_1_PRESENT=0\n")
    assert read_ram_modules(write(tmp_path, text)).peak_gbs(128) == 44.8


def test_the_slowest_module_and_the_bus_width_bound_the_figure(tmp_path):
    """Four DIMMs on two channels are still a 128-bit bus; a module below the others' speed
    sets the speed (the controller runs them alike); the configured speed wins over the rated."""
    four = "".join(
        f"E:MEMORY_DEVICE_{i}_SIZE=17179869184\nE:MEMORY_DEVICE_{i}_FORM_FACTOR=DIMM\n"
        f"E:MEMORY_DEVICE_{i}_TYPE=DDR4\nE:MEMORY_DEVICE_{i}_SPEED_MTS=3200\n"
        f"E:MEMORY_DEVICE_{i}_CONFIGURED_SPEED_MTS={2933 if i == 3 else 3200}\n" for i in range(4))
    ram = read_ram_modules(write(tmp_path, four))
    assert (ram.mts, ram.width_bits, ram.kind) == (2933, 256, "DDR4")  # no DATA_WIDTH: a DIMM's 64 bits
    assert ram.peak_gbs(128) == 46.9


def soldered(n: int, width: int) -> str:
    return "".join(
        f"E:MEMORY_DEVICE_{i}_DATA_WIDTH={width}\nE:MEMORY_DEVICE_{i}_SIZE=2147483648\n"
        f"E:MEMORY_DEVICE_{i}_FORM_FACTOR=Row Of Chips\nE:MEMORY_DEVICE_{i}_CONFIGURED_SPEED_MTS=7500\n"
        for i in range(n))


def test_soldered_lpddr_fills_the_bus_whatever_widths_its_parts_are_given(tmp_path):
    """A board populates a soldered bus whole; firmware lists its parts in several ways."""
    for n, width in ((8, 16), (4, 32), (4, 64), (2, 32)):
        ram = read_ram_modules(write(tmp_path, soldered(n, width)))
        assert not ram.socketed and ram.peak_gbs(128) == 120.0, (n, width)


def test_what_the_table_does_not_say_is_not_guessed(tmp_path):
    no_speed = "E:MEMORY_DEVICE_0_SIZE=8589934592\nE:MEMORY_DEVICE_0_DATA_WIDTH=64\n"
    soldered_without_width = "E:MEMORY_DEVICE_0_SIZE=8589934592\nE:MEMORY_DEVICE_0_FORM_FACTOR=Other\n" \
                         "E:MEMORY_DEVICE_0_CONFIGURED_SPEED_MTS=4800\n"
    assert read_ram_modules(write(tmp_path, no_speed)) is None
    assert read_ram_modules(write(tmp_path, soldered_without_width)).peak_gbs(128) == 76.8  # soldered: the bus
    socket_without_width = "E:MEMORY_DEVICE_0_SIZE=8589934592\nE:MEMORY_DEVICE_0_FORM_FACTOR=SODIMM\n" \
                           "E:MEMORY_DEVICE_0_DATA_WIDTH=0\nE:MEMORY_DEVICE_0_CONFIGURED_SPEED_MTS=4800\n"
    assert read_ram_modules(write(tmp_path, socket_without_width)).peak_gbs(128) == 38.4  # a SO-DIMM's 64 bits
    assert read_ram_modules(write(tmp_path, "E:MEMORY_ARRAY_NUM_DEVICES=0\n")) is None
    assert read_ram_modules(tmp_path / "missing") is None


def smbios_type17(handle: int, size_mib: int, mts: int, form_factor: int = 0x0D, kind: int = 0x22,
                  width: int = 64) -> bytes:
    """One SMBIOS 3.x memory device (type 17, 0x28 bytes formatted) and its strings, laid out
    as the specification's table 7.18 (the offsets dmi_memory_id reads)."""
    data = bytearray(0x28)
    data[0], data[1] = 17, 0x28
    data[2:4] = handle.to_bytes(2, "little")
    data[0x08:0x0A] = (width if size_mib else 0xFFFF).to_bytes(2, "little")  # total width
    data[0x0A:0x0C] = (width if size_mib else 0xFFFF).to_bytes(2, "little")  # data width
    data[0x0C:0x0E] = (size_mib if size_mib < 0x7FFF else 0x7FFF).to_bytes(2, "little")
    data[0x0E], data[0x10], data[0x12] = form_factor, 1, kind  # locator: string 1
    data[0x15:0x17] = mts.to_bytes(2, "little")
    if size_mib >= 0x7FFF:
        data[0x1C:0x20] = size_mib.to_bytes(4, "little")
    data[0x20:0x22] = mts.to_bytes(2, "little")
    return bytes(data) + f"DIMM {handle}".encode() + b"\0\0"


def smbios_table(*devices: bytes) -> bytes:
    array = bytes([16, 0x17, 0x00, 0x10, 0x03, 0x03, 0x03]) + bytes(0x10) + b"\0\0"  # type 16, system memory
    return array + b"".join(devices) + bytes([127, 4, 0xFF, 0xFF]) + b"\0\0"


def test_the_raw_smbios_table_windows_gives_reads_as_udev_does():
    table = smbios_table(smbios_type17(0x20, 32768, 5600), smbios_type17(0x21, 0, 0), smbios_type17(0x22, 32768, 5600))
    ram = read_from_raw(table)
    assert ram == RamModules(mts=5600, width_bits=128, count=2, kind="DDR5", socketed=True)
    assert ram.peak_gbs(128) == 89.6
    # LPDDR5 soldered in four 32-bit parts of 8 GiB at 7500 MT/s (size in the extended field)
    parts = [smbios_type17(0x30 + i, 8192 if i % 2 else 0x7FFF + 1, 7500, form_factor=0x0B, kind=0x23, width=32)
             for i in range(4)]
    assert read_from_raw(smbios_table(*parts)).peak_gbs(128) == 120.0
    assert read_from_raw(b"") is None
    assert read_from_raw(table[:60]) is None  # cut inside a memory device: no error, nothing guessed


def read_from_raw(table: bytes):
    from rooflight.hardware.ram_speed import parse_smbios_memory

    return parse_smbios_memory(table)
