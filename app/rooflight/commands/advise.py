"""`rooflight advise MODEL`: the settings that make a model fit, or run faster, here.

Thin over rooflight.estimate.advise: resolves MODEL (a .gguf path, hf:OWNER/REPO/FILE.gguf,
or a catalog id, whose other quantizations then join the search), takes the user's current
settings with the same options as `estimate`, and prints the advice cards and the Pareto
front (text), or one JSON document (--json, README "Optimization advisor").
"""

from __future__ import annotations

from rooflight.commands.common import (
    N_CPU_MOE_HELP,
    calibration_for,
    emit_json,
    gpu_layers,
    load_hardware,
    model_variants,
    n_cpu_moe,
    positive_int,
)
from rooflight.hardware.profile import plural
from rooflight.units import size_text


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "advise", help="which llama.cpp settings make a model fit, or run faster, on this machine"
    )
    p.add_argument("model", help="a local .gguf path, hf:OWNER/REPO/FILE.gguf, or a catalog id")
    p.add_argument("--hardware", metavar="FILE", help="advise for the machine in this JSON profile")
    p.add_argument("--ctx", type=positive_int, help="context length (default: 8192, capped at the model's)")
    p.add_argument("--quant", help="catalog models: the quantization in use (default Q4_K_M)")
    p.add_argument("--kv-type", choices=["f16", "q8_0", "q4_0"], default="f16", help="current KV cache type")
    p.add_argument("--flash-attn", choices=["on", "off", "auto"], default="auto")
    p.add_argument("--gpu-layers", type=gpu_layers, default="auto", metavar="N|auto")
    p.add_argument("--n-cpu-moe", type=n_cpu_moe, default=0, metavar="N|auto|all", help=N_CPU_MOE_HELP)
    p.add_argument("--threads", type=positive_int)
    p.add_argument("--batch", type=positive_int, default=512)
    p.add_argument("--ubatch", type=positive_int, default=512)
    p.add_argument("--swa-full", action="store_true", help="the current settings use a full-size SWA cache")
    p.add_argument("--mmproj", metavar="FILE", help="a vision projector to plan with a .gguf model "
                   "(default: an mmproj-*.gguf beside it)")
    p.add_argument("--prompt-tokens", type=positive_int, default=512)
    p.add_argument("--gen-tokens", type=positive_int, default=128)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_advise)


def cmd_advise(args) -> int:
    from rooflight.estimate import Wishes
    from rooflight.estimate.advise import advise

    variants, current = model_variants(args.model, args.quant, getattr(args, "mmproj", None))
    profile = load_hardware(args)
    wishes = Wishes(
        n_ctx=args.ctx, n_gpu_layers=args.gpu_layers, kv_type=args.kv_type, flash_attn=args.flash_attn,
        n_threads=args.threads, n_batch=args.batch, n_ubatch=args.ubatch, swa_full=args.swa_full,
        prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens, n_cpu_moe=args.n_cpu_moe,
    )
    result = advise(variants, profile, wishes, current=current, calibration=calibration_for(args, profile))
    if args.json:
        emit_json(result.to_dict(model=args.model))
    else:
        print(format_advice(result, profile))
    return 0


# ---- text ------------------------------------------------------------------------------------

_FLAGS = (  # settings key, `rooflight estimate` flag
    ("quant", "--quant"), ("n_ctx", "--ctx"), ("kv_type", "--kv-type"), ("flash_attn", "--flash-attn"),
    ("swa_full", "--swa-full"), ("n_gpu_layers", "--gpu-layers"), ("n_threads", "--threads"),
    ("n_batch", "--batch"), ("n_ubatch", "--ubatch"), ("n_cpu_moe", "--n-cpu-moe"),
)


def _flags(before: dict, after: dict) -> str:
    out = []
    for key, flag in _FLAGS:
        if before.get(key) == after.get(key):
            continue
        val = after.get(key)
        if key == "flash_attn":
            out.append(f"{flag} {'on' if val else 'off'}")
        elif key == "swa_full":
            out.append(flag if val else "(windowed SWA cache: leave out --swa-full)")
        elif key == "n_cpu_moe":
            out.append(f"{flag} {val}")
        else:
            out.append(f"{flag} {val}")
    return " ".join(out)


def _gb(n: float) -> str:
    return size_text(n, 2)


def _machine(profile) -> str:
    if profile.offload_gpus:
        gpus = ", ".join(f"{g.name} ({_gb(g.vram_total_bytes or g.free_bytes)})" for g in profile.offload_gpus)
        return f"{gpus}, {profile.backend}"
    return f"CPU only ({plural(profile.cpu.cores, 'core')}, {_gb(profile.cpu.ram_total_bytes)} RAM)"


def format_advice(result, profile) -> str:
    from rooflight.format import FIT_LABELS

    b = result.baseline
    e, c = b.estimate, b.estimate.config
    n = b.numbers()
    lines = [
        f"{e.spec.name} {b.variant.quant} on {_machine(profile)}",
        f"Now: {FIT_LABELS[e.fit]}, {c.n_gpu_layers}/{e.spec.n_layer + 1} layers on the GPU, {c.n_ctx}-token context,"
        f" KV {c.kv_type}, flash attention {'on' if c.flash_attn else 'off'}, micro-batch {c.n_ubatch},"
        f" {plural(c.n_threads, 'thread')}",
        f"     decode {b.decode:.1f} tok/s, prefill {b.prefill:.0f} tok/s, memory {_gb(n['memory_bytes'])}"
        + (f" (GPU {_gb(n['gpu_bytes'])})" if n["gpu_bytes"] else ""),
        f"Searched {result.searched} settings in {result.elapsed_s * 1e3:.0f} ms.",
        "",
    ]
    if not result.cards and e.fit == "too_large":
        lines.append("No setting the advisor knows of makes this model fit here; try a smaller model or quantization.")
    elif not result.cards:
        lines.append("No change the advisor knows of buys a measurable gain here.")
    for i, card in enumerate(result.cards, 1):
        lines.append(f"{i}. {card.title}")
        lines.append(f"   {card.detail}")
        lines.append(f"   Quality: {card.quality_effect}" + (f"  [{card.source}]" if card.source else ""))
        flags = _flags(b.settings, card.settings)
        if flags:
            lines.append(f"   Settings: {flags}")
    if result.pareto:
        lines += ["", f"Best trade-offs at {c.n_ctx} tokens (quality loss, decode, prefill, memory):",
                  f"  {'quant':<8}{'KV':<6}{'ubatch':>7}  {'fit':<21}{'decode':>8}{'prefill':>9}{'memory':>10}  KLD"]
        for p in result.pareto:
            q = p.numbers()["quality_kld"]
            pc = p.estimate.config
            fit = FIT_LABELS[p.fit] + (" *" if not p.runtime_supported else "")
            lines.append(f"  {p.variant.quant:<8}{pc.kv_type:<6}{pc.n_ubatch:>7}  {fit[:20]:<21}{p.decode:8.1f}"
                         f"{p.prefill:9.0f}{_gb(p.memory_bytes):>10}  {'not measured' if q is None else f'{q:.4f}'}")
        if any(not p.runtime_supported for p in result.pareto):
            lines.append("  * experts kept in RAM: estimate only, not loadable by this runtime")
        lines.append("  KLD: mean KL divergence vs F16 weights and an f16 cache, from published figures.")
    return "\n".join(lines)
