"""Optimization advisor (estimate/advise.py): the advice it gives on --hardware-style
machines, its settings, its quality sources, its Pareto front and its speed."""

import json
import math
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from rooflight.catalog import find_model
from rooflight.errors import BadInputError
from rooflight.estimate import Wishes, plan, plan_memory
from rooflight.estimate.advise import (
    KV_SOURCE,
    NOT_MEASURED,
    QUANT_SOURCE,
    Variant,
    advise,
    catalog_variants,
    default_quant,
    min_experts_on_cpu,
    plan_experts_on_cpu,
    quality_of,
    settings_config,
    settings_wishes,
)
from rooflight.estimate.advise_search import _objectives
from rooflight.estimate.placement import CPU
from rooflight.hardware import profile_from_dict

GiB = 2**30


def _experts_moved(spec, n_cpu_moe):
    """The spec with the routed-expert tensors of the first n layers taken out of their
    blocks, i.e. placed with the CPU-side input tensors: an independent way to state what
    --n-cpu-moe does to memory, compared with plan_memory of RunConfig.n_cpu_moe."""
    tensors = tuple(
        replace(t, layer=None) if t.is_expert and t.layer is not None and t.layer < n_cpu_moe else t
        for t in spec.tensors
    )
    return replace(spec, tensors=tensors)


def _profile(gpus=(), ram_gib=32, cores=8, backend=None):
    d = {
        "gpus": list(gpus),
        "cpu": {"name": "test cpu", "cores": cores, "threads": 2 * cores, "isa": ["avx2", "fma"],
                "ram_total_bytes": ram_gib * GiB, "ram_available_bytes": int(0.9 * ram_gib * GiB),
                "ram_bandwidth_gbs": 50.0, "max_freq_mhz": 4000.0},
    }
    if backend:
        d["backend"] = backend
    return profile_from_dict(d, measure_bandwidth=False)


RTX_3060 = _profile([{"name": "RTX 3060"}])  # 12 GB, 360 GB/s
RTX_3090 = _profile([{"name": "RTX 3090"}], ram_gib=64)  # 24 GB
APPLE_M2 = _profile([{"name": "Apple M2", "vendor": "apple", "unified_memory": True, "vram_total_bytes": 11 * GiB}],
                    ram_gib=16)
CPU_ONLY = _profile(backend="cpu")


def _advise(model_id, quant, hw, **wishes):
    return advise(catalog_variants(find_model(model_id)), hw, Wishes(**wishes), current=quant)


def _card(advice, kind):
    found = [c for c in advice.cards if c.kind == kind]
    assert found, f"no {kind} card among {[c.title for c in advice.cards]}"
    return found[0]


# ---- the levers, one by one --------------------------------------------------------------


def test_q8_kv_cache_makes_32k_fit_on_a_12gb_gpu():
    a = _advise("llama-3.1-8b", "Q8_0", RTX_3060, n_ctx=32768)
    assert a.baseline.fit == "partial_gpu"
    card = _card(a, "kv_type")
    assert card.settings["kv_type"] == "q8_0" and card.settings["flash_attn"] is True
    assert card.before["fit"] == "partial_gpu" and card.after["fit"] == "full_gpu"
    assert card.after["decode_tok_s"] > card.before["decode_tok_s"]
    assert card.after["kv_bytes"] == pytest.approx(card.before["kv_bytes"] * (34 / 32) / 2, rel=0.01)
    assert "KV cache in q8_0 lets 32k context fit entirely on the GPU: decode" in card.title
    b, f = round(card.before["decode_tok_s"]), round(card.after["decode_tok_s"])
    assert f"decode {b} -> {f} tok/s" in card.title
    assert card.source == KV_SOURCE and "PR #7412" in card.source
    assert card.runtime_supported


def _ddr4(gpus):
    """A 12 GB card beside dual-channel DDR4 measured at 30 GB/s: where a layer split's
    extra reads from RAM (attention and shared weights of its CPU layers) cost most."""
    d = {"gpus": gpus, "cpu": {"name": "test cpu", "cores": 8, "threads": 16, "isa": ["avx2", "fma"],
                               "ram_total_bytes": 32 * GiB, "ram_available_bytes": int(0.9 * 32 * GiB),
                               "ram_bandwidth_gbs": 30.0, "max_freq_mhz": 4000.0}}
    return profile_from_dict(d, measure_bandwidth=False)


