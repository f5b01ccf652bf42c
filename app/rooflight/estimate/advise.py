"""Optimization advisor: which llama.cpp settings buy the most for one model on one machine.

Hardware is fixed once bought; the settings are not. advise() searches the settings
llama.cpp offers - the quantization file (when the other files of the model are known),
context length, KV cache type, flash attention, full or windowed sliding-window cache,
GPU layers, MoE experts kept on the CPU, threads, batch and micro-batch - and evaluates
every candidate with the estimator itself (plan(): plan_memory + estimate_performance),
never with numbers of its own. The result is a small Pareto front over quality, decode
speed, prefill speed and memory, and a few advice cards ranked by gain, each with the
exact settings that produce it.

How the space is pruned (so one model takes well under 200 ms, bench/advise_speed.py):
- GPU layers are not enumerated: for every other setting the planner's own placement rule
  (choose_gpu_layers, a binary search) gives the most layers that fit, and in the
  estimator more layers on a GPU are never slower.
- Flash attention off and a full-size sliding-window cache never use less memory or run
  faster in the estimator (without flash attention the KQ scores are materialised and V
  is padded; a full-size SWA cache only adds cells), so they are evaluated only where the
  user's current settings use them, to say what switching buys.
- Threads beyond the physical cores buy nothing in the estimator (it counts cores), so
  the only candidate is "all physical cores".
- Micro-batch sizes and contexts are tried around the user's settings, not crossed with
  every other lever.

Quality effects are only those with a published source: weight quantization from the
llama.cpp perplexity table (REFERENCE.md §2, catalog/quality.py) and the q8_0 KV cache
from llama.cpp PR #7412. Everything else says "quality effect: not measured", or why
the outputs do not change.

Pure functions and frozen dataclasses: no llama.cpp, no Qt, no network.

The advisor lives in four modules; this one is its front door (every name is importable
from here) and holds the estimate of MoE experts kept on the CPU:
- advise_types.py: Variant, Candidate, AdviceCard, Advice, published quality effects, the
  settings space, a card's settings back to a RunConfig / Wishes;
- advise_search.py: advise(), the evaluator memo, the Pareto front, catalog files;
- advise_cards.py: one card per lever, and the gain that ranks them;
- advise_text.py: the wording of a card.
"""

from __future__ import annotations

from dataclasses import replace

from rooflight.estimate.layers import cpu_cycles_per_weight
from rooflight.estimate.memory import plan_memory
from rooflight.estimate.perf import BACKENDS, DEFAULT_CPU_MHZ, Calibration
from rooflight.estimate.placement import CPU
from rooflight.estimate.plan import Estimate, Wishes, plan
from rooflight.gguf.spec import ModelSpec
from rooflight.hardware.profile import HardwareProfile

# ---- MoE experts on the CPU (estimate only) ------------------------------------------------


def _experts_moved(spec: ModelSpec, n_cpu_moe: int) -> ModelSpec:
    """The spec with the routed-expert tensors of the first n layers taken out of their
    blocks: the estimator then places them with the CPU-side input tensors, which is where
    llama.cpp's --n-cpu-moe keeps them (LLM_FFN_EXPS_REGEX overrides to the CPU buffer)."""
    tensors = tuple(
        replace(t, layer=None) if t.is_expert and t.layer is not None and t.layer < n_cpu_moe else t
        for t in spec.tensors
    )
    return replace(spec, tensors=tensors)


def _expert_bytes_by_layer(spec: ModelSpec) -> list[int]:
    out = [0] * spec.n_layer
    for t in spec.tensors:
        if t.is_expert and t.layer is not None and 0 <= t.layer < spec.n_layer:
            out[t.layer] += t.n_bytes
    return out


