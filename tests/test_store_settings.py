"""User settings: JSON in the data dir, atomic writes, malformed files fall back to the
defaults with one sentence; the Hugging Face token lives in huggingface_hub's storage."""

import json
import os

import pytest

from rooflight.errors import BadInputError
from rooflight.store import settings as st
from rooflight.store.settings import (
    Settings,
    load_settings,
    save_settings,
    settings_path,
    update_settings,
)


def test_missing_file_gives_defaults_silently():
    assert load_settings() == (Settings(), None)


def test_round_trip_and_atomic_write():
    s = Settings(models_dir="/models", offline=True, default_ctx=16384, theme="dark")
    save_settings(s)
    assert load_settings() == (s, None)
    folder = settings_path().parent
    assert sorted(p.name for p in folder.iterdir() if "settings" in p.name) == ["settings.json"]
    assert json.loads(settings_path().read_text())["theme"] == "dark"


def test_update_changes_only_the_named_fields():
    update_settings(theme="light")
    new = update_settings(default_ctx=4096)
    assert (new.theme, new.default_ctx) == ("light", 4096)
    assert load_settings()[0] == new


def test_invalid_values_are_refused_with_a_sentence():
    with pytest.raises(BadInputError, match="theme must be one of system, light, dark"):
        update_settings(theme="neon")
    with pytest.raises(BadInputError, match="default_ctx"):
        save_settings(Settings(default_ctx=10))
    assert not settings_path().exists()  # nothing half-written


def test_malformed_json_gives_defaults_and_one_sentence():
    settings_path().write_text("{not json", encoding="utf-8")
    s, warning = load_settings()
    assert s == Settings()
    assert warning.startswith(f"Settings file {settings_path()} is not valid JSON (line 1)")
    assert warning.count(".") >= 1 and "\n" not in warning


def test_not_an_object():
    settings_path().write_text("[1, 2]", encoding="utf-8")
    s, warning = load_settings()
    assert s == Settings() and "does not hold a JSON object" in warning


def test_a_bad_field_falls_back_alone_and_unknown_keys_survive_a_save():
    settings_path().write_text(json.dumps({"theme": "neon", "default_ctx": 4096, "future_key": [1]}))
    s, warning = load_settings()
    assert s.theme == "system" and s.default_ctx == 4096
    assert warning == f"Settings file {settings_path()} has invalid theme; using the default value instead."
    save_settings(s)
    assert json.loads(settings_path().read_text())["future_key"] == [1]


def test_offline_mode_sets_and_clears_the_environment(monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    st.apply_offline(True)
    assert os.environ["HF_HUB_OFFLINE"] == "1" and constants.is_offline_mode()
    st.apply_offline(False)
    assert "HF_HUB_OFFLINE" not in os.environ and not constants.is_offline_mode()


def test_offline_set_outside_the_app_is_left_alone(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    st.apply_offline(False)
    assert os.environ["HF_HUB_OFFLINE"] == "1"


# -- the token: huggingface_hub's own files, isolated by the hub_server fixture -----------


def test_token_saved_unchecked_when_the_hub_cannot_confirm_it(hub_server):
    from huggingface_hub import constants, get_token

    assert st.hf_token_source() is None
    message = st.save_hf_token("  hf_abcdef123456  ")
    # the local Hub has no whoami endpoint: saved, and the sentence says it was not checked
    assert message.startswith("Token saved but not checked: the Hub answered 404")
    assert get_token() == "hf_abcdef123456"
    assert st.hf_token_source() == "login"
    assert oct(os.stat(constants.HF_TOKEN_PATH).st_mode & 0o777) == "0o600"
    assert "hf_abcdef123456" not in message


def test_token_saved_when_the_hub_is_unreachable(hub_server, monkeypatch):
    from huggingface_hub import get_token

    monkeypatch.setattr("huggingface_hub.hf_api.api.endpoint", "http://127.0.0.1:9")  # nothing listens
    message = st.save_hf_token("hf_offline_token")
    assert "could not be reached" in message
    assert get_token() == "hf_offline_token"


def test_remove_token(hub_server):
    from huggingface_hub import get_token

    st.save_hf_token("hf_to_remove")
    assert st.remove_hf_token() == "Token removed."
    assert get_token() is None
    assert st.remove_hf_token() == "No token was stored."


def test_environment_token_wins(hub_server, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_env")
    assert st.hf_token_source() == "environment"


@pytest.mark.parametrize("bad", ["", "   ", "hf abc"])
def test_bad_token_text(hub_server, bad):
    with pytest.raises(BadInputError):
        st.save_hf_token(bad)