def test_expert_offload_for_qwen3_30b_a3b_on_12gb():
    hw = _ddr4([{"name": "RTX 3060"}])
    a = _advise("qwen3-30b-a3b", "Q4_K_M", hw, n_ctx=8192)
    assert a.baseline.fit == "partial_gpu"
    card = _card(a, "experts")
    n = card.settings["n_cpu_moe"]
    assert 0 < n < 48 and card.settings["n_gpu_layers"] == 49
    assert card.runtime_supported and "not available" not in card.detail
    assert card.after["fit"] == "partial_gpu"  # every block on the GPU, some experts in RAM
    gpu = next(d for d in card.candidate.estimate.memory.devices if d.device != CPU)
    assert gpu.total_bytes <= gpu.available_bytes
    # n is the fewest: with the experts of one layer fewer in RAM, the GPU overflows
    spec = next(v.spec for v in catalog_variants(find_model("qwen3-30b-a3b")) if v.quant == "Q4_K_M")
    fewer = plan_memory(spec, hw, replace(card.candidate.estimate.config, n_cpu_moe=n - 1))
    assert not all(d.fits for d in fewer.devices if d.device != CPU)
    # the same through the independent statement of what moves (_experts_moved)
    fewer = plan_memory(_experts_moved(spec, n - 1), hw, replace(card.candidate.estimate.config, n_cpu_moe=0))
    assert not all(d.fits for d in fewer.devices if d.device != CPU)
    # better than plain partial offload at the same settings, as the card says
    assert card.after["decode_tok_s"] > a.baseline.decode
    # the card's settings are a RunConfig the runtime loads, experts in RAM included
    cfg = settings_config(card.settings)
    assert cfg == card.candidate.estimate.config and cfg.n_cpu_moe == n
    assert plan(spec, hw, settings_wishes(card.settings)).config == cfg


def test_a_larger_micro_batch_for_moe_prompts_on_a_gpu():
    """MoE prompt matmuls pay a fixed cost per expert per micro-batch (estimate/moe_prompt.py):
    on a 24 GB GPU the advisor offers a larger micro-batch for Qwen3-30B-A3B's prompts and
    says why; for a dense model of the same size class the gain is too small to offer."""
    a = _advise("qwen3-30b-a3b", "Q4_K_M", RTX_3090, n_ctx=8192, prompt_tokens=4096)
    card = _card(a, "batch")
    assert card.settings["n_ubatch"] > 512
    assert card.after["prefill_tok_s"] > 1.5 * a.baseline.prefill
    assert "128 experts" in card.detail
    dense = _advise("llama-3.1-8b", "Q4_K_M", RTX_3090, n_ctx=8192, prompt_tokens=4096)
    assert not [c for c in dense.cards if c.kind == "batch"]


def test_a_smaller_micro_batch_says_it_frees_gpu_memory():
    """Where the advisor offers a smaller micro-batch (its compute buffer shrinks, more of the
    model fits on the GPU), the reason says that, not that bigger batches read less."""
    slow_host = profile_from_dict({"gpus": [{"name": "RTX 3060"}], "cpu": {
        "name": "2-core VM", "cores": 2, "threads": 2, "isa": ["avx2", "fma"], "ram_total_bytes": 24 * GiB,
        "ram_available_bytes": 20 * GiB, "ram_bandwidth_gbs": 20.0}}, measure_bandwidth=False)
    a = _advise("qwen3-14b", "Q4_K_M", slow_host, n_ctx=32768)
    cards = [c for c in a.cards if c.kind == "batch" and c.settings["n_ubatch"] < a.baseline.estimate.config.n_ubatch]
    assert cards, [c.title for c in a.cards]
    assert "leaves room for more of the model on the GPU" in cards[0].detail
    assert "bigger batches" not in cards[0].detail


def test_a_smaller_micro_batch_without_a_gpu_says_it_saves_ram():
    """On a CPU-only machine there is no GPU to make room on: the card says what it saves."""
    cpu_only = profile_from_dict({"backend": "cpu", "cpu": {
        "name": "2-core VM", "cores": 2, "threads": 2, "isa": ["avx2", "fma"], "ram_total_bytes": 24 * GiB,
        "ram_available_bytes": 20 * GiB, "ram_bandwidth_gbs": 20.0}}, measure_bandwidth=False)
    a = _advise("gemma-3-1b", "Q4_K_M", cpu_only, n_ctx=8192)
    cards = [c for c in a.cards if c.kind == "batch" and c.settings["n_ubatch"] < a.baseline.estimate.config.n_ubatch]
    assert cards, [c.title for c in a.cards]
    assert "needs less RAM" in cards[0].detail and "GPU" not in cards[0].detail


