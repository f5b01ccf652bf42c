"""Download speed: Rooflight's resumable, verified download vs a plain hf_hub_download.

    python bench/download_speed.py [--size-mb 200] [--rounds 5]

Serves one file of random bytes (a .gguf name, so an LFS file with a sha256) from the
local Hub stand-in (tests/hub_server.py, real HTTP on 127.0.0.1) and downloads it in the
same run with `rooflight.download.download_model` and with `huggingface_hub.hf_hub_download`,
each into its own fresh temporary cache, alternating which goes first in every round so
page-cache and CPU-frequency effects hit both alike. Both use huggingface_hub's HTTP
client; neither draws a progress bar (Rooflight still runs its progress meter).

Printed per run and as medians: throughput of each (file size / wall time of the call,
for Rooflight excluding its sha256 check), the ratio Rooflight / hf_hub_download (target
at least 0.9) and, separately, the verification time. Exits 1 when the ratio is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the Hub stand-in lives with the tests

TARGET = 0.9
REPO = "bench/Speed-GGUF"
FILE = "speed-Q4_K_M.gguf"


def point_huggingface_hub_at(url: str, home: Path) -> None:
    """Environment and huggingface_hub's constants (read at import) -> the local server."""
    env = {
        "HF_ENDPOINT": url,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_TOKEN_PATH": str(home / "token"),
        "ROOFLIGHT_DATA_DIR": str(home / "rooflight"),
    }
    os.environ.update(env)
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        os.environ.pop(k, None)
    import huggingface_hub
    import huggingface_hub.hf_api
    from huggingface_hub import constants
    from huggingface_hub.utils import disable_progress_bars

    constants.ENDPOINT = url
    constants.HUGGINGFACE_CO_URL_TEMPLATE = url + "/{repo_id}/resolve/{revision}/{filename}"
    constants.HF_HOME = str(home)
    constants.HF_HUB_CACHE = str(home / "hub")
    constants.HF_TOKEN_PATH = str(home / "token")
    constants.HF_HUB_OFFLINE = False
    huggingface_hub.hf_api.api.endpoint = url
    huggingface_hub.close_session()
    disable_progress_bars()


def write_random(path: Path, size: int) -> None:
    chunk = 8 * 1024 * 1024
    with open(path, "wb") as fh:
        left = size
        while left > 0:
            fh.write(os.urandom(min(chunk, left)))
            left -= chunk


def run_rooflight(cache: Path, store_path: Path, file: str = FILE) -> tuple[float, float]:
    """(seconds without verification, verification seconds)."""
    from rooflight.download import download_model
    from rooflight.store.installed import InstalledStore

    with InstalledStore(store_path) as store:
        t0 = time.perf_counter()
        r = download_model(REPO, file, cache_dir=cache, store=store, on_progress=lambda p: None)
        wall = time.perf_counter() - t0
    assert r.verified and not r.already_installed and r.downloaded_bytes == r.model.size_bytes
    return wall - r.verify_seconds, r.verify_seconds


def run_hf(cache: Path, file: str = FILE) -> float:
    from huggingface_hub import hf_hub_download

    t0 = time.perf_counter()
    hf_hub_download(REPO, file, cache_dir=cache)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    size = args.size_mb * 1_000_000

    from hub_server import HubServer

    with tempfile.TemporaryDirectory(prefix="rooflight-dl-bench-") as tmp_name:
        tmp = Path(tmp_name)
        src = tmp / "source.gguf"
        write_random(src, size)
        with HubServer(tmp / "hub") as hub:
            hub.add_file(REPO, FILE, src)
            point_huggingface_hub_at(hub.url, tmp / "hf_home")
            hub.hashes(hub.root / REPO / FILE)  # the server's own sha256, computed before timing
            # warm-up, untimed: first-call imports and connection set-up on both sides
            hub.add_file(REPO, "warmup.gguf", os.urandom(1_000_000))
            run_rooflight(tmp / "warm-r", tmp / "warm.sqlite3", "warmup.gguf")
            run_hf(tmp / "warm-h", "warmup.gguf")
            ours, theirs, verify = [], [], []
            print(f"{size / 1e6:.0f} MB from {hub.url}, {args.rounds} rounds, alternating order")
            for i in range(args.rounds):
                order = ("rooflight", "hf") if i % 2 == 0 else ("hf", "rooflight")
                for who in order:
                    cache = tmp / f"cache-{who}-{i}"
                    if who == "rooflight":
                        t, v = run_rooflight(cache, tmp / f"installed-{i}.sqlite3")
                        ours.append(t)
                        verify.append(v)
                        print(f"  round {i + 1} rooflight        {size / t / 1e6:8.1f} MB/s"
                              f"  ({t:.2f} s; verify {v:.2f} s = {size / v / 1e6:.0f} MB/s)")
                    else:
                        t = run_hf(cache)
                        theirs.append(t)
                        print(f"  round {i + 1} hf_hub_download  {size / t / 1e6:8.1f} MB/s  ({t:.2f} s)")
                    shutil.rmtree(cache, ignore_errors=True)
            assert not hub.errors, hub.errors

    ours_tp = size / statistics.median(ours)
    theirs_tp = size / statistics.median(theirs)
    ratio = ours_tp / theirs_tp
    v = statistics.median(verify)
    print(f"rooflight download       {ours_tp / 1e6:8.1f} MB/s (median, excluding verification)")
    print(f"hf_hub_download          {theirs_tp / 1e6:8.1f} MB/s (median)")
    print(f"ratio rooflight / hf     {ratio:8.3f}  (target >= {TARGET})")
    print(f"sha256 verification      {v:8.2f} s  ({size / v / 1e6:.0f} MB/s), reported separately")
    print(f"rooflight end to end     {size / (statistics.median(ours) + v) / 1e6:8.1f} MB/s (with verification)")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
