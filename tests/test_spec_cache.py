"""The catalog's spec cache (catalog/spec_cache.py) and the cached llama.cpp build answer
(hardware/backend.installed_build): start-up speed that changes no figure."""

import json
import marshal
import os
import subprocess
import sys

import pytest

from rooflight.catalog import load_catalog
from rooflight.catalog.spec_cache import SpecCache, restore_spec, spec_doc
from rooflight.estimate import Wishes, plan
from rooflight.estimate.layers import layer_table
from rooflight.gguf.spec import LazyTensors
from rooflight.hardware import profile_from_dict

GiB = 2**30
CPU_ONLY = {"cpu": {"ram_total_bytes": 32 * GiB, "cores": 8, "ram_bandwidth_gbs": 60}}
GPU = {"gpus": [{"name": "RTX 4060"}], "cpu": {"ram_total_bytes": 32 * GiB, "cores": 8}}


def _entries():
    """A dense llama, a gemma3, an MoE, gpt-oss, a hybrid and Gemma 3n entry of the catalog."""
    by_layout: dict[str, object] = {}
    for m in load_catalog():
        key = m.architecture if m.architecture in ("gemma3n", "granitehybrid", "lfm2") else m.layout
        by_layout.setdefault(key, m)
    return [by_layout[k] for k in ("llama", "gemma3", "qwen3moe", "gpt-oss", "granitehybrid", "gemma3n")
            if k in by_layout]


def _plans(spec, hw):
    return [plan(spec, hw, Wishes(n_ctx=n)) for n in (2048, 16384)]


@pytest.mark.parametrize("profile", [CPU_ONLY, GPU], ids=["cpu", "gpu"])
def test_a_restored_spec_plans_exactly_as_a_built_one_without_building_its_tensors(profile):
    hw = profile_from_dict(profile, measure_bandwidth=False)
    for model in _entries():
        quant = model.quants[len(model.quants) // 2]
        built = model.spec(quant)
        expected = _plans(built, hw)  # derives what a ranking derives
        doc = marshal.loads(marshal.dumps(spec_doc(built)))  # through the file's form
        restored = restore_spec(doc, lambda m=model, q=quant: m.spec(q))
        assert isinstance(restored.tensors, LazyTensors)
        got = _plans(restored, hw)
        assert not restored.tensors.built, f"{model.id}: planning read the tensors"
        assert got == expected, model.id
        # and once built, they are the same tensors
        assert restored == built and layer_table(restored) == layer_table(built)


def test_a_file_from_other_code_or_garbage_is_ignored(tmp_path):
    model = load_catalog()[0]
    path = tmp_path / "catalog-specs.marshal"
    key = f"{model.id}|{model.quants[0]}|"
    path.write_bytes(marshal.dumps({"fingerprint": "other", "specs": {key: {"fields": {}, "derived": {}}}}))
    spec = SpecCache(path).get(key, lambda: model.spec(model.quants[0]))
    assert spec == model.spec(model.quants[0]) and not isinstance(spec.tensors, LazyTensors)
    path.write_bytes(b"\x00not marshal")
    cache = SpecCache(path)
    assert cache.get(key, lambda: model.spec(model.quants[0])) == model.spec(model.quants[0])
    assert cache.save() and marshal.loads(path.read_bytes())["specs"][key]["fields"]["name"] == model.id
    assert not SpecCache(path).save()  # nothing new: not rewritten


def _rank(env, hardware_file):
    out = subprocess.run([sys.executable, "-m", "rooflight", "rank", "--json", "--hardware", str(hardware_file)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_rank_output_is_the_same_from_the_cache_as_built(tmp_path):
    hardware_file = tmp_path / "hw.json"
    hardware_file.write_text(json.dumps({**GPU, "cpu": {**GPU["cpu"], "ram_bandwidth_gbs": 60}}))
    env = {**os.environ, "ROOFLIGHT_CACHE_DIR": str(tmp_path / "cache")}
    first = _rank(env, hardware_file)
    assert (tmp_path / "cache" / "catalog-specs.marshal").is_file()
    assert _rank(env, hardware_file) == first


def test_the_build_answer_is_kept_and_llama_cpp_not_imported_again(tmp_path):
    from rooflight.hardware.backend import inspect_build

    if inspect_build().backends:
        pytest.skip("a GPU build is asked every time (its answer depends on the driver)")
    code = ("import sys; from rooflight.hardware.backend import installed_build, inspect_build; "
            "b = installed_build(); print('llama_cpp' in sys.modules); "
            "print(b == inspect_build())")
    env = {**os.environ, "ROOFLIGHT_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout.split() == ["True", "True"]
    assert runs[1].stdout.split()[0] == "False"  # answered from the cache file
    assert runs[1].stdout.split()[1] == "True"  # and the same answer
