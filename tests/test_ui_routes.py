"""Pages asking each other for things, end to end over real core objects: one click on the
top pick downloads it from the local Hub and opens the Chat page with it planned; the
model detail's Chat loads exactly the plan it showed (context, GPU layers, KV cache, flash
attention, threads, batch sizes); the default context of Settings re-plans the Models
detail and the Chat page's plan not loaded yet."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from rooflight.catalog import find_model
from rooflight.estimate import Wishes
from rooflight.gguf.synthetic import write_model
from test_ui_support import cpu_box, make_window, wait_idle, wait_ranked

pytest.importorskip("llama_cpp")

MODEL_ID = "qwen3-0.6b"
QUANT = "Q8_0"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("routes") / "tiny-route.gguf", n_vocab=512, ftype="Q8_0",
                       context_length=4096)


def planned(qtbot, chat, path: str):
    """The Chat page once `path` is selected and its plan has landed."""
    qtbot.waitUntil(lambda: chat.load_panel.path == path and chat.load_panel.lp is not None
                    and chat.load_panel._task is None, timeout=20000)
    return chat.load_panel.lp


def test_top_pick_download_opens_the_chat_with_its_plan(qtbot, hub_server, tiny):
    window = make_window(qtbot, cpu_box())
    models = wait_ranked(qtbot, window)
    downloads = window.page("downloads")
    qtbot.waitUntil(lambda: downloads.queue is not None, timeout=10000)
    pick = models._pick
    repo, file = pick.model.file_for(pick.best.quant)
    hub_server.add_file(repo, file, tiny)  # the generated model stands in for the pick's file
    assert downloads.chat_when_done.isChecked()  # the default
    assert models.pick_download.text() == "Download"

    qtbot.mouseClick(models.pick_download, Qt.MouseButton.LeftButton)  # the one click
    assert window.current_page() is downloads
    chat = window.page("chat")
    qtbot.waitUntil(lambda: window.current_page() is chat, timeout=20000)
    path = downloads.row_for(file).job.result.model.path
    lp = planned(qtbot, chat, path)
    panel = chat.load_panel
    assert str(lp.path) == path and panel.model.currentData() == path
    assert lp.config.n_ctx == 4096  # the default 8K, capped at the file's context
    assert panel.n_ctx.value() == 4096 and panel.threads.value() == lp.config.n_threads
    assert panel.badge.isVisible() and "4096-token context" in panel.estimate.text()
    assert "predicted" in panel.estimate.text()
    assert panel.load_button.isEnabled()
    # and the top pick now offers a chat with what is on disk
    assert models.pick_download.text() == "Chat"
    wait_idle(qtbot, window)


def test_detail_chat_loads_the_plan_it_showed(qtbot, tiny):
    window = make_window(qtbot, cpu_box())
    models = wait_ranked(qtbot, window)
    repo, file = find_model(MODEL_ID).file_for(QUANT)
    window.ctx.installed.add(repo, file, str(tiny))
    assert models.select_model(MODEL_ID)
    detail = models.detail
    qtbot.waitUntil(lambda: detail.estimate is not None)
    # the advisor's kind of settings, as "Use these settings" puts them into the plan
    tuning = Wishes(kv_type="q8_0", flash_attn="on", n_threads=3, n_batch=256, n_ubatch=128)
    with qtbot.waitSignal(detail.replanned, timeout=10000):
        detail.apply_settings(QUANT, 2048, tuning)
    qtbot.waitUntil(lambda: detail.current is not None and detail.current.quant == QUANT
                    and detail.estimate.config.n_ctx == 2048)
    shown = detail.estimate.config
    (button,) = detail.quant_buttons(QUANT)
    assert button.accessibleName() == f"Chat with {QUANT}"

    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    chat = window.page("chat")
    assert window.current_page() is chat
    lp = planned(qtbot, chat, str(tiny))
    cfg, panel = lp.config, chat.load_panel
    # the settings the detail's plan was made with, in the plan and in the editable fields
    for name in ("n_ctx", "kv_type", "flash_attn", "n_threads", "n_batch", "n_ubatch", "n_gpu_layers"):
        assert getattr(cfg, name) == getattr(shown, name), name
    assert lp.wishes.n_ubatch == 128 and lp.wishes.flash_attn == "on"
    assert panel.n_ctx.value() == 2048 and panel.threads.value() == 3
    assert panel.kv_type.currentData() == "q8_0" and panel.flash.currentData() == "on"
    assert panel.batch.value() == 256 and panel.gpu_layers.value() == -1  # auto, as in the detail
    # a field changed by hand re-plans with the rest kept (the micro-batch has no field)
    panel.n_ctx.setValue(1024)
    qtbot.waitUntil(lambda: panel.lp.config.n_ctx == 1024 and panel._task is None, timeout=10000)
    assert panel.lp.config.n_ubatch == 128 and panel.lp.config.kv_type == "q8_0"
    assert panel.lp.config.n_threads == 3
    wait_idle(qtbot, window)
    # from a what-if machine the GPU-layer count means nothing here: the chat chooses its own
    from rooflight.ui.whatif import WhatIf

    window.ctx.machine.set_what_if(WhatIf(gpu="NVIDIA GeForce RTX 3060"))
    qtbot.waitUntil(lambda: models._rank_task is None and detail.estimate is not None, timeout=20000)
    wait_idle(qtbot, window)
    detail.set_gpu_layers(10)
    qtbot.waitUntil(lambda: detail.estimate.config.n_gpu_layers == 10, timeout=10000)
    assert detail.wishes.n_gpu_layers == 10 and detail.chat_wishes().n_gpu_layers == "auto"
    assert detail.chat_wishes().kv_type == "q8_0"  # the rest is kept
    wait_idle(qtbot, window)


def test_default_context_replans_the_detail_and_the_chat_plan(qtbot, tiny):
    window = make_window(qtbot, cpu_box())
    models = wait_ranked(qtbot, window)
    ctx = window.ctx
    assert models.select_model(MODEL_ID)
    detail = models.detail
    qtbot.waitUntil(lambda: detail.estimate is not None)
    assert detail.n_ctx == 8192

    chat = window.page("chat")
    assert ctx.actions.request_chat(str(tiny))  # planned at the default context, not loaded
    lp = planned(qtbot, chat, str(tiny))
    assert lp.config.n_ctx == 4096  # 8K capped at the file's 4K

    ctx.update_settings(default_ctx=2048)
    qtbot.waitUntil(lambda: detail.estimate is not None and detail.n_ctx == 2048
                    and detail.estimate.config.n_ctx == 2048, timeout=20000)
    assert models.n_ctx == 2048
    qtbot.waitUntil(lambda: chat.load_panel.lp.config.n_ctx == 2048 and chat.load_panel._task is None,
                    timeout=10000)
    assert chat.load_panel.n_ctx.value() == 2048
    assert "2048-token context" in chat.load_panel.estimate.text()

    # a context chosen by hand is the user's: a new default leaves it alone
    chat.load_panel.n_ctx.setValue(1024)
    qtbot.waitUntil(lambda: chat.load_panel.lp.config.n_ctx == 1024 and chat.load_panel._task is None,
                    timeout=10000)
    ctx.update_settings(default_ctx=16384)
    qtbot.waitUntil(lambda: detail.estimate is not None and detail.n_ctx == 16384
                    and detail.estimate.config.n_ctx == 16384, timeout=20000)
    wait_idle(qtbot, window)
    assert chat.load_panel.lp.config.n_ctx == 1024
    # another machine (what if) keeps the detail's context: only a new context moves it
    detail.set_context(4096)
    qtbot.waitUntil(lambda: detail.estimate is not None and detail.estimate.config.n_ctx == 4096)
    from rooflight.ui.whatif import WhatIf

    ctx.machine.set_what_if(WhatIf(gpu="NVIDIA GeForce RTX 3060"))
    qtbot.waitUntil(lambda: models._rank_task is None and detail.estimate is not None, timeout=20000)
    wait_idle(qtbot, window)
    assert detail.n_ctx == 4096
