"""The CPU price of hybrid models' recurrent state scans (estimate/recurrent_work.py): what it
counts per architecture, and that decode and prompts pay it exactly where the layers run on
the CPU, with the table and with a probe. Its constants are fitted and checked against
llama.cpp by bench/recurrent_cost.py (a measurement, not a test)."""

from __future__ import annotations

import pytest

from rooflight.catalog.models import find_model
from rooflight.estimate import RunConfig, plan_memory, recurrent_work
from rooflight.estimate.perf import cpu_matvec_hz, decode_time_s, prefill_time_s
from rooflight.estimate.placement import CPU
from rooflight.estimate.probe import FixedCosts, MachineProbe
from test_estimate_memory import GiB, machine

PROMPT = 512


def _spec(model_id: str, quant: str = "Q4_K_M"):
    return find_model(model_id).spec(quant)


def test_a_delta_net_layer_walks_each_value_heads_state_four_times():
    spec = _spec("qwen3.5-0.8b", "Q8_0")
    # 16 value heads of 128 x 128 (ssm.time_step_rank, inner_size 2048, state_size 128)
    assert recurrent_work.element_walks(spec) == 4 * 16 * 128 * 128
    assert recurrent_work.recurrent_layers(spec, 0, spec.n_layer) == 18  # 3 of every 4 of 24


def test_a_mamba_layer_walks_its_state_once():
    spec = _spec("granite-4.0-h-tiny")
    assert recurrent_work.element_walks(spec) == 128 * 3072  # d_state x d_inner
    assert recurrent_work.recurrent_layers(spec, 0, spec.n_layer) == 36


@pytest.mark.parametrize("model_id", ["lfm2-2.6b", "qwen3-8b"])
def test_short_convolutions_and_transformers_scan_nothing(model_id):
    spec = _spec(model_id)
    assert recurrent_work.element_walks(spec) == 0.0
    assert recurrent_work.decode_cycles_per_token(spec, spec.n_layer) == 0.0


def _times(spec, hw, cfg, probe=None) -> tuple[float, float]:
    """(decode seconds per token at 512 positions, seconds for a 512-token prompt)."""
    mem = plan_memory(spec, hw, cfg)
    return (decode_time_s(spec, hw, cfg, mem, PROMPT, probe)[0],
            prefill_time_s(spec, hw, cfg, mem, PROMPT, probe)[0])


def _without_scans(monkeypatch):
    monkeypatch.setattr(recurrent_work, "PREFILL_CYCLES_PER_ELEMENT", 0.0)
    monkeypatch.setattr(recurrent_work, "DECODE_CYCLES_PER_ELEMENT", 0.0)


def _probe(n_threads: int) -> MachineProbe:
    return MachineProbe(machine="m", build="b", n_threads=n_threads, n_ubatch=512, kernels=(), attention=(),
                        fixed=FixedCosts(50e-6, 20e-6, 1e-9), spread=0.0, disturbed=False)


@pytest.mark.parametrize("with_probe", [False, True], ids=["table", "probe"])
def test_cpu_layers_add_their_scans_to_decode_and_to_prompts(with_probe, monkeypatch):
    spec = _spec("qwen3.5-0.8b", "Q8_0")
    hw = machine(ram=32 * GiB, backend="cpu")
    cfg = RunConfig(n_ctx=4096, n_gpu_layers=0, n_threads=4, flash_attn=True)
    probe = _probe(4) if with_probe else None
    decode, prompt = _times(spec, hw, cfg, probe)
    _without_scans(monkeypatch)
    decode0, prompt0 = _times(spec, hw, cfg, probe)
    walked = 18 * recurrent_work.element_walks(spec) / cpu_matvec_hz(hw, cfg)
    assert decode - decode0 == pytest.approx(walked * 1.44, rel=1e-9)
    assert prompt - prompt0 == pytest.approx(PROMPT * walked * 0.47, rel=1e-9)
    assert recurrent_work.DECODE_CYCLES_PER_ELEMENT == 0.0  # (monkeypatched above)


def test_the_constants_are_the_fitted_ones():
    # bench/recurrent_cost.py printed these (bench/results/recurrent_cost-*.txt)
    assert (recurrent_work.PREFILL_CYCLES_PER_ELEMENT, recurrent_work.DECODE_CYCLES_PER_ELEMENT) == (0.47, 1.44)


