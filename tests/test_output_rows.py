"""Prompt processing multiplies the last block's FFN for the output rows only, as llama.cpp's
graphs crop there (estimate/output_rows.py); the probe counts a prompt's weights the same way."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rooflight.estimate import RunConfig, plan_memory
from rooflight.estimate.layers import layer_table
from rooflight.estimate.output_rows import CROPS_LAST_FFN, multiplies_every_prompt_token
from rooflight.estimate.perf import prefill_time_s
from rooflight.estimate.probe import PROBE_METHOD, FixedCosts, MachineProbe
from rooflight.runtime.probe import _weights_of
from test_estimate_memory import GiB, llama, machine


def _ffn_elements(spec, layer):
    return sum(t.n_elements for t in spec.tensors
               if t.layer == layer and ".ffn_" in t.name and len(t.shape) >= 2)


def test_the_last_blocks_ffn_is_the_cropped_work():
    spec = llama(n_layer=4)
    table = layer_table(spec)
    assert spec.architecture in CROPS_LAST_FFN
    assert sum(table.last_ffn_by_type.values()) == _ffn_elements(spec, 3) > 0
    assert not multiplies_every_prompt_token(spec, "blk.3.ffn_down.weight", 3)
    assert multiplies_every_prompt_token(spec, "blk.3.attn_q.weight", 3)
    assert multiplies_every_prompt_token(spec, "blk.2.ffn_down.weight", 2)


def _crop_saving(spec, backend="cpu"):
    """Share of a 2048-token prompt's time the crop removes, from the estimator itself."""
    import rooflight.estimate.output_rows as rows

    hw = machine(*((48 * GiB,) if backend == "cuda" else ()), ram=64 * GiB, backend=backend)
    cfg = RunConfig(n_ctx=4096, n_gpu_layers=0 if backend == "cpu" else spec.n_layer + 1, n_threads=8,
                    flash_attn=True)
    mem = plan_memory(spec, hw, cfg)
    with_crop = prefill_time_s(spec, hw, cfg, mem, 2048)[0]
    saved, rows.CROPS_LAST_FFN = rows.CROPS_LAST_FFN, frozenset()
    try:
        without = prefill_time_s(spec, hw, cfg, mem, 2048)[0]
    finally:
        rows.CROPS_LAST_FFN = saved
    return 1 - with_crop / without


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_a_prompt_skips_the_last_ffn_for_all_but_the_output_row(backend):
    """The saving is the last FFN's share of the weight work, less what attention and the
    fixed costs add to the prompt's time: positive, and at most that share."""
    spec = llama(n_layer=4)
    share = _ffn_elements(spec, 3) / sum(layer_table(spec).active_params)
    saving = _crop_saving(spec, backend)
    assert 0.5 * share < saving <= share


def test_architectures_that_crop_after_the_last_block_keep_its_ffn_per_token():
    """gpt-oss, Qwen3.5 and Gemma 3n select the output rows after the last block (with
    llama.cpp's default context parameters): nothing is saved."""
    spec = replace(llama(n_layer=4), architecture="qwen35")
    assert spec.architecture not in CROPS_LAST_FFN
    assert _crop_saving(spec) == pytest.approx(0.0, abs=1e-12)


def test_the_probe_counts_a_prompts_weights_without_the_last_ffn():
    spec = llama(ftype="F16", n_layer=3, n_embd=512, n_head=8, n_head_kv=8, n_ff=1408, n_vocab=1000)
    every, _ = _weights_of(spec, "F16", prompt=False)
    prompt, _ = _weights_of(spec, "F16", prompt=True)
    output = spec.tensor("output.weight").n_elements
    assert every - prompt == output + _ffn_elements(spec, 2)


def test_a_probe_derived_by_the_old_arithmetic_is_measured_again():
    p = MachineProbe(machine="m", build="b", n_threads=2, n_ubatch=512, kernels=(), attention=(),
                     fixed=FixedCosts(0.0, 0.0, 0.0), spread=0.0, disturbed=False)
    d = p.to_dict()
    assert d["method"] == PROBE_METHOD and MachineProbe.from_dict(d) == p
    old = {k: v for k, v in d.items() if k != "method"}
    with pytest.raises(ValueError):
        MachineProbe.from_dict(old)

