"""User settings: a small JSON file in the data dir, written atomically.

    settings, warning = load_settings()      # a malformed file -> defaults + one sentence
    save_settings(replace(settings, theme="dark"))

The Hugging Face token is NOT stored here: it lives in huggingface_hub's own token file
(`hf auth login` writes the same one), so the app, the command line and other tools share
it. save_hf_token / remove_hf_token / hf_token_source manage it and never log it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from rooflight.atomic import write_text_atomic
from rooflight.errors import BadInputError, OperationFailedError
from rooflight.store.paths import data_dir

FILE_NAME = "settings.json"
THEMES = ("system", "light", "dark")
MIN_CTX, MAX_CTX = 256, 1 << 20


@dataclass(frozen=True)
class Settings:
    models_dir: str = ""  # a folder of GGUF files to show as installed ("" = none chosen)
    offline: bool = False  # HF_HUB_OFFLINE: no network, answers from the cache
    default_ctx: int = 8192  # context that ranking and planning use (capped per model)
    theme: str = "system"  # system | light | dark
    probe_offered: bool = False  # the first start's "Measure this machine?" was shown (ui/probe_panel.py)
    # keys written by a newer version: kept so that saving does not drop them
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        return {**extra, **d}


def settings_path() -> Path:
    return data_dir() / FILE_NAME


def _check(name: str, value: Any) -> Any:
    """The value if valid for this field; else raise BadInputError naming the field."""
    if name == "models_dir":
        if not isinstance(value, str):
            raise BadInputError("models_dir must be a folder path")
        return value
    if name in ("offline", "probe_offered"):
        if not isinstance(value, bool):
            raise BadInputError(f"{name} must be true or false")
        return value
    if name == "default_ctx":
        if isinstance(value, bool) or not isinstance(value, int) or not MIN_CTX <= value <= MAX_CTX:
            raise BadInputError(f"default_ctx must be a whole number from {MIN_CTX} to {MAX_CTX}")
        return value
    if name == "theme":
        if value not in THEMES:
            raise BadInputError(f"theme must be one of {', '.join(THEMES)}")
        return value
    return value


def validated(settings: Settings) -> Settings:
    """The same settings, or BadInputError with one sentence for the first bad field."""
    for f in fields(Settings):
        if f.name != "extra":
            try:
                _check(f.name, getattr(settings, f.name))
            except BadInputError as exc:
                raise BadInputError(f"Setting not saved: {exc}.") from None
    return settings


def load_settings(path: Path | None = None) -> tuple[Settings, str | None]:
    """(settings, warning). A missing file gives the defaults silently; an unreadable or
    malformed one gives the defaults (field by field where possible) and one sentence."""
    path = path or settings_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Settings(), None
    except (OSError, UnicodeDecodeError) as exc:
        return Settings(), f"Settings file {path} could not be read ({exc}); using the defaults."
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return Settings(), (
            f"Settings file {path} is not valid JSON (line {exc.lineno}); using the defaults, "
            "and the next change you make replaces it."
        )
    if not isinstance(raw, dict):
        return Settings(), (
            f"Settings file {path} does not hold a JSON object; using the defaults, and the "
            "next change you make replaces it."
        )
    known = {f.name for f in fields(Settings)} - {"extra"}
    values: dict[str, Any] = {}
    bad: list[str] = []
    for name in known & raw.keys():
        try:
            values[name] = _check(name, raw[name])
        except BadInputError:
            bad.append(name)
    extra = {k: v for k, v in raw.items() if k not in known}
    settings = Settings(**values, extra=extra)
    warning = None
    if bad:
        warning = (
            f"Settings file {path} has invalid {', '.join(sorted(bad))}; using the default "
            f"{'value' if len(bad) == 1 else 'values'} instead."
        )
    return settings, warning


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write atomically (temp file, fsync, rename): a crash leaves the old file or the new."""
    validated(settings)
    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(settings.to_dict(), indent=2, sort_keys=True) + "\n"
    try:
        write_text_atomic(path, data)
    except OSError as exc:
        raise OperationFailedError(f"Could not save the settings to {path}: {exc.strerror or exc}.") from exc


