"""Fit the roofline's table constants on published llama-bench rows, and say how good they are.

    .venv/bin/python bench/fit_constants.py          # tables: fitted constants, LODO error
    .venv/bin/python bench/fit_constants.py --json   # the same as JSON
    .venv/bin/python bench/fit_constants.py --write  # the fitted numbers into backend_constants.py

Rows: bench/data/llama_bench_rows.json (each with its source). Every prediction is Rooflight's
own estimator (estimate.plan on a ModelSpec from the model's published hyper-parameters and a
profile of the named GPU from resources/gpus.json), run with the constants under test swapped
into estimate.backend_constants.BACKENDS.

The estimator's time is linear in the reciprocal efficiencies and the per-layer cost, so each
row is evaluated a few times to get its coefficients (decode: t = A/eff + B*layer_cost + C;
prefill: t = F/eff + D), and the fits are weighted least squares on relative time error
(numpy only, deterministic). Accuracy is leave-one-device-out (LODO): each device's rows are
predicted with constants fitted on the other devices of its backend (on all other rows where
its backend has no other device); an error on the fitting points is not an accuracy.
CPU rows (a CPU known by its datasheet) go through bench/fit_cpu.py: the datasheet shares
per ISA family, each CPU held out of its family's fit.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import sys
from functools import cache
from pathlib import Path

import numpy as np

from rooflight.catalog.models import find_model
from rooflight.estimate import Wishes, plan
from rooflight.estimate import backend_constants as bc
from rooflight.estimate.perf import prefill_time_s
from rooflight.gguf.from_hparams import spec_from_hparams
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware import profile_from_dict
from rooflight.hardware.profile import PEAK_BANDWIDTH_SOURCE

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fit_cpu  # noqa: E402 - the CPU half, beside this file
import peer_llmfit  # noqa: E402 - llmfit's decode formula, for the side-by-side table

DATA = Path(__file__).resolve().parent / "data" / "llama_bench_rows.json"
MXFP4_BYTES_PER_32 = 17  # 4.25 bits per weight
# Profiles as bench/accuracy.py gives them: the Apple rows of discussion #4167 ran on a 24 GB M2
# (Metal share ~16 GiB) and the 30-core M2 Max (10.7 FP16 TFLOPS, not the 38-core's 13.6).
DEVICE_OVERRIDES = {
    "Apple M2": {"vram_total_bytes": 16 * 2**30},
    "Apple M2 Max": {"vram_total_bytes": 48 * 2**30, "fp16_tflops": 10.7},
}
FLOAT_TYPES = ("F16", "BF16", "F32")


def load(path: Path = DATA) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@cache
def model_spec(model: str, quant: str) -> ModelSpec:
    """The benchmark model's tensors at this quantization (MXFP4: experts MXFP4, rest Q8_0)."""
    if quant == "MXFP4":
        base = model_spec(model, "Q8_0")
        tensors = tuple(
            dataclasses.replace(t, ggml_type="MXFP4", n_bytes=t.n_elements // 32 * MXFP4_BYTES_PER_32)
            if t.is_expert else t for t in base.tensors)
        return dataclasses.replace(base, file_type="MXFP4", tensors=tensors,
                                   file_bytes=sum(t.n_bytes for t in tensors))
    extra = load()["models"].get(model)
    if extra:
        h = {k: v for k, v in extra.items() if k not in ("source", "arch")}
        return spec_from_hparams(name=model, arch=extra["arch"], ftype=quant, **h)
    entry = find_model(model)
    if entry is None:
        raise KeyError(f"model {model!r} is neither in the catalog nor in {DATA.name}")
    return entry.spec(quant)


# Backends whose rows only check the constants: the CPU ones are fitted on this project's VM
# (bench/accuracy.py) and depend on per-type tables and the CPU's own figures, which one
# published CPU cannot refit; their rows are predicted with the constants as they are.
# backends fitted by their own model (bench/fit_cpu.py), not by the GPU backends' constants
OWN_FIT = ("cpu",)


def hardware(row: dict):
    # sycl_f16 (SYCL rows whose source shows the build): false for an FP32 build
    return _hardware(row["device"], row["backend"], row.get("sycl_f16"))


@cache
def _hardware(device: str, backend: str, sycl_f16: bool | None = None):
    """The profile a row of this device and backend is predicted on (built once: the fit
    asks for it for every evaluation of every row)."""
    if backend == "cpu":
        cpu = {k: v for k, v in load()["cpus"][device].items() if k in _CPU_FIELDS}
        cpu["ram_bandwidth_source"] = PEAK_BANDWIDTH_SOURCE  # a datasheet figure
        return profile_from_dict({"cpu": cpu, "backend": "cpu"})
    gpu = {"name": device, **DEVICE_OVERRIDES.get(device, {})}
    return profile_from_dict({"gpus": [gpu], "backend": backend, "sycl_f16": sycl_f16})


_CPU_FIELDS = ("name", "cores", "threads", "max_freq_mhz", "isa", "ram_bandwidth_gbs", "ram_total_bytes", "arch")


def is_float(row: dict) -> bool:
    return row["quant"].upper() in FLOAT_TYPES


def is_moe(row: dict) -> bool:
    return bool(model_spec(row["model"], row["quant"]).n_expert)


# A row whose build multiplied quantized prompts with another kernel than today's rules pick
# (its `prompt_kernel`): "cublas_f16", dequantized to F16 and multiplied by cuBLAS, as CUDA
# builds from PR #3776 (2023-10) to PR #8075 (2024-06-23) did on Volta and newer. The row is
# priced by the kernel it ran; the estimator's own rules (tensor_rates.dequantizes_for_gemm)
# stay those of the pinned llama.cpp.
PROMPT_KERNELS = ("cublas_f16",)


# A CUDA row's MoE prompt whose build ran MMQ's expert helper on the host (`moe_mmq_helper`
# "host"): until PR #15525 (opened 2025-08-23, in release b6301 by the b6131..b6301
# changelog) each expert matmul copied the routing ids to the host, waited for the GPU and
# sorted the tokens there; since, that runs on the GPU without a synchronization. The
# gpt-oss guide's rows of builds b6199-b6210 (2025-08-18) measured the old path: priced
# without the fitted MoE cost, 3-9 ms a layer per 2048-token micro-batch more than the
# estimate on every GPU from an RTX 5060 Ti to an RTX PRO 6000, a host cost that does not
# scale with the GPU. They check, not fit, and the "gpu_today" statistics leave them out.
MOE_MMQ_HELPERS = ("host",)


def _build_mark(row: dict, key: str, known: tuple[str, ...]) -> str | None:
    """A row's mark of the path its build took (`prompt_kernel`, `moe_mmq_helper`): None where
    it has none; a value the fit does not know stops it (one sentence naming the row)."""
    value = row.get(key)
    if value is not None and value not in known:
        raise ValueError(f"row {row['device']} {row['model']} {row['test']}: unknown {key} {value!r}")
    return value


def moe_helper_on_host(row: dict) -> bool:
    return _build_mark(row, "moe_mmq_helper", MOE_MMQ_HELPERS) == "host"


def runs_cublas_f16(row: dict) -> bool:
    return _build_mark(row, "prompt_kernel", PROMPT_KERNELS) == "cublas_f16"


@contextlib.contextmanager
def _prompt_kernel(row: dict):
    """The estimator, for this row, with its build's prompt kernel."""
    if not runs_cublas_f16(row):
        yield
        return
    from rooflight.estimate import perf

    old = perf.dequantizes_for_gemm
    perf.dequantizes_for_gemm = lambda *args, **kwargs: True
    try:
        yield
    finally:
        perf.dequantizes_for_gemm = old


def prefill_class(row: dict) -> str:
    """float | quant | moe: the efficiency a prompt row's time depends on (a quantized model
    whose GPU dequantizes for the F16 GEMM at this micro-batch runs at the float one)."""
    from rooflight.estimate.tensor_rates import dequantizes_for_gemm, main_weight_type

    if runs_cublas_f16(row):
        return "float"
    hw = hardware(row)
    gpu = hw.gpus[0] if hw.gpus else None
    spec = model_spec(row["model"], row["quant"])
    if is_float(row) or hw.fp32_gemm or dequantizes_for_gemm(
            gpu, row["backend"], min(row["n_ubatch"], row["n_prompt"]), main_weight_type(spec), spec.n_expert):
        return "float"  # an FP32 SYCL build's weights are converted for oneDNN's FP32 GEMM
    return "moe" if is_moe(row) else "quant"


@contextlib.contextmanager
def constants(backend: str, **changes):
    old = bc.BACKENDS[backend]
    bc.BACKENDS[backend] = dataclasses.replace(old, **changes)
    try:
        yield
    finally:
        bc.BACKENDS[backend] = old


def _seconds(row: dict, **changes) -> float:
    """Rooflight's predicted seconds per token (tg rows) or for the prompt (pp rows); after
    n_depth positions already in the cache where a row has them (llama-bench's -d). A tg
    row's decode is priced as the estimate's decode after a prompt of n_depth tokens: its
    tokens attend to the n_depth cached positions and to each other, as llama-bench's do."""
    spec = model_spec(row["model"], row["quant"])
    depth = row.get("n_depth") or 0
    n_ctx = max(4096, depth + row["n_prompt"] + row["n_gen"] + 256)
    cpu = row["backend"] == "cpu"
    prompt = depth if row["n_gen"] and depth else row["n_prompt"]
    wishes = Wishes(n_ctx=n_ctx, n_gpu_layers=0 if cpu else spec.n_layer + 1, n_threads=row.get("n_threads"),
                    flash_attn="on" if row["fa"] == 1 else "auto",
                    n_batch=max(512, row["n_ubatch"]), n_ubatch=row["n_ubatch"],
                    prompt_tokens=max(1, prompt), gen_tokens=max(1, row["n_gen"]))
    with constants(row["backend"], **changes), _prompt_kernel(row):
        est = plan(spec, hardware(row), wishes)
        if depth and not row["n_gen"]:
            return prefill_time_s(spec, hardware(row), est.config, est.memory, row["n_prompt"], start=depth)[0]
    if row["n_gen"]:
        return 1.0 / est.performance.decode_tok_s
    return row["n_prompt"] / est.performance.prefill_tok_s


def coefficients(row: dict) -> tuple[float, ...]:
    """Decode: (A, B, C) of t = A/eff + B*layer_cost + C. Prefill: (F, D, M, G) of
    t = max((F + G*overhead)/eff, M) + D, M the time to read the weights once per micro-batch
    (the estimator's memory floor), for the efficiency of the row's weight class; G: what a
    MoE row's moe_expert_overhead_tokens adds (0 for a dense model)."""
    if row["n_gen"]:
        t1 = _seconds(row, decode_efficiency=1.0, layer_overhead_s=0.0)
        t2 = _seconds(row, decode_efficiency=0.5, layer_overhead_s=0.0)
        t3 = _seconds(row, decode_efficiency=1.0, layer_overhead_s=1e-4)
        a = t2 - t1
        return a, (t3 - t1) / 1e-4, t1 - a
    key = "prefill_efficiency_float" if prefill_class(row) == "float" else "prefill_efficiency_quant"
    no_overhead = {"moe_expert_overhead_tokens": 0.0}
    t_slow1 = _seconds(row, **{key: 0.01}, **no_overhead)  # compute-bound
    t_slow2 = _seconds(row, **{key: 0.005}, **no_overhead)
    t_fast = _seconds(row, **{key: 1e6}, **no_overhead)  # memory-bound
    f = (t_slow2 - t_slow1) / 100.0
    d = t_slow1 - 100.0 * f
    g = 0.0
    if is_moe(row):
        g = (_seconds(row, **{key: 0.01, "moe_expert_overhead_tokens": 100.0}) - t_slow1) / (100.0 * 100.0)
    return f, d, max(0.0, t_fast - d), g


def measured_seconds(row: dict) -> float:
    return 1.0 / row["t_s"] if row["n_gen"] else row["n_prompt"] / row["t_s"]


# Per-layer cost where too few decode rows (< 3) can separate it from the efficiency, or the
# fit makes either negative: the value the constants carried before any fit (a prior, said so).
PRIOR_LAYER_S = {"cuda": 63e-6, "metal": 195e-6, "rocm": 80e-6, "vulkan": 90e-6, "sycl": 90e-6}


def fit_decode(rows: list[dict], coef: dict[int, tuple], backend: str | None = None) -> tuple[float, float]:
    """(decode_efficiency, layer_overhead_s) minimising relative time error."""
    m = np.array([[coef[id(r)][0], coef[id(r)][1]] for r in rows]) / np.array([[measured_seconds(r)] for r in rows])
    y = 1.0 - np.array([coef[id(r)][2] / measured_seconds(r) for r in rows])
    x, *_ = np.linalg.lstsq(m, y, rcond=None)
    if x[1] < 0 or x[0] <= 0 or len(rows) < 3:
        layer = PRIOR_LAYER_S.get(backend or "", 90e-6)
        y2 = y - m[:, 1] * layer
        x = np.array([float(m[:, 0] @ y2 / (m[:, 0] @ m[:, 0])), layer])
    if x[0] < 1.0 / MAX_DECODE_EFFICIENCY:
        # more than the peak bandwidth: the fit traded the per-layer cost for it; hold the
        # efficiency at the bound and fit the per-layer cost alone
        y2 = y - m[:, 0] / MAX_DECODE_EFFICIENCY
        x = np.array([1.0 / MAX_DECODE_EFFICIENCY, max(0.0, float(m[:, 1] @ y2 / (m[:, 1] @ m[:, 1])))])
    return 1.0 / x[0], float(x[1])


# A decode efficiency is a share of the table's peak bandwidth: no device reads faster
MAX_DECODE_EFFICIENCY = 1.0


# 1/efficiency candidates for prefill: the max() in the estimator makes the fit non-linear,
# so it is a deterministic search over this grid (efficiency 0.01 to 2)
_INV_EFF = np.geomspace(0.5, 100.0, 800)


def fit_prefill(rows: list[dict], coef: dict[int, tuple], overhead: float = 0.0) -> float | None:
    """Prefill efficiency minimising the squared log error of the rows' times."""
    if not rows:
        return None
    f, d, m, g = (np.array([coef[id(r)][i] for r in rows])[:, None] for i in range(4))
    meas = np.array([measured_seconds(r) for r in rows])[:, None]
    pred = np.maximum((f + g * overhead) * _INV_EFF[None, :], m) + d
    loss = (np.log(pred / meas) ** 2).sum(axis=0)
    return float(1.0 / _INV_EFF[int(np.argmin(loss))])


def predict(row: dict, coef: tuple, c: dict) -> float:
    """Predicted tokens/s with constants c."""
    if row["n_gen"]:
        a, b, cc = coef
        return 1.0 / (a / c["decode_efficiency"] + b * c["layer_overhead_s"] + cc)
    eff = c["prefill_float"] if prefill_class(row) == "float" else c["prefill_quant"]
    f, d, m, g = coef
    return row["n_prompt"] / (max((f + g * c["moe_overhead_tokens"]) / eff, m) + d)


def checks_only(row: dict) -> bool:
    """Rows that check the estimate but fit nothing: prompts after cached positions
    (llama-bench -d), whose time is mostly attention, priced at the F16 GEMM efficiency;
    fitted on, they would pull the quantized weights' efficiency to make up for it. And
    FP32 SYCL builds (sycl_f16 false): priced at the FP32 rate with the float efficiency
    the other backends' rows set, they would otherwise set SYCL's own float efficiency,
    which its F16 build's XMX GEMMs use. And MoE prompts a GPU multiplies through the F16
    GEMM after dequantizing (the V100's gpt-oss rows): their experts' many small GEMMs are a
    path no dense row takes, and fitted on, those few rows set the float efficiency every
    dense F16 prompt of the backend is priced by (CUDA's went 0.47 -> 0.34 with two of them).
    And MoE prompts of CUDA builds whose expert matmuls prepared their rows on the host
    (`moe_mmq_helper` "host"): a path llama.cpp has not taken since (MOE_MMQ_HELPERS)."""
    if not row["n_gen"] and is_moe(row) and prefill_class(row) == "float":
        return True
    if moe_helper_on_host(row):
        return True
    return bool(row.get("n_depth")) or hardware(row).fp32_gemm


def fit(rows: list[dict], coef: dict[int, tuple]) -> dict:
    rows = [r for r in rows if not checks_only(r)]
    tg = [r for r in rows if r["n_gen"]]
    pp = [r for r in rows if not r["n_gen"]]
    backends = {r["backend"] for r in rows}
    eff, layer = fit_decode(tg, coef, backends.pop() if len(backends) == 1 else None) if tg else (None, None)
    pf = fit_prefill([r for r in pp if prefill_class(r) == "float"], coef)
    pq = fit_prefill([r for r in pp if prefill_class(r) == "quant"], coef)
    # a class without rows stays None: the caller fills it from other backends' rows
    return {"decode_efficiency": eff, "layer_overhead_s": layer, "prefill_float": pf, "prefill_quant": pq,
            "moe_overhead_tokens": moe_overhead_tokens(pp, coef)}


# moe_expert_overhead_tokens candidates: 0, and 1 to 1000 tokens
_OVERHEAD = np.concatenate([[0.0], np.geomspace(1.0, 1000.0, 400)])


def run_key(row: dict) -> str:
    """What identifies one published run of llama-bench: its build where the row gives one,
    else its source's address (one table of one pull request, issue or file)."""
    return str(row.get("build") or row["source"].split()[0])


def moe_overhead_tokens(pp: list[dict], coef: dict[int, tuple]) -> float | None:
    """Median over runs that have both dense-quantized and MoE prompt rows of one device of
    the overhead that best prices the run's MoE rows at its dense rows' efficiency: within
    one device and build the kernels' own speed cancels out. (Pairing a device's rows across
    builds did not: an RTX 4090's 2026 dense row beside its 2025-08 MoE one called for 758
    tokens, the GB10's and RTX PRO 6000's one-run pairs for 56 and 162.)"""
    per_device = []
    for dev, run in sorted({(r["device"], run_key(r)) for r in pp}):
        rows = [r for r in pp if r["device"] == dev and run_key(r) == run]
        dense = fit_prefill([r for r in rows if prefill_class(r) == "quant"], coef)
        moe = [r for r in rows if prefill_class(r) == "moe"]
        if not dense or not moe:
            continue
        f, d, m, g = (np.array([coef[id(r)][i] for r in moe])[:, None] for i in range(4))
        meas = np.array([measured_seconds(r) for r in moe])[:, None]
        pred = np.maximum((f + g * _OVERHEAD[None, :]) / dense, m) + d
        per_device.append(float(_OVERHEAD[int(np.argmin((np.log(pred / meas) ** 2).sum(axis=0)))]))
    return float(np.median(per_device)) if per_device else None


def fill(c: dict, other: dict) -> dict:
    return {k: (v if v is not None else other[k]) for k, v in c.items()}


def _stats(ratios: list[float]) -> dict:
    if not ratios:
        return {"n": 0}
    err = np.abs(np.array(ratios) - 1.0)
    return {"n": len(ratios), "median_err": float(np.median(err)), "p90_err": float(np.percentile(err, 90)),
            "ratio_p10": float(np.percentile(ratios, 10)), "ratio_p90": float(np.percentile(ratios, 90))}


def run(path: Path = DATA) -> dict:
    data = load(path)
    every, cpus = data["rows"], data["cpus"]
    rows = [r for r in every if r["backend"] not in OWN_FIT]
    coef = {id(r): coefficients(r) for r in rows}
    backends = sorted({r["backend"] for r in rows})
    pooled = fit(rows, coef)
    # a backend's constants from its own rows; a weight class it has no rows for from all rows
    fitted = {b: fill(fit([r for r in rows if r["backend"] == b], coef), pooled) for b in backends}
    lodo: dict[str, dict[str, list]] = {b: {"decode": [], "prefill": []} for b in backends}
    per_row = []
    depth_checks: list[dict] = []  # decode rows after cached positions (decode_start)
    # one fold per (device, backend): a device measured on two backends (RTX 3090 on CUDA and
    # Vulkan) is held out of every training set while either of its folds is predicted
    for dev, b in sorted({(r["device"], r["backend"]) for r in rows}):
        held = [r for r in rows if r["device"] == dev and r["backend"] == b]
        train = [r for r in rows if r["backend"] == b and r["device"] != dev]
        basis = "same backend"
        others = fit([r for r in rows if r["device"] != dev], coef)
        if not train:
            c, basis = others, "other backends"
        else:
            c = fit(train, coef)
            if any(v is None for v in c.values()):
                c, basis = fill(c, others), "same backend, gaps from other backends"
        for r in held:
            ratio = r["t_s"] / predict(r, coef[id(r)], c)
            start = decode_start(r, held)
            if start is not None:  # checked apart, not in the statistics (decode_start)
                depth_checks.append(cache_check(r, start, coef, c, ratio))
                continue
            lodo[b]["decode" if r["n_gen"] else "prefill"].append(ratio)
            per_row.append({"device": dev, "backend": b, "model": r["model"], "quant": r["quant"],
                            "test": r["test"], "measured": r["t_s"], "ratio": round(ratio, 4), "basis": basis,
                            "superseded": moe_helper_on_host(r), **_peer_fields(r, cpus)})
    cpu_rows = [r for r in every if r["backend"] == "cpu"]
    cpu_coef = {id(r): fit_cpu.coefficients(r, _seconds) for r in cpu_rows}
    fitted["cpu"], cpu_lodo = fit_cpu.leave_one_cpu_out(cpu_rows, cpu_coef, measured_seconds, cpus)
    lodo["cpu"] = {"decode": [], "prefill": []}
    for r, ratio in cpu_lodo:
        lodo["cpu"]["decode" if r["n_gen"] else "prefill"].append(ratio)
        per_row.append({"device": r["device"], "backend": "cpu", "model": r["model"], "quant": r["quant"],
                        "test": r["test"], "measured": r["t_s"], "ratio": round(ratio, 4),
                        "basis": "other CPUs (fit_cpu.py)", **_peer_fields(r, cpus)})
    backends = sorted(lodo)
    table = {b: {k: _stats(v) for k, v in lodo[b].items()} for b in backends}
    all_d = [x for b in backends for x in lodo[b]["decode"]]
    all_p = [x for b in backends for x in lodo[b]["prefill"]]
    table["all"] = {"decode": _stats(all_d), "prefill": _stats(all_p)}
    gpu = [b for b in backends if b not in OWN_FIT]
    table["gpu"] = {k: _stats([x for b in gpu for x in lodo[b][k]]) for k in ("decode", "prefill")}
    # the same without the rows of a path llama.cpp no longer takes (moe_helper_on_host):
    # what the estimate's error is for today's builds; the rows above keep them
    today = [r for r in per_row if r["backend"] in gpu and not r.get("superseded")]
    table["gpu_today"] = {k: _stats([r["ratio"] for r in today if r["test"].startswith("pp") == (k == "prefill")])
                          for k in ("decode", "prefill")}
    tail, coverage = band_tail(per_row)
    bands, band_kinds = _bands(lodo, tail)
    devices = {b: len({r["device"] for r in every if r["backend"] == b}) for b in backends}
    devices["all"] = len({r["device"] for r in every})
    devices["gpu"] = len({r["device"] for r in every if r["backend"] not in OWN_FIT})
    devices["gpu_today"] = len({r["device"] for r in today})
    return {"rows": len(every), "devices": len({r["device"] for r in every}), "devices_by_backend": devices,
            "fitted": fitted, "pooled": pooled, "lodo": table, "bands": bands, "band_kinds": band_kinds, "band_tail": tail, "band_coverage": coverage,
            "peer": peer_comparison(per_row), "error_sources": error_sources(per_row), "per_row": per_row,
            "depth_checks": depth_checks}


def decode_start(row: dict, rows: list[dict]) -> dict | None:
    """For a decode row after cached positions (llama-bench -d), the row its run began with:
    the same device, backend, model, file, source and tokens with no cached positions; None
    for every other row. Such a row checks what reading the cache costs (cache_check), apart
    from the statistics and the bands: its ratio measured / predicted repeats the first
    row's error (one device's decode at six depths would count that row's six times)."""
    if not (row["n_gen"] and row.get("n_depth")):
        return None
    key = ("device", "backend", "model", "quant", "source", "n_gen", "n_prompt")
    return next((r for r in rows if not r.get("n_depth") and all(r[k] == row[k] for k in key)), None)


def cache_check(row: dict, start: dict, coef: dict[int, tuple], c: dict, ratio: float) -> dict:
    """A decode row after cached positions against its run's first row: the seconds per
    token the cache adds, measured (the two rows' times apart) over predicted (the same
    from the estimate with the constants c, fitted without the device). Per-token and
    per-layer costs cancel out of both; what is left is the cache's reads."""
    start_s = 1.0 / predict(start, coef[id(start)], c)
    measured = measured_seconds(row) - measured_seconds(start)
    predicted = 1.0 / predict(row, coef[id(row)], c) - start_s
    # what a user sees: how much slower decode runs after the cached positions than on an empty
    # cache, measured over predicted (the first row's own error cancels out)
    slowdown = (measured_seconds(row) / measured_seconds(start)) / (1.0 / predict(row, coef[id(row)], c) / start_s)
    return {"device": row["device"], "backend": row["backend"], "model": row["model"], "quant": row["quant"],
            "test": row["test"], "n_depth": row["n_depth"], "measured": row["t_s"], "ratio": round(ratio, 4),
            "cache_s_ratio": round(measured / predicted, 4), "slowdown_ratio": round(slowdown, 4)}


def _peer_fields(row: dict, cpus: dict) -> dict:
    """The row's build year (None: not published) and, for a dense decode row, measured /
    llmfit's estimate (peer_llmfit.py)."""
    date = str(row.get("date") or "")
    out: dict = {"year": int(date[:4]) if date[:4].isdigit() else None, "llmfit_ratio": None}
    spec = model_spec(row["model"], row["quant"])
    if not row["n_gen"] or spec.n_expert:
        return out
    if row["backend"] == "cpu":
        cpu = cpus[row["device"]]
        estimate = peer_llmfit.cpu_decode_tok_s(spec.params, row["quant"], bc.cpu_family(cpu["isa"], cpu.get("arch", "")),
                                                cpu["cores"])
    else:
        estimate = peer_llmfit.gpu_decode_tok_s(spec.params, row["quant"], hardware(row).gpus[0].bandwidth_gbs)
    out["llmfit_ratio"] = round(row["t_s"] / estimate, 4)
    return out


# The build years the side-by-side table splits by: what issue 14 compared (2025-2026) and the rest
RECENT_YEARS = (2025, 2026)


def peer_comparison(per_row: list[dict]) -> dict[str, dict[str, dict]]:
    """{group: {era: {"rooflight": stats, "llmfit": stats}}} over the dense decode rows both
    price: group gpu | cpu | all, era recent (2025-2026 builds) | older (2024 or undated)."""
    out: dict[str, dict[str, dict]] = {}
    for group in ("gpu", "cpu", "all"):
        for era in ("recent", "older"):
            rows = [r for r in per_row if r["llmfit_ratio"] is not None
                    and (group == "all" or (r["backend"] == "cpu") == (group == "cpu"))
                    and ((r["year"] in RECENT_YEARS) == (era == "recent"))]
            out.setdefault(group, {})[era] = {"rooflight": _stats([r["ratio"] for r in rows]),
                                              "llmfit": _stats([r["llmfit_ratio"] for r in rows])}
    return out


def peer_markdown(res: dict) -> str:
    """README's side-by-side table (tests/test_fit_constants.py checks README holds it)."""
    lines = ["| rows (dense decode) | builds | rows | Rooflight median / p90 | llmfit median / p90 |",
             "|---|---|---|---|---|"]
    names = {"gpu": "GPU backends", "cpu": "CPU", "all": "all"}
    eras = {"recent": "2025-2026", "older": "2024 or undated"}
    for group, by_era in res["peer"].items():
        for era, s in by_era.items():
            r, llm = s["rooflight"], s["llmfit"]
            if not r["n"]:
                continue
            lines.append(f"| {names[group]} | {eras[era]} | {r['n']} | {_pct(r['median_err'])} / {_pct(r['p90_err'])} "
                         f"| {_pct(llm['median_err'])} / {_pct(llm['p90_err'])} |")
    return "\n".join(lines)


# A band needs this many out-of-sample ratios of its own; fewer: the GPU backends' pooled band
MIN_BAND_ROWS = 8


def _bands(lodo: dict[str, dict[str, list]], tail: float) -> tuple[dict[str, dict[str, list[float]]], dict[str, str]]:
    """Per backend and kind, the band of measured/predicted ratios: the tail-th to (100 -
    tail)-th percentile of the LODO ratios (band_tail picks the tail), and how it was made
    (own | pooled | widened). Backends with fewer rows take the pooled band of the GPU
    backends; where that pooled band holds fewer than BAND_PROMISE of the backend's own
    LODO ratios (its devices disagree with everyone else's: SYCL), it is widened to hold
    every one of them, so the range shown for such a device says how little is known."""
    out: dict[str, dict[str, list[float]]] = {}
    how: dict[str, str] = {}
    pooled = {k: [x for b, v in lodo.items() if b not in OWN_FIT for x in v[k]] for k in ("decode", "prefill")}
    for b, kinds in lodo.items():
        out[b], kinds_how = {}, set()
        for k, ratios in kinds.items():
            own = len(ratios) >= MIN_BAND_ROWS
            base = ratios if own else pooled[k]
            lo, hi = round(float(np.percentile(base, tail)), 2), round(float(np.percentile(base, 100 - tail)), 2)
            kind = "own" if own else "pooled"
            if not own and ratios and np.mean([lo <= x <= hi for x in ratios]) < BAND_PROMISE:
                lo = min(lo, math.floor(100 * min(ratios)) / 100)
                hi = max(hi, math.ceil(100 * max(ratios)) / 100)
                kind = "widened"
            out[b][k] = [lo, hi]
            kinds_how.add(kind)
        how[b] = "widened" if "widened" in kinds_how else kinds_how.pop() if len(kinds_how) == 1 else "pooled"
    return out, how


# The share of measurements a band promises ("8 of 10 fall inside"), and the percentile
# tails tried, narrowest first. A 10th-90th percentile band of LODO ratios holds 80% of the
# rows it was taken from, but a device's rows share its quirks: on a device left out of the
# band's derivation only 61-72% fell inside. band_tail takes the narrowest band that holds
# the promise on held-out devices.
BAND_PROMISE = 0.8
BAND_TAILS = (10.0, 7.5, 5.0, 4.0, 3.0, 2.5, 2.0, 1.0, 0.0)


def band_tail(per_row: list[dict]) -> tuple[float, dict[str, dict[str, float]]]:
    """(tail, coverage at it): the largest tail whose band holds BAND_PROMISE of the rows of
    devices held out of it, over all rows, decode and prefill alike."""
    for tail in BAND_TAILS:
        coverage = band_coverage(per_row, tail)
        if min(coverage["all"].values()) >= BAND_PROMISE:
            return tail, coverage
    return BAND_TAILS[-1], band_coverage(per_row, BAND_TAILS[-1])


def band_coverage(per_row: list[dict], tail: float = 10.0) -> dict[str, dict[str, float]]:
    """Whether a band holds for a device it was not derived from: for each device, the band
    (tail-th to (100 - tail)-th percentile) of the other devices' leave-one-device-out ratios of its backend
    (GPU backends with fewer than MIN_BAND_ROWS such rows: the other GPU devices' pooled),
    and the share of the device's own rows inside it. {backend: {"decode", "prefill"}},
    plus "all" over every row."""
    inside: dict[str, dict[str, list[bool]]] = {}
    for r in per_row:
        kind = "prefill" if r["test"].startswith("pp") else "decode"
        others = [x["ratio"] for x in per_row if x["device"] != r["device"] and x["backend"] == r["backend"]
                  and x["test"].startswith("pp") == (kind == "prefill")]
        if len(others) < MIN_BAND_ROWS and r["backend"] not in OWN_FIT:
            others = [x["ratio"] for x in per_row if x["device"] != r["device"] and x["backend"] not in OWN_FIT
                      and x["test"].startswith("pp") == (kind == "prefill")]
        lo, hi = np.percentile(others, tail), np.percentile(others, 100 - tail)
        for key in (r["backend"], "all"):
            inside.setdefault(key, {"decode": [], "prefill": []})[kind].append(bool(lo <= r["ratio"] <= hi))
    return {b: {k: float(np.mean(v)) if v else float("nan") for k, v in kinds.items()} for b, kinds in inside.items()}


# Where the out-of-sample error comes from: the same rows priced with one correction factor per
# device, fitted on that device's own rows (the geometric mean of its LODO ratios). That is
# in sample and so a floor, not an accuracy: it is what a model whose only fault were one
# wrong number per device (its efficiency, which a probe of that device measures) would
# leave. What the LODO error has beyond it is the transfer from other devices; what the
# floor itself holds is rows of one device that disagree with each other (builds, quants,
# prompt sizes). Scopes: the GPU backends, the same without SYCL (3 devices that disagree,
# README), and the CPUs. Devices with one row of a kind have no floor and are left out of
# both columns of that kind.
ERROR_SCOPES = {"gpu": "GPU backends", "gpu_without_sycl": "GPU backends but SYCL", "cpu": "CPU"}


def _in_scope(row: dict, scope: str) -> bool:
    if scope == "cpu":
        return row["backend"] == "cpu"
    return row["backend"] not in OWN_FIT and (scope == "gpu" or row["backend"] != "sycl")


def error_sources(per_row: list[dict]) -> dict[str, dict[str, dict]]:
    """{scope: {"decode"|"prefill": {"rows", "devices", "lodo": stats, "floor": stats}}}: over
    rows of devices with two or more rows of the kind, the LODO error and the error left with
    one factor per device fitted on its own rows."""
    out: dict[str, dict[str, dict]] = {}
    for scope in ERROR_SCOPES:
        out[scope] = {}
        for kind in ("decode", "prefill"):
            by_device: dict[tuple[str, str], list[float]] = {}
            for r in per_row:
                if _in_scope(r, scope) and r["test"].startswith("pp") == (kind == "prefill"):
                    by_device.setdefault((r["backend"], r["device"]), []).append(r["ratio"])
            kept = [v for v in by_device.values() if len(v) >= 2]
            lodo = np.abs(np.array([x for v in kept for x in v]) - 1.0)
            floor = np.abs(np.array([x / np.exp(np.mean(np.log(v))) for v in kept for x in v]) - 1.0)
            stats = lambda e: {"median_err": float(np.median(e)), "p90_err": float(np.percentile(e, 90))} if e.size else None  # noqa: E731
            out[scope][kind] = {"rows": int(lodo.size), "devices": len(kept), "lodo": stats(lodo), "floor": stats(floor)}
    return out


def error_sources_markdown(res: dict) -> str:
    """The README table of error_sources (tests/test_fit_constants.py checks README holds it)."""
    lines = ["| rows | kind | rows (devices) | leave-one-device-out: median / p90 | one factor per device, in sample: median / p90 |",
             "|---|---|---|---|---|"]
    for scope, name in ERROR_SCOPES.items():
        for kind, s in res["error_sources"][scope].items():
            lines.append(f"| {name} | {kind} | {s['rows']} ({s['devices']}) | {_pct(s['lodo']['median_err'])} / "
                         f"{_pct(s['lodo']['p90_err'])} | {_pct(s['floor']['median_err'])} / {_pct(s['floor']['p90_err'])} |")
    return "\n".join(lines)


def cache_checks_markdown(res: dict) -> str:
    """The README table of the decode rows after cached positions (cache_check;
    tests/test_fit_constants.py checks README holds it)."""
    lines = ["| device | backend | model | test | measured t/s | measured / predicted | cache's seconds per token, measured / predicted | slowdown from the empty cache, measured / predicted |",
             "|---|---|---|---|---|---|---|---|"]
    for c in res["depth_checks"]:
        lines.append(f"| {c['device']} | {c['backend']} | {c['model']} {c['quant']} | {c['test']} | {c['measured']:g} | "
                     f"x{c['ratio']:.2f} | x{c['cache_s_ratio']:.2f} | x{c['slowdown_ratio']:.2f} |")
    s = _stats([c["slowdown_ratio"] for c in res["depth_checks"]])
    lines.append("")
    lines.append(f"Slowdown from the empty cache, {s['n']} rows of {len({c['device'] for c in res['depth_checks']})} "
                 f"devices: |measured / predicted - 1| median {_pct(s['median_err'])}, p90 {_pct(s['p90_err'])}.")
    return "\n".join(lines)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def markdown(res: dict) -> str:
    """The README table (tests/test_fit_constants.py checks README holds exactly this)."""
    lines = ["| backend | devices | rows (decode / prefill) | decode median | decode p90 | prefill median | prefill p90 | band: decode, prefill |",
             "|---|---|---|---|---|---|---|---|"]
    for b, s in res["lodo"].items():
        d, p = s["decode"], s["prefill"]
        n_dev = res["devices_by_backend"][b]
        cell = lambda x, k: _pct(x[k]) if x["n"] else "-"  # noqa: E731
        band = res["bands"].get(b)
        band_txt = f"x{band['decode'][0]:.2f}-{band['decode'][1]:.2f}, x{band['prefill'][0]:.2f}-{band['prefill'][1]:.2f}" if band else "-"
        name = {"all": "all (LODO)", "gpu": "GPU backends (LODO)",
                "gpu_today": "GPU backends, paths llama.cpp still takes (LODO)"}.get(b, b)
        lines.append(f"| {name} | {n_dev} | {d['n']} / {p['n']} | {cell(d, 'median_err')} | {cell(d, 'p90_err')} "
                     f"| {cell(p, 'median_err')} | {cell(p, 'p90_err')} | {band_txt} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rows", action="store_true", help="print every row's LODO ratio")
    ap.add_argument("--markdown", action="store_true", help="the README accuracy table")
    ap.add_argument("--write", action="store_true",
                    help="write the fitted constants into estimate/backend_constants.py (until stable)")
    args = ap.parse_args()
    if args.write:
        import write_constants

        print(f"backend_constants.py: {write_constants.write_until_stable()} round(s) written")
        return 0
    res = run()
    if args.markdown:
        print(markdown(res))
        print()
        print(peer_markdown(res))
        print()
        print(error_sources_markdown(res))
        print()
        print(cache_checks_markdown(res))
        return 0
    if args.json:
        json.dump(res, sys.stdout, indent=1)
        return 0
    print(f"{res['rows']} rows, {res['devices']} devices")
    print("\n== fitted on all rows of the backend ==")
    for b, c in res["fitted"].items():
        if b in OWN_FIT:
            for fam, f in c.items():
                print(f"{b:4} {fam:3} peak read share {f['peak_read_share']:.2f}  clock share: decode "
                      f"{f['clock_share']:.3f} prompt {f['matmul_clock_share']:.3f}")
            continue
        print(f"{b:7} decode_eff {c['decode_efficiency']:.3f}  layer {1e6 * (c['layer_overhead_s'] or 0):6.1f} us"
              f"  prefill float {c['prefill_float']:.3f} quant {c['prefill_quant']:.3f}"
              f"  moe overhead {c['moe_overhead_tokens'] or 0:.0f} tokens")
    print("\n== leave-one-device-out: |measured/predicted - 1| ==")
    print("backend  devices | decode n median p90 | prefill n median p90 | band (p10-p90 ratio) decode, prefill")
    for b, s in res["lodo"].items():
        d, p = s["decode"], s["prefill"]
        n_dev = res["devices_by_backend"][b]
        cell = lambda x: f"{x['n']:3} {_pct(x['median_err']):>5} {_pct(x['p90_err']):>5}" if x["n"] else "  0     -     -"  # noqa: E731
        band = lambda x: f"{x['ratio_p10']:.2f}-{x['ratio_p90']:.2f}" if x["n"] else "-"  # noqa: E731
        print(f"{b:7} {n_dev:4}    | {cell(d)} | {cell(p)} | {band(d)}, {band(p)}")
    print(f"\n== bands for backend_constants.py (measured / predicted, p{res['band_tail']:g}-p{100 - res['band_tail']:g}:"
          f" 8 of 10 inside on held-out devices) ==")
    for b, k in res["bands"].items():
        print(f"{b:7} decode {k['decode']}  prefill {k['prefill']}  ({res['band_kinds'][b]})")
    print(f"\n== the bands on devices they were not derived from: p{res['band_tail']:g}-p{100 - res['band_tail']:g} of the"
          " other devices' ratios; share of a device's rows inside ==")
    for b, k in res["band_coverage"].items():
        print(f"{b:7} decode {k['decode']:.0%}  prefill {k['prefill']:.0%}")
    print("\n== dense decode rows: Rooflight (leave-one-device-out) beside llmfit's formula (peer_llmfit.py) ==")
    print(peer_markdown(res))
    print("\n== where the error comes from: devices with 2+ rows of a kind, LODO beside one factor per device (in sample) ==")
    print(error_sources_markdown(res))
    if args.rows:
        for r in res["per_row"]:
            print(f"  {r['device']:26} {r['model']:28} {r['quant']:6} {r['test']:7} {r['measured']:9.2f} x{r['ratio']:.2f} ({r['basis']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
