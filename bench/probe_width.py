"""Does a weight cost the same at every model width? The probe measures each weight type on
one shape (decode: 2048 wide, prefill: 1024 wide) and prices every model's weights by it;
this measures the same weight type at other widths, side by side, to show how far that
holds on this machine.

    python bench/probe_width.py [--types Q8_0,Q4_0,F16] [--rounds 5] [--mb 200] [--fit-edges]
                                [--decode-only] [--save]

Decode: generated llama models of about --mb MB each at 512, 1024, 2048 and 4096 wide
(layers chosen for equal bytes), 16 tokens after a 4-token prompt. Prefill: a 512-token
prompt through models of 256-3072 wide. Models stay loaded and run interleaved round by
round (the machine's speed drifts between seconds); the median of --rounds counts. Prints
ns per weight (decode: per weight per token, after the probe's per-layer cost of this
machine's stored probe where there is one; prefill: per weight that multiplies every
prompt token, so without the last block's FFN) and the ratio to the probe's width.
Decode is also read per layer: what a layer of each width costs beyond its weights priced at
the 2048-wide figure (flat over the widths where the extra cost is per layer; on a Zen 5 VM,
2026-12-06, 35-70 us a layer for Q4_0, Q5_0, Q6_K and Q4_K, about 10 for Q8_0). --save keeps
the decode sweep as a JSON record in bench/results/width/ (with the machine's CPU id), for a
price of those costs to be checked on machines it was not fitted on; --decode-only skips the
prompts.
--fit-edges: prompts only, then the estimate of each prompt on the stored probe and the
matmul_shape.EDGE_ELEMENTS that makes measured / estimated flattest over the widths (the
shapes here are not the ones bench/accuracy_probe.py checks the estimate on).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rooflight.gguf.synthetic import write_model
from rooflight.runtime.probe import (
    PURE_FTYPE as FTYPE,  # pure files of a K type, as the probe writes them
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_probe import machine_fields, write_record  # noqa: E402 - beside this file

RESULTS_DIR = Path(__file__).resolve().parent / "results" / "width"
DECODE_WIDTHS = (512, 1024, 2048, 4096)
DECODE_PROBE_WIDTH = 2048  # runtime/probe.py _DECODE_SHAPE
PREFILL_WIDTHS = (256, 512, 1024, 2048, 3072)
PREFILL_PROBE_WIDTH = 1024  # runtime/probe.py _PREFILL_SHAPE
BYTES_PER_WEIGHT = {"F16": 2.0, "BF16": 2.0, "Q8_0": 34 / 32, "Q4_0": 18 / 32, "Q5_0": 22 / 32, "Q4_K": 144 / 256,
                    "Q6_K": 210 / 256}


def shape(width: int) -> dict:
    heads = max(2, width // 128)
    return dict(n_embd=width, n_head=heads, n_head_kv=heads, head_dim=width // heads,
                n_ff=int(width * 2.75) // 64 * 64)


def weights_per_layer(s: dict) -> int:
    return 4 * s["n_embd"] ** 2 + 3 * s["n_embd"] * s["n_ff"]


def load(path: Path, n_ctx: int):
    from rooflight.runtime import amx

    return amx.llama_class()(str(path), n_ctx=n_ctx, n_batch=512, n_ubatch=512, n_threads=2, n_threads_batch=2,
                           flash_attn=True, verbose=False)


def layer_cost_s() -> float:
    """The stored probe's fixed cost per layer per token, 0 without one."""
    from rooflight.hardware import detect
    from rooflight.store.probes import probe_status

    probe = probe_status(detect()).probe
    return probe.fixed.layer_s if probe is not None else 0.0


