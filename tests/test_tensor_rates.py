"""The matrix rates and the MMQ-or-dequantize rules of llama.cpp's GPU backends on AMD GPUs
(estimate/tensor_rates.py, the table's AMD int8_tops and gfx figures)."""

from __future__ import annotations

import pytest

from rooflight.estimate import Wishes, plan
from rooflight.estimate.perf import BACKENDS
from rooflight.estimate.tensor_rates import dequantizes_for_gemm, main_weight_type, matmul_tflops
from rooflight.hardware import lookup_gpu, profile_from_dict
from test_estimate_memory import GiB, llama


def gpu(name: str, backend: str = "rocm"):
    return profile_from_dict({"gpus": [{"name": name}], "backend": backend}, measure_bandwidth=False).gpus[0]


def test_every_amd_entry_names_its_gfx_target_and_cites_its_int8_rate():
    from rooflight.hardware import gpu_table

    amd = [e for e in gpu_table() if e["vendor"] == "amd"]
    assert len(amd) >= 30
    for e in amd:
        assert e["gfx"].startswith("gfx"), e["name"]
        assert "AMD HIP rates:" in e["source"], e["name"]
        if "int8_tops" not in e:
            assert "NO int8_tops" in e["source"], e["name"]  # said so, and priced at FP16


def test_rdna2_prices_quantized_prompts_at_dot4_on_rocm_and_fp16_on_vulkan():
    # RX 6700 XT: v_dot4_i32_i8 (2x packed FP16) in llama.cpp's HIP MMQ; its Vulkan kernels at FP16
    entry = lookup_gpu("AMD Radeon RX 6700 XT")
    assert entry["int8_tops"] == pytest.approx(2 * entry["fp16_tflops"])
    rx = gpu("AMD Radeon RX 6700 XT")
    assert matmul_tflops(rx, True, "rocm") == pytest.approx(entry["int8_tops"])
    assert matmul_tflops(rx, True, "vulkan") == pytest.approx(entry["fp16_tflops"])
    assert matmul_tflops(rx, False, "rocm") == pytest.approx(entry["fp16_tflops"])  # F16 GEMM


def test_amd_int8_rates_by_family():
    assert matmul_tflops(gpu("AMD Instinct MI300X"), True, "rocm") == pytest.approx(2614.9)  # MFMA 2x FP16
    assert matmul_tflops(gpu("AMD Instinct MI100"), True, "rocm") == pytest.approx(184.6)  # MFMA = FP16
    xtx = gpu("AMD Radeon RX 7900 XTX")  # RDNA3 WMMA int8 runs at the FP16 rate
    assert matmul_tflops(xtx, True, "rocm") == pytest.approx(matmul_tflops(xtx, False, "rocm"))
    n48 = gpu("AMD Radeon RX 9070 XT")  # RDNA4 WMMA int8: 2x
    assert matmul_tflops(n48, True, "rocm") == pytest.approx(2 * 194.7, rel=1e-3)
    navi10 = gpu("AMD Radeon RX 5700 XT")  # RDNA1: dp4a emulated, no faster than FP16
    assert matmul_tflops(navi10, True, "rocm") == pytest.approx(navi10.fp16_tflops)
    # NVIDIA keeps its int8 tensor-core rate on Vulkan as before
    rtx = gpu("NVIDIA GeForce RTX 3090", "vulkan")
    assert matmul_tflops(rtx, True, "vulkan") == pytest.approx(lookup_gpu("RTX 3090")["int8_tops"])


def test_rdna3_dequantizes_q6_k_and_q2_k_above_its_mmq_limits():
    xtx, strix_halo = gpu("AMD Radeon RX 7900 XTX"), gpu("AMD Radeon 8060S")  # gfx1100, gfx1151
    assert dequantizes_for_gemm(xtx, "rocm", 512, "Q6_K")
    assert not dequantizes_for_gemm(xtx, "rocm", 128, "Q6_K") and not dequantizes_for_gemm(xtx, "rocm", 64, "Q6_K")
    assert not dequantizes_for_gemm(strix_halo, "rocm", 256, "Q6_K")  # RDNA3.5 keeps MMQ up to 256
    assert dequantizes_for_gemm(strix_halo, "rocm", 512, "Q6_K")
    assert dequantizes_for_gemm(strix_halo, "rocm", 512, "Q2_K") and not dequantizes_for_gemm(xtx, "rocm", 128, "Q2_K")
    assert not dequantizes_for_gemm(xtx, "rocm", 512, "Q4_K") and not dequantizes_for_gemm(xtx, "rocm", 512, "Q4_0")
    assert not dequantizes_for_gemm(xtx, "rocm", 512, "Q6_K", n_expert=128)  # big MoE: MMQ
    assert not dequantizes_for_gemm(xtx, "vulkan", 512, "Q6_K")  # only the HIP backend's rule
    assert not dequantizes_for_gemm(xtx, "rocm", 512)  # no weight type: the type-blind rules


