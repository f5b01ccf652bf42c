"""The stress test on a real generated model with real llama.cpp: each reported memory
figure against llama.cpp's own log and against the plan (the integration test's
tolerances), the stop before a context the plan says will not fit, calibration storage,
and the command."""

from __future__ import annotations

import json
import re

import pytest

from rooflight.cli import main
from rooflight.estimate import Wishes
from rooflight.estimate.sweep import STRESS_GEN_TOKENS, plan_at
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware.profile import CPUInfo, HardwareProfile
from rooflight.runtime.llama_log import capture_llama_log, parse_buffers
from rooflight.runtime.probe_defaults import DEFAULT_BUSY_THRESHOLD
from rooflight.runtime.stress import (
    buffer_device,
    default_contexts,
    measured_speeds,
    run_stress,
    stored_speeds,
)
from rooflight.store.calibration import CalibrationStore, machine_key, plausible_ratio

pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.slow

MiB = 2**20
GiB = 2**30
ROUNDING = 2**20 // 100  # llama.cpp logs MiB with two decimals

# The integration test's "llama-f16" shape: big enough that the plan's figures are within
# its 5% (a 100 kB model is dominated by fixed few-hundred-kB buffers).
SHAPE = dict(arch="llama", n_layer=4, n_embd=256, n_head=8, n_head_kv=2, n_ff=768, n_vocab=2000, ftype="F16")


def host(ram_total: int, ram_available: int) -> HardwareProfile:
    return HardwareProfile(
        cpu=CPUInfo("test host", 2, 2, ("avx2",), ram_total, ram_available, 20.0, "profile", 3000.0),
        backend="cpu",
    )


BIG = host(16 * GiB, 16 * GiB)
# 540 MiB available minus the 512 MiB CPU margin: 28 MiB usable. The model needs about
# 18 MiB at 2k, 22 MiB at 4k, 30 MiB at 8k (tested below from the plan itself).
SMALL = host(GiB, 540 * MiB)
# one thread: on a shared 2-core machine llama.cpp's threads otherwise wait on each other
ONE = Wishes(n_threads=1)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = write_model(tmp_path_factory.mktemp("stress") / "stress-f16.gguf", context_length=8192, **SHAPE)
    return path, load_model_spec(str(path))


def _loads(log: str) -> list[str]:
    """The log of each model load, in order (every load starts with the loader's banner)."""
    parts = re.split(r"(?=llama_model_loader: loaded meta data)", log)
    return [p for p in parts if "model buffer size" in p]


def test_each_point_reports_llama_cpp_memory_and_matches_the_plan(model):
    path, spec = model
    store = CalibrationStore()
    machine = machine_key(BIG)
    planned: list[int] = []
    try:
        with capture_llama_log() as log:
            result = run_stress(path, spec, BIG, contexts=[1024, 256, 2048], store=store, machine=machine, wishes=ONE,
                                on_plan=lambda p: planned.append(p.n_ctx))
        assert result.stopped is None
        assert [p.n_ctx for p in result.points] == [256, 1024, 2048] == planned  # ascending
        loads = _loads(log.text)
        assert len(loads) == 3  # one load per context, no more
        for point, text in zip(result.points, loads, strict=True):
            own = parse_buffers(text)  # llama.cpp's own log for this load
            assert point.memory.buffers.model == own.model
            assert point.memory.buffers.kv == own.kv
            assert point.memory.buffers.compute == own.compute
            assert point.memory.buffers.output == own.output
            assert re.search(rf"llama_context: n_ctx\s+= {point.n_ctx}\n", text)  # the context it made
            # the plan against llama.cpp, as tests/test_integration_plan_vs_llama.py checks it
            cpu = point.planned.estimate.memory.device("cpu")
            got = point.memory.devices["cpu"]
            assert set(point.memory.devices) == {"cpu"}
            assert abs(got["kv_bytes"] - cpu.kv_bytes) <= ROUNDING * len(own.kv)
            assert abs(got["weights_bytes"] - cpu.weights_bytes) <= 64 * 1024
            assert got["total_bytes"] == own.model_bytes + own.kv_bytes + own.compute_bytes + own.output_bytes
            assert point.planned_bytes == pytest.approx(point.memory.total_bytes, rel=0.05)
            # the config loaded is the plan for this context
            assert point.planned.estimate.config.n_ctx == point.n_ctx
            assert point.prompt_tokens + point.gen_tokens == point.n_ctx
            assert point.gen_tokens == STRESS_GEN_TOKENS
            assert point.measured.prefill_tok_s > 0 and point.measured.decode_tok_s > 0
        # KV grows with the context, exactly as llama.cpp allocated it
        kvs = [p.memory.devices["cpu"]["kv_bytes"] for p in result.points]
        assert kvs[0] < kvs[1] < kvs[2]
        assert result.stored
        cal = store.calibration(machine, "cpu")
        rows = store._db.execute("SELECT predicted_decode, measured_decode, predicted_prefill, measured_prefill,"
                                 " others_cpu FROM measurements WHERE machine = ?", (machine,)).fetchall()
        assert len(rows) == 3  # every point is stored...
        # ...with how busy the rest of the machine was, as the point says...
        assert [round(r[4], 6) for r in rows] == [round(p.others_cpu, 6) for p in result.points]
        # ...and calibrates unless it is implausibly far off the roofline (store/calibration.py)
        # or ran beside a busy program
        usable = sum(plausible_ratio(r[1] / r[0]) and plausible_ratio(r[3] / r[2])
                     and r[4] <= DEFAULT_BUSY_THRESHOLD for r in rows)
        assert cal.samples == usable
        assert usable >= 1 or any(r[4] > DEFAULT_BUSY_THRESHOLD for r in rows)
        assert result.used_for_calibration == cal.samples  # the store and the report agree
    finally:
        store.close()

    doc = json.loads(json.dumps(result.to_dict()))
    p0 = doc["points"][0]
    assert p0["measured"]["memory"]["devices"][0]["device"] == "cpu"
    assert p0["ratio"]["memory"] == pytest.approx(1.0, abs=0.05)
    assert set(p0["predicted"]) >= {"decode_tok_s", "prefill_tok_s", "memory"}
    # the measured points come back from the store for the speed plot
    back = stored_speeds(spec.name, spec.file_type, machine, "cpu")
    assert [(b.n_ctx, round(b.decode_tok_s, 6)) for b in back] == [
        (m.n_ctx, round(m.decode_tok_s, 6)) for m in measured_speeds(result)]


