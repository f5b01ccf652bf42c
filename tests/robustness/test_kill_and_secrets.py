"""Crash safety and secrets, counted: downloads killed with SIGKILL at random moments resume
or restart cleanly and never present a bad file; hostile file names cannot leave the cache;
the Hub token never shows in output, errors or logs.

Figures are printed (pytest -s) and asserted: 0 corrupt installs, 0 escapes, 0 leaks.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rooflight.errors import RooflightError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ helpers
from test_download import REPO, blob, partials, resolve_gets  # noqa: E402

MB = 1_000_000
KILLS = 8
SECRET = "hf_" + "Zq7" * 12  # looks like a token; must never be printed


def _download_cmd(*extra: str) -> list[str]:
    return [sys.executable, "-m", "rooflight", "download", REPO, "m.gguf", "--json", *extra]


@pytest.mark.slow
def test_download_killed_at_random_points_resumes_and_verifies(hub_server) -> None:
    data = blob(32 * MB, seed=3)
    hub_server.add_file(REPO, "m.gguf", data)
    hub_server.throttle(f"{REPO}/m.gguf", 4 * MB)  # slow enough for every run to be killed mid-stream
    rng = random.Random(8)
    kills, resumed_from = 0, []
    for _ in range(KILLS):
        proc = subprocess.Popen(_download_cmd(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=os.environ.copy())
        # kill mid-stream: once bytes arrive (on a loaded machine the interpreter's start
        # alone can outlast a fixed delay), a random moment later
        deadline = time.monotonic() + 20
        while not partials() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.05, 0.6))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=30)
        parts = partials()
        resumed_from.append(parts[0].stat().st_size if parts else 0)

    final = subprocess.run(_download_cmd(), capture_output=True, text=True, timeout=120,
                           env=os.environ.copy())
    assert final.returncode == 0, final.stderr
    doc = json.loads(final.stdout)
    installed = Path(doc["path"])
    corrupt = int(hashlib.sha256(installed.read_bytes()).hexdigest() != hashlib.sha256(data).hexdigest())
    total_served = hub_server.bytes_served[f"{REPO}/m.gguf"]
    print(f"\nDownload kill campaign: {kills} SIGKILLs at random points, partial sizes "
          f"{[round(b / MB, 1) for b in resumed_from]} MB; final run resumed {doc['resumed_bytes'] / MB:.1f} MB "
          f"and fetched {doc['downloaded_bytes'] / MB:.1f} MB; served in all {total_served / MB:.1f} MB "
          f"for an {len(data) / MB:.0f} MB file; corrupt installs {corrupt}")
    assert corrupt == 0 and doc["verified"]
    assert not partials()
    # the final run fetched only what no killed run had written down
    assert doc["resumed_bytes"] + doc["downloaded_bytes"] == len(data)
    last_get = resolve_gets(hub_server, REPO, "m.gguf")[-1]
    assert last_get.range == f"bytes={doc['resumed_bytes']}-"


@pytest.mark.parametrize("name", ["../../escape.gguf", "/etc/passwd.gguf", "a/../../../b.gguf",
                                  "..\\..\\win.gguf", "ok/../../x.gguf"])
def test_hostile_file_names_cannot_leave_the_cache(hub_server, tmp_path, name) -> None:
    from rooflight.download import download_model

    before = {p for p in tmp_path.parent.rglob("*")}
    with pytest.raises(RooflightError) as e:
        download_model(REPO, name)
    assert "\n" not in str(e.value)
    created = {p for p in tmp_path.parent.rglob("*")} - before
    escaped = [p for p in created if "escape" in p.name or p.name in ("passwd.gguf", "b.gguf", "x.gguf")]
    assert not escaped


def test_token_never_appears_in_output_or_errors(hub_server) -> None:
    hub_server.add_file("acme/Gated-GGUF", "m.gguf", blob(MB))
    hub_server.require_token("acme/Gated-GGUF", token="hf_the_right_one")
    env = dict(os.environ, HF_TOKEN=SECRET)
    runs = [
        [sys.executable, "-m", "rooflight", "--debug", "download", "acme/Gated-GGUF", "m.gguf"],
        [sys.executable, "-m", "rooflight", "--debug", "download", REPO, "missing.gguf", "--json"],
        [sys.executable, "-m", "rooflight", "--debug", "estimate", "hf:acme/Gated-GGUF/m.gguf",
         "--hardware", str(Path(__file__).parent / "cpu_profile.json")],
    ]
    leaks = 0
    for cmd in runs:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode != 0
        leaks += (SECRET in r.stdout) + (SECRET in r.stderr)
    print(f"\nToken leak check: {len(runs)} failing commands with --debug tracebacks, leaks {leaks}")
    assert leaks == 0
