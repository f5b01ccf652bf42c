"""`rooflight gui`: open the desktop app explicitly (plain `rooflight` does the same).

The explicit form takes the app's own options: `--hardware FILE` plans for another machine,
and the hidden `--quit-when-ready` (used by bench/gui_start.py and the packaged bundle's smoke
test) prints "ready" once the ranking is on screen and closes the window.
"""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser("gui", help="open the desktop app (the default with no command)")
    p.add_argument("--hardware", metavar="FILE", help="plan for the machine in this JSON profile")
    p.add_argument("--quit-when-ready", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args) -> int:
    from rooflight.ui.app import main as gui_main  # Qt is imported only on this path

    argv = []
    if args.hardware:
        argv += ["--hardware", args.hardware]
    if args.quit_when_ready:
        argv.append("--quit-when-ready")
    return gui_main(argv)