def test_stops_before_a_context_the_plan_says_will_not_fit(model):
    path, spec = model
    # the premise, from the plan itself: 2k fits this small machine, 8k does not
    assert plan_at(spec, SMALL, 2048).fits and not plan_at(spec, SMALL, 8192).fits
    assert default_contexts(spec) == [512, 2048, 8192]
    with capture_llama_log() as log:
        result = run_stress(path, spec, SMALL, wishes=ONE)  # default contexts: 512, 2k, 8k (trained)
    assert [p.n_ctx for p in result.points] == [512, 2048]
    assert len(_loads(log.text)) == 2  # 8k was never loaded
    assert result.stopped.n_ctx == 8192 and result.stopped.reason == "too_large"
    assert "8192 tokens" in result.stopped.message and "stopped before loading" in result.stopped.message
    assert not result.stored


def test_stops_beyond_the_trained_context_and_on_request(model):
    path, spec = model
    with capture_llama_log() as log:
        result = run_stress(path, spec, BIG, contexts=[256, 32768], wishes=ONE)
    assert [p.n_ctx for p in result.points] == [256]
    assert result.stopped.reason == "beyond_trained_context" and "8192" in result.stopped.message
    assert len(_loads(log.text)) == 1

    result = run_stress(path, spec, BIG, contexts=[256], should_stop=lambda: True)
    assert result.points == () and result.stopped.reason == "cancelled"


def test_a_load_llama_cpp_refuses_ends_the_run_without_a_crash(model, tmp_path):
    path, spec = model
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # tensor data cut off
    result = run_stress(broken, spec, BIG, contexts=[256, 1024])
    assert result.points == ()
    assert result.stopped.reason == "load_failed" and result.stopped.n_ctx == 256


def test_buffer_names_map_to_plan_devices():
    assert [buffer_device(n) for n in ("CPU", "CPU_Mapped", "CPU_REPACK", "AMX", "CUDA_Host", "CUDA0", "CUDA1",
                                       "ROCm0", "Vulkan2", "MTL0")] == [
        "cpu", "cpu", "cpu", "cpu", "cpu", "gpu0", "gpu1", "gpu0", "gpu2", "gpu0"]


def test_weights_llama_cpp_converts_for_amx_are_counted_once():
    """The AMX buffer's converted tensors are logged at debug level, its repack kernels' at
    info: both are copies of weights the mapped file still holds."""
    from rooflight.runtime.llama_log import parse_buffers

    log = ("load_tensors:          AMX model buffer size =     2.00 MiB\n"
           "load_tensors:   CPU_Mapped model buffer size =     3.00 MiB\n"
           "ggml_backend_amx_buffer_set_tensor: amx repack tensor blk.0.attn_v.weight of type q8_0\n"
           ".repack: repack tensor blk.0.ffn_up.weight with q4_0_8x8\n")
    got = parse_buffers(log)
    assert got.repacked_tensors == ["blk.0.attn_v.weight", "blk.0.ffn_up.weight"]
    assert got.model == {"AMX": 2 * 2**20, "CPU_Mapped": 3 * 2**20}


def test_stress_command_json_with_a_small_hardware_profile(model, tmp_path, capsys):
    path, spec = model
    profile = tmp_path / "small.json"
    profile.write_text(json.dumps({
        "cpu": {"name": "small box", "cores": 2, "threads": 2, "isa": ["avx2"], "ram_total_bytes": GiB,
                "ram_available_bytes": 540 * MiB, "ram_bandwidth_gbs": 20.0},
        "gpus": [], "backend": "cpu"}))
    assert main(["stress", str(path), "--hardware", str(profile), "--contexts", "256,2k,8k", "--threads", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["n_ctx"] for p in doc["points"]] == [256, 2048]
    assert doc["stopped"]["reason"] == "too_large" and doc["stopped"]["n_ctx"] == 8192
    assert doc["stored"] is False  # planned for another machine: not calibration for this one
    assert doc["model"]["context_length"] == 8192

    assert main(["stress", str(path), "--contexts", "256", "--gen-tokens", "8", "--threads", "1"]) == 0
    out = capsys.readouterr()
    # stored, and used unless other programs took the CPU meanwhile, which it then says
    assert ("Stored for calibration" in out.out or "ran while other programs used more than 10% of the CPU"
            in out.out) and "256" in out.out
    assert "context 256:" in out.err and "Model metadata" not in out.err


def test_stress_command_rejects_bad_input(capsys):
    assert main(["stress", "hf:owner/repo/model.gguf"]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["stress", "x.gguf", "--contexts", "512,lots"])
    assert exc.value.code == 2
