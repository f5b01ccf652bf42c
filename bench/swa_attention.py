"""What a sliding-window layer's decode attention costs on this CPU, against a full one, at
each thread count: the estimator's rule (cpu_attention.cpu_attention_cells: the busiest thread's
chunk of the cache view, a window skipped outside) beside the one it replaced (every cell
of the window + n_ubatch cache, whatever the threads).

    python bench/swa_attention.py [--rounds 5] [--long 4096] [--threads 1,2]

Pairs of generated models that differ only in their window: a Gemma-3-270M-shaped attention
(18 layers, 4 query heads of 256 on one KV head, five of six layers a 512-token window) and
gpt-oss-20b's (8 layers, 64 heads of 64 on 8 KV heads, every other layer a 128-token
window), each beside the same model with a window longer than the context (every layer sees
every position), with tiny feed-forward blocks so attention is most of what changes with
position. Per model and thread count: decode of 32 tokens after 16 positions and after
--long (gpt-oss: half of it), the median of --rounds, all runs interleaved round by round,
flash attention on. What is printed is a ratio of ratios, so the unit model's own error on a
head shape (bench/attention_delta.py) cancels: the windowed model's extra time over the
short cache, divided by the full model's, beside the same quotient of the estimator's
attention units under each rule. Nothing is fitted. Prints the 1-minute load average before
the run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from rooflight.estimate import Wishes, kv, plan
from rooflight.estimate.cpu_attention import cpu_attention_units
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime.measure import measure

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_delta import whole_cache  # noqa: E402
from attention_split import thread_counts  # noqa: E402

SHORT, GEN = 16, 32
GEMMA3 = dict(arch="gemma3", n_layer=18, n_embd=640, n_head=4, n_head_kv=1, head_dim=256, n_ff=256,
              ftype="F16", swa_pattern=6)
GPT_OSS = dict(arch="gpt-oss", n_layer=8, n_embd=2880, n_head=64, n_head_kv=8, head_dim=64, n_ff=256,
               n_expert=4, n_expert_used=2, ftype="MXFP4_MOE", n_vocab=32000)
PAIRS = (("gemma-3-270m attention", GEMMA3, 512, 1.0), ("gpt-oss-20b attention", GPT_OSS, 128, 0.5))


def units(spec, cfg, long: int, isa) -> float:
    """The estimator's attention units a token after `long` positions adds over one after SHORT."""
    return cpu_attention_units(spec, cfg, long + SHORT, isa) - cpu_attention_units(spec, cfg, 2 * SHORT, isa)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--long", type=int, default=4096, help="positions for the Gemma pair (gpt-oss: half)")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    args = ap.parse_args()
    counts = thread_counts(ap, args.threads)
    if args.rounds < 1 or args.long <= 2 * SHORT:
        ap.error(f"--rounds must be at least 1 and --long more than {2 * SHORT}")
    hw = detect()
    print(f"load average before: {os.getloadavg()[0]:.2f}; {hw.cpu.name}")
    with tempfile.TemporaryDirectory() as tmp:
        models = []  # (pair name and threads, window, path, spec, cfg, long)
        for name, kw, window, share in PAIRS:
            long = int(args.long * share)
            n_ctx = long + 512
            paths = [write_model(Path(tmp) / f"{name}-{w}.gguf", context_length=max(8192, 2 * n_ctx), tiled=True,
                                 sliding_window=w, **kw) for w in (window, 4 * n_ctx)]
            for threads in counts:
                for path in paths:
                    spec = load_model_spec(str(path))
                    cfg = plan(spec, hw, Wishes(n_ctx=n_ctx, n_gpu_layers=0, prompt_tokens=long, gen_tokens=GEN,
                                                flash_attn="on", n_threads=threads)).config
                    models.append((f"{name}, {threads} thr", spec.sliding_window, path, spec, cfg, long))
        times: dict[tuple[int, int], list[float]] = {}
        for _ in range(args.rounds):
            for i, (_, _, path, _, cfg, long) in enumerate(models):
                for prompt in (SHORT, long):
                    got = measure(path, cfg, prompt_tokens=prompt, gen_tokens=GEN)
                    times.setdefault((i, prompt), []).append(1 / got.decode_tok_s)

    def extra_ms(i: int) -> float:
        long = models[i][5]
        return (statistics.median(times[(i, long)]) - statistics.median(times[(i, SHORT)])) * 1e3

    print(f"{'pair':30} {'positions':>9} {'extra ms':>9} {'extra ms':>9} {'measured':>9} {'rule':>9} {'rule':>9}")
    print(f"{'':30} {'':>9} {'windowed':>9} {'full':>9} {'quotient':>9} {'now':>9} {'before':>9}")
    for k in range(0, len(models), 2):
        name, _, _, spec_w, cfg_w, long = models[k]
        _, _, _, spec_g, cfg_g, _ = models[k + 1]
        window_rule = units(spec_w, cfg_w, long, hw.cpu.isa) / units(spec_g, cfg_g, long, hw.cpu.isa)
        with whole_cache():
            whole_rule = units(spec_w, cfg_w, long, hw.cpu.isa) / units(spec_g, cfg_g, long, hw.cpu.isa)
        cells = kv.swa_cells(spec_w, cfg_w)
        print(f"{name:30} {long:9d} {extra_ms(k):9.2f} {extra_ms(k + 1):9.2f} {extra_ms(k) / extra_ms(k + 1):9.3f}"
              f" {window_rule:9.3f} {whole_rule:9.3f}   (window {spec_w.sliding_window}, cache {cells} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
