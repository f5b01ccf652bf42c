"""Does the probe's attention model price what real models pay for attention? Side by side in
one run: the seconds per attention unit (estimate/cpu_attention.cpu_attention_units) that decode pays
between a short and a long cache, on

- the probe's attention model as it was (2 layers, 16 query / 4 KV heads: a 4 MiB cache at
  1024 positions, which stays in the CPU's caches),
- the probe's attention model now (runtime/probe.attention_shape: MHA, layers enough for
  2x the last-level cache),
- generated models of the sizes users run (weights well beyond the caches, so each layer's
  KV cache is cold when attention reads it), GQA and MHA,
- the Gemma-3-270M package model (4 query heads on 1 KV head of 256, sliding windows of 512
  on 5 layers of 6): its cache at a few thousand positions is smaller than a 32 MiB L3.

    python bench/probe_attention.py [--rounds 3] [--long 1024] [--also-layers 8 ...]

Each figure: decode of 64 tokens after a 16-token and after a --long-token prompt (flash
attention on, this machine's plan threads), the best of --rounds runs, runs interleaved model
by model; seconds per unit = (t_long - t_short) / (units_long - units_short). Prints each
model's figure and its ratio to the two probe models'. --also-layers: the probe's model at
other layer counts too (what a smaller cap, ATTN_MAX_LAYERS, would measure on this cache).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from rooflight.estimate import Wishes, plan
from rooflight.estimate.cpu_attention import cpu_attention_units
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime.measure import measure
from rooflight.runtime.probe import attention_shape, last_level_cache_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from gemma_model import gemma_270m_path  # noqa: E402 - the test suite's Gemma-3-270M

GEN, SHORT = 64, 16
OLD_PROBE = dict(n_layer=2, n_embd=256, n_head=16, n_head_kv=4, head_dim=128, n_ff=256, ftype="F16")
REAL = [
    ("300M Q4_K_M, 10/2 heads", dict(n_layer=12, n_embd=1280, n_head=10, n_head_kv=2, n_ff=3584, ftype="Q4_K_M")),
    ("450M Q4_0, 12/4 heads", dict(n_layer=12, n_embd=1536, n_head=12, n_head_kv=4, n_ff=4096, ftype="Q4_0")),
    ("450M Q4_0, 12/12 heads", dict(n_layer=12, n_embd=1536, n_head=12, n_head_kv=12, n_ff=4096, ftype="Q4_0")),
    ("1B Q4_0, 18/6 heads", dict(n_layer=16, n_embd=2304, n_head=18, n_head_kv=6, n_ff=6144, ftype="Q4_0")),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--long", type=int, default=1024)
    ap.add_argument("--also-layers", type=int, nargs="*", default=[])
    args = ap.parse_args()
    hw = detect()
    llc = last_level_cache_bytes()
    new_probe = dict(attention_shape(llc), ftype="F16")
    shapes = [("probe model before (2 layers, 16/4)", OLD_PROBE),
              (f"probe model now ({new_probe['n_layer']} layers, 16/16)", new_probe)]
    shapes += [(f"probe model at {n} layers", dict(new_probe, n_layer=n)) for n in args.also_layers]
    shapes += [(name, dict(kw, n_vocab=32000)) for name, kw in REAL]
    tmp = Path(tempfile.mkdtemp(prefix="rooflight-attn-"))
    models = []
    paths = []
    for i, (_, kw) in enumerate(shapes):
        paths.append(tmp / f"m{i}.gguf")
        write_model(paths[-1], tiled=True, context_length=4096, **kw)
    shapes.append(("Gemma-3-270M Q4_K_M, 4/1 heads, SWA", {}))
    paths.append(gemma_270m_path())
    for (name, _), path in zip(shapes, paths, strict=True):
        spec = load_model_spec(str(path))
        cfg = plan(spec, hw, Wishes(n_ctx=args.long + GEN + 64, n_gpu_layers=0, flash_attn="on",
                                    prompt_tokens=args.long, gen_tokens=GEN)).config
        models.append((name, path, spec, cfg))
    best: dict[tuple[int, int], float] = {}
    for _ in range(args.rounds):
        for i, (_, path, _, cfg) in enumerate(models):
            for prompt in (SHORT, args.long):
                got = measure(path, cfg, prompt_tokens=prompt, gen_tokens=GEN)
                best[(i, prompt)] = max(best.get((i, prompt), 0.0), got.decode_tok_s)
    print(f"last-level cache {llc >> 20} MiB; decode after {SHORT} and {args.long} tokens, best of {args.rounds}")
    figures = []
    for i, (_, _, spec, cfg) in enumerate(models):
        t_short, t_long = 1 / best[(i, SHORT)], 1 / best[(i, args.long)]
        units = (cpu_attention_units(spec, cfg, args.long + GEN / 2, hw.cpu.isa)
                 - cpu_attention_units(spec, cfg, SHORT + GEN / 2, hw.cpu.isa))
        figures.append((t_long - t_short) / units)
    old, new = figures[0], figures[1]
    print(f"{'model':40} {'ns/unit':>8} {'/ before':>9} {'/ now':>7}")
    for (name, *_), f in zip(models, figures, strict=True):
        print(f"{name:40} {f * 1e9:8.3f} {f / old:9.2f} {f / new:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
