"""The machine, as the estimator sees it: plain frozen dataclasses.

Serialised to and from the JSON documented in CONTRACT.md ("Hardware profile").
Sizes are bytes, bandwidths GB/s (1e9 B/s), compute TFLOP/s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace

# ram_bandwidth_source of a datasheet figure (a profile's or a published CPU's), not a measurement
PEAK_BANDWIDTH_SOURCE = "peak"

# For each vendor, the llama.cpp backends that can drive its GPUs, best first (backend.py picks
# one). Vulkan drives all three discrete vendors, more slowly than the native one.
BACKENDS_BY_VENDOR = {
    "nvidia": ("cuda", "vulkan"),
    "amd": ("rocm", "vulkan"),
    "intel": ("sycl", "vulkan"),
    "apple": ("metal",),
}


def offload_gpus_of(gpus: Iterable[GPUInfo], backend: str) -> tuple[GPUInfo, ...]:
    """The GPUs llama.cpp offloads to with this backend, as src/llama.cpp picks its devices:
    those the backend drives (a CUDA build sees no AMD iGPU), and integrated ones (unified
    memory; Apple's are the only GPU there) only where none of them is discrete ("add
    integrated GPUs only if no discrete GPUs were found"): a laptop's Radeon 780M beside its
    RTX 4060 gets no layer."""
    if backend == "cpu":
        return ()
    driven = tuple(g for g in gpus if backend in BACKENDS_BY_VENDOR.get(g.vendor, ()))
    discrete = tuple(g for g in driven if not is_integrated(g))
    return discrete or driven


def is_integrated(gpu: GPUInfo) -> bool:
    """Whether llama.cpp takes this GPU as integrated (its IGPU device type): one that shares
    the system's memory, but for an Apple chip's, the only GPU there."""
    return gpu.unified_memory and gpu.vendor != "apple"


def shared_memory_gpu(index: int, name: str, vendor: str, memory_bytes: int) -> GPUInfo:
    """A detected GPU whose memory is a share of the RAM (an APU's GTT, an Intel iGPU's or a
    Jetson's share): what it can use now is bounded by the RAM free now, which detection
    fills in (vram_free None); bandwidth and FP16 come from the GPU table by name."""
    return GPUInfo(index=index, name=name, vendor=vendor, vram_total_bytes=memory_bytes,
                   vram_free_bytes=None, bandwidth_gbs=None, fp16_tflops=None,
                   unified_memory=True, source="detected")


def plural(n: int, noun: str) -> str:
    """ "1 thread", "2 threads"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class CPUInfo:
    name: str
    cores: int  # physical cores
    threads: int  # logical CPUs
    isa: tuple[str, ...]  # llama.cpp-relevant flags: avx, avx2, fma, f16c, avx512f, ..., neon, dotprod
    ram_total_bytes: int
    ram_available_bytes: int
    ram_bandwidth_gbs: float | None  # measured copy bandwidth (read+write bytes / s), or see the source
    # measured | cached | profile | table | assumed | unknown, or "peak": a datasheet figure
    # (channels x 8 B x MT/s) that estimate/perf.py prices at the share published CPUs reach
    ram_bandwidth_source: str
    max_freq_mhz: float | None = None
    arch: str = ""  # x86_64 | aarch64 | arm64 ...
    # whether llama.cpp keeps weights in its AMX buffer here (runtime/amx.py: its build has AMX
    # kernels and they run); None: as a build for this CPU would (estimate/amx_layout.py)
    amx_weights: bool | None = None

    def counts_text(self) -> str:
        """"8 cores, 16 threads"; "1 core, 1 thread"."""
        return f"{plural(self.cores, 'core')}, {plural(self.threads, 'thread')}"

    def with_ram_total(self, total: int) -> CPUInfo:
        """This CPU with `total` bytes of RAM, of which what other programs use now stays used
        (a planned machine: more RAM, or a chip's shared pool)."""
        in_use = self.ram_total_bytes - self.ram_available_bytes
        return replace(self, ram_total_bytes=total, ram_available_bytes=max(0, total - in_use))


@dataclass(frozen=True)
class GPUInfo:
    index: int
    name: str
    vendor: str  # nvidia | amd | intel | apple
    vram_total_bytes: int | None
    vram_free_bytes: int | None  # None means all of it is free
    bandwidth_gbs: float | None
    fp16_tflops: float | None  # dense FP16 tensor-core (or matrix-unit) throughput
    unified_memory: bool = False
    compute_capability: str | None = None  # NVIDIA only, "8.9"
    sm_count: int | None = None  # NVIDIA SMs / AMD CUs / Apple GPU cores
    pcie_gbs: float | None = None  # host<->device link, one direction
    source: str = "detected"  # detected | detected+table | profile | table | profile+table
    pci_bus_id: str | None = None  # "00000000:01:00.0" (NVML): matches the GPU to llama.cpp's device

    @property
    def free_bytes(self) -> int:
        """Memory usable now: free VRAM if known, else the total."""
        if self.vram_free_bytes is not None:
            return self.vram_free_bytes
        return self.vram_total_bytes or 0


@dataclass(frozen=True)
class RemoteMachine:
    """A helper machine running llama.cpp's rpc-server (issue 20, CONTRACT.md "remotes").

    llama.cpp offloads layers to it as if its devices were local: its GPUs when it has
    any (the server exposes every non-CPU device), else its CPU."""

    endpoint: str  # host:port of its rpc-server
    name: str
    cpu: CPUInfo
    gpus: tuple[GPUInfo, ...] = ()
    backend: str = "cpu"  # what that machine's llama.cpp build runs on
    link_gbps: float = 1.0  # network link to it, gigabits per second (1 GbE = 1.0)
    rtt_ms: float = 0.5  # round trip time to it
    sycl_f16: bool | None = None  # its SYCL build's GGML_SYCL_F16 (HardwareProfile.sycl_f16)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cpu"] = {k: v for k, v in d["cpu"].items() if v not in (None, "")}  # null/"" read as "not given"
        d["cpu"]["isa"] = list(self.cpu.isa)
        d["gpus"] = [asdict(g) for g in self.gpus]
        if self.sycl_f16 is None:
            del d["sycl_f16"]
        return d


@dataclass(frozen=True)
class HardwareProfile:
    cpu: CPUInfo
    gpus: tuple[GPUInfo, ...] = ()
    backend: str = "cpu"  # cuda | rocm | metal | vulkan | sycl | cpu: what llama.cpp would use here
    warnings: tuple[str, ...] = field(default_factory=tuple)
    remotes: tuple[RemoteMachine, ...] = ()  # llama.cpp RPC servers this machine offloads to
    # a SYCL build's GGML_SYCL_F16: False when it was built without it (the CMake default),
    # which multiplies prompts in FP32 (estimate/tensor_rates.py); None: not SYCL, or not known
    sycl_f16: bool | None = None
    # GPU roofline constants this machine's probe measured (estimate/probe_gpu.py), as
    # (plan device name, BackendConstants); set for an estimate, never saved with the profile
    gpu_constants: tuple = ()

    @property
    def offload_gpus(self) -> tuple[GPUInfo, ...]:
        """The GPUs llama.cpp offloads to here (offload_gpus_of); `gpus` keeps every GPU
        detected, for display and warnings."""
        return offload_gpus_of(self.gpus, self.backend)

    @property
    def fp32_gemm(self) -> bool:
        """Whether this machine's llama.cpp multiplies prompts' weights in FP32 on its GPUs."""
        return self.backend == "sycl" and self.sycl_f16 is False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cpu"]["isa"] = list(self.cpu.isa)
        if self.cpu.amx_weights is None:
            del d["cpu"]["amx_weights"]
        d["gpus"] = [asdict(g) for g in self.gpus]
        d["warnings"] = list(self.warnings)
        if self.remotes:
            d["remotes"] = [r.to_dict() for r in self.remotes]
        else:
            del d["remotes"]
        if self.sycl_f16 is None:
            del d["sycl_f16"]
        del d["gpu_constants"]
        return d
