"""CPU decode attention across the 256-cell steps of llama.cpp's cache view, at each thread
count: does the estimator's price per attention unit stay flat over positions?

    python bench/attention_split.py [--rounds 5] [--threads 1,2] [--save]

With flash attention on and a view of 512 cells or more, llama.cpp gives each thread one
contiguous chunk of the view (ggml-cpu/ops.cpp, use_split_kv_path), and the view grows in
steps of 256 cells (llama_kv_cache::get_n_kv): with 2 threads a token after 530 positions
waits for a first chunk of 384 cells, as one after 740 does. cpu_attention.cpu_attention_cells prices
that; the rule before priced the positions. One attention-only model (8 layers of 16 heads of
128, F16, tiny feed-forward blocks), decode of 16 tokens after each prompt, the median of
--rounds, interleaved round by round. Per prompt: the extra time over a 16-token cache and
that time per attention unit under each rule (microseconds per million units), and their
spread (largest / smallest) over the prompts on the split path (a view of 512 cells or more:
the 240-token one runs the other path, at its own rate). Then the telling pairs, two prompts
in one view (530 and 740: 768 cells; 790 and 1000: 1024): the later one's extra time over
the earlier one's, measured and under each rule (1.00 by the chunks, 1.41 and 1.27 by the
positions). Nothing is fitted. Prints the 1-minute load average before the run. --save keeps
the run as a JSON record in bench/results/split/ (the machine's CPU id, every decode time,
the pairs as printed), so which rule holds where gathers machine by machine. With 1 thread
among the counts it also sets each prompt's time at every other count against its own 1-thread
time (the split's share at that cache size, which the pairs mix with what a cell costs at two
sizes), and the uneven prompts' mean share against the even ones' (share_contrast).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
from pathlib import Path

from rooflight.estimate import Wishes, plan
from rooflight.estimate.cpu_attention import cpu_attention_units
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime.measure import measure

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_probe import machine_fields, write_record  # noqa: E402
from attention_delta import whole_cache  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results" / "split"

SHORT, GEN = 16, 16
PROMPTS = (240, 480, 530, 740, 790, 1000, 1040)
SPLIT_FROM = 480  # the first prompt whose view holds 512 cells
PAIRS = ((530, 740), (790, 1000))
SHAPE = dict(n_layer=8, n_embd=256, n_head=16, n_head_kv=16, head_dim=128, n_ff=256, ftype="F16")


def thread_counts(ap: argparse.ArgumentParser, text: str) -> list[int]:
    """--threads' comma-separated counts, or ap.error's one sentence."""
    try:
        counts = [int(t) for t in text.split(",")]
    except ValueError:
        ap.error("--threads takes whole numbers separated by commas, such as 1,2")
    if min(counts) < 1:
        ap.error("every thread count must be at least 1")
    return counts


def split_spread(per_unit: dict[int, float]) -> float:
    """Largest / smallest cost per unit over the prompts on the split path."""
    split = [per_unit[p] for p in PROMPTS if p >= SPLIT_FROM]
    return max(split) / min(split)


def pair_ratios(extra: dict[int, float], added: dict[int, float], added_before: dict[int, float]) -> dict:
    """Each telling pair's later / earlier extra time: measured, by the chunks' count (now)
    and by the positions (before)."""
    return {f"{b} over {a}": {"measured": round(extra[b] / extra[a], 4), "chunks": round(added[b] / added[a], 4),
                              "positions": round(added_before[b] / added_before[a], 4)} for a, b in PAIRS}


def thread_shares(extra: dict[int, dict[int, float]], added: dict[int, dict[int, float]],
                  added_before: dict[int, dict[int, float]]) -> dict[int, dict[str, dict[str, float]]]:
    """Per thread count above 1, per prompt on the split path: its extra time over the same
    prompt's with 1 thread, measured, by the chunks' count and by the positions (a count's
    units are every thread's cycles, which t threads share: its time is units / t). Taken at one
    prompt, the ratio cancels what a cached cell costs at that cache size, which the pairs
    (two prompts, two cache sizes) do not: on a VM whose per-cell cost moves with the cache's
    size the pairs read that as the split."""
    if 1 not in extra:
        return {}
    return {t: {str(p): {"measured": round(extra[t][p] / extra[1][p], 4),
                         "chunks": round(added[t][p] / t / added[1][p], 4),
                         "positions": round(added_before[t][p] / t / added_before[1][p], 4)}
                for p in PROMPTS if p >= SPLIT_FROM}
            for t in extra if t != 1}


def share_contrast(by_prompt: dict[str, dict[str, float]]) -> dict[str, float]:
    """The mean share of the prompts whose chunks are uneven (one thread's mostly masked: the
    chunks' share 10% or more above the positions') over that of the even ones, measured and
    by each count. The chunks say about x1.27 for 2 threads, the positions x1.00; the ratio
    leaves out what every prompt's share has in common (two threads' overhead)."""
    uneven = [r for r in by_prompt.values() if r["chunks"] > 1.1 * r["positions"]]
    even = [r for r in by_prompt.values() if r["chunks"] <= 1.1 * r["positions"]]
    if not uneven or not even:
        return {}
    return {k: round(statistics.fmean(r[k] for r in uneven) / statistics.fmean(r[k] for r in even), 4)
            for k in ("measured", "chunks", "positions")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--save", action="store_true", help=f"keep the run as a JSON record under {RESULTS_DIR}")
    args = ap.parse_args(argv)
    counts = thread_counts(ap, args.threads)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    hw = detect()
    load_before, when = os.getloadavg()[0], datetime.datetime.now(datetime.UTC)
    print(f"load average before: {load_before:.2f}; {hw.cpu.name}")
    with tempfile.TemporaryDirectory() as tmp:
        path = write_model(Path(tmp) / "attention.gguf", context_length=4096, tiled=True, **SHAPE)
        spec = load_model_spec(str(path))
        cfgs = {t: plan(spec, hw, Wishes(n_ctx=2048, n_gpu_layers=0, prompt_tokens=512, gen_tokens=GEN,
                                         flash_attn="on", n_threads=t)).config for t in counts}
        times: dict[tuple[int, int], list[float]] = {}
        for _ in range(args.rounds):
            for t, cfg in cfgs.items():
                for prompt in (SHORT, *PROMPTS):
                    got = measure(path, cfg, prompt_tokens=prompt, gen_tokens=GEN)
                    times.setdefault((t, prompt), []).append(1 / got.decode_tok_s)

    def units(cfg, prompt: int) -> float:
        """Mean attention units of the GEN tokens after `prompt` positions."""
        return statistics.fmean(cpu_attention_units(spec, cfg, prompt + i, hw.cpu.isa) for i in range(GEN))

    pairs = {}
    extras, addeds, addeds_before = {}, {}, {}
    for t, cfg in cfgs.items():
        print(f"\n{t} thread(s): {'prompt':>6} {'extra ms':>9} {'us/Munit now':>13} {'us/Munit before':>16}")
        base = statistics.median(times[(t, SHORT)])
        extra = {prompt: statistics.median(times[(t, prompt)]) - base for prompt in PROMPTS}
        added = {prompt: units(cfg, prompt) - units(cfg, SHORT) for prompt in PROMPTS}
        with whole_cache():
            added_before = {prompt: units(cfg, prompt) - units(cfg, SHORT) for prompt in PROMPTS}
        now = {p: extra[p] / added[p] * 1e12 for p in PROMPTS}
        before = {p: extra[p] / added_before[p] * 1e12 for p in PROMPTS}
        for prompt in PROMPTS:
            print(f"{'':13} {prompt:6d} {extra[prompt] * 1e3:9.2f} {now[prompt]:13.1f} {before[prompt]:16.1f}")
        print(f"{'':13} spread on the split path: now x{split_spread(now):.2f}, before x{split_spread(before):.2f}")
        pairs[t] = pair_ratios(extra, added, added_before)
        for name, r in pairs[t].items():
            print(f"{'':13} {name}: measured x{r['measured']:.2f}, now x{r['chunks']:.2f}, before x{r['positions']:.2f}")
        extras[t], addeds[t], addeds_before[t] = extra, added, added_before
    shares = thread_shares(extras, addeds, addeds_before)
    contrasts = {t: share_contrast(by_prompt) for t, by_prompt in shares.items()}
    for t, by_prompt in shares.items():
        print(f"\n{t} threads over 1, the same prompt (the split's share, each cache size against itself):")
        for prompt, r in by_prompt.items():
            print(f"{'':13} {prompt:>6}: measured x{r['measured']:.2f}, chunks x{r['chunks']:.2f}, "
                  f"positions x{r['positions']:.2f}")
        contrast = contrasts[t]
        if contrast:
            print(f"{'':13} uneven chunks over even: measured x{contrast['measured']:.2f}, "
                  f"chunks x{contrast['chunks']:.2f}, positions x{contrast['positions']:.2f}")
    if args.save:
        rec = {"script": "bench/attention_split.py", "utc": when.isoformat(timespec="seconds"),
               "load_1min_before": round(load_before, 2), "rounds": args.rounds, "cpu_name": hw.cpu.name,
               **machine_fields(), "shape": SHAPE,
               "decode_s": {str(t): {str(p): [round(x, 6) for x in times[(t, p)]] for p in (SHORT, *PROMPTS)}
                            for t in cfgs},
               "pairs": {str(t): r for t, r in pairs.items()},
               "thread_shares": {str(t): r for t, r in shares.items()},
               "share_contrast": {str(t): c for t, c in contrasts.items()}}
        print(f"\nsaved: {write_record(rec, RESULTS_DIR, 'attention_split', rec['cpu_id'] or hw.cpu.name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
