"""Before the QApplication: does Qt's X11 display plugin (xcb) have its libraries?

Since Qt 6.5 the xcb plugin also needs libxcb-cursor0 (Qt's "Qt for X11 Requirements"
page for 6.5 adds xcb-cursor0 to the table), which many fresh desktops lack. Without
any of its libraries Qt prints "could not load the Qt platform plugin xcb" and aborts
the process (SIGABRT); here the user gets one sentence naming what is missing and the
command that installs it.

XCB_LIBRARIES: the shared libraries PySide6's libqxcb.so and libQt6XcbQpa.so.6 link
against besides Qt's own, read with `readelf -d` (DT_NEEDED) on PySide6 6.11.3, with the
Debian/Ubuntu package that ships each (`dpkg -S` / `apt-cache search` on Debian 12).
No Qt import here: this runs before Qt loads anything.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Mapping

XCB_LIBRARIES: tuple[tuple[str, str], ...] = (
    ("libxcb-cursor.so.0", "libxcb-cursor0"),
    ("libxcb-icccm.so.4", "libxcb-icccm4"),
    ("libxcb-util.so.1", "libxcb-util1"),
    ("libxcb-image.so.0", "libxcb-image0"),
    ("libxcb-keysyms.so.1", "libxcb-keysyms1"),
    ("libxcb-randr.so.0", "libxcb-randr0"),
    ("libxcb-render-util.so.0", "libxcb-render-util0"),
    ("libxcb-render.so.0", "libxcb-render0"),
    ("libxcb-shape.so.0", "libxcb-shape0"),
    ("libxcb-shm.so.0", "libxcb-shm0"),
    ("libxcb-sync.so.1", "libxcb-sync1"),
    ("libxcb-xfixes.so.0", "libxcb-xfixes0"),
    ("libxcb-xkb.so.1", "libxcb-xkb1"),
    ("libxcb.so.1", "libxcb1"),
    ("libX11-xcb.so.1", "libx11-xcb1"),
    ("libX11.so.6", "libx11-6"),
    ("libxkbcommon.so.0", "libxkbcommon0"),
    ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
    ("libGL.so.1", "libgl1"),
)


def can_load(soname: str) -> bool:
    """Whether the dynamic loader finds and loads `soname` (and what it needs); in a
    PyInstaller bundle also from the bundle's own folders, where it may carry a copy."""
    candidates = [soname]
    bundle = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and bundle:
        candidates += [os.path.join(bundle, soname), os.path.join(bundle, "PySide6", "Qt", "lib", soname)]
    for name in candidates:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def platform_is_xcb(env: Mapping[str, str] | None = None, platform: str | None = None) -> bool:
    """Whether Qt would start on its xcb plugin: Linux, QT_QPA_PLATFORM naming xcb first,
    or unset with an X display and no Wayland session (where Qt takes its wayland plugin
    first, and xcb only as a fallback, which this check leaves alone)."""
    env = os.environ if env is None else env
    if not (platform or sys.platform).startswith("linux"):
        return False
    chosen = env.get("QT_QPA_PLATFORM", "").strip()
    if chosen:
        return chosen.split(";")[0].split(":")[0] == "xcb"
    wayland = bool(env.get("WAYLAND_DISPLAY")) and env.get("XDG_SESSION_TYPE", "") == "wayland"
    return bool(env.get("DISPLAY")) and not wayland


def missing_xcb_libraries(load: Callable[[str], bool] | None = None) -> list[tuple[str, str]]:
    load = load or can_load
    return [(soname, package) for soname, package in XCB_LIBRARIES if not load(soname)]


def xcb_problem(env: Mapping[str, str] | None = None, platform: str | None = None,
                load: Callable[[str], bool] | None = None) -> str | None:
    """The one sentence to print instead of Qt's abort, or None when all is there."""
    if not platform_is_xcb(env, platform):
        return None
    missing = missing_xcb_libraries(load)
    if not missing:
        return None
    names = ", ".join(soname for soname, _ in missing)
    packages = " ".join(package for _, package in missing)
    return (f"rooflight: the desktop app needs libraries Qt's X11 plugin loads and this system lacks "
            f"({names}); on Debian/Ubuntu install them with: sudo apt install {packages}")
