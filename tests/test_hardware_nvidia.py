"""NVIDIA detection against a fake pynvml module with NVML's function names."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from rooflight.hardware.detection import Probes, detect
from rooflight.hardware.nvidia import detect_nvidia, memory_bandwidth_gbs

GiB = 1 << 30


class NVMLError(Exception):
    def __init__(self, value: int, text: str = "Not Supported") -> None:
        super().__init__(text)
        self.value = value


def fake_pynvml(devices: list[dict], *, init_error: int | None = None) -> types.ModuleType:
    """A module that answers like pynvml for `devices`; a key set to an exception raises it."""
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.NVML_CLOCK_MEM = 2
    m.calls = []

    def init() -> None:
        if init_error is not None:
            raise NVMLError(init_error, "NVML Shared Library Not Found")

    def getter(key: str, convert=lambda v: v):
        def fn(handle, *args):
            m.calls.append((key, handle, args))
            value = devices[handle][key]
            if isinstance(value, Exception):
                raise value
            return convert(value)

        return fn

    m.nvmlInit = init
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: len(devices)
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = getter("name")
    m.nvmlDeviceGetMemoryInfo = getter(
        "mem", lambda v: types.SimpleNamespace(total=v[0], free=v[1], used=v[0] - v[1])
    )
    m.nvmlDeviceGetMaxClockInfo = getter("mem_clock")
    m.nvmlDeviceGetMemoryBusWidth = getter("bus")
    m.nvmlDeviceGetCudaComputeCapability = getter("cc")
    m.nvmlDeviceGetNumGpuCores = getter("cores")
    m.nvmlDeviceGetMaxPcieLinkGeneration = getter("gen")
    m.nvmlDeviceGetMaxPcieLinkWidth = getter("width")
    return m


RTX_4090 = {
    "name": "NVIDIA GeForce RTX 4090",
    "mem": (25757220864, 24000000000),
    "mem_clock": 10501,
    "bus": 384,
    "cc": (8, 9),
    "cores": 16384,
    "gen": 4,
    "width": 16,
}
RTX_3060 = {
    "name": b"NVIDIA GeForce RTX 3060",  # older pynvml returns bytes
    "mem": (12884901888, 2 * GiB),
    "mem_clock": 7501,
    "bus": 192,
    "cc": (8, 6),
    "cores": 3584,
    "gen": 4,
    "width": 16,
}


def test_bandwidth_formula_matches_spec_sheets():
    assert memory_bandwidth_gbs(10501, 384) == pytest.approx(1008, rel=0.001)  # GDDR6X
    assert memory_bandwidth_gbs(7501, 192) == pytest.approx(360, rel=0.001)  # GDDR6
    assert memory_bandwidth_gbs(1215, 5120) == pytest.approx(1555, rel=0.001)  # HBM2 A100


def test_two_gpus_are_listed_separately_with_free_vram():
    gpus, warnings = detect_nvidia(fake_pynvml([RTX_4090, RTX_3060]))
    assert warnings == []
    assert [g.index for g in gpus] == [0, 1]
    a, b = gpus
    assert a.name == "NVIDIA GeForce RTX 4090" and b.name == "NVIDIA GeForce RTX 3060"
    assert (a.vram_total_bytes, a.vram_free_bytes) == (25757220864, 24000000000)
    assert b.vram_free_bytes == 2 * GiB
    assert a.bandwidth_gbs == pytest.approx(1008.1, abs=0.1)
    assert b.bandwidth_gbs == pytest.approx(360.0, abs=0.1)
    assert (a.compute_capability, b.compute_capability) == ("8.9", "8.6")
    assert (a.sm_count, b.sm_count) == (128, 28)
    assert a.pcie_gbs == pytest.approx(31.5)
    assert a.vendor == "nvidia" and not a.unified_memory


def test_injected_through_sys_modules(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([RTX_4090]))
    gpus, _ = detect_nvidia()
    assert [g.name for g in gpus] == ["NVIDIA GeForce RTX 4090"]


def test_failing_calls_degrade_with_warnings():
    broken = dict(
        RTX_3060,
        mem=NVMLError(3),
        mem_clock=NVMLError(3),
        cc=NVMLError(3),
        cores=NVMLError(3),
        gen=NVMLError(3),
    )
    gpus, warnings = detect_nvidia(fake_pynvml([RTX_4090, broken]))
    assert len(gpus) == 2
    g = gpus[1]
    assert g.name == "NVIDIA GeForce RTX 3060"
    assert g.vram_total_bytes is None and g.bandwidth_gbs is None
    assert g.compute_capability is None and g.sm_count is None and g.pcie_gbs is None
    text = "\n".join(warnings)
    assert "memory size" in text and "memory clock" in text and "compute capability" in text
    assert all("NVIDIA GPU 1 (NVIDIA GeForce RTX 3060)" in w for w in warnings)
    assert gpus[0].bandwidth_gbs is not None  # the healthy GPU is untouched


def test_a_failing_name_and_a_missing_function_still_give_a_gpu():
    m = fake_pynvml([dict(RTX_4090, name=NVMLError(999, "Unknown Error"))])
    del m.nvmlDeviceGetNumGpuCores  # an old pynvml without it
    gpus, warnings = detect_nvidia(m)
    assert gpus[0].name == "NVIDIA GPU 0" and gpus[0].sm_count is None
    assert any("name" in w for w in warnings)


def test_no_driver_means_no_gpus_and_no_warning():
    gpus, warnings = detect_nvidia(fake_pynvml([RTX_4090], init_error=12))
    assert (gpus, warnings) == ([], [])


def test_other_init_failures_warn():
    gpus, warnings = detect_nvidia(fake_pynvml([RTX_4090], init_error=999))
    assert gpus == [] and "NVML would not start" in warnings[0]


def test_count_failure_warns():
    m = fake_pynvml([RTX_4090])

    def boom():
        raise NVMLError(999, "Unknown Error")

    m.nvmlDeviceGetCount = boom
    gpus, warnings = detect_nvidia(m)
    assert gpus == [] and "count" in warnings[0]


def _probes(tmp_path: Path, nvml) -> Probes:
    def no_llama(name):
        raise ImportError(f"No module named {name!r}")

    return Probes(
        sysfs_root=tmp_path / "sys",
        nvml=nvml,
        importer=no_llama,
        platform_name="linux",
        machine="x86_64",
    )


def test_detect_fills_fp16_from_the_table(tmp_path):
    p = detect(measure_bandwidth=False, probes=_probes(tmp_path, fake_pynvml([RTX_4090, RTX_3060])))
    assert [g.fp16_tflops for g in p.gpus] == [165.2, 25.5]
    assert all(g.source == "detected+table" for g in p.gpus)
    assert p.backend == "cpu" and any("cannot be imported" in w for w in p.warnings)


def test_detect_prefers_the_table_when_the_driver_bandwidth_is_wildly_off(tmp_path):
    odd = dict(RTX_4090, mem_clock=2625)  # a quarter of the real figure
    p = detect(measure_bandwidth=False, probes=_probes(tmp_path, fake_pynvml([odd])))
    assert p.gpus[0].bandwidth_gbs == 1008.0
    assert any("specified at 1008 GB/s" in w for w in p.warnings)


def test_detect_warns_for_a_gpu_missing_from_the_table(tmp_path):
    laptop = dict(RTX_4090, name="NVIDIA GeForce GTX 1660 SUPER", bus=256)  # not in the table (README: not listed, on purpose)
    p = detect(measure_bandwidth=False, probes=_probes(tmp_path, fake_pynvml([laptop])))
    g = p.gpus[0]
    assert g.bandwidth_gbs == pytest.approx(672.1, abs=0.1) and g.fp16_tflops is None
    assert any("not in Rooflight's GPU table" in w and "FP16" in w for w in p.warnings)


def test_a_gpu_split_into_mig_instances_is_said_to_be(monkeypatch):
    """NVML's memory and SMs are the whole GPU's; one MIG instance has a share of them."""
    a100 = {"name": "NVIDIA A100-SXM4-80GB", "mem": (80 * GiB, 79 * GiB), "mem_clock": 1593, "bus": 5120,
            "cc": (8, 0), "cores": 6912, "gen": 4, "width": 16}
    nvml = fake_pynvml([a100, a100])
    nvml.NVML_DEVICE_MIG_ENABLE = 1
    modes = [(1, 1), (0, 0)]  # (current, pending): the first GPU split, the second whole
    nvml.nvmlDeviceGetMigMode = lambda handle: modes[handle]
    gpus, warnings = detect_nvidia(nvml)
    assert len(gpus) == 2
    mig = [w for w in warnings if "MIG" in w]
    assert mig == ["NVIDIA GPU 0 (NVIDIA A100-SXM4-80GB) is split into MIG instances: Rooflight plans for the whole "
                   "GPU's memory and speed, which one instance does not have; give the instance's in a profile "
                   "(--hardware FILE)."]
    # a driver or pynvml without the call: no word, no failure
    del nvml.nvmlDeviceGetMigMode
    assert not any("MIG" in w for w in detect_nvidia(nvml)[1])


# DGX Spark as NVML answers there: a name and a compute capability, memory Not Supported
# (NVIDIA's DGX Spark known issues); bandwidth figures not answered either.
GB10 = {
    "name": "NVIDIA GB10",
    "mem": NVMLError(3),
    "mem_clock": NVMLError(3),
    "bus": NVMLError(3),
    "cc": (12, 1),
    "cores": 6144,
    "gen": 4,
    "width": 4,
}


def test_a_unified_memory_gpu_is_a_gpu_of_the_ram():
    """llama.cpp takes the GB10 as an integrated GPU whose memory is the RAM: so does
    Rooflight, with no warning about the memory NVML cannot report."""
    gpus, warnings = detect_nvidia(fake_pynvml([GB10]), ram_total_bytes=120 * GiB)
    (g,) = gpus
    assert (g.name, g.unified_memory, g.vram_total_bytes, g.vram_free_bytes) == ("NVIDIA GB10", True, 120 * GiB, None)
    assert g.pcie_gbs is None  # it reads its weights where they are
    assert warnings == []  # memory size, clock and bus width are not the GB10's to report
    # without the RAM's size, the table's pool
    assert detect_nvidia(fake_pynvml([GB10]))[0][0].vram_total_bytes is None
    # a discrete board whose memory NVML cannot read still says so
    assert any("memory size" in w for w in detect_nvidia(fake_pynvml([dict(RTX_4090, mem=NVMLError(3))]))[1])


def test_a_detected_dgx_spark_plans_one_pool(tmp_path):
    """Before 2026-12-06 the GB10 was a 128 GiB card beside the 128 GiB RAM: twice the
    memory the machine has. Now what it takes comes out of the RAM."""
    from rooflight.catalog import find_model
    from rooflight.estimate import Wishes, plan

    p = detect(measure_bandwidth=False, probes=Probes(
        sysfs_root=tmp_path, nvml=fake_pynvml([GB10]), importer=lambda name: (_ for _ in ()).throw(ImportError(name)),
        platform_name="linux", machine="aarch64"))
    (g,) = p.gpus
    assert g.unified_memory and g.vram_total_bytes == p.cpu.ram_total_bytes
    assert g.vram_free_bytes == min(g.vram_total_bytes, p.cpu.ram_available_bytes)
    assert g.bandwidth_gbs == 273.0 and g.fp16_tflops  # the table's, by name
    cuda = type(p)(cpu=p.cpu, gpus=p.gpus, backend="cuda")  # as with a CUDA build installed
    spec = find_model("llama-3.2-1b").spec("Q4_K_M")
    est = plan(spec, cuda, Wishes(n_ctx=4096))
    assert est.config.n_gpu_layers == spec.n_layer + 1 and est.memory.fit == "full_gpu"
    gpu_mem = next(d for d in est.memory.devices if d.device == "gpu0")
    cpu_mem = next(d for d in est.memory.devices if d.device == "cpu")
    assert cpu_mem.available_bytes <= p.cpu.ram_available_bytes - gpu_mem.total_bytes


def _board(root: Path, model: str) -> None:
    """The device tree's model, as the kernel exposes it (NUL-terminated)."""
    path = root / "firmware" / "devicetree" / "base" / "model"
    path.parent.mkdir(parents=True)
    path.write_text(model + "\x00")


