"""AMD and Intel detection on fake /sys trees."""

from __future__ import annotations

import dataclasses
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


def kfd_node(root: Path, n: int, bdf: str, gfx_version: int, compute_units: int, simd_per_cu: int = 2) -> None:
    """A KFD topology node as the kernel writes it: "key value" lines, the PCI address
    as location_id (bus << 8 | device << 3 | function)."""
    domain, bus, devfn = bdf.split(":")
    dev, fn = devfn.split(".")
    loc = int(bus, 16) << 8 | int(dev, 16) << 3 | int(fn)
    node = root / "class" / "kfd" / "kfd" / "topology" / "nodes" / str(n)
    node.mkdir(parents=True)
    (node / "properties").write_text(
        f"cpu_cores_count 0\nsimd_count {compute_units * simd_per_cu}\nsimd_per_cu {simd_per_cu}\n"
        f"gfx_target_version {gfx_version}\ndevice_id 29772\nlocation_id {loc}\ndomain {int(domain, 16)}\n")


def test_kfd_names_the_board_a_pci_id_leaves_open(tmp_path):
    """0x744c is the RX 7900 XTX, XT and GRE: 20 GiB picked the XT before, and a 16 GiB
    card could be a GRE or something else; KFD's 80 CUs of gfx1100 say GRE."""
    from rooflight.hardware.kfd import gfx_target, kfd_gpus

    assert (gfx_target(110501), gfx_target(90402), gfx_target(90010), gfx_target(0)) == (
        "gfx1151", "gfx942", "gfx90a", None)
    (tmp_path / "class" / "kfd" / "kfd" / "topology" / "nodes" / "0").mkdir(parents=True)
    (tmp_path / "class" / "kfd" / "kfd" / "topology" / "nodes" / "0" / "properties").write_text(
        "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")  # the CPU's node
    make_card(tmp_path, 0, "0000:03:00.0", "0x1002", "0x744c",
              {"mem_info_vram_total": str(16 * GiB), "mem_info_vram_used": "0"})
    kfd_node(tmp_path, 1, "0000:03:00.0", 110000, 80)
    assert [(k, v.gfx, v.compute_units) for k, v in kfd_gpus(tmp_path).items()] == [("0000:03:00.0", "gfx1100", 80)]
    gpus, warnings = detect_amd(tmp_path, importer=no_amdsmi)
    assert [g.name for g in gpus] == ["AMD Radeon RX 7900 GRE"] and warnings == []


def _strix_halo(root: Path, carve_out: int, gtt: int) -> None:
    make_card(root, 1, "0000:c6:00.0", "0x1002", "0x1586",
              {"mem_info_vram_total": str(carve_out), "mem_info_vram_used": str(100 << 20),
               "mem_info_gtt_total": str(gtt)})
    kfd_node(root, 1, "0000:c6:00.0", 110501, 40)


def _detect(root: Path):
    return detect(measure_bandwidth=False, probes=Probes(sysfs_root=root, nvml=types.ModuleType("pynvml"),
                                                         importer=no_amdsmi, platform_name="linux",
                                                         machine="x86_64"))


def test_an_apu_with_a_small_carve_out_is_a_gpu_on_its_gtt(tmp_path):
    """A Ryzen AI Max+ 395 with the BIOS carve-out at its minimum: llama.cpp's HIP reports
    the GTT's size as the device's memory; Rooflight plans it as one pool with the RAM."""

    _strix_halo(tmp_path, 512 << 20, 96 * GiB)
    p = _detect(tmp_path)
    (gpu,) = p.gpus
    assert (gpu.name, gpu.unified_memory, gpu.vram_total_bytes) == ("AMD Radeon 8060S", True, 96 * GiB)
    assert gpu.vram_free_bytes == min(96 * GiB, p.cpu.ram_available_bytes)  # bounded by free RAM
    assert gpu.bandwidth_gbs == 256.0 and gpu.fp16_tflops  # the table's figures, by name
    assert not any("integrated" in w for w in p.warnings)
    # as with llama.cpp's ROCm build installed (this one is CPU-only)
    assert_planned_in_one_pool(tmp_path, dataclasses.replace(p, backend="rocm"))


