"""The fitting set (bench/data/llama_bench_rows.json), the fit that turns it into table
constants (bench/fit_constants.py), and what README and backend_constants.py say it gave."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench_modules import load_bench
from rooflight.estimate import backend_constants as bc
from rooflight.estimate.tensor_rates import matmul_tflops
from rooflight.hardware import profile_from_dict
from rooflight.hardware.gpu_table import lookup_gpu
from rooflight.hardware.profile_io import BACKENDS

ROOT = Path(__file__).resolve().parents[1]


fit = load_bench("fit_constants")
import write_constants  # noqa: E402 - beside fit_constants.py, on the path it put there

DATA = fit.load()
ROWS = DATA["rows"]

# Held back for independent validation of the estimator (issue 14): no row may come from them.
# Discussions #4167 and #15013 are allowed only for the rows REFERENCE.md already holds.
RESERVED = ("XiongjieDai", "kyuz0", "amd-strix-halo-toolboxes", "amd-r9700", "geerlingguy",
            "sbc-reviews", "beowulf-ai-cluster", "1337hero", "LocalScore")


@pytest.fixture(scope="module")
def result():
    return fit.run()


def test_every_row_is_sourced_and_complete():
    assert len(ROWS) >= 60
    for r in ROWS:
        where = f"{r['device']} {r['model']} {r['test']}"
        assert r["source"] and ("http" in r["source"] or "REFERENCE.md" in r["source"]), where
        assert not any(name in r["source"] for name in RESERVED), where
        if "4167" in r["source"] or "15013" in r["source"]:
            assert "REFERENCE.md" in r["source"], where
        assert r["backend"] in BACKENDS, where
        assert re.fullmatch(r"(pp|tg)\d+(@d\d+)?", r["test"]), where
        if "@d" in r["test"]:  # a prompt or decode after cached positions (llama-bench -d)
            assert r["n_depth"] == int(r["test"].split("@d")[1]), where
            assert r["n_prompt"] > 0 or fit.decode_start(r, ROWS) is not None, where
        assert (r["n_prompt"] > 0) != (r["n_gen"] > 0), where
        assert r["t_s"] > 0 and r["n_ubatch"] >= 1, where
        assert r["fa"] in (None, 0, 1), where


def test_a_quoted_row_says_what_its_quote_says():
    """Rows that keep the line llama-bench printed (`quote`) carry its figures: the t/s, the
    file size and the test, so a slip in copying a row shows here."""
    quoted = [r for r in ROWS if r.get("quote")]
    assert len(quoted) >= 50
    for r in quoted:
        line = r["quote"]
        where = f"{r['device']} {r['model']} {r['test']}"
        assert f"{r['t_s']:.2f}" in line, where
        mib = re.search(r"([\d.]+) MiB", line)  # small files: llama-bench prints MiB
        assert r["size_gib"] is None or f"{r['size_gib']:.2f} GiB" in line or (
            mib and round(float(mib[1]) / 1024, 2) == r["size_gib"]), where
        assert r["test"].split("@")[0] in line.replace(" ", ""), where


def test_moe_prompts_on_the_f16_gemm_path_check_the_estimate_and_fit_nothing():
    """The V100 multiplies quantized prompts through the F16 GEMM: its gpt-oss prompts would set
    CUDA's float efficiency, which prices every dense F16 prompt; its dense rows still fit."""
    v100 = [r for r in ROWS if r["device"] == "NVIDIA V100 PCIe 16GB"]
    moe_prompts = [r for r in v100 if fit.is_moe(r) and not r["n_gen"]]
    assert moe_prompts and all(fit.prefill_class(r) == "float" and fit.checks_only(r) for r in moe_prompts)
    assert any(not fit.checks_only(r) for r in v100 if not fit.is_moe(r))
    assert not any(fit.checks_only(r) for r in v100 if r["n_gen"])


def _build_number(row: dict) -> int | None:
    found = re.search(r"\((\d+)\)", row.get("build") or "")
    return int(found.group(1)) if found else None


