"""MoE models on this machine's CPU: llama.cpp's measured prompt and decode speed against the
probe-based estimate, for generated Qwen3-MoE models the probe never ran.

    python bench/moe_prompt_cpu.py [--types Q8_0,Q4_0,F16] [--ubatch 128,512] [--rounds 3] [--fit]

The probe measures each weight type's prompt rate on a dense model (MUL_MAT); a MoE model's
routed experts go through MUL_MAT_ID, another kernel path (ggml-cpu: vec_dot in 16x16 blocks,
or the repacked GEMM for the types repack.cpp handles), and its routing adds work the probe
does not see. This prints how far that leaves the estimate, per type and micro-batch: two
shapes (32 experts, 4 used; 128 experts, 8 used), a 512-token prompt, 2 threads, flash
attention on, the best of --rounds runs, the models kept loaded and run interleaved; decode:
GEN tokens right after the prompt. Needs a stored probe of this machine (`rooflight probe`).
--fit: per expert type, the MUL_MAT_ID cost (moe_prompt.CPU_EXPERT_COST, or a probe's
expert_costs) that prices the first shape's prompt (the fitting shape) as measured, then the
second shape's ratio with it (the check). The estimates use the stored probe's own expert
costs where it measured them (the probe measures Q4_K, Q8_0 and MXFP4); each line also gives
the same measurement against the table's costs (moe_prompt.CPU_EXPERT_COST), side by side.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rooflight.estimate import Calibration, Wishes, plan
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime import amx
from rooflight.store.probes import probe_status

SHAPES = {
    "moe-32x4": dict(n_layer=6, n_embd=1024, n_head=8, n_head_kv=4, n_ff=768, n_expert=32, n_expert_used=4),
    "moe-128x8": dict(n_layer=4, n_embd=1024, n_head=8, n_head_kv=4, n_ff=384, n_expert=128, n_expert_used=8),
}
PROMPT = 512
GEN = 32
FIT_SHAPE, CHECK_SHAPE = "moe-32x4", "moe-128x8"
COSTS = [round(1.0 + 0.02 * i, 2) for i in range(201)]  # 1.0 to 5.0


def prompt_estimate(spec, hw, probe, ub: int, wt: str | None = None, cost: float | None = None):
    """The probe-based estimate of the bench prompt; with wt and cost, that type's experts
    priced at `cost` dense multiply-adds (the probe's own measured costs set aside)."""
    if wt is not None and cost is not None:
        probe = replace(probe, expert_costs=((wt, cost),))
    w = Wishes(n_ctx=1024, n_gpu_layers=0, n_threads=probe.n_threads, flash_attn="on", n_batch=PROMPT,
               n_ubatch=ub, prompt_tokens=PROMPT, gen_tokens=GEN)
    return plan(spec, hw, w, calibration=Calibration(probe=probe)).performance


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="Q8_0,Q4_0,F16")
    ap.add_argument("--ubatch", default="512", help="micro-batches, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fit", action="store_true", help="fit CPU_EXPERT_COST on the first shape, check on the second")
    args = ap.parse_args()

    hw = detect()
    probe = probe_status(hw).probe
    if probe is None:
        print("no stored probe of this machine: run `rooflight probe` first")
        return 1
    ubatches = [int(x) for x in args.ubatch.split(",")]
    tokens = [(i * 7919) % 7000 + 10 for i in range(PROMPT)]
    fitted: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="rooflight-moe-") as tmp:
        for wt in (t.strip().upper() for t in args.types.split(",")):
            for name, shape in SHAPES.items():
                path = write_model(Path(tmp) / f"{name}-{wt}.gguf", arch="qwen3moe", context_length=4096, tiled=True,
                                   pure=True, n_vocab=8000, ftype=wt, **shape)
                spec = load_model_spec(str(path))
                llms = {ub: amx.llama_class()(str(path), n_ctx=1024, n_batch=PROMPT, n_ubatch=ub, n_threads=probe.n_threads,
                                            n_threads_batch=probe.n_threads, flash_attn=True, verbose=False)
                        for ub in ubatches}
                best = {ub: float("inf") for ub in ubatches}
                best_token = {ub: float("inf") for ub in ubatches}
                for _ in range(args.rounds):
                    for ub, llm in llms.items():
                        llm.reset()
                        t0 = time.perf_counter()
                        llm.eval(tokens)
                        best[ub] = min(best[ub], time.perf_counter() - t0)
                        t0 = time.perf_counter()
                        for i in range(GEN):
                            llm.eval([11 + i])
                        best_token[ub] = min(best_token[ub], (time.perf_counter() - t0) / GEN)
                for ub, llm in llms.items():
                    llm.close()
                    est = prompt_estimate(spec, hw, probe, ub)
                    measured, decode = PROMPT / best[ub], 1 / best_token[ub]
                    if args.fit and name == FIT_SHAPE:
                        fitted[wt] = min(COSTS, key=lambda c: abs(math.log(
                            measured / prompt_estimate(spec, hw, probe, ub, wt, c).prefill_tok_s)))
                    if args.fit and name == CHECK_SHAPE and wt in fitted:
                        check = prompt_estimate(spec, hw, probe, ub, wt, fitted[wt])
                        print(f"{wt:5} {name:10} ub {ub:4}: with CPU_EXPERT_COST {fitted[wt]:.2f} (fitted on {FIT_SHAPE}):"
                              f" prompt x{measured / check.prefill_tok_s:.2f}")
                    # the same measurement priced with the table's MUL_MAT_ID costs (a probe without its own)
                    table = prompt_estimate(spec, hw, replace(probe, expert_costs=()), ub)
                    print(f"{wt:5} {name:10} ub {ub:4}: prompt measured {measured:7.0f} tok/s, estimate"
                          f" {est.prefill_tok_s:7.0f} ({est.basis}), x{measured / est.prefill_tok_s:.2f}"
                          f" (table's expert costs: x{measured / table.prefill_tok_s:.2f}); decode measured"
                          f" {decode:6.1f}, estimate {est.decode_tok_s:6.1f}, x{decode / est.decode_tok_s:.2f}")
                path.unlink()
    if args.fit:
        print("CPU_EXPERT_COST fitted on " + FIT_SHAPE + ": " + ", ".join(f"{k} {v:.2f}" for k, v in fitted.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