def assert_planned_in_one_pool(tmp_path: Path, p) -> None:
    """A plan on this profile puts a small model wholly on its one unified-memory GPU and
    counts the GPU's share out of the same RAM the CPU side has."""
    from rooflight.estimate import Wishes, plan
    from rooflight.gguf import load_model_spec
    from rooflight.gguf.synthetic import write_model

    model = write_model(tmp_path / "m.gguf", n_layer=4, n_embd=256, n_ff=512, n_vocab=2000, ftype="F16")
    est = plan(load_model_spec(model), p, Wishes(n_ctx=512))
    assert est.config.n_gpu_layers == 5  # every layer and the output
    gpu_mem = next(d for d in est.memory.devices if d.device != "cpu")
    cpu_mem = next(d for d in est.memory.devices if d.device == "cpu")
    assert cpu_mem.available_bytes <= p.cpu.ram_available_bytes - gpu_mem.total_bytes


def test_an_apu_with_a_large_carve_out_is_a_gpu_of_its_carve_out(tmp_path):
    """A 64 GiB carve-out and a smaller GTT: HIP uses the carve-out, memory of its own."""
    _strix_halo(tmp_path, 64 * GiB, 32 * GiB)
    (gpu,) = _detect(tmp_path).gpus
    assert (gpu.name, gpu.unified_memory, gpu.vram_total_bytes) == ("AMD Radeon 8060S", False, 64 * GiB)


def test_an_unknown_integrated_gpu_stays_out_with_its_reason(tmp_path):
    make_card(tmp_path, 0, "0000:05:00.0", "0x1002", "0x15bf",
              {"mem_info_vram_total": str(512 << 20), "mem_info_vram_used": "0",
               "mem_info_gtt_total": str(16 * GiB)})
    gpus, warnings = detect_amd(tmp_path, importer=no_amdsmi)
    assert gpus == [] and "not counted as a GPU" in warnings[0]
    # known by KFD (a 780M: gfx1103, 12 CUs) but with no GTT file: still out, and said why
    (tmp_path / "devices" / "pci0000:00" / "0000:05:00.0" / "mem_info_gtt_total").unlink()
    kfd_node(tmp_path, 1, "0000:05:00.0", 110003, 12)
    gpus, warnings = detect_amd(tmp_path, importer=no_amdsmi)
    assert gpus == [] and "a AMD Radeon 780M whose shared memory, GTT, is not larger" in warnings[0]


# ---- Intel integrated GPUs -------------------------------------------------------------

def test_intel_integrated_memory_is_what_llama_cpps_backends_report():
    """Mesa's Vulkan heap (1/2 of the RAM up to 4 GiB, 3/4 above) or the compute runtime's
    SYCL figure (80% less 450 MiB), whichever is smaller."""
    from rooflight.hardware.intel import integrated_memory_bytes

    assert integrated_memory_bytes(4 * GiB) == 2 * GiB  # Vulkan's half
    assert integrated_memory_bytes(8 * GiB) == int(8 * GiB * 0.8) - (450 << 20)  # SYCL's is smaller
    assert integrated_memory_bytes(16 * GiB) == 12 * GiB  # from 9 GB on, Vulkan's 3/4
    assert integrated_memory_bytes(32 * GiB) == 24 * GiB


@pytest.mark.parametrize("cpu, device_id, expected", [
    ("Intel(R) Core(TM) Ultra 7 258V", "0x64a0", "Intel Arc 140V"),
    ("Intel(R) Core(TM) Ultra 9 288V", "0x64a0", "Intel Arc 140V"),
    ("Intel(R) Core(TM) Ultra 5 226V", "0x64a0", "Intel Arc 130V"),
    ("Intel(R) Core(TM) Ultra 9 285H", "0x7d51", "Intel Arc 140T"),
    ("Intel(R) Core(TM) Ultra 5 225H", "0x7d51", "Intel Arc 130T"),
    ("Intel(R) Core(TM) Ultra 7 155H", "0x7d55", "Intel Arc Graphics (Meteor Lake)"),
    ("Intel(R) Core(TM) Ultra 5 125H", "0x7d55", "Intel Arc Graphics 7-core (Meteor Lake)"),
    ("Intel(R) Core(TM) Ultra X7 358H", "0xb080", "Intel Arc B390"),
])
def test_an_intel_integrated_arc_is_named_by_its_id_and_cpu(tmp_path, cpu, device_id, expected):
    """xe and i915 publish no memory for an integrated GPU: the PCI id says it is an Arc iGPU,
    the CPU's family which of the products sharing that id."""
    make_card(tmp_path, 0, "0000:00:02.0", "0x8086", device_id, {})
    gpus, warnings = detect_intel(tmp_path, ram_total_bytes=32 * GiB, cpu_name=cpu)
    assert warnings == []
    (gpu,) = gpus
    assert (gpu.name, gpu.vendor, gpu.unified_memory, gpu.vram_total_bytes) == (expected, "intel", True, 24 * GiB)