def test_moe_prompts_of_builds_with_the_host_side_expert_helper_check_and_fit_nothing(result):
    """PR #15525 moved MMQ's MoE helper from the host to the GPU (after b6210, by b6301): the
    CUDA MoE prompts of earlier builds measured a synchronization llama.cpp no longer makes.
    They are marked, check without fitting, and stay in every statistic but the one of
    today's paths."""
    marked = [r for r in ROWS if fit.moe_helper_on_host(r)]
    assert len(marked) == 18
    for r in ROWS:
        build = _build_number(r)
        old_mmq_moe = (r["backend"] == "cuda" and fit.is_moe(r) and not r["n_gen"]
                       and fit.prefill_class(r) == "moe" and build is not None and build <= 6210)
        assert fit.moe_helper_on_host(r) == old_mmq_moe, (r["device"], r["test"], r["build"])
    assert all(fit.checks_only(r) for r in marked)
    superseded = [r for r in result["per_row"] if r.get("superseded")]
    assert len(superseded) == len(marked)
    gpu, today = result["lodo"]["gpu"], result["lodo"]["gpu_today"]
    assert today["prefill"]["n"] == gpu["prefill"]["n"] - len(marked)
    assert today["decode"]["n"] == gpu["decode"]["n"]
    with pytest.raises(ValueError, match="moe_mmq_helper"):
        fit.moe_helper_on_host({**marked[0], "moe_mmq_helper": "device"})


def test_every_device_is_known_by_name():
    for r in ROWS:
        if r["backend"] == "cpu":
            assert r["device"] in DATA["cpus"] and DATA["cpus"][r["device"]]["source"]
            continue
        entry = lookup_gpu(r["device"])
        assert entry is not None and entry["name"] == r["device"], r["device"]


def test_backends_and_models_covered():
    assert {r["backend"] for r in ROWS} == set(BACKENDS)
    moe = {r["model"] for r in ROWS if fit.is_moe(r)}
    assert {"gpt-oss-20b", "gpt-oss-120b", "qwen3-30b-a3b"} <= moe


def test_model_specs_match_the_published_file_sizes():
    """The estimator's tensors for each benchmark model add up to the size llama-bench
    printed (the QAT Gemma file keeps its embeddings at higher precision: within 7%; an
    Unsloth dynamic mix, priced as its label's recipe, within 3%)."""
    for r in ROWS:
        if r["size_gib"]:
            got = fit.model_spec(r["model"], r["quant"]).file_bytes / 2**30
            rel = 0.07 if "qat" in r["note"] else 0.03 if "unsloth dynamic" in r["note"] else 0.01
            assert got == pytest.approx(r["size_gib"], rel=rel), r["model"]


def test_the_bands_hold_8_of_10_rows_of_devices_left_out_of_them(result):
    """The written bands are the narrowest percentile bands that hold the promise ("8 of 10
    measurements fall inside") on devices not used to derive them; the 10th-90th does not."""
    assert result["band_tail"] in fit.BAND_TAILS and bc.BAND_TAIL == result["band_tail"]
    assert min(result["band_coverage"]["all"].values()) >= fit.BAND_PROMISE
    narrower = [t for t in fit.BAND_TAILS if t > result["band_tail"]]
    for tail in narrower:
        assert min(fit.band_coverage(result["per_row"], tail)["all"].values()) < fit.BAND_PROMISE


def test_readme_holds_the_fit_tables(result):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- fit_constants:begin -->\n(.*?)\n<!-- fit_constants:end -->", readme, re.S)
    assert block, "README lacks the fit_constants table"
    assert block.group(1).strip() == fit.markdown(result).strip()
    assert f"{result['rows']} published llama-bench rows" in readme
    assert f"{result['devices']} devices" in readme
    peer = re.search(r"<!-- llmfit:begin -->\n(.*?)\n<!-- llmfit:end -->", readme, re.S)
    assert peer, "README lacks the side-by-side table with llmfit"
    assert peer.group(1).strip() == fit.peer_markdown(result).strip()
    sources = re.search(r"<!-- error_sources:begin -->\n(.*?)\n<!-- error_sources:end -->", readme, re.S)
    assert sources, "README lacks the table of where the error comes from"
    assert sources.group(1).strip() == fit.error_sources_markdown(result).strip()
    cache = re.search(r"<!-- cache_checks:begin -->\n(.*?)\n<!-- cache_checks:end -->", readme, re.S)
    assert cache, "README lacks the table of decode rows after cached positions"
    assert cache.group(1).strip() == fit.cache_checks_markdown(result).strip()


