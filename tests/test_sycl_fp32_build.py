"""A SYCL build without GGML_SYCL_F16 multiplies prompts in FP32 on the vector units: the
build is read from its library, carried in the profile, and priced at the FP32 rate."""

from __future__ import annotations

import json

import pytest

from rooflight.errors import BadInputError
from rooflight.estimate import Wishes, plan
from rooflight.estimate.perf import BACKENDS, _read_bytes_s
from rooflight.estimate.tensor_rates import FP32_TO_XMX_FP16, matmul_tflops
from rooflight.hardware import gpu_table, lookup_gpu, profile_from_dict
from rooflight.hardware.backend import detect_backend_build, sycl_f16_of_library
from rooflight.hardware.profile import GPUInfo
from rooflight.hardware.profile_io import profile_to_json
from test_estimate_memory import GiB, llama
from test_hardware_backend import CPU_LIBS, fake_llama

B60 = "Intel Arc Pro B60"


def b60_profile(sycl_f16: bool | None):
    d = {"gpus": [{"name": B60}], "backend": "sycl", "cpu": {"ram_total_bytes": 64 * GiB}}
    if sycl_f16 is not None:
        d["sycl_f16"] = sycl_f16
    return profile_from_dict(d, measure_bandwidth=False)


def write_library(path, marker: bytes) -> None:
    # ggml-sycl's start-up line is a format string in its read-only data, among other bytes
    path.write_bytes(b"\x7fELF" + b"\0" * 4096 + b"  GGML_SYCL_DNNL: yes\n" + marker + b"\n" + b"\0" * 64)


@pytest.mark.parametrize("marker, expected", [
    (b"  GGML_SYCL_F16: yes", True),
    (b"  GGML_SYCL_F16: no", False),
    (b"%s: GGML_SYCL_F16:   no", False),  # the older builds' wording (llama.cpp issue #6036)
    (b"GGML_SYCL_FORCE_MMQ: no", None),  # a build that does not say
])
def test_the_library_says_which_build_it_is(tmp_path, marker, expected):
    lib = tmp_path / "libggml-sycl.so"
    write_library(lib, marker)
    assert sycl_f16_of_library(lib) is expected


def test_an_empty_or_missing_library_says_nothing(tmp_path):
    (tmp_path / "empty.so").write_bytes(b"")
    assert sycl_f16_of_library(tmp_path / "empty.so") is None
    assert sycl_f16_of_library(tmp_path / "missing.so") is None


def test_detection_carries_the_fp32_build_and_warns_with_the_fp16_command(tmp_path):
    importer = fake_llama(tmp_path, CPU_LIBS, True)
    write_library(tmp_path / "llama_cpp" / "lib" / "libggml-sycl.so", b"  GGML_SYCL_F16: no")
    arc = GPUInfo(0, "Intel Arc B580", "intel", 12 << 30, None, 456.0, 109.4)
    backend, warnings, sycl_f16 = detect_backend_build([arc], importer=importer)
    assert (backend, sycl_f16) == ("sycl", False)
    assert len(warnings) == 1 and "-DGGML_SYCL_F16=on" in warnings[0] and "FP32" in warnings[0]
    # an FP16 build: no warning; a machine llama.cpp runs on Vulkan: no SYCL build to speak of
    write_library(tmp_path / "llama_cpp" / "lib" / "libggml-sycl.so", b"  GGML_SYCL_F16: yes")
    assert detect_backend_build([arc], importer=importer) == ("sycl", [], True)
    nvidia = GPUInfo(0, "NVIDIA GeForce RTX 3090", "nvidia", 24 << 30, None, 936.0, 71.0)
    assert detect_backend_build([nvidia], importer=importer)[2] is None


def test_the_profile_carries_sycl_f16_only_where_known():
    fp32 = b60_profile(False)
    assert fp32.fp32_gemm and json.loads(profile_to_json(fp32))["sycl_f16"] is False
    assert profile_from_dict(json.loads(profile_to_json(fp32)), measure_bandwidth=False).sycl_f16 is False
    unknown = b60_profile(None)
    assert not unknown.fp32_gemm and "sycl_f16" not in unknown.to_dict()
    assert not b60_profile(True).fp32_gemm


def test_sycl_f16_on_another_backend_or_not_a_bool_is_one_clear_error():
    with pytest.raises(BadInputError, match=r"sycl_f16 describes a SYCL build.*cuda"):
        profile_from_dict({"gpus": [{"name": "RTX 3090"}], "backend": "cuda", "sycl_f16": False},
                          measure_bandwidth=False)
    with pytest.raises(BadInputError, match=r"sycl_f16 must be true or false"):
        profile_from_dict({"gpus": [{"name": B60}], "backend": "sycl", "sycl_f16": "no"}, measure_bandwidth=False)