def test_cdna_before_cdna3_dequantizes_most_types_above_128_tokens():
    mi100, mi210, mi300x = gpu("AMD Instinct MI100"), gpu("AMD Instinct MI210"), gpu("AMD Instinct MI300X")
    assert dequantizes_for_gemm(mi100, "rocm", 512, "Q4_K")
    assert not dequantizes_for_gemm(mi100, "rocm", 512, "Q4_0") and not dequantizes_for_gemm(mi100, "rocm", 512, "Q5_1")
    assert not dequantizes_for_gemm(mi100, "rocm", 256, "Q4_K")  # Q4_K / Q5_K: MMQ up to 256
    assert dequantizes_for_gemm(mi210, "rocm", 256, "Q6_K") and dequantizes_for_gemm(mi210, "rocm", 129, "Q8_0")
    assert not dequantizes_for_gemm(mi210, "rocm", 128, "Q8_0")
    assert not dequantizes_for_gemm(mi100, "rocm", 512, "Q4_K", n_expert=128)
    assert not dequantizes_for_gemm(mi300x, "rocm", 512, "Q6_K")  # CDNA3: MMQ always


def test_rdna2_rdna4_and_gfx906_always_run_mmq_and_types_without_mmq_dequantize():
    for name in ("AMD Radeon RX 6700 XT", "AMD Radeon RX 9070 XT", "AMD Radeon Instinct MI50"):
        assert not dequantizes_for_gemm(gpu(name), "rocm", 2048, "Q6_K"), name
    # IQ1_M has no MMQ kernel: dequantized for the F16 GEMM on CUDA and ROCm above MMVQ's 8 tokens
    rtx = gpu("NVIDIA GeForce RTX 4090", "cuda")
    assert dequantizes_for_gemm(rtx, "cuda", 512, "IQ1_M") and not dequantizes_for_gemm(rtx, "cuda", 8, "IQ1_M")
    assert not dequantizes_for_gemm(rtx, "cuda", 512, "Q4_K")


def test_main_weight_type_is_the_type_of_most_multiplied_weights():
    assert main_weight_type(llama("Q4_K_M")) == "Q4_K"
    assert main_weight_type(llama("Q6_K")) == "Q6_K"
    assert main_weight_type(llama("Q4_0")) == "Q4_0"


def test_rdna3_plan_prices_q6_k_prompts_at_the_float_efficiency_above_128_tokens():
    hw = profile_from_dict({"gpus": [{"name": "AMD Radeon RX 7900 XTX"}], "backend": "rocm",
                            "cpu": {"ram_total_bytes": 64 * GiB}}, measure_bandwidth=False)

    def rate(ftype, n_ubatch):
        return plan(llama(ftype), hw, Wishes(n_ctx=4096, n_ubatch=n_ubatch, prompt_tokens=512)).performance.prefill_tok_s

    def convert_s(ftype):  # the pass that turns the quantized weights into F16 first (perf.py)
        from rooflight.estimate.perf import _read_bytes_s

        blocks = [t for t in llama(ftype).tensors if t.layer is not None]
        return (sum(t.n_bytes for t in blocks) + 2 * sum(t.n_elements for t in blocks)) / _read_bytes_s(hw, "gpu0")

    rocm = BACKENDS["rocm"]
    # 512-token micro-batches of Q6_K weights run hipBLAS at the float efficiency, after a
    # conversion to F16, 128-token ones MMQ at the quantized one, against the same rate
    # (RDNA3's WMMA runs int8 and FP16 alike); a Q4_K_M model (MMQ at both sizes) shows what
    # the micro-batch size alone does
    q6_k_512 = 1 / (1 / rate("Q6_K", 512) - convert_s("Q6_K") / 512)  # the GEMM's own rate
    q6_k, q4_k = q6_k_512 / rate("Q6_K", 128), rate("Q4_K_M", 512) / rate("Q4_K_M", 128)
    expected = rocm.prefill_efficiency_float / rocm.prefill_efficiency_quant
    assert q6_k / q4_k == pytest.approx(expected, rel=0.1)
    assert rate("Q6_K", 512) < q6_k_512


def test_hopper_quantized_prompts_run_at_the_mma_sync_share_of_its_int8_peak():
    """llama.cpp's MMQ kernels issue mma.sync, which reaches ~65% of Hopper's tensor peak
    (only wgmma reaches it); F16 weights go through cuBLAS (wgmma) and keep the full rate."""
    from rooflight.estimate.tensor_rates import HOPPER_MMA_SYNC_SHARE

    h100 = profile_from_dict({"gpus": [{"name": "H100 SXM"}], "backend": "cuda"}).gpus[0]
    assert matmul_tflops(h100, True, "cuda") == pytest.approx(1979.0 * HOPPER_MMA_SYNC_SHARE, rel=1e-3)
    assert matmul_tflops(h100, False, "cuda") == pytest.approx(989.4, rel=1e-3)
    assert matmul_tflops(h100, True, "vulkan") == pytest.approx(1979.0, rel=1e-3)
    ada = profile_from_dict({"gpus": [{"name": "L40S"}], "backend": "cuda"}).gpus[0]
    assert matmul_tflops(ada, True, "cuda") == pytest.approx(733.0, rel=1e-3)  # not Hopper: unchanged
