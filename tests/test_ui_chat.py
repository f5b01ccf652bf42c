"""The Chat page over real llama.cpp: a generated tiny model streaming and stopping within
one token (Stop and Esc), a real Gemma-3-270M reply with its measured speed beside the
prediction, regenerate, edit-and-resend, the stored conversations (rename, delete,
export), the guardrail's refusal with "Load anyway", the event loop while loading and
generating, and closing the window mid-reply."""

import json
import time

import pytest
from PySide6.QtCore import Qt

from gemma_model import gemma_270m_path
from rooflight.gguf.synthetic import write_model
from rooflight.runtime.loader import refusal
from rooflight.store.chats import ChatStore
from rooflight.ui.chat_load import FORCE_HINT
from rooflight.ui.chat_view import FLUSH_HZ
from test_ui_support import CPU, GiB, LoopLatency, cpu_box, make_window, profile, wait_ranked

pytest.importorskip("llama_cpp")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random-weight llama: fast, and it never stops by itself (no EOS in its vocab)."""
    return write_model(tmp_path_factory.mktemp("chatmodel") / "tiny-chat.gguf", n_layer=2, n_embd=64,
                       n_vocab=800, context_length=4096)


def planned(qtbot, page, path):
    page.chat_with(str(path))
    qtbot.waitUntil(lambda: page.load_panel.lp is not None and page.load_panel._task is None, timeout=30000)
    return page.load_panel.lp


def loaded(qtbot, window, path, *, max_tokens=None, temperature=None, seed=None):
    page = window.page("chat")
    planned(qtbot, page, path)
    qtbot.mouseClick(page.load_panel.load_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.session is not None, timeout=60000)
    if max_tokens is not None:
        page.sampling.max_tokens.setValue(max_tokens)
    if temperature is not None:
        page.sampling.temperature.setValue(temperature)
    if seed is not None:
        page.sampling.seed.setValue(seed)
    return page


def reply_done(qtbot, page, timeout=60000):
    qtbot.waitUntil(lambda: not page.generating, timeout=timeout)
    return page.last_reply


def test_models_chat_button_selects_the_model_and_fields_replan(qtbot, tiny):
    window = make_window(qtbot, cpu_box())
    page = window.page("chat")
    ctx = window.ctx
    assert ctx.actions.can_chat  # the Models page's Chat buttons are live
    ctx.installed.add("someone/tiny-GGUF", "tiny-chat.gguf", str(tiny))
    assert page.load_panel.model.findData(str(tiny)) >= 0  # installed files are offered
    assert ctx.actions.request_chat(str(tiny))
    assert window.current_page() is page
    qtbot.waitUntil(lambda: page.load_panel.lp is not None, timeout=30000)
    lp = page.load_panel.lp
    assert page.load_panel.path == str(tiny)
    assert lp.config.n_ctx == 4096  # the default 8K, capped at the model's context
    assert page.load_panel.n_ctx.value() == 4096 and page.load_panel.threads.value() == lp.config.n_threads
    assert not page.load_panel.gpu_layers.isEnabled()  # a CPU machine
    assert "4096-token context" in page.load_panel.estimate.text()
    assert "predicted" in page.load_panel.estimate.text()
    before = lp.estimate.memory.device("cpu").kv_bytes
    page.load_panel.n_ctx.setValue(1024)
    qtbot.waitUntil(lambda: page.load_panel.lp.config.n_ctx == 1024, timeout=10000)
    assert page.load_panel.lp.estimate.memory.device("cpu").kv_bytes < before
    assert "1024-token context" in page.load_panel.estimate.text()
    assert page.load_panel.load_button.isEnabled() and page.load_panel.refusal_row.isHidden()


def test_tokens_stream_into_the_view_and_stop_within_one_token(qtbot, tiny):
    window = make_window(qtbot, cpu_box())
    wait_ranked(qtbot, window)
    latency = LoopLatency().start()  # loading, streaming, stopping, regenerating
    page = loaded(qtbot, window, tiny, max_tokens=3000)
    assert page.status.text().startswith("synthetic-llama-F16 (F16) · CPU · 4096-token context")
    page.composer.setFocus()
    qtbot.keyClicks(page.composer, "hello")
    qtbot.keyClick(page.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(page.composer, "there")
    assert page.composer.toPlainText() == "hello\nthere"  # Shift+Enter: a new line, not sent
    started = time.perf_counter()
    qtbot.keyClick(page.composer, Qt.Key.Key_Return)  # Enter sends
    assert page.generating and page.composer.toPlainText() == ""
    assert [w.role for w in page.view.messages] == ["user", "assistant"]
    assert page.view.messages[0].text == "hello\nthere"
    assert page.stop_button.isVisible() and not page.send_button.isVisible()
    qtbot.waitUntil(lambda: page.view.renders >= 10 and len(page.view.streaming.text) > 20, timeout=30000)
    elapsed, renders = time.perf_counter() - started, page.view.renders
    shown = page.view.streaming.text
    qtbot.keyClick(page.composer, Qt.Key.Key_Escape)  # Esc stops
    reply = reply_done(qtbot, page)
    engine = page.engine
    assert reply.stats.stop_reason == "stopped"
    # the loop checks the stop flag before every decode step: at most the token being
    # evaluated when Esc was pressed follows it
    assert page.stop_tokens is not None and engine.llm.n_tokens - page.stop_tokens <= 1
    assert reply.stats.generated_tokens < 3000
    assert reply.text.startswith(shown.rstrip())  # what streamed is what was kept
    assert page.view.messages[-1].text == reply.text
    assert "stopped by you" in page.view.messages[-1].stats.text()
    # renders are batched: at most ~30 layouts a second, however fast the tokens come
    assert renders <= elapsed * FLUSH_HZ + 2, f"{renders} renders in {elapsed:.2f} s"
    print(f"{reply.stats.generated_tokens} tokens streamed in {renders} renders over {elapsed:.2f} s; "
          f"{engine.llm.n_tokens - page.stop_tokens} token(s) after Stop")

    # the Stop button does the same, on a regenerated reply
    page.regenerate()
    qtbot.waitUntil(lambda: page.view.renders >= renders + 3, timeout=30000)
    qtbot.mouseClick(page.stop_button, Qt.MouseButton.LeftButton)
    again = reply_done(qtbot, page)
    assert again.stats.stop_reason == "stopped" and engine.llm.n_tokens - page.stop_tokens <= 1
    worst = latency.stop()
    assert worst < 0.100, f"the GUI thread stalled for {worst * 1000:.0f} ms while streaming"
    assert [w.role for w in page.view.messages] == ["user", "assistant"]
    stored = ChatStore().messages(page.chat_id)
    assert [(m.role, m.complete) for m in stored] == [("user", True), ("assistant", True)]
    assert stored[1].content == again.text and stored[1].stats["stop_reason"] == "stopped"


def test_gemma_replies_with_stats_and_the_event_loop_never_stalls(qtbot):
    window = make_window(qtbot, cpu_box())
    wait_ranked(qtbot, window)  # the Models page's start-up work is measured in test_ui_window
    window.show_page("chat")
    page = window.page("chat")
    qtbot.waitUntil(page.isVisible)
    latency = LoopLatency().start()  # from here: planning, loading, two replies
    planned(qtbot, page, gemma_270m_path())
    page.load_panel.n_ctx.setValue(2048)
    qtbot.waitUntil(lambda: page.load_panel.lp.config.n_ctx == 2048 and page.load_panel._task is None,
                    timeout=10000)
    progress = []
    page.load_panel.progress.valueChanged.connect(progress.append)
    page.load(page.load_panel.lp)
    assert page.load_panel.progress_row.isVisible() and page.monitor.running
    qtbot.waitUntil(lambda: page.session is not None, timeout=60000)
    assert progress and max(progress) == 1000  # llama.cpp's load progress reached the bar
    page.sampling.temperature.setValue(0.0)  # greedy: the answer is reproducible
    page.sampling.max_tokens.setValue(48)
    page.composer.setPlainText("What is the capital of France?")
    page.send()
    reply = reply_done(qtbot, page)
    # a second turn reuses the first from the KV cache
    page.composer.setPlainText("And what is the capital of Germany?")
    page.send()
    second = reply_done(qtbot, page)
    worst = latency.stop()
    print(f"worst event-loop lateness {worst * 1000:.0f} ms over {latency.ticks} ticks "
          f"while loading Gemma-3-270M and generating two replies")
    assert worst < 0.100, f"the GUI thread stalled for {worst * 1000:.0f} ms"

    assert "Paris" in reply.text
    w = page.view.messages[1]
    assert w.text == reply.text and "Paris" in w.body.toPlainText()
    st = reply.stats
    assert st.time_to_first_token_s > 0 and st.prefill_tok_s > 0 and st.decode_tok_s > 0
    line = w.stats.text()
    assert line.startswith("first token ") and "prefill " in line and "decode " in line
    assert line.count("predicted") == 3 and f"{st.generated_tokens} tokens" in line
    assert second.stats.cached_tokens > 0 and "prompt tokens reused" in page.view.messages[3].stats.text()
    # the engine's measured rates reach the live monitor
    qtbot.waitUntil(lambda: any(s.decode_tok_s for s in page.monitor.samples()), timeout=5000)
    assert page.monitor_panel.samples_drawn > 0
    stored = ChatStore().messages(page.chat_id)
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[1].stats["decode_tok_s"] == pytest.approx(st.decode_tok_s, rel=1e-3)
    assert page.chat_list.count() == 1 and page.chat_list.item(0).text() == "What is the capital of France?"


def test_a_load_can_be_cancelled(qtbot):
    window = make_window(qtbot, cpu_box())
    page = window.page("chat")
    lp = planned(qtbot, page, gemma_270m_path())
    page.load(lp)
    assert page.loading and page.load_panel.cancel_button.isVisible()
    assert not page.load_panel.load_button.isEnabled() and not page.composer.isEnabled()
    qtbot.mouseClick(page.load_panel.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not page.loading, timeout=30000)
    assert page.engine is None and page.session is None
    assert all(e.closed for e in page._load_holder)  # nothing stays loaded
    assert page.load_panel.progress_row.isHidden() and window.banners.texts() == []
    assert page.load_panel.load_button.isEnabled() and not page.monitor.running


def test_regenerate_and_edit_and_resend(qtbot, tiny):
    window = make_window(qtbot, cpu_box())
    page = loaded(qtbot, window, tiny, max_tokens=12)
    for text in ("first question", "second question"):
        page.composer.setPlainText(text)
        page.send()
        reply_done(qtbot, page)
    store = ChatStore()
    before = store.messages(page.chat_id)
    assert [m.role for m in before] == ["user", "assistant", "user", "assistant"]

    assert page.regen_button.isEnabled()
    qtbot.mouseClick(page.regen_button, Qt.MouseButton.LeftButton)
    again = reply_done(qtbot, page)
    after = store.messages(page.chat_id)
    assert [m.id for m in after[:3]] == [m.id for m in before[:3]]  # the conversation up to it stays
    # a new reply row (SQLite may reuse the deleted row's id: compare when it was written)
    assert after[3].created_at > before[3].created_at and after[3].content == again.text
    assert len(page.view.messages) == 4 and page.view.messages[3].text == again.text

    # edit the first question: it changes, and everything after it is replaced
    qtbot.mouseClick(page.view.messages[0].edit_button, Qt.MouseButton.LeftButton)
    assert page.composer.toPlainText() == "first question" and page.edit_note.isVisible()
    page.composer.setPlainText("an edited question")
    qtbot.keyClick(page.composer, Qt.Key.Key_Return)
    edited = reply_done(qtbot, page)
    assert page.edit_note.isHidden()
    assert page.view.texts() == [("user", "an edited question"), ("assistant", edited.text)]
    stored = store.messages(page.chat_id)
    assert [(m.role, m.content) for m in stored] == [("user", "an edited question"), ("assistant", edited.text)]
    assert stored[0].id == before[0].id

    # Esc leaves an edit without sending
    page.edit_message(0)
    qtbot.keyClick(page.composer, Qt.Key.Key_Escape)
    assert page.edit_note.isHidden() and page.composer.toPlainText() == ""


def test_conversations_rename_delete_export(qtbot, tiny, tmp_path):
    window = make_window(qtbot, cpu_box())
    page = loaded(qtbot, window, tiny, max_tokens=8)
    page.composer.setPlainText("Chat **one**\n\n```python\nprint('x')\n```")
    page.send()
    one = reply_done(qtbot, page)
    first_id = page.chat_id
    qtbot.mouseClick(page.new_button, Qt.MouseButton.LeftButton)
    assert page.view.messages == [] and page.chat_id is None
    page.composer.setPlainText("chat two")
    page.send()
    reply_done(qtbot, page)
    second_id = page.chat_id
    assert page.chat_ids() == [second_id, first_id]  # newest first
    # the first message is Markdown: its code block is a styled block of its own
    page.show_chat(first_id)
    body = page.view.messages[0].body
    assert "print('x')" in body.toPlainText() and "**" not in body.toPlainText()

    page.rename_chat(second_id, "  Renamed   chat ")
    assert page.chat_list.item(0).text() == "Renamed chat"

    md, js = tmp_path / "one.md", tmp_path / "one.json"
    for path, fmt in ((md, "markdown"), (js, "json")):
        task = page.export_chat(first_id, str(path), fmt)
        qtbot.waitUntil(lambda t=task: t.finished, timeout=10000)
    text = md.read_text(encoding="utf-8")
    assert text.startswith("# Chat **one**") and "```python\nprint('x')\n```" in text
    doc = json.loads(js.read_text(encoding="utf-8"))
    assert doc["format"] == "rooflight-chat"
    assert [m["content"] for m in doc["messages"]] == ["Chat **one**\n\n```python\nprint('x')\n```", one.text]
    qtbot.waitUntil(lambda: "Chat exported to" in " ".join(window.banners.texts()), timeout=5000)

    page.delete_chat(first_id, confirm=False)
    assert page.chat_ids() == [second_id] and page.view.messages == []
    assert [c.id for c in ChatStore().list_chats()] == [second_id]

    # without a model the stored chat is still readable
    page.show_chat(second_id)
    page.unload()
    assert page.engine is None and page.view.texts()[0] == ("user", "chat two")
    assert not page.send_button.isEnabled() and not page.composer.isEnabled()


def test_guardrail_refusal_and_load_anyway(qtbot, tiny):
    small = profile(cpu={**CPU, "ram_total_bytes": GiB // 4, "ram_available_bytes": 8 << 20})
    window = make_window(qtbot, small)
    page = window.page("chat")
    lp = planned(qtbot, page, tiny)
    panel = page.load_panel
    assert lp.estimate.fit == "too_large"
    assert panel.refusal_row.isVisible()
    assert panel.refusal_note.text.text() == refusal(lp, force_hint=FORCE_HINT)
    assert "does not fit" in panel.refusal_note.text.text()
    assert panel.refusal_note.text.text().endswith("(or choose Load anyway).")
    assert not panel.load_button.isEnabled() and panel.force_button.isEnabled()
    assert panel.badge.fit == "too_large"
    qtbot.mouseClick(panel.force_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.session is not None, timeout=60000)
    assert page.engine.config == lp.config and panel.refusal_row.isHidden()


def test_closing_mid_reply_stops_it_and_the_chat_is_there_next_start(qtbot, tiny):
    window = make_window(qtbot, cpu_box())
    page = loaded(qtbot, window, tiny, max_tokens=3000)
    page.composer.setPlainText("a long reply please")
    page.send()
    qtbot.waitUntil(lambda: page.view.renders >= 3, timeout=30000)
    chat_id = page.session.chat_id
    engine = page.engine
    started = time.perf_counter()
    window.close()
    closed_in = time.perf_counter() - started
    assert engine.closed and page.store is None
    assert closed_in < 3.0, f"closing took {closed_in:.2f} s"
    stored = ChatStore().messages(chat_id)
    assert [(m.role, m.complete) for m in stored] == [("user", True), ("assistant", True)]
    assert stored[1].stats["stop_reason"] == "stopped" and stored[1].content

    again = make_window(qtbot, cpu_box())
    chat = again.page("chat")
    assert chat.chat_ids() == [chat_id] and chat.chat_id == chat_id  # the last chat is shown again
    assert chat.view.texts() == [("user", "a long reply please"), ("assistant", stored[1].content)]
    assert chat.load_panel.path == str(tiny)  # and its model is selected, ready to load


def test_pyside_reference_leaks_cannot_abort_the_app(qtbot):
    """PySide6 6.12 on Python 3.11 takes a reference to None per void call and to True per
    emit: without rooflight.ui's guard this loop aborts the process (none_dealloc)."""
    import sys

    from PySide6.QtCore import QObject, Signal
    from PySide6.QtWidgets import QLabel

    from rooflight.ui.refcount_guard import leaking

    class Pinger(QObject):
        ping = Signal()

    label, pinger = QLabel(), Pinger()
    for _ in range(20000):
        label.setText("x")
        pinger.ping.emit()
    if leaking():  # the bug is there: the guard made None, True and False immortal
        assert min(sys.getrefcount(o) for o in (None, True, False)) > 1 << 59


def test_a_stored_chat_brings_its_own_model_or_says_which_one_continues(qtbot, tiny, tmp_path):
    other = write_model(tmp_path / "other-chat.gguf", n_layer=2, n_embd=64, n_vocab=800, context_length=4096)
    with ChatStore() as store:
        made_with_other = store.create_chat("about the other model", str(other))
        store.add_message(made_with_other, "user", "hello")
    window = make_window(qtbot, cpu_box())
    page = window.page("chat")
    page.refresh_chats()
    # nothing loaded: showing the chat selects and plans the model it was made with
    page.show_chat(made_with_other)
    qtbot.waitUntil(lambda: page.load_panel.path == str(other), timeout=10000)
    # with another model loaded the chat continues with it, and a banner says so
    page = loaded(qtbot, window, tiny)
    page.show_chat(made_with_other)
    assert any(t.startswith("This chat was started with other-chat.gguf; it continues with the loaded "
                            "tiny-chat.gguf") for t in window.banners.texts())
    assert page.view.texts()[0] == ("user", "hello")