def test_a_decode_row_after_cached_positions_is_checked_by_what_the_cache_adds(result):
    """A tg row with n_depth is priced as decode after that many positions (slower than its
    run's first row by the cache's reads), stays out of the statistics and bands, and is
    checked as the seconds it adds to that first row, measured over predicted."""
    deep = next(r for r in ROWS if r["n_gen"] and r.get("n_depth"))
    start = fit.decode_start(deep, ROWS)
    assert start is not None and not start.get("n_depth") and start["model"] == deep["model"]
    assert fit.decode_start(start, ROWS) is None
    assert fit._seconds(deep) > fit._seconds(start)
    assert not any(r["test"] == deep["test"] and r["device"] == deep["device"] for r in result["per_row"])
    check = next(c for c in result["depth_checks"] if c["test"] == deep["test"] and c["device"] == deep["device"])
    coef = {id(r): fit.coefficients(r) for r in (deep, start)}
    c = {"decode_efficiency": 0.8, "layer_overhead_s": 1e-4}
    want = (fit.measured_seconds(deep) - fit.measured_seconds(start)) / (
        1 / fit.predict(deep, coef[id(deep)], c) - 1 / fit.predict(start, coef[id(start)], c))
    assert fit.cache_check(deep, start, coef, c, 1.0)["cache_s_ratio"] == pytest.approx(want, abs=1e-4)
    assert 0.1 < check["cache_s_ratio"] < 10


def test_error_sources_price_each_device_by_its_own_factor():
    """One factor per device removes what a device's rows share and keeps what they disagree
    on; a device with one row of a kind has no floor and counts in neither column."""
    rows = [{"backend": "cuda", "device": "A", "test": "tg128", "ratio": 1.2},
            {"backend": "cuda", "device": "A", "test": "tg128", "ratio": 1.2},
            {"backend": "rocm", "device": "B", "test": "tg128", "ratio": 0.5},
            {"backend": "rocm", "device": "B", "test": "tg128", "ratio": 2.0},
            {"backend": "vulkan", "device": "C", "test": "tg128", "ratio": 3.0},
            {"backend": "sycl", "device": "D", "test": "pp512", "ratio": 0.8},
            {"backend": "sycl", "device": "D", "test": "pp512", "ratio": 0.8}]
    got = fit.error_sources(rows)
    decode = got["gpu"]["decode"]
    assert (decode["rows"], decode["devices"]) == (4, 2)
    assert decode["floor"]["median_err"] == pytest.approx(0.25)  # A: 0, 0; B: x0.5 and x2 of their mean 1: 0.5, 1
    assert decode["lodo"]["median_err"] == pytest.approx(0.35)  # 0.2, 0.2, 0.5, 1.0
    assert got["gpu"]["prefill"]["floor"]["median_err"] == pytest.approx(0.0)
    assert got["gpu_without_sycl"]["prefill"] == {"rows": 0, "devices": 0, "lodo": None, "floor": None}


def test_llmfit_s_formula_is_its_own():
    """bench/peer_llmfit.py reproduces llmfit's estimate_tps: its own worked example (fit.rs:
    an RTX 4090's 1008 GB/s, a 27B model at 4 bits, ~40 tok/s measured) and its CPU path."""
    import peer_llmfit as llmfit

    assert llmfit.gpu_decode_tok_s(27_000_000_000, "Q4_K_M", 1008.0) == pytest.approx(41.07, abs=0.01)
    assert llmfit.gpu_decode_tok_s(7_000_000_000, "Q5_K_S", 100.0) == llmfit.gpu_decode_tok_s(
        7_000_000_000, "Q4_0", 100.0)  # a type it does not list: 0.5 bytes, as 4 bits
    # 70 / 7 x 1.15 (Q4_0) x 1.1 (8+ cores) x 0.3 (CPU only)
    assert llmfit.cpu_decode_tok_s(7_000_000_000, "Q4_0", "x86", 16) == pytest.approx(3.795)
    assert llmfit.cpu_decode_tok_s(7_000_000_000, "Q4_0", "arm", 4) == pytest.approx(90 / 7 * 1.15 * 0.3)


