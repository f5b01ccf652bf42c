"""CPU decode attention over head shapes, with a cold cache: where the probe's single
attention figure (seconds per estimate/cpu_attention.cpu_attention_units unit, measured on one MHA
shape) holds, and where it does not.

    python bench/attention_heads.py [--rounds 4] [--long 2048] [--shapes 64/8/64,32/8/64]

Generated attention-only models (tiny weights, F16 cache, flash attention on, this machine's
plan threads) of eight head shapes (query heads / KV heads, head width; --shapes: others), each with layers
enough that its KV cache at --long positions is 2x the last-level cache, as the probe's
attention model (runtime/probe.attention_shape). Decode of 24 tokens after 16 and after
--long positions, best of --rounds, models kept loaded and run interleaved round by round.
Prints the attention time per unit, per cached cell and query head, and per byte of K/V.
llama.cpp keeps a head's cached cells n_head_kv x head_dim x 2 bytes apart
(llama-kv-cache.cpp: one row per cell holds every KV head), so an MHA cache is read in
page-sized strides while a narrow GQA cache is nearly contiguous and shared by the query
heads that use it: see docs/PROBE_NOTES.md, attention.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

from rooflight.estimate import Wishes, plan
from rooflight.estimate.cpu_attention import cpu_attention_units
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime.probe import _Model, last_level_cache_bytes

SHAPES = [(16, 16, 128), (16, 4, 128), (16, 1, 128), (8, 8, 256), (4, 1, 256), (16, 16, 64), (8, 2, 128),
          (32, 8, 128)]
SHORT, GEN, MAX_LAYERS = 16, 24, 64


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--long", type=int, default=2048)
    ap.add_argument("--shapes", help="query heads/KV heads/width, comma-separated, instead of the eight")
    args = ap.parse_args()
    try:
        shapes = [tuple(int(x) for x in s.split("/")) for s in args.shapes.split(",")] if args.shapes else SHAPES
    except ValueError:
        ap.error("--shapes takes query heads/KV heads/width, e.g. 64/8/64,32/8/64")
    if any(len(s) != 3 or min(s) < 1 or s[0] % s[1] for s in shapes):
        ap.error("each shape is query heads/KV heads/width, the query heads a multiple of the KV heads")
    hw, llc = detect(), last_level_cache_bytes()
    models = []
    with tempfile.TemporaryDirectory() as tmp:
        for n_head, n_kv, width in shapes:
            n_layer = min(MAX_LAYERS, max(2, math.ceil(2 * llc / (args.long * n_kv * 2 * width * 2))))
            path = write_model(Path(tmp) / f"attn-{n_head}-{n_kv}-{width}.gguf", tiled=True,
                               context_length=args.long + 512, ftype="F16", n_layer=n_layer, n_embd=256,
                               n_head=n_head, n_head_kv=n_kv, head_dim=width, n_ff=256)
            spec = load_model_spec(str(path))
            cfg = plan(spec, hw, Wishes(n_ctx=args.long + 256, n_gpu_layers=0, flash_attn="on")).config
            units = (cpu_attention_units(spec, cfg, args.long + SHORT + GEN / 2, hw.cpu.isa)
                     - cpu_attention_units(spec, cfg, SHORT + GEN / 2, hw.cpu.isa))
            models.append(((n_head, n_kv, width, n_layer), _Model(path, cfg.n_threads, args.long + 256, True, 512),
                           units))
        best: dict[tuple, list[float]] = {}
        for _ in range(args.rounds):
            for shape, m, _ in models:
                m.llm.reset()
                m.llm.eval(m.tokens(SHORT))
                short = m.decode(GEN, max_s=5.0)
                m.llm.reset()
                m.llm.eval(m.tokens(args.long + SHORT))
                long = m.decode(GEN, max_s=5.0)
                b = best.setdefault(shape, [math.inf, math.inf])
                b[0], b[1] = min(b[0], short), min(b[1], long)
        print(f"last-level cache {llc >> 20} MiB; decode after {SHORT} and {args.long} positions, "
              f"best of {args.rounds}")
        print(f"{'heads':>7} {'width':>5} {'layers':>6} {'ns/unit':>8} {'ns/(cell x query head)':>23} "
              f"{'ns/K+V byte':>12}")
        for (n_head, n_kv, width, n_layer), m, units in models:
            dt = best[(n_head, n_kv, width, n_layer)][1] - best[(n_head, n_kv, width, n_layer)][0]
            cells = args.long * n_layer
            print(f"{n_head:3}/{n_kv:<3} {width:5} {n_layer:6} {1e9 * dt / units:8.3f} "
                  f"{1e9 * dt / (cells * n_head):23.2f} {1e9 * dt / (cells * n_kv * width * 4):12.4f}")
            m.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
