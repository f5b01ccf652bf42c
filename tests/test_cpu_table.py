"""How the table prices a CPU known only by its datasheet (estimate/perf.py with the shares
of estimate/backend_constants.py that bench/fit_cpu.py fits on published rows)."""

from __future__ import annotations

import pytest

from rooflight.estimate import backend_constants as bc
from rooflight.estimate.perf import _cpu_hz, cpu_bandwidth_bytes_s, cpu_peak_flops
from rooflight.hardware import profile_from_dict


def _cpu(**cpu):
    base = {"name": "some CPU", "cores": 8, "threads": 16, "isa": ["avx2"], "ram_bandwidth_gbs": 100.0,
            "ram_total_bytes": 64 << 30}
    return profile_from_dict({"cpu": {**base, **cpu}, "backend": "cpu"})


X86, ARM = bc.CPU_SHARES["x86"], bc.CPU_SHARES["arm"]


def test_a_datasheet_bandwidth_is_read_at_its_familys_share_a_measured_one_at_the_copy_efficiency():
    assert cpu_bandwidth_bytes_s(_cpu(ram_bandwidth_source="peak")) == pytest.approx(100e9 * X86.peak_read)
    arm = _cpu(ram_bandwidth_source="peak", isa=["neon", "dotprod"])
    assert cpu_bandwidth_bytes_s(arm) == pytest.approx(100e9 * ARM.peak_read)
    assert cpu_bandwidth_bytes_s(_cpu(ram_bandwidth_source="measured")) == pytest.approx(100e9 * bc.CPU.decode_efficiency)
    # a profile that does not say keeps the old meaning (an achieved figure)
    assert cpu_bandwidth_bytes_s(_cpu()) == pytest.approx(100e9 * bc.CPU.decode_efficiency)


def test_a_reported_clock_counts_at_the_fitted_shares_none_at_the_default():
    hw = _cpu(max_freq_mhz=5000.0)
    assert _cpu_hz(hw) == pytest.approx(5e9 * X86.clock)
    assert _cpu_hz(hw, matmul=True) == pytest.approx(5e9 * X86.matmul_clock)
    assert _cpu_hz(_cpu(max_freq_mhz=5000.0, isa=[], arch="aarch64")) == pytest.approx(5e9 * ARM.clock)
    assert _cpu_hz(_cpu()) == _cpu_hz(_cpu(), matmul=True) == pytest.approx(bc.DEFAULT_CPU_MHZ * 1e6)


def test_one_int8_rate_for_every_wide_dot_product_isa():
    """The published CPUs run prompts at about the same multiply-adds per core-GHz on AVX2,
    AVX-512 VNNI and NEON dotprod; NEON without dotprod a quarter of it."""
    # per cycle: the clock (and its family's share) divided out
    def per_cycle(isa):
        hw = _cpu(isa=list(isa), max_freq_mhz=4000.0)
        return cpu_peak_flops(hw, 8) / (8 * _cpu_hz(hw, matmul=True))

    rates = {isa: per_cycle(isa)
             for isa in (("avx2",), ("avx2", "avx512f", "avx512_vnni"), ("neon", "dotprod"), ("neon", "dotprod", "i8mm"))}
    assert len(set(rates.values())) == 1
    assert per_cycle(("neon",)) == pytest.approx(rates[("avx2",)] / 4)
    neon = cpu_peak_flops(_cpu(isa=["neon"], max_freq_mhz=4000.0), 8)
    assert cpu_peak_flops(_cpu(isa=["sse3"], max_freq_mhz=4000.0), 8) < neon


def test_a_datasheet_figure_says_so_where_the_machine_is_printed():
    from rooflight.hardware.format import format_profile

    assert "100.0 GB/s (datasheet peak)" in format_profile(_cpu(ram_bandwidth_source="peak"))
