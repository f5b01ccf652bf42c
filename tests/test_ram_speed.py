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
    assert ram == RamModules(mts=5600, width_bits=128, count=2, kind="<OUT OF SPEC>")  # DDR5 on an older systemd
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


def test_soldered_lpddr_counted_by_its_parts(tmp_path):
    parts = "".join(
        f"E:MEMORY_DEVICE_{i}_DATA_WIDTH=16\nE:MEMORY_DEVICE_{i}_SIZE=2147483648\n"
        f"E:MEMORY_DEVICE_{i}_FORM_FACTOR=Row Of Chips\nE:MEMORY_DEVICE_{i}_CONFIGURED_SPEED_MTS=7500\n"
        for i in range(8))
    assert read_ram_modules(write(tmp_path, parts)).peak_gbs(128) == 120.0


def test_what_the_table_does_not_say_is_not_guessed(tmp_path):
    no_width = "E:MEMORY_DEVICE_0_SIZE=8589934592\nE:MEMORY_DEVICE_0_FORM_FACTOR=Row Of Chips\n" \
               "E:MEMORY_DEVICE_0_CONFIGURED_SPEED_MTS=6400\n"
    no_speed = "E:MEMORY_DEVICE_0_SIZE=8589934592\nE:MEMORY_DEVICE_0_DATA_WIDTH=64\n"
    assert read_ram_modules(write(tmp_path, no_width)) is None
    assert read_ram_modules(write(tmp_path, no_speed)) is None
    assert read_ram_modules(write(tmp_path, "E:MEMORY_ARRAY_NUM_DEVICES=0\n")) is None
    assert read_ram_modules(tmp_path / "missing") is None
