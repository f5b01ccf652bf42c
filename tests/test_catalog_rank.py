"""Ranking the catalog for a machine: best quant per model, fit badges, filters, CLI."""

import json
import subprocess
import sys

from rooflight.catalog import load_catalog
from rooflight.catalog.quality import quality_score
from rooflight.catalog.rank import MIN_USABLE_TOK_S, rank_models, unavailable_models
from rooflight.hardware import profile_from_dict
from test_estimate_memory import GiB, machine


def test_big_gpu_runs_everything_small_and_ranks_by_score():
    hw = profile_from_dict({"gpus": [{"name": "RTX 4090"}], "cpu": {"ram_total_bytes": 64 * GiB}},
                           measure_bandwidth=False)
    ranked = rank_models(hw, ctx=4096)
    # every catalog model is ranked, or listed apart with "estimate not available for ARCH"
    assert len(ranked) + len(unavailable_models()) == len(load_catalog())
    keys = [(r.tier, r.superseded_by is None, r.score) for r in ranked]
    assert keys == sorted(keys, reverse=True)
    by_id = {r.model.id: r for r in ranked}
    small = next(r for r in ranked if r.model.params_total < 2)
    assert small.fit == "full_gpu"
    assert any(r.fit == "too_large" for r in by_id.values() if r.model.params_total > 200)


def test_best_quant_runs_at_usable_speed_when_one_does():
    hw = machine(8 * GiB)
    for r in rank_models(hw, ctx=4096):
        usable = [o for o in r.options if o.estimate.fit != "too_large" and o.headroom
                  and o.estimate.performance.decode_tok_s >= MIN_USABLE_TOK_S]
        if usable:
            assert r.best in usable


def test_quality_falls_with_bits_and_less_for_big_models():
    assert quality_score(60, "Q8_0", 8) > quality_score(60, "Q4_K_M", 8) > quality_score(60, "Q2_K", 8)
    loss_small = 1 - quality_score(60, "Q4_K_M", 1) / 60
    loss_big = 1 - quality_score(60, "Q4_K_M", 70) / 60
    assert loss_big < loss_small


def test_filters():
    hw = machine(ram=8 * GiB, backend="cpu")
    fits = rank_models(hw, fits_only=True)
    assert fits and all(r.fit != "too_large" for r in fits)
    assert all(1 <= r.model.params_total <= 8 for r in rank_models(hw, min_params_b=1, max_params_b=8))
    assert all("coding" in r.model.tags for r in rank_models(hw, use_case="coding"))
    assert all("apache" in r.model.license.lower() for r in rank_models(hw, license_contains="apache"))


