"""Subcommands that live in their own modules, one command (or a small group) each.

Each module named in COMMAND_MODULES defines `register(subparsers)`, which adds its
parser(s) and sets `func` to a handler `(args) -> int` that may raise RooflightError.
The list is explicit (not discovered) so that frozen builds see every import.
"""

from __future__ import annotations

import importlib

COMMAND_MODULES: tuple[str, ...] = (
    "search",
    "models",
    "download",
    "monitor",
    "stress",
    "bench",
    "probe",
    "advise",
    "chat",
    "gui",
    "rpc",
)


def register_all(subparsers) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"rooflight.commands.{name}").register(subparsers)
