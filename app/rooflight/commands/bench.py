"""`rooflight bench MODEL`: measure a local model like llama-bench, beside the estimate.

The workflow (plan, optional thread sweep, measure, store for calibration) is
runtime/bench.py's; this command checks the arguments and prints the result.
"""

from __future__ import annotations

import sys

from rooflight.commands.common import add_estimate_options, emit_json, positive_int, wishes_from
from rooflight.errors import BadInputError
from rooflight.runtime.bench import REPETITIONS
from rooflight.runtime.probe_defaults import disturbed


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="run a local model, compare with the estimate, store for calibration")
    add_estimate_options(p)  # the same knobs as estimate
    p.add_argument("--repetitions", type=positive_int, default=REPETITIONS, metavar="N",
                   help=f"runs to take the median of (default {REPETITIONS})")
    p.add_argument("--threads-sweep", action="store_true",
                   help="first measure several thread counts, keep the fastest for this machine, bench at it")
    p.set_defaults(func=cmd_bench)


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def kernels_sentence(kernels) -> str:
    """Which of the probe's kernels a probe-based bench corrects, by their shares of it."""
    def shares(pairs) -> str:
        return ", ".join(f"{k} {v:.0%}" for k, v in sorted(pairs, key=lambda kv: -kv[1]) if v >= 0.005) or "none"

    return (f"It corrects this machine's probe per kernel (decode: {shares(kernels.decode)}; prompt: "
            f"{shares(kernels.prefill)}); other models are corrected by their own share of these kernels.")


def cmd_bench(args) -> int:
    from rooflight.runtime.bench import run_bench
    from rooflight.store.calibration import plausible_limit

    if args.model.startswith("hf:"):
        raise BadInputError("bench needs a local .gguf file; download the model first.")
    if args.hardware:
        raise BadInputError("bench measures this machine; --hardware only applies to estimate and rank.")
    if getattr(args, "rpc", None):
        raise BadInputError("bench calibrates this machine alone; measure a split across machines with "
                            "bench/rpc_split.py, or chat with --rpc to see each reply's speed.")
    if args.threads_sweep and args.threads:
        raise BadInputError("--threads-sweep chooses the thread count itself; leave out --threads.")
    result = run_bench(args.model, wishes_from(args), repetitions=args.repetitions,
                       threads_sweep=args.threads_sweep, on_status=_stderr)
    if args.json:
        emit_json(result.to_dict())
        return 0
    p, got, runs, sweep, ratio = (result.estimate.performance, result.median, result.runs, result.sweep,
                                  result.ratio)
    if sweep:
        print(f"{'threads':>8}{'decode':>12}{'prefill':>12}  tok/s (median of {len(sweep.runs[0].decode_runs)})")
        for r in sweep.runs:
            mark = "  <- fastest, kept for this machine" if r.n_threads == sweep.best else ""
            print(f"{r.n_threads:8d}{r.decode_tok_s:12.1f}{r.prefill_tok_s:12.1f}{mark}")
        print()
    print(f"{'':10}{'predicted':>12}{'measured':>12}{'ratio':>8}  (median of {len(runs)} runs)")
    print(f"{'decode':10}{p.decode_tok_s:12.1f}{got.decode_tok_s:12.1f}{ratio['decode']:8.2f}  tok/s")
    print(f"{'prefill':10}{p.prefill_tok_s:12.1f}{got.prefill_tok_s:12.1f}{ratio['prefill']:8.2f}  tok/s")
    if result.used_for_calibration:
        print("Stored for calibration: later estimates on this machine use it.")
        if p.kernels is not None:
            print(kernels_sentence(p.kernels))
    elif disturbed(result.others_cpu):
        print(f"Stored, but not used for calibration: other programs used {result.others_cpu:.0%} of the CPU "
              "during the runs, so they measured those programs as much as this machine; close them and bench "
              "again.")
    else:
        print(f"Stored, but not used for calibration: it is more than {plausible_limit(p.basis):.0f}x off the "
              "estimate, which says more about this run (a busy machine, or a model so small that "
              "per-token overheads dominate) than about the hardware.")
    return 0