def test_an_intel_integrated_gpu_the_cpu_does_not_name_is_the_slowest_with_a_warning(tmp_path):
    make_card(tmp_path, 0, "0000:00:02.0", "0x8086", "0x64a0", {})
    gpus, warnings = detect_intel(tmp_path, ram_total_bytes=16 * GiB, cpu_name="unknown CPU")
    assert [g.name for g in gpus] == ["Intel Arc 130V"]
    assert warnings == ["Intel integrated GPU 0x64a0 could be any of Intel Arc 140V, Intel Arc 130V, and the "
                        "CPU's name (unknown CPU) does not say which; Rooflight assumes the Intel Arc 130V "
                        "(the slowest); name the GPU in a --hardware profile to plan another"]
    # without the RAM's size there is nothing to size it by; UHD / Iris Xe ids are not in the table
    assert detect_intel(tmp_path) == ([], [])
    make_card(tmp_path, 1, "0000:00:03.0", "0x8086", "0xa7a0", {})  # Raptor Lake-P's Iris Xe
    assert [g.name for g in detect_intel(tmp_path, ram_total_bytes=16 * GiB, cpu_name="Core Ultra 7 258V")[0]] == [
        "Intel Arc 140V"]


def test_an_intel_igpu_id_known_for_other_cpus_only_is_no_gpu(tmp_path):
    """Panther Lake's 0xb080 is the Arc B390 in a Core Ultra X7 or X9; beside another CPU
    it may be a smaller GPU the table lacks, so it is left out and said why."""
    make_card(tmp_path, 0, "0000:00:02.0", "0x8086", "0xb080", {})
    gpus, warnings = detect_intel(tmp_path, ram_total_bytes=16 * GiB, cpu_name="Intel(R) Core(TM) Ultra 5 325")
    assert gpus == [] and warnings == [
        "Intel integrated GPU 0xb080 is the Intel Arc B390 only in a Core Ultra X7 or Core Ultra X9, not in this "
        "Intel(R) Core(TM) Ultra 5 325, and Rooflight's GPU table does not know which it is: it is not counted as a GPU"]


def test_a_detected_lunar_lake_laptop_is_planned_on_its_igpu_with_a_gpu_build(tmp_path):
    """The whole path: the CPU's name from /proc/cpuinfo picks the Arc 140V, its memory is
    the RAM's share bounded by free RAM, a Vulkan build offloads to it, and what it takes
    comes out of the same RAM; with a CPU-only build llama.cpp does not use it."""
    from rooflight.hardware.intel import integrated_memory_bytes

    make_card(tmp_path, 0, "0000:00:02.0", "0x8086", "0x64a0", {})
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Core(TM) Ultra 7 258V\n"
                       "flags\t\t: fpu sse sse2 avx avx2 fma f16c avx_vnni\n\n")
    p = detect(measure_bandwidth=False, probes=Probes(
        sysfs_root=tmp_path, cpuinfo_path=cpuinfo, nvml=types.ModuleType("pynvml"), importer=no_amdsmi,
        platform_name="linux", machine="x86_64"))
    assert p.cpu.name == "Intel(R) Core(TM) Ultra 7 258V"
    (gpu,) = p.gpus
    assert (gpu.name, gpu.unified_memory) == ("Intel Arc 140V", True)
    assert gpu.vram_total_bytes == integrated_memory_bytes(p.cpu.ram_total_bytes)
    assert gpu.vram_free_bytes == min(gpu.vram_total_bytes, p.cpu.ram_available_bytes)
    assert gpu.bandwidth_gbs == 136.5 and gpu.fp16_tflops == 33.6  # the table's, by name
    assert p.backend == "cpu" and p.offload_gpus == ()  # llama_cpp not importable here: no GPU build
    assert_planned_in_one_pool(tmp_path, dataclasses.replace(p, backend="vulkan"))  # a Vulkan build


