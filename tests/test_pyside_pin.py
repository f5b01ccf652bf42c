"""The PySide6 pin in pyproject.toml ("pyside6>=6.7,<6.12") and the release it keeps out.

PySide6 6.12.0 on CPython 3.11 drops a reference to None or True on every void call and
signal emission until CPython aborts (ui/refcount_guard.py). This test runs the guard's
own probe on the newest PySide6 at or above the pin's bound that is at hand as wheels, and
fails once that release no longer leaks: then the pin can be lifted (and this test with it).

It runs offline: the wheels come from a local wheelhouse ($ROOFLIGHT_PYSIDE_WHEELS, or
~/.cache/rooflight/pyside-canary), filled once with
    pip download "pyside6-essentials>=6.12" "shiboken6>=6.12" --no-deps -d <that folder>
(and again to check a newer release). Only QtCore is unpacked, into a folder beside the
wheels, once per release; the probe runs in a child interpreter without site-packages, so
the PySide6 installed here is not seen. Without such wheels the test says how to get them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUARD = ROOT / "app" / "rooflight" / "ui" / "refcount_guard.py"
WHEELS = Path(os.environ.get("ROOFLIGHT_PYSIDE_WHEELS", Path.home() / ".cache" / "rooflight" / "pyside-canary"))
# what QtCore needs of the Essentials wheel: the package, its bindings and Qt's core library
KEEP = re.compile(r"^(shiboken6/|PySide6/(__init__|_[^/]*|QtCore\.|libpyside6\.|Qt/lib/lib(Qt6Core|icu)))")


def version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def pinned_below() -> tuple[int, ...]:
    """The upper bound of the pyside6 requirement in pyproject.toml."""
    m = re.search(r'"pyside6>=[\d.]+,<([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    assert m, "pyproject.toml no longer pins pyside6 below a release: drop this test"
    return version(m.group(1))


def newest_wheels(bound: tuple[int, ...]) -> tuple[str, list[Path]] | None:
    """(version, [essentials wheel, shiboken wheel]) of the newest release >= bound at hand."""
    found: dict[str, dict[str, Path]] = {}
    for wheel in WHEELS.glob("*.whl") if WHEELS.is_dir() else ():
        m = re.match(r"(pyside6_essentials|shiboken6)-([\d.]+)-", wheel.name.lower())
        if m and version(m.group(2)) >= bound:
            found.setdefault(m.group(2), {})[m.group(1)] = wheel
    complete = [v for v, w in found.items() if len(w) == 2]
    if not complete:
        return None
    v = max(complete, key=version)
    return v, [found[v]["pyside6_essentials"], found[v]["shiboken6"]]


def unpack(release: str, wheels: list[Path]) -> Path:
    target = WHEELS / f"qtcore-{release}"
    if not (target / ".complete").is_file():
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as z:
                z.extractall(target, [n for n in z.namelist() if KEEP.match(n)])
        (target / ".complete").write_text(release)
    return target


@pytest.mark.skipif(sys.version_info >= (3, 12) or sys.implementation.name != "cpython",
                    reason="CPython 3.12+ makes None and True immortal: the leak cannot be seen (or hurt)")
def test_the_pinned_out_pyside6_still_leaks():
    bound = pinned_below()
    at_hand = newest_wheels(bound)
    if at_hand is None:
        pytest.skip(f"no PySide6 >= {'.'.join(map(str, bound))} wheels in {WHEELS}; fetch them with: pip download "
                    f'"pyside6-essentials>={".".join(map(str, bound))}" "shiboken6>={".".join(map(str, bound))}" '
                    f"--no-deps -d {WHEELS}")
    release, wheels = at_hand
    site = unpack(release, wheels)
    probe = ("import runpy, PySide6\n"
             f"print(PySide6.__version__, runpy.run_path({str(GUARD)!r})['leaking']())\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(site), QT_QPA_PLATFORM="offscreen")
    r = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    seen, _, leaks = r.stdout.strip().partition(" ")
    assert seen == release, r.stdout  # the unpacked release ran, not the installed one
    assert leaks != "[]", (f"PySide6 {release} no longer leaks references to None/True: lift the "
                           f"'<{'.'.join(map(str, bound))}' pin in pyproject.toml and retire this test")
