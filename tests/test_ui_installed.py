"""Installed models in the app: the provider (catalog.local over the stores and the
models folder from Settings) marks catalog rows as on disk and turns Download into Chat."""

import pytest

from rooflight.catalog import find_model
from rooflight.gguf.synthetic import write_model
from rooflight.ui.app import build_window
from rooflight.ui.installed import installed_catalog_files
from test_ui_support import cpu_box, wait_idle, wait_ranked


@pytest.fixture
def empty_stores(tmp_path, monkeypatch):
    """No Hugging Face cache, LM Studio or Ollama models: only what a test puts in a folder."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("ROOFLIGHT_LMSTUDIO_DIRS", "")
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    monkeypatch.delenv("ROOFLIGHT_MODELS_DIRS", raising=False)
    monkeypatch.setattr("pathlib.Path.home", lambda: tmp_path / "home")
    folder = tmp_path / "models"
    folder.mkdir()
    return folder


def test_a_catalog_file_in_the_models_folder_counts_as_installed(empty_stores):
    model = find_model("llama-3.2-1b")
    repo, name = model.file_for("Q4_K_M")
    path = empty_stores / "llama" / name
    path.parent.mkdir()
    write_model(path, ftype="Q4_K_M")
    assert installed_catalog_files("") == {}
    found = installed_catalog_files(str(empty_stores))
    assert found[(repo, name)] == str(path)
    # every source that publishes the same file name points at it
    assert {k for k in found} == {(s.repo, s.files["Q4_K_M"]) for s in model.gguf if "Q4_K_M" in s.files}


def test_the_window_marks_it_after_the_folder_is_chosen(qtbot, empty_stores):
    model = find_model("qwen3-0.6b")
    repo, name = model.file_for(model.quants[0])
    write_model(empty_stores / name, ftype=model.quants[0])
    window = build_window()
    qtbot.addWidget(window)
    window.ctx.machine.set_detected(cpu_box())
    page = wait_ranked(qtbot, window)
    wait_idle(qtbot, window)
    assert not window.ctx.installed.files
    window.ctx.update_settings(models_dir=str(empty_stores))
    qtbot.waitUntil(lambda: (repo, name) in window.ctx.installed.files, timeout=10000)
    page.installed_only.setChecked(True)
    assert [r.model.id for r in page.visible_rows()] == [model.id]
    page.select_model(model.id)
    (button,) = page.detail.quant_buttons(model.quants[0])
    assert button.accessibleName() == f"Chat with {model.quants[0]}"
