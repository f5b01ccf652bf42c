"""Human-readable text for `rooflight hardware`."""

from __future__ import annotations

from .profile import PEAK_BANDWIDTH_SOURCE, GPUInfo, HardwareProfile

GiB = 1 << 30


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / GiB:.1f}"


def _gpu_line(g: GPUInfo) -> str:
    parts = []
    if g.unified_memory:
        parts.append(f"{_gib(g.vram_total_bytes)} GiB unified memory usable by the GPU")
    else:
        free = g.vram_free_bytes if g.vram_free_bytes is not None else g.vram_total_bytes
        parts.append(f"VRAM {_gib(free)} GiB free of {_gib(g.vram_total_bytes)} GiB")
    parts.append(f"{g.bandwidth_gbs:.0f} GB/s" if g.bandwidth_gbs else "bandwidth unknown")
    parts.append(f"{g.fp16_tflops:.1f} FP16 TFLOPS" if g.fp16_tflops else "FP16 TFLOPS unknown")
    if g.compute_capability:
        parts.append(f"compute capability {g.compute_capability}")
    if g.sm_count:
        unit = {"nvidia": "SMs", "amd": "CUs", "intel": "Xe cores", "apple": "GPU cores"}
        parts.append(f"{g.sm_count} {unit.get(g.vendor, 'cores')}")
    if g.pcie_gbs:
        parts.append(f"PCIe {g.pcie_gbs:.0f} GB/s")
    return f"GPU {g.index}: {g.name} ({g.vendor}) - " + ", ".join(parts) + f" [{g.source}]"


def format_profile(profile: HardwareProfile) -> str:
    """Several lines: CPU, RAM, each GPU, backend, then warnings prefixed "warning: "."""
    c = profile.cpu
    freq = f", up to {c.max_freq_mhz / 1000:.2f} GHz" if c.max_freq_mhz else ""
    arch = f", {c.arch}" if c.arch else ""
    isa = " ".join(c.isa) if c.isa else "none detected"
    source = "datasheet peak" if c.ram_bandwidth_source == PEAK_BANDWIDTH_SOURCE else c.ram_bandwidth_source
    bw = (
        f"{c.ram_bandwidth_gbs:.1f} GB/s ({source})"
        if c.ram_bandwidth_gbs
        else f"unknown ({source})"
    )
    lines = [
        f"CPU: {c.name} - {c.counts_text()}{arch}{freq}",
        f"ISA: {isa}",
        f"RAM: {_gib(c.ram_total_bytes)} GiB total, {_gib(c.ram_available_bytes)} GiB "
        f"available, bandwidth {bw}",
    ]
    if profile.gpus:
        lines += [_gpu_line(g) for g in profile.gpus]
    else:
        lines.append("GPU: none usable")
    lines.append(f"Backend: {profile.backend}{build_words(profile)}")
    if c.amx_weights:  # where they crash, the warning below says so
        from rooflight.estimate.amx_layout import LAYOUT_COST_WORDS

        lines.append(f"AMX: llama.cpp keeps quantized weights in its AMX buffer (packed: {LAYOUT_COST_WORDS}; "
                     "estimates count it)")
    lines += [f"warning: {w}" for w in profile.warnings]
    return "\n".join(lines)


def build_words(profile: HardwareProfile) -> str:
    """What the backend's build changes in the estimate, for after its name ("" mostly)."""
    if profile.sycl_f16 is None:
        return ""
    return ", FP16 build" if profile.sycl_f16 else ", FP32 build (GGML_SYCL_F16 off)"
