"""`rooflight download REPO FILE`, `rooflight installed`, `rooflight remove REPO FILE`.

The download prints a progress bar on stderr (redrawn in place on a terminal, a line
every few seconds otherwise) and the path of the verified file on stdout, or one JSON
document with --json. Ctrl-C keeps the partial file, and the same command resumes it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rooflight.commands.common import emit_json
from rooflight.errors import BadInputError

LOG_EVERY_S = 5.0  # not a terminal: one progress line this often


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "download",
        help="download a GGUF file (every part of a split one) into the Hugging Face cache, "
        "resumable and verified",
    )
    p.add_argument("repo", metavar="REPO", help="Hub repository, OWNER/NAME")
    p.add_argument("file", metavar="FILE", help="path of the .gguf file in the repository")
    p.add_argument("--revision", help="branch, tag or commit (default: main)")
    p.add_argument("--mmproj", default="auto", metavar="auto|none|F16|Q8_0|FILE",
                   help="a vision model's projector, downloaded with it (default auto: the repository's "
                   "mmproj file, F16 first; none: leave it out)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_download)

    p = subparsers.add_parser("installed", help="models downloaded and verified, and unfinished downloads")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_installed)

    p = subparsers.add_parser("remove", help="delete an installed model from the Hugging Face cache")
    p.add_argument("repo", metavar="REPO")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_remove)


class ProgressLine:
    """Renders Progress events on stderr; the events are already throttled to ~4 Hz."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._phase = ""
        self._last_line = 0.0
        self._open = False  # a \r line is on screen

    def __call__(self, p) -> None:
        from rooflight.download.progress import DONE, RESOLVING

        new_phase = p.phase != self._phase
        self._phase = p.phase
        if p.phase in (RESOLVING, DONE) and not p.note:
            return
        text = format_progress(p)
        if self.tty:
            if new_phase and self._open:
                self.stream.write("\n")
            self.stream.write("\r" + text.ljust(78)[:120])
            self._open = True
        elif new_phase or p.note or time.monotonic() - self._last_line >= LOG_EVERY_S:
            self.stream.write(text + "\n")
            self._last_line = time.monotonic()
        self.stream.flush()

    def close(self) -> None:
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


def format_progress(p) -> str:
    from rooflight.download.diskspace import format_bytes

    width = 24
    filled = int(width * min(1.0, p.fraction))
    bar = "#" * filled + "." * (width - filled)
    part = f" part {p.part}/{p.parts}" if p.parts > 1 else ""
    line = (
        f"{p.phase:<11} [{bar}] {p.fraction * 100:5.1f}%  "
        f"{format_bytes(p.done_bytes)} / {format_bytes(p.total_bytes)}"
    )
    if p.speed_bps > 0:
        line += f"  {format_bytes(int(p.speed_bps))}/s"
    if p.eta_s is not None and p.done_bytes < p.total_bytes:
        m, s = divmod(int(p.eta_s + 0.5), 60)
        h, m = divmod(m, 60)
        line += f"  ETA {h}:{m:02d}:{s:02d}" if h else f"  ETA {m}:{s:02d}"
    line += part
    if p.note:
        line += f"  ({p.note})"
    return line


def cmd_download(args) -> int:
    from rooflight.download import download_model
    from rooflight.download.diskspace import format_bytes
    from rooflight.download.hubfile import unit_filename
    from rooflight.store.installed import InstalledStore

    bar = ProgressLine()
    store = InstalledStore()
    try:
        try:
            projector = None if args.mmproj.lower() == "none" else args.mmproj
            result = download_model(args.repo, args.file, args.revision, on_progress=bar, store=store,
                                    projector=projector)
        except KeyboardInterrupt:
            bar.close()
            pending = store.get_pending(args.repo, unit_filename(args.file), args.revision or "main")
            kept = pending.partial_bytes() if pending else 0
            if kept:
                print(
                    f"rooflight: download interrupted; the {format_bytes(kept)} downloaded so far "
                    "are kept, run the same command again to resume.",
                    file=sys.stderr,
                )
            else:
                print("rooflight: download interrupted before any data arrived.", file=sys.stderr)
            return 130
        finally:
            bar.close()
    finally:
        store.close()
    if args.json:
        emit_json(result.to_dict())
        return 0
    m = result.model
    if result.already_installed:
        print(f"already installed and verified: {m.repo_id}/{m.filename}", file=sys.stderr)
    else:
        rate = ""
        if result.download_seconds > 0:
            rate = f", {format_bytes(int(result.downloaded_bytes / result.download_seconds))}/s"
        resumed = f", resumed after {format_bytes(result.resumed_bytes)}" if result.resumed_bytes else ""
        print(
            f"verified sha256 {m.sha256[:16]}… ({format_bytes(m.size_bytes)}; downloaded "
            f"{format_bytes(result.downloaded_bytes)} in {result.download_seconds:.1f} s{rate}"
            f"{resumed}; checked in {result.verify_seconds:.1f} s)",
            file=sys.stderr,
        )
    mmproj = result.to_dict()["mmproj"]
    if mmproj:
        print(f"vision projector: {Path(mmproj).name} (loaded with the model)", file=sys.stderr)
    print(m.path)
    return 0


def cmd_installed(args) -> int:
    from rooflight.download.diskspace import format_bytes
    from rooflight.store.installed import InstalledStore

    with InstalledStore() as store:
        models = store.list()
        pending = store.pending()
    if args.json:
        emit_json({
            "models": [m.to_dict() for m in models],
            "unfinished": [
                {"repo": p.repo_id, "file": p.filename, "revision": p.revision,
                 "size_bytes": p.size_bytes, "downloaded_bytes": p.partial_bytes()}
                for p in pending
            ],
        })
        return 0
    if not models and not pending:
        print("Nothing installed yet; try `rooflight download REPO FILE`.")
    for m in models:
        parts = f" ({len(m.parts)} parts)" if len(m.parts) > 1 else ""
        print(f"{m.repo_id}/{m.filename}{parts}  {format_bytes(m.size_bytes)}  {m.path}")
    for p in pending:
        print(
            f"unfinished: {p.repo_id}/{p.filename}  {format_bytes(p.partial_bytes())} of "
            f"{format_bytes(p.size_bytes)}  (run `rooflight download {p.repo_id} {p.filename}` to resume)"
        )
    return 0


def cmd_remove(args) -> int:
    from rooflight.download import discard_partial
    from rooflight.download.diskspace import format_bytes
    from rooflight.download.hubfile import unit_filename
    from rooflight.store.installed import InstalledStore

    name = unit_filename(args.file)
    with InstalledStore() as store:
        removed = store.remove(args.repo, name)
        pending = [p for p in store.pending() if (p.repo_id, p.filename) == (args.repo, name)]
        freed_partial = sum(discard_partial(p.repo_id, p.filename, p.revision, store=store) for p in pending)
    if removed is None and not pending:
        raise BadInputError(f"{args.repo}/{args.file} is not installed; `rooflight installed` lists what is.")
    if args.json:
        emit_json({
            "repo": args.repo, "file": name, "removed": removed is not None,
            "size_bytes": removed.size_bytes if removed else 0, "partial_bytes_removed": freed_partial,
        })
        return 0
    if removed is not None:
        print(f"removed {args.repo}/{name} ({format_bytes(removed.size_bytes)})")
    if freed_partial:
        print(f"removed an unfinished download of {args.repo}/{name} ({format_bytes(freed_partial)})")
    return 0
