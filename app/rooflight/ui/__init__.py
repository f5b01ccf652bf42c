"""The PySide6 desktop app. The only package that imports Qt; no logic of its own."""

from rooflight.ui.refcount_guard import guard as _guard_refcounts

_guard_refcounts()  # before any other Qt call: see refcount_guard.py (PySide6 6.12, Python 3.11)