def test_backend_constants_are_the_fitted_ones(result):
    assert set(result["fitted"]["cpu"]) == set(bc.CPU_SHARES)
    for family, cpu in result["fitted"]["cpu"].items():
        shares = bc.CPU_SHARES[family]
        assert shares.peak_read == pytest.approx(cpu["peak_read_share"], abs=6e-3), family
        assert shares.clock == pytest.approx(cpu["clock_share"], abs=6e-4), family
        assert shares.matmul_clock == pytest.approx(cpu["matmul_clock_share"], abs=6e-4), family
    for b, c in result["fitted"].items():
        if b == "cpu":
            continue
        k = bc.BACKENDS[b]
        assert k.decode_efficiency == pytest.approx(c["decode_efficiency"], abs=6e-4), b
        assert k.layer_overhead_s == pytest.approx(c["layer_overhead_s"], abs=6e-8), b
        assert k.prefill_efficiency_float == pytest.approx(c["prefill_float"], abs=6e-4), b
        assert k.prefill_efficiency_quant == pytest.approx(c["prefill_quant"], abs=6e-4), b
        assert k.moe_expert_overhead_tokens == pytest.approx(c["moe_overhead_tokens"], abs=0.5), b
    for b, band in result["bands"].items():
        k = bc.BACKENDS[b]
        assert list(k.decode_band) == band["decode"] and list(k.prefill_band) == band["prefill"], b
        assert k.band_basis and "hand-chosen" not in k.band_basis
        if b != "cpu":  # the CPU's basis names its own fit (fit_cpu.py)
            assert k.band_basis == getattr(bc, write_constants.BAND_BASES[result["band_kinds"][b]]), b


def test_a_pooled_band_that_misses_the_backend_s_own_rows_is_widened_to_hold_them():
    """A backend with too few rows of its own takes the GPU backends' pooled band; where
    its own out-of-sample ratios mostly fall outside it, the band grows to hold them all."""
    pooled = [0.9, 0.95, 1.0, 1.05, 1.1] * 4
    lodo = {"cuda": {"decode": pooled, "prefill": pooled},
            "sycl": {"decode": [0.5, 1.9, 1.95], "prefill": [1.0, 1.01, 0.99]}}
    bands, kinds = fit._bands(lodo, 3.0)
    assert kinds == {"cuda": "own", "sycl": "widened"}
    assert bands["sycl"]["decode"] == [0.5, 1.95]
    assert bands["sycl"]["prefill"] == bands["cuda"]["prefill"] == [0.9, 1.1]  # held: left as pooled


@pytest.mark.parametrize(("name", "expected"), [
    ("NVIDIA GB10", "NVIDIA GB10"), ("DGX Spark", "NVIDIA GB10"), ("Apple M5", "Apple M5"),
    ("Radeon 8060S Graphics", "AMD Radeon 8060S"), ("AMD Radeon 8060S", "AMD Radeon 8060S"),
    ("Tesla P40", "NVIDIA Tesla P40"), ("AMD Instinct MI50/MI60", "AMD Radeon Instinct MI50"),
    ("Tesla V100-PCIE-32GB", "NVIDIA V100 PCIe 16GB"),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", "NVIDIA GeForce RTX 4090 Laptop GPU"),
    ("NVIDIA RTX 6000 Ada Generation", "NVIDIA RTX 6000 Ada Generation"),
    ("NVIDIA RTX A4000", "NVIDIA RTX A4000"),
    ("NVIDIA A40", "NVIDIA A40"), ("NVIDIA B200", "NVIDIA B200"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "NVIDIA RTX PRO 6000 Blackwell"),
    ("RTX PRO 5000 Blackwell", "NVIDIA RTX PRO 5000 Blackwell"),
    ("AMD Radeon AI PRO R9700", "AMD Radeon AI PRO R9700"), ("AMD Radeon PRO W7900", "AMD Radeon PRO W7900"),
    ("AMD Radeon 780M Graphics", "AMD Radeon 780M"), ("AMD Radeon 890M", "AMD Radeon 890M"),
    ("Intel(R) Arc(TM) Pro B60 Graphics", "Intel Arc Pro B60"), ("Intel Arc Pro B50", "Intel Arc Pro B50"),
    ("Intel Arc 140V GPU", "Intel Arc 140V"),
    ("Apple M5 Pro", "Apple M5 Pro"), ("Apple M5 Max", "Apple M5 Max"),
    ("AMD Instinct MI300X VF", "AMD Instinct MI300X"),  # SR-IOV cloud instances
])
def test_new_devices_are_found_by_name(name, expected):
    entry = lookup_gpu(name)
    assert entry is not None and entry["name"] == expected
    assert entry.get("source") or expected.startswith("NVIDIA V100")


