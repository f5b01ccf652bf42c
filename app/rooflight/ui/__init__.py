"""The PySide6 desktop app. The only package that imports Qt; no logic of its own."""
