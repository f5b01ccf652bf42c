"""`rooflight chat`: piped conversations, /commands, --json, refusal, Ctrl-C."""

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gemma_model import gemma_270m_path
from rooflight.cli import main
from rooflight.gguf.synthetic import write_model

pytest.importorskip("llama_cpp")

APP = Path(__file__).resolve().parents[1] / "app"


def chat(monkeypatch, capsys, stdin: str, *args: str):
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    rc = main(["chat", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_piped_conversation_with_commands(monkeypatch, capsys):
    from rooflight.store.chats import ChatStore

    model = str(gemma_270m_path())
    lines = "\n".join([
        "What is the capital of France?",
        "/stats",
        "/system You are a helpful assistant.",
        "/system",
        "/reset",
        "",
        "What is the capital of France?",
        "/nonsense",
    ]) + "\n"
    rc, out, err = chat(monkeypatch, capsys, lines, model, "--ctx", "1024", "--temperature", "0", "--seed", "1")
    assert rc == 0
    replies = out.splitlines()
    # the second reply's words depend on the kernels' rounding (a machine whose llama.cpp
    # runs without its AMX or repacked kernels, runtime/amx.py, answered "I am a French
    # citizen." with the system prompt set): that a second reply came is what is tested
    assert len(replies) == 2 and "Paris" in replies[0] and replies[1].strip()
    assert "transcript" in err and "cpu_only" in err and "predicted" in err
    assert "measured" in err and "decode" in err and "first token" in err  # /stats
    assert "system prompt set" in err and "system prompt: You are a helpful assistant." in err
    assert "conversation cleared" in err and "unknown command /nonsense" in err
    with ChatStore() as store:  # saved: /reset started a second chat
        chats = store.list_chats()
        assert len(chats) == 2
        newest = store.messages(chats[0].id)
        assert [m.role for m in newest] == ["user", "assistant"] and newest[1].content == replies[1]
        assert chats[0].system_prompt == "You are a helpful assistant."


def test_json_output_has_plan_replies_and_stats(monkeypatch, capsys):
    model = str(gemma_270m_path())
    rc, out, err = chat(monkeypatch, capsys, "What is the capital of France?\n", model, "--ctx", "1024",
                        "--temperature", "0", "--json", "--no-save", "--max-tokens", "32", "--threads", "2")
    assert rc == 0
    doc = json.loads(out)
    assert doc["config"]["n_ctx"] == 1024 and doc["config"]["n_threads"] == 2 and doc["chat_id"] is None
    assert doc["chat_format"] == "transcript" and doc["fit"] == "cpu_only"
    (reply,) = doc["replies"]
    assert "Paris" in reply["reply"]
    st = reply["stats"]
    assert st["decode_tok_s"] > 0 and st["predicted"]["decode_tok_s"] > 0 and st["stop_reason"] in ("stop_string", "eos")


def test_model_that_does_not_fit_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    # a 16M-token context of this model needs ~275 GB of KV cache
    model = write_model(tmp_path / "big-kv.gguf", n_layer=8, n_embd=512, n_head=8, n_head_kv=8, n_ff=512,
                        context_length=1 << 24)
    rc, out, err = chat(monkeypatch, capsys, "hi\n", str(model), "--ctx", str(1 << 24), "--no-save")
    assert rc == 1 and out == ""
    line = [ln for ln in err.splitlines() if ln.startswith("rooflight:")]
    assert len(line) == 1
    assert "does not fit" in line[0] and "GB of RAM but" in line[0] and "--ctx" in line[0] and "--force" in line[0]


def test_unknown_model_and_catalog_model_not_downloaded(monkeypatch, capsys):
    rc, _, err = chat(monkeypatch, capsys, "", "no-such-model")
    assert rc == 2 and "neither a .gguf file nor a catalog model id" in err
    rc, _, err = chat(monkeypatch, capsys, "", "/no/such/model.gguf")
    assert rc == 2 and "/no/such/model.gguf does not exist." in err
    rc, _, err = chat(monkeypatch, capsys, "", "qwen2.5-0.5b")
    assert rc == 2 and "not downloaded yet" in err and "rooflight download" in err
    rc, _, err = chat(monkeypatch, capsys, "", str(gemma_270m_path()), "--top-p", "5")
    assert rc == 2 and "top-p" in err and "loaded" not in err  # refused before loading


def _read_until(stream, done_when, timeout: float) -> bytes:
    """Read a pipe until done_when(data) (in a thread, so the timeout holds)."""
    got = bytearray()
    done = threading.Event()

    def reader():
        while not done_when(bytes(got)):
            b = stream.read1(4096)
            if not b:
                break
            got.extend(b)
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    done.wait(timeout)
    return bytes(got)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child needs POSIX signals")
def test_ctrl_c_stops_the_reply_and_a_second_one_exits(tmp_path):
    # random weights, greedy: the reply repeats a token and would run to --max-tokens
    model = write_model(tmp_path / "slow.gguf", n_layer=4, n_embd=512, n_head=8, n_head_kv=8, n_ff=1024,
                        n_vocab=2000, context_length=8192)
    env = {**os.environ, "PYTHONPATH": str(APP), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rooflight", "chat", str(model), "--ctx", "8192", "--max-tokens", "8000",
         "--temperature", "0", "--no-save"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        proc.stdin.write(b"hello\n")
        proc.stdin.flush()
        assert _read_until(proc.stdout, bool, 60), "no reply started"
        t_sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        err = _read_until(proc.stderr, lambda got: b"stopped]" in got, 30)
        assert b"stopped]" in err, err.decode(errors="replace")
        assert time.monotonic() - t_sent < 20
        assert proc.poll() is None  # still there, waiting for the next message
        proc.send_signal(signal.SIGINT)  # at the prompt: leave
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_ctrl_c_between_a_reply_and_the_prompt_leaves_cleanly(tmp_path, monkeypatch, capsys):
    """The race the test above can lose: a second Ctrl-C landing after the reply's handler is
    gone and before the prompt is read (here: as the finished reply is added to the replies)
    leaves with exit 0 and the replies before it, not a traceback and exit 1."""
    from rooflight.runtime.chat import ReplyStats

    model = write_model(tmp_path / "m.gguf", n_layer=2, n_embd=256, n_head=4, n_head_kv=4, n_ff=512, n_vocab=600)
    to_dict = ReplyStats.to_dict
    calls = []

    def interrupted(self):
        if sys._getframe(1).f_code.co_name == "_converse":  # a finished reply kept for --json
            calls.append(self)
            if len(calls) == 2:  # the second reply's
                raise KeyboardInterrupt
        return to_dict(self)

    monkeypatch.setattr(ReplyStats, "to_dict", interrupted)
    rc, out, err = chat(monkeypatch, capsys, "hello\nsecond message\nthird\n", str(model), "--ctx", "512",
                        "--max-tokens", "4", "--temperature", "0", "--json", "--no-save", "--threads", "2")
    assert rc == 0 and "Traceback" not in err
    assert len(json.loads(out)["replies"]) == 1  # the first; the third message was never sent


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL needs POSIX signals")
def test_reply_in_progress_survives_sigkill(tmp_path):
    from rooflight.store.chats import ChatStore

    model = write_model(tmp_path / "slow.gguf", n_layer=4, n_embd=512, n_head=8, n_head_kv=8, n_ff=1024,
                        n_vocab=2000, context_length=8192)
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(APP), "ROOFLIGHT_DATA_DIR": str(data)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rooflight", "chat", str(model), "--ctx", "8192", "--max-tokens", "8000",
         "--temperature", "0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        proc.stdin.write(b"hello there\n")
        proc.stdin.flush()
        shown = _read_until(proc.stdout, lambda got: len(got) > 200, 60)  # well past the first 0.25 s batch
        assert len(shown) > 200, "the reply did not stream"
        time.sleep(0.6)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with ChatStore(data / "chats.sqlite3") as store:
        (chat,) = store.list_chats()
        user, reply = store.messages(chat.id)
        assert (user.role, user.content, user.complete) == ("user", "hello there", True)
        assert reply.role == "assistant" and not reply.complete and reply.stats is None
        assert len(reply.content) >= 100  # what streamed before the kill, at most one batch lost
        assert shown.decode("utf-8", errors="replace").startswith(reply.content[:100])


def test_catalog_id_chats_with_the_largest_installed_file(tmp_path, monkeypatch, capsys):
    from rooflight.store.installed import InstalledModel, InstalledPart, InstalledStore

    repo = "bartowski/Qwen2.5-0.5B-Instruct-GGUF"
    files = {}
    with InstalledStore() as store:
        # both files are in the catalog's bartowski block (its Q8_0 could not be confirmed, issue 15)
        for quant, n_embd in (("Q4_K_M", 64), ("Q5_K_M", 128)):
            name = f"Qwen2.5-0.5B-Instruct-{quant}.gguf"
            path = write_model(tmp_path / "snap" / name, n_embd=n_embd, n_vocab=600, name=f"stand-in {quant}")
            files[quant] = path
            size = path.stat().st_size
            store.add(InstalledModel(repo, name, "main", "0" * 40, "1" * 64, size, str(path), 0.0,
                                     (InstalledPart(name, "1" * 64, "1" * 64, size, str(path)),)))
    rc, out, err = chat(monkeypatch, capsys, "hello\n", "qwen2.5-0.5b", "--ctx", "512", "--max-tokens", "4",
                        "--json", "--no-save")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["model"]["name"] == "stand-in Q5_K_M" and len(doc["replies"]) == 1
