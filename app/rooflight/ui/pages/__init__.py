"""The window's pages, in navigation order.

Adding a page is one module and one line: write `pages/NAME.py` with a `Page` subclass
(pages/base.py: class attributes key, title, icon; __init__(self, ctx)) and add its
"module:Class" to PAGES below. The window builds the navigation, the stack, the
remembered state from this list, and bench/screenshots.py takes a picture of each page.
"""

from __future__ import annotations

import importlib

PAGES: tuple[str, ...] = (
    "rooflight.ui.pages.machine:MachinePage",
    "rooflight.ui.pages.models:ModelsPage",
    "rooflight.ui.pages.downloads:DownloadsPage",
    "rooflight.ui.pages.chat:ChatPage",
    "rooflight.ui.pages.settings:SettingsPage",
)

# The page a first start opens on: the ranked models are the answer people come for.
START_PAGE = "models"


def page_classes() -> list[type]:
    """The Page subclasses named in PAGES (imported here, so frozen builds see them)."""
    out = []
    for spec in PAGES:
        module, _, name = spec.partition(":")
        out.append(getattr(importlib.import_module(module), name))
    return out
