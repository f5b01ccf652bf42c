"""Starting the app: `rooflight` with no command opens it, the cold start reaches a ranked
table, and the screenshot tool saves one PNG per page."""

import json
import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtGui import QImage

from rooflight.ui import pages
from test_ui_support import CPU

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra):
    env = dict(os.environ)
    env.update(extra)
    return env


def test_no_command_opens_the_app_and_says_so_without_a_display():
    env = _env()
    for k in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        env.pop(k, None)
    r = subprocess.run([sys.executable, "-m", "rooflight"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert r.stderr.startswith("rooflight: no display found")
    assert r.stderr.count("\n") == 1


def test_cold_start_reaches_the_ranked_table(tmp_path):
    r = subprocess.run([sys.executable, "-m", "rooflight.ui.app", "--quit-when-ready"], capture_output=True,
                       text=True, timeout=120, env=_env(QT_QPA_PLATFORM="offscreen"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ready"
    assert r.stderr == ""  # no Qt warnings, no tracebacks


def test_screenshots_one_png_per_page(tmp_path):
    profile = tmp_path / "machine.json"
    profile.write_text(json.dumps({"cpu": CPU, "gpus": [{"name": "RTX 3060"}]}))
    out = tmp_path / "shots"
    # the source tree's tool (bench/screenshots.py: screenshot tooling is not in the package)
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "screenshots.py"), str(out), "--hardware", str(profile)],
                       capture_output=True, text=True, timeout=480, env=_env(QT_QPA_PLATFORM="offscreen"))
    # 480 s: a 2-core Zen-1-era EPYC VM (2026-12-04) took 185 s for it alone, one core busy
    assert r.returncode == 0, r.stderr
    taken = {p.name for p in out.iterdir()}
    # one per page of PAGES at least, staged by bench/page_shots.py or as it is
    assert {f"{page.key}.png" for page in pages.page_classes()} <= taken
    names = {"machine.png", "models.png", "model_detail.png", "settings.png"}
    for name in names:
        image = QImage(str(out / name))
        assert (image.width(), image.height()) == (1280, 800)
        # not a blank grab: many distinct colours (text, badges, bars)
        colours = {image.pixel(x, y) for x in range(0, 1280, 16) for y in range(0, 800, 16)}
        assert len(colours) > 8, name
