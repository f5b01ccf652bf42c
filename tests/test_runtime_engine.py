"""Loading a model with exactly the planned configuration: buffers, guardrails, cancel."""

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rooflight.estimate import Wishes
from rooflight.estimate.memory import cpu_margin
from rooflight.gguf.synthetic import write_model
from rooflight.hardware.profile import CPUInfo, GPUInfo, HardwareProfile
from rooflight.runtime import engine as engine_mod
from rooflight.runtime import loader
from rooflight.runtime.engine import LoadCancelledError, load_engine
from rooflight.runtime.loader import LoadRefusedError, plan_load, replan

llama_cpp = pytest.importorskip("llama_cpp")

GiB = 2**30
ROUNDING = 2**20 // 100  # llama.cpp logs MiB with two decimals
HOST = HardwareProfile(
    cpu=CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0), backend="cpu")


def small_ram(available_gib: float) -> HardwareProfile:
    return replace(HOST, cpu=replace(HOST.cpu, ram_total_bytes=4 * GiB, ram_available_bytes=int(available_gib * GiB)))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    kw = dict(arch="llama", n_layer=4, n_embd=256, n_head=8, n_head_kv=4, n_ff=512, n_vocab=1000,
              context_length=1 << 20, name="wide-model")
    return {
        "tiny": write_model(d / "tiny" / "tiny-F16.gguf", n_vocab=600, context_length=4096),
        "f16": write_model(d / "wide" / "wide-F16.gguf", ftype="F16", **kw),
        "q8": write_model(d / "wide" / "wide-Q8_0.gguf", ftype="Q8_0", **kw),
    }


def test_loads_exactly_the_planned_config_and_llama_cpp_allocates_what_was_planned(models):
    lp = plan_load(models["f16"], Wishes(n_ctx=2048, n_threads=2, n_batch=256, n_ubatch=128, flash_attn="on"),
                   hardware=HOST)
    with load_engine(lp) as eng:
        cfg, ctx = lp.config, eng.llm.context_params
        assert (eng.n_ctx, ctx.n_threads, ctx.n_threads_batch, ctx.n_batch, ctx.n_ubatch) == (2048, 2, 2, 256, 128)
        assert ctx.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        assert ctx.type_k == ctx.type_v == llama_cpp.GGML_TYPE_F16
        assert eng.llm.model_params.n_gpu_layers == cfg.n_gpu_layers == 0
        cpu = lp.estimate.memory.device("cpu")
        got = eng.buffers
        assert abs(got.kv_bytes - cpu.kv_bytes) <= ROUNDING * len(got.kv)
        repacked = sum(lp.spec.tensor(t).n_bytes for t in got.repacked_tensors)
        assert abs(got.model_bytes - repacked - cpu.weights_bytes) <= 64 * 1024
        reported = got.model_bytes - repacked + got.kv_bytes + got.compute_bytes + got.output_bytes
        assert cpu.weights_bytes + cpu.kv_bytes + cpu.compute_bytes == pytest.approx(reported, rel=0.05)
    assert eng.closed


def test_override_replans_before_loading(models):
    lp = plan_load(models["f16"], Wishes(n_ctx=2048), hardware=HOST)
    bigger = replan(lp, n_ctx=8192, kv_type="q8_0")
    assert bigger.config.n_ctx == 8192 and bigger.config.kv_type == "q8_0"
    assert bigger.estimate.memory.device("cpu").kv_bytes != lp.estimate.memory.device("cpu").kv_bytes
    with load_engine(bigger) as eng:
        assert eng.n_ctx == 8192 and eng.llm.context_params.type_k == llama_cpp.GGML_TYPE_Q8_0
        assert abs(eng.buffers.kv_bytes - bigger.estimate.memory.device("cpu").kv_bytes) <= ROUNDING * 2


def test_too_large_is_refused_with_numbers_and_what_would_fit(models):
    hw = small_ram(1.0)
    lp = plan_load(models["f16"], Wishes(n_ctx=262144), hardware=hw)
    assert lp.estimate.fit == "too_large"
    with pytest.raises(LoadRefusedError) as err:
        load_engine(lp, force_hint="use --force to load anyway")
    msg = str(err.value)
    cpu = lp.estimate.memory.device("cpu")
    assert f"needs {cpu.total_bytes / 1e9:.1f} GB of RAM but {cpu.available_bytes / 1e9:.1f} GB is available" in msg
    assert "262144-token context" in msg and msg.endswith("(or use --force to load anyway).")
    assert msg.count(".") <= 3 + msg.count(" GB") and "\n" not in msg  # one sentence
    # each alternative is a plan that fits
    found = {s.kind: s for s in loader.suggestions(lp)}
    assert found["context"].estimate.fit != "too_large" and f"--ctx {found['context'].estimate.config.n_ctx}" in msg
    longer = replan(lp, n_ctx=found["context"].estimate.config.n_ctx + 256)
    assert longer.estimate.fit == "too_large"  # the largest context that fits, in steps of 256


def test_refusal_suggests_a_smaller_quant_beside_the_file(models):
    wishes = Wishes(n_ctx=512)
    need = {k: plan_load(models[k], wishes, hardware=HOST).estimate.memory.device("cpu").total_bytes
            for k in ("f16", "q8")}
    assert need["q8"] < need["f16"]
    hw = small_ram((cpu_margin(4 * GiB) + (need["q8"] + need["f16"]) / 2) / GiB)
    lp = plan_load(models["f16"], wishes, hardware=hw)
    assert lp.estimate.fit == "too_large" and plan_load(models["q8"], wishes, hardware=hw).fits
    found = {s.kind: s for s in loader.suggestions(lp)}
    assert found["quant"].path == str(models["q8"]) and found["quant"].estimate.fit != "too_large"
    msg = loader.refusal(lp)
    assert "Q8_0 (wide-Q8_0.gguf, in the same folder)" in msg


