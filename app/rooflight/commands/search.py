"""`rooflight search QUERY`: GGUF repositories on the Hub, ranked for this machine.

Thin over rooflight.catalog.hub_rank.search_and_rank. Hub answers are cached on disk;
when the Hub cannot be asked (HF_HUB_OFFLINE, no network) the cached ones are used and a
note on stderr says so. JSON shape: README "Hub search and installed models".
"""

from __future__ import annotations

import sys
import time

from rooflight.commands.common import (
    calibration_for,
    check_use_case,
    emit_json,
    load_hardware,
    positive_int,
)


def register(subparsers) -> None:
    p = subparsers.add_parser("search", help="search the Hub for GGUF models, ranked for this machine")
    p.add_argument("query", help="text the repository name contains, e.g. 'qwen3 8b' or 'gemma-3'")
    p.add_argument("--hardware", metavar="FILE", help="rank for the machine in this JSON profile")
    p.add_argument("--ctx", type=positive_int, help="context length (default 8192, capped per model)")
    p.add_argument("--limit", type=positive_int, default=10, help="repositories to rank (default 10)")
    p.add_argument("--use-case", default="chat", help="chat | coding | reasoning | tiny (score weights)")
    p.add_argument("--exact", action="store_true",
                   help="read every file's header (more downloads) instead of resizing one header")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_search)


def offline_note(result) -> None:
    from rooflight.catalog.hub import offline_reason

    if result.offline:
        why = offline_reason() or "the Hub could not be reached"
        print(f"rooflight: offline ({why}): showing answers cached earlier.", file=sys.stderr)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def format_hub_ranking(ranked) -> str:
    from rooflight.format import FIT_BADGES, gb

    if not ranked:
        return "No GGUF repository on the Hub matches."
    lines = [f"{'#':>3}  {'repository':<44}{'quant':<9}{'fit':<13}{'decode':>9}{'memory':>11}"
             f"{'file':>11}{'score':>7}"]
    for i, r in enumerate(ranked, 1):
        e = r.best.estimate
        mark = " *" if r.installed else ""
        lines.append(
            f"{i:>3}  {(r.model.id + mark)[:43]:<44}{r.best.quant[:8]:<9}{FIT_BADGES[e.fit]:<13}"
            f"{e.performance.decode_tok_s:9.1f}{gb(e.memory.total_bytes):>11}{gb(e.spec.file_bytes):>11}"
            f"{r.score:7.1f}"
        )
    lines += ["", "decode in tokens/s; memory over all devices; * = on disk. Quality: size prior "
              "(search results carry no benchmark figure)."]
    return "\n".join(lines)


def cmd_search(args) -> int:
    from rooflight.catalog.hub_rank import search_and_rank
    from rooflight.catalog.local import find_installed
    from rooflight.errors import BadInputError

    check_use_case(args.use_case)
    if not args.query.strip():
        raise BadInputError("search needs some text of the repository name, such as 'qwen3 8b'.")
    if args.limit > 100:
        raise BadInputError("--limit must be at most 100: each result costs a header read.")
    profile = load_hardware(args)
    result = search_and_rank(
        args.query, profile, limit=args.limit, ctx=args.ctx, use_case=args.use_case,
        calibration=calibration_for(args, profile), exact=args.exact, installed=find_installed(),
    )
    offline_note(result)
    for repo, why in result.skipped:
        print(f"rooflight: skipped {repo}: {why}", file=sys.stderr)
    if args.json:
        emit_json({"hardware": profile.to_dict(), "use_case": args.use_case, **result.to_dict()})
    else:
        print(format_hub_ranking(result.models))
    return 0
