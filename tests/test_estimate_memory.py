"""Memory plan formulas against hand-computed figures (REFERENCE.md §3, llama.cpp source)."""

from dataclasses import replace

import pytest

from rooflight.errors import BadInputError
from rooflight.estimate import RunConfig, Wishes, plan, plan_memory
from rooflight.estimate.compute import attention_peak, ffn_peak, micro_batch, output_peak
from rooflight.estimate.config import kv_bytes_per_element, padded_ctx
from rooflight.estimate.kv import layer_cells, layer_kv_bytes, swa_cells
from rooflight.estimate.placement import layer_devices
from rooflight.gguf.from_hparams import spec_from_hparams
from rooflight.hardware.profile import CPUInfo, GPUInfo, HardwareProfile

GiB = 2**30
MiB = 2**20


def cpu(ram=32 * GiB):
    return CPUInfo("test cpu", 8, 16, ("avx2",), ram, ram, 50.0, "profile", 3000.0)


def machine(*vram, ram=32 * GiB, backend="cuda"):
    gpus = tuple(
        GPUInfo(i, f"gpu {i}", "nvidia", v, v, 1000.0, 100.0) for i, v in enumerate(vram)
    )
    return HardwareProfile(cpu=cpu(ram), gpus=gpus, backend=backend if gpus else "cpu")


def llama(ftype="Q4_0", n_layer=32, tie=False, **kw):
    args = dict(name="llama-7b", ftype=ftype, n_layer=n_layer, n_embd=4096, n_head=32, n_head_kv=8,
                n_ff=11008, n_vocab=32000, context_length=32768, tie_embeddings=tie)
    args.update(kw)
    return spec_from_hparams(**args)


def gemma_like():
    # Gemma-3-270M's shape: every 6th layer global, window 512, 1 KV head of 256
    swa = tuple((i % 6) < 5 for i in range(18))
    return spec_from_hparams(name="g", arch="gemma3", ftype="Q8_0", n_layer=18, n_embd=640, n_head=4,
                             n_head_kv=1, head_dim=256, n_ff=2048, n_vocab=262144, context_length=32768,
                             sliding_window=512, swa_layers=swa, tie_embeddings=True)


def test_kv_type_sizes_are_ggml_block_sizes():
    assert kv_bytes_per_element("f16") == 2
    assert kv_bytes_per_element("q8_0") == 34 / 32
    assert kv_bytes_per_element("q4_0") == 18 / 32
    with pytest.raises(BadInputError):
        kv_bytes_per_element("q3_k")


def test_context_is_padded_to_256():
    assert padded_ctx(1) == 256
    assert padded_ctx(256) == 256
    assert padded_ctx(1000) == 1024


def test_kv_bytes_full_attention_gqa():
    spec = llama()
    cfg = RunConfig(n_ctx=4096, n_gpu_layers=0, n_threads=8)
    # 4096 cells x 8 KV heads x (128 + 128) x 2 bytes = 16 MiB per layer
    assert layer_kv_bytes(spec, cfg, 0) == 4096 * 8 * 256 * 2 == 16 * MiB
    q8 = replace(cfg, kv_type="q8_0", flash_attn=True)
    assert layer_kv_bytes(spec, q8, 0) == int(4096 * 8 * 256 * 34 / 32)


def test_sliding_window_cells_follow_llama_cpp_iswa():
    spec = gemma_like()
    cfg = RunConfig(n_ctx=8192, n_gpu_layers=0, n_threads=2, n_ubatch=512)
    # PAD(min(8192, 512 + 512), 256) = 1024 cells on sliding layers, 8192 on global ones
    assert swa_cells(spec, cfg) == 1024
    assert layer_cells(spec, cfg, 0) == 1024
    assert layer_cells(spec, cfg, 5) == 8192
    assert layer_cells(spec, replace(cfg, swa_full=True), 0) == 8192
    small = replace(cfg, n_ctx=600)
    assert swa_cells(spec, small) == 768  # min(768, 1024) padded
    total = sum(layer_kv_bytes(spec, cfg, i) for i in range(18))
    assert total == (15 * 1024 + 3 * 8192) * 512 * 2  # 39 MiB, as llama.cpp reports


def test_n_gpu_layers_counts_output_layer_first():
    hw = machine(24 * GiB)
    # llama.cpp: i_gpu_start = n_layer + 1 - n_gpu_layers; the output layer is index n_layer
    devs = layer_devices(32, 1, hw)
    assert devs[32] == "gpu0" and set(devs[:32]) == {"cpu"}
    devs = layer_devices(32, 5, hw)
    assert devs[28:] == ["gpu0"] * 5 and set(devs[:28]) == {"cpu"}
    assert set(layer_devices(32, 33, hw)) == {"gpu0"}
    assert set(layer_devices(32, 99, hw)) == {"gpu0"}
    assert set(layer_devices(32, 0, hw)) == {"cpu"}


def test_layers_split_across_gpus_by_free_memory():
    hw = machine(24 * GiB, 8 * GiB)
    devs = layer_devices(32, 33, hw)
    # splits at 0.75: layers with (il / 33) < 0.75 on gpu0 -> 25 layers, the rest on gpu1
    assert devs.count("gpu0") == 25 and devs.count("gpu1") == 8


def test_weights_by_device_and_tied_output_duplicate():
    spec = llama(tie=True)
    embd = spec.tensor("token_embd.weight").n_bytes
    hw = machine(80 * GiB)
    full = plan_memory(spec, hw, RunConfig(n_ctx=4096, n_gpu_layers=33, n_threads=8))
    gpu, host = full.device("gpu0"), full.device("cpu")
    # token_embd stays on the CPU, and the tied output is a second copy on the GPU
    assert host.weights_bytes == embd
    assert gpu.weights_bytes == spec.tensor_bytes - embd + embd
    cpu_only = plan_memory(spec, hw, RunConfig(n_ctx=4096, n_gpu_layers=0, n_threads=8))
    assert cpu_only.device("cpu").weights_bytes == spec.tensor_bytes
    assert cpu_only.device("gpu0").weights_bytes == 0


