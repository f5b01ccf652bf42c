"""Screenshots of every page with real data from this machine:

    python bench/screenshots.py OUTDIR [--theme light|dark] [--hardware FILE] [--only ...]

Every page of ui/pages/PAGES, each as bench/page_shots.py stages it (machine.png,
what_if.png, models.png, model_detail*.png, downloads.png, chat.png, chat_monitor.png...) or,
for a page it has no entry for, as it is (<key>.png). Source-tree tooling, not part of the
installed package: the shots use the test suite's Gemma-3-270M (tests/gemma_model.py) and
Hub stand-in (tests/hub_server.py). Runs offscreen unless QT_QPA_PLATFORM says otherwise;
settings and window state go to a temporary data dir.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from page_shots import shots_for  # noqa: E402

SIZE = (1280, 800)


def wait_until(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Run the event loop until predicate() holds (workers deliver through it)."""
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"screenshot state not reached in {timeout_s:.0f} s")
        QApplication.processEvents()
        time.sleep(0.01)


def take(outdir: Path, *, theme_name: str = "light", hardware: str | None = None,
         only: set[str] | None = None) -> list[Path]:
    from PySide6.QtWidgets import QApplication

    from rooflight.store.settings import Settings
    from rooflight.ui import theme
    from rooflight.ui.app import build_window
    from rooflight.ui.context import AppContext

    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("Rooflight")
    theme.apply(app, theme_name)
    ctx = AppContext(Settings(theme=theme_name))
    window = build_window(ctx)
    window.resize(*SIZE)
    window.show()
    if hardware:
        from rooflight.hardware import load_profile

        ctx.machine.set_detected(load_profile(hardware))
    else:
        ctx.machine.detect()
    outdir.mkdir(parents=True, exist_ok=True)
    saved = []
    try:
        for key, page in window.pages.items():
            for shot in shots_for(page):
                if only and shot.file not in only and key not in only:
                    continue
                window.show_page(key)
                window.banners.clear()  # each page's picture shows only its own messages
                if shot.prepare is not None:
                    shot.prepare(wait_until)
                wait_until(lambda: ctx.runner.active == 0)  # nothing half-drawn
                for _ in range(5):
                    app.processEvents()
                path = outdir / shot.file
                if not window.grab().save(str(path)):
                    raise OSError(f"could not write {path}")
                saved.append(path)
                if shot.after is not None:
                    shot.after(wait_until)
                    wait_until(lambda: ctx.runner.active == 0)
    finally:
        window.close()
    return saved


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/screenshots.py")
    p.add_argument("outdir", type=Path)
    p.add_argument("--theme", choices=["light", "dark"], default="light")
    p.add_argument("--hardware", metavar="FILE", help="a JSON hardware profile instead of this machine")
    p.add_argument("--only", nargs="*", help="page keys or file names to take")
    args = p.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    with tempfile.TemporaryDirectory(prefix="rooflight-shots-") as tmp:
        os.environ["ROOFLIGHT_DATA_DIR"] = tmp  # no user settings, no window state written
        for path in take(args.outdir, theme_name=args.theme, hardware=args.hardware,
                         only=set(args.only) if args.only else None):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
