"""The Settings page: each change saved at once and read back by the next start; the
theme follows the choice; the token goes to huggingface_hub's storage in a worker."""

import os

from PySide6.QtWidgets import QApplication

from rooflight.store.settings import load_settings, settings_path
from rooflight.ui import theme
from test_ui_support import make_window, wait_idle


def test_changes_persist_across_starts(qtbot, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    window = make_window(qtbot)
    page = window.page("settings")
    page.default_ctx.setCurrentIndex(page.default_ctx.findData(16384))
    page.theme.setCurrentIndex(page.theme.findData("dark"))
    page.models_dir.setText(str(tmp_path))
    page.models_dir.editingFinished.emit()
    page.offline.setChecked(True)
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    saved, warning = load_settings()
    assert warning is None
    assert (saved.default_ctx, saved.theme, saved.models_dir, saved.offline) == (16384, "dark", str(tmp_path), True)
    assert theme.current() is theme.DARK
    assert QApplication.instance().palette().window().color().name() == theme.DARK.window
    page.offline.setChecked(False)
    assert "HF_HUB_OFFLINE" not in os.environ
    window.close()

    # the next start reads them back
    again = make_window(qtbot, settings=load_settings()[0])
    p2 = again.page("settings")
    assert p2.default_ctx.currentData() == 16384 and p2.theme.currentData() == "dark"
    assert p2.models_dir.text() == str(tmp_path)
    assert again.page("models").n_ctx == 16384
    again.ctx.update_settings(theme="light")
    assert theme.current() is theme.LIGHT


def test_a_folder_that_does_not_exist_is_refused(qtbot, tmp_path):
    window = make_window(qtbot)
    page = window.page("settings")
    page.models_dir.setText(str(tmp_path / "nope"))
    page.models_dir.editingFinished.emit()
    assert window.banners.texts() == [f"The folder {tmp_path / 'nope'} does not exist; choose an existing folder."]
    assert page.models_dir.text() == ""
    assert not settings_path().exists()


def test_a_malformed_settings_file_warns_once(qtbot):
    from rooflight.ui.app import build_window

    settings_path().write_text("{oops", encoding="utf-8")
    window = build_window()
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: bool(window.banners.texts()))
    (text,) = window.banners.texts()
    assert text.startswith(f"Settings file {settings_path()} is not valid JSON")
    assert window.banners.notes()[0].kind == "warning"


def test_token_is_saved_in_a_worker_and_never_shown(qtbot, hub_server):
    from huggingface_hub import get_token

    window = make_window(qtbot)
    page = window.page("settings")
    wait_idle(qtbot, window)
    assert page.token_status.text().startswith("No token")
    assert not page.remove_token.isEnabled()
    page.token.setText("hf_secret_value_123")
    page.save_token.click()
    qtbot.waitUntil(lambda: page.token_source == "login", timeout=10000)
    assert get_token() == "hf_secret_value_123"
    assert page.token.text() == ""  # the field is cleared
    assert page.remove_token.isEnabled()
    assert all("hf_secret_value_123" not in t for t in window.banners.texts())
    assert window.banners.texts()[0].startswith("Token saved but not checked")
    page.remove_token.click()
    qtbot.waitUntil(lambda: page.token_source is None, timeout=10000)
    assert get_token() is None


def test_system_theme_is_followed_live(qtbot, monkeypatch):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication

    window = make_window(qtbot)
    app = QApplication.instance()
    applied = []
    follower = theme.SystemThemeFollower(app, lambda: window.ctx.settings.theme, applied.append)
    try:
        # the desktop turns dark (offscreen Qt cannot switch, so the hint is stood in for)
        monkeypatch.setattr(theme, "system_is_dark", lambda: True)
        QGuiApplication.styleHints().colorSchemeChanged.emit(Qt.ColorScheme.Dark)
        assert applied == [theme.DARK] and theme.current() is theme.DARK
        # an explicit choice is not overridden
        window.ctx.update_settings(theme="light")
        QGuiApplication.styleHints().colorSchemeChanged.emit(Qt.ColorScheme.Dark)
        assert applied == [theme.DARK] and theme.current() is theme.LIGHT
    finally:
        follower.deleteLater()
        theme.apply(app, "light")
