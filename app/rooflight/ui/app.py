"""Start the desktop app: `rooflight` with no command, or `python -m rooflight.ui.app`.

First paint comes first: the window is shown at once in a "detecting" state; detection
(RAM bandwidth measured once, then cached) and ranking run in workers and fill it in.
"""

from __future__ import annotations

import argparse
import os
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from rooflight import __version__
from rooflight.store.settings import apply_offline, load_settings
from rooflight.ui import theme
from rooflight.ui.context import AppContext
from rooflight.ui.window import MainWindow

APP_NAME = "Rooflight"
STARTUP_GATE_MS = 3000  # the latest the held start-up tasks wait (AppContext.after_startup)
ORG_NAME = "Rooflight"


def connect_services(window: MainWindow) -> None:
    """Where the pieces that are not pages plug into the window (one line each): the
    provider of installed files, the live Hub search, the handlers of actions, e.g.

        window.page("models").set_search_provider(search_and_rank)
    """
    from rooflight.ui.hub_search import make_search_provider
    from rooflight.ui.installed import installed_catalog_files

    ctx = window.ctx
    ctx.installed.set_provider(lambda: installed_catalog_files(ctx.settings.models_dir))
    window.page("models").set_search_provider(make_search_provider(ctx))
    folder = [ctx.settings.models_dir]

    def settings_changed(settings) -> None:
        if settings.models_dir != folder[0]:  # another folder: look again
            folder[0] = settings.models_dir
            ctx.installed.refresh()

    ctx.settings_changed.connect(settings_changed)


def build_window(ctx: AppContext | None = None) -> MainWindow:
    """The window over a context (a fresh one with the saved settings if None)."""
    if ctx is None:
        settings, warning = load_settings()
        ctx = AppContext(settings)
        if warning:
            QTimer.singleShot(0, lambda: ctx.show_warning(warning))
    window = MainWindow(ctx)
    connect_services(window)
    return window


def _no_display() -> bool:
    """Linux without X11 or Wayland: Qt would abort; say so in one sentence instead."""
    return (sys.platform.startswith("linux") and not os.environ.get("QT_QPA_PLATFORM")
            and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rooflight-app", description="Rooflight desktop app")
    p.add_argument("--hardware", metavar="FILE", help="plan for the machine in this JSON profile")
    p.add_argument("--version", action="version", version=f"rooflight {__version__}")
    # for bench/gui_start.py: print "ready" once the ranking is on screen, then quit
    p.add_argument("--quit-when-ready", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if _no_display():
        print("rooflight: no display found (DISPLAY/WAYLAND_DISPLAY unset); use the command line "
              "(rooflight --help) or set QT_QPA_PLATFORM.", file=sys.stderr)
        return 1
    if QApplication.instance() is None:
        from rooflight.ui.xcb_check import xcb_problem

        problem = xcb_problem()  # Qt would abort on a missing library of its X11 plugin
        if problem:
            print(problem, file=sys.stderr)
            return 1
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName(APP_NAME)
    app.setOrganizationName(ORG_NAME)
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("rooflight")
    app.setWindowIcon(theme.app_icon())

    settings, warning = load_settings()
    apply_offline(settings.offline)
    theme.apply(app, settings.theme)
    ctx = AppContext(settings)
    ctx.hold_startup_tasks()  # the ranking first (AppContext.after_startup)
    window = build_window(ctx)
    follower = theme.SystemThemeFollower(app, lambda: ctx.settings.theme, ctx.theme_changed.emit)
    window.show()
    if warning:
        ctx.show_warning(warning)

    models = window.pages.get("models")
    if models is not None:
        models.ranked.connect(ctx.startup_done)
    QTimer.singleShot(STARTUP_GATE_MS, ctx.startup_done)  # whatever happens to the ranking
    if args.quit_when_ready:

        def ready() -> None:
            app.processEvents()  # the ranking painted
            print("ready", flush=True)
            window.close()

        if models is not None:
            models.ranked.connect(lambda: QTimer.singleShot(0, ready))

    if args.hardware:
        from rooflight.hardware import load_profile

        # a sparse profile may need this machine's CPU measured: in a worker too
        ctx.runner.run(load_profile, args.hardware, on_done=ctx.machine.set_detected,
                       on_error=lambda exc: ctx.report(exc, "reading the hardware profile"),
                       what="reading the hardware profile")
    else:
        QTimer.singleShot(0, ctx.machine.detect)  # after the first paint
    code = app.exec()
    del follower
    return code


if __name__ == "__main__":
    sys.exit(main())
