"""AMD and Intel detection on fake /sys trees."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from rooflight.hardware.amd import detect_amd
from rooflight.hardware.detection import Probes, detect
from rooflight.hardware.intel import detect_intel

GiB = 1 << 30


def make_card(
    root: Path, n: int, bdf: str, vendor: str, device: str, files: dict[str, str]
) -> Path:
    """/sys/class/drm/cardN -> device symlink to /sys/devices/pci.../BDF, like the kernel."""
    dev = root / "devices" / "pci0000:00" / bdf
    dev.mkdir(parents=True)
    (dev / "vendor").write_text(vendor + "\n")
    (dev / "device").write_text(device + "\n")
    card = root / "class" / "drm" / f"card{n}"
    card.mkdir(parents=True)
    (card / "device").symlink_to(dev)
    for rel, text in files.items():
        target = card / rel[5:] if rel.startswith("card/") else dev / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + "\n")
    # Connectors and render nodes live beside the cards and must be ignored.
    (root / "class" / "drm" / f"card{n}-DP-1").mkdir()
    return dev


def no_amdsmi(name):
    raise ImportError(name)


def test_amd_cards_with_exact_vram(tmp_path):
    make_card(
        tmp_path,
        0,
        "0000:03:00.0",
        "0x1002",
        "0x744c",
        {
            "mem_info_vram_total": str(24 * GiB),
            "mem_info_vram_used": str(1 * GiB),
            "max_link_speed": "16.0 GT/s PCIe",
            "max_link_width": "16",
        },
    )
    make_card(
        tmp_path,
        1,
        "0000:04:00.0",
        "0x1002",
        "0x74a1",
        {
            "mem_info_vram_total": str(192 * GiB),
            "mem_info_vram_used": "0",
            "product_name": "AMD Instinct MI300X",
        },
    )
    gpus, warnings = detect_amd(tmp_path, importer=no_amdsmi)
    assert warnings == []
    assert [g.name for g in gpus] == ["AMD Radeon RX 7900 XTX", "AMD Instinct MI300X"]
    assert gpus[0].vram_total_bytes == 24 * GiB and gpus[0].vram_free_bytes == 23 * GiB
    assert gpus[0].pcie_gbs == pytest.approx(31.5)
    assert gpus[1].index == 1 and gpus[1].vendor == "amd"


def test_amd_shared_pci_id_resolved_by_vram_or_warned(tmp_path):
    make_card(
        tmp_path,
        0,
        "0000:03:00.0",
        "0x1002",
        "0x744c",
        {"mem_info_vram_total": str(20 * GiB), "mem_info_vram_used": "0"},
    )
    make_card(
        tmp_path,
        1,
        "0000:04:00.0",
        "0x1002",
        "0x73bf",
        {"mem_info_vram_total": str(16 * GiB), "mem_info_vram_used": "0"},
    )
    gpus, warnings = detect_amd(tmp_path, importer=no_amdsmi)
    assert gpus[0].name == "AMD Radeon RX 7900 XT"
    assert gpus[1].name == "AMD Radeon RX 6800"  # 6800 / 6800 XT / 6900 XT: the slowest
    assert len(warnings) == 1 and "RX 6900 XT" in warnings[0] and "amdsmi" in warnings[0]


def test_amd_names_from_amdsmi_by_bus_id(tmp_path):
    make_card(
        tmp_path,
        0,
        "0000:04:00.0",
        "0x1002",
        "0x73bf",
        {"mem_info_vram_total": str(16 * GiB), "mem_info_vram_used": str(GiB)},
    )
    smi = types.ModuleType("amdsmi")
    smi.amdsmi_init = lambda: None
    smi.amdsmi_shut_down = lambda: None
    smi.amdsmi_get_processor_handles = lambda: ["h0"]
    smi.amdsmi_get_gpu_device_bdf = lambda h: "0000:04:00.0"
    smi.amdsmi_get_gpu_asic_info = lambda h: {"market_name": "AMD Radeon RX 6800 XT"}
    gpus, warnings = detect_amd(tmp_path, importer=lambda name: smi)
    assert gpus[0].name == "AMD Radeon RX 6800 XT" and warnings == []


def test_amd_apu_carve_out_is_not_a_gpu(tmp_path):
    make_card(
        tmp_path,
        0,
        "0000:05:00.0",
        "0x1002",
        "0x15bf",
        {"mem_info_vram_total": str(512 << 20), "mem_info_vram_used": str(100 << 20)},
    )
    gpus, warnings = detect_amd(tmp_path, importer=no_amdsmi)
    assert gpus == [] and "integrated" in warnings[0]


def test_amd_mi250x_dies_get_half_the_package(tmp_path):
    for n in range(2):
        make_card(
            tmp_path,
            n,
            f"0000:0{n + 3}:00.0",
            "0x1002",
            "0x7408",
            {"mem_info_vram_total": str(64 * GiB), "mem_info_vram_used": "0"},
        )
    p = detect(
        measure_bandwidth=False,
        probes=Probes(
            sysfs_root=tmp_path,
            nvml=types.ModuleType("pynvml"),
            importer=no_amdsmi,
            platform_name="linux",
            machine="x86_64",
        ),
    )
    assert [g.name for g in p.gpus] == ["AMD Instinct MI250X"] * 2
    assert p.gpus[1].bandwidth_gbs == pytest.approx(1638.4)
    assert p.gpus[1].fp16_tflops == pytest.approx(191.5) and p.gpus[1].sm_count == 110


def test_intel_arc_on_xe_i915_and_mainline(tmp_path):
    # xe: per-tile physical VRAM
    make_card(
        tmp_path,
        0,
        "0000:03:00.0",
        "0x8086",
        "0xe20b",
        {"tile0/physical_vram_size_bytes": str(12 * GiB)},
    )
    # out-of-tree i915: lmem_total_bytes on the card dir; an A770 with 8 GB
    make_card(
        tmp_path, 1, "0000:04:00.0", "0x8086", "0x56a0", {"card/lmem_total_bytes": str(8 * GiB)}
    )
    # mainline i915: nothing published, known by its PCI id
    make_card(tmp_path, 2, "0000:05:00.0", "0x8086", "0x56a5", {})
    # integrated UHD graphics: skipped
    make_card(tmp_path, 3, "0000:00:02.0", "0x8086", "0x46a6", {})
    gpus, warnings = detect_intel(tmp_path)
    assert warnings == []
    assert [g.name for g in gpus] == ["Intel Arc B580", "Intel Arc A770 8GB", "Intel Arc A380"]
    assert [g.vram_total_bytes for g in gpus] == [12 * GiB, 8 * GiB, None]
    assert all(g.vram_free_bytes is None for g in gpus)


def test_intel_fill_from_table_in_detect(tmp_path):
    make_card(tmp_path, 0, "0000:05:00.0", "0x8086", "0x56a5", {})
    p = detect(
        measure_bandwidth=False,
        probes=Probes(
            sysfs_root=tmp_path,
            nvml=types.ModuleType("pynvml"),
            importer=no_amdsmi,
            platform_name="linux",
            machine="x86_64",
        ),
    )
    (g,) = p.gpus
    assert g.vram_total_bytes == 6 * GiB and g.bandwidth_gbs == 186.0 and g.fp16_tflops == 32.8
    assert g.source == "detected+table"


def test_missing_sysfs_is_no_gpu(tmp_path):
    assert detect_amd(tmp_path / "nope", importer=no_amdsmi) == ([], [])
    assert detect_intel(tmp_path / "nope") == ([], [])
