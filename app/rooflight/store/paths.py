"""Where Rooflight keeps its files: platformdirs, overridable for tests and portable use."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from rooflight.errors import BadInputError, OperationFailedError


def data_dir() -> Path:
    """User data (chats, calibration): ROOFLIGHT_DATA_DIR or the platform's data dir.
    A location that cannot be a folder is one sentence (BadInputError for the variable the
    user set, OperationFailedError for the platform's), not a traceback."""
    override = os.environ.get("ROOFLIGHT_DATA_DIR")
    path = Path(override) if override else Path(platformdirs.user_data_dir("rooflight", appauthor=False))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = f"ROOFLIGHT_DATA_DIR ({path})" if override else f"Rooflight's data folder ({path})"
        reason = "is a file, not a folder" if path.is_file() else f"cannot be created ({exc.strerror or exc})"
        error = BadInputError if override else OperationFailedError
        raise error(f"{where} {reason}: point it at a folder Rooflight may write to.") from exc
    return path
