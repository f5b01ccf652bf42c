"""`rooflight chat MODEL --image FILE` and `rooflight estimate MODEL --mmproj FILE`."""

import io
import json
import sys

import pytest

from rooflight.cli import main
from rooflight.gguf.synthetic import write_model
from vision_files import png_bytes, vision_model

pytest.importorskip("llama_cpp")


def run(monkeypatch, capsys, stdin: str, *args: str):
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_chat_with_an_image_end_to_end(tmp_path, monkeypatch, capsys):
    lm, _ = vision_model(tmp_path / "m")
    img = tmp_path / "photo.png"
    img.write_bytes(png_bytes(50, 40))
    rc, out, err = run(monkeypatch, capsys, "describe it\n/image " + str(img) + "\nagain\n",
                       "chat", str(lm), "--ctx", "512", "--image", str(img), "--max-tokens", "4",
                       "--temperature", "0", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["vision"]["image_tokens"] == 16 and doc["vision"]["projector_type"] == "gemma3"
    first, second = doc["replies"]
    assert first["images"] == ["photo.png"] and first["stats"]["image_tokens"] == 16
    # the second message has its own image and still sees the first: 32 image tokens
    assert second["stats"]["image_tokens"] == 32
    assert second["stats"]["prompt_tokens"] > first["stats"]["prompt_tokens"] + 16
    from rooflight.store.chats import ChatStore

    with ChatStore() as store:
        msgs = store.messages(doc["chat_id"])
        assert [len(m.images) for m in msgs] == [1, 0, 1, 0]
        assert msgs[0].images[0].sha256 == msgs[2].images[0].sha256
        assert len(list(store.images_dir.iterdir())) == 1


def test_chat_image_without_projector_or_bad_image_is_one_sentence(tmp_path, monkeypatch, capsys):
    lm = write_model(tmp_path / "plain.gguf", n_layer=1, n_embd=64, n_vocab=400)
    img = tmp_path / "p.png"
    img.write_bytes(png_bytes(8, 8))
    rc, out, err = run(monkeypatch, capsys, "hi\n", "chat", str(lm), "--ctx", "256", "--image", str(img))
    assert rc == 2 and "has no vision projector" in err and "Traceback" not in err
    bad = tmp_path / "bad.png"
    bad.write_bytes(png_bytes(8, 8)[:-30])
    rc, out, err = run(monkeypatch, capsys, "hi\n", "chat", str(lm), "--ctx", "256", "--image", str(bad))
    assert rc == 2 and "cut short" in err and err.count("\n") == 1


def test_estimate_counts_the_projector(tmp_path, monkeypatch, capsys):
    lm, proj = vision_model(tmp_path / "m", projector_name="elsewhere.gguf")  # not paired by name
    rc, out, _ = run(monkeypatch, capsys, "", "estimate", str(lm), "--json")
    assert rc == 0 and "vision" not in json.loads(out)
    rc, out, err = run(monkeypatch, capsys, "", "estimate", str(lm), "--mmproj", str(proj), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["vision"]["device"] == "cpu" and doc["vision"]["weights_bytes"] > 0
    rc, out, _ = run(monkeypatch, capsys, "", "estimate", str(lm), "--mmproj", str(proj))
    assert "vision" in out.lower() and "16 tokens" in out


def test_advise_and_models_include_the_projector(tmp_path, monkeypatch, capsys):
    lm, proj = vision_model(tmp_path / "m")
    rc, out, err = run(monkeypatch, capsys, "", "advise", str(lm), "--json")
    assert rc == 0, err
    with_proj = json.loads(out)
    assert with_proj["baseline"]["vision"]["image_tokens"] == 16  # paired from the folder
    rc, out, err = run(monkeypatch, capsys, "", "models", "--dir", str(lm.parent), "--only-dirs", "--json")
    assert rc == 0, err
    (m,) = json.loads(out)["models"]
    assert m["installed_files"][0]["mmproj"].endswith("mmproj-vis-lm-f16.gguf")
    assert m["vision"]["weights_bytes"] == with_proj["baseline"]["vision"]["weights_bytes"]
