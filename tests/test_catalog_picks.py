"""Picks an expert would sign, on the reference machines of README "Top picks"
(tests/profiles/*.json): invariants, not orders -- usable speed, headroom kept, the quant a
careful user would take, full GPU over partial offload, the newest of a line first."""

from __future__ import annotations

from pathlib import Path

import pytest

from rooflight.catalog import picks
from rooflight.catalog.rank import rank_models
from rooflight.hardware.profile_io import load_profile

PROFILES = sorted((Path(__file__).parent / "profiles").glob("*.json"))
IDS = [p.stem for p in PROFILES]
_cache: dict = {}


def ranked(profile: Path, use_case: str = "chat"):
    key = (profile.stem, use_case)
    if key not in _cache:
        hw = load_profile(profile, measure_bandwidth=False)
        _cache[key] = (hw, rank_models(hw, use_case=use_case))
    return _cache[key]


def test_every_reference_machine_has_a_profile():
    assert set(IDS) == {"laptop-16gb-cpu", "rtx4060-8gb", "rtx3060-12gb", "rtx4060ti-16gb", "rtx3090-24gb",
                        "rtx4090-24gb", "rtx5090-32gb", "m2-16gb", "m4max-64gb", "strix-halo-128gb"}


@pytest.mark.parametrize("use_case", ["chat", "coding"])
@pytest.mark.parametrize("profile", PROFILES, ids=IDS)
def test_top_three_run_at_a_usable_speed_with_headroom(profile, use_case):
    hw, rows = ranked(profile, use_case)
    top = rows[:3]
    assert len(top) == 3
    threshold = picks.usable_tok_s(use_case)
    for r in top:
        e = r.best.estimate
        assert r.tier == 2 and r.superseded_by is None, r.model.id
        assert e.performance.decode_tok_s >= threshold, (r.model.id, e.performance.decode_tok_s)
        # at least 10% of RAM, and of each GPU's memory beyond the margin, stays free
        gpus = {f"gpu{g.index}": g for g in hw.gpus}
        for d in e.memory.devices:
            size = hw.cpu.ram_total_bytes if d.device == "cpu" else gpus[d.device].vram_total_bytes
            assert d.total_bytes <= d.available_bytes - 0.10 * size or d.total_bytes == 0, (r.model.id, d.device)
        if hw.gpus:
            assert e.fit == "full_gpu", r.model.id
        else:
            assert e.fit == "cpu_only"


@pytest.mark.parametrize("profile", PROFILES, ids=IDS)
def test_the_quant_is_one_a_careful_user_would_take(profile):
    hw, rows = ranked(profile)
    for r in rows:
        if r.tier != 2:
            continue
        best, q = r.best, r.best.quant
        if r.model.native_quant and any(o.quant == r.model.native_quant and o.estimate.fit != "too_large"
                                        for o in r.options):
            assert q == r.model.native_quant, r.model.id  # gpt-oss: MXFP4
            continue
        offered_band = [o for o in r.options if o.quant in picks.BAND]
        if q in picks.HIGHER and offered_band:  # only where it costs nothing against a band quant
            speed = best.estimate.performance.decode_tok_s
            assert any(o.estimate.fit == best.estimate.fit
                       and speed >= picks.FREE_SPEED * o.estimate.performance.decode_tok_s
                       for o in offered_band), (r.model.id, q)
        elif offered_band:
            assert picks.at_least_q4_k_m(q), (r.model.id, q)


@pytest.mark.parametrize("profile", PROFILES, ids=IDS)
def test_full_gpu_beats_partial_offload(profile):
    hw, rows = ranked(profile)
    for r in rows:
        e = r.best.estimate
        if e.fit != "partial_gpu":
            continue
        # no full-GPU file of at least Q4_K_M with headroom runs over 1.5x faster
        for o in r.options:
            if o.estimate.fit == "full_gpu" and picks.at_least_q4_k_m(o.quant) and o.headroom:
                assert o.estimate.performance.decode_tok_s < 1.5 * e.performance.decode_tok_s, (r.model.id, o.quant)
    # at equal quality, a model that runs wholly on the GPU ranks above one split across devices
    usable = [r for r in rows if r.tier == 2 and r.superseded_by is None]
    for i, a in enumerate(usable):
        for b in usable[i + 1:]:
            if (abs(a.best.quality - b.best.quality) < 0.5 and b.fit == "full_gpu" and a.fit == "partial_gpu"
                    and b.best.estimate.performance.decode_tok_s > a.best.estimate.performance.decode_tok_s):
                pytest.fail(f"{a.model.id} (partial) ranks above {b.model.id} (full GPU) at equal quality")


def test_the_issue_cases():
    """Issue 15: on a 24 GB RTX 4090, Qwen3 30B-A3B is not ranked at a partial-offload Q8_0
    when a Q4_K_M fits the card; on a 24 GB CPU-only box the pick leaves headroom."""
    hw, rows = ranked(next(p for p in PROFILES if p.stem == "rtx4090-24gb"))
    by_id = {r.model.id: r for r in rows}
    for mid in ("qwen3-30b-a3b", "qwen3-30b-a3b-instruct-2507", "mistral-small-3.2-24b"):
        assert by_id[mid].fit == "full_gpu" and by_id[mid].best.quant != "Q8_0", mid
    assert rows[0].model.params_total > 8  # not a 7B coder for chat
    from rooflight.hardware import profile_from_dict

    box = profile_from_dict({"cpu": {"cores": 2, "threads": 2, "ram_total_bytes": 24 * 2**30,
                                     "ram_available_bytes": 22_400_000_000, "ram_bandwidth_gbs": 18.5},
                             "gpus": [], "backend": "cpu"}, measure_bandwidth=False)
    for r in rank_models(box):
        if r.tier == 2:
            assert r.best.estimate.memory.total_bytes <= 0.9 * 24 * 2**30 - 512 * 2**20
    assert rank_models(box)[0].model.params_total > 0.6  # not the smallest model first


def test_strix_halo_runs_a_large_mixture_of_experts():
    hw, rows = ranked(next(p for p in PROFILES if p.stem == "strix-halo-128gb"))
    top = rows[:3]
    assert any(r.model.is_moe and r.model.params_total >= 100 for r in top)
