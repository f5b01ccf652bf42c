"""RAM bandwidth: measured quickly, cached per machine, corrupt caches rewritten."""

from __future__ import annotations

import json
import time

import numpy  # noqa: F401 - imported by the probe when it first runs: not what is timed here

from rooflight.hardware import bandwidth
from rooflight.hardware.bandwidth import CACHE_FILE, cache_dir, measure_ram_bandwidth, ram_bandwidth


def test_measurement_is_plausible_and_fast():
    t0 = time.perf_counter()
    gbs = measure_ram_bandwidth()
    elapsed = time.perf_counter() - t0
    assert 0.5 < gbs < 5000  # GB/s, read + write
    assert elapsed < 0.5, f"bandwidth probe took {elapsed:.3f} s"


def test_measured_then_cached(tmp_path):
    first = ram_bandwidth("Test CPU", 8 << 30, 2, cache_dir_override=tmp_path)
    assert first[1] == "measured" and first[0] > 0 and first[2] == []
    second = ram_bandwidth("Test CPU", 8 << 30, 2, cache_dir_override=tmp_path)
    assert second[:2] == (first[0], "cached")
    data = json.loads((tmp_path / CACHE_FILE).read_text())
    assert list(data) == ["Test CPU|8589934592|2"]


def test_another_machine_is_measured_again(tmp_path, monkeypatch):
    ram_bandwidth("Test CPU", 8 << 30, 2, cache_dir_override=tmp_path)
    monkeypatch.setattr(bandwidth, "measure_ram_bandwidth", lambda threads=None: 12.345)
    assert ram_bandwidth("Test CPU", 16 << 30, 2, cache_dir_override=tmp_path)[:2] == (
        12.35,
        "measured",
    )
    assert len(json.loads((tmp_path / CACHE_FILE).read_text())) == 2


def test_corrupt_cache_is_ignored_and_rewritten(tmp_path, monkeypatch):
    (tmp_path / CACHE_FILE).write_text("{not json")
    monkeypatch.setattr(bandwidth, "measure_ram_bandwidth", lambda threads=None: 20.0)
    assert ram_bandwidth("X", 1, 1, cache_dir_override=tmp_path)[:2] == (20.0, "measured")
    assert json.loads((tmp_path / CACHE_FILE).read_text())["X|1|1"]["gbs"] == 20.0
    # A well-formed file with a nonsense entry is measured again too.
    (tmp_path / CACHE_FILE).write_text(json.dumps({"X|1|1": {"gbs": "fast"}}))
    assert ram_bandwidth("X", 1, 1, cache_dir_override=tmp_path)[1] == "measured"
    assert not list(tmp_path.glob(".tmp-*"))  # the atomic write left nothing behind


def test_unwritable_cache_only_warns(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(bandwidth, "measure_ram_bandwidth", lambda threads=None: 20.0)
    gbs, source, warnings = ram_bandwidth("X", 1, 1, cache_dir_override=blocker / "sub")
    assert (gbs, source) == (20.0, "measured") and "could not cache" in warnings[0]


def test_cache_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLIGHT_CACHE_DIR", str(tmp_path / "env"))
    assert cache_dir() == tmp_path / "env"
    assert cache_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("ROOFLIGHT_CACHE_DIR")
    assert "rooflight" in str(cache_dir())


def test_env_var_reaches_detect(tmp_path, monkeypatch):
    from rooflight.hardware.detection import Probes, detect

    monkeypatch.setenv("ROOFLIGHT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(bandwidth, "measure_ram_bandwidth", lambda threads=None: 33.0)
    probes = Probes(sysfs_root=tmp_path / "sys", importer=_no_module, nvml=_no_module_obj())
    first = detect(probes=probes)
    second = detect(probes=probes)
    assert first.cpu.ram_bandwidth_source == "measured" and first.cpu.ram_bandwidth_gbs == 33.0
    assert second.cpu.ram_bandwidth_source == "cached" and second.cpu.ram_bandwidth_gbs == 33.0
    assert (tmp_path / CACHE_FILE).exists()


def _no_module(name):
    raise ImportError(name)


def _no_module_obj():
    import types

    return types.ModuleType("pynvml")  # no nvmlInit: treated as no NVIDIA driver
