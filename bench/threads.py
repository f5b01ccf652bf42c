"""Does the thread count Rooflight picks run as fast as the best of a sweep?

    python bench/threads.py [--model PATH] [--rounds 5] [--candidates 1,2,4]

1. The picker: runtime/threads.sweep_threads, exactly as `rooflight bench --threads-sweep`
   runs it (each candidate twice, 128-token prompt, 64 tokens), chooses a count.
2. The check, in the same run: every candidate is measured again --rounds times,
   interleaved in rotating order so outside load hits all alike, 128 tokens each; the
   median decode rate of the chosen count is compared with the best median.
Target (issue 5): the chosen count reaches at least 0.95 of the best. Exits 1 when missed.
The model is a generated ~100 MB llama Q8_0 (larger than CPU caches, as real models are)
unless --model names a GGUF file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from rooflight.estimate import Wishes, plan
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime.measure import measure
from rooflight.runtime.threads import candidate_threads, physical_cores, sweep_threads

TARGET = 0.95
MODEL = dict(n_layer=8, n_embd=768, n_head=12, n_head_kv=4, n_ff=2048, n_vocab=32000, ftype="Q8_0",
             context_length=2048)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a GGUF file (default: a generated 100 MB llama Q8_0)")
    ap.add_argument("--rounds", type=int, default=5, help="check runs per thread count (default 5)")
    ap.add_argument("--gen-tokens", type=int, default=128, help="tokens per check run (default 128)")
    ap.add_argument("--candidates", help="thread counts, comma-separated (default: as the picker chooses)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.model) if args.model else write_model(Path(tmp) / "llama-100M-Q8_0.gguf", **MODEL)
        spec = load_model_spec(str(path))
        hw = detect()
        cfg = plan(spec, hw, Wishes(n_ctx=1024, n_gpu_layers=0)).config
        counts = [int(x) for x in args.candidates.split(",")] if args.candidates else candidate_threads()
        print(f"{spec.name}: {spec.file_bytes / 1e6:.0f} MB, {hw.cpu.name}, {physical_cores()} physical cores; "
              f"candidates {counts}")

        sweep = sweep_threads(path, cfg, counts)
        picked = sweep.best
        print("picker:  " + ", ".join(f"{r.n_threads}t {r.decode_tok_s:.1f}" for r in sweep.runs)
              + f" tok/s decode -> picks {picked}")

        decode: dict[int, list[float]] = {n: [] for n in counts}
        for rnd in range(args.rounds):
            shift = rnd % len(counts)
            for n in counts[shift:] + counts[:shift]:
                got = measure(path, replace(cfg, n_threads=n), prompt_tokens=128, gen_tokens=args.gen_tokens)
                decode[n].append(got.decode_tok_s)
    medians = {n: statistics.median(v) for n, v in decode.items()}
    best = max(medians, key=medians.get)
    print(f"check ({args.rounds} interleaved runs each, median decode tok/s):")
    for n in counts:
        runs = " ".join(f"{x:.0f}" for x in decode[n])
        tag = "  <- picked" if n == picked else ""
        tag += "  <- best" if n == best else ""
        print(f"  {n:3d} threads {medians[n]:9.1f}   runs: {runs}{tag}")
    fraction = medians[picked] / medians[best]
    default = physical_cores()
    if default in medians:
        print(f"physical-core default ({default}): {medians[default] / medians[best]:.3f} of the best")
    ok = fraction >= TARGET
    print(f"picked {picked} threads: {medians[picked]:.1f} tok/s = {fraction:.3f} of the best "
          f"({best} threads, {medians[best]:.1f}); target >= {TARGET}: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