def test_laptop_and_workstation_boards_are_not_their_desktop_namesakes():
    assert lookup_gpu("RTX 4090 Laptop GPU")["bandwidth_gbs"] == 576.0
    assert lookup_gpu("RTX 4090")["bandwidth_gbs"] == 1008.0
    # Turing's Quadro RTX 6000 is its own entry, not the Ada board
    assert lookup_gpu("Quadro RTX 6000")["compute_capability"] == "7.5"
    assert lookup_gpu("RTX 6000 Ada Generation")["compute_capability"] == "8.9"
    ada = profile_from_dict({"gpus": [{"name": "RTX 6000 Ada Generation"}]}).gpus[0]
    assert matmul_tflops(ada, True) == pytest.approx(728.5, rel=1e-3)  # int8: 2x, not a GeForce's 4x


def test_kernels_rate_differs_between_geforce_and_datacentre():
    """Quantized prompts run on int8 tensor cores: 4x the FP32-accumulate FP16 figure on a
    GeForce, 2x on an A100; F16 prompts at FP16 accumulate: 2x on GeForce, 1x on an A100."""
    geforce = profile_from_dict({"gpus": [{"name": "RTX 4090"}]}).gpus[0]
    a100 = profile_from_dict({"gpus": [{"name": "A100 SXM4 80GB"}]}).gpus[0]
    assert matmul_tflops(geforce, True) == pytest.approx(4 * 165.2, rel=1e-3)
    assert matmul_tflops(geforce, False) == pytest.approx(2 * 165.2, rel=1e-3)
    assert matmul_tflops(a100, True) == pytest.approx(624.0)
    assert matmul_tflops(a100, False) == pytest.approx(312.0)
    # a profile's own FP16 figure keeps its scale; a GPU the table lacks keeps its figure
    custom = profile_from_dict({"gpus": [{"name": "RTX 4090", "fp16_tflops": 100.0}]}).gpus[0]
    assert matmul_tflops(custom, True) == pytest.approx(400.0, rel=1e-3)
    unknown = profile_from_dict({"gpus": [{"name": "Mystery GPU", "vendor": "nvidia", "bandwidth_gbs": 500, "fp16_tflops": 50,
                                           "vram_total_bytes": 8 * 2**30}]}).gpus[0]
    assert matmul_tflops(unknown, True) == 50.0


def test_sycl_prices_quantized_prompts_at_its_fp16_gemm_rate():
    """llama.cpp's SYCL backend dequantizes and runs oneDNN's GEMM (no int8 MMQ), and its
    Vulkan backend has int8 matrix kernels for AMD RDNA3/4 only: the table's int8 (XMX)
    figure for an Intel GPU must not double its quantized prompt rate on either."""
    arc = profile_from_dict({"gpus": [{"name": "Intel Arc 140V"}], "backend": "sycl"}).gpus[0]
    assert arc.fp16_tflops and lookup_gpu("Intel Arc 140V")["int8_tops"] == 2 * arc.fp16_tflops
    assert matmul_tflops(arc, True, "sycl") == pytest.approx(arc.fp16_tflops)
    assert matmul_tflops(arc, True, "vulkan") == pytest.approx(arc.fp16_tflops)
    assert matmul_tflops(arc, False, "sycl") == pytest.approx(arc.fp16_tflops)


