"""A cold start puts the ranking first: the tasks no first screen needs (the download list,
the llama.cpp build card, the token's source) wait until the first ranking is on screen,
and a download asked for before then is not lost."""

from __future__ import annotations

from rooflight.download import JobState
from rooflight.gguf.synthetic import write_model
from rooflight.store.settings import Settings
from rooflight.ui.context import AppContext
from rooflight.ui.window import MainWindow
from test_ui_support import cpu_box, wait_ranked


def _held_window(qtbot):
    ctx = AppContext(Settings())
    ctx.hold_startup_tasks()  # as app.main does
    window = MainWindow(ctx)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def test_held_tasks_start_once_the_first_ranking_is_shown(qtbot):
    window = _held_window(qtbot)
    downloads, machine, settings = (window.page(k) for k in ("downloads", "machine", "settings"))
    window.page("models").ranked.connect(window.ctx.startup_done)
    qtbot.wait(300)
    assert downloads.queue is None and downloads._opening is None  # held
    assert machine._build is None and settings.token_source is None
    window.ctx.machine.set_detected(cpu_box())
    wait_ranked(qtbot, window)
    qtbot.waitUntil(lambda: downloads.queue is not None and machine._build is not None, timeout=10000)
    window.ctx.after_startup(lambda: setattr(window, "_ran_now", True))  # after start-up: at once
    assert window._ran_now


def test_a_download_asked_for_before_start_up_opens_the_list_and_is_kept(qtbot, hub_server, tmp_path):
    src = write_model(tmp_path / "m.gguf", n_vocab=512, ftype="Q8_0")
    hub_server.add_file("someone/tiny-GGUF", "tiny-Q8_0.gguf", src)
    window = _held_window(qtbot)
    downloads = window.page("downloads")
    assert downloads.enqueue("someone/tiny-GGUF", "tiny-Q8_0.gguf") is None  # queued until open
    qtbot.waitUntil(lambda: downloads.queue is not None, timeout=10000)
    qtbot.waitUntil(lambda: any(j.filename == "tiny-Q8_0.gguf" and j.state == JobState.DONE
                                for j in downloads.jobs()), timeout=20000)
    window.ctx.startup_done()  # the gate opening later does not open the list twice
    assert downloads._opening is None
