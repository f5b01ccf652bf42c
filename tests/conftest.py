"""Shared test setup: no display, no user directories touched, no network."""

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory, monkeypatch):
    """Keep calibration, caches and settings of test runs out of the user's folders."""
    base = tmp_path_factory.mktemp("userdirs")
    monkeypatch.setenv("ROOFLIGHT_DATA_DIR", str(base / "data"))
    monkeypatch.setenv("ROOFLIGHT_CACHE_DIR", str(base / "cache"))
