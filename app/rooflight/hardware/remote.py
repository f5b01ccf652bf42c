"""The devices llama.cpp sees on remote RPC machines (issue 20).

An rpc-server exposes every non-CPU device of its machine, or its CPU when it has none
(tools/rpc/rpc-server.cpp get_devices). The main process lists RPC devices first, in the
order the servers were added, then its own GPUs (src/llama.cpp, "add RPC servers at the
front of the list to minimize network transfers"). Rooflight names them rpc0, rpc1, ...
in that order (CONTRACT.md "remotes").
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .profile import CPUInfo, GPUInfo, HardwareProfile, RemoteMachine

RPC_PREFIX = "rpc"


@dataclass(frozen=True)
class RemoteDevice:
    name: str  # rpc0, rpc1, ...
    machine: RemoteMachine
    gpu: GPUInfo | None  # None: the server runs on its machine's CPU

    @property
    def is_cpu(self) -> bool:
        return self.gpu is None

    @property
    def backend(self) -> str:
        return "cpu" if self.gpu is None else self.machine.backend

    @property
    def free_bytes(self) -> int:
        if self.gpu is None:
            return self.machine.cpu.ram_available_bytes
        return self.gpu.free_bytes

    @property
    def split_bytes(self) -> int:
        """The free memory its server reports, by which llama.cpp splits layers: a CPU
        server reports all of its RAM as free (ggml-cpu.cpp, Linux and macOS)."""
        return self.machine.cpu.ram_total_bytes if self.gpu is None else self.gpu.free_bytes

    @property
    def total_bytes(self) -> int:
        if self.gpu is None:
            return self.machine.cpu.ram_total_bytes
        return self.gpu.vram_total_bytes or self.gpu.free_bytes

    def local_view(self) -> tuple[HardwareProfile, str]:
        """This device as if it were a device of a machine of its own: the profile and the
        device name under which the local estimator functions price it (one roofline)."""
        m = self.machine
        if self.gpu is None:
            return HardwareProfile(cpu=m.cpu, backend="cpu"), "cpu"
        return (HardwareProfile(cpu=m.cpu, gpus=(self.gpu,), backend=m.backend, sycl_f16=m.sycl_f16),
                f"gpu{self.gpu.index}")


def is_remote(device: str) -> bool:
    return device.startswith(RPC_PREFIX)


@functools.lru_cache(maxsize=256)
def remote_devices(hardware: HardwareProfile) -> tuple[RemoteDevice, ...]:
    out: list[RemoteDevice] = []
    for machine in hardware.remotes:
        if machine.gpus:
            for gpu in machine.gpus:
                out.append(RemoteDevice(f"{RPC_PREFIX}{len(out)}", machine, gpu))
        else:
            out.append(RemoteDevice(f"{RPC_PREFIX}{len(out)}", machine, None))
    return tuple(out)


def remote_device(hardware: HardwareProfile, device: str) -> RemoteDevice:
    return next(d for d in remote_devices(hardware) if d.name == device)


def placeholder_cpu(name: str) -> CPUInfo:
    """The CPU of a remote machine whose profile lists only its GPUs: llama.cpp does not
    use it there (the server exposes the GPUs), so only its name is shown."""
    return CPUInfo(name=f"CPU of {name}", cores=1, threads=1, isa=(), ram_total_bytes=0,
                   ram_available_bytes=0, ram_bandwidth_gbs=None, ram_bandwidth_source="unknown")