def decode_sweep(folder: Path, wt: str, rounds: int, mb: float, per_layer: float) -> dict[str, dict]:
    """{width: its model's layers, weights, median seconds a token, ns a weight and cost per
    layer beyond the probe width's figure} for one weight type; printed as it goes."""
    models = []
    for width in DECODE_WIDTHS:
        s = shape(width)
        n_layer = max(1, round(mb * 1e6 / (weights_per_layer(s) * BYTES_PER_WEIGHT[wt])))
        path = write_model(folder / f"d{width}-{wt}.gguf", tiled=True, context_length=4096, n_layer=n_layer,
                           ftype=FTYPE.get(wt, wt), pure=True, n_vocab=8000, **s)
        models.append((width, n_layer, n_layer * weights_per_layer(s), load(path, 512)))
    times: dict[int, list[float]] = {w: [] for w, *_ in models}
    for _ in range(rounds):
        for width, _, _, llm in models:
            llm.reset()
            llm.eval([5, 6, 7, 8])
            t0 = time.perf_counter()
            for i in range(16):
                llm.eval([9 + i])
            times[width].append((time.perf_counter() - t0) / 16)
    per_weight = {w: (statistics.median(times[w]) - per_layer * n) / weights for w, n, weights, _ in models}
    ref = per_weight[DECODE_PROBE_WIDTH]
    print(f"decode {wt}: " + "  ".join(
        f"{w} wide {per_weight[w] * 1e9:.4f} ns/weight x{per_weight[w] / ref:.2f}" for w in DECODE_WIDTHS))
    # the same read per layer: what a layer of each width costs beyond its weights at the
    # probe width's figure (a cost per layer stays flat over the widths; one per row or per
    # weight would not). Printed for the narrower widths: the wider models hold one or two
    # layers, whose per-layer figure is their whole run's noise
    excess = {w: (per_weight[w] - ref) * weights / n for w, n, weights, _ in models}
    print(f"  beyond the {DECODE_PROBE_WIDTH}-wide figure, per layer: " + "  ".join(
        f"{w} wide {excess[w] * 1e6:+.1f} us ({n} layers)" for w, n, _, _ in models if w < DECODE_PROBE_WIDTH))
    for *_, llm in models:
        llm.close()
    return {str(w): {"layers": n, "weights": weights, "s_per_token": statistics.median(times[w]),
                     "ns_per_weight": per_weight[w] * 1e9, "excess_us_per_layer": excess[w] * 1e6}
            for w, n, weights, _ in models}


def prefill_sweep(folder: Path, wt: str, rounds: int) -> list[tuple[int, object, float]]:
    """[(width, spec, median seconds of a 512-token prompt)] for one weight type."""
    from rooflight.gguf import load_model_spec

    models = []
    for width in PREFILL_WIDTHS:
        s = shape(width)
        n_layer = max(2, round(3 * weights_per_layer(shape(PREFILL_PROBE_WIDTH)) / weights_per_layer(s)))
        path = write_model(folder / f"p{width}-{wt}.gguf", tiled=True, context_length=4096, n_layer=n_layer,
                           ftype=FTYPE.get(wt, wt), pure=True, n_vocab=8000, **s)
        # the last block's FFN multiplies the output row only (estimate/output_rows.py)
        models.append((width, n_layer * weights_per_layer(s) - 3 * s["n_embd"] * s["n_ff"], load(path, 1024),
                       load_model_spec(str(path))))
    tokens = [(i * 7919) % 7000 + 10 for i in range(PROMPT)]
    times: dict[int, list[float]] = {w: [] for w, *_ in models}
    for _ in range(rounds):
        for width, _, llm, _ in models:
            llm.reset()
            t0 = time.perf_counter()
            llm.eval(tokens)
            times[width].append(time.perf_counter() - t0)
    per_weight = {w: statistics.median(times[w]) / PROMPT / weights for w, weights, *_ in models}
    ref = per_weight[PREFILL_PROBE_WIDTH]
    print(f"prefill {wt} (attention included): " + "  ".join(
        f"{w} wide {per_weight[w] * 1e9:.4f} x{per_weight[w] / ref:.2f}" for w in PREFILL_WIDTHS))
    for _, _, llm, _ in models:
        llm.close()
    return [(w, spec, statistics.median(times[w])) for w, _, _, spec in models]


PROMPT = 512
EDGE_GRID = [float(x) for x in range(0, 1001, 5)]


