"""What share of the computer this process may use (hardware/limits.py): cgroup v1 and v2
trees as containers lay them out, the affinity, and the real thing where this machine
allows it: a child under taskset, and one in a real cgroup v1 group with a memory limit
and a CPU quota (root only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from rooflight.hardware import limits
from rooflight.hardware.cpu import detect_cpu
from rooflight.hardware.limits import (
    CgroupLimits,
    cores_among,
    memory_now,
    process_share,
    read_cgroup_limits,
)
from rooflight.runtime import rpc

GIB = 1 << 30


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _v2_tree(tmp_path: Path, own: str) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    _write(root / "cgroup.controllers", "cpuset cpu io memory pids")
    proc = tmp_path / "proc_self_cgroup"
    _write(proc, f"0::{own}\n")
    return proc, root


def test_v2_takes_the_tightest_limit_of_the_group_and_its_parents(tmp_path):
    proc, root = _v2_tree(tmp_path, "/system.slice/app.scope")
    leaf, parent = root / "system.slice/app.scope", root / "system.slice"
    _write(leaf / "cpu.max", "150000 100000")
    _write(parent / "cpu.max", "max 100000")
    _write(leaf / "memory.max", "max")
    _write(parent / "memory.max", str(4 * GIB))
    _write(leaf / "memory.current", str(GIB))
    _write(leaf / "memory.stat", "anon 100\ninactive_file 268435456\nactive_file 5\n")
    got = read_cgroup_limits(proc, root)
    assert got == CgroupLimits(cpu_quota=1.5, memory_max=4 * GIB, memory_used=GIB - 256 * (1 << 20))


def test_v2_inside_a_container_reads_the_root_it_mounts(tmp_path):
    # with a cgroup namespace the group is "/"; without one it is the host's path, which
    # does not exist inside the container's mount: the mount itself is the group
    for own in ("/", "/docker/0123abcd"):
        proc, root = _v2_tree(tmp_path / own.strip("/").replace("/", "_"), own)
        _write(root / "cpu.max", "200000 100000")
        _write(root / "memory.max", str(2 * GIB))
        _write(root / "memory.current", str(GIB // 2))
        got = read_cgroup_limits(proc, root)
        assert (got.cpu_quota, got.memory_max, got.memory_used) == (2.0, 2 * GIB, GIB // 2)


def test_v1_reads_the_cpu_and_memory_hierarchies(tmp_path):
    root = tmp_path / "cgroup"
    proc = tmp_path / "proc_self_cgroup"
    _write(proc, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n")
    cpu = root / "cpu,cpuacct"
    _write(cpu / "cpu.cfs_quota_us", "-1")
    _write(cpu / "cpu.cfs_period_us", "100000")
    _write(cpu / "docker/abc/cpu.cfs_quota_us", "50000")
    _write(cpu / "docker/abc/cpu.cfs_period_us", "100000")
    mem = root / "memory"
    _write(mem / "memory.limit_in_bytes", "9223372036854771712")  # v1's "no limit"
    _write(mem / "docker/abc/memory.limit_in_bytes", str(2 * GIB))
    _write(mem / "docker/abc/memory.usage_in_bytes", str(GIB))
    _write(mem / "docker/abc/memory.stat", "cache 10\ntotal_inactive_file 536870912\n")
    assert read_cgroup_limits(proc, root) == CgroupLimits(cpu_quota=0.5, memory_max=2 * GIB, memory_used=GIB // 2)


def test_no_limits_where_nothing_is_readable_or_set(tmp_path):
    assert read_cgroup_limits(tmp_path / "missing", tmp_path / "none") == CgroupLimits()
    proc, root = _v2_tree(tmp_path, "/")
    _write(root / "cpu.max", "max 100000")
    _write(root / "memory.max", "max")
    _write(root / "memory.current", "12345")
    assert read_cgroup_limits(proc, root) == CgroupLimits()  # usage means nothing without a limit
    _write(root / "cpu.max", "garbage")
    assert read_cgroup_limits(proc, root) == CgroupLimits()


def test_cores_among_counts_physical_cores_behind_logical_cpus(tmp_path):
    for cpu, core in enumerate((0, 0, 1, 1)):  # two cores, SMT siblings
        topo = tmp_path / f"devices/system/cpu/cpu{cpu}/topology"
        _write(topo / "core_id", str(core))
        _write(topo / "physical_package_id", "0")
    assert cores_among((0, 1, 2, 3), tmp_path) == 2
    assert cores_among((0, 1), tmp_path) == 1
    assert cores_among((0, 7), tmp_path) is None  # unreadable: the caller falls back


def test_process_share_within_a_quota_and_a_memory_limit():
    host_threads = psutil.cpu_count() or 1
    mem = psutil.virtual_memory()
    share = process_share(cpus=lambda: None,
                          limits=lambda: CgroupLimits(cpu_quota=0.5, memory_max=GIB, memory_used=GIB // 4))
    assert (share.cores, share.threads) == (1, 1)
    assert share.host_threads == host_threads
    assert share.ram_total == GIB and share.host_ram_total == mem.total
    assert share.ram_available <= GIB - GIB // 4
    warnings = share.warnings()
    if host_threads > 1:
        assert warnings[0] == (f"This process may use 0.5 of this computer's {host_threads} CPUs (a container or "
                               "cgroup CPU quota): plans, the probe and benchmarks use 1 thread.")
    ram_line = warnings[-1]
    assert ram_line.startswith("This process may use 1.07 GB of this computer's ")
    assert ram_line.endswith("GB of RAM (a container or cgroup memory limit): models must fit in that.")


def test_a_limit_above_what_the_host_has_changes_nothing():
    share = process_share(cpus=lambda: None, limits=lambda: CgroupLimits(cpu_quota=1e6, memory_max=1 << 60))
    assert share.warnings() == []
    assert (share.threads, share.ram_total) == (psutil.cpu_count(), psutil.virtual_memory().total)
    assert memory_now(lambda: CgroupLimits(memory_max=GIB, memory_used=GIB))[1] == 0
    assert process_share(limits=lambda: 1 / 0).ram_reason is None  # an odd tree: no limit, no crash


def test_detect_cpu_reports_the_share_and_says_why():
    share = process_share(cpus=lambda: None, limits=lambda: CgroupLimits(memory_max=2 * GIB, memory_used=0))
    cpu, warnings = detect_cpu(share=lambda: share)
    assert cpu.ram_total_bytes == 2 * GIB and cpu.ram_available_bytes <= 2 * GIB
    assert any("memory limit" in w for w in warnings)


pytestmark_taskset = pytest.mark.skipif(
    shutil.which("taskset") is None or (psutil.cpu_count() or 1) < 2 or not sys.platform.startswith("linux"),
    reason="needs Linux, taskset and two CPUs")

_CHILD = ("import json; from rooflight.hardware import limits; from rooflight.runtime.threads import "
          "candidate_threads; s = limits.process_share(); "
          "print(json.dumps([s.cores, s.threads, candidate_threads(), s.warnings()]))")


@pytestmark_taskset
def test_a_process_under_taskset_plans_for_its_one_cpu(tmp_path):
    out = subprocess.run(["taskset", "-c", "1", sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    cores, threads, candidates, warnings = json.loads(out)
    assert (cores, threads, candidates) == (1, 1, [1])
    assert warnings == [f"This process may use 1 of this computer's {psutil.cpu_count()} CPUs (its CPU affinity): "
                        "plans, the probe and benchmarks use 1 thread."]
    env = dict(os.environ, ROOFLIGHT_CACHE_DIR=str(tmp_path / "cache"), ROOFLIGHT_DATA_DIR=str(tmp_path / "data"))
    hw = json.loads(subprocess.run(["taskset", "-c", "1", sys.executable, "-m", "rooflight", "hardware", "--json"],
                                   capture_output=True, text=True, timeout=120, check=True, env=env).stdout)
    assert (hw["cpu"]["cores"], hw["cpu"]["threads"]) == (1, 1)
    assert any("its CPU affinity" in w for w in hw["warnings"])
    text = subprocess.run(["taskset", "-c", "1", sys.executable, "-m", "rooflight", "hardware"], capture_output=True,
                          text=True, timeout=120, check=True, env=env).stdout
    assert " - 1 core, 1 thread" in text.splitlines()[0]


_WATCH = ("import json, time; from rooflight.runtime.busy import Watch\n"
          "with Watch() as w: time.sleep(0.6)\n"
          "print(w.window.others_share)")


@pytestmark_taskset
def test_the_busy_watch_counts_only_the_cpus_our_threads_may_use():
    # a busy loop on CPU 0: a watch that may use CPU 1 only is not disturbed by it, one
    # that may use both sees it. Other work on CPU 1 (a second test run) would disturb both:
    # then the machine cannot show the difference, and the test says so rather than guess
    if psutil.cpu_percent(interval=0.5, percpu=True)[1] > 20:
        pytest.skip("CPU 1 is busy with other work: the watches cannot be compared")
    spin = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        pinned = float(subprocess.run(["taskset", "-c", "1", sys.executable, "-c", _WATCH], capture_output=True,
                                      text=True, timeout=60, check=True).stdout)
        free = float(subprocess.run([sys.executable, "-c", _WATCH], capture_output=True, text=True, timeout=60,
                                    check=True).stdout)
    finally:
        spin.kill()
        spin.wait()
    assert free > 0.3  # one of two CPUs busy
    assert pinned < free / 2


def _v1_group(controller: str) -> Path | None:
    root = limits.CGROUP_ROOT / controller
    if os.geteuid() != 0 or not (root / "cgroup.procs").exists() or not os.access(root, os.W_OK):
        return None
    return root / f"rooflight-test-{uuid.uuid4().hex[:8]}"


@pytest.mark.skipif(not sys.platform.startswith("linux") or _v1_group("memory") is None
                    or _v1_group("cpu") is None, reason="needs root and a writable cgroup v1 memory and cpu hierarchy")
def test_a_process_in_a_real_cgroup_plans_within_its_limits(tmp_path):
    mem, cpu = _v1_group("memory"), _v1_group("cpu")
    assert mem is not None and cpu is not None
    mem.mkdir()
    cpu.mkdir()
    try:
        (mem / "memory.limit_in_bytes").write_text(str(3 * 10**9))
        (cpu / "cpu.cfs_quota_us").write_text("50000")  # half a CPU per 100 ms period
        limit = int((mem / "memory.limit_in_bytes").read_text())  # the kernel rounds it to pages
        env = dict(os.environ, ROOFLIGHT_CACHE_DIR=str(tmp_path / "cache"), ROOFLIGHT_DATA_DIR=str(tmp_path / "data"))
        script = (f'echo $$ > {mem}/cgroup.procs && echo $$ > {cpu}/cgroup.procs && '
                  f'exec "{sys.executable}" -m rooflight hardware --json')
        hw = json.loads(subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120,
                                       check=True, env=env).stdout)
    finally:
        for group in (mem, cpu):
            for _ in range(50):  # the child has exited; the kernel may take a moment to let go
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
    assert hw["cpu"]["ram_total_bytes"] == limit
    assert hw["cpu"]["ram_available_bytes"] <= limit
    assert (hw["cpu"]["cores"], hw["cpu"]["threads"]) == (1, 1)
    assert any("0.5 of this computer's" in w and "CPU quota" in w for w in hw["warnings"])
    assert any("memory limit" in w for w in hw["warnings"])


@pytestmark_taskset
@pytest.mark.skipif(rpc.find_build() is None and not os.environ.get("CI"), reason="no RPC build of llama.cpp here")
def test_rpc_server_runs_the_threads_this_process_may_use():
    """llama.cpp's rpc-server defaults to half of the host's CPUs; under taskset (or a
    quota) `rooflight rpc-server` gives it the cores this process may use."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["taskset", "-c", "1", sys.executable, "-m", "rooflight", "rpc-server", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            args = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
            if args[0].endswith(b"ggml-rpc-server"):  # the command has become the server (execve)
                break
            time.sleep(0.1)
        assert args[0].endswith(b"ggml-rpc-server"), args
        assert args[args.index(b"--threads") + 1] == b"1"
    finally:
        proc.kill()
        proc.wait()
