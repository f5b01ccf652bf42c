"""Argument types and output helpers shared by every subcommand."""

from __future__ import annotations

import argparse
import json
import sys


def emit_json(doc: dict) -> None:
    """Print one JSON document on stdout (CONTRACT.md: --json output)."""
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of at least 1, got {value}")
    return value


def gpu_layers(text: str) -> int | str:
    if text == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("expected 0 or more")
    return value


def n_cpu_moe(text: str) -> int | str:
    """--n-cpu-moe N|auto|all: MoE experts of the first N layers kept in RAM (llama.cpp's flag)."""
    from rooflight.errors import BadInputError
    from rooflight.estimate.experts import parse_wish

    try:
        return parse_wish(text)
    except BadInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


N_CPU_MOE_HELP = ("MoE models: keep the routed experts of the first N layers in RAM, attention and KV cache on "
                  "the GPU (llama.cpp's --n-cpu-moe); all; or auto: the faster of that and a layer split "
                  "(default 0)")


def load_hardware(args):
    """The machine to plan for: the --hardware profile if given, else this one, detected."""
    from rooflight.hardware import detect, load_profile

    if getattr(args, "hardware", None):
        return load_profile(args.hardware)
    return detect()


def calibration_for(args, profile):
    """This machine's calibration, or None for a --hardware profile: measurements taken here
    describe this machine only."""
    if getattr(args, "hardware", None):
        return None
    from rooflight.store.calibration import machine_calibration

    return machine_calibration(profile)


def check_use_case(name: str, *, also: tuple[str, ...] = ()) -> None:
    """BadInputError unless `name` is a ranking use case (or one of `also`: tag filters)."""
    from rooflight.catalog.rank import USE_CASES
    from rooflight.errors import BadInputError

    if name not in USE_CASES and name not in also:
        raise BadInputError(f"Unknown use case {name!r}; use one of {', '.join(USE_CASES)}.")