def predicted_s(spec, probe, edge: float) -> float:
    """The probe-based estimate of the sweep's prompt, with matmul_shape.EDGE_ELEMENTS = edge."""
    from rooflight.estimate import Calibration, Wishes, matmul_shape, plan
    from rooflight.hardware import detect

    saved, matmul_shape.EDGE_ELEMENTS = matmul_shape.EDGE_ELEMENTS, edge
    try:
        w = Wishes(n_ctx=1024, n_gpu_layers=0, n_threads=2, flash_attn="on", n_batch=512, n_ubatch=512,
                   prompt_tokens=PROMPT, gen_tokens=1)
        perf = plan(spec, detect(), w, calibration=Calibration(probe=probe)).performance
    finally:
        matmul_shape.EDGE_ELEMENTS = saved
    assert perf.basis == "probe", perf.basis
    return PROMPT / perf.prefill_tok_s


def fit_edges(sweeps: dict[str, list[tuple[int, object, float]]], probe) -> float:
    """The EDGE_ELEMENTS that makes measured / probe-estimated prompt time flattest across
    the widths (squared log deviation from each type's own mean: a type's level is the
    probe's, its slope over width is what the constant models)."""
    def loss(edge: float) -> float:
        total = 0.0
        for rows in sweeps.values():
            logs = [math.log(meas / predicted_s(spec, probe, edge)) for _, spec, meas in rows]
            mean = sum(logs) / len(logs)
            total += sum((x - mean) ** 2 for x in logs)
        return total

    best = min(EDGE_GRID, key=loss)
    for edge in sorted({0.0, best}):
        for wt, rows in sweeps.items():
            print(f"edge {edge:5.0f}  {wt}: measured / probe estimate " + "  ".join(
                f"{w} wide x{meas / predicted_s(spec, probe, edge):.2f}" for w, spec, meas in rows))
    return best


def width_record(decode: dict[str, dict], per_layer_s: float, rounds: int, load_before: float,
                 when: datetime.datetime) -> dict:
    """A decode sweep as JSON, with the machine it ran on: per-layer costs by weight type from
    several machines' records are what a price of them would have to be checked on."""
    return {"script": "bench/probe_width.py", "utc": when.isoformat(timespec="seconds"), "rounds": rounds,
            "load_1min_before": round(load_before, 2), **machine_fields(),
            "probe_width": DECODE_PROBE_WIDTH, "per_layer_subtracted_us": round(per_layer_s * 1e6, 2),
            "decode": {wt: {w: {k: float(f"{v:.6g}") if isinstance(v, float) else v for k, v in row.items()}
                            for w, row in by_width.items()} for wt, by_width in decode.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="Q8_0,Q4_0,F16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mb", type=float, default=200.0, help="decode models' size")
    ap.add_argument("--fit-edges", action="store_true",
                    help="prompts only: fit estimate/matmul_shape.py's EDGE_ELEMENTS on the sweep's shapes")
    ap.add_argument("--decode-only", action="store_true", help="the decode sweep only")
    ap.add_argument("--save", action="store_true", help=f"keep the decode sweep as a JSON record under {RESULTS_DIR}")
    args = ap.parse_args()
    if args.fit_edges and (args.decode_only or args.save):
        ap.error("--fit-edges measures prompts only: not with --decode-only or --save")
    load_before = os.getloadavg()[0]
    per_layer = layer_cost_s()
    print(f"load average before: {load_before:.2f}")
    print(f"per-layer cost subtracted from decode: {per_layer * 1e6:.1f} us (the stored probe's; 0 without one)")
    sweeps, decode = {}, {}
    with tempfile.TemporaryDirectory(prefix="rooflight-width-") as tmp:
        for wt in args.types.split(","):
            if not args.fit_edges:
                decode[wt.strip().upper()] = decode_sweep(Path(tmp), wt.strip().upper(), args.rounds, args.mb, per_layer)
            if not args.decode_only:
                sweeps[wt.strip().upper()] = prefill_sweep(Path(tmp), wt.strip().upper(), args.rounds)
    if args.save:
        rec = width_record(decode, per_layer, args.rounds, load_before, datetime.datetime.now(datetime.UTC))
        print(f"saved: {write_record(rec, RESULTS_DIR, 'probe_width', rec['cpu_id'] or 'cpu')}")
    if args.fit_edges:
        from rooflight.hardware import detect
        from rooflight.store.probes import probe_status

        probe = probe_status(detect()).probe
        if probe is None:
            print("no stored probe of this machine: run `rooflight probe` first")
            return 1
        print(f"EDGE_ELEMENTS fitted on these shapes: {fit_edges(sweeps, probe):.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
