"""bench/gpu_check.py --dry-run: the GPU verification kit, everything but the GPU parts, as CI
runs it (tiny models, loads on this CPU, plans for an H200 from the GPU table)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rooflight.runtime import noalloc_worker

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_dry_run_exercises_the_kit(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (result,) = tmp_path.glob("gpu_check-dryrun-*.json")
    doc = json.loads(result.read_text())
    assert doc["dry_run"] is True
    build = doc["build"]
    assert build["action"] == "dry_run" and build["compute_capability"] == "9.0"
    assert "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90" in build["command"]
    assert doc["rooflight_hardware"]["exit"] == 0 and "cpu" in doc["rooflight_hardware"]["json"]
    assert "rooflight_probe" in doc
    rows = doc["measurements"]["rows"]
    measured = [row for row in rows if "measured" in row]
    kinds = {row["model"].split("-")[0] for row in measured}
    assert kinds == {"llama", "gemma3", "qwen3moe"}  # dense, sliding window, MoE
    assert {row["label"] for row in measured} >= {"planned", "half-offload"}
    no_layers = [row for row in measured if row["label"] == "no-layers"]
    assert no_layers and all(row["plan"]["config"]["n_gpu_layers"] == 0 for row in no_layers)
    # op_offload: with no layer on the H200, a 512-token prompt's matmuls still go to it over PCIe
    assert all(row["plan"]["prefill_bound"] == "pcie" for row in no_layers)
    for row in measured:
        # the plan for the GPU machine (an H200 from the table) puts layers on gpu0, but the no-layers one
        assert "gpu0" in row["plan"]["devices"]
        assert row["plan"]["config"]["n_gpu_layers"] >= (0 if row["label"] == "no-layers" else 1)
        assert row["measured"]["decode_tok_s"] > 0 and row["measured"]["prefill_tok_s"] > 0
        assert row["llama_buffers"]["devices"] and row["nvml"]["free_before"] is None  # no NVML here
        if noalloc_worker.breakdown_abi_supported():
            assert row["no_alloc"]["by"] == "llama.cpp" and row["no_alloc"]["max_difference_pct"] < 15
    moe_ram = [row for row in rows if row["label"] == "experts-in-ram"]
    assert moe_ram and ("skipped" in moe_ram[0] or "measured" in moe_ram[0])
    assert "GPU plan" in r.stdout and "wrote " in r.stdout  # the one table, and where it went


def test_the_kit_prints_each_probed_gpus_figures():
    """What the device run's output tail shows of the probe: each GPU's constants, "-" where
    one was not measured (the MoE figures come last and may not be)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_check

    gpu = {"device": "gpu0", "name": "NVIDIA H200", "backend": "cuda", "decode_efficiency": 0.8123,
           "layer_overhead_us": 21.5, "prefill_efficiency_float": 0.41, "prefill_efficiency_quant": 0.3,
           "h2d_gbs": 51.2, "moe_layer_overhead_us": None, "moe_expert_overhead_tokens": 64.0, "spread": 0.04}
    probe = {"json": {"devices": [{"device": "cpu"}, gpu]}}
    assert gpu_check.probe_gpu_lines(probe) == [
        "probe gpu0 NVIDIA H200 (cuda): decode eff 0.812, layer 21.5 us, prompt eff F16 0.410 Q4_K 0.300, "
        "copy 51.2 GB/s, MoE block -, MoE prompt 64 tokens per expert (spread 4%)"]
    assert gpu_check.probe_gpu_lines({"json": {"devices": [{"device": "cpu"}], "refused": "busy"}}) == [
        "probe: no GPU figures (busy)"]
    assert gpu_check.probe_gpu_lines({"skipped": "no probe command"}) == ["probe: no GPU figures"]
