"""`rooflight probe`: measure this machine's llama.cpp kernels (runtime/probe.py).

Exit 0 when the probe was measured and stored (estimates then stand on it: performance.basis
"probe"); 1 with one sentence when it could not be measured cleanly (a busy machine) and
was not stored. --json prints what was measured per device and weight type either way.
"""

from __future__ import annotations

import sys

from rooflight.commands.common import emit_json, positive_int
from rooflight.errors import BadInputError
from rooflight.hardware.profile import plural


def _fraction(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {value}")
    return value


def register(subparsers) -> None:
    from rooflight.runtime.probe_defaults import ALL_TYPES, BUDGET_S, DEFAULT_BUSY_THRESHOLD

    p = subparsers.add_parser("probe", help="measure this machine's llama.cpp kernels, MoE experts and image encode "
                                            "(about 30 s), and each GPU a GPU build offloads to (up to 30 s more "
                                            "each); estimates use them")
    p.add_argument("--types", metavar="T[,T...]",
                   help=f"weight types to measure (default all this build supports, those of the models on "
                        f"this disk first: {','.join(ALL_TYPES)})")
    p.add_argument("--threads", type=positive_int, help="thread count (default: the one plans use)")
    p.add_argument("--busy-threshold", type=_fraction, default=DEFAULT_BUSY_THRESHOLD, metavar="SHARE",
                   help=f"share of the CPU other programs may use during a run (default {DEFAULT_BUSY_THRESHOLD})")
    p.add_argument("--budget", type=float, default=BUDGET_S, metavar="SECONDS",
                   help=f"time the CPU half may take (default {BUDGET_S:g}; the GPU half has 30 s a GPU of its own)")
    p.add_argument("--keep-disturbed", action="store_true",
                   help="store figures measured on a busy machine too (marked disturbed; estimates say so)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_probe)


def cmd_probe(args) -> int:
    from rooflight.hardware import detect
    from rooflight.runtime.probe import probe_machine

    types = tuple(t.strip().upper() for t in args.types.split(",") if t.strip()) if args.types else None
    if args.types is not None and not types:
        raise BadInputError("--types needs at least one weight type, e.g. --types Q4_0,Q8_0.")
    if args.budget <= 0:
        raise BadInputError("--budget must be more than 0 seconds.")
    profile = detect()
    if types is None:  # every type, those of the models on this disk first
        from rooflight.runtime.probe_defaults import installed_order

        types = installed_order()

    def progress(fraction: float, message: str, left: float) -> None:
        if not args.json or sys.stderr.isatty():
            print(f"  {fraction:4.0%}  {message} (about {left:.0f} s left)", file=sys.stderr, flush=True)

    run = probe_machine(profile, weight_types=types, n_threads=args.threads, busy_threshold=args.busy_threshold,
                        budget_s=args.budget, keep_disturbed=args.keep_disturbed, progress=progress)
    if args.json:
        emit_json(run.to_dict())
    else:
        from rooflight.store.probes import probe_scope

        print(format_probe(run))
        if run.stored and (scope := probe_scope(profile)):
            print(scope)
    if not run.stored:
        print(f"rooflight: {run.refused}", file=sys.stderr)
        return 1
    return 0


def format_probe(run) -> str:
    from rooflight.estimate.backend_constants import BACKENDS
    from rooflight.runtime.probe import budget_left_parts_out
    from rooflight.runtime.probe_defaults import LONGER_BUDGET_S
    from rooflight.store.calibration import describe_machine_key

    p = run.probe
    lines = [f"Probe of this machine ({describe_machine_key(p.machine)}) with {p.build}, "
             f"{plural(p.n_threads, 'thread')}, "
             f"{p.duration_s:.1f} s", ""]
    lines.append(f"{'weight type':12}{'decode ns/weight':>18}{'GB/s':>8}  {'bound':8}{'prompt ns/weight':>18}"
                 f"{'spread':>8}")
    for k in p.kernels:
        mark = "  (busy)" if k.disturbed else ""
        lines.append(f"{k.weight_type:12}{k.decode_s_per_weight * 1e9:18.4f}{k.decode_gbs:8.1f}  {k.bound:8}"
                     f"{k.prefill_s_per_weight * 1e9:18.5f}{max(k.decode_spread, k.prefill_spread):8.0%}{mark}")
    for wt, why in run.skipped.items():
        lines.append(f"{wt:12}  {why}")
    for a in p.attention:
        decode = (f"{a.decode_s_per_unit * 1e9:.3f} ns per modelled decode cycle" if a.decode_s_per_compute_unit is None
                  else f"{a.decode_s_per_unit * 1e9:.3f} ns per modelled decode cycle of K/V reads, "
                       f"{a.decode_s_per_compute_unit * 1e9:.3f} of per-query-head work")
        lines.append(f"attention, flash {'on ' if a.flash_attn else 'off'}: {decode}, "
                     f"{a.prefill_s_per_flop * 1e12:.1f} ps per prompt FLOP (spread {a.spread:.0%})")
    f = p.fixed
    if not p.attention:  # the budget ran out before the figures every other one needs
        lines.append("Nothing was measured completely (see the reason below).")
    else:
        lines.append(f"fixed: {f.token_s * 1e6:.1f} us per token, "
                     f"{f.layer_s * 1e6:.1f} us per layer, {f.vocab_s * 1e9:.2f} ns per vocabulary entry "
                     f"(spread {f.spread:.0%})")
    if p.expert_costs:
        lines.append("MoE experts (MUL_MAT_ID) in prompts: " + ", ".join(
            f"{wt} x{cost:.2f}" for wt, cost in p.expert_costs) + " the dense kernel's cost per multiply-add")
    if p.encode is not None:
        e = p.encode
        lines.append(f"image encode ({e.file_type} projector): {e.flops_per_s / 1e9:.1f} GFLOP/s, "
                     f"{e.encode_s * 1e3:.1f} ms for {e.encode_flops / 1e9:.2f} GFLOP (spread {e.spread:.0%})"
                     + ("  (busy)" if e.disturbed else ""))
    for g in p.gpus:
        table = BACKENDS[g.backend]

        def eff(measured: float | None, table_value: float) -> str:
            return f"{table_value:.3f} (table)" if measured is None else f"{measured:.3f} (table {table_value:.3f})"

        lines.append(f"{g.device} {g.name} ({g.backend}): decode efficiency {eff(g.decode_efficiency, table.decode_efficiency)}"
                     f", {g.layer_overhead_s * 1e6:.1f} us per layer (table {table.layer_overhead_s * 1e6:.1f}), "
                     f"prompt efficiency F16 {eff(g.prefill_efficiency_float, table.prefill_efficiency_float)}, "
                     f"quantized {eff(g.prefill_efficiency_quant, table.prefill_efficiency_quant)}"
                     + (f", copies to it at {g.h2d_gbs:.1f} GB/s" if g.h2d_gbs else "")
                     + (f", a block with experts +{g.moe_layer_overhead_s * 1e6:.1f} us (table "
                        f"{table.moe_layer_overhead_s * 1e6:.1f})" if g.moe_layer_overhead_s is not None else "")
                     + (f", MoE prompts {g.moe_expert_overhead_tokens:.0f} tokens per expert (table "
                        f"{table.moe_expert_overhead_tokens:.0f})" if g.moe_expert_overhead_tokens is not None else "")
                     + f" (spread {g.spread:.0%})" + ("  (busy)" if g.disturbed else ""))
    lines += [f"note: {n}" for n in p.notes]
    if run.stored:  # a refusal is said once, with its reason, on stderr (run_probe)
        lines += ["", "Stored: estimates on this machine now stand on these figures."]
        if budget_left_parts_out(run):  # the table prices them; more time is the user's to give
            lines.append("The table prices the parts the time budget left out; "
                         f"`rooflight probe --budget {LONGER_BUDGET_S:g}` gives them time.")
    return "\n".join(lines)
