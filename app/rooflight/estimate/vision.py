"""A vision projector's share of a plan: its memory, and the time to encode one image.

llama.cpp's mtmd library (tools/mtmd/clip.cpp) loads the projector beside the language
model: its weights go whole to one backend, the first GPU when llama-cpp-python asks for
the GPU (clip_ctx: ggml_backend_init_by_type(GPU)), else the CPU; at load it reserves the
compute buffer of one image at the projector's image size (warmup with
warmup_image_size = image_size). The runtime asks for the GPU exactly when the plan
offloads layers (runtime/vision.py), so the plan puts the projector where the model is.

Compute buffer: the peak of ggml's graph allocator over the ViT. Without flash attention
one layer's attention scores [n_patches, n_patches, n_head] in F32 dominate (Gemma 3's
896-pixel image: 4096 patches, 1.0 GiB; Ollama measured the same, dogkeeper886/ollama37
issue #63), next to six [n_patches, n_embd] F32 activations; with flash attention the
peak is the larger of five activations and the feed-forward's [n_patches, n_ff] plus
three. Fitted to what clip.cpp reported for 13 generated projectors (n_patches 256-1024,
n_embd 64-256, n_ff 96-1024, 1-8 heads, flash attention on and off): every one within
its 0.01 MiB rounding (tests/test_vision_plan.py checks three of them).
"""

from __future__ import annotations

from dataclasses import dataclass

from rooflight.estimate.config import RunConfig
from rooflight.estimate.probe import MachineProbe
from rooflight.gguf.projector import ProjectorSpec
from rooflight.hardware.profile import HardwareProfile

F32 = 4

# The encoder is GEMMs over its F16 (or Q8_0) weights like a language model's prefill, so
# it runs at the prefill efficiency perf.py uses for weights of that type on that device
# (bench/vision_encode.py, a 6-layer 768-wide F16 projector on the 2-core EPYC VM: 8 GFLOP/s
# in a heavily loaded run, ~147 GFLOP/s in a clean one, where this estimate was 2x too fast
# and the probe-based one 10% too slow).
# On this machine the probe's measured encode rate (estimate/probe.py EncodeFigure: these
# FLOPs over mtmd's measured time for a generated projector) replaces that efficiency for
# a CPU-encoded projector of the weight type it measured (encode_basis "probe"); a whole
# measured encode time replaces the estimate through plan_vision(measured_encode_s=...).


@dataclass(frozen=True)
class VisionPlan:
    device: str  # "cpu" | "gpu0": where llama.cpp puts the projector
    weights_bytes: int
    compute_bytes: int
    image_tokens: int
    encode_flops: float
    encode_s: float
    encode_basis: str  # "flops" (table efficiency) | "probe" (this machine's rate) | "measured"

    def to_dict(self, projector: ProjectorSpec) -> dict:
        return {
            **projector.to_dict(),
            "device": self.device,
            "compute_bytes": self.compute_bytes,
            "encode_flops": self.encode_flops,
            "encode_s": round(self.encode_s, 4),
            "encode_basis": self.encode_basis,
        }


def projector_device(hardware: HardwareProfile, cfg: RunConfig) -> str:
    """Where the projector runs: clip.cpp takes the registry's first GPU when told to use one,
    which is this machine's first offload GPU; without one the chat loads it on the CPU
    (runtime/engine.py passes use_gpu from here): were it told to use a GPU, clip.cpp would
    take an RPC server's, the only GPU-type devices left, and send it every image."""
    if hardware.offload_gpus and cfg.n_gpu_layers > 0:
        return f"gpu{min(g.index for g in hardware.offload_gpus)}"
    return "cpu"


def compute_buffer_bytes(proj: ProjectorSpec, flash_attn: bool) -> int:
    """clip.cpp's compute buffer for one image at the projector's image size."""
    p, e, f = proj.n_patches, proj.n_embd, proj.n_ff
    act = p * e * F32
    ffn = p * f * F32 + 3 * act
    if flash_attn:
        return max(5 * act, ffn)
    scores = p * p * proj.n_head * F32
    return max(scores + 6 * act, ffn)


