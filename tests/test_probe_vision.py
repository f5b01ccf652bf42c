"""The machine probe's image part: its arithmetic from synthetic timings, the vision plan
that stands on it (encode_basis "probe" for a CPU encode, the FLOPs estimate on a GPU or for
another weight type), old stored probes without it, and the real image part on a generated
projector whose stored result `rooflight estimate` then uses."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pytest

from rooflight.estimate import Calibration, Wishes, plan
from rooflight.estimate.probe import EncodeFigure, MachineProbe, Repeats, encode_figure
from rooflight.estimate.vision import encode_flops, vision_for_plan
from rooflight.gguf import load_model_spec
from rooflight.gguf.projector import load_projector_spec, with_projector
from rooflight.hardware import profile_from_dict
from rooflight.store.calibration import machine_key
from rooflight.store.probes import ProbeStore
from test_probe import HW, _probe
from vision_files import vision_model

ENCODE = EncodeFigure("F16", flops_per_s=50e9, encode_s=0.06, encode_flops=3e9, spread=0.04)


@pytest.fixture(scope="module")
def vis(tmp_path_factory):
    return vision_model(tmp_path_factory.mktemp("vis"))


def _spec(vis):
    lm, proj = vis
    return with_projector(load_model_spec(str(lm)), proj)


# ---- arithmetic ------------------------------------------------------------------------------


def test_encode_rate_from_synthetic_timings():
    runs = Repeats((0.030, 0.031, 0.029, 0.090), (True, True, True, False))  # the 4th run disturbed
    fig = encode_figure("f16", 3e9, runs)
    assert fig.file_type == "F16"
    assert fig.encode_s == pytest.approx(0.030)  # the median of the clean runs
    assert fig.flops_per_s == pytest.approx(1e11)
    assert fig.spread == pytest.approx(0.002 / 0.030)
    assert not fig.disturbed
    # one clean run is not a measurement; clean runs that disagree past MAX_STORED_SPREAD are
    # not either (the machine's own drift below it is stored, with its spread)
    assert encode_figure("F16", 3e9, Repeats((0.03, 0.09), (True, False))).disturbed
    assert encode_figure("F16", 3e9, Repeats((0.02, 0.08), (True, True))).disturbed  # 120%
    assert not encode_figure("F16", 3e9, Repeats((0.03, 0.05), (True, True))).disturbed


def test_a_cpu_encode_stands_on_the_probes_rate(vis):
    spec = _spec(vis)
    hw = profile_from_dict(HW)
    w = Wishes(n_ctx=2048, n_threads=2)
    probe = _probe(machine_key(hw), "b", encode=ENCODE)
    table = plan(spec, hw, w, calibration=Calibration(probe=replace(probe, encode=None)))
    est = plan(spec, hw, w, calibration=Calibration(probe=probe))
    assert table.vision.encode_basis == "flops" and est.vision.encode_basis == "probe"
    assert est.vision.encode_s == pytest.approx(encode_flops(spec.projector) / 50e9)
    assert est.to_dict()["vision"]["encode_basis"] == "probe"
    # the time to first token carries the measured encode in place of the FLOPs estimate
    ttft = est.performance.time_to_first_token_s - table.performance.time_to_first_token_s
    assert ttft == pytest.approx(est.vision.encode_s - table.vision.encode_s, rel=1e-6)
    # a probe at another thread count is not this plan's: back to the FLOPs estimate
    other = plan(spec, hw, replace(w, n_threads=1), calibration=Calibration(probe=probe))
    assert other.vision.encode_basis == "flops"


def test_gpu_encode_or_another_weight_type_keeps_the_flops_estimate(vis, tmp_path):
    from rooflight.estimate.config import RunConfig
    from rooflight.gguf.synthetic_mmproj import write_projector

    hw_gpu = profile_from_dict({**HW, "backend": "cuda", "gpus": [{"index": 0, "name": "RTX 4090"}]})
    probe = _probe(machine_key(hw_gpu), "b", encode=ENCODE)
    proj = load_projector_spec(vis[1])
    on_gpu = vision_for_plan(proj, hw_gpu, RunConfig(n_ctx=2048, n_gpu_layers=99, n_threads=2), probe)
    assert on_gpu.device == "gpu0" and on_gpu.encode_basis == "flops"
    on_cpu = vision_for_plan(proj, hw_gpu, RunConfig(n_ctx=2048, n_gpu_layers=0, n_threads=2), probe)
    assert on_cpu.device == "cpu" and on_cpu.encode_basis == "probe"
    q8 = load_projector_spec(write_projector(tmp_path / "mmproj-q8.gguf", projection_dim=64, ftype="Q8_0"))
    hw = profile_from_dict(HW)
    assert vision_for_plan(q8, hw, RunConfig(n_ctx=2048, n_gpu_layers=0, n_threads=2), probe).encode_basis == "flops"


# ---- store -----------------------------------------------------------------------------------


def test_probe_with_encode_round_trips_and_an_old_record_without_it_loads(tmp_path):
    p = _probe("m", "b", encode=ENCODE)
    assert MachineProbe.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    db = tmp_path / "c.sqlite3"
    store = ProbeStore(db)
    store.close()
    old = _probe("m", "b").to_dict()
    del old["encode"]  # as probes were stored before the probe measured images
    con = sqlite3.connect(db)
    with con:
        con.execute("INSERT INTO probes (machine, build, created_at, disturbed, probe) VALUES (?,?,?,?,?)",
                    ("m", "b", 1.0, 0, json.dumps(old)))
    con.close()
    store = ProbeStore(db)
    try:
        loaded = store.get("m", "b")
        assert loaded is not None and loaded.encode is None and loaded.kernel("Q8_0") is not None
    finally:
        store.close()


def test_probe_json_and_panel_line_show_the_encode():
    from rooflight.runtime.probe import ProbeRun
    from rooflight.ui.probe_panel import encode_line, summary

    doc = ProbeRun(_probe("m", "b", encode=ENCODE)).to_dict()
    enc = doc["devices"][0]["image_encode"]
    assert enc == {"file_type": "F16", "gflops": 50.0, "encode_ms": 60.0, "encode_gflop": 3.0, "spread": 0.04,
                   "disturbed": False}
    assert ProbeRun(_probe("m", "b")).to_dict()["devices"][0]["image_encode"] is None
    line = encode_line(ENCODE)
    assert "\n" not in line and "50 GFLOP/s" in line and "F16" in line
    assert summary(_probe("m", "b")).splitlines()[-1].startswith("Image encode: not measured")
    # the probe's notes follow, and a note on why the image was not measured stands for the plain line
    why = "Image encode not measured: the time budget ran out (the machine was busy or slow)."
    drift = "This machine's speed drifted between runs with nothing else running: 2 of the 32 figures' runs ..."
    lines = summary(_probe("m", "b", notes=(why, drift))).splitlines()
    assert lines[-2:] == [why, drift]
    assert not any(line.startswith("Image encode: not measured") for line in lines)
    from rooflight.commands.probe import format_probe

    assert "image encode (F16 projector): 50.0 GFLOP/s, 60.0 ms for 3.00 GFLOP" in format_probe(
        ProbeRun(_probe("m", "b", encode=ENCODE)))


# ---- the real image part ---------------------------------------------------------------------


def _probe_projector(folder):
    from rooflight.runtime.probe_vision import write_probe_pair

    return write_probe_pair(folder)[1]


def test_probe_image_part_is_stored_and_used_by_the_vision_plan(vis, tmp_path, capsys):
    """The image part alone on llama.cpp (a second or two), merged into a probe stored for
    this machine and build; `rooflight estimate` of a vision model then prices its encode
    with the measured rate. This machine is shared: a disturbed figure is kept on request."""
    pytest.importorskip("llama_cpp")
    from rooflight.cli import main
    from rooflight.hardware import detect
    from rooflight.runtime.build import llama_build
    from rooflight.runtime.probe import probe_image_encode

    hw = detect()
    n_threads = max(1, hw.cpu.cores or 1)
    run = probe_image_encode(n_threads, repeats=2, keep_disturbed=True)
    if run.encode is None:
        assert "budget ran out" in run.note
        pytest.skip(f"this machine was too busy to encode once: {run.note}")
    fig = run.encode
    assert fig.file_type == "F16" and fig.flops_per_s > 1e8 and fig.encode_s > 0
    assert len(run.runs["image/encode"]["seconds"]) >= 2 and "others_cpu_share" in run.runs["image/encode"]
    assert fig.spread == pytest.approx(run.runs["image/encode"]["spread"], abs=1e-4)
    # the rate is the plan's FLOPs formula for the probe's projector over the measured time
    assert fig.encode_flops == pytest.approx(encode_flops(load_projector_spec(_probe_projector(tmp_path))))
    assert fig.flops_per_s == pytest.approx(fig.encode_flops / fig.encode_s)

    store = ProbeStore()  # the user's store (a temporary data dir in tests)
    try:
        store.put(_probe(machine_key(hw), llama_build(), n_threads=n_threads, encode=fig))
    finally:
        store.close()
    lm, proj = vis
    assert main(["estimate", str(lm), "--mmproj", str(proj), "--threads", str(n_threads), "--json"]) == 0
    v = json.loads(capsys.readouterr().out)["vision"]
    assert v["device"] == "cpu" and v["encode_basis"] == "probe"
    assert v["encode_s"] == pytest.approx(v["encode_flops"] / fig.flops_per_s, abs=1e-4)


def test_a_disturbed_image_part_is_repeated_and_not_stored():
    """A threshold no run can meet stands in for a busy machine: the encode runs are
    repeated, each recorded as not clean, and no figure comes back, with one sentence why."""
    pytest.importorskip("llama_cpp")
    from rooflight.runtime.probe import probe_image_encode

    run = probe_image_encode(2, busy_threshold=-1.0, repeats=2, budget_s=3.0)
    assert run.encode is None
    r = run.runs["image/encode"]
    assert len(r["seconds"]) >= 2 and not any(r["clean"]) and r["disturbed"]
    assert run.note.startswith("Image encode measured, not stored: other programs used more than")
    # asked to keep it: the figure comes back marked disturbed
    kept = probe_image_encode(2, busy_threshold=-1.0, repeats=2, budget_s=3.0, keep_disturbed=True)
    assert kept.encode is not None and kept.encode.disturbed