def test_only_the_layers_the_cpu_holds_are_priced(monkeypatch):
    """12 GPU layers (the output and the last 11 blocks): the scans of the CPU's 10 recurrent
    layers (of its 13 blocks), none of the GPU's; every layer on the GPU: nothing."""
    spec = _spec("qwen3.5-0.8b", "Q8_0")
    hw = machine(24 * GiB, ram=32 * GiB, backend="cuda")
    half = RunConfig(n_ctx=4096, n_gpu_layers=12, n_threads=4, flash_attn=True)
    full = RunConfig(n_ctx=4096, n_gpu_layers=spec.n_layer + 1, n_threads=4, flash_attn=True)
    assert plan_memory(spec, hw, half).layer_devices[:14] == (CPU,) * 13 + ("gpu0",)
    with_half, with_full = _times(spec, hw, half), _times(spec, hw, full)
    _without_scans(monkeypatch)
    walked = 10 * recurrent_work.element_walks(spec) / cpu_matvec_hz(hw, half)
    assert with_half[0] - _times(spec, hw, half)[0] == pytest.approx(walked * 1.44, rel=1e-9)
    assert with_full == _times(spec, hw, full)


def test_a_probe_based_estimate_counts_the_scans_as_table_priced_work():
    """A bench of a hybrid then corrects the scans apart from the probe's kernels, and the
    range knows that much of the estimate stands on the table."""
    from rooflight.estimate import Calibration, Wishes, plan
    from rooflight.estimate.perf import SCAN_KERNEL
    from rooflight.estimate.ranges import TABLE_SUFFIX

    hw = machine(ram=32 * GiB, backend="cpu")
    cal = Calibration(probe=_probe(hw.cpu.cores))
    hybrid = plan(_spec("qwen3.5-0.8b", "Q8_0"), hw, Wishes(n_ctx=4096), calibration=cal).performance
    dense = plan(_spec("qwen3-0.6b", "Q8_0"), hw, Wishes(n_ctx=4096), calibration=cal).performance
    assert SCAN_KERNEL.endswith(TABLE_SUFFIX)
    assert hybrid.basis == "probe" and hybrid.kernels is not None
    for shares in (hybrid.kernels.decode, hybrid.kernels.prefill):
        assert 0.0 < dict(shares)[SCAN_KERNEL] < 1.0
    assert SCAN_KERNEL not in dict(dense.kernels.decode) | dict(dense.kernels.prefill)


def test_a_hybrid_on_a_gpu_gets_the_hybrid_band_joined_with_its_backends():
    """Published GPU rows of hybrids fall outside the backends' bands (README): a plan with
    recurrent layers on a GPU widens its range by the band derived from them; a plain MoE
    model on the same GPU, or a hybrid all on the CPU, keeps its band."""
    from rooflight.estimate import Wishes, plan
    from rooflight.estimate import backend_constants as bc
    from rooflight.hardware import profile_from_dict

    gpu = profile_from_dict({"gpus": [{"name": "RTX 4090"}], "backend": "cuda"})
    hybrid = plan(_spec("qwen3.6-35b-a3b"), gpu, Wishes(n_ctx=8192)).performance
    dense = plan(_spec("qwen3-30b-a3b"), gpu, Wishes(n_ctx=8192)).performance
    lo, hi = min(bc.CUDA.decode_band[0], bc.HYBRID_GPU_DECODE_BAND[0]), max(bc.CUDA.decode_band[1],
                                                                           bc.HYBRID_GPU_DECODE_BAND[1])
    assert hybrid.decode_tok_s_range == pytest.approx((hybrid.decode_tok_s * lo, hybrid.decode_tok_s * hi))
    assert bc.HYBRID_GPU_BAND_BASIS in hybrid.range_basis
    assert dense.decode_tok_s_range == pytest.approx((dense.decode_tok_s * bc.CUDA.decode_band[0],
                                                      dense.decode_tok_s * bc.CUDA.decode_band[1]))
    assert bc.HYBRID_GPU_BAND_BASIS not in dense.range_basis
    cpu = plan(_spec("qwen3.6-35b-a3b"), machine(ram=64 * GiB, backend="cpu"), Wishes(n_ctx=8192)).performance
    assert bc.HYBRID_GPU_BAND_BASIS not in cpu.range_basis
