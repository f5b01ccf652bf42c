"""Every command ends quietly when its reader goes away (`rooflight rank | head`): no
BrokenPipeError traceback, no "Exception ignored" at exit. Real pipes, real processes."""

import json
import subprocess
import sys

import pytest

PROFILE = {"gpus": [], "backend": "cpu",
           "cpu": {"cores": 4, "ram_total_bytes": 16 * 2**30, "ram_available_bytes": 12 * 2**30,
                   "ram_bandwidth_gbs": 20}}


def _closed_reader(args, tmp_path):
    """Run rooflight with stdout a pipe whose reader is closed before it writes a byte."""
    proc = subprocess.Popen([sys.executable, "-m", "rooflight", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.close()  # the reader goes away at once, as `head` does after its lines
    _out, err = proc.communicate(timeout=120)
    return proc.returncode, err.decode()


@pytest.mark.parametrize("args", [
    ["rank"],  # long text output, written while the command runs
    ["rank", "--json"],
    ["hardware", "--json"],  # short output: flushed as the command ends
])
def test_a_reader_gone_away_ends_the_command_quietly(tmp_path, args):
    prof = tmp_path / "machine.json"
    prof.write_text(json.dumps(PROFILE))
    code, err = _closed_reader([*args, "--hardware", str(prof)], tmp_path)
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
    assert err == "" and code == 1


def test_head_gets_its_lines_and_the_pipeline_ends_quietly(tmp_path):
    prof = tmp_path / "machine.json"
    prof.write_text(json.dumps(PROFILE))
    r = subprocess.run(f"'{sys.executable}' -m rooflight rank --hardware '{prof}' | head -n 3",
                       shell=True, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert len(r.stdout.splitlines()) == 3 and r.stderr == "", r.stderr
