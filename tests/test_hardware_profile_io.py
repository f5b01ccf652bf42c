"""Hardware profiles: fill-in from the table, round trips, and malformed input."""

from __future__ import annotations

import json

import pytest

from rooflight.errors import BadInputError
from rooflight.hardware import (
    format_profile,
    load_profile,
    profile_from_dict,
    profile_to_json,
)
from rooflight.hardware.profile import CPUInfo, GPUInfo, HardwareProfile

GiB = 1 << 30
CPU = {
    "name": "AMD EPYC",
    "cores": 2,
    "threads": 2,
    "isa": ["avx2", "avx512f"],
    "ram_total_bytes": 25300000000,
    "ram_available_bytes": 24000000000,
    "ram_bandwidth_gbs": 18.5,
    "ram_bandwidth_source": "measured",
}
CONTRACT_EXAMPLE = {
    "cpu": CPU,
    "gpus": [
        {
            "index": 0,
            "name": "NVIDIA GeForce RTX 4090",
            "vendor": "nvidia",
            "vram_total_bytes": 25757220864,
            "vram_free_bytes": 24000000000,
            "bandwidth_gbs": 1008.0,
            "fp16_tflops": 165.2,
            "unified_memory": False,
            "compute_capability": "8.9",
        }
    ],
    "backend": "cuda",
}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLIGHT_CACHE_DIR", str(tmp_path / "cache"))


def test_contract_example_is_read_as_given():
    p = profile_from_dict(CONTRACT_EXAMPLE)
    assert p.cpu == CPUInfo(
        "AMD EPYC",
        2,
        2,
        ("avx2", "avx512f"),
        25300000000,
        24000000000,
        18.5,
        "measured",
        p.cpu.max_freq_mhz,
        p.cpu.arch,
    )
    g = p.gpus[0]
    assert (g.vram_total_bytes, g.vram_free_bytes, g.bandwidth_gbs) == (25757220864, 24e9, 1008.0)
    assert g.source == "profile" and p.backend == "cuda"


def test_to_dict_has_every_contract_field():
    d = profile_from_dict(CONTRACT_EXAMPLE).to_dict()
    assert CPU.keys() <= d["cpu"].keys()
    assert CONTRACT_EXAMPLE["gpus"][0].keys() <= d["gpus"][0].keys()
    for key, value in CONTRACT_EXAMPLE["gpus"][0].items():
        assert d["gpus"][0][key] == value
    assert d["backend"] == "cuda" and isinstance(d["cpu"]["isa"], list)


def test_round_trip_is_exact():
    p = HardwareProfile(
        cpu=CPUInfo(
            "Test CPU", 8, 16, ("avx2", "fma"), 64 * GiB, 60 * GiB, 80.0, "cached", 4500.0, "x86_64"
        ),
        gpus=(
            GPUInfo(
                0,
                "NVIDIA GeForce RTX 3090",
                "nvidia",
                24 * GiB,
                20 * GiB,
                936.2,
                71.2,
                False,
                "8.6",
                82,
                31.5,
                "detected+table",
            ),
            GPUInfo(1, "Apple M2 Max", "apple", 48 * GiB, None, 400.0, 13.6, True, None, 38),
        ),
        backend="cuda",
        warnings=("something odd",),
    )
    again = profile_from_dict(json.loads(profile_to_json(p)))
    assert again == p


def test_name_only_is_filled_from_the_table():
    p = profile_from_dict({"cpu": CPU, "gpus": [{"name": "RTX 3090"}]})
    (g,) = p.gpus
    assert g.name == "RTX 3090" and g.vendor == "nvidia"
    assert g.vram_total_bytes == 24 * GiB and g.vram_free_bytes is None and g.free_bytes == 24 * GiB
    assert g.bandwidth_gbs == pytest.approx(936.2) and g.fp16_tflops == pytest.approx(71.2)
    assert g.compute_capability == "8.6" and g.source == "table"
    assert p.backend == "cuda"


def test_nulls_are_filled_and_given_figures_kept():
    p = profile_from_dict(
        {
            "cpu": CPU,
            "gpus": [
                {
                    "name": "RX 7900 XTX",
                    "vram_total_bytes": None,
                    "bandwidth_gbs": 900.0,
                    "fp16_tflops": None,
                }
            ],
        }
    )
    g = p.gpus[0]
    assert g.bandwidth_gbs == 900.0 and g.fp16_tflops == 122.8 and g.vram_total_bytes == 24 * GiB
    assert g.source == "profile+table" and g.vendor == "amd" and p.backend == "rocm"


