"""Chat history store: CRUD, exports, ordering, threads, and what survives a SIGKILL."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from rooflight.errors import BadInputError, OperationFailedError
from rooflight.store.chats import ChatStore, ChatStoreCorruptError
from rooflight.store.paths import data_dir


@pytest.fixture
def store(tmp_path):
    with ChatStore(tmp_path / "chats.sqlite3") as s:
        yield s


def test_default_location_is_the_data_dir_in_wal_mode():
    with ChatStore() as s:
        assert s.path.parent == data_dir()
        s.create_chat("t", "m")
    db = sqlite3.connect(s.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(1,)]
    db.close()


def test_a_data_folder_that_is_a_file_is_one_sentence(tmp_path, monkeypatch):
    taken = tmp_path / "taken"
    taken.write_text("someone's notes")
    monkeypatch.setenv("ROOFLIGHT_DATA_DIR", str(taken))
    with pytest.raises(BadInputError) as err:
        data_dir()
    message = str(err.value)
    assert "ROOFLIGHT_DATA_DIR" in message and "is a file, not a folder" in message
    assert message.count(". ") == 0 and message.endswith(".")
    assert taken.read_text() == "someone's notes"  # nothing of it lost


def test_create_get_rename_delete(store):
    cid = store.create_chat("First", "gemma-3-270m", system_prompt="Be brief.", settings={"temperature": 0.7})
    chat = store.get_chat(cid)
    assert (chat.title, chat.model, chat.system_prompt, chat.settings, chat.n_messages) == (
        "First", "gemma-3-270m", "Be brief.", {"temperature": 0.7}, 0)
    store.rename_chat(cid, "Renamed")
    store.set_system_prompt(cid, "Be thorough.")
    store.set_settings(cid, {"temperature": 0.2, "seed": 7})
    chat = store.get_chat(cid)
    assert (chat.title, chat.system_prompt, chat.settings) == ("Renamed", "Be thorough.", {"temperature": 0.2, "seed": 7})
    store.add_message(cid, "user", "hi")
    store.delete_chat(cid)
    assert store.list_chats() == []
    # messages went with the chat (foreign key cascade)
    assert store._read("SELECT count(*) FROM messages") == [(0,)]


def test_messages_stream_finish_and_stats(store):
    cid = store.create_chat("c", "m")
    u = store.add_message(cid, "user", "Write a loop.")
    a = store.add_message(cid, "assistant", "")
    assert store.messages(cid)[-1].complete is False  # an empty reply is a placeholder
    for piece in ["Here", " you", " go"]:
        store.append_to_message(a, piece)
    msgs = store.messages(cid)
    assert [m.id for m in msgs] == [u, a]
    assert msgs[1].content == "Here you go" and msgs[1].complete is False and msgs[1].stats is None
    stats = {"ttft_s": 0.12, "prefill_tok_s": 250.0, "decode_tok_s": 31.5, "predicted_decode_tok_s": 30.0}
    store.finish_message(a, stats)
    m = store.messages(cid)[1]
    assert m.complete is True and m.stats == stats and m.role == "assistant"
    store.update_message(u, "Write a while loop.")
    assert store.messages(cid)[0].content == "Write a while loop."
    assert store.get_chat(cid).n_messages == 2


def test_delete_messages_after_for_regenerate(store):
    cid = store.create_chat("c", "m")
    other = store.create_chat("o", "m")
    ids = [store.add_message(cid, r, t) for r, t in
           [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2")]]
    keep = store.add_message(other, "user", "elsewhere")
    assert store.delete_messages_after(cid, ids[2]) == 1
    assert [m.content for m in store.messages(cid)] == ["q1", "a1", "q2"]
    assert [m.id for m in store.messages(other)] == [keep]
    with pytest.raises(BadInputError, match="not part of chat"):
        store.delete_messages_after(other, ids[0])


def test_unknown_ids_and_roles_are_one_sentence_errors(store):
    cid = store.create_chat("c", "m")
    for call in (lambda: store.get_chat(999), lambda: store.rename_chat(999, "x"),
                 lambda: store.delete_chat(999), lambda: store.messages(999),
                 lambda: store.add_message(999, "user", "x"), lambda: store.append_to_message(999, "x"),
                 lambda: store.finish_message(999), lambda: store.update_message(999, "x"),
                 lambda: store.set_system_prompt(999, "x")):
        with pytest.raises(BadInputError) as info:
            call()
        assert "999" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(BadInputError, match="role"):
        store.add_message(cid, "tool", "x")


def test_list_is_most_recent_first(store):
    a = store.create_chat("a", "m")
    time.sleep(0.01)
    b = store.create_chat("b", "m")
    time.sleep(0.01)
    c = store.create_chat("c", "m")
    assert [s.id for s in store.list_chats()] == [c, b, a]
    time.sleep(0.01)
    store.add_message(a, "user", "back to a")  # activity moves a chat to the top
    chats = store.list_chats()
    assert [s.id for s in chats] == [a, c, b]
    assert chats[0].n_messages == 1 and chats[0].updated_at > chats[0].created_at


FENCED = "Sure:\n\n```python\nfor i in range(3):\n    print(i)  # *not* emphasis\n```\n\nDone."


def test_export_markdown_keeps_roles_and_code_blocks_verbatim(store):
    cid = store.create_chat("Loops", "tiny-Q8_0", system_prompt="You are terse.")
    store.add_message(cid, "user", "Print 0..2 in Python")
    a = store.add_message(cid, "assistant", FENCED)
    store.finish_message(a, {"decode_tok_s": 12.5})
    p = store.add_message(cid, "assistant", "")
    store.append_to_message(p, "half a rep")
    md = store.export_markdown(cid)
    assert md.startswith("# Loops\n")
    assert "`tiny-Q8_0`" in md
    assert "## System\n\nYou are terse.\n" in md
    assert "## User\n\nPrint 0..2 in Python\n" in md
    assert "## Assistant\n\n" + FENCED + "\n" in md  # the fenced block untouched
    assert md.index("## User") < md.index(FENCED) < md.index("half a rep")
    assert "half a rep\n\n*(reply interrupted)*" in md


def test_export_json_round_trips(store, tmp_path):
    cid = store.create_chat("Round trip", "m.gguf", system_prompt="sys", settings={"top_k": 40})
    store.add_message(cid, "system", "note")
    store.add_message(cid, "user", "ünïcode ✓ and \"quotes\"")
    a = store.add_message(cid, "assistant", FENCED)
    store.finish_message(a, {"ttft_s": 0.5, "decode_tok_s": 9.0})
    partial = store.add_message(cid, "assistant", "")
    store.append_to_message(partial, "cut")
    doc = store.export_json(cid)
    text = json.dumps(doc)
    assert json.loads(text) == doc
    assert doc["format"] == "rooflight-chat" and doc["title"] == "Round trip"
    assert [m["role"] for m in doc["messages"]] == ["system", "user", "assistant", "assistant"]
    assert doc["messages"][3]["complete"] is False
    # imported into another store, the chat exports identically
    with ChatStore(tmp_path / "other.sqlite3") as other:
        new_id = other.import_json(json.loads(text))
        assert other.export_json(new_id) == doc
    with pytest.raises(BadInputError, match="rooflight-chat"):
        store.import_json({"title": "x"})


def test_gui_style_threads_write_and_read_concurrently(store):
    cid = store.create_chat("c", "m")
    mid = store.add_message(cid, "assistant", "")
    errors = []

    def writer():
        try:
            for i in range(300):
                store.append_to_message(mid, f"{i},")
            store.finish_message(mid, {"n": 300})
        except Exception as exc:  # surfaced below
            errors.append(exc)

    t = threading.Thread(target=writer)
    t.start()
    seen = 0
    while t.is_alive():
        content = store.messages(cid)[0].content
        assert content.count(",") >= seen  # only ever grows, in order
        seen = content.count(",")
    t.join()
    assert not errors
    m = store.messages(cid)[0]
    assert m.content == "".join(f"{i}," for i in range(300)) and m.complete


def test_a_second_process_sees_committed_writes(store):
    cid = store.create_chat("c", "m")
    mid = store.add_message(cid, "assistant", "")
    store.append_to_message(mid, "visible")
    code = ("import sys; from rooflight.store.chats import ChatStore;"
            f"s = ChatStore(sys.argv[1]); print(s.messages({cid})[0].content)")
    r = subprocess.run([sys.executable, "-c", code, str(store.path)], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "visible", r.stderr


@pytest.mark.parametrize("content", [b"this is not a database at all, just text" * 50, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_damaged_file_is_kept_aside_with_one_sentence(tmp_path, content):
    path = tmp_path / "chats.sqlite3"
    path.write_bytes(content)
    with pytest.raises(ChatStoreCorruptError) as info:
        ChatStore(path)
    msg = str(info.value)
    assert "damaged" in msg and info.value.moved_to.name in msg and "\n" not in msg
    assert info.value.moved_to.read_bytes() == content  # kept, not deleted
    with ChatStore(path) as fresh:  # next open starts an empty history
        assert fresh.list_chats() == []


def test_damaged_page_inside_a_valid_file_is_detected(tmp_path):
    path = tmp_path / "chats.sqlite3"
    with ChatStore(path) as s:
        cid = s.create_chat("c", "m")
        for i in range(200):
            s.add_message(cid, "user", f"message {i} " * 40)
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    raw = bytearray(path.read_bytes())
    page = 4096
    raw[3 * page: 6 * page] = b"\x5a" * (3 * page)  # scribble over b-tree pages
    path.write_bytes(bytes(raw))
    with pytest.raises(ChatStoreCorruptError):
        ChatStore(path)
    assert not path.exists()


def test_newer_schema_is_refused_not_moved(tmp_path):
    path = tmp_path / "chats.sqlite3"
    ChatStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()
    with pytest.raises(OperationFailedError, match="newer Rooflight"):
        ChatStore(path)
    assert path.exists()


# ---- crash safety: a writer process killed with SIGKILL mid-reply -------------------------

WRITER = r"""
import sys
from rooflight.store.chats import ChatStore

