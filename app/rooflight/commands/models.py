"""`rooflight models`: GGUF models already on disk, each estimated from its real header.

Looks in the Hugging Face cache, LM Studio's and Ollama's model stores and the folders
given with --dir (rooflight.catalog.local). JSON shape: README "Hub search and installed
models".
"""

from __future__ import annotations

import sys

from rooflight.commands.common import check_use_case, emit_json, load_hardware, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser("models", help="models already on disk (HF cache, LM Studio, Ollama, folders), ranked")
    p.add_argument("--dir", action="append", default=[], metavar="D",
                   help="also look in this folder (recursively); repeatable")
    p.add_argument("--only-dirs", action="store_true",
                   help="look only in the --dir folders, not in the usual stores")
    p.add_argument("--hardware", metavar="FILE", help="estimate for the machine in this JSON profile")
    p.add_argument("--ctx", type=positive_int, help="context length (default 8192, capped per model)")
    p.add_argument("--use-case", default="chat", help="chat | coding | reasoning | tiny (score weights)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_models)


def format_installed(ranked) -> str:
    from rooflight.format import FIT_BADGES, gb

    if not ranked:
        return "No GGUF model found on disk."
    lines = [f"{'#':>3}  {'model':<48}{'from':<10}{'quant':<9}{'fit':<13}{'decode':>9}{'memory':>11}"
             f"{'score':>7}"]
    for i, r in enumerate(ranked, 1):
        e = r.best.estimate
        f = r.installed[0]
        lines.append(
            f"{i:>3}  {f.name[-47:]:<48}{f.source:<10}{r.best.quant[:8]:<9}{FIT_BADGES[e.fit]:<13}"
            f"{e.performance.decode_tok_s:9.1f}{gb(e.memory.total_bytes):>11}{r.score:7.1f}"
        )
    lines += ["", "Estimated from each file's own header; decode in tokens/s, memory over all devices."]
    return "\n".join(lines)


def cmd_models(args) -> int:
    from rooflight.catalog.installed_rank import rank_installed
    from rooflight.catalog.local import default_model_dirs, find_installed
    from rooflight.commands.common import calibration_for
    from rooflight.errors import BadInputError

    check_use_case(args.use_case)
    for d in args.dir:
        import os

        if not os.path.isdir(d):
            raise BadInputError(f"{d} is not a folder.")
    if args.only_dirs:
        files = find_installed(hf_caches=[], lmstudio_dirs=[], ollama_dirs=[], folders=args.dir)
    else:
        files = find_installed(folders=[*default_model_dirs(), *args.dir])
    profile = load_hardware(args)
    result = rank_installed(profile, files, ctx=args.ctx, use_case=args.use_case,
                            calibration=calibration_for(args, profile))
    for path, why in result.skipped:
        print(f"rooflight: skipped {path}: {why}", file=sys.stderr)
    if args.json:
        emit_json({"hardware": profile.to_dict(), "use_case": args.use_case, **result.to_dict()})
    else:
        print(format_installed(result.models))
    return 0