def update_settings(path: Path | None = None, **changes: Any) -> Settings:
    """Load, change some fields, validate, save; returns the saved settings."""
    current, _ = load_settings(path)
    new = validated(replace(current, **changes))
    save_settings(new, path)
    return new


# -- applying settings to the process ------------------------------------------------

_OFFLINE_SET_BY_US = False


def apply_offline(offline: bool) -> None:
    """Make huggingface_hub (in this process and its children) work offline, or not.

    Sets HF_HUB_OFFLINE, and huggingface_hub's constant if it is already imported (it
    reads the variable once, at import). A variable the user set outside the app is left
    alone when offline mode is switched off here."""
    global _OFFLINE_SET_BY_US
    if offline:
        if os.environ.get("HF_HUB_OFFLINE") != "1":
            os.environ["HF_HUB_OFFLINE"] = "1"
            _OFFLINE_SET_BY_US = True
    elif _OFFLINE_SET_BY_US:
        os.environ.pop("HF_HUB_OFFLINE", None)
        _OFFLINE_SET_BY_US = False
    import sys

    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        value = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
        setattr(constants, "HF_HUB_OFFLINE", value)  # noqa: B010 - read at import, so set it


# -- the Hugging Face token (huggingface_hub's own storage) ---------------------------


def hf_token_source() -> str | None:
    """Where the token in use comes from: "environment" (HF_TOKEN), "login" (the token
    file `hf auth login` writes), or None. The token itself is never returned."""
    import huggingface_hub

    if huggingface_hub.get_token() is None:
        return None
    if os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN"):
        return "environment"  # huggingface_hub gives the environment precedence
    return "login"


def save_hf_token(token: str) -> str:
    """Store a token with huggingface_hub.login (checked against the Hub first).

    Returns one sentence saying what happened. If the Hub cannot be reached (offline, no
    network) the token is written to the same token file unchecked, and the sentence says
    so. A token the Hub rejects raises BadInputError and is not stored."""
    token = token.strip()
    if not token:
        raise BadInputError("The token is empty; paste a token from huggingface.co/settings/tokens.")
    if any(c.isspace() for c in token):
        raise BadInputError("A Hugging Face token has no spaces; paste it again.")
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError

    try:
        huggingface_hub.login(token=token, add_to_git_credential=False)
        return "Token saved and accepted by the Hugging Face Hub."
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise BadInputError(
                "The Hugging Face Hub rejected this token; create a new one at "
                "huggingface.co/settings/tokens and paste it again."
            ) from None
        reason = f"the Hub answered {status}" if status else "the Hub did not answer"
    except ValueError as exc:  # organisation tokens
        raise BadInputError(f"{str(exc).rstrip('.')}.") from None
    except Exception as exc:  # offline mode, DNS, refused connection, timeout
        reason = f"the Hub could not be reached ({type(exc).__name__})"
    _write_token_file(Path(constants.HF_TOKEN_PATH), token)
    return f"Token saved but not checked: {reason}; it is used for the next downloads."


def _write_token_file(path: Path, token: str) -> None:
    """The token file huggingface_hub reads (get_token), owner-only, written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_text_atomic(path, token)  # owner-only: the helper's files are 0600
    except OSError as exc:
        raise OperationFailedError(f"Could not save the token to {path}: {exc.strerror or exc}.") from exc


def remove_hf_token() -> str:
    """Log out (huggingface_hub.logout): the stored tokens are deleted."""
    import huggingface_hub
    from huggingface_hub.utils import get_stored_tokens

    if hf_token_source() is None and not get_stored_tokens():
        return "No token was stored."
    try:
        huggingface_hub.logout()
    except OSError:
        # logout raises when HF_TOKEN in the environment still logs the process in
        return "The stored token was removed, but HF_TOKEN is set in the environment and stays in use."
    return "Token removed."