def test_every_intel_entry_has_its_fp32_rate_an_eighth_of_its_xmx_rate():
    intel = [g for g in gpu_table() if g["vendor"] == "intel"]
    assert intel and all(g.get("fp32_tflops") for g in intel)
    # the published FP32 figures the derivation reproduces (gpus.json sources)
    assert lookup_gpu("Intel Arc B580")["fp32_tflops"] == pytest.approx(13.67)
    assert lookup_gpu("Intel Arc Pro B70")["fp32_tflops"] == pytest.approx(22.94)
    for g in intel:
        # not Meteor Lake or Iris Xe (no XMX: their FP16 figure is the vector rate, 2x FP32),
        # the B390 (its FP16 figure is half its int8 one; its FP32 its shaders x 2 x clock), nor
        # Ponte Vecchio's Data Center GPU Max (4,096-bit XMX beside 512-bit vector engines: 1/16)
        if "Meteor" in g["name"] or "Iris Xe" in g["name"] or "B390" in g["name"]:
            assert "Iris Xe" not in g["name"] or g["fp16_tflops"] == pytest.approx(2 * g["fp32_tflops"], rel=0.01)
            continue
        share = FP32_TO_XMX_FP16 / 2 if "GPU Max" in g["name"] else FP32_TO_XMX_FP16
        assert g["fp32_tflops"] == pytest.approx(g["fp16_tflops"] * share, rel=0.01), g["name"]


def test_an_fp32_build_multiplies_at_the_fp32_rate_whatever_the_weights():
    gpu = b60_profile(False).gpus[0]
    fp32 = lookup_gpu(B60)["fp32_tflops"]
    assert matmul_tflops(gpu, True, "sycl", fp32_gemm=True) == pytest.approx(fp32)
    assert matmul_tflops(gpu, False, "sycl", fp32_gemm=True) == pytest.approx(fp32)
    assert matmul_tflops(gpu, True, "sycl") == pytest.approx(gpu.fp16_tflops)  # the FP16 build: XMX


def test_an_fp32_build_prompt_is_the_fp32_gemm_at_the_float_efficiency_after_a_4_byte_conversion():
    fp16, fp32 = b60_profile(True), b60_profile(False)
    model = llama("Q4_K_M")
    wishes = Wishes(n_ctx=4096, prompt_tokens=512)
    slow = plan(model, fp32, wishes).performance
    fast = plan(model, fp16, wishes).performance
    assert slow.prefill_tok_s < fast.prefill_tok_s / 1.5
    assert slow.decode_tok_s == pytest.approx(fast.decode_tok_s)  # decode is priced alike
    # the FP32 build's time: the FP16 build's matmul work at the FP32 rate and the float
    # efficiency, plus a pass writing every block weight as 4 bytes; the quantized FP16 build
    # runs the same work at the XMX rate and SYCL's quantized efficiency
    blocks = [t for t in model.tensors if t.layer is not None]
    convert = (sum(t.n_bytes for t in blocks) + 4 * sum(t.n_elements for t in blocks)) / _read_bytes_s(fp32, "gpu0")
    sycl = BACKENDS["sycl"]
    gemm_ratio = (lookup_gpu(B60)["fp16_tflops"] * sycl.prefill_efficiency_quant
                  / (lookup_gpu(B60)["fp32_tflops"] * sycl.prefill_efficiency_float))
    t_fast, t_slow = 512 / fast.prefill_tok_s, 512 / slow.prefill_tok_s
    assert t_slow - convert > t_fast  # the GEMM itself is slower, not just the conversion
    assert (t_slow - convert) / t_fast == pytest.approx(gemm_ratio, rel=0.25)  # attention, output rows aside


def test_an_rpc_server_with_an_fp32_sycl_build_prices_its_prompts_so():
    def machine(sycl_f16: bool):
        return profile_from_dict({"cpu": {"ram_total_bytes": 16 * GiB, "cores": 8, "threads": 8},
                                  "remotes": [{"endpoint": "10.0.0.2:50052", "gpus": [{"name": B60}],
                                               "backend": "sycl", "sycl_f16": sycl_f16, "link_gbps": 10}]},
                                 measure_bandwidth=False)
    fp32, fp16 = machine(False), machine(True)
    assert fp32.remotes[0].to_dict()["sycl_f16"] is False
    wishes = Wishes(n_ctx=4096, prompt_tokens=512)
    slow, fast = (plan(llama("Q4_K_M"), hw, wishes).performance for hw in (fp32, fp16))
    assert slow.prefill_tok_s < fast.prefill_tok_s / 1.3
    with pytest.raises(BadInputError, match=r"remotes\[0\]\.sycl_f16 describes a SYCL build"):
        profile_from_dict({"cpu": {"ram_total_bytes": 16 * GiB, "cores": 8, "threads": 8},
                           "remotes": [{"endpoint": "10.0.0.2:50052", "gpus": [{"name": "RTX 3090"}],
                                        "sycl_f16": False}]}, measure_bandwidth=False)
