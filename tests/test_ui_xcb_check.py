"""The X11 library check before the QApplication (ui/xcb_check.py): the loader lookup is
faked at its boundary (ctypes' dlopen), everything above it is real."""

import subprocess
import sys

from rooflight.ui import xcb_check
from rooflight.ui.xcb_check import XCB_LIBRARIES, platform_is_xcb, xcb_problem

X11 = {"DISPLAY": ":0"}


def test_which_platform_qt_would_take():
    assert platform_is_xcb(X11, "linux")
    assert platform_is_xcb({"QT_QPA_PLATFORM": "xcb"}, "linux")
    assert not platform_is_xcb({**X11, "QT_QPA_PLATFORM": "offscreen"}, "linux")
    assert not platform_is_xcb({**X11, "WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}, "linux")
    assert not platform_is_xcb(X11, "darwin")
    assert not platform_is_xcb({}, "linux")  # no display at all: app.py says so itself


def test_one_sentence_names_the_missing_libraries_and_the_install_command():
    missing = {"libxcb-cursor.so.0", "libxcb-icccm.so.4"}
    text = xcb_problem(X11, "linux", load=lambda soname: soname not in missing)
    assert text.count("\n") == 0 and "libxcb-cursor.so.0" in text and "libxcb-icccm.so.4" in text
    assert text.endswith("sudo apt install libxcb-cursor0 libxcb-icccm4")
    assert xcb_problem(X11, "linux", load=lambda _soname: True) is None
    assert xcb_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux", load=lambda _soname: False) is None


def test_the_real_lookup_finds_a_library_every_linux_has_and_not_a_made_up_one():
    assert xcb_check.can_load("libc.so.6")
    assert not xcb_check.can_load("libxcb-no-such-library.so.0")
    assert all(soname.startswith("lib") and package for soname, package in XCB_LIBRARIES)


def test_the_app_prints_the_sentence_instead_of_aborting(tmp_path):
    # a fresh process without a QApplication yet, an X display named, and the loader
    # reporting libxcb-cursor missing: the sentence, exit 1, no Qt abort (signal 6)
    code = (
        "import sys\n"
        "from rooflight.ui import xcb_check\n"
        "real = xcb_check.can_load\n"
        "xcb_check.can_load = lambda s: s != 'libxcb-cursor.so.0' and real(s)\n"
        "from rooflight.ui.app import main\n"
        "sys.exit(main([]))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "DISPLAY": ":0", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "libxcb-cursor.so.0" in r.stderr and "sudo apt install" in r.stderr and "libxcb-cursor0" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