def test_apple_by_name_gets_the_metal_share():
    p = profile_from_dict({"cpu": CPU, "gpus": [{"name": "M2 Max"}]})
    g = p.gpus[0]
    assert g.unified_memory and g.vram_total_bytes == int(32 * GiB * 2 / 3)
    assert p.backend == "metal"


def test_intel_profile_implies_vulkan():
    assert profile_from_dict({"cpu": CPU, "gpus": [{"name": "Arc B580"}]}).backend == "vulkan"


def test_unknown_gpu_with_its_figures_is_accepted_with_a_warning():
    p = profile_from_dict(
        {
            "cpu": CPU,
            "gpus": [
                {
                    "name": "NVIDIA GeForce GTX 1660 SUPER",  # not in the table (README: not listed, on purpose)
                    "vram_total_bytes": 6 * GiB,
                    "bandwidth_gbs": 192.0,
                }
            ],
        }
    )
    assert p.gpus[0].vendor == "nvidia" and p.gpus[0].fp16_tflops is None
    assert any("fp16_tflops" in w for w in p.warnings)


def test_missing_cpu_is_detected_here_with_bandwidth(tmp_path):
    p = profile_from_dict({"gpus": [{"name": "RTX 3060"}]}, cache_dir=tmp_path)
    assert p.cpu.cores >= 1 and p.cpu.ram_total_bytes > 0
    assert p.cpu.ram_bandwidth_gbs > 0 and p.cpu.ram_bandwidth_source == "measured"
    again = profile_from_dict({"gpus": []}, cache_dir=tmp_path)
    assert again.cpu.ram_bandwidth_source == "cached" and again.backend == "cpu"


def test_partial_cpu_keeps_what_is_given():
    p = profile_from_dict(
        {"cpu": {"cores": 64, "ram_total_bytes": 512 * GiB, "ram_bandwidth_gbs": 300.0}},
        measure_bandwidth=False,
    )
    assert p.cpu.cores == 64 and p.cpu.ram_total_bytes == 512 * GiB
    assert p.cpu.ram_available_bytes == 512 * GiB and p.cpu.threads >= 64
    assert p.cpu.ram_bandwidth_gbs == 300.0 and p.cpu.ram_bandwidth_source == "profile"


def test_without_detection_cpu_basics_are_required():
    with pytest.raises(BadInputError, match="cores, threads, ram_total_bytes"):
        profile_from_dict({"gpus": [{"name": "RTX 3090"}]}, detect_cpu_if_missing=False)
    p = profile_from_dict(
        {"cpu": {"cores": 4, "threads": 8, "ram_total_bytes": 16 * GiB}},
        detect_cpu_if_missing=False,
    )
    assert p.cpu.ram_bandwidth_gbs is None and p.cpu.ram_bandwidth_source == "unknown"


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ([1, 2], "must be a JSON object"),
        ("RTX 3090", "must be a JSON object"),
        (None, "not null"),
        ({"gpus": {"name": "RTX 3090"}}, "gpus must be a list"),
        ({"gpus": ["RTX 3090"]}, "gpus[0] must be an object"),
        ({"gpus": [{}]}, 'has no "name"'),
        (
            {"gpus": [{"name": "RTX 3090", "vram_total_bytes": "24GB"}]},
            "gpus[0].vram_total_bytes must be a whole number >= 0, not the string '24GB'",
        ),
        ({"gpus": [{"name": "RTX 3090", "vram_total_bytes": -1}]}, "vram_total_bytes"),
        ({"gpus": [{"name": "RTX 3090", "vram_total_bytes": 1.5}]}, "whole number"),
        (
            {"gpus": [{"name": "RTX 3090", "bandwidth_gbs": 0}]},
            "bandwidth_gbs must be a number > 0",
        ),
        ({"gpus": [{"name": "RTX 3090", "bandwidth_gbs": True}]}, "bandwidth_gbs"),
        ({"gpus": [{"name": "RTX 3090", "vendor": "via"}]}, "vendor must be one of"),
        ({"gpus": [{"name": "RTX 3090", "unified_memory": "no"}]}, "true or false"),
        (
            {"gpus": [{"name": "RTX 3090", "vram_total_bytes": 8, "vram_free_bytes": 9}]},
            "larger than",
        ),
        (
            {"gpus": [{"name": "Mystery GPU 9000"}]},
            'the GPU "Mystery GPU 9000" is not in Rooflight\'s GPU table; give its vram_total_bytes and bandwidth_gbs',
        ),
        ({"gpus": [{"name": "Mystery GPU 9000", "vram_total_bytes": 8}]}, "give its bandwidth_gbs"),
        (
            {"gpus": [{"name": "Mystery", "vram_total_bytes": 8, "bandwidth_gbs": 100}]},
            'give "vendor"',
        ),
        ({"cpu": "fast"}, "cpu must be an object"),
        ({"cpu": {**CPU, "cores": 0}}, "cpu.cores must be a positive whole number"),
        ({"cpu": {**CPU, "ram_total_bytes": "lots"}}, "cpu.ram_total_bytes"),
        ({"cpu": {**CPU, "isa": "avx2"}}, "cpu.isa must be a list of strings"),
        ({"cpu": {**CPU, "ram_available_bytes": CPU["ram_total_bytes"] + 1}}, "larger than"),
        ({"cpu": CPU, "backend": "opencl"}, "backend must be one of"),
        ({"cpu": CPU, "backend": "cuda"}, "no GPU is listed"),
        ({"cpu": CPU, "warnings": "x"}, "warnings must be a list"),
    ],
)
def test_malformed_input_is_one_clear_sentence(doc, words):
    with pytest.raises(BadInputError) as info:
        profile_from_dict(doc, measure_bandwidth=False)
    message = str(info.value)
    assert words in message
    assert message.endswith(".") and "\n" not in message
    assert info.value.exit_code == 2