def test_the_cpu_fit_decomposes_the_estimator_exactly():
    """bench/fit_cpu.py prices a CPU row as max(M / read_share, C / clock_share) + F from
    three runs of the estimator: at other shares that must be what the estimator says."""
    import fit_cpu

    rows = [r for r in ROWS if r["backend"] == "cpu"]
    picked = [next(r for r in rows if r["n_gen"]), next(r for r in rows if not r["n_gen"]),
              next(r for r in rows if r["n_gen"] and r["device"].startswith("Raspberry"))]
    for r in picked:
        coef = fit_cpu.coefficients(r, fit._seconds)
        for read, clock in ((0.4, 0.7), (0.9, 2.5)):
            with fit_cpu.shares(read, clock):
                want = fit._seconds(r)
            assert fit_cpu.predict_s(coef, read, clock) == pytest.approx(want, rel=1e-6), r["device"]


def test_backend_constants_file_is_what_write_would_write(result):
    """`fit_constants.py --write` (bench/write_constants.py) leaves the file as it is."""
    import write_constants

    text = write_constants.PATH.read_text(encoding="utf-8")
    assert write_constants.render(result, text) == text


def test_a_row_is_priced_by_the_prompt_kernel_its_build_ran():
    """The RTX 4090 rows of a 2024-01 build ran quantized prompts through cuBLAS as F16 (their
    log: GGML_CUDA_FORCE_MMQ no, CUDA_USE_TENSOR_CORES yes): priced at the float efficiency,
    slower than today's MMQ rule prices the same row; a kernel the fit does not know is an error."""
    row = next(r for r in ROWS if r.get("prompt_kernel") == "cublas_f16" and r["quant"] == "Q8_0")
    assert "4766" in row["source"] and fit.prefill_class(row) == "float"
    today = {k: v for k, v in row.items() if k != "prompt_kernel"}
    assert fit.prefill_class(today) == "quant"
    assert fit._seconds(row) > fit._seconds(today)
    with pytest.raises(ValueError, match="prompt_kernel"):
        fit.prefill_class({**row, "prompt_kernel": "dp4a"})


def test_a_decode_fit_never_reads_faster_than_the_peak_bandwidth():
    """Rows of fast discrete cards alone let the least-squares fit trade the per-layer cost
    for an efficiency above 1 (Vulkan without the Radeon 8060S: 1.39 and 185 us a layer,
    which priced the 8060S's dense rows x0.68-0.91). The fit holds the efficiency at the
    bound and fits the per-layer cost alone."""
    # two synthetic rows of t = A/eff + B*layer + C that only eff = 1.5, layer 0 fits exactly
    rows = [{"n_gen": 1, "t_s": 1.0 / (0.010 / 1.5 + 0.001)}, {"n_gen": 1, "t_s": 1.0 / (0.020 / 1.5 + 0.001)},
            {"n_gen": 1, "t_s": 1.0 / (0.030 / 1.5 + 0.001)}]
    coef = {id(rows[0]): (0.010, 32.0, 0.001), id(rows[1]): (0.020, 32.0, 0.001), id(rows[2]): (0.030, 32.0, 0.001)}
    eff, layer = fit.fit_decode(rows, coef, "vulkan")
    assert eff == fit.MAX_DECODE_EFFICIENCY == 1.0
    assert layer == 0.0  # the rows are faster than the bound at any per-layer cost
    vulkan = [r for r in ROWS if r["backend"] == "vulkan" and r["n_gen"] and r["device"] != "AMD Radeon 8060S"]
    coef = {id(r): fit.coefficients(r) for r in vulkan}
    eff, layer = fit.fit_decode(vulkan, coef, "vulkan")
    assert eff <= 1.0 and layer > 0


def test_the_moe_cost_pairs_rows_of_one_run_only():
    """A device's MoE prompt rows are priced against dense rows of the same run (build, else
    source), where the kernels' own speed cancels out; the RTX 4090's 2025-08 MoE row and its
    2026 dense row are two runs and pair with nothing."""
    assert fit.run_key({"build": "b6918 (2f68ce7cf)", "source": "https://x/y (a)"}) == "b6918 (2f68ce7cf)"
    assert fit.run_key({"build": None, "source": "https://x/y (section a)"}) == "https://x/y"
    pp = [r for r in ROWS if r["backend"] == "cuda" and not r["n_gen"] and not fit.checks_only(r)]
    paired = set()
    for dev, run in {(r["device"], fit.run_key(r)) for r in pp}:
        kinds = {fit.prefill_class(r) for r in pp if r["device"] == dev and fit.run_key(r) == run}
        if {"quant", "moe"} <= kinds:
            paired.add(dev)
    assert paired == {"NVIDIA GB10", "NVIDIA RTX PRO 6000 Blackwell"}


