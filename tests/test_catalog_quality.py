"""One quality scale: every figure is the Open LLM Leaderboard v2 average with its source; a
model without one ranks by a stated prior; quantization loss from the one KL table."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from rooflight.catalog import find_model, load_catalog
from rooflight.catalog import quality as q
from rooflight.estimate import advise

CATALOG = load_catalog()


def test_one_scale_for_every_model_and_every_figure_sourced():
    for m in CATALOG:
        assert m.quality is not None, m.id
        assert m.quality.benchmark == q.SCALE, m.id
        if m.quality.score is not None:
            assert 0 < m.quality.score < 100
            assert "Open LLM Leaderboard v2" in m.quality.source and "modelrank_ai" in m.quality.source
        else:
            assert m.quality.prior == "size" or m.quality.prior.startswith("successor:"), m.id
            assert "no Open LLM Leaderboard v2 average figure" in m.quality.source
    assert sum(m.quality.score is not None for m in CATALOG) >= 25


def test_size_prior_is_the_fit_it_says_it_is():
    """SIZE_PRIOR_A/B are the least-squares line through the catalog's own figures against
    log2(total parameters, billions), as quality.py states."""
    pts = [(math.log2(m.params_total), m.quality.score) for m in CATALOG if m.quality.score is not None]
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    b = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    a = my - b * mx
    assert a == pytest.approx(q.SIZE_PRIOR_A, abs=0.05) and b == pytest.approx(q.SIZE_PRIOR_B, abs=0.05)


def test_priors_are_stated_and_follow_successors():
    qwen3_32b, qwen25_32b = find_model("qwen3-32b"), find_model("qwen2.5-32b")
    assert qwen3_32b.quality.score is None and qwen3_32b.quality.prior == "successor:qwen2.5-32b"
    assert q.quality_prior(qwen3_32b) == pytest.approx(qwen25_32b.quality.score)
    oss = find_model("gpt-oss-120b")
    assert q.quality_prior(oss) == pytest.approx(q.size_prior(oss.params_total))
    for m in CATALOG:  # every successor named exists, and chains end
        if m.quality.prior.startswith("successor:"):
            assert find_model(m.quality.prior.removeprefix("successor:")) is not None, m.id
        assert 1.0 <= q.quality_prior(m) <= 60.0
    basis = q.quality_basis(qwen3_32b)
    assert basis["quality_source"] == "prior" and basis["quality_figure"] is None
    assert "succeeds (qwen2.5-32b)" in basis["quality_note"]
    measured = q.quality_basis(qwen25_32b)
    assert measured["quality_source"] == "benchmark" and measured["quality_figure"] == qwen25_32b.quality.score


def test_one_kl_table():
    """The quant losses are the advisor's published table; only labels it lacks are added."""
    for label, kld in advise.QUANT_KLD_PUBLISHED.items():
        assert q.QUANT_KLD[label] == kld
    assert q.QUANT_KLD["MXFP4"] == 0.0  # gpt-oss's own format
    assert q.quality_score(40, "Q8_0", 8) > q.quality_score(40, "Q4_K_M", 8) > q.quality_score(40, "Q2_K", 8)


def test_rank_json_rows_carry_release_benchmark_and_every_option():
    r = subprocess.run([sys.executable, "-m", "rooflight", "rank", "--json", "--hardware",
                        "tests/profiles/rtx4090-24gb.json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    rows = {m["id"]: m for m in doc["models"]}
    for m in doc["models"]:
        assert len(m["release"]) == 7 and m["release"][4] == "-"
        assert m["quality_benchmark"] == q.SCALE
        assert m["quality_source"] in ("benchmark", "prior") and m["quality_note"]
        assert m["options"]
        for o in m["options"]:
            assert set(o) >= {"quant", "fit", "decode_tok_s", "memory_bytes", "file_bytes"}
    assert rows["llama-3.1-8b"]["quality_source"] == "benchmark"
    assert rows["qwen3-8b"]["quality_source"] == "prior"
    oss = rows["gpt-oss-20b"]
    assert oss["quant"] == "MXFP4" and oss["file"] == "openai_gpt-oss-20b-MXFP4.gguf"
    assert oss["file_bytes_source"] == "published" and oss["file_bytes"] == 12_100_000_000
    unavailable = {u["id"]: u for u in doc["unavailable"]}
    assert unavailable["gemma-4-31b"]["reason"].lower().startswith("estimate not available for gemma4")
    assert not set(unavailable) & set(rows)
