"""A model Rooflight has loaded counts when free memory is read again for a second one."""

from __future__ import annotations

import types

import pytest

from rooflight.estimate import Wishes
from rooflight.gguf.synthetic import write_model
from rooflight.hardware.profile import CPUInfo, HardwareProfile
from rooflight.runtime import loader, resident
from rooflight.runtime.engine import load_engine
from rooflight.runtime.loader import plan_load, refresh_free_memory

pytest.importorskip("llama_cpp")
GiB = 2**30
HOST = HardwareProfile(cpu=CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0))


def test_mapped_weights_of_a_loaded_model_are_not_free(tmp_path, monkeypatch):
    path = write_model(tmp_path / "m.gguf", n_layer=2, n_embd=256, n_ff=512, n_vocab=2000, ftype="F16")
    import psutil

    # the OS counts page cache as available: pin what it says, to see what is subtracted
    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(total=16 * GiB, available=8 * GiB))
    assert refresh_free_memory(HOST).cpu.ram_available_bytes == 8 * GiB - resident.resident_mapped_bytes()
    before = resident.resident_mapped_bytes()
    engine = load_engine(plan_load(path, Wishes(n_ctx=512), hardware=HOST), warmup=False)
    try:
        mapped = resident.mapped_weight_bytes(engine.buffers)
        assert mapped > 0 and mapped == engine.buffers.model.get("CPU_Mapped")
        assert resident.resident_mapped_bytes() == before + mapped
        assert refresh_free_memory(HOST).cpu.ram_available_bytes == 8 * GiB - before - mapped
    finally:
        engine.close()
    assert resident.resident_mapped_bytes() == before
    assert loader.refresh_free_memory(HOST).cpu.ram_available_bytes == 8 * GiB - before
