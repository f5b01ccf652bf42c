"""Human-readable text for the CLI (the GUI formats its own widgets)."""

from __future__ import annotations

from rooflight.estimate.fit import Fit
from rooflight.units import size_text

GB = 1e9

FIT_BADGES = {f: f.badge for f in Fit}
FIT_LABELS = {f: f.label for f in Fit}


def gb(n: int | float | None) -> str:
    return size_text(n, 2)


def format_estimate(est) -> str:
    s, c, m, p = est.spec, est.config, est.memory, est.performance
    lines = [
        f"{s.name}  ({s.architecture}, {s.file_type}, {s.params / 1e9:.2f}B params"
        + (f", {s.active_params / 1e9:.2f}B active" if s.is_moe else "")
        + f", {gb(s.file_bytes)})",
        f"Fit: {FIT_LABELS[m.fit]}",
        f"Config: n_ctx {c.n_ctx}, GPU layers {c.n_gpu_layers}/{s.n_layer + 1}, threads {c.n_threads},"
        f" KV {c.kv_type}, flash attention {'on' if c.flash_attn else 'off'},"
        f" batch {c.n_batch}/{c.n_ubatch}"
        + (f", MoE experts of {c.n_cpu_moe} layers in RAM" if c.n_cpu_moe else ""),
        *([est.moe_choice.reason] if getattr(est, "moe_choice", None) else []),
        "",
        f"{'device':<8}{'weights':>11}{'KV cache':>11}{'compute':>11}{'overhead':>11}{'total':>11}{'available':>12}",
    ]
    for d in m.devices:
        mark = "" if d.fits else "  <- does not fit"
        lines.append(
            f"{d.device:<8}{gb(d.weights_bytes):>11}{gb(d.kv_bytes):>11}{gb(d.compute_bytes):>11}"
            f"{gb(d.overhead_bytes):>11}{gb(d.total_bytes):>11}{gb(d.available_bytes):>12}{mark}"
        )
    if getattr(m, "amx_layout_bytes", 0):
        lines.append(amx_layout_sentence(m.amx_layout_bytes))
    lo, hi = p.decode_tok_s_range
    plo, phi = p.prefill_tok_s_range
    lines += [
        "",
        f"Decode:  {p.decode_tok_s:8.1f} tok/s  (range {lo:.1f}-{hi:.1f}, {p.bound}-bound)",
        f"Prefill: {p.prefill_tok_s:8.1f} tok/s  (range {plo:.1f}-{phi:.1f}, {p.prefill_bound}-bound)",
        f"Time to first token: {p.time_to_first_token_s:.2f} s"
        + ("  (calibrated on this machine)" if p.calibrated else ""),
        speed_basis(p),
    ]
    if p.network is not None:
        lines.append(network_sentence(p.network))
    if getattr(est, "vision", None) is not None:
        v, pr = est.vision, s.projector
        lines.append(
            f"Vision: {pr.name} ({pr.projector_type}, {pr.file_type}) on {v.device}: "
            f"{gb(v.weights_bytes)} weights + {gb(v.compute_bytes)} compute for a {pr.image_size}px image, "
            f"{v.image_tokens} tokens per image, encoded in ~{v.encode_s:.2f} s (first token includes one image)")
    return "\n".join(lines)


def amx_layout_sentence(nbytes: int) -> str:
    """Why the RAM weights exceed the file on a CPU whose llama.cpp keeps them in its AMX buffer."""
    from rooflight.estimate.amx_layout import LAYOUT_COST_WORDS

    return (f"RAM weights include {gb(nbytes)} for the packed layout of llama.cpp's AMX buffer "
            f"(Intel AMX: {LAYOUT_COST_WORDS}).")


BASIS_WORDS = {
    "probe": "this machine's probe (rooflight probe)",
    "calibrated": "measurements of models on this machine",
    "table": "table constants (no probe of this machine)",
}


# Under an estimate or a ranking of this machine whose speeds stand on the table: the
# table's CPU figures were fitted on other machines and missed a new CPU by up to 2.4x
# (README, "Accuracy").
PROBE_HINT = ("These speeds come from table constants: `rooflight probe` measures this machine's "
              "llama.cpp kernels in about 30 s, and estimates then stand on them.")


def speed_basis(p) -> str:
    """What the speeds stand on and what their range is, in one sentence (CLI and tooltip)."""
    basis = BASIS_WORDS.get(getattr(p, "basis", "table"), p.basis)
    why = getattr(p, "range_basis", "")
    return f"Speeds from {basis}; range: {why}." if why else f"Speeds from {basis}."


def network_sentence(net: dict) -> str:
    """What the RPC network costs a decoded token, and what a 10x faster link would give."""
    share = net["decode_share"] * 100
    head = ("The network bounds the speed" if net["bound"] else "The network")
    return (f"{head}: {share:.0f}% of each token's time ({net['crossings_per_token']} crossings, "
            f"{net['latency_s_per_token'] * 1000:.1f} ms of round trips); a {net['faster_link_factor']:.0f}x "
            f"faster link would give {net['decode_tok_s_faster_link']:.1f} tok/s.")


# The ranking's groups (catalog/picks.tier), as `rooflight rank` heads them
RANK_GROUPS = {2: "Runs well here", 1: "Runs, but not comfortably", 0: "Too large for this machine"}


def ranking_bases(ranked) -> list[str]:
    """What a ranking's speeds stand on (performance.basis of each row's pick), in the order
    BASIS_WORDS lists them."""
    seen = {r.best.estimate.performance.basis for r in ranked}
    return [b for b in BASIS_WORDS if b in seen] + sorted(seen - BASIS_WORDS.keys())


def format_ranking(ranked) -> str:
    if not ranked:
        return "No catalog model matches these filters."
    lines = [f"{'#':>3}  {'model':<34}{'quant':<8}{'fit':<21}{'decode':>9}{'prefill':>10}{'memory':>10}{'score':>7}"
             "  why lower"]
    group = None
    labels: dict[str, str] = {}  # label -> its explanation, for the key under the table
    for i, r in enumerate(ranked, 1):
        e = r.best.estimate
        p = e.performance
        if r.tier != group and r.tier in RANK_GROUPS:
            group = r.tier
            lines.append(f"-- {RANK_GROUPS[group]} --")
        name = r.model.name[:31] + (" *" if r.installed else "")
        why = r.ranked_lower_because()
        labels.update((w.label, w.meaning) for w in why)
        lines.append(
            f"{i:>3}  {name:<34}{r.best.quant:<8}{FIT_BADGES[e.fit]:<21}"
            f"{p.decode_tok_s:9.1f}{p.prefill_tok_s:10.0f}{gb(e.memory.total_bytes):>10}{r.score:7.1f}"
            + (f"  {', '.join(w.short for w in why)}" if why else "")
        )
    lines.append("")
    lines.append("decode/prefill in tokens/s at the model's context; memory over all devices.")
    if bases := ranking_bases(ranked):
        lines.append("speeds from " + " and ".join(BASIS_WORDS.get(b, b) for b in bases) + ".")
    if labels:
        lines.append("why lower: " + "; ".join(f"{label}: {text}" for label, text in labels.items()) + ".")
    if any(r.installed for r in ranked):
        lines.append("* already on disk (rooflight models lists where).")
    return "\n".join(lines)