store = ChatStore(sys.argv[1])
chat = store.create_chat("crash", "m")
for i in range(3):
    store.add_message(chat, "user", f"question {i}")
    reply = store.add_message(chat, "assistant", "")
    for k in range(20):
        store.append_to_message(reply, f"a{i}.{k} ")
    store.finish_message(reply, {"decode_tok_s": 10.0 + i})
reply = store.add_message(chat, "assistant", "")  # committed before the first line: the kill may come then
print("chat", chat, flush=True)
for k in range(100000):  # a long reply, streamed as fast as the store takes it
    store.append_to_message(reply, f"<{k}>")
    print(k, flush=True)
"""


def _expected_finished():
    out = []
    for i in range(3):
        out += [("user", f"question {i}", True), ("assistant", "".join(f"a{i}.{k} " for k in range(20)), True)]
    return out


def _kill_after(proc, n_lines: int) -> list[str]:
    lines = []
    while len(lines) < n_lines:
        line = proc.stdout.readline()
        assert line, f"writer ended early: {proc.stderr.read()}"
        lines.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return lines


@pytest.mark.parametrize("kill_at", [1, 2, 40, 700])
def test_sigkill_mid_reply_keeps_history_and_partial_reply(tmp_path, kill_at):
    path = tmp_path / "chats.sqlite3"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines = _kill_after(proc, kill_at)
    chat_id = int(lines[0].split()[1])
    acked = kill_at - 1  # appends the writer had confirmed committed before the kill
    with ChatStore(path) as s:
        msgs = s.messages(chat_id)
    assert [(m.role, m.content, m.complete) for m in msgs[:6]] == _expected_finished()
    assert [m.stats for m in msgs[1:6:2]] == [{"decode_tok_s": 10.0 + i} for i in range(3)]
    assert len(msgs) == 7
    partial = msgs[6]
    assert partial.role == "assistant" and partial.complete is False
    # whole chunks in order: every acknowledged one, and any that committed between
    # the last acknowledgement read here and the kill
    n = partial.content.count("<")
    assert partial.content == "".join(f"<{k}>" for k in range(n))
    assert n >= acked


REAL_WRITER = r"""
import codecs, sys
from rooflight.runtime import amx
from rooflight.store.chats import ChatStore

