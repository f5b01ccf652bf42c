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