def test_load_profile(tmp_path):
    path = tmp_path / "hw.json"
    path.write_text(json.dumps({"cpu": CPU, "gpus": [{"name": "RTX 4090"}]}))
    p = load_profile(path)
    assert p.gpus[0].bandwidth_gbs == 1008.0


def test_load_profile_errors_name_the_file(tmp_path):
    with pytest.raises(
        BadInputError, match=r"Cannot read hardware profile .*missing\.json: No such file"
    ):
        load_profile(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"gpus": [')
    with pytest.raises(
        BadInputError, match=r"Cannot read hardware profile .*bad\.json: invalid JSON at line 1"
    ):
        load_profile(bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"gpus": [{"name": "RTX 3090", "vram_total_bytes": "24GB"}]}')
    with pytest.raises(BadInputError, match=r"In hardware profile .*wrong\.json, gpus\[0\]"):
        load_profile(wrong)


def test_format_profile_text():
    text = format_profile(profile_from_dict({**CONTRACT_EXAMPLE, "warnings": ["be careful"]}))
    lines = text.splitlines()
    assert lines[0].startswith("CPU: AMD EPYC - 2 cores, 2 threads")
    assert "avx2 avx512f" in text
    assert "bandwidth 18.5 GB/s (measured)" in text
    assert "GPU 0: NVIDIA GeForce RTX 4090 (nvidia)" in text
    assert "VRAM 22.4 GiB free of 24.0 GiB" in text
    assert "1008 GB/s" in text and "165.2 FP16 TFLOPS" in text and "compute capability 8.9" in text
    assert "Backend: cuda" in text
    assert lines[-1] == "warning: be careful"


def test_format_profile_without_gpus():
    text = format_profile(profile_from_dict({"cpu": CPU}))
    assert "GPU: none usable" in text and "Backend: cpu" in text
    assert "AMX" not in text
    amx = format_profile(profile_from_dict({"cpu": {**CPU, "amx_weights": True}}))
    assert "AMX: llama.cpp keeps quantized weights in its AMX buffer" in amx


def test_a_profile_naming_only_a_gpu_that_shares_system_memory_plans_its_pool():
    """{"gpus": [{"name": "DGX Spark"}]} plans a DGX Spark: its 128 GB are the machine's RAM,
    which the GPU's share comes out of, not this machine's RAM beside a pool of its own. A
    profile that gives the RAM or the GPU's memory keeps what it gives."""
    no_ram = {k: v for k, v in CPU.items() if not k.startswith("ram_total") and not k.startswith("ram_available")}
    spark = profile_from_dict({"gpus": [{"name": "DGX Spark"}], "cpu": no_ram}, measure_bandwidth=False)
    assert spark.gpus[0].unified_memory and spark.cpu.ram_total_bytes == 128 * GiB
    given = profile_from_dict({"gpus": [{"name": "DGX Spark"}], "cpu": CPU}, measure_bandwidth=False)
    assert given.cpu.ram_total_bytes == CPU["ram_total_bytes"] and not given.gpus[0].unified_memory
    own = profile_from_dict({"gpus": [{"name": "DGX Spark", "vram_total_bytes": 64 * GiB}], "cpu": no_ram},
                            measure_bandwidth=False)
    here = profile_from_dict({"cpu": no_ram}, measure_bandwidth=False).cpu.ram_total_bytes  # this machine's
    assert own.cpu.ram_total_bytes == here
    card = profile_from_dict({"gpus": [{"name": "RTX 3090"}], "cpu": no_ram}, measure_bandwidth=False)
    assert card.cpu.ram_total_bytes == here and not card.gpus[0].unified_memory
