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


# ---- local Hugging Face Hub (tests/hub_server.py) ---------------------------------------


@pytest.fixture
def hub_server(tmp_path, monkeypatch):
    """A Hub stand-in on 127.0.0.1 with huggingface_hub pointed at it.

    Yields a HubServer: .root, .url, .add_file(repo, path, bytes_or_src_path),
    .require_token(repo), .drop_after(file, n), .bytes_served, .requests.
    huggingface_hub reads HF_ENDPOINT, HF_HOME and friends into `constants` at import
    time (and HfApi() instances keep the endpoint they were built with), so besides the
    environment the fixture patches those module attributes for the test's duration.
    """
    import huggingface_hub
    import huggingface_hub.hf_api  # lazily imported by the package: load it to patch it
    from huggingface_hub import constants

    from hub_server import HubServer

    server = HubServer(tmp_path / "hub").start()
    home = tmp_path / "hf_home"
    cache = home / "hub"
    env = {
        "HF_ENDPOINT": server.url,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_TOKEN_PATH": str(home / "token"),
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(k, raising=False)
    patches = {
        "ENDPOINT": server.url,
        "HUGGINGFACE_CO_URL_TEMPLATE": server.url + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(cache),
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_TELEMETRY": True,
    }
    for k, v in patches.items():
        if hasattr(constants, k):
            monkeypatch.setattr(constants, k, v)
    monkeypatch.setattr(huggingface_hub.hf_api.api, "endpoint", server.url)
    huggingface_hub.close_session()  # a fresh client: no pooled connection to an earlier server
    try:
        yield server
    finally:
        huggingface_hub.close_session()
        server.stop()
    assert not server.errors, f"the Hub stand-in crashed: {server.errors!r}"