def encode_flops(proj: ProjectorSpec) -> float:
    """Multiply-adds x 2 of encoding one image: patch embedding, the ViT, the projection."""
    p, e, f = proj.n_patches, proj.n_embd, proj.n_ff
    patch = 2 * p * 3 * proj.patch_size * proj.patch_size * e
    layer = 2 * p * (4 * e * e + 2 * e * f) + 2 * 2 * p * p * e  # GEMMs + QK^T and AV
    project = 2 * proj.image_tokens * e * max(proj.projection_dim, e)
    return float(patch + proj.n_layer * layer + project)


def plan_vision(
    proj: ProjectorSpec, hardware: HardwareProfile, cfg: RunConfig, *,
    device_flops: float, efficiency: float, measured_encode_s: float | None = None,
    basis: str = "flops",
) -> VisionPlan:
    """basis: what device_flops x efficiency stands on ("flops": the table's peak and
    efficiency; "probe": a measured rate, efficiency 1)."""
    device = projector_device(hardware, cfg)
    flops = encode_flops(proj)
    if measured_encode_s is not None:  # a whole measured encode of this projector
        encode_s, basis = measured_encode_s, "measured"
    else:
        encode_s = flops / (device_flops * efficiency)
    return VisionPlan(device, proj.weights_bytes, compute_buffer_bytes(proj, cfg.flash_attn),
                      proj.image_tokens, flops, encode_s, basis)


def add_projector_usage(
    usage: list[tuple[str, int, int, int, int]], proj: ProjectorSpec,
    hardware: HardwareProfile, cfg: RunConfig,
) -> list[tuple[str, int, int, int, int]]:
    """memory.plan_memory's per-device (device, weights, kv, compute, overhead) rows with
    the projector's weights and compute buffer added on its device."""
    device = projector_device(hardware, cfg)
    extra_w, extra_c = proj.weights_bytes, compute_buffer_bytes(proj, cfg.flash_attn)
    out, placed = [], False
    for name, w, kv, c, o in usage:
        if name == device:
            w, c, placed = w + extra_w, c + extra_c, True
        out.append((name, w, kv, c, o))
    if not placed:  # a GPU that got no layer still hosts it; the runtime overhead with it
        from rooflight.estimate.memory import GPU_OVERHEAD_BYTES, MIB

        overhead = GPU_OVERHEAD_BYTES.get(hardware.backend, 457 * MIB) if device != "cpu" else 0
        out.append((device, extra_w, 0, extra_c, overhead))
    return out


def vision_for_plan(proj: ProjectorSpec, hardware: HardwareProfile, cfg: RunConfig,
                    probe: MachineProbe | None = None) -> VisionPlan:
    """probe: this machine's probe valid for cfg (Calibration.probe_for); its encode rate
    prices a projector the CPU encodes when it measured the same weight type. A projector
    on a GPU keeps the FLOPs estimate (no GPU is probed)."""
    from rooflight.estimate.perf import _device_constants, _device_flops, cpu_prefill_efficiency

    device = projector_device(hardware, cfg)
    measured = probe.encode if probe is not None else None
    if device == "cpu" and measured is not None and measured.file_type == proj.file_type.upper():
        return plan_vision(proj, hardware, cfg, device_flops=measured.flops_per_s, efficiency=1.0, basis="probe")
    if device == "cpu":
        eff = cpu_prefill_efficiency(proj.file_type)
    else:
        c = _device_constants(hardware, device)
        eff = c.prefill_efficiency_float if proj.file_type in ("F16", "BF16", "F32") else c.prefill_efficiency_quant
    return plan_vision(proj, hardware, cfg, device_flops=_device_flops(hardware, device, cfg), efficiency=eff)
