"""Keep a PySide6 reference-count bug from ending the app.

PySide6 6.12.0 on CPython 3.11 hands back None from every void method (setText, setValue,
update...) and True from every Signal.emit() without taking a reference, so each call
leaves that object with one reference fewer. None starts with about 5,000 references and
True with about 600; when a count reaches zero CPython aborts ("Fatal Python error:
none_dealloc" / "bool_dealloc"). Measured here: a QLabel.setText loop aborts after about
5,000 calls, and the app died streaming its first long chat reply (token batches are
signals). CPython 3.12+ makes these objects immortal, where the bug is harmless.

guard() checks for the bug with a few calls and, only if it is there, gives None, True and
False the immortality 3.12 gives them: a reference count so large that no run can use it
up. They are static objects that are never freed, so a larger count changes nothing else.
"""

from __future__ import annotations

import sys

HEADROOM = 1 << 60  # references added: 10^9 leaking calls a second would take 36 years
SINGLETONS = (None, True, False)


def leaking() -> list[str]:
    """Which singletons a void PySide6 call or a signal emission takes a reference from."""
    from PySide6.QtCore import QObject, Signal

    class Probe(QObject):
        ping = Signal()

    probe = Probe()
    before = [sys.getrefcount(o) for o in SINGLETONS]
    for _ in range(4):
        probe.setObjectName("probe")  # void
        probe.ping.emit()  # returns a bool
    after = [sys.getrefcount(o) for o in SINGLETONS]
    return [repr(o) for o, b, a in zip(SINGLETONS, before, after, strict=True) if a < b]


def guard() -> list[str]:
    """Make None, True and False effectively immortal if this PySide6 leaks references
    to them; returns the names of the leaking ones (empty: nothing was changed)."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return []
    if hasattr(sys, "getobjects"):  # a Py_TRACE_REFS build: the count is not the first field
        return []
    leaks = leaking()
    if not leaks:
        return []
    import ctypes

    for obj in SINGLETONS:
        count = ctypes.c_ssize_t.from_address(id(obj))  # PyObject.ob_refcnt, the first field
        if abs(count.value - (sys.getrefcount(obj) - 1)) > 16:
            return []  # not the layout expected: leave everything alone
    for obj in SINGLETONS:
        ctypes.c_ssize_t.from_address(id(obj)).value += HEADROOM
    return leaks
