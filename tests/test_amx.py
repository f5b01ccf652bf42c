"""runtime/amx.py: the check for llama.cpp's crashing AMX kernels, its verdict kept per build
and machine, and the loads that then go without the AMX buffer."""

from __future__ import annotations

import sys

import pytest

from rooflight.runtime import amx

_VERDICTS = (amx.amx_crashes, amx.runs_without_amx, amx.has_amx_kernels)  # kept for the process's life


def _new_process() -> None:
    """What another process would know: only the verdict file."""
    for f in _VERDICTS:
        f.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_verdict(monkeypatch):
    """Each test starts with no verdict in the process, and the real one is restored. The
    CPU is one with AMX, whatever this machine's (a CPU without it asks nothing of the build)."""
    real = _VERDICTS
    for f in real:
        f.cache_clear()
    monkeypatch.setattr(amx, "_cpu", lambda: ("a CPU with AMX|avx512_vnni,amx_int8", ("avx512_vnni", "amx_int8")))
    yield
    monkeypatch.undo()
    for f in real:
        f.cache_clear()


def _child(monkeypatch, code: str) -> None:
    """Make the check start a Python child running `code` instead of the real model."""
    monkeypatch.setattr(amx, "check_command", lambda path, without_amx=False: [sys.executable, "-c", code])


