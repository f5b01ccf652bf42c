"""CPU prompts priced by a probe: a weight costs more on narrow models and less on wide ones
(estimate/matmul_shape.py), relative to the probe's own prompt model."""

from __future__ import annotations

import pytest

from rooflight.estimate import matmul_shape, probe_roofline
from rooflight.estimate.matmul_shape import PROBE_PROMPT_SHAPE, relative_cost
from rooflight.estimate.probe import FixedCosts, KernelFigure, MachineProbe
from rooflight.gguf.from_hparams import spec_from_hparams


def _llama(width: int, **kw):
    args = dict(name=f"w{width}", ftype="Q8_0", n_layer=3, n_embd=width, n_head=max(2, width // 128),
                n_head_kv=max(2, width // 128), n_ff=int(width * 2.75) // 64 * 64, n_vocab=8000,
                context_length=4096)
    args.update(kw)
    return spec_from_hparams(**args)


def test_the_probes_own_shape_costs_what_the_probe_measured():
    probe_model = _llama(1024, **{k: v for k, v in PROBE_PROMPT_SHAPE.items() if k != "n_embd"})
    assert relative_cost(probe_model) == pytest.approx(1.0)


def test_narrow_models_cost_more_per_weight_and_wide_ones_less():
    assert matmul_shape.EDGE_ELEMENTS > 0
    costs = [relative_cost(_llama(w)) for w in (256, 512, 1024, 2048, 4096)]
    assert costs == sorted(costs, reverse=True)
    assert costs[0] > 1.2 and costs[-1] < 0.95
    # each matrix costs as if it had EDGE_ELEMENTS more rows and columns
    spec = _llama(512)
    mats = [(t.shape[0], t.shape[1]) for t in spec.tensors if t.layer is not None and len(t.shape) == 2]
    edge = matmul_shape.EDGE_ELEMENTS
    own = 1 + edge * sum(a + b for a, b in mats) / sum(a * b for a, b in mats)
    assert relative_cost(spec) == pytest.approx(own / matmul_shape._factor(
        matmul_shape._block_matrices(**PROBE_PROMPT_SHAPE), edge))
    assert relative_cost(spec, edge=0.0) == 1.0


def test_the_shape_cost_scales_the_probes_prompt_figure_only():
    q8 = KernelFigure("Q8_0", decode_s_per_weight=3e-11, prefill_s_per_weight=1e-11, decode_gbs=30.0)
    p = MachineProbe(machine="m", build="b", n_threads=2, n_ubatch=512, kernels=(q8,), attention=(),
                     fixed=FixedCosts(0.0, 0.0, 0.0), spread=0.0, disturbed=False)
    table = lambda kind, n: 99.0  # noqa: E731 - what the table would say
    base = probe_roofline.prefill_weights_s(p, {"Q8_0": 1e6}, 512, table)
    assert probe_roofline.prefill_weights_s(p, {"Q8_0": 1e6}, 512, table, shape_cost=1.25) == pytest.approx(1.25 * base)
    # a type the probe did not measure keeps the table's price
    assert probe_roofline.prefill_weights_s(p, {"Q6_K": 1e6}, 512, table, shape_cost=1.25) == 99.0


def test_a_probe_based_prompt_estimate_prices_the_models_shape(monkeypatch):
    """End to end: a narrow model's probe-based prompt is slower with the shape term than
    without it, by the model's relative cost, on a machine whose probe says so."""
    from rooflight.estimate import Calibration, Wishes, plan
    from rooflight.hardware import profile_from_dict
    from rooflight.store.calibration import machine_key
    from test_probe import HW, _probe

    hw = profile_from_dict(HW)
    probe = _probe(machine_key(hw), "b")
    spec = _llama(512, n_layer=4)
    w = Wishes(n_ctx=2048, n_threads=2, prompt_tokens=512, gen_tokens=16)
    with_shape = plan(spec, hw, w, calibration=Calibration(probe=probe)).performance
    monkeypatch.setattr(matmul_shape, "EDGE_ELEMENTS", 0.0)
    without = plan(spec, hw, w, calibration=Calibration(probe=probe)).performance
    assert with_shape.basis == without.basis == "probe"
    assert 1.0 < without.prefill_tok_s / with_shape.prefill_tok_s < relative_cost(spec, edge=90.0) + 1e-9
    assert with_shape.decode_tok_s == pytest.approx(without.decode_tok_s)  # decode: matrix-vector, not priced by shape