def _detect_on(root: Path, nvml: types.ModuleType):
    return detect(measure_bandwidth=False, probes=Probes(
        sysfs_root=root, nvml=nvml, importer=lambda name: (_ for _ in ()).throw(ImportError(name)),
        platform_name="linux", machine="aarch64"))


def test_a_jetson_orin_without_nvml_is_named_by_its_board(tmp_path):
    """JetPack 6 has no NVML: the device tree names the board, the RAM is the GPU's memory."""
    _board(tmp_path, "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super")
    p = _detect_on(tmp_path, fake_pynvml([], init_error=12))  # NVML_ERROR_LIBRARY_NOT_FOUND
    (g,) = p.gpus
    assert (g.name, g.vendor, g.unified_memory) == ("NVIDIA Jetson Orin Nano Super", "nvidia", True)
    assert g.vram_total_bytes == p.cpu.ram_total_bytes and g.compute_capability == "8.7"
    assert g.bandwidth_gbs == 102.0  # the table's, by name


def test_jetson_thor_takes_its_boards_name_from_the_device_tree(tmp_path):
    """NVML says "NVIDIA Thor" (both Thor modules) with memory Not Supported; the board is
    the AGX Thor developer kit."""
    _board(tmp_path, "NVIDIA Jetson AGX Thor Developer Kit")
    thor = dict(GB10, name="NVIDIA Thor", cc=(11, 0), cores=2560)
    p = _detect_on(tmp_path, fake_pynvml([thor]))
    (g,) = p.gpus
    assert (g.name, g.unified_memory, g.compute_capability) == ("NVIDIA Jetson AGX Thor", True, "11.0")
    assert g.vram_total_bytes == p.cpu.ram_total_bytes
    assert not any("memory" in w for w in p.warnings)  # size, clock, bus: none is Thor's to report


