"""Thread-count sweep: candidates, the picker, a real sweep, and plans that use the winner."""

from contextlib import closing

import pytest

from rooflight.estimate import Calibration, Wishes, plan
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime.threads import (
    ThreadRun,
    candidate_threads,
    physical_cores,
    pick_best,
    preferred_threads,
    store_sweep,
    sweep_threads,
)
from rooflight.store.calibration import CalibrationStore, ThreadChoice, machine_key, size_band


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("m") / "tiny.gguf", n_layer=2, n_embd=256, n_head=4,
                       n_head_kv=2, n_ff=512, n_vocab=2000, ftype="Q8_0", context_length=1024)


def _store():
    return closing(CalibrationStore())


@pytest.fixture(scope="module")
def hw():
    return detect()


def test_candidates_start_from_physical_cores():
    assert candidate_threads(2, 2) == [1, 2]
    assert candidate_threads(8, 16) == [1, 4, 7, 8, 16]
    assert candidate_threads(6, 6) == [1, 3, 5, 6]
    assert candidate_threads(1, 1) == [1]
    assert physical_cores() in candidate_threads()


def run(n, decode, prefill):
    return ThreadRun(n, decode, prefill, (decode,), (prefill,))


def test_picker_takes_fastest_decode_and_breaks_near_ties_on_prefill():
    assert pick_best([run(1, 100, 500), run(2, 150, 900), run(4, 120, 1500)]) == 2
    # 2 and 4 decode within 3%: prefill (compute-bound, where threads matter) decides
    assert pick_best([run(1, 100, 500), run(2, 150, 900), run(4, 148, 1500)]) == 4
    # a full tie: fewer threads (less contention with everything else)
    assert pick_best([run(2, 150, 900), run(4, 150, 900)]) == 2


def test_preference_applies_to_models_of_similar_size():
    cal = Calibration(threads=((10_000_000, 1), (4_000_000_000, 6)))
    assert cal.preferred_threads(12_000_000) == 1
    assert cal.preferred_threads(7_000_000_000) == 6
    assert cal.preferred_threads(200_000_000) is None  # 20x from both: physical cores
    assert Calibration().preferred_threads(10_000_000) is None
    assert size_band(16 * 1024**2) == size_band(20 * 1024**2) != size_band(4 * 1024**3)


@pytest.mark.slow
def test_real_sweep_measures_each_count_and_is_kept(model, hw):
    spec = load_model_spec(str(model))
    est = plan(spec, hw, Wishes(n_ctx=512, prompt_tokens=64, gen_tokens=32))
    seen = []
    sweep = sweep_threads(model, est.config, [1, 2], prompt_tokens=64, gen_tokens=32, repeats=2,
                          progress=lambda n, d, p: seen.append(n))
    assert sorted(seen) == [1, 1, 2, 2] and seen[:2] != seen[2:]  # interleaved, order rotated
    assert [r.n_threads for r in sweep.runs] == [1, 2]
    assert all(r.decode_tok_s > 0 and r.prefill_tok_s > 0 and len(r.decode_runs) == 2 for r in sweep.runs)
    assert sweep.best == pick_best(sweep.runs)
    assert sweep.to_dict()["best"] == sweep.best

    assert preferred_threads(hw, spec.file_bytes) is None  # nothing measured yet
    store_sweep(hw, spec.name, spec.file_bytes, sweep)
    assert preferred_threads(hw, spec.file_bytes) == sweep.best
    assert preferred_threads(hw) == sweep.best
    assert preferred_threads(hw, spec.file_bytes * 1000) is None


def test_plans_for_this_machine_use_the_kept_count(model, hw):
    spec = load_model_spec(str(model))
    kept = physical_cores() + 1  # any count the default would not give
    with _store() as store:
        store.set_thread_choice(ThreadChoice(machine_key(hw), hw.backend, spec.name, spec.file_bytes,
                                             kept, 100.0, 1000.0))
        cal = store.calibration(machine_key(hw), hw.backend)
    assert not cal.active  # a thread choice alone does not scale speeds
    assert plan(spec, hw, Wishes(), calibration=cal).config.n_threads == kept
    # no calibration (a --hardware profile): the physical-core default
    assert plan(spec, hw, Wishes()).config.n_threads == max(1, hw.cpu.cores)
    # the user's own choice wins
    assert plan(spec, hw, Wishes(n_threads=1), calibration=cal).config.n_threads == 1
    # a newer sweep in the same size band replaces the older choice
    with _store() as store:
        store.set_thread_choice(ThreadChoice(machine_key(hw), hw.backend, spec.name, spec.file_bytes + 10,
                                             1, 100.0, 1000.0))
        assert store.thread_choices(machine_key(hw), hw.backend) == ((spec.file_bytes + 10, 1),)