def test_chat_format_is_chosen_at_load_and_can_be_switched(models):
    from rooflight.runtime.engine import with_format

    with load_engine(plan_load(models["tiny"], Wishes(n_ctx=512), hardware=HOST)) as eng:
        assert eng.format.name == "transcript"  # no template, no instruct name: a base model
        assert with_format(eng, "chatml").format.name == "chatml" and eng.format.source == "user"
    with load_engine(plan_load(models["tiny"], Wishes(n_ctx=512), hardware=HOST), chat_format="llama3") as eng:
        assert eng.format.name == "llama3"


def test_model_template_from_gguf_metadata_and_hostile_one_refused(tmp_path):
    chatml = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
              "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    good = write_model(tmp_path / "good.gguf", n_vocab=600, chat_template=chatml)
    with load_engine(plan_load(good, Wishes(n_ctx=512), hardware=HOST)) as eng:
        assert eng.format.source == "model" and "<|im_end|>" in eng.format.stop and eng.notices == []
    hostile = write_model(tmp_path / "hostile.gguf", n_vocab=600, name="evil-chat",
                          chat_template="{{ cycler.__init__.__globals__.os.system('echo owned') }}")
    with load_engine(plan_load(hostile, Wishes(n_ctx=512), hardware=HOST)) as eng:
        assert eng.format.source == "builtin" and eng.format.name == "llama2"
        assert len(eng.notices) == 1 and "template" in eng.notices[0]


def test_force_loads_a_refused_plan(models):
    lp = plan_load(models["tiny"], Wishes(n_ctx=1024), hardware=small_ram(0.0))
    assert lp.estimate.fit == "too_large"
    with load_engine(lp, force=True) as eng:
        assert eng.n_ctx == 1024


def test_memory_is_checked_again_just_before_loading(models):
    lp = plan_load(models["tiny"], Wishes(n_ctx=1024), hardware=HOST)
    assert lp.fits
    taken = lambda hw: small_ram(0.0)  # noqa: E731 - another program took the RAM since planning
    with pytest.raises(LoadRefusedError, match="does not fit now"):
        load_engine(lp, memory_probe=taken)
    load_engine(lp, memory_probe=taken, force=True).close()
    # the real probe re-reads this machine's free RAM
    fresh = loader.refresh_free_memory(HOST)
    import psutil

    assert abs(fresh.cpu.ram_available_bytes - psutil.virtual_memory().available) < 512 * 2**20


def _mapped(path: Path) -> bool:
    return any(str(path) in line for line in Path("/proc/self/maps").read_text().splitlines())


def test_load_reports_progress_and_can_be_cancelled_without_leaking(models):
    import threading

    path = models["f16"]
    lp = plan_load(path, Wishes(n_ctx=512), hardware=HOST)
    seen: list[float] = []
    with load_engine(lp, on_progress=seen.append):
        pass
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen) and len(seen) > 3

    cancel = threading.Event()

    def cancel_midway(f: float) -> None:
        if f > 0:
            cancel.set()

    for _ in range(3):
        cancel.clear()
        with pytest.raises(LoadCancelledError, match="cancelled"):
            load_engine(lp, cancel=cancel, on_progress=cancel_midway)
    with pytest.raises(LoadCancelledError):
        load_engine(lp, on_progress=lambda f: False)
    if sys.platform.startswith("linux"):
        assert not _mapped(path), "a cancelled load left the model mapped"
    with load_engine(lp) as eng:  # and a normal load still works afterwards
        assert eng.n_ctx == 512


def test_progress_callback_errors_abort_the_load_and_surface(models):
    lp = plan_load(models["tiny"], Wishes(n_ctx=512), hardware=HOST)

    def broken(f: float) -> None:
        raise RuntimeError("ui went away")

    with pytest.raises(RuntimeError, match="ui went away"):
        load_engine(lp, on_progress=broken)


def test_gpu_machine_with_cpu_only_build_runs_on_cpu_and_is_told_once(models, monkeypatch):
    gpu = GPUInfo(0, "NVIDIA GeForce RTX 4090", "nvidia", 24 * GiB, 23 * GiB, 1008.0, 165.0,
                  compute_capability="8.9")
    hw = replace(HOST, gpus=(gpu,), backend="cuda")
    monkeypatch.setattr(loader, "gpu_offload_supported", lambda: False)  # the installed wheel is CPU-only
    monkeypatch.setattr(engine_mod, "_told", set())
    lp = plan_load(models["tiny"], Wishes(n_ctx=512), hardware=hw)
    assert lp.hardware.backend == "cpu" and lp.config.n_gpu_layers == 0 and lp.estimate.fit == "cpu_only"
    # the exact command for this GPU: its CUDA architecture, the toolkit it needs
    assert "CMAKE_ARGS='-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=89' " in lp.cpu_only_build
    assert "-m pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python==" in lp.cpu_only_build
    assert "CUDA toolkit 11.8 or newer" in lp.cpu_only_build and "RTX 4090" in lp.cpu_only_build
    with load_engine(lp) as first:
        assert first.notices == [lp.cpu_only_build]
    with load_engine(plan_load(models["tiny"], Wishes(n_ctx=512), hardware=hw)) as second:
        assert second.notices == []


def test_unloadable_file_is_one_clear_error(tmp_path):
    from rooflight.errors import RooflightError

    bad = tmp_path / "broken.gguf"
    good = write_model(tmp_path / "ok.gguf")
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])  # truncated download
    with pytest.raises(RooflightError) as err:
        load_engine(plan_load(bad, Wishes(n_ctx=512), hardware=HOST))
    assert "broken.gguf" in str(err.value) and "\n" not in str(err.value)
