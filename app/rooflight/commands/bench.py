"""`rooflight bench MODEL`: measure a local model like llama-bench, beside the estimate.

Prefill (pp) and decode (tg) are measured at exactly the planned configuration
(runtime/measure.py), --repetitions times, and the medians are stored with the
uncalibrated prediction; the ratio is what calibrates later estimates on this machine
(store/calibration.py). With --threads-sweep
the thread count is measured first (runtime/threads.py), the fastest is kept for plans of
models of this size, and the benchmark runs at it.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from rooflight.commands.common import emit_json, load_hardware, positive_int
from rooflight.errors import BadInputError, RooflightError

# The sweep runs every candidate twice: shorter runs than the benchmark keep it to
# seconds for small models and about a minute for 7B ones on a laptop.
SWEEP_PROMPT_TOKENS = 128
SWEEP_GEN_TOKENS = 64
# One run can land on a moment when something else has the CPU; the median of three
# keeps such a run out of the calibration (llama-bench repeats 5 times for the same reason).
REPETITIONS = 3


def register(subparsers) -> None:
    from rooflight.cli import _add_estimate_options  # the same knobs as estimate

    p = subparsers.add_parser("bench", help="run a local model, compare with the estimate, store for calibration")
    _add_estimate_options(p)
    p.add_argument("--repetitions", type=positive_int, default=REPETITIONS, metavar="N",
                   help=f"runs to take the median of (default {REPETITIONS})")
    p.add_argument("--threads-sweep", action="store_true",
                   help="first measure several thread counts, keep the fastest for this machine, bench at it")
    p.set_defaults(func=cmd_bench)


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _median_run(runs):
    """The runs' median rates (each independently), with the first run's load and buffers."""
    from statistics import median

    return replace(runs[0], decode_tok_s=median(r.decode_tok_s for r in runs),
                   prefill_tok_s=median(r.prefill_tok_s for r in runs),
                   time_to_first_token_s=median(r.time_to_first_token_s for r in runs))


def cmd_bench(args) -> int:
    from rooflight.cli import _wishes
    from rooflight.estimate import plan
    from rooflight.gguf import load_model_spec
    from rooflight.runtime.measure import measure
    from rooflight.runtime.threads import store_sweep, sweep_threads
    from rooflight.store.calibration import (
        PLAUSIBLE_RATIO,
        CalibrationStore,
        Measurement,
        machine_key,
    )

    if args.model.startswith("hf:"):
        raise BadInputError("bench needs a local .gguf file; download the model first.")
    if args.hardware:
        raise BadInputError("bench measures this machine; --hardware only applies to estimate and rank.")
    if args.threads_sweep and args.threads:
        raise BadInputError("--threads-sweep chooses the thread count itself; leave out --threads.")
    spec = load_model_spec(args.model)
    profile = load_hardware(args)
    wishes = _wishes(args)
    if wishes.n_ctx is None:
        wishes = replace(wishes, n_ctx=max(2048, args.prompt_tokens + args.gen_tokens))
    store = CalibrationStore()
    try:
        machine = machine_key(profile)
        if wishes.n_threads is None:
            # measure at the thread count later plans will use, so the ratio applies to them
            preferred = store.calibration(machine, profile.backend).preferred_threads(spec.file_bytes)
            wishes = replace(wishes, n_threads=preferred)
        # uncalibrated: the ratio is what calibration learns; on this machine's probe where
        # one is current, so the ratio corrects the probe's kernels (store/calibration.py)
        from rooflight.estimate import Calibration
        from rooflight.store.probes import current_probe

        base = Calibration(probe=current_probe(profile))
        est = plan(spec, profile, wishes, calibration=base)
        if est.fit == "too_large":
            raise RooflightError("The model does not fit this machine at this context; nothing was run.")
        sweep = None
        if args.threads_sweep:
            _stderr(f"sweeping thread counts for {spec.name}...")
            sweep = sweep_threads(
                args.model, est.config,
                prompt_tokens=min(args.prompt_tokens, SWEEP_PROMPT_TOKENS),
                gen_tokens=min(args.gen_tokens, SWEEP_GEN_TOKENS),
                progress=lambda n, d, p: _stderr(f"  {n:3d} threads: decode {d:9.1f} tok/s, prefill {p:9.1f} tok/s"),
            )
            store_sweep(profile, spec.name, spec.file_bytes, sweep, store)
            est = plan(spec, profile, replace(wishes, n_threads=sweep.best), calibration=base)
        _stderr(f"measuring {spec.name} ({args.prompt_tokens}-token prompt, {args.gen_tokens} tokens, "
                f"{est.config.n_threads} threads, {args.repetitions} runs)...")
        runs = [measure(args.model, est.config, prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens)
                for _ in range(args.repetitions)]
        got = _median_run(runs)
        measurement = Measurement(
            machine=machine, backend=profile.backend, model=spec.name, quant=spec.file_type,
            n_ctx=est.config.n_ctx, n_gpu_layers=est.config.n_gpu_layers,
            prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens,
            predicted_decode=est.performance.decode_tok_s, measured_decode=got.decode_tok_s,
            predicted_prefill=est.performance.prefill_tok_s, measured_prefill=got.prefill_tok_s,
            n_threads=est.config.n_threads, model_bytes=spec.file_bytes, basis=est.performance.basis,
        )
        store.add(measurement)
    finally:
        store.close()
    p = est.performance
    doc = {
        "model": est.to_dict()["model"],
        "config": est.config.to_dict(),
        "predicted": {"decode_tok_s": round(p.decode_tok_s, 3), "prefill_tok_s": round(p.prefill_tok_s, 3),
                      "memory_bytes": est.memory.total_bytes - sum(d.overhead_bytes for d in est.memory.devices)},
        "measured": {"decode_tok_s": round(got.decode_tok_s, 3), "prefill_tok_s": round(got.prefill_tok_s, 3),
                     "time_to_first_token_s": round(got.time_to_first_token_s, 4),
                     "load_s": round(got.load_s, 3),
                     "memory_bytes": got.buffers.model_bytes + got.buffers.kv_bytes
                     + got.buffers.compute_bytes + got.buffers.output_bytes,
                     "runs": len(runs),
                     "decode_tok_s_runs": [round(r.decode_tok_s, 3) for r in runs],
                     "prefill_tok_s_runs": [round(r.prefill_tok_s, 3) for r in runs]},
        "ratio": {"decode": round(got.decode_tok_s / p.decode_tok_s, 3),
                  "prefill": round(got.prefill_tok_s / p.prefill_tok_s, 3)},
        "stored": True,
        # a run far off the roofline is kept but not used (store/calibration.py)
        "used_for_calibration": measurement.usable,
        "threads_sweep": sweep.to_dict() if sweep else None,
    }
    if args.json:
        emit_json(doc)
        return 0
    if sweep:
        print(f"{'threads':>8}{'decode':>12}{'prefill':>12}  tok/s (median of {len(sweep.runs[0].decode_runs)})")
        for r in sweep.runs:
            mark = "  <- fastest, kept for this machine" if r.n_threads == sweep.best else ""
            print(f"{r.n_threads:8d}{r.decode_tok_s:12.1f}{r.prefill_tok_s:12.1f}{mark}")
        print()
    print(f"{'':10}{'predicted':>12}{'measured':>12}{'ratio':>8}  (median of {len(runs)} runs)")
    print(f"{'decode':10}{p.decode_tok_s:12.1f}{got.decode_tok_s:12.1f}{doc['ratio']['decode']:8.2f}  tok/s")
    print(f"{'prefill':10}{p.prefill_tok_s:12.1f}{got.prefill_tok_s:12.1f}{doc['ratio']['prefill']:8.2f}  tok/s")
    if doc["used_for_calibration"]:
        print("Stored for calibration: later estimates on this machine use it.")
    else:
        print(f"Stored, but not used for calibration: it is more than {PLAUSIBLE_RATIO:g}x off the "
              "estimate, which says more about this run (a busy machine, or a model so small that "
              "per-token overheads dominate) than about the hardware.")
    return 0