def test_rank_cli_json():
    r = subprocess.run([sys.executable, "-m", "rooflight", "rank", "--json", "--max-params", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["models"]
    m = doc["models"][0]
    assert set(m) >= {"id", "name", "quant", "fit", "decode_tok_s", "prefill_tok_s", "memory_bytes", "score",
                      "quality", "repo", "file", "options"}
    assert subprocess.run([sys.executable, "-m", "rooflight", "rank", "--use-case", "juggling"],
                          capture_output=True, text=True).returncode == 2


def test_rank_says_what_its_speeds_stand_on_and_offers_the_probe_for_this_machine(tmp_path):
    """No probe stored (the test's own data folder): the text ranking says its speeds come
    from the table and, for this machine only, names `rooflight probe`; a what-if profile gets
    the first line without the hint."""
    from rooflight.format import PROBE_HINT

    def rank_text(*extra: str) -> str:
        r = subprocess.run([sys.executable, "-m", "rooflight", "rank", "--max-params", "1", *extra],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout

    here = rank_text()
    assert "speeds from table constants (no probe of this machine)." in here
    assert here.rstrip().endswith(PROBE_HINT)
    profile = tmp_path / "machine.json"
    profile.write_text(json.dumps({"cpu": {"name": "What-if CPU", "cores": 8, "threads": 16, "isa": ["avx2"],
                                           "ram_total_bytes": 32 * GiB, "ram_bandwidth_gbs": 60.0},
                                   "gpus": [], "backend": "cpu"}))
    what_if = rank_text("--hardware", str(profile))
    assert "speeds from table constants" in what_if and PROBE_HINT not in what_if


def test_each_model_listed_lower_says_why():
    """The ranking sorts by tier and successor before score, so a model listed below others
    of lower score says why, in the JSON, in the CLI's group and row, and in its key."""
    from rooflight.catalog import picks
    from rooflight.format import RANK_GROUPS, format_ranking

    hw = machine(ram=16 * GiB, backend="cpu")
    ranked = rank_models(hw, ctx=8192)
    threshold = ranked[0].usable_tok_s
    for r in ranked:
        why = r.ranked_lower_because()
        labels = {w.label for w in why}
        doc = r.to_dict()
        assert doc["ranked_lower_because"] == [str(w) for w in why]
        if r.tier == 2:
            assert labels <= {"superseded"}
        elif r.tier == 1:  # each reason is a condition of the tier, and one holds
            e = r.best.estimate
            assert labels - {"superseded"}
            assert ("tight" in labels) == (not r.best.headroom)
            assert ("slow" in labels) == (e.performance.decode_tok_s < threshold)
        else:
            assert not why and r.fit == "too_large"
        assert ("superseded" in labels) == (r.superseded_by is not None)
        if r.superseded_by:
            successor = next(w for w in why if w.label == "superseded")
            assert successor.detail == next(o.model.name for o in ranked if o.model.id == r.superseded_by)
    assert any(r.tier == 1 for r in ranked) and any(r.superseded_by for r in ranked)
    text = format_ranking(ranked).splitlines()
    headings = [line for line in text if line.startswith("-- ")]
    assert headings == [f"-- {RANK_GROUPS[t]} --" for t in sorted({r.tier for r in ranked}, reverse=True)]
    rows = [line for line in text if line[:3].strip().isdigit()]
    for r, line in zip(ranked, rows, strict=True):
        assert line.endswith(", ".join(w.short for w in r.ranked_lower_because()))
    key = text[-1] if text[-1].startswith("why lower: ") else next(t for t in text if t.startswith("why lower: "))
    for reason in {w.label: w for r in ranked for w in r.ranked_lower_because()}.values():
        assert f"{reason.label}: {reason.meaning}" in key
    assert picks.tier_reasons(ranked[0].best, threshold) == ()
    assert "speeds from table constants (no probe of this machine)." in text


# ---- invariants --------------------------------------------------------------------------

FIT_ORDER = {"too_large": 0, "cpu_only": 1, "partial_gpu": 2, "full_gpu": 3}


def test_a_bigger_gpu_never_ranks_a_model_lower_for_fit():
    last: dict[tuple[str, str], int] = {}
    last_best: dict[str, int] = {}
    for vram in (4, 8, 12, 16, 24, 48, 80):
        for r in rank_models(machine(vram * GiB, ram=32 * GiB), ctx=8192):
            for o in r.options:
                fit = FIT_ORDER[o.estimate.fit]
                assert fit >= last.get((r.model.id, o.quant), 0), (r.model.id, o.quant, vram)
                last[(r.model.id, o.quant)] = fit
            # the best fit any of its files reaches never gets worse either
            best = max(FIT_ORDER[o.estimate.fit] for o in r.options)
            assert best >= last_best.get(r.model.id, 0), (r.model.id, vram)
            last_best[r.model.id] = best


def test_too_large_is_never_recommended():
    small = machine(ram=6 * GiB, backend="cpu")
    ranked = rank_models(small, ctx=8192)
    fitting = [r for r in ranked if r.fit != "too_large"]
    too_large = [r for r in ranked if r.fit == "too_large"]
    assert fitting and too_large
    assert ranked == fitting + too_large  # never ahead of a model that runs
    for r in too_large:
        assert r.score == 0.0
        assert all(o.estimate.fit == "too_large" for o in r.options)  # else a fitting quant is chosen
    for r in fitting:
        assert r.score > 0


def test_moe_speed_follows_active_parameters_and_memory_total_ones():
    cpu_box = machine(ram=64 * GiB, backend="cpu")
    by_id = {r.model.id: r for r in rank_models(cpu_box, ctx=4096, min_params_b=30, max_params_b=33)}
    moe, dense = by_id["qwen3-30b-a3b"], by_id["qwen3-32b"]
    m = next(o for o in moe.options if o.quant == "Q4_K_M").estimate
    d = next(o for o in dense.options if o.quant == "Q4_K_M").estimate
    assert m.spec.is_moe and not d.spec.is_moe
    # memory holds every expert: close to the dense model of the same total size
    assert 0.8 < m.memory.total_bytes / d.memory.total_bytes < 1.1
    # decode reads only the routed experts: ~3.3B of 30.5B params against 32.8B
    assert m.performance.decode_tok_s > 4 * d.performance.decode_tok_s
    assert m.spec.active_params < 0.2 * m.spec.params
