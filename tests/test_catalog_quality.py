"""One quality scale: every figure is the Open LLM Leaderboard v2 average with its source; a
model without one ranks by its LMArena score mapped onto that scale (the fit refitted here
from its data) or else by a stated prior; quantization loss from the one KL table."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from rooflight.catalog import find_model, load_catalog
from rooflight.catalog import quality as q
from rooflight.estimate import advise

CATALOG = load_catalog()
OVERLAP = json.loads((Path(__file__).resolve().parents[1] / "bench" / "data" / "quality_index_overlap.json").read_text())


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
    qwen3_14b, qwen25_14b = find_model("qwen3-14b"), find_model("qwen2.5-14b")
    assert qwen3_14b.quality.score is None and qwen3_14b.quality.index is None
    assert qwen3_14b.quality.prior == "successor:qwen2.5-14b"
    assert q.quality_prior(qwen3_14b) == pytest.approx(qwen25_14b.quality.score)
    seed = find_model("seed-oss-36b")
    assert seed.quality.prior == "size" and seed.quality.index is None
    assert q.quality_prior(seed) == pytest.approx(q.size_prior(seed.params_total))
    for m in CATALOG:  # every successor named exists, and chains end
        if m.quality.prior.startswith("successor:"):
            assert find_model(m.quality.prior.removeprefix("successor:")) is not None, m.id
        assert 1.0 <= q.quality_prior(m) <= 60.0
    basis = q.quality_basis(qwen3_14b)
    assert basis["quality_source"] == "prior" and basis["quality_figure"] is None
    assert "succeeds (qwen2.5-14b)" in basis["quality_note"]
    measured = q.quality_basis(qwen25_14b)
    assert measured["quality_source"] == "benchmark" and measured["quality_figure"] == qwen25_14b.quality.score


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
        assert m["quality_source"] in ("benchmark", "mapped", "prior") and m["quality_note"]
        assert m["options"]
        for o in m["options"]:
            assert set(o) >= {"quant", "fit", "decode_tok_s", "memory_bytes", "file_bytes"}
    assert rows["llama-3.1-8b"]["quality_source"] == "benchmark"
    assert rows["qwen3-8b"]["quality_source"] == "prior"
    mapped = rows["gpt-oss-20b"]
    assert mapped["quality_source"] == "mapped" and "±6.8 points held-out" in mapped["quality_note"]
    assert "lmarena/arena-catalog" in mapped["quality_note"]
    oss = rows["gpt-oss-20b"]
    assert oss["quant"] == "MXFP4" and oss["file"] == "openai_gpt-oss-20b-MXFP4.gguf"
    assert oss["file_bytes_source"] == "published" and oss["file_bytes"] == 12_100_000_000
    assert doc["unavailable"] == []  # every catalog model is sized (Gemma 4 since 2026-12-02)
    assert {rows[i]["architecture"] for i in ("gemma-4-31b", "gemma-4-e2b", "llama-4-scout")} == {"gemma4", "llama4"}


def test_index_mapping_is_the_fit_it_says_it_is_and_beats_the_size_prior():
    """INDEX_A/B/C and INDEX_LOO_RMSE are the least-squares fit on the stored overlap and its
    leave-one-out error; held out, it does better than the arena score alone, than size alone
    on the same models, and than the size prior's 7-point residual."""
    rows = OVERLAP["models"]
    assert len(rows) >= 6 and len({r["arena"] for r in rows}) == len({r["repo"] for r in rows}) == len(rows)
    fit = q.index_fit(rows)
    assert fit["a"] == pytest.approx(q.INDEX_A, abs=0.01)
    assert fit["b"] == pytest.approx(q.INDEX_B, abs=1e-5) and fit["c"] == pytest.approx(q.INDEX_C, abs=1e-3)
    assert fit["loo_rmse"] == pytest.approx(q.INDEX_LOO_RMSE, abs=0.05)
    assert fit["loo_rmse"] < min(fit["loo_rmse_index_only"], fit["loo_rmse_size_only"], 7.0)
    assert fit["b"] > 0 and fit["c"] > 0  # monotone: a better arena score never maps lower
    assert q.INDEX_NAME == OVERLAP["index"]


def test_every_index_figure_has_its_source_and_agrees_with_the_overlap():
    by_arena = {r["arena"]: r for r in OVERLAP["models"]}
    with_index = [m for m in CATALOG if m.quality.index is not None]
    assert sum(m.quality.score is None for m in with_index) >= 15
    for m in with_index:
        ix = m.quality.index
        assert ix.name == q.INDEX_NAME and 900 < ix.score < 1600, m.id
        assert "lmarena/arena-catalog data/leaderboard-text.json" in ix.source and "category full" in ix.source
        arena_name = ix.source.split("rating of ")[1].split(" ")[0]
        if arena_name in by_arena:  # a model in the fit carries the same score as the fit used
            assert by_arena[arena_name]["arena_score"] == ix.score, m.id
        basis = q.quality_basis(m)
        if m.quality.score is not None:  # a leaderboard figure always wins
            assert basis["quality_source"] == "benchmark" and q.quality_prior(m) == m.quality.score
        else:
            assert basis["quality_source"] == "mapped" and arena_name in basis["quality_note"]
            assert basis["quality_figure"] == pytest.approx(q.quality_prior(m), abs=0.05)


def test_mapped_models_sit_sensibly_among_their_neighbours():
    """Invariants, not an order: within one family a later or larger release with the higher
    arena score maps higher; no mapped figure leaves the span the fit has seen by more than
    its held-out error; and a mapped model ranks above a leaderboard model of no more
    parameters whose arena score is lower by more than the spread of the fit."""
    def prior(model_id):
        return q.quality_prior(find_model(model_id))

    assert prior("qwen3-30b-a3b-instruct-2507") > prior("qwen3-30b-a3b")
    assert prior("gemma-3-4b") < prior("gemma-3-12b") < prior("gemma-3-27b")
    assert prior("gpt-oss-20b") < prior("gpt-oss-120b")
    lo = min(r["leaderboard"] for r in OVERLAP["models"])
    hi = max(r["leaderboard"] for r in OVERLAP["models"])
    mapped = [m for m in CATALOG if m.quality.score is None and m.quality.index is not None]
    figured = [m for m in CATALOG if m.quality.score is not None and m.quality.index is not None]
    spread = 2 * q.INDEX_LOO_RMSE / q.INDEX_B  # arena points worth twice the held-out error
    for m in mapped:
        assert lo - q.INDEX_LOO_RMSE <= q.quality_prior(m) <= hi + q.INDEX_LOO_RMSE, m.id
        for f in figured:
            if f.params_total <= m.params_total and m.quality.index.score - f.quality.index.score > spread:
                assert q.quality_prior(m) > q.quality_prior(f), (m.id, f.id)


@pytest.mark.parametrize("index", [{"name": "x", "score": "high", "source": "y"}, {"name": "x", "score": 1200},
                                   {"name": "x", "score": True, "source": "y"}, "1200"])
def test_a_malformed_index_figure_is_one_sentence_naming_the_entry(index):
    from rooflight.catalog import parse_catalog
    from rooflight.errors import BadInputError

    doc = json.loads((Path(__file__).resolve().parents[1] / "resources" / "catalog.json").read_text())
    entry = next(e for e in doc["models"] if e["id"] == "gpt-oss-20b")
    entry["quality"]["index"] = index
    with pytest.raises(BadInputError, match="gpt-oss-20b"):
        parse_catalog(doc)
