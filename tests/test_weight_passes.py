"""Tiled quantized prompt kernels read their weights once per column tile
(estimate/weight_passes.py): the rule, and what it does to a prompt's estimate."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rooflight.catalog.models import find_model
from rooflight.estimate import RunConfig, plan_memory, weight_passes
from rooflight.estimate.perf import prefill_time_s
from rooflight.hardware import profile_from_dict
from test_estimate_memory import GiB, llama, machine


def test_dense_weights_are_read_once_per_column_tile():
    dense = llama(ftype="Q4_0")
    assert weight_passes.weight_passes("cuda", None, 512, dense) == weight_passes.WeightPasses(4.0, 0.0)
    assert weight_passes.weight_passes("cuda", None, 100, dense).dense == 1.0  # J = 104 covers it
    assert weight_passes.weight_passes("rocm", "gfx1100", 2048, dense).dense == 16.0
    assert weight_passes.weight_passes("vulkan", None, 512, dense).dense == 4.0
    assert weight_passes.weight_passes("vulkan", None, 48, dense).dense == 1.0  # the medium tile
    # matrix-vector batches, and backends without MMQ-like tiles, read each weight once
    assert weight_passes.weight_passes("cuda", None, 8, dense) is None
    assert weight_passes.weight_passes("metal", None, 512, dense) is None
    assert weight_passes.weight_passes("sycl", None, 512, dense) is None


def test_an_expert_is_read_once_per_tile_of_its_own_tokens():
    entry = find_model("qwen3-30b-a3b")
    assert entry is not None
    moe = entry.spec("Q4_K_M")  # 128 experts, 8 used: 32 tokens each at 512
    passes = weight_passes.weight_passes("cuda", None, 512, moe)
    assert passes.dense == 4.0
    assert passes.expert == pytest.approx(1.0, abs=0.01)  # one 128-column tile, nearly always
    # at 2048, 128 tokens on average: one tile or two, about even odds
    assert 1.3 < weight_passes.weight_passes("cuda", None, 2048, moe).expert < 1.7


def _prompt_s(spec, hw, n_ubatch, n_tokens=2048):
    cfg = RunConfig(n_ctx=8192, n_gpu_layers=spec.n_layer + 1, n_threads=8, flash_attn=True,
                    n_batch=n_ubatch, n_ubatch=n_ubatch)
    return prefill_time_s(spec, hw, cfg, plan_memory(spec, hw, cfg), n_tokens)[0]


def test_the_reads_cost_on_top_of_the_arithmetic(monkeypatch):
    """On a CUDA GPU a quantized prompt pays its tiles' reads beside its multiply-adds, so a
    card with little bandwidth for its tensor rate (the DGX Spark's GB10: 273 GB/s) pays
    more for them than an RTX 4090 (1008 GB/s); without the rule both pay nothing extra."""
    spec = llama(ftype="Q8_0")

    def extra(gpu):
        hw = profile_from_dict({"gpus": [{"name": gpu}], "backend": "cuda"})
        with_reads = _prompt_s(spec, hw, 2048)
        monkeypatch.setattr(weight_passes, "weight_passes", lambda *args: None)
        without = _prompt_s(spec, hw, 2048)
        monkeypatch.undo()
        return with_reads / without

    assert extra("NVIDIA GB10") > extra("NVIDIA GeForce RTX 4090") > 1.05


def test_f16_weights_keep_the_overlapped_gemm(monkeypatch):
    """cuBLAS multiplies F16 weights: no tile reads are added to them."""
    spec = llama(ftype="F16")
    hw = machine(96 * GiB)
    before = _prompt_s(spec, hw, 512, 512)
    monkeypatch.setattr(weight_passes, "TILED_BACKENDS", frozenset())
    assert _prompt_s(spec, hw, 512, 512) == pytest.approx(before)
    quantized = llama(ftype="Q4_0")
    untiled = _prompt_s(quantized, hw, 512, 512)
    monkeypatch.undo()
    assert _prompt_s(quantized, hw, 512, 512) > untiled


def test_the_published_gb10_rows_need_the_reads():
    """llama.cpp's benches/dgx-spark.md: Qwen2.5-7B Q8_0 at n_ubatch 2048 ran at 2276 tok/s;
    out of sample it was priced 1.70x too fast without the reads (x0.59), x0.90 with them."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import fit_constants

    res = fit_constants.run()
    (row,) = [r for r in res["per_row"] if r["device"] == "NVIDIA GB10" and r["model"] == "qwen2.5-7b"
              and r["test"] == "pp2048"]
    assert 0.8 < row["ratio"] < 1.1