def test_fp32_sycl_rows_are_priced_by_their_build_and_fit_nothing(result):
    """Rows of a SYCL build without GGML_SYCL_F16 run the FP32 GEMM (float class, at the FP32
    rate); they check that pricing and set no constant (SYCL's float efficiency stays pooled)."""
    fp32 = [r for r in ROWS if r.get("sycl_f16") is False]
    assert len(fp32) >= 3 and all(r["backend"] == "sycl" and not r["n_gen"] for r in fp32)
    for r in fp32:
        assert fit.checks_only(r) and fit.prefill_class(r) == "float" and fit.hardware(r).fp32_gemm
        as_fp16 = {k: v for k, v in r.items() if k != "sycl_f16"}
        assert fit._seconds(r) > 1.5 * fit._seconds(as_fp16)  # the FP16 build's XMX GEMM is faster
    # no SYCL row fits its float efficiency: the pooled one of the other backends' rows
    assert result["fitted"]["sycl"]["prefill_float"] == pytest.approx(result["pooled"]["prefill_float"])
    checked = [p for p in result["per_row"] if p["device"] == "Intel Arc Pro B60"]
    assert len(checked) == len(fp32) and all(0.5 < p["ratio"] < 1.5 for p in checked)  # x0.69-1.10 (README)


def test_the_hybrid_gpu_rows_keep_the_fitting_sets_rules():
    """bench/data/hybrid_gpu_rows.json (checks only, bench/hybrid_gpu_check.py): every row
    sourced outside the held-back sources, on a GPU the table knows, of a model the estimator
    can build, and the hybrids of them hybrid."""
    import json

    from rooflight.gguf.recurrent import RECURRENT_RULES

    rows = json.loads((ROOT / "bench" / "data" / "hybrid_gpu_rows.json").read_text(encoding="utf-8"))["rows"]
    assert len(rows) >= 30
    for r in rows:
        where = f"{r['device']} {r['model']} {r['test']}"
        assert "http" in r["source"] and not any(name in r["source"] for name in RESERVED), where
        assert r["backend"] in BACKENDS and r["backend"] != "cpu", where
        entry = lookup_gpu(r["device"])
        assert entry is not None and entry["name"] == r["device"], where
        assert re.fullmatch(r"(pp|tg)\d+", r["test"]) and (r["n_prompt"] > 0) != (r["n_gen"] > 0), where
        assert r["t_s"] > 0, where
        arch = fit.model_spec(r["model"], r["quant"]).architecture
        assert (arch in RECURRENT_RULES) == r["model"].startswith(("qwen3.5", "qwen3.6", "qwen3-next",
                                                                      "qwen3-coder-next")), where


def test_the_hybrid_gpu_band_is_derived_from_the_hybrid_rows_and_holds_on_held_out_gpus():
    """backend_constants.HYBRID_GPU_*_BAND is what bench/hybrid_gpu_check.py derives from the
    published hybrid rows (priced with the fitted constants), and holds 8 of 10 rows of each
    GPU left out of its percentiles."""
    import json

    check = load_bench("hybrid_gpu_check")
    rows = json.loads(check.DATA.read_text(encoding="utf-8"))["rows"]
    found = check.band(rows, check.ratios(rows))
    assert (found["decode"], found["prefill"]) == (bc.HYBRID_GPU_DECODE_BAND, bc.HYBRID_GPU_PREFILL_BAND)
    assert f"p{found['tail']:g}-p{100 - found['tail']:g}" in bc.HYBRID_GPU_BAND_BASIS
    for kind in ("decode", "prefill"):
        inside, total = found[kind + "_held_out"]
        assert inside >= 0.8 * total