def test_kv_cache_lives_with_its_layer_unless_offload_kqv_off():
    spec = llama()
    hw = machine(80 * GiB)
    cfg = RunConfig(n_ctx=4096, n_gpu_layers=17, n_threads=8)  # output + last 16 blocks
    mem = plan_memory(spec, hw, cfg)
    assert mem.device("gpu0").kv_bytes == 16 * 16 * MiB
    assert mem.device("cpu").kv_bytes == 16 * 16 * MiB
    mem = plan_memory(spec, hw, replace(cfg, offload_kqv=False))
    assert mem.device("gpu0").kv_bytes == 0
    assert mem.device("cpu").kv_bytes == 32 * 16 * MiB


def test_compute_buffer_terms():
    spec = gemma_like()
    cfg = RunConfig(n_ctx=2048, n_gpu_layers=0, n_threads=2)
    t = micro_batch(cfg)
    assert t == 512
    # the logits of a 262k vocabulary dominate: 262144 x 512 x 4 bytes = 512 MiB (+ 2 residuals)
    assert output_peak(spec, cfg) == 262144 * 512 * 4 + 2 * 640 * 512 * 4
    small_ctx = RunConfig(n_ctx=100, n_gpu_layers=0, n_threads=2)
    assert micro_batch(small_ctx) == 100  # llama-cpp-python clamps n_batch to n_ctx
    # without flash attention the score matrix [n_kv, T, n_head] f32 appears
    spec7 = llama()
    no_fa = RunConfig(n_ctx=8192, n_gpu_layers=0, n_threads=8, flash_attn=False)
    fa = replace(no_fa, flash_attn=True)
    assert attention_peak(spec7, no_fa) - attention_peak(spec7, fa) >= 8192 * 512 * 32 * 4
    assert ffn_peak(spec7, fa) >= 3 * 11008 * 512 * 4


def test_fit_states():
    spec = llama()  # ~3.8 GB of Q4_0 weights
    assert plan(spec, machine(24 * GiB), Wishes(n_ctx=4096)).fit == "full_gpu"
    partial = plan(spec, machine(3 * GiB), Wishes(n_ctx=4096))
    assert partial.fit == "partial_gpu"
    assert 0 < partial.config.n_gpu_layers < 33
    assert plan(spec, machine(ram=16 * GiB), Wishes(n_ctx=4096)).fit == "cpu_only"
    assert plan(spec, machine(ram=2 * GiB), Wishes(n_ctx=4096)).fit == "too_large"


def test_auto_gpu_layers_is_the_largest_that_fits():
    spec = llama()
    hw = machine(3 * GiB)
    est = plan(spec, hw, Wishes(n_ctx=4096))
    k = est.config.n_gpu_layers
    assert est.memory.device("gpu0").fits
    one_more = plan(spec, hw, Wishes(n_ctx=4096, n_gpu_layers=k + 1))
    assert not one_more.memory.device("gpu0").fits


def test_gpu_overhead_and_margin_count():
    spec = llama()
    mem = plan(spec, machine(24 * GiB), Wishes(n_ctx=4096)).memory
    gpu = mem.device("gpu0")
    assert gpu.overhead_bytes == 457 * MiB
    assert gpu.available_bytes == 24 * GiB - int(0.03 * 24 * GiB)


def test_cpu_backend_ignores_gpus():
    spec = llama()
    hw = replace(machine(24 * GiB), backend="cpu")
    est = plan(spec, hw, Wishes(n_ctx=4096, n_gpu_layers=33))
    assert est.config.n_gpu_layers == 0
    assert est.fit == "cpu_only"


@pytest.mark.parametrize(
    "wishes",
    [
        Wishes(kv_type="q5_1"),
        Wishes(flash_attn="maybe"),
        Wishes(n_ctx=0),
        Wishes(kv_type="q8_0", flash_attn="off"),
        Wishes(n_gpu_layers=-2),
        Wishes(n_gpu_layers="many"),
    ],
)
def test_bad_wishes_are_clear_errors(wishes):
    with pytest.raises(BadInputError):
        plan(llama(), machine(24 * GiB), wishes)


def test_json_shape_matches_contract():
    doc = plan(llama(), machine(24 * GiB), Wishes(n_ctx=4096)).to_dict()
    assert set(doc) >= {"model", "config", "memory", "performance"}
    assert set(doc["model"]) >= {"name", "architecture", "params", "file_bytes", "quant", "n_layer", "context_length"}
    assert set(doc["config"]) >= {"n_ctx", "n_gpu_layers", "n_threads", "kv_type", "flash_attn", "swa_full",
                                  "n_batch", "n_ubatch"}
    assert doc["memory"]["fit"] in ("full_gpu", "partial_gpu", "cpu_only", "too_large")
    for d in doc["memory"]["devices"]:
        assert set(d) >= {"device", "weights_bytes", "kv_bytes", "compute_bytes", "overhead_bytes",
                          "total_bytes", "available_bytes"}
        assert all(isinstance(d[k], int) for k in d if k.endswith("_bytes"))
    perf = doc["performance"]
    assert set(perf) >= {"decode_tok_s", "prefill_tok_s", "decode_tok_s_range", "time_to_first_token_s",
                         "bound", "calibrated"}
    assert perf["decode_tok_s_range"][0] < perf["decode_tok_s"] < perf["decode_tok_s_range"][1]
