"""The advisor's cards: one function per lever llama.cpp offers (KV cache type, flash
attention, sliding-window cache, GPU layers, threads, batch sizes, context, the quant
file, MoE experts on the CPU, all of them combined), each trying its lever from the
user's settings through the search's evaluator and saying what it buys; and the gain
that ranks the cards.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from rooflight.estimate.advise_experts import min_experts_on_cpu
from rooflight.estimate.advise_text import _changes, _ctx, _gb, _numbers, _title, _tok
from rooflight.estimate.advise_types import (
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
    AdviceCard,
    Candidate,
    Variant,
    _has_gpu,
    _has_swa,
    _kv_types_for,
)
from rooflight.estimate.placement import CPU
from rooflight.estimate.plan import Wishes

if TYPE_CHECKING:
    from rooflight.estimate.advise_search import _Search


def gain(before: Candidate, after: Candidate) -> dict:
    """How much `after` buys over `before`: a score to rank cards by (log2 of the decode
    speed-up, a quarter of the prefill's, half the memory saved as a fraction; +10 for
    making a model fit that did not), and its parts."""
    fb, fa = before.fit, after.fit
    d_x = after.decode / before.decode
    p_x = after.prefill / before.prefill
    saved = before.memory_bytes - after.memory_bytes
    if fb == "too_large" and fa != "too_large":
        score = 10.0 + math.log2(max(d_x, 1e-9))
    elif fa == "too_large":
        score = -10.0 if fb != "too_large" else 0.5 * saved / max(before.memory_bytes, 1)
    else:
        score = math.log2(d_x) + 0.25 * math.log2(p_x) + 0.5 * saved / max(before.memory_bytes, 1)
    return {
        "score": round(score, 4),
        "decode_x": round(d_x, 4),
        "prefill_x": round(p_x, 4),
        "memory_bytes": -saved,
        "fit": f"{fb} -> {fa}" if fb != fa else fb,
    }


def _rank_key(card: AdviceCard) -> tuple[float, str]:
    """Best gain first; a card whose quality effect is not measured yields to a sourced one
    of nearly the same gain (0.15: about 10% of speed)."""
    unknown = card.quality_effect.startswith(NOT_MEASURED)
    return (-(card.gain["score"] - (0.15 if unknown else 0.0)), card.kind)


def _card(kind: str, lever: str, detail: str, before: Candidate, after: Candidate, *,
          subject: str = "the model", quality: str | None = None, source: str | None = None,
          title: str | None = None) -> AdviceCard:
    if not after.runtime_supported:
        detail = f"{detail} Estimate only - {RUNTIME_NOTE}."
    return AdviceCard(
        kind=kind, title=title or _title(lever, before, after, subject), detail=detail, settings=after.settings,
        before=before.numbers(), after=after.numbers(), gain=gain(before, after),
        quality_effect=quality if quality is not None else after.quality.text,
        source=source if source is not None else after.quality.source,
        runtime_supported=after.runtime_supported, candidate=after,
    )


def _better(a: Candidate, b: Candidate) -> bool:
    return gain(b, a)["score"] > 0


# ---- one card per lever ----------------------------------------------------------------------


def _kv_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    if w0.kv_type != "f16":
        return []
    options = [s.eval(v, replace(w0, kv_type=k, flash_attn="on")) for k in _kv_types_for(v.spec) if k != "f16"]
    if not options:
        return []
    # q4_0 only where it buys a better fit or 10% more speed than q8_0, not memory alone:
    # its quality effect is not measured
    best = options[0]
    for o in options[1:]:
        if FIT_RANK[o.fit] > FIT_RANK[best.fit] or (o.fit == best.fit and o.decode >= 1.1 * best.decode):
            best = o
    kv = best.estimate.config.kv_type
    subject = f"{_ctx(best.estimate.config.n_ctx)} context"
    fa = " (with flash attention, which a quantized V cache needs)" if w0.flash_attn == "off" else ""
    b_kv, a_kv = base.numbers()["kv_bytes"], best.numbers()["kv_bytes"]
    detail = (f"A {kv} KV cache{fa} holds the same context in {_gb(a_kv)} instead of {_gb(b_kv)}; "
              "decode also reads less cache per token.")
    if any(d.device == CPU and d.kv_bytes for d in best.estimate.memory.devices):
        # measured here (tests/test_advise_real.py's model, 512-token prompt): 27k tok/s
        # with f16, 10k with q8_0, 7k with q4_0; the estimator does not model it
        detail += (" On the CPU, flash attention converts a quantized cache back as it reads it: prompt "
                   "processing can be slower than estimated, most of all for small models.")
    q = (f"{kv} KV cache: +{KV_DPPL[kv]:.4f} PPL, KLD +{KV_KLD[kv]:.4f}" if kv in KV_KLD
         else f"{NOT_MEASURED} (no published figure for a {kv} KV cache)")
    return [_card("kv_type", f"KV cache in {kv}", detail, base, best, subject=subject, quality=q,
                  source=KV_SOURCE if kv in KV_KLD else "")]


def _flash_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    if w0.flash_attn != "off":
        return []
    after = s.eval(v, replace(w0, flash_attn="on"))
    b, a = base.numbers(), after.numbers()
    detail = (f"Flash attention never materialises the attention scores: compute buffers "
              f"{_gb(b['compute_bytes'])} -> {_gb(a['compute_bytes'])}, KV cache {_gb(b['kv_bytes'])} -> "
              f"{_gb(a['kv_bytes'])}.")
    return [_card("flash_attn", "Flash attention on", detail, base, after,
                  quality="none: same attention, only rounding differs", source=FLASH_SOURCE)]


def _swa_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    if not (w0.swa_full and _has_swa(v.spec)):
        return []
    after = s.eval(v, replace(w0, swa_full=False))
    detail = (f"Sliding-window layers only ever attend to the last {v.spec.sliding_window} tokens: a windowed "
              f"cache keeps those instead of the whole context (KV {_gb(base.numbers()['kv_bytes'])} -> "
              f"{_gb(after.numbers()['kv_bytes'])}). A full-size cache only helps reusing a cached prompt prefix.")
    return [_card("swa", "The windowed sliding-window cache", detail, base, after,
                  quality="none: the model attends within its window either way", source=SWA_SOURCE)]


def _gpu_layers_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    if not _has_gpu(s.hw) or w0.n_gpu_layers == "auto":
        return []
    after = s.eval(v, replace(w0, n_gpu_layers="auto"))
    nb, na = base.estimate.config.n_gpu_layers, after.estimate.config.n_gpu_layers
    if na == nb:
        return []
    total = v.spec.n_layer + 1
    detail = f"{na} of {total} layers fit on the GPU at these settings; you asked for {nb}."
    return [_card("gpu_layers", f"{na} GPU layers instead of {nb}", detail, base, after,
                  quality="none: same computation on another device", source="")]


def _threads_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    if w0.n_threads is None:
        return []
    # the planner's own choice: all physical cores, or what a thread sweep measured here
    after = s.eval(v, replace(w0, n_threads=None))
    cores = after.estimate.config.n_threads
    if cores == w0.n_threads:
        return []
    if w0.n_threads < cores:
        detail = (f"Only {w0.n_threads} of {cores} usable cores work on the model; on a CPU, the "
                  "dequantize-and-multiply work and prompt processing scale with the cores used.")
    else:
        detail = (f"llama.cpp runs best with one thread per physical core ({s.hw.cpu.cores} here); you set {w0.n_threads}. "
                  "Extra threads share a core's arithmetic units and add synchronisation.")
    return [_card("threads", f"{cores} threads instead of {w0.n_threads}", detail, base, after,
                  quality="none: same computation", source="")]


def _batch_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    n_ctx = base.estimate.config.n_ctx
    cur = base.estimate.config.n_ubatch
    best = None
    for ub in UBATCH_SIZES:
        if ub == cur or ub > n_ctx:
            continue
        c = s.eval(v, replace(w0, n_ubatch=ub, n_batch=max(w0.n_batch, ub)))
        if best is None or _better(c, best):
            best = c
    if best is None or not _better(best, base):
        return []
    ub = best.estimate.config.n_ubatch
    b, a = base.numbers(), best.numbers()
    if ub < cur:
        # without a GPU the buffer is RAM the model does not need (CPU-only plans)
        why = ("the smaller buffer leaves room for more of the model on the GPU" if _has_gpu(s.hw)
               else "the smaller buffer needs less RAM")
        if best.prefill < base.prefill:
            why += ", at some cost in prompt speed"
    else:
        why = "bigger batches read the weights fewer times per prompt"
    if ub > cur and v.spec.n_expert and v.spec.n_expert_used:
        # estimate/moe_prompt.py: each routed expert's tokens fill whole tiles, and it pays a
        # fixed cost per micro-batch
        per_expert = lambda n: n * v.spec.n_expert_used / v.spec.n_expert  # noqa: E731
        why += (f", and each of the {v.spec.n_expert} experts multiplies ~{per_expert(ub):.0f} tokens at a time "
                f"instead of ~{per_expert(cur):.0f}, which fill more of the matrix kernels' fixed-width tiles "
                "and spread its fixed cost per micro-batch over more tokens")
    detail = (f"The micro-batch sets how many prompt tokens go through the model at once: the compute buffer "
              f"is {_gb(b['compute_bytes'])} at {cur} and {_gb(a['compute_bytes'])} at {ub}; {why}.")
    return [_card("batch", f"Micro-batch {ub} instead of {cur}", detail, base, best,
                  quality="none: same computation, different batching", source="")]


def _context_cards(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    n_ctx = base.estimate.config.n_ctx
    limit = v.spec.context_length or n_ctx
    out: list[AdviceCard] = []
    # smaller: the largest context that reaches a better fit, or 1.3x decode
    if FIT_RANK[base.fit] < 3 or base.fit == "too_large":
        for c in sorted((c for c in CONTEXT_LADDER if c < n_ctx), reverse=True):
            cand = s.eval(v, replace(w0, n_ctx=c))
            if FIT_RANK[cand.fit] > FIT_RANK[base.fit] or (
                cand.fit != "too_large" and cand.decode >= 1.3 * base.decode
            ):
                detail = (f"The KV cache and compute buffers grow with the context: {_ctx(c)} tokens need "
                          f"{_gb(cand.memory_bytes)} in all instead of {_gb(base.memory_bytes)}.")
                out.append(_card("context", f"{_ctx(c)} context instead of {_ctx(n_ctx)}", detail, base, cand,
                                 quality=f"the model sees at most {c} tokens of the conversation", source=""))
                break
    # larger: the longest context at the same fit and (nearly) the same speed
    if base.fit != "too_large":
        room = None
        for c in sorted(c for c in CONTEXT_LADDER if n_ctx < c <= limit):
            cand = s.eval(v, replace(w0, n_ctx=c))
            if cand.fit != base.fit or cand.decode < 0.97 * base.decode:
                break
            room = cand
        if room is not None:
            c = room.estimate.config.n_ctx
            title = (f"Room for {_ctx(c)} context at the same fit: decode {_tok(base.decode)} -> "
                     f"{_tok(room.decode)} tok/s")
            card = _card("context", "", f"{_gb(room.memory_bytes)} in all at {_ctx(c)} tokens.", base, room,
                         quality=f"the model can see {c} tokens of the conversation instead of {n_ctx}", source="",
                         title=title)
            # worth a little: more context for (almost) nothing
            out.append(replace(card, gain=dict(card.gain, score=round(0.06 + 0.02 * math.log2(c / n_ctx), 4))))
    return out


def _quant_cards(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    others = [o for o in s.variants if o.quant != v.quant]
    if not others:
        return []
    cands = [s.eval(o, w0) for o in others]
    cur_bytes = v.spec.file_bytes
    out: list[AdviceCard] = []
    # faster: a smaller file that buys a better fit or >= 10% decode, highest quality first
    smaller = [c for c in cands if c.variant.spec.file_bytes < cur_bytes and c.fit != "too_large"]
    smaller.sort(key=lambda c: -c.variant.spec.file_bytes)
    best_fit = max((FIT_RANK[c.fit] for c in smaller), default=-1)
    pick = None
    if best_fit > FIT_RANK[base.fit]:
        pick = next(c for c in smaller if FIT_RANK[c.fit] == best_fit)
    else:
        pick = next((c for c in smaller if c.decode >= 1.1 * base.decode), None)
    if pick is not None:
        out.append(_quant_card(base, pick, faster=True))
    # better quality: the largest file that keeps the fit and >= 85% of the speed
    larger = [c for c in cands if c.variant.spec.file_bytes > cur_bytes and c.fit == base.fit
              and base.fit != "too_large" and c.decode >= 0.85 * base.decode]
    if larger:
        up = max(larger, key=lambda c: c.variant.spec.file_bytes)
        card = _quant_card(base, up, faster=False)
        if up.quality.kld is not None and base.quality.kld is not None and up.quality.kld < base.quality.kld:
            # a small positive score: quality for a little speed
            out.append(replace(card, gain=dict(card.gain, score=round(0.08 + 0.5 * (base.quality.kld - up.quality.kld), 4))))
    return out


def _quant_card(base: Candidate, after: Candidate, *, faster: bool) -> AdviceCard:
    qa, qb = after.variant.quant, base.variant.quant
    a_ppl, b_ppl = QUANT_DPPL.get(qa.upper()), QUANT_DPPL.get(qb.upper())
    if a_ppl is not None and b_ppl is not None:
        # perplexity rises as quality falls: +PPL is a loss, -PPL a gain
        quality = (f"{qa} instead of {qb}: perplexity {a_ppl - b_ppl:+.3f}, "
                   f"KL divergence {QUANT_KLD_PUBLISHED[qa.upper()]:.4f} vs {QUANT_KLD_PUBLISHED[qb.upper()]:.4f}")
        source = QUANT_SOURCE
        ppl = f"{a_ppl - b_ppl:+.2f} PPL"
    else:
        quality, source, ppl = f"{NOT_MEASURED} (no published figure for {qa if a_ppl is None else qb})", "", ""
    d_pct = (after.decode / base.decode - 1) * 100
    if FIT_RANK[after.fit] > FIT_RANK[base.fit]:
        title = _title(f"{qa} instead of {qb}", base, after)
    else:
        title = f"{qa} instead of {qb}: {d_pct:+.0f}% decode speed" + (f" for {ppl}" if ppl else "")
    size = f"{_gb(after.variant.spec.file_bytes)} instead of {_gb(base.variant.spec.file_bytes)}"
    detail = (f"The {qa} file is {size}; " + ("fewer bytes to read per token." if faster
                                                else "more bits per weight, closer to the original model."))
    return _card("quant", "", detail, base, after, quality=quality, source=source, title=title)


def _experts_card(s: _Search, v: Variant, base: Candidate, w0: Wishes) -> list[AdviceCard]:
    spec = v.spec
    if not (spec.is_moe and _has_gpu(s.hw)) or base.fit == "full_gpu":
        return []
    w = replace(w0, n_gpu_layers="auto")
    n = min_experts_on_cpu(spec, s.hw, w)
    if not n:
        return []
    after = s.eval(v, w, n_cpu_moe=n)
    plain = s.eval(v, w)
    if after.fit == "too_large" or after.decode <= plain.decode:
        return []
    gpu = after.numbers()["gpu_bytes"]
    room = sum(d.available_bytes for d in after.estimate.memory.devices if d.device != CPU)
    title = (f"Experts of the first {n} layers in RAM: the rest fits in {_gb(room)} of GPU memory, "
             f"{_numbers(base, after)}")
    detail = (f"Attention and the KV cache of every layer stay on the GPU ({_gb(gpu)}); only the routed experts "
              f"of layers 0-{n - 1} are read from RAM, {spec.n_expert_used} of {spec.n_expert} per token. "
              f"Plain partial offload at the same settings: {_tok(plain.decode)} tok/s.")
    return [_card("experts", "", detail, base, after, title=title,
                  quality="none: same computation on another device", source="")]


def _combined_card(s: _Search, v: Variant, base: Candidate, tuned: Wishes,
                   singles: list[AdviceCard]) -> list[AdviceCard]:
    """Levers add up: the best loadable combination for the same file, with only
    published-quality KV types (f16, q8_0)."""
    pool = []
    kv_types = [k for k in _kv_types_for(v.spec) if k in KV_KLD]
    ubs = sorted({base.estimate.config.n_ubatch} | {c.settings["n_ubatch"] for c in singles if c.kind == "batch"})
    for k in kv_types:
        for ub in ubs:
            pool.append(s.eval(v, replace(tuned, kv_type=k, n_ubatch=ub, n_batch=max(tuned.n_batch, ub))))
    best = max(pool, key=lambda c: gain(base, c)["score"])
    g = gain(base, best)["score"]
    loadable = [c for c in singles if c.runtime_supported]
    if any(c.settings == best.settings for c in loadable):
        return []
    if g < max((c.gain["score"] for c in loadable), default=0.0) + 0.05:
        return []
    changes = _changes(base.settings, best.settings)
    if not changes:
        return []
    detail = "Several levers at once: " + ", ".join(changes) + "."
    kv_b, kv_a = base.estimate.config.kv_type, best.estimate.config.kv_type
    if kv_a != kv_b and kv_a in KV_KLD and kv_b in KV_KLD:
        # the only lever here that changes the numbers computed: the cache type
        quality = (f"{kv_a} KV cache instead of {kv_b}: {KV_DPPL[kv_a] - KV_DPPL[kv_b]:+.4f} PPL, "
                   f"KLD {KV_KLD[kv_a] - KV_KLD[kv_b]:+.4f}")
        source = KV_SOURCE
    else:
        quality, source = "none: same computation, other placement and batching", ""
    return [_card("combined", "All together (" + ", ".join(changes) + ")", detail, base, best,
                  quality=quality, source=source)]
