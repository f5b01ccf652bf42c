"""What share of this computer the process may use: its CPU affinity, and the CPU quota
and memory limit of its control group (a container: Docker's --cpus and --memory, a
Kubernetes pod's limits; systemd's CPUQuota= and MemoryMax=; taskset and numactl).

psutil reports the whole computer. Inside such limits a plan that starts one llama.cpp
thread per host core puts dozens of threads on two CPUs' worth of time (each token waits at
every barrier for a descheduled thread), and a model that fits the host's RAM but not the
container's limit is killed by the kernel's OOM killer or, mapped from disk, pages in
from it at every token. So detection, plans, the probe, the thread sweep, the busy watch, the
live monitor and `rooflight rpc-server` count what this process may use (`process_share`, `memory_now`), and
detection says so in a warning when that is less than the computer has.

Linux only for the control groups (v2, and v1 as on older Docker hosts); the affinity also
on Windows and FreeBSD (psutil). Never raises: what cannot be read is no limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import psutil

from rooflight.units import size_text

from .profile import plural
from .sysfs import read_int, read_text

PROC_SELF_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")
SYSFS_ROOT = Path("/sys")
# cgroup v1 writes "no limit" as the largest page-aligned 64-bit value (9223372036854771712)
_UNLIMITED = 1 << 62
T = TypeVar("T", int, float)


@dataclass(frozen=True)
class CgroupLimits:
    cpu_quota: float | None = None  # CPUs' worth of time per period (quota / period); None: none
    memory_max: int | None = None  # bytes; None: none
    # bytes the group uses now, less its inactive file cache, which the kernel reclaims
    # before it kills: what `docker stats` shows (docker/cli stats_helpers.go, v1
    # usage - total_inactive_file, v2 usage - inactive_file, "consistent with cadvisor and
    # containerd/CRI"; quoted in moby/moby#42140)
    memory_used: int | None = None


@dataclass(frozen=True)
class ProcessShare:
    """The CPUs and RAM this process may use, beside what the computer has."""

    cores: int
    threads: int
    host_threads: int
    ram_total: int
    ram_available: int
    host_ram_total: int
    cpu_reason: str | None = None  # why fewer CPUs than the host's ("its CPU affinity"...)
    ram_reason: str | None = None  # why less RAM
    cpu_quota: float | None = None  # the quota, where it is what limits the threads

    def warnings(self) -> list[str]:
        """One sentence per limit, for detection's warnings."""
        out = []
        if self.cpu_reason:
            n = f"{self.cpu_quota:.3g}" if self.cpu_quota is not None else str(self.threads)
            out.append(f"This process may use {n} of this computer's {self.host_threads} CPUs "
                       f"({self.cpu_reason}): plans, the probe and benchmarks use {plural(self.cores, 'thread')}.")
        if self.ram_reason:
            out.append(f"This process may use {size_text(self.ram_total)} of this computer's "
                       f"{size_text(self.host_ram_total)} of RAM ({self.ram_reason}): models must fit in that.")
        return out


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _stat(path: Path, key: str) -> int:
    """One counter of a memory.stat file (0 when absent)."""
    for line in (read_text(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return _int(value) or 0
    return 0


def _min(a: T | None, b: T) -> T:
    return b if a is None else min(a, b)


def _own_groups(proc_self_cgroup: Path) -> tuple[str | None, dict[str, str]]:
    """(the v2 path, {v1 controller: path}) from /proc/self/cgroup."""
    v2, v1 = None, {}
    for line in (read_text(proc_self_cgroup) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            v2 = path
        for c in controllers.split(","):
            if c:
                v1[c] = path
    return v2, v1


def _chain(mount: Path, path: str) -> list[Path]:
    """The group's folder and each parent up to the mount. Inside a container the mount
    is often the container's own group while /proc/self/cgroup names the host's path:
    then the mount itself is the group."""
    here = mount / path.strip("/") if path.strip("/") else mount
    if not here.is_dir():
        here = mount
    out = [here]
    while here != mount and mount in here.parents:
        here = here.parent
        out.append(here)
    return out


def _v1_mount(root: Path, controller: str) -> Path | None:
    try:
        found = sorted(d for d in root.iterdir() if controller in d.name.split(",") and d.is_dir())
    except OSError:
        return None
    return found[0] if found else None


def _v2_limits(root: Path, path: str) -> CgroupLimits:
    quota: float | None = None
    mem_max: int | None = None
    chain = _chain(root, path)
    for d in chain:
        cpu_max = (read_text(d / "cpu.max") or "max").split()
        q, period = _int(cpu_max[0]), _int(cpu_max[1]) if len(cpu_max) > 1 else None
        if q is not None and period:
            quota = _min(quota, q / period)
        m = read_int(d / "memory.max")  # "max" reads as None
        if m is not None and m < _UNLIMITED:
            mem_max = _min(mem_max, m)
    current = read_int(chain[0] / "memory.current")
    used = None if current is None else max(0, current - _stat(chain[0] / "memory.stat", "inactive_file"))
    return CgroupLimits(quota, mem_max, used)


def _v1_limits(root: Path, paths: dict[str, str]) -> CgroupLimits:
    quota: float | None = None
    mem_max: int | None = None
    used: int | None = None
    cpu_mount = _v1_mount(root, "cpu")
    if cpu_mount is not None and "cpu" in paths:
        for d in _chain(cpu_mount, paths["cpu"]):
            q, period = read_int(d / "cpu.cfs_quota_us"), read_int(d / "cpu.cfs_period_us")
            if q is not None and q > 0 and period:  # -1: no quota
                quota = _min(quota, q / period)
    mem_mount = _v1_mount(root, "memory")
    if mem_mount is not None and "memory" in paths:
        chain = _chain(mem_mount, paths["memory"])
        for d in chain:
            m = read_int(d / "memory.limit_in_bytes")
            if m is not None and m < _UNLIMITED:
                mem_max = _min(mem_max, m)
        usage = read_int(chain[0] / "memory.usage_in_bytes")
        if usage is not None:
            used = max(0, usage - _stat(chain[0] / "memory.stat", "total_inactive_file"))
    return CgroupLimits(quota, mem_max, used)


def read_cgroup_limits(proc_self_cgroup: Path = PROC_SELF_CGROUP, root: Path = CGROUP_ROOT) -> CgroupLimits:
    """The tightest CPU quota and memory limit of this process's group and its parents:
    cgroup v2 where it is mounted at the root (its controllers there), else v1's."""
    v2, v1 = _own_groups(proc_self_cgroup)
    if v2 is not None and (root / "cgroup.controllers").exists():
        got = _v2_limits(root, v2)
    else:
        got = _v1_limits(root, v1)
    return CgroupLimits(got.cpu_quota, got.memory_max, got.memory_used if got.memory_max is not None else None)


def allowed_cpus() -> tuple[int, ...] | None:
    """The CPUs this process may run on (taskset, numactl, a cpuset); None where the
    platform does not say (macOS)."""
    try:
        return tuple(sorted(psutil.Process().cpu_affinity()))
    except (AttributeError, NotImplementedError, psutil.Error, OSError):
        return None


def cores_among(cpus: Sequence[int], sysfs_root: Path = SYSFS_ROOT) -> int | None:
    """Physical cores that hold these logical CPUs (Linux topology); None if unreadable."""
    cores = set()
    for n in cpus:
        topo = sysfs_root / f"devices/system/cpu/cpu{n}/topology"
        core, package = read_text(topo / "core_id"), read_text(topo / "physical_package_id")
        if core is None:
            return None
        cores.add((package, core))
    return len(cores) or None


def _ram(lim: CgroupLimits) -> tuple[int, int, int, str | None]:
    """(total, available, the host's total, why less) bytes of RAM for this process."""
    mem = psutil.virtual_memory()
    if lim.memory_max is None or lim.memory_max >= mem.total:
        return int(mem.total), int(mem.available), int(mem.total), None
    available = max(0, min(int(mem.available), lim.memory_max - (lim.memory_used or 0)))
    return lim.memory_max, available, int(mem.total), "a container or cgroup memory limit"


def _limits(read: Callable[[], CgroupLimits]) -> CgroupLimits:
    try:
        return read()
    except Exception:  # a detection must not fail on an odd cgroup tree
        return CgroupLimits()


def process_share(
    *,
    cpus: Callable[[], tuple[int, ...] | None] = allowed_cpus,
    limits: Callable[[], CgroupLimits] = read_cgroup_limits,
    sysfs_root: Path = SYSFS_ROOT,
) -> ProcessShare:
    """What this process may use. The injectables are for tests."""
    host_threads = psutil.cpu_count(logical=True) or 1
    host_cores = psutil.cpu_count(logical=False) or host_threads
    lim = _limits(limits)
    threads, cores, reasons, quota = host_threads, host_cores, [], None
    allowed = cpus()
    if allowed and len(allowed) < host_threads:
        threads = len(allowed)
        # the physical cores behind them; where the topology is unreadable, the host's ratio
        cores = cores_among(allowed, sysfs_root) or max(1, round(threads * host_cores / host_threads))
        reasons.append("its CPU affinity")
    if lim.cpu_quota is not None and math.ceil(lim.cpu_quota) < threads:
        # a quota of 1.5 CPUs runs two threads: one would leave half a CPU's time unused
        threads = max(1, math.ceil(lim.cpu_quota))
        reasons.append("a container or cgroup CPU quota")
        quota = lim.cpu_quota
    ram_total, ram_available, host_ram, ram_reason = _ram(lim)
    return ProcessShare(cores=max(1, min(cores, threads)), threads=threads,
                        host_threads=host_threads, ram_total=ram_total, ram_available=ram_available,
                        host_ram_total=host_ram, cpu_reason=" and ".join(reasons) or None,
                        ram_reason=ram_reason, cpu_quota=quota)


def memory_now(limits: Callable[[], CgroupLimits] = read_cgroup_limits) -> tuple[int, int]:
    """(total, available) bytes of RAM for this process now: the host's, within its group's limit."""
    total, available, _, _ = _ram(_limits(limits))
    return total, available


def cpu_counts() -> tuple[int, int]:
    """(cores, logical CPUs) this process may use."""
    share = process_share()
    return share.cores, share.threads
