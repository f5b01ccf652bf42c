"""The bundled GPU table and name lookup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflight.hardware import gpu_table, lookup_gpu
from rooflight.hardware.gpu_table import lookup_pci_id, normalize, table_sources

GiB = 1 << 30
REQUIRED = {"name", "vendor", "memory_bytes", "bandwidth_gbs", "fp16_tflops", "aliases"}


def test_table_loads_from_the_package_and_matches_the_file():
    table = gpu_table()
    path = Path(__file__).resolve().parents[1] / "resources" / "gpus.json"
    on_disk = json.loads(path.read_text())
    assert len(table) == len(on_disk["gpus"]) >= 60
    assert "TechPowerUp" in table_sources() and "sparsity" in table_sources()


def test_every_entry_has_sane_figures():
    names = set()
    for e in gpu_table():
        assert REQUIRED <= e.keys(), e["name"]
        assert e["name"] not in names, f"duplicate {e['name']}"
        names.add(e["name"])
        assert e["vendor"] in {"nvidia", "amd", "intel", "apple"}
        assert isinstance(e["memory_bytes"], int) and 4 * GiB <= e["memory_bytes"] <= 320 * GiB  # 288 GB: B300, MI355X
        assert 60 <= e["bandwidth_gbs"] <= 8500, e["name"]
        assert 2 <= e["fp16_tflops"] <= 3000, e["name"]  # MI355X: 2,517 dense
        assert e["aliases"] and all(isinstance(a, str) for a in e["aliases"])
        if e["vendor"] == "apple":
            assert isinstance(e["gpu_cores"], int) and 7 <= e["gpu_cores"] <= 80
        if e["vendor"] == "nvidia":
            assert e["compute_capability"] in {"6.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"}
        variant = e.get("memory_variant_of")
        if variant:
            assert variant in {x["name"] for x in gpu_table()}


def test_no_alias_means_two_different_gpus():
    seen: dict[tuple[str, ...], str] = {}
    for e in gpu_table():
        for alias in {normalize(a) for a in [e["name"], *e["aliases"]]}:
            assert seen.setdefault(alias, e["name"]) == e["name"], alias


@pytest.mark.parametrize(
    "name",
    [
        "RTX 2060",
        "RTX 2080 Ti",
        "RTX 3060",
        "RTX 3090",
        "RTX 4060",
        "RTX 4090",
        "RTX 5090",
        "RTX 5060",
        "T4",
        "V100",
        "A100 40GB",
        "A100 80GB",
        "L4",
        "L40S",
        "H100 PCIe",
        "H100 SXM",
        "H200",
        "RX 6800 XT",
        "RX 7900 XTX",
        "RX 9070 XT",
        "MI100",
        "MI210",
        "MI250X",
        "MI300X",
        "MI325X",
        "Arc A380",
        "Arc A580",
        "Arc A750",
        "Arc A770",
        "Arc B570",
        "Arc B580",
        "M1",
        "M1 Pro",
        "M1 Max",
        "M1 Ultra",
        "M2",
        "M2 Ultra",
        "M3",
        "M3 Max",
        "M3 Ultra",
        "M4",
        "M4 Pro",
        "M4 Max",
        "Arc Pro B70",
        "Arc 140T",
        "Arc 130T",
        "Arc 130V",
        "Arc B390",
        "RTX 5090 Laptop GPU",
        "RTX 4060 Laptop GPU",
        "RTX 3060 Laptop GPU",
        "Radeon 8050S",
        "Radeon 880M",
        "Radeon 760M",
        "MI355X",
        "MI350X",
        "RTX PRO 4000 Blackwell",
        "RTX 4000 Ada",
        "RTX A2000",
        "RTX A5000",
        "A30",
        "H20",
        "B300",
        "RTX 5050",
        "GTX 1080 Ti",
        "GTX 1080",
        "GTX 1070",
        "Jetson Orin Nano Super",
        "Radeon VII",
        "RTX 3050",
        "RTX 3050 Laptop GPU",
        "RTX 5090 D",
        "TITAN V",
        "TITAN RTX",
        "Quadro RTX 8000",
        "Quadro RTX 6000",
        "Radeon PRO W7800",
        "Radeon PRO W6800",
        "RX 9070 GRE",
        "Radeon AI PRO R9600D",
        "MI300A",
        "Intel(R) Data Center GPU Max 1100",
        "Intel(R) Data Center GPU Flex 170",
        "Jetson AGX Thor",
        "GTX 1060 6GB",
        "GTX 1070 Ti",
        "RTX A4500",
        "NVIDIA H800 PCIe",
        "NVIDIA A800 80GB PCIe",
        "NVIDIA L20",
        "RX 580",
        "RX Vega 56",
        "RX Vega 64",
        "RX 5500 XT",
        "RX 5600 XT",
        "RX 6500 XT",
        "RX 9060",
        "Radeon 8040S",
        "Radeon 860M",
        "RTX 3050 Ti Laptop GPU",
        "RTX 3070 Ti Laptop GPU",
        "RTX 3080 Ti Laptop GPU",
        "RTX 5050 Laptop GPU",
    ],
)
def test_each_named_family_is_covered(name):
    assert lookup_gpu(name) is not None, name


def test_well_known_figures():
    g = lookup_gpu("NVIDIA GeForce RTX 4090")
    assert (g["memory_bytes"], g["bandwidth_gbs"], g["fp16_tflops"]) == (24 * GiB, 1008.0, 165.2)
    assert lookup_gpu("RTX 3090")["bandwidth_gbs"] == pytest.approx(936, abs=1)
    assert lookup_gpu("RTX 3060")["bandwidth_gbs"] == 360.0
    assert lookup_gpu("M2 Max")["bandwidth_gbs"] == 400.0
    assert lookup_gpu("Apple M2")["bandwidth_gbs"] == 100.0
    assert lookup_gpu("H100 SXM")["fp16_tflops"] == pytest.approx(989.4)  # dense, not 1979


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
        ("rtx4090", "NVIDIA GeForce RTX 4090"),
        ("4090", "NVIDIA GeForce RTX 4090"),
        ("GeForce RTX 4090 D", "NVIDIA GeForce RTX 4090 D"),
        ("RTX 4060 Ti", "NVIDIA GeForce RTX 4060 Ti"),
        ("nvidia geforce rtx 4060", "NVIDIA GeForce RTX 4060"),
        ("RTX 4070 SUPER", "NVIDIA GeForce RTX 4070 SUPER"),
        ("RTX 4070 Ti SUPER", "NVIDIA GeForce RTX 4070 Ti SUPER"),
        ("Tesla T4", "NVIDIA T4"),
        ("Tesla V100-SXM2-16GB", "NVIDIA V100 SXM2 16GB"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB"),
        ("NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80GB"),
        ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe 40GB"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),
        ("NVIDIA L40S", "NVIDIA L40S"),
        ("NVIDIA L40", "NVIDIA L40"),
        ("AMD Radeon RX 7900 XTX", "AMD Radeon RX 7900 XTX"),
        ("Radeon RX 7900 XT", "AMD Radeon RX 7900 XT"),
        ("AMD Instinct MI300X", "AMD Instinct MI300X"),
        ("MI250", "AMD Instinct MI250"),
        ("Intel(R) Arc(TM) B580 Graphics", "Intel Arc B580"),
        ("Apple M2 Max", "Apple M2 Max"),
        ("Apple M2", "Apple M2"),
        ("apple m3 ultra", "Apple M3 Ultra"),
        # laptop boards by the names nvidia-smi reports, and their desktop namesakes unchanged
        ("NVIDIA GeForce RTX 4070 Laptop GPU", "NVIDIA GeForce RTX 4070 Laptop GPU"),
        ("RTX 4070 Laptop GPU", "NVIDIA GeForce RTX 4070 Laptop GPU"),
        ("RTX 4070", "NVIDIA GeForce RTX 4070"),
        ("NVIDIA GeForce RTX 5090 Laptop GPU", "NVIDIA GeForce RTX 5090 Laptop GPU"),
        ("NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090"),
        ("NVIDIA GeForce RTX 3060 Laptop GPU", "NVIDIA GeForce RTX 3060 Laptop GPU"),
        ("RTX 3060", "NVIDIA GeForce RTX 3060"),
        ("NVIDIA GeForce RTX 5050", "NVIDIA GeForce RTX 5050"),
        ("Intel(R) Arc(TM) Pro B70 Graphics", "Intel Arc Pro B70"),
        ("Intel(R) Arc(TM) 140T GPU (16GB)", "Intel Arc 140T"),
        ("Intel(R) Arc(TM) 130V GPU (16GB)", "Intel Arc 130V"),
        ("Intel(R) Arc(TM) 140V GPU (16GB)", "Intel Arc 140V"),
        ("Intel(R) Arc(TM) B390 GPU", "Intel Arc B390"),
        ("AMD Radeon 8050S Graphics", "AMD Radeon 8050S"),
        ("AMD Radeon 8060S Graphics", "AMD Radeon 8060S"),
        ("AMD Radeon 880M Graphics", "AMD Radeon 880M"),
        ("AMD Instinct MI355X", "AMD Instinct MI355X"),
        ("NVIDIA RTX 4000 Ada Generation", "NVIDIA RTX 4000 Ada Generation"),
        ("NVIDIA RTX PRO 4000 Blackwell", "NVIDIA RTX PRO 4000 Blackwell"),
        ("NVIDIA RTX A2000 12GB", "NVIDIA RTX A2000 12GB"),
        ("NVIDIA RTX A5000", "NVIDIA RTX A5000"),
        ("NVIDIA H20", "NVIDIA H20"),
        ("NVIDIA H200", "NVIDIA H200"),
        ("NVIDIA B300 SXM6 AC", "NVIDIA B300"),
        ("Meteor Lake", "Intel Arc Graphics (Meteor Lake)"),
        ("NVIDIA GeForce RTX 4080 Laptop GPU", "NVIDIA GeForce RTX 4080 Laptop GPU"),  # not the desktop RTX 4080
        ("RTX 4050 Laptop GPU", "NVIDIA GeForce RTX 4050 Laptop GPU"),
        # added 2026-12-07, by the names their drivers or boards report
        ("NVIDIA GeForce RTX 5070 Ti Laptop GPU", "NVIDIA GeForce RTX 5070 Ti Laptop GPU"),
        ("RTX 5070 Ti", "NVIDIA GeForce RTX 5070 Ti"),  # the desktop board stays itself
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "NVIDIA RTX PRO 6000 Blackwell"),
        ("NVIDIA RTX PRO 2000 Blackwell", "NVIDIA RTX PRO 2000 Blackwell"),
        ("Quadro RTX 5000", "NVIDIA Quadro RTX 5000"),
        ("NVIDIA TITAN Xp", "NVIDIA TITAN Xp"),
        ("NVIDIA GH200 480GB", "NVIDIA GH200"),
        ("NVIDIA GH200 144G HBM3e", "NVIDIA GH200 144G HBM3e"),
        ("NVIDIA A2", "NVIDIA A2"),
        ("NVIDIA Jetson Orin Nano Engineering Reference Developer Kit", "NVIDIA Jetson Orin Nano 8GB"),
        ("NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super", "NVIDIA Jetson Orin Nano Super"),
        ("Jetson Orin NX 16GB", "NVIDIA Jetson Orin NX 16GB"),
        ("AMD Radeon RX 6700", "AMD Radeon RX 6700"),
        ("AMD Radeon RX 6700 XT", "AMD Radeon RX 6700 XT"),
        ("AMD Radeon RX 5700", "AMD Radeon RX 5700"),
        ("AMD Radeon RX 5700 XT", "AMD Radeon RX 5700 XT"),
        ("RX 6750 GRE", "AMD Radeon RX 6750 GRE 12GB"),
        ("AMD Radeon RX 7650 GRE", "AMD Radeon RX 7650 GRE"),
        ("AMD Radeon RX 7700", "AMD Radeon RX 7700"),
        ("AMD Radeon RX 7700 XT", "AMD Radeon RX 7700 XT"),
        ("AMD Radeon RX 6500", "AMD Radeon RX 6500"),
        ("Intel(R) Arc(TM) B370 GPU", "Intel Arc B370"),
        ("Intel(R) Arc(TM) A310 LP Graphics", "Intel Arc A310"),
        ("AMD Radeon 680M Graphics", "AMD Radeon 680M"),
        ("AMD Radeon 660M", "AMD Radeon 660M"),
        ("Intel(R) Iris(R) Xe Graphics", "Intel Iris Xe Graphics"),
        ("Tesla P4", "NVIDIA Tesla P4"),
        ("Tesla P40", "NVIDIA Tesla P40"),
        ("Tesla P100-PCIE-16GB", "NVIDIA Tesla P100 PCIe 16GB"),  # the names nvidia-smi reports
        ("Tesla P100-PCIE-12GB", "NVIDIA Tesla P100 PCIe 12GB"),
        ("Tesla P100-SXM2-16GB", "NVIDIA Tesla P100 SXM2 16GB"),
        ("AMD Radeon PRO W7700", "AMD Radeon PRO W7700"),
    ],
)
def test_lookup_matches(query, expected):
    assert lookup_gpu(query)["name"] == expected


@pytest.mark.parametrize(
    "query",
    [
        "NVIDIA GeForce RTX 4080 Max-Q",
        "NVIDIA RTX PRO 4000 Blackwell SFF Edition",  # the 70 W small-form-factor board, not the full-size one
        "NVIDIA RTX 4000 SFF Ada Generation",
        "AMD Radeon RX 7600M XT",
        "NVIDIA GeForce RTX 4050",  # not in the table; must not fall back to "RTX 40"-anything
        "NVIDIA GeForce RTX 5060 Ti Laptop GPU",  # not in the table: neither the 5060 Laptop nor the desktop 5060 Ti
        "NVIDIA RTX A2000 Laptop GPU",
        "NVIDIA RTX A5000 Laptop GPU",  # GA104, 16 GB: not the desktop GA102 card
        "NVIDIA RTX A5500",  # not in the table: must not fall back to the RTX A5000
        "Intel(R) Arc(TM) Graphics",  # Meteor Lake's generic name: no alias, it would match any Arc
        "Intel Arc A350M",  # not in the table: must not fall back to the Arc A380 or an Arc iGPU
        "Apple M5 Ultra",  # not in the table: must not fall back to the M5 or M5 Max
        "Quadro RTX 4000",  # not in the table: must not fall back to the Quadro RTX 5000, 6000 or 8000
        "W7600",  # AMD's Radeon PRO W7600, not the RX 7600 (the "W" marks another board)
        "NVIDIA A800 40GB Active",  # not the A40: a model number the alias lacks
        "NVIDIA GeForce GTX 860M",  # not the Radeon 860M once "GeForce" and "Radeon" are dropped
        "NVIDIA GeForce RTX 3050 OEM",  # another configuration than the retail RTX 3050
        "NVIDIA GeForce GTX 1660 SUPER",  # the GTX 16 boards are not listed (README: no tensor cores)
        "Radeon PRO W7500",
        "RX 9070 GRE Laptop",
        "",
        "NVIDIA",
    ],
)
def test_lookup_refuses_look_alikes(query):
    assert lookup_gpu(query) is None


def test_lookup_does_not_confuse_ti_or_d_variants():
    assert lookup_gpu("RTX 4060 Ti")["name"] != lookup_gpu("RTX 4060")["name"]
    assert lookup_gpu("RTX 4090")["name"] != lookup_gpu("RTX 4090 D")["name"]
    assert lookup_gpu("M2")["name"] == "Apple M2"


def test_laptop_boards_keep_their_own_figures():
    # a laptop board is another chip, clock and memory than its desktop namesake (the 3060 Laptop even has
    # more SMs than the desktop 3060), so a lookup must never hand one the other's figures
    for name in ("RTX 4070", "RTX 4060", "RTX 3080", "RTX 3070", "RTX 3060", "RTX 5090", "RTX 5080", "RTX 5070",
                 "RTX 5060"):
        laptop, desktop = lookup_gpu(f"NVIDIA GeForce {name} Laptop GPU"), lookup_gpu(f"NVIDIA GeForce {name}")
        assert laptop["name"].endswith("Laptop GPU") and not desktop["name"].endswith("Laptop GPU"), name
        assert (laptop["bandwidth_gbs"], laptop["fp16_tflops"]) != (desktop["bandwidth_gbs"], desktop["fp16_tflops"])
        assert laptop["bandwidth_gbs"] <= desktop["bandwidth_gbs"], name
        assert "MHz" in laptop["source"] and "derived" in laptop["source"], name  # the clock its rates assume
    # the RTX 5050 Laptop GPU has GDDR7 where the desktop card has GDDR6: its own, faster memory
    laptop, desktop = lookup_gpu("NVIDIA GeForce RTX 5050 Laptop GPU"), lookup_gpu("NVIDIA GeForce RTX 5050")
    assert laptop["name"].endswith("Laptop GPU") and (laptop["bandwidth_gbs"], desktop["bandwidth_gbs"]) == (384.0, 320.0)
    # the Ti laptop boards are not the plain ones
    assert lookup_gpu("NVIDIA GeForce RTX 3080 Ti Laptop GPU")["sm_count"] != lookup_gpu("RTX 3080 Laptop GPU")["sm_count"]
    # GeForce ratios hold on the new boards: FP16-accumulate 2x, int8 4x the FP32-accumulate rate
    g = lookup_gpu("RTX 4070 Laptop GPU")
    assert g["fp16_acc16_tflops"] == pytest.approx(2 * g["fp16_tflops"], abs=0.1)
    assert g["int8_tops"] == pytest.approx(4 * g["fp16_tflops"], abs=0.2)


def test_new_igpus_share_system_memory_and_cite_sources():
    for name in ("Intel Arc 130V", "Intel Arc 140T", "Intel Arc 130T", "Intel Arc B390", "AMD Radeon 8050S",
                 "AMD Radeon 880M", "AMD Radeon 760M"):
        e = lookup_gpu(name)
        assert e["unified_memory"] is True and e["source"], name
    assert lookup_gpu("AMD Radeon 8050S")["gfx"] == lookup_gpu("AMD Radeon 8060S")["gfx"] == "gfx1151"


def test_memory_resolves_boards_that_share_a_name():
    assert lookup_gpu("NVIDIA GeForce RTX 4060 Ti", 16 * GiB)["name"].endswith("16GB")
    assert lookup_gpu("NVIDIA GeForce RTX 4060 Ti", 8 * GiB)["name"].endswith("4060 Ti")
    assert lookup_gpu("NVIDIA GeForce RTX 3080", 12 * GiB - (300 << 20))["memory_bytes"] == 12 * GiB
    assert lookup_gpu("Intel Arc A770", 8 * GiB)["bandwidth_gbs"] == 512.0
    assert lookup_gpu("NVIDIA RTX A2000", 12 * GiB)["name"] == "NVIDIA RTX A2000 12GB"
    assert lookup_gpu("NVIDIA RTX A2000", 6 * GiB)["name"] == "NVIDIA RTX A2000"
    # the 70 W RTX 3050 6GB reports the 8 GB card's name (nvidia-smi), and is a slower board
    assert lookup_gpu("NVIDIA GeForce RTX 3050", 6 * GiB - (200 << 20))["bandwidth_gbs"] == 168.0
    assert lookup_gpu("NVIDIA GeForce RTX 3050", 8 * GiB)["bandwidth_gbs"] == 224.0
    assert lookup_gpu("AMD Radeon PRO W7800", 48 * GiB)["bandwidth_gbs"] == 864.0


def test_pci_ids():
    names = {e["name"] for e in lookup_pci_id("0x1002", "0x744C")}
    assert names == {"AMD Radeon RX 7900 XTX", "AMD Radeon RX 7900 XT", "AMD Radeon RX 7900 GRE"}
    assert [e["name"] for e in lookup_pci_id("0x8086", "0x56a0")][0] == "Intel Arc A770"
    assert lookup_pci_id("0x10de", "0x744c") == []
    assert [e["name"] for e in lookup_pci_id("0x8086", "0xE223")] == ["Intel Arc Pro B70"]


def test_an_unknown_name_is_told_the_closest_table_names():
    from rooflight.errors import BadInputError
    from rooflight.hardware import profile_from_dict
    from rooflight.hardware.gpu_table import similar_gpu_names

    assert similar_gpu_names("RX 7900") == ["AMD Radeon RX 7900 XT", "AMD Radeon RX 7900 GRE", "AMD Radeon RX 7900 XTX"]
    assert "NVIDIA GeForce RTX 3080 Ti" in similar_gpu_names("RTX 3080 Ti Laptop")
    assert similar_gpu_names("banana") == [] and similar_gpu_names("") == []  # nothing close: no guess
    with pytest.raises(BadInputError, match=r'"RX 7900" is not in .* \(closest there: AMD Radeon RX 7900 XT, '):
        profile_from_dict({"gpus": [{"name": "RX 7900"}]}, measure_bandwidth=False)