llm = amx.llama_class()(model_path=sys.argv[2], n_ctx=512, n_threads=1, verbose=False, seed=1)
store = ChatStore(sys.argv[1])
chat = store.create_chat("real", "tiny")
store.add_message(chat, "user", "Tell me a long story.")
reply = store.add_message(chat, "assistant", "")
decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
prompt = llm.tokenize(b"Tell me a long story.")
print("chat", chat, flush=True)
for n, tok in enumerate(llm.generate(prompt, temp=0.8)):
    piece = decoder.decode(llm.detokenize([tok]))
    if piece:
        store.append_to_message(reply, piece)
    print(repr(piece), flush=True)
    if n > 400:
        break
"""


@pytest.mark.slow
def test_sigkill_during_real_generation(tmp_path):
    from rooflight.gguf.synthetic import write_model

    model = write_model(tmp_path / "tiny.gguf", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=128,
                        n_vocab=2000, ftype="Q8_0", context_length=512)
    path = tmp_path / "chats.sqlite3"
    proc = subprocess.Popen([sys.executable, "-c", REAL_WRITER, str(path), str(model)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = _kill_after(proc, 61)  # "chat N" and 60 generated tokens
    import ast

    shown = "".join(ast.literal_eval(x) for x in lines[1:])
    chat_id = int(lines[0].split()[1])
    with ChatStore(path) as s:
        msgs = s.messages(chat_id)
    assert [(m.role, m.content, m.complete) for m in msgs[:1]] == [("user", "Tell me a long story.", True)]
    assert msgs[1].role == "assistant" and msgs[1].complete is False
    assert len(shown) > 0
    assert msgs[1].content.startswith(shown)  # every token shown was already stored
