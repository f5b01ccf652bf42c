"""The command-line twin (CONTRACT.md): thin over the core, JSON on stdout with --json.

Exit codes: 0 success, 1 an operation failed, 2 bad usage or bad input. Errors are one
line on stderr; --debug shows the traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from rooflight import __version__
from rooflight.commands import register_all
from rooflight.commands.common import add_estimate_options as _add_estimate_options
from rooflight.commands.common import calibration_for, check_use_case
from rooflight.commands.common import emit_json as _emit_json
from rooflight.commands.common import load_hardware as _hardware
from rooflight.commands.common import positive_int as _positive_int
from rooflight.commands.common import wishes_from as _wishes
from rooflight.commands.rpc import remotes_from_args
from rooflight.errors import RooflightError


def cmd_hardware(args) -> int:
    from rooflight.hardware import format_profile

    profile = _hardware(args)
    if args.json:
        _emit_json(profile.to_dict())
    else:
        print(format_profile(profile))
    return 0


def cmd_estimate(args) -> int:
    from rooflight.commands.common import model_spec_for
    from rooflight.estimate import plan
    from rooflight.format import PROBE_HINT, format_estimate

    spec = model_spec_for(args.model, getattr(args, "quant", None), getattr(args, "mmproj", None))
    profile = _hardware(args)
    remotes = remotes_from_args(args)
    if remotes:
        from dataclasses import replace

        profile = replace(profile, remotes=profile.remotes + remotes)
    # calibration only describes this machine: never apply it to a --hardware profile
    calibration = calibration_for(args, profile)
    est = plan(spec, profile, _wishes(args), calibration=calibration)
    doc = est.to_dict()
    if getattr(args, "confirm", False):
        from rooflight.commands.confirm import confirmation_for

        text_est = est
        if spec.projector is not None:  # llama.cpp's no-alloc load has no projector: compare the model
            from dataclasses import replace

            text_est = plan(replace(spec, projector=None), profile, _wishes(args), calibration=calibration)
        doc["confirmed"], said = confirmation_for(args, text_est, profile)
    if args.json:
        _emit_json(doc)
    else:
        print(format_estimate(est))
        if getattr(args, "confirm", False):
            print(said)
        if args.hardware is None and est.performance.basis == "table":
            print(PROBE_HINT)
    return 0


def cmd_rank(args) -> int:
    from rooflight.catalog.rank import rank_models
    from rooflight.format import PROBE_HINT, format_ranking, ranking_bases

    check_use_case(args.use_case, also=("vision", "multilingual"))  # catalog tags filter too
    from rooflight.catalog.hub import cached_catalog_files, refresh_catalog_files
    from rooflight.catalog.local import find_installed

    profile = _hardware(args)
    calibration = calibration_for(args, profile)
    offline = False
    if args.refresh:  # ask the Hub for the catalog's current files (cached answers otherwise)
        refreshed = refresh_catalog_files()
        hub_files, offline = refreshed.models, refreshed.offline
        if offline:
            print("rooflight: offline: the Hub could not be asked; file sizes come from earlier answers "
                  "or are computed.", file=sys.stderr)
        elif refreshed.errors:
            repo, why = next(iter(refreshed.errors.items()))
            print(f"rooflight: {len(refreshed.errors)} repositories could not be listed ({repo}: {why})",
                  file=sys.stderr)
    else:
        hub_files = cached_catalog_files()
    ranked = rank_models(
        profile, ctx=args.ctx, use_case=args.use_case, fits_only=args.fits_only,
        min_params_b=args.min_params, max_params_b=args.max_params,
        license_contains=args.license, calibration=calibration,
        hub_files=hub_files, installed=find_installed(), installed_only=args.installed,
        unavailable=(unavailable := []),
    )
    if args.json:
        _emit_json({"hardware": profile.to_dict(), "use_case": args.use_case, "offline": offline,
                    "models": [r.to_dict() for r in ranked], "unavailable": unavailable})
    else:
        print(format_ranking(ranked))
        for row in unavailable:
            print(f"{row['name']}: {row['reason']}")
        if args.hardware is None and "table" in ranking_bases(ranked):
            print(PROBE_HINT)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rooflight",
        description="Which local LLM will really run on this machine, and how fast.",
    )
    parser.add_argument("--version", action="version", version=f"rooflight {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("hardware", help="detect this machine (GPUs, CPU, RAM, llama.cpp backend)")
    p.add_argument("--hardware", metavar="FILE", help="read and complete a JSON profile instead")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_hardware)

    p = sub.add_parser("estimate", help="memory plan and speed estimate for a model")
    _add_estimate_options(p, model_help="a local .gguf path, hf:OWNER/REPO/FILE.gguf (header read remotely), "
                                        "or a catalog id (`rooflight rank` lists them)")
    p.add_argument("--quant", help="catalog models: which of the catalog's files (default Q4_K_M)")
    p.add_argument("--mmproj", metavar="FILE", help="a vision projector (local or hf:) to plan with the "
                   "model (default: an mmproj-*.gguf beside a local model)")
    p.add_argument("--confirm", action="store_true",
                   help="also ask this machine's llama.cpp what it would allocate (no-alloc load of the header)")
    p.set_defaults(func=cmd_estimate)

    p = sub.add_parser("rank", help="catalog models ranked for this machine, each at its best quant")
    p.add_argument("--hardware", metavar="FILE", help="rank for the machine in this JSON profile")
    p.add_argument("--ctx", type=_positive_int, help="context length (default 8192, capped per model)")
    p.add_argument("--use-case", default="chat", help="chat | coding | reasoning | tiny")
    p.add_argument("--fits-only", action="store_true", help="hide models that do not fit")
    p.add_argument("--min-params", type=float, default=0.0, metavar="B", help="smallest size, billions")
    p.add_argument("--max-params", type=float, default=float("inf"), metavar="B", help="largest size, billions")
    p.add_argument("--license", help="only licenses containing this text (e.g. apache)")
    p.add_argument("--installed", action="store_true", help="only models with a file on disk")
    p.add_argument("--refresh", action="store_true", help="ask the Hub for current file lists and sizes first")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_rank)

    register_all(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.command:
        # no command: the desktop app (CONTRACT.md); Qt is imported only on this path
        from rooflight.ui.app import main as gui_main

        return gui_main([])
    try:
        code = args.func(args)
        sys.stdout.flush()  # here, so a reader gone away is seen below, not at exit
        return code
    except BrokenPipeError:
        if not _stdout_gone():
            raise  # some other pipe: not ours to hide
        return _reader_gone()
    except RooflightError as exc:
        if args.debug:
            raise
        print(f"rooflight: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("rooflight: interrupted", file=sys.stderr)
        return 1


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader closed (poll reports an error on it)."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _fd, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return True  # no poll() here (Windows): a broken pipe on the way out is stdout's


def _reader_gone() -> int:
    """stdout's reader went away (`rooflight rank | head`): end quietly, like other Unix
    tools. Python would flush stdout again at exit and print the broken pipe there, so
    stdout is pointed at the null device first (Python docs, signal module, SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 1
