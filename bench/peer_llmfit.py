"""llmfit's decode estimate, beside Rooflight's, on the published llama-bench rows.

Issue 14 found Rooflight's decode no better than llmfit's on rows from 2025-2026 builds.
This prices the same rows with llmfit's formula so bench/fit_constants.py can print both
errors side by side, split by the year of the build.

The formula is llmfit's `estimate_tps` (llmfit-core/src/fit.rs and models.rs, AlexsJones/llmfit
at 3f44fd30a43d, 2026-08-22), for dense models, which it prices without architecture data:
- a GPU it knows the bandwidth of: bandwidth_GB_s / (params_B x bytes_per_param(quant)) x
  0.55 (its default efficiency) x 1.0 (its GPU run-mode factor). It looks the bandwidth up by
  GPU name in its own table; here Rooflight's GPU table gives it (the same datasheet
  figures), so a GPU llmfit's table lacks is priced as if it had it: kinder to llmfit.
- CPU only: K / params_B x quant_speed_multiplier(quant), x 1.1 with 8 or more cores, x 0.3
  (its CPU run-mode factor); K = 90 on aarch64, 70 on x86.
MoE rows are left out: llmfit's MoE path needs its architecture metadata and VRAM-pressure
rules, which are not reproduced here. Its constants were not fitted on these rows, and
neither were Rooflight's for the row being predicted (leave-one-device-out): both are out
of sample.
"""

from __future__ import annotations

EFFICIENCY = 0.55
CPU_ONLY_FACTOR = 0.3
CPU_K = {"arm": 90.0, "x86": 70.0}
MANY_CORES, MANY_CORES_BONUS = 8, 1.1

# models.rs quant_bytes_per_param / quant_speed_multiplier; a type it does not list falls to
# its default (0.5 bytes, x1.0)
_BYTES_PER_PARAM = {"F16": 2.0, "BF16": 2.0, "Q8_0": 1.0, "Q6_K": 0.75, "Q5_K_M": 0.625,
                    "Q4_K_M": 0.5, "Q4_0": 0.5, "Q3_K_M": 0.375, "Q2_K": 0.25}
_SPEED_MULTIPLIER = {"F16": 0.6, "BF16": 0.6, "Q8_0": 0.8, "Q6_K": 0.95, "Q5_K_M": 1.0,
                     "Q4_K_M": 1.15, "Q4_0": 1.15, "Q3_K_M": 1.25, "Q2_K": 1.35}


def bytes_per_param(quant: str) -> float:
    return _BYTES_PER_PARAM.get(quant.upper(), 0.5)


def speed_multiplier(quant: str) -> float:
    return _SPEED_MULTIPLIER.get(quant.upper(), 1.0)


def gpu_decode_tok_s(params: int, quant: str, bandwidth_gbs: float) -> float:
    return bandwidth_gbs / (params / 1e9 * bytes_per_param(quant)) * EFFICIENCY


def cpu_decode_tok_s(params: int, quant: str, family: str, cores: int) -> float:
    tok_s = CPU_K[family] / (params / 1e9) * speed_multiplier(quant)
    if cores >= MANY_CORES:
        tok_s *= MANY_CORES_BONUS
    return tok_s * CPU_ONLY_FACTOR
