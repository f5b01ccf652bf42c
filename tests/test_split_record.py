"""bench/attention_split.py: the pairs it prints and saves, from extra times made by hand."""

from __future__ import annotations

import pytest

from bench_modules import load_bench


def test_pairs_give_the_later_prompts_extra_time_over_the_earlier_measured_and_by_each_count():
    split = load_bench("attention_split")
    extra = {530: 2.0e-3, 740: 2.8e-3, 790: 3.0e-3, 1000: 3.6e-3}
    chunks = {530: 100.0, 740: 100.0, 790: 130.0, 1000: 130.0}  # one view each: the chunks alike
    positions = {530: 100.0, 740: 141.0, 790: 150.0, 1000: 190.5}
    pairs = split.pair_ratios(extra, chunks, positions)
    assert list(pairs) == ["740 over 530", "1000 over 790"]
    assert pairs["740 over 530"] == pytest.approx({"measured": 1.4, "chunks": 1.0, "positions": 1.41})
    assert pairs["1000 over 790"] == pytest.approx({"measured": 1.2, "chunks": 1.0, "positions": 1.27})


def test_a_thread_count_that_is_not_a_number_is_one_sentence(capsys):
    split = load_bench("attention_split")
    with pytest.raises(SystemExit):
        split.main(["--threads", "two"])
    assert "--threads takes whole numbers" in capsys.readouterr().err


def test_thread_shares_divide_each_prompts_extra_time_by_its_own_one_thread_time():
    """The share cancels a cell's cost at that prompt's cache size: a VM whose cost per cell
    rises from 530 to 740 positions moves the pairs, not the shares."""
    split = load_bench("attention_split")
    prompts = split.PROMPTS
    one = {p: 16e-6 * p * (1.15 if p >= 740 else 1.0) for p in prompts}  # dearer cells from 740 on
    two = {p: one[p] * (0.72 if p == 530 else 0.5) for p in prompts}
    # a count's units are all threads' cycles: 2 threads x the busiest chunk, or the positions
    units = {1: {p: float(p) for p in prompts}, 2: {p: (768.0 if p == 530 else float(p)) for p in prompts}}
    even = {1: {p: float(p) for p in prompts}, 2: {p: float(p) for p in prompts}}
    shares = split.thread_shares({1: one, 2: two}, units, even)
    assert list(shares) == [2] and set(shares[2]) == {str(p) for p in prompts if p >= split.SPLIT_FROM}
    assert shares[2]["530"] == pytest.approx({"measured": 0.72, "chunks": 384 / 530, "positions": 0.5}, rel=1e-3)
    assert shares[2]["740"] == pytest.approx({"measured": 0.5, "chunks": 0.5, "positions": 0.5})
    assert split.thread_shares({2: two}, units, even) == {}  # no 1-thread run, nothing to divide by


def test_share_contrast_sets_the_uneven_prompts_mean_share_against_the_even_ones():
    split = load_bench("attention_split")
    by_prompt = {"480": {"measured": 0.55, "chunks": 0.53, "positions": 0.5},
                 "530": {"measured": 0.70, "chunks": 0.72, "positions": 0.5},
                 "740": {"measured": 0.55, "chunks": 0.51, "positions": 0.5},
                 "790": {"measured": 0.66, "chunks": 0.65, "positions": 0.5}}
    c = split.share_contrast(by_prompt)
    assert c["measured"] == pytest.approx(0.68 / 0.55, rel=1e-3)
    assert c["chunks"] == pytest.approx(0.685 / 0.52, rel=1e-3) and c["positions"] == 1.0
    assert split.share_contrast({"480": by_prompt["480"]}) == {}  # no uneven prompt: nothing to set against
