"""Where Rooflight keeps its files: platformdirs, overridable for tests and portable use."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def data_dir() -> Path:
    """User data (chats, calibration): ROOFLIGHT_DATA_DIR or the platform's data dir."""
    override = os.environ.get("ROOFLIGHT_DATA_DIR")
    path = Path(override) if override else Path(platformdirs.user_data_dir("rooflight", appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path