def _laptop(tmp_path: Path, device_id: str, cpu_name: str, udev_dmi: Path | None = None):
    make_card(tmp_path, 0, "0000:00:02.0", "0x8086", device_id, {})
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: {cpu_name}\n"
                       "flags\t\t: fpu sse sse2 avx avx2 fma f16c avx_vnni\n\n")
    return detect(measure_bandwidth=False, probes=Probes(
        sysfs_root=tmp_path, cpuinfo_path=cpuinfo, nvml=types.ModuleType("pynvml"), importer=no_amdsmi,
        platform_name="linux", machine="x86_64", udev_dmi=udev_dmi))


def test_an_igpu_reads_at_the_speed_of_the_ram_udev_reports(tmp_path):
    """A Meteor Lake laptop with two DDR5-5600 SO-DIMMs: 89.6 GB/s, not the table's LPDDR5X
    figure, and no warning; with one of them, half."""
    from test_ram_speed import TWO_SODIMMS

    dmi = tmp_path / "+dmi:id"
    dmi.write_text(TWO_SODIMMS)
    p = _laptop(tmp_path / "two", "0x7d55", "Intel(R) Core(TM) Ultra 7 155H", udev_dmi=dmi)
    (gpu,) = p.gpus
    assert (gpu.bandwidth_gbs, gpu.source) == (89.6, "detected+table+RAM")
    assert not any("RAM, whose speed" in w for w in p.warnings)
    dmi.write_text(TWO_SODIMMS.replace("E:MEMORY_DEVICE_1_SIZE=34359738368\n", "E:MEMORY_DEVICE_1_PRESENT=0\n"))
    assert _laptop(tmp_path / "one", "0x7d55", "Intel(R) Core(TM) Ultra 7 155H", udev_dmi=dmi).gpus[0].bandwidth_gbs == 44.8


def test_an_igpu_whose_platform_takes_several_ram_types_says_which_the_estimate_assumes(tmp_path):
    """Meteor Lake takes LPDDR5X-7500 or DDR5-5600: the table's 120 GB/s is the first, and the
    user is told so (Rooflight cannot read the RAM's speed); Lunar Lake's RAM is on the package."""
    p = _laptop(tmp_path, "0x7d55", "Intel(R) Core(TM) Ultra 7 155H")
    (gpu,) = p.gpus
    assert (gpu.name, gpu.bandwidth_gbs) == ("Intel Arc Graphics (Meteor Lake)", 120.0)
    (said,) = [w for w in p.warnings if "RAM, whose speed" in w]  # no udev table given
    assert "LPDDR5X-7500" in said and "DDR5-5600 machines read 89.6 GB/s" in said and "bandwidth_gbs" in said
    lunar = _laptop(tmp_path / "lunar", "0x64a0", "Intel(R) Core(TM) Ultra 7 258V")
    assert lunar.gpus[0].name == "Intel Arc 140V" and not any("RAM, whose speed" in w for w in lunar.warnings)


def test_an_intel_igpu_beside_a_discrete_arc_gets_no_layer(tmp_path):
    """llama.cpp adds integrated GPUs only where it found no discrete one."""
    from rooflight.hardware.profile import offload_gpus_of

    make_card(tmp_path, 0, "0000:00:02.0", "0x8086", "0x7d51", {})
    make_card(tmp_path, 1, "0000:03:00.0", "0x8086", "0xe20b", {"tile0/physical_vram_size_bytes": str(12 * GiB)})
    gpus, _ = detect_intel(tmp_path, ram_total_bytes=32 * GiB, cpu_name="Intel(R) Core(TM) Ultra 7 255H")
    assert [g.name for g in gpus] == ["Intel Arc 140T", "Intel Arc B580"]
    assert [g.name for g in offload_gpus_of(gpus, "vulkan")] == ["Intel Arc B580"]
    assert [g.name for g in offload_gpus_of(gpus[:1], "sycl")] == ["Intel Arc 140T"]
