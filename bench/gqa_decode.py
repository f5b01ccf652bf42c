"""Decode after a long cache on this CPU, GQA against MHA: the probe-based estimate beside
llama.cpp, for two whole generated models alike but for their heads.

    python bench/gqa_decode.py [--positions 512,4096] [--repeats 3]

Two 16-layer Q4_K_M llama models, 1024 wide with 128-wide heads: 32 query heads on 8 KV
heads (Llama 3 8B's and Mistral's layout) and 16 on 16 (MHA). Decode of 32 tokens after each
number of --positions cached (flash attention on, F16 cache, this machine's plan threads),
the median of --repeats, against the estimate on this machine's stored probe (`rooflight
probe` first). Attention is most of a token here after 4096 positions, so this checks the
probe's two decode attention figures (estimate/probe.split_decode_cost) where it matters:
long caches of GQA models, which nearly every model released since 2024 is.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from rooflight.estimate import Calibration, Wishes, plan
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime.measure import measure
from rooflight.store.probes import current_probe

SHAPES = {
    "32/8 heads (GQA)": dict(n_head=32, n_head_kv=8),
    "16/16 heads (MHA)": dict(n_head=16, n_head_kv=16),
}
COMMON = dict(n_layer=16, n_embd=1024, head_dim=128, n_ff=2816, n_vocab=32000, ftype="Q4_K_M")
GEN = 32


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", default="512,4096")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    try:
        positions = [int(x) for x in args.positions.split(",")]
    except ValueError:
        ap.error("--positions takes cached positions, comma-separated, e.g. 512,4096")
    if args.repeats < 1 or min(positions) < 1:
        ap.error("--repeats and every position must be at least 1")
    hw = detect()
    probe = current_probe(hw)
    if probe is None:
        print("No probe of this machine and build: run `rooflight probe` first.", file=sys.stderr)
        return 2
    att = probe.attention_for(True)
    split = "one figure" if att is None or att.decode_s_per_compute_unit is None else (
        f"K/V reads {att.decode_s_per_unit * 1e9:.3f} ns, per-query-head work {att.decode_s_per_compute_unit * 1e9:.3f} ns"
        " per unit")
    print(f"{hw.cpu.name}; load average before {os.getloadavg()[0]:.2f}; probe's decode attention: {split}")
    print(f"{'model':20} {'positions':>9} {'predicted':>10} {'measured':>9} {'error':>8}  runs (tok/s)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, heads in SHAPES.items():
            path = write_model(Path(tmp) / "m.gguf", context_length=max(positions) + 512, tiled=True, **COMMON, **heads)
            spec = load_model_spec(str(path))
            for pos in positions:
                wishes = Wishes(n_ctx=pos + 256, n_gpu_layers=0, prompt_tokens=pos, gen_tokens=GEN, flash_attn="on")
                est = plan(spec, hw, wishes, calibration=Calibration(probe=probe))
                runs = [measure(path, est.config, prompt_tokens=pos, gen_tokens=GEN).decode_tok_s
                        for _ in range(args.repeats)]
                got, want = statistics.median(runs), est.performance.decode_tok_s
                print(f"{name:20} {pos:9d} {want:10.2f} {got:9.2f} {want / got - 1:+8.1%}  "
                      + ", ".join(f"{r:.1f}" for r in runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