def test_experts_on_cpu_moves_exactly_the_expert_bytes():
    spec = find_model("qwen3-30b-a3b").spec("Q4_K_M")
    n = min_experts_on_cpu(spec, RTX_3060, Wishes(n_ctx=8192))
    est = plan_experts_on_cpu(spec, RTX_3060, Wishes(n_ctx=8192), n)
    full = plan(spec, RTX_3060, Wishes(n_ctx=8192, n_gpu_layers=49))
    moved = sum(t.n_bytes for t in spec.tensors if t.is_expert and t.layer < n)
    gpu_e, gpu_f = est.memory.device("gpu0"), full.memory.device("gpu0")
    assert gpu_f.weights_bytes - gpu_e.weights_bytes == moved
    assert est.memory.device("cpu").weights_bytes - full.memory.device("cpu").weights_bytes == moved
    assert gpu_e.kv_bytes == gpu_f.kv_bytes  # attention and its cache stay on the GPU
    # the experts' reads cost time: slower than if everything fitted on the GPU
    assert est.performance.decode_tok_s < full.performance.decode_tok_s
    assert plan_experts_on_cpu(spec, RTX_3060, Wishes(n_ctx=8192), 0).performance.decode_tok_s == pytest.approx(
        full.performance.decode_tok_s)


def test_windowed_swa_cache_on_apple_m2():
    a = _advise("gemma-3-4b", "Q4_K_M", APPLE_M2, n_ctx=32768, swa_full=True)
    card = _card(a, "swa")
    assert card.settings["swa_full"] is False
    assert card.after["kv_bytes"] < card.before["kv_bytes"] / 3  # 5 of 6 layers keep only the window
    assert card.quality_effect.startswith("none") and "13194" in card.source


def test_flash_attention_and_threads_on_a_cpu_only_machine():
    a = _advise("llama-3.2-1b", "Q4_K_M", CPU_ONLY, n_ctx=8192, flash_attn="off", n_threads=2)
    kinds = {c.kind for c in a.cards}
    assert not kinds & {"gpu_layers", "experts"}
    # on a CPU flash attention saves compute buffers but walks the cache row by row, which
    # decodes slower than two batched mat-muls (measured: cpu_attention._ATTENTION_CYCLES);
    # a card, where the memory is worth it, must say both
    for fa in (c for c in a.cards if c.kind == "flash_attn"):
        assert fa.settings["flash_attn"] is True and fa.after["compute_bytes"] < fa.before["compute_bytes"]
        assert fa.after["decode_tok_s"] <= fa.before["decode_tok_s"]
        assert "exact attention" in fa.source
    th = _card(a, "threads")
    assert th.settings["n_threads"] == 8 and th.after["decode_tok_s"] > 1.3 * th.before["decode_tok_s"]
    assert th.after["prefill_tok_s"] > 3 * th.before["prefill_tok_s"]


def test_gpu_layers_pinned_too_low_on_a_24gb_gpu():
    a = _advise("qwen2.5-14b", "Q4_K_M", RTX_3090, n_ctx=8192, n_gpu_layers=20)
    card = _card(a, "gpu_layers")
    assert card.settings["n_gpu_layers"] == 49 and card.after["fit"] == "full_gpu"
    assert card.after["decode_tok_s"] > 1.5 * card.before["decode_tok_s"]


def test_smaller_context_when_nothing_else_fits():
    tight = _profile(ram_gib=12, backend="cpu")
    a = _advise("qwen2.5-7b", "Q8_0", tight, n_ctx=131072)
    assert a.baseline.fit == "too_large"
    ctx = [c for c in a.cards if c.kind == "context"]
    assert ctx and ctx[0].after["fit"] == "cpu_only" and ctx[0].settings["n_ctx"] < 131072
    # when the model does not fit, only what makes it fit is advised
    assert all(c.after["fit"] != "too_large" for c in a.cards)


def test_quant_cards_quote_the_perplexity_table():
    a = _advise("llama-3.1-8b", "Q5_K_M", RTX_3060, n_ctx=8192)
    faster = [c for c in a.cards if c.kind == "quant" and c.after["decode_tok_s"] > c.before["decode_tok_s"]]
    assert faster
    c = faster[0]
    assert c.settings["quant"] in ("Q4_K_M", "Q4_K_S") and c.settings["model"].startswith("hf:")
    assert c.source == QUANT_SOURCE
    assert "Q4_K_M instead of Q5_K_M" in c.title or "Q4_K_S instead of Q5_K_M" in c.title
    if c.settings["quant"] == "Q4_K_M":  # 0.175 - 0.057 (REFERENCE.md §2)
        assert "+0.12 PPL" in c.title and "perplexity +0.118" in c.quality_effect


