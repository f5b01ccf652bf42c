"""`rooflight download / installed / remove`: JSON shape, progress on stderr, exit codes,
Ctrl-C leaving a partial that a new process resumes, and removal from the cache."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from huggingface_hub import constants, scan_cache_dir, try_to_load_from_cache

from rooflight.cli import main
from rooflight.commands.download import ProgressLine, format_progress
from rooflight.download import progress as P
from test_download import REPO, blob, partials, resolve_gets, sha, split_names

MB = 1_000_000


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_download_json_shape(hub_server, capsys) -> None:
    data = blob(2 * MB)
    hub_server.add_file(REPO, "tiny-Q4_K_M.gguf", data)
    code, out, err = run_cli(["download", REPO, "tiny-Q4_K_M.gguf", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    for key in ("repo", "file", "revision", "commit", "sha256", "size_bytes", "path", "verified",
                "seconds", "download_seconds", "verify_seconds", "downloaded_bytes",
                "resumed_bytes", "already_installed", "parts"):
        assert key in doc, key
    assert doc["repo"] == REPO and doc["file"] == "tiny-Q4_K_M.gguf" and doc["revision"] == "main"
    assert doc["sha256"] == sha(data) and doc["size_bytes"] == len(data) and doc["verified"] is True
    assert Path(doc["path"]).read_bytes() == data
    assert doc["path"] == try_to_load_from_cache(REPO, "tiny-Q4_K_M.gguf")
    assert len(doc["commit"]) == 40 and doc["verify_seconds"] >= 0
    assert doc["parts"] == [{"file": "tiny-Q4_K_M.gguf", "sha256": sha(data), "size_bytes": len(data),
                             "path": doc["path"]}]


def test_download_text_prints_the_path_and_a_summary(hub_server, capsys) -> None:
    hub_server.add_file(REPO, "m.gguf", blob(MB))
    code, out, err = run_cli(["download", REPO, "m.gguf"], capsys)
    assert code == 0
    assert out.strip() == try_to_load_from_cache(REPO, "m.gguf")
    assert "verified sha256" in err
    code, out, err = run_cli(["download", REPO, "m.gguf"], capsys)
    assert code == 0 and "already installed" in err


def test_download_errors_are_one_line_with_contract_exit_codes(hub_server, capsys) -> None:
    hub_server.add_file(REPO, "m.gguf", blob(1000))
    code, out, err = run_cli(["download", REPO, "missing.gguf"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "has no file missing.gguf" in err
    hub_server.require_token(REPO)
    code, out, err = run_cli(["download", REPO, "m.gguf"], capsys)
    # progress lines may come first; the error is one line, the last one
    last = err.strip().splitlines()[-1]
    assert code == 1 and err.count("rooflight:") == 1 and last.startswith("rooflight:")
    assert "gated" in last and "hf auth login" in last


def test_installed_and_remove(hub_server, capsys) -> None:
    names = split_names(2)
    for i, name in enumerate(names):
        hub_server.add_file(REPO, name, blob(MB, i))
    hub_server.add_file(REPO, "small.gguf", blob(1000, 9))
    assert run_cli(["download", REPO, names[0], "--json"], capsys)[0] == 0
    assert run_cli(["download", REPO, "small.gguf", "--json"], capsys)[0] == 0

    code, out, _ = run_cli(["installed", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["unfinished"] == []
    by_file = {m["filename"]: m for m in doc["models"]}
    assert set(by_file) == {names[0], "small.gguf"}
    assert len(by_file[names[0]]["parts"]) == 2 and by_file[names[0]]["size_bytes"] == 2 * MB

    code, out, _ = run_cli(["remove", REPO, names[1], "--json"], capsys)  # any part names the model
    assert code == 0 and json.loads(out)["removed"] is True
    for name in names:
        assert try_to_load_from_cache(REPO, name) is None
    (repo,) = scan_cache_dir(constants.HF_HUB_CACHE).repos
    files = {f.file_name for rev in repo.revisions for f in rev.files}
    assert files == {"small.gguf"}  # the other model is untouched
    assert repo.size_on_disk == 1000  # the split model's blobs are gone
    code, out, _ = run_cli(["installed"], capsys)
    assert "small.gguf" in out and names[0] not in out
    code, _, err = run_cli(["remove", REPO, names[0]], capsys)
    assert code == 2 and "is not installed" in err


def test_remove_keeps_a_blob_another_file_still_uses(hub_server, capsys, monkeypatch) -> None:
    same = blob(MB)
    hub_server.add_file(REPO, "a.gguf", same)
    hub_server.add_file(REPO, "b.gguf", same)
    for name in ("a.gguf", "b.gguf"):
        assert run_cli(["download", REPO, name, "--json"], capsys)[0] == 0
    blob_path = Path(try_to_load_from_cache(REPO, "a.gguf")).resolve()
    assert run_cli(["remove", REPO, "a.gguf"], capsys)[0] == 0
    assert blob_path.exists() and Path(try_to_load_from_cache(REPO, "b.gguf")).read_bytes() == same
    # the same rule without huggingface_hub's delete_files (older huggingface_hub versions)
    from huggingface_hub.utils import HFCacheInfo

    monkeypatch.delattr(HFCacheInfo, "delete_files")
    assert run_cli(["remove", REPO, "b.gguf"], capsys)[0] == 0
    assert not blob_path.exists() and try_to_load_from_cache(REPO, "b.gguf") is None


def test_ctrl_c_keeps_a_partial_that_a_new_process_resumes(hub_server) -> None:
    data = blob(6 * MB)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.throttle(f"{REPO}/m.gguf", 2 * MB)
    cmd = [sys.executable, "-m", "rooflight", "download", REPO, "m.gguf", "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 60
        while not (partials() and partials()[0].stat().st_size > MB):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the download never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "run the same command again to resume" in err
    assert "Traceback" not in err and out == ""
    (part,) = partials()
    kept = part.stat().st_size
    assert MB < kept < len(data)

    hub_server.throttle(f"{REPO}/m.gguf", None)
    hub_server.reset_counters()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["resumed_bytes"] == kept and doc["downloaded_bytes"] == len(data) - kept
    assert Path(doc["path"]).read_bytes() == data
    gets = resolve_gets(hub_server, REPO, "m.gguf")
    assert [(g.range, g.body_bytes) for g in gets] == [(f"bytes={kept}-", len(data) - kept)]


def test_progress_line_format_and_rendering() -> None:
    p = P.Progress(P.DOWNLOADING, 1_500_000_000, 3_000_000_000, 25e6, 60.0, "m.gguf", 2, 3, "")
    line = format_progress(p)
    assert "50.0%" in line and "1.5 GB / 3.0 GB" in line and "25.0 MB/s" in line
    assert "ETA 1:00" in line and "part 2/3" in line

    class Tty:
        def __init__(self) -> None:
            self.text = ""

        def isatty(self) -> bool:
            return True

        def write(self, s: str) -> None:
            self.text += s

        def flush(self) -> None:
            pass

    tty = Tty()
    bar = ProgressLine(tty)
    bar(P.Progress(P.RESOLVING, 0, 0, 0.0, None, "m.gguf", 1, 1))
    bar(p)
    bar(P.Progress(P.VERIFYING, 10, 3_000_000_000, 1e9, 3.0, "m.gguf", 1, 3))
    bar.close()
    lines = tty.text.split("\n")
    assert lines[0].startswith("\rdownloading") and lines[1].startswith("\rverifying") and lines[2] == ""