def test_the_ram_tells_the_agx_orin_modules_apart(tmp_path):
    """The AGX Orin developer kit's model string is the same with either module."""
    from rooflight.hardware.jetson import board_entry

    _board(tmp_path, "NVIDIA Jetson AGX Orin Developer Kit")
    assert board_entry(tmp_path, 61 * GiB)["name"] == "NVIDIA Jetson AGX Orin 64GB"  # as Linux sees 64 GB
    assert board_entry(tmp_path, 30 * GiB)["name"] == "NVIDIA Jetson AGX Orin 32GB"
    assert board_entry(tmp_path / "not-a-jetson") is None


def test_the_ram_tells_the_orin_nx_modules_apart(tmp_path):
    """Both Orin NX modules report the reference carrier's model string."""
    from rooflight.hardware.jetson import board_entry

    _board(tmp_path, "NVIDIA Jetson Orin NX Engineering Reference Developer Kit")
    assert board_entry(tmp_path, 15 * GiB)["name"] == "NVIDIA Jetson Orin NX 16GB"
    assert board_entry(tmp_path, 7 * GiB)["name"] == "NVIDIA Jetson Orin NX 8GB"
    (tmp_path / "firmware" / "devicetree" / "base" / "model").write_text(
        "NVIDIA Jetson Orin NX Engineering Reference Developer Kit Super\x00")  # JetPack 6.2's Super mode
    assert board_entry(tmp_path, 15 * GiB)["name"] == "NVIDIA Jetson Orin NX 16GB Super"
    assert board_entry(tmp_path, 7 * GiB)["name"] == "NVIDIA Jetson Orin NX 8GB Super"


def test_a_board_the_table_lacks_or_no_jetson_adds_nothing(tmp_path):
    _board(tmp_path, "NVIDIA Jetson Xavier NX Developer Kit")
    assert _detect_on(tmp_path, fake_pynvml([], init_error=12)).gpus == ()
    # a discrete card NVML names keeps its name, board or not
    (g,) = _detect_on(tmp_path, fake_pynvml([RTX_4090])).gpus
    assert g.name == "NVIDIA GeForce RTX 4090" and not g.unified_memory