# ---- quality: only published effects --------------------------------------------------------


def test_combined_card_names_only_the_quality_effect_it_changes():
    a = _advise("llama-3.2-1b", "Q4_K_M", CPU_ONLY, n_ctx=8192, n_threads=2)
    card = _card(a, "combined")
    assert card.settings["kv_type"] == "q8_0" and card.settings["n_threads"] == 8
    assert card.quality_effect.startswith("q8_0 KV cache instead of f16") and "Q4_K_M" not in card.quality_effect
    assert card.source == KV_SOURCE
    assert card.gain["score"] > max(c.gain["score"] for c in a.cards if c.kind != "combined")


def test_quality_only_from_published_figures():
    assert quality_of("Q4_K_M", "f16").kld == pytest.approx(0.031)
    assert quality_of("Q4_K_M", "q8_0").kld == pytest.approx(0.031 + 0.000791)
    for quant, kv in (("Q4_1", "f16"), ("Q5_0", "f16"), ("Q4_K_M", "q4_0")):
        q = quality_of(quant, kv)
        assert q.kld is None and q.text.startswith(NOT_MEASURED)


@pytest.mark.parametrize("hw", [RTX_3060, RTX_3090, APPLE_M2, CPU_ONLY], ids=["3060", "3090", "m2", "cpu"])
@pytest.mark.parametrize("model,quant,ctx", [("llama-3.1-8b", "Q6_K", 32768), ("gemma-3-12b", "Q4_K_M", 16384),
                                             ("qwen3-30b-a3b", "Q4_K_M", 8192)])
def test_every_card_is_sourced_loadable_and_ranked(hw, model, quant, ctx):
    a = _advise(model, quant, hw, n_ctx=ctx, n_threads=2, flash_attn="off", swa_full=True)
    for card in a.cards:
        q = card.quality_effect
        # a quality change is only claimed with a source
        assert card.source or q.startswith((NOT_MEASURED, "none", "the model sees", "the model can see")), card
        assert card.title and card.detail and card.gain["score"] >= 0.05
        if card.runtime_supported:
            # "use these settings": the runtime config, and wishes that plan it again
            cfg = settings_config(card.settings)
            assert cfg == card.candidate.estimate.config
            spec = next(v.spec for v in catalog_variants(find_model(model)) if v.quant == card.settings["quant"])
            again = plan(spec, hw, settings_wishes(card.settings, Wishes()))
            assert again.config == cfg and again.fit == card.after["fit"]
        json.dumps(card.to_dict())
    scores = [c.gain["score"] for c in a.cards]
    assert len(scores) <= 6
    assert all(s >= 0.05 for s in scores)


def test_pareto_front_is_non_dominated_and_small():
    a = _advise("llama-3.1-8b", "Q5_K_M", RTX_3060, n_ctx=32768)
    pts = a.pareto
    assert 2 <= len(pts) <= 8
    assert all(p.fit != "too_large" and p.estimate.config.n_ctx == 32768 for p in pts)
    assert [p.decode for p in pts] == sorted((p.decode for p in pts), reverse=True)
    objs = [_objectives(p) for p in pts]
    for i, oi in enumerate(objs):
        for j, oj in enumerate(objs):
            if i != j:
                assert not (all(x <= y for x, y in zip(oj, oi, strict=True)) and oj != oi), (pts[j].settings, pts[i].settings)
    # the most faithful file that fits is on it, and so is the smallest file
    assert any(p.variant.quant == "Q8_0" for p in pts) and any(p.variant.quant == "Q4_K_S" for p in pts)


def test_single_local_file_and_errors():
    spec = find_model("qwen2.5-0.5b").spec("Q8_0")
    a = advise(spec, CPU_ONLY, Wishes(n_ctx=4096, n_threads=1))
    assert a.baseline.variant.quant == "Q8_0"
    assert not [c for c in a.cards if c.kind == "quant"]  # no other file known
    assert _card(a, "threads")
    with pytest.raises(BadInputError, match="available: Q8_0"):
        advise(Variant("Q8_0", spec), CPU_ONLY, current="Q4_K_M")
    assert default_quant(("Q8_0", "Q4_K_S", "Q4_K_M")) == "Q4_K_M"
    assert default_quant(("Q8_0", "Q6_K", "F16")) == "Q6_K"


