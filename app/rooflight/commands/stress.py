"""`rooflight stress MODEL`: measured prefill / decode speed and llama.cpp's memory over
growing contexts, beside the plan, stopping before a context the plan says will not fit.

Measurements on this machine are stored for calibration. With --hardware FILE the plan
is made for that profile (to see where it runs out of memory) while the runs happen
here: those points are not stored, as they would calibrate a machine they were not
measured on.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from dataclasses import replace

from rooflight.commands.common import (
    N_CPU_MOE_HELP,
    emit_json,
    gpu_layers,
    load_hardware,
    n_cpu_moe,
    positive_int,
)
from rooflight.errors import BadInputError
from rooflight.runtime.probe_defaults import DEFAULT_BUSY_THRESHOLD, disturbed
from rooflight.units import size_text

GB = 1e9


def _contexts(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        mult = 1
        if part.endswith("k"):
            part, mult = part[:-1], 1024
        try:
            value = int(part) * mult
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected context lengths like 512,2k,8192, got {text!r}") from None
        if value < 2:
            raise argparse.ArgumentTypeError(f"a context must be at least 2 tokens, got {value}")
        out.append(value)
    return out


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "stress", help="measure a local model over growing contexts beside the plan, until memory would run out")
    p.add_argument("model", help="a local .gguf file")
    p.add_argument("--hardware", metavar="FILE", help="plan for this JSON profile (runs still happen here; not stored)")
    p.add_argument("--contexts", type=_contexts, metavar="N,N,...",
                   help="context lengths to try, e.g. 512,2k,8k (default 512,2k,8k,32k... up to the trained context)")
    p.add_argument("--gen-tokens", type=positive_int, default=None, metavar="N",
                   help="tokens generated at each context (default 32)")
    p.add_argument("--kv-type", choices=["f16", "q8_0", "q4_0"], default="f16")
    p.add_argument("--flash-attn", choices=["on", "off", "auto"], default="auto")
    p.add_argument("--gpu-layers", type=gpu_layers, default="auto", metavar="N|auto")
    p.add_argument("--n-cpu-moe", type=n_cpu_moe, default=0, metavar="N|auto|all", help=N_CPU_MOE_HELP)
    p.add_argument("--threads", type=positive_int)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_stress)


def _size(n: int) -> str:
    return size_text(n, 2, mb_digits=1)


def format_result(result) -> str:
    lines = [
        f"{result.model['name']}  ({result.model['quant']}, trained context {result.model['context_length']})",
        "",
        f"{'context':>8} {'fit':<12}{'GPU layers':>11}  {'prefill tok/s':>21}  {'decode tok/s':>19}"
        f"  {'memory (llama.cpp buffers)':>27}",
        f"{'':>8} {'':<12}{'':>11}  {'plan':>10} {'measured':>10}  {'plan':>9} {'measured':>9}"
        f"  {'plan':>13} {'llama.cpp':>13}",
    ]
    for p in result.points:
        est = p.planned.estimate
        perf, m = est.performance, p.measured
        lines.append(
            f"{p.n_ctx:>8} {est.fit:<12}{est.config.n_gpu_layers:>11}  {perf.prefill_tok_s:>10.1f} {m.prefill_tok_s:>10.1f}"
            f"  {perf.decode_tok_s:>9.1f} {m.decode_tok_s:>9.1f}  {_size(p.planned_bytes):>13} {_size(p.memory.total_bytes):>13}"
        )
    if not result.points:
        lines.append("(no context was measured)")
    if result.stopped:
        lines += ["", result.stopped.message]
    lines.append("")
    if not result.stored:
        lines.append("Not stored for calibration.")
    elif result.used_for_calibration == len(result.points):
        lines.append("Stored for calibration: later estimates on this machine use it.")
    else:
        busy = sum(disturbed(p.others_cpu) for p in result.points)
        far = len(result.points) - result.used_for_calibration - busy
        why = ([f"{busy} ran while other programs used more than {DEFAULT_BUSY_THRESHOLD:.0%} of the CPU"] if busy
               else []) + ([f"{far} too far off the estimate to say much about the hardware"] if far > 0 else [])
        lines.append(f"Stored; {result.used_for_calibration} of {len(result.points)} points are used for "
                     f"calibration ({'; '.join(why)}).")
    return "\n".join(lines)


def cmd_stress(args) -> int:
    from rooflight.estimate import Wishes
    from rooflight.gguf import load_model_spec
    from rooflight.runtime.stress import STRESS_GEN_TOKENS, default_contexts, run_stress
    from rooflight.store.calibration import CalibrationStore, machine_key

    if args.model.startswith("hf:"):
        raise BadInputError("stress needs a local .gguf file; download the model first.")
    spec = load_model_spec(args.model)
    profile = load_hardware(args)
    wishes = Wishes(n_gpu_layers=args.gpu_layers, kv_type=args.kv_type, flash_attn=args.flash_attn,
                    n_threads=args.threads, n_cpu_moe=args.n_cpu_moe)
    contexts = args.contexts or default_contexts(spec)
    this_machine = not args.hardware
    store = CalibrationStore() if this_machine else None
    machine = machine_key(profile)
    out = sys.stderr  # kept: llama-cpp-python's own chatter on stderr is silenced below

    def on_plan(point) -> None:
        est = point.estimate
        t = point.prompt_tokens / max(est.performance.prefill_tok_s, 1e-9) + \
            point.gen_tokens / max(est.performance.decode_tok_s, 1e-9)
        print(f"context {point.n_ctx}: {est.fit}, {est.config.n_gpu_layers} GPU layers, "
              f"filling {point.prompt_tokens} tokens + {point.gen_tokens} generated (about {t:.0f} s)...",
              file=out, flush=True)

    try:
        if store is not None and wishes.n_threads is None:
            # the thread count later plans on this machine will use (runtime/threads.py)
            preferred = store.calibration(machine, profile.backend).preferred_threads(spec.file_bytes)
            wishes = replace(wishes, n_threads=preferred)
        # llama-cpp-python prints the model's metadata on stderr for every verbose load
        # (the log is needed for the buffer sizes); the progress lines above stay
        with contextlib.redirect_stderr(io.StringIO()):
            result = run_stress(
                args.model, spec, profile, contexts=contexts, wishes=wishes,
                gen_tokens=args.gen_tokens or STRESS_GEN_TOKENS,
                store=store, machine=machine if this_machine else None, on_plan=on_plan,
            )
    finally:
        if store is not None:
            store.close()
    if args.json:
        emit_json(result.to_dict())
    else:
        print(format_result(result))
    return 0