def plan_experts_on_cpu(
    spec: ModelSpec,
    hardware: HardwareProfile,
    wishes: Wishes,
    n_cpu_moe: int,
    *,
    calibration: Calibration | None = None,
) -> Estimate:
    """Estimate with every block offloaded but the experts of the first n_cpu_moe blocks
    left in RAM, as llama.cpp's --n-cpu-moe does.

    The estimator places whole blocks, so this composes it: memory and the GPU's share of
    the work come from plan_memory / estimate_performance on the spec with those experts
    moved to the CPU side; the experts' own per-token cost is then added with the CPU
    roofline the estimator uses (active expert bytes over RAM bandwidth, or the CPU's
    dot-product cycles, whichever is longer), plus one GPU<->CPU hand-over per such block
    (taken as the backend's fixed per-layer cost: an assumption, not fitted). Prompt
    processing copies those experts to the GPU once per micro-batch (llama.cpp's
    op_offload for batches of 32 and more, the rule perf.py uses for CPU-held weights),
    bounded by PCIe. Compute buffers are taken as for full offload.
    """
    moved = _experts_moved(spec, n_cpu_moe)
    full = replace(wishes, n_gpu_layers=spec.n_layer + 1)
    base = plan(moved, hardware, full)
    cfg = base.config
    ratio = spec.n_expert_used / spec.n_expert if spec.n_expert else 1.0
    e_bytes = e_active = e_cycles = 0.0
    for t in spec.tensors:
        if t.is_expert and t.layer is not None and t.layer < n_cpu_moe:
            e_bytes += t.n_bytes
            e_active += t.n_bytes * ratio
            e_cycles += t.n_elements * ratio * cpu_cycles_per_weight(t.ggml_type)
    cpu_c = BACKENDS["cpu"]
    bw = (hardware.cpu.ram_bandwidth_gbs or 20.0) * 1e9 * cpu_c.decode_efficiency
    threads = max(1, min(cfg.n_threads, hardware.cpu.cores or 1))
    hz = (hardware.cpu.max_freq_mhz or DEFAULT_CPU_MHZ) * 1e6
    handover = BACKENDS.get(hardware.backend, BACKENDS["vulkan"]).layer_overhead_s
    t_token = max(e_active / bw, e_cycles / (threads * hz)) + n_cpu_moe * handover

    p = base.performance
    decode = 1.0 / (1.0 / p.decode_tok_s + t_token)
    n_prompt = max(1, wishes.prompt_tokens)
    ub = max(1, min(cfg.n_ubatch, cfg.n_batch, cfg.n_ctx))
    big, rest = (n_prompt // ub, n_prompt % ub) if ub >= 32 else (0, n_prompt)
    if rest >= 32:
        big, rest = big + 1, 0
    pcie = next((g.pcie_gbs for g in hardware.gpus if g.pcie_gbs), None) or 25.0
    t_extra = big * e_bytes / (pcie * 1e9) + rest * t_token
    prefill = n_prompt / (n_prompt / p.prefill_tok_s + t_extra)
    if calibration is not None and calibration.active:
        # measurements on this machine scale the whole time, as they do in plan()
        cal = plan(moved, hardware, full, calibration=calibration).performance
        decode *= cal.decode_tok_s / p.decode_tok_s
        prefill *= cal.prefill_tok_s / p.prefill_tok_s
        p = replace(p, calibrated=True)
    d_scale, p_scale = decode / p.decode_tok_s, prefill / p.prefill_tok_s
    perf = replace(
        p,
        decode_tok_s=decode,
        prefill_tok_s=prefill,
        decode_tok_s_range=tuple(x * d_scale for x in p.decode_tok_s_range),
        prefill_tok_s_range=tuple(x * p_scale for x in p.prefill_tok_s_range),
        time_to_first_token_s=n_prompt / prefill + 1 / decode,
        prefill_bound="pcie" if big else p.prefill_bound,
    )
    return Estimate(spec, cfg, base.memory, perf)


def _min_experts_on_cpu(spec: ModelSpec, hardware: HardwareProfile, wishes: Wishes) -> int | None:
    """Fewest leading blocks whose experts must stay in RAM for the rest of the model to
    fit on the GPU(s), or None when even all experts in RAM are not enough. Moving experts
    only takes bytes off the GPU, so the GPU side of a full-offload plan tells it exactly."""
    cfg = plan(spec, hardware, replace(wishes, n_gpu_layers=spec.n_layer + 1)).config
    mem = plan_memory(spec, hardware, cfg)
    over = {d.device: d.total_bytes - d.available_bytes for d in mem.devices if d.device != CPU}
    if all(v <= 0 for v in over.values()):
        return 0
    per_layer = _expert_bytes_by_layer(spec)
    for n in range(1, spec.n_layer + 1):
        dev = mem.layer_devices[n - 1]
        if dev in over:
            over[dev] -= per_layer[n - 1]
        if all(v <= 0 for v in over.values()):
            return n
    return None


# ---- the rest of the advisor, importable from here (advise.py was one module) ----------------
# Imported after the functions above, which advise_search / advise_cards call at run time.

from rooflight.estimate.advise_cards import (  # noqa: E402, F401
    _batch_card,
    _better,
    _card,
    _combined_card,
    _context_cards,
    _experts_card,
    _flash_card,
    _gpu_layers_card,
    _kv_card,
    _quant_card,
    _quant_cards,
    _rank_key,
    _swa_card,
    _threads_card,
    gain,
)
from rooflight.estimate.advise_search import (  # noqa: E402, F401
    MIN_SCORE,
    _catalog_specs,
    _objectives,
    _pareto,
    _Search,
    advise,
    catalog_variants,
    default_quant,
)
from rooflight.estimate.advise_text import _FIT_PHRASE, _changes, _ctx, _gb, _numbers, _title, _tok  # noqa: E402, F401
from rooflight.estimate.advise_types import (  # noqa: E402, F401
    _CONFIG_FIELDS,
    CONTEXT_LADDER,
    FIT_RANK,
    FLASH_SOURCE,
    KV_DPPL,
    KV_KLD,
    KV_SOURCE,
    NOT_MEASURED,
    QUANT_DPPL,
    QUANT_KLD_PUBLISHED,
    QUANT_SOURCE,
    RUNTIME_NOTE,
    SWA_SOURCE,
    UBATCH_SIZES,
    Advice,
    AdviceCard,
    Candidate,
    Quality,
    Variant,
    _has_gpu,
    _has_swa,
    _kv_types_for,
    quality_of,
    settings_config,
    settings_wishes,
)
