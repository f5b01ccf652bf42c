"""MoE models on this CPU after its probe: probe-based estimates vs llama.cpp, out of sample.

    python bench/moe_cpu_check.py [--repeats N] [--fresh-probe] [--save]

The on-VM target (bench/accuracy_probe.py) runs dense shapes only, while the models people
run on a CPU are often MoE (Qwen3-30B-A3B, gpt-oss-20b). The probe prices their routed
experts' decode by its dense kernels and their prompts by its MoE-expert figure
(estimate/probe.py expert_cost, measured on a 1024-wide Qwen3-MoE of 32 experts). This
generates three MoE shapes the probe never ran, each with more weights than the
last-level cache holds twice over (a model the cache keeps decodes faster than any probe
figure: README, "Where the estimate is still weak"), and measures each at the planned
config as accuracy_probe.py does (decode after a 512-token prompt, that prompt; the median
of --repeats interleaved runs, each run's load watched). Prints probe-based and table-based
estimates beside the measured figures, and whether each falls inside the printed range.
--save keeps the run as a JSON record in bench/results/moe_cpu/, in accuracy_probe.py's form
(the machine's profile, the probe, every row's estimates, range and runs), so a README figure
can be checked and priced again. The model files (about 4 GB in all) go to a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime.probe import last_level_cache_bytes

sys.path.insert(0, str(Path(__file__).resolve().parent))
import accuracy_probe as ap  # noqa: E402 - the on-VM target's measuring code, beside this file

# name, write_model arguments: proportions of the MoE models people run, none the probe's
SHAPES = [
    # Qwen3-30B-A3B's blocks (2048 wide, 128 experts of 768, 8 used), four of them
    ("qwen3moe-A3B-blocks-Q4_K_M", dict(arch="qwen3moe", n_layer=4, n_embd=2048, n_head=32, n_head_kv=4,
                                        head_dim=128, n_ff=768, n_expert=128, n_expert_used=8, n_vocab=32000,
                                        ftype="Q4_K_M")),
    # narrower experts, more blocks (a 64-expert, 8-used design)
    ("qwen3moe-64x512-Q8_0", dict(arch="qwen3moe", n_layer=8, n_embd=1536, n_head=12, n_head_kv=4, n_ff=512,
                                  n_expert=64, n_expert_used=8, n_vocab=32000, ftype="Q8_0")),
    # gpt-oss-20b's blocks (2880 wide, 32 experts of 2880, 4 used, MXFP4 experts), three of them
    ("gptoss-blocks-MXFP4", dict(arch="gpt-oss", n_layer=3, n_embd=2880, n_head=64, n_head_kv=8, head_dim=64,
                                 n_ff=2880, n_expert=32, n_expert_used=4, n_vocab=32000, ftype="MXFP4_MOE")),
]
PROMPT = 512
RESULTS_DIR = Path(__file__).resolve().parent / "results" / "moe_cpu"


def main() -> int:
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--repeats", type=int, default=3)
    ap_.add_argument("--fresh-probe", action="store_true", help="probe now even if a stored probe is current")
    ap_.add_argument("--save", action="store_true", help=f"write the run as JSON under {RESULTS_DIR}")
    args = ap_.parse_args()
    if args.repeats < 1:
        ap_.error("--repeats takes a whole number of at least 1")
    hw = detect()
    print(f"machine: {hw.cpu.name}, {hw.cpu.cores} cores, last-level cache {last_level_cache_bytes() / 2**20:.0f} MiB")
    probe = ap.the_probe(hw, keep_disturbed=False, fresh=args.fresh_probe)
    if probe is None:
        return 1
    when, load_before = datetime.now(UTC), os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        models = []
        for name, kw in SHAPES:
            path = write_model(Path(tmp) / f"{name}.gguf", context_length=8192, tiled=True, **kw)
            size = path.stat().st_size
            print(f"{name}: {size / 2**20:.0f} MiB ({size / last_level_cache_bytes():.1f}x the cache)")
            models.append((name, path, (PROMPT,)))
        rows, _ = ap.run(models, hw, probe, args.repeats)
    print(f"\n{'model':28} | decode probe / table / measured  in | prefill probe / table / measured  in | others' CPU")
    for r in rows:
        (pd, td, md), (pp, tp, mp) = r["decode"], r["prefill"]
        print(f"{r['name']:28} | {pd:7.1f} {ap.pct(pd, md)} {td:7.1f} {ap.pct(td, md)} {md:7.1f} "
              f"{'yes' if r['d_in'] else 'no':>3} | {pp:7.1f} {ap.pct(pp, mp)} {tp:7.1f} {ap.pct(tp, mp)} {mp:7.1f} "
              f"{'yes' if r['p_in'] else 'no':>3} | {r['busy']:.0%}")
    if args.save:
        rec = ap.record(hw, probe, rows, repeats=args.repeats, load_before=load_before, when=when)
        rec["script"] = "bench/moe_cpu_check.py"
        print(f"\nsaved: {ap.write_record(rec, RESULTS_DIR, 'moe_cpu_check', hw.cpu.name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