def test_a_child_killed_by_a_signal_is_a_crash(monkeypatch):
    _child(monkeypatch, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert amx.run_check() is False


def test_the_cpu_s_faults_are_told_from_python_s_exits():
    assert amx.killed(-11) and amx.killed(-4)  # SIGSEGV, SIGILL
    assert amx.killed(0xC0000005) and amx.killed(0xC000001D)  # Windows: access violation, illegal instruction
    assert not amx.killed(1) and not amx.killed(0)


def test_a_child_that_ran_says_the_kernels_work(monkeypatch):
    _child(monkeypatch, "print('ok')")
    assert amx.run_check() is True


def test_a_child_that_failed_in_python_teaches_nothing(monkeypatch):
    _child(monkeypatch, "raise SystemExit(1)")
    assert amx.run_check() is None


def test_a_hung_child_counts_as_a_crash(monkeypatch):
    _child(monkeypatch, "import time; time.sleep(30)")
    monkeypatch.setattr(amx, "CHECK_TIMEOUT_S", 0.5)
    assert amx.run_check() is False


def test_a_build_without_amx_starts_no_child(monkeypatch):
    monkeypatch.setattr(amx, "build_has_amx", lambda: False)
    monkeypatch.setattr(amx, "run_check", lambda: pytest.fail("no child for a build without AMX"))
    assert amx.amx_crashes() is False


def test_the_verdict_is_kept_per_build_and_machine(monkeypatch):
    monkeypatch.setattr(amx, "build_has_amx", lambda: True)
    monkeypatch.setattr(amx, "_key", lambda: "build A|kernel|cpu")
    runs = []
    monkeypatch.setattr(amx, "run_check", lambda: runs.append(1) or False)
    assert amx.amx_crashes() is True
    _new_process()  # the file answers
    assert amx.amx_crashes() is True and len(runs) == 1
    _new_process()
    monkeypatch.setattr(amx, "_key", lambda: "build B|kernel|cpu")  # a rebuilt llama.cpp asks again
    monkeypatch.setattr(amx, "run_check", lambda: runs.append(1) or True)
    assert amx.amx_crashes() is False and len(runs) == 2


def test_a_check_that_could_not_run_is_not_kept(monkeypatch):
    monkeypatch.setattr(amx, "build_has_amx", lambda: True)
    monkeypatch.setattr(amx, "_key", lambda: "build|kernel|cpu")
    monkeypatch.setattr(amx, "run_check", lambda: None)
    assert amx.amx_crashes() is False  # nothing known: llama.cpp's own choice stands
    assert amx._cached("build|kernel|cpu") is None


def test_whether_the_build_has_amx_kernels_is_kept_and_weights_use_them_only_where_they_run(monkeypatch):
    monkeypatch.setattr(amx, "_key", lambda: "build|kernel|cpu")
    asked = []
    monkeypatch.setattr(amx, "build_has_amx", lambda: asked.append(1) or True)
    monkeypatch.setattr(amx, "run_check", lambda: True)
    assert amx.amx_weights_here() and amx.has_amx_kernels() and len(asked) == 1  # kept: asked once
    _new_process()  # another build: another process
    monkeypatch.setattr(amx, "_key", lambda: "build2|kernel|cpu")
    monkeypatch.setattr(amx, "run_check", lambda: False)  # they crash: no weights in the AMX buffer
    assert not amx.amx_weights_here()
    _new_process()
    monkeypatch.setattr(amx, "_key", lambda: "build3|kernel|cpu")
    monkeypatch.setattr(amx, "build_has_amx", lambda: False)
    assert not amx.amx_weights_here() and not amx.amx_crashes()


def test_a_cpu_without_amx_asks_nothing_of_the_build(monkeypatch):
    monkeypatch.setattr(amx, "_cpu", lambda: ("a CPU|avx2", ("avx2",)))
    monkeypatch.setattr(amx, "build_has_amx", lambda: pytest.fail("the build was asked"))
    monkeypatch.setattr(amx, "run_check", lambda: pytest.fail("a child was started"))
    assert not amx.has_amx_kernels() and not amx.amx_crashes() and not amx.amx_weights_here()
    assert amx.loads_use_extra_buffers()


def test_where_amx_crashes_loads_drop_its_buffer_or_else_every_extra_buffer(monkeypatch):
    import llama_cpp

    drops = []
    monkeypatch.setattr(amx, "drop_amx_buffer", lambda: drops.append(1) or True)
    monkeypatch.setattr(amx, "runs_without_amx", lambda: True)
    params = llama_cpp.llama_model_default_params()
    assert params.use_extra_bufts
    monkeypatch.setattr(amx, "amx_crashes", lambda: False)
    amx.safe_model_params(params)
    assert params.use_extra_bufts and not drops  # nothing to drop where the kernels run
    monkeypatch.setattr(amx, "amx_crashes", lambda: True)
    amx.safe_model_params(params)
    assert params.use_extra_bufts and drops  # AMX out of the list; repack stays
    assert amx.loads_use_extra_buffers()
    # the second child died: every extra buffer goes, and this process writes nothing
    drops.clear()
    monkeypatch.setattr(amx, "runs_without_amx", lambda: False)
    amx.safe_model_params(params)
    assert not params.use_extra_bufts and not amx.loads_use_extra_buffers() and not drops


def test_the_drop_is_proven_in_a_child_first_and_its_verdict_kept(monkeypatch):
    """Dropping AMX writes into ggml's memory: a child does it first, and a child that dies
    (or cannot reach the list, exit 3) means every extra buffer goes instead."""
    monkeypatch.setattr(amx, "_key", lambda: "build|kernel|cpu")
    commands = []

    def command(path, without_amx=False):
        commands.append(without_amx)
        return [sys.executable, "-c", "import sys; sys.exit(3)"]

    monkeypatch.setattr(amx, "check_command", command)
    assert amx.runs_without_amx() is False and commands == [True]
    assert amx._cached("build|kernel|cpu|" + amx.WITHOUT_AMX) is False
    assert amx._cached("build|kernel|cpu") is None  # the AMX verdict is another one
    amx.runs_without_amx.cache_clear()
    assert amx.runs_without_amx() is False and commands == [True]  # kept: no second child
    _child(monkeypatch, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert amx.run_check(without_amx=True) is False


_DROP_CHILD = """
import json, sys
import llama_cpp
from rooflight.gguf.synthetic import write_model
from rooflight.runtime import amx
before = amx.extra_buffer_names()
dropped = amx.drop_amx_buffer()
after = amx.extra_buffer_names()
path = write_model(sys.argv[1], n_layer=1, n_embd=256, n_head=4, n_head_kv=4, n_ff=512, ftype="Q4_0", pure=True)
llm = llama_cpp.Llama(model_path=str(path), n_ctx=128, n_threads=2, n_gpu_layers=0, verbose=True)
llm.eval([3 + i for i in range(16)])
print(json.dumps([before, dropped, after]), flush=True)
"""


def test_dropping_the_amx_buffer_keeps_the_others_and_the_repack_kernels_take_q4_0(tmp_path):
    """The real list of this build, changed in a child (the change is process-wide): AMX
    leaves it, the other types stay in order, and a Q4_0 model then loads into llama.cpp's
    repack buffer where this CPU's build has one, and runs. On an AMX machine whose kernels
    crash this child would die at its first multiply if AMX were still in the list."""
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-c", _DROP_CHILD, str(tmp_path / "q4_0.gguf")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    before, dropped, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert dropped is True and before is not None
    assert after == [n for n in before if n != amx.AMX_BUFFER]
    assert "AMX model buffer" not in done.stderr
    if "CPU_REPACK" in after:
        assert "CPU_REPACK model buffer size" in done.stderr


@pytest.mark.skipif(not amx.build_has_amx(), reason="this llama.cpp build has no AMX kernels")
def test_on_an_amx_build_the_real_check_runs_and_a_q4_k_model_then_runs(tmp_path):
    """The real child on this machine, then the Gemma package model (Q4_K_M, the types the
    AMX buffer takes) loaded as chats load it: on a machine where the kernels crash this
    process would die here without the guard."""
    from gemma_model import gemma_270m_path
    from rooflight.estimate.config import RunConfig
    from rooflight.runtime.engine import new_llama

    crashes = amx.amx_crashes()
    assert amx._cached(amx._key()) is (not crashes)
    llm = new_llama(str(gemma_270m_path()), RunConfig(n_ctx=256, n_gpu_layers=0, n_threads=2), verbose=False)
    try:
        llm.eval(llm.tokenize(b"The quick brown fox jumps over the lazy dog"))
        assert llm.model_params.use_extra_bufts is amx.loads_use_extra_buffers()
        assert amx.AMX_BUFFER not in (amx.extra_buffer_names() or []) or not crashes
    finally:
        llm.close()


def test_another_llama_cpp_build_loaded_through_its_path_is_another_build(tmp_path, monkeypatch):
    """LLAMA_CPP_LIB_PATH makes llama-cpp-python load another build's libraries (the RPC build,
    or one with llama.cpp's AMX fix): the AMX verdict is that build's; the probe stays the
    installed build's (an RPC chat runs the same sources)."""
    from rooflight.runtime.build import llama_build, loaded_llama_build

    monkeypatch.delenv("LLAMA_CPP_LIB_PATH", raising=False)
    installed = llama_build()
    assert loaded_llama_build() == installed
    (tmp_path / "libllama.so").write_bytes(b"\x7fELF another build")
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path))
    other = loaded_llama_build()
    assert other != installed and other.split(" [")[0] == installed.split(" [")[0]
    assert llama_build() == installed
    assert amx._key().startswith(other + "|")
    (tmp_path / "libggml-cpu.so").write_bytes(b"\x7fELF rebuilt")
    assert loaded_llama_build() != other