def test_a_catalog_model_released_as_a_quant_starts_from_that_file():
    """`rooflight estimate gpt-oss-20b` (and advise) start from the MXFP4 release, the file the
    ranking picks for it, not a Q4_K_M repack; a native quant the catalog lists no file of
    leaves the usual default."""
    from rooflight.commands.common import model_variants

    assert default_quant(("Q4_K_M", "MXFP4", "Q8_0"), "MXFP4") == "MXFP4"
    assert default_quant(("Q4_K_M", "Q8_0"), "MXFP4") == "Q4_K_M"
    entry = find_model("gpt-oss-20b")
    assert entry.native_quant == "MXFP4"
    variants, current = model_variants("gpt-oss-20b", None)
    assert current == "MXFP4" and "Q4_K_M" in {v.quant for v in variants}
    assert model_variants("gpt-oss-20b", "q4_k_m")[1] == "Q4_K_M"
    assert model_variants("qwen3-8b", None)[1] == "Q4_K_M"


def test_quantized_kv_is_not_offered_where_llama_cpp_refuses_it():
    spec = find_model("llama-3.2-1b").spec("Q4_K_M")
    odd = replace(spec, head_dim_k=80, head_dim_v=80)  # phi-2-like heads: not a multiple of 32
    a = advise(odd, CPU_ONLY, Wishes(n_ctx=32768))
    assert all(c.settings["kv_type"] == "f16" for c in a.cards)
    assert all(p.estimate.config.kv_type == "f16" for p in a.pareto)


# ---- speed -----------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-30b-a3b", "gemma-3-27b"])
def test_whole_search_is_fast(model):
    variants = catalog_variants(find_model(model))
    advise(variants, RTX_3060, Wishes(n_ctx=32768))  # warm the per-spec tables
    t0 = time.perf_counter()
    a = advise(variants, RTX_3060, Wishes(n_ctx=32768, flash_attn="off", n_threads=4, swa_full=True))
    elapsed = time.perf_counter() - t0
    assert a.searched >= 25
    assert elapsed < 0.2, f"{model}: {elapsed * 1e3:.0f} ms"


# ---- command line ----------------------------------------------------------------------------


def _run(*args):
    return subprocess.run([sys.executable, "-m", "rooflight", "advise", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_json_and_text(tmp_path):
    prof = tmp_path / "rtx3060.json"
    prof.write_text(json.dumps({"gpus": [{"name": "RTX 3060"}],
                                "cpu": {"cores": 8, "threads": 16, "ram_total_bytes": 32 * GiB,
                                        "ram_available_bytes": 28 * GiB, "ram_bandwidth_gbs": 50.0}}))
    r = _run("llama-3.1-8b", "--quant", "Q8_0", "--hardware", str(prof), "--ctx", "32768", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["model"] == "llama-3.1-8b"
    assert set(doc["baseline"]) >= {"model", "config", "memory", "performance"}
    assert doc["baseline"]["config"]["n_ctx"] == 32768
    assert doc["advice"] and doc["pareto"]
    for card in doc["advice"]:
        assert set(card) >= {"title", "detail", "settings", "before", "after", "gain", "quality_effect", "source"}
        assert {"n_ctx", "n_gpu_layers", "kv_type", "flash_attn", "n_ubatch", "quant"} <= set(card["settings"])
    assert any(c["settings"]["kv_type"] == "q8_0" for c in doc["advice"])

    r = _run("llama-3.1-8b", "--quant", "Q8_0", "--hardware", str(prof), "--ctx", "32768")
    assert r.returncode == 0, r.stderr
    assert "Now: partial GPU offload" in r.stdout and "1. " in r.stdout and "Settings: " in r.stdout
    assert "--kv-type q8_0" in r.stdout


def test_cli_local_file_and_bad_input(tmp_path):
    from rooflight.gguf.synthetic import write_model

    path = write_model(tmp_path / "tiny.gguf", n_layer=2, n_embd=64, ftype="Q8_0", context_length=4096)
    prof = tmp_path / "cpu.json"
    prof.write_text(json.dumps({"cpu": {"cores": 4, "threads": 4, "ram_total_bytes": 8 * GiB,
                                        "ram_bandwidth_gbs": 20.0}, "backend": "cpu"}))
    r = _run(str(path), "--hardware", str(prof), "--threads", "1", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert any(c["kind"] == "threads" for c in doc["advice"])
    assert _run("no-such-model", "--hardware", str(prof)).returncode == 2
    bad = _run(str(path), "--quant", "Q4_K_M", "--hardware", str(prof))
    assert bad.returncode == 2 and "catalog" in bad.stderr
    unknown = _run("llama-3.1-8b", "--quant", "Q2_K", "--hardware", str(prof))
    assert unknown.returncode == 2 and "available" in unknown.stderr
    assert math.isfinite(doc["baseline"]["performance"]["decode_tok_s"])
