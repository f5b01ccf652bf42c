"""The package as installed: every subpackage listed, resources shipped, entry points work."""

import importlib.resources
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"rooflight"} | {
        "rooflight." + ".".join(p.parent.relative_to(ROOT / "app" / "rooflight").parts)
        for p in (ROOT / "app" / "rooflight").rglob("__init__.py")
        if p.parent != ROOT / "app" / "rooflight"
    }
    assert found | {"rooflight.resources"} == listed


def test_gpu_table_ships_as_package_data():
    assert (importlib.resources.files("rooflight.resources") / "gpus.json").is_file()


def test_python_dash_m_and_console_script_agree():
    a = subprocess.run([sys.executable, "-m", "rooflight", "--version"], capture_output=True, text=True)
    script = Path(sys.executable).parent / "rooflight"
    b = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout
