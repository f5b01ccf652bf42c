"""estimate/amx_layout.py: the RAM llama.cpp's AMX buffer holds weights in, and the memory
plan on a CPU whose llama.cpp keeps weights there.

The layout's arithmetic is checked here against ggml-cpu/amx/mmq.cpp's rules; the plan with it
equalled llama.cpp's own no-alloc figures to the byte for the five generated models of
test_integration_plan_vs_llama.py and the Gemma-3-270M package model, with an AMX build that
runs (README, "Intel CPUs with AMX"): that needs such a CPU and build, which CI does not have.
"""

from dataclasses import replace

from rooflight.estimate import Wishes, plan
from rooflight.estimate.amx_layout import amx_extra_bytes, amx_padding, keeps_amx_weights
from rooflight.format import format_estimate
from rooflight.gguf import load_model_spec
from rooflight.gguf.spec import TensorInfo
from rooflight.gguf.synthetic import write_model
from rooflight.hardware.profile import CPUInfo, HardwareProfile
from rooflight.hardware.profile_io import profile_from_dict

GiB = 2**30
HOST = HardwareProfile(cpu=CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0))


def _t(name: str, ggml_type: str, shape: tuple[int, ...], layer: int | None = 0) -> TensorInfo:
    return TensorInfo(name, ggml_type, shape, 0, layer)


def test_the_layout_adds_what_mmq_cpp_packs_per_block():
    k, n = 4096, 1024  # 4096 weights a row, 1024 rows
    assert amx_extra_bytes(_t("blk.0.attn_q.weight", "Q8_0", (k, n))) == n * (k // 32) * 4  # +4 of 34 bytes
    assert amx_extra_bytes(_t("blk.0.attn_q.weight", "Q4_K", (k, n))) == n * (k // 256) * 4
    assert amx_extra_bytes(_t("blk.0.attn_q.weight", "Q5_K", (k, n))) == n * (k // 256) * 4
    assert amx_extra_bytes(_t("blk.0.attn_q.weight", "IQ4_XS", (k, n))) == n * (k // 256) * 2
    for same in ("Q4_0", "Q4_1", "Q6_K", "F16"):
        assert amx_extra_bytes(_t("blk.0.attn_q.weight", same, (k, n))) == 0
    # what AMX does not take: other types, rows not a multiple of 32, a row not a whole
    # number of 256-blocks for a K-quant, vectors, experts (MUL_MAT_ID), row lookups
    assert amx_extra_bytes(_t("blk.0.attn_q.weight", "Q5_0", (k, n))) == 0
    assert amx_extra_bytes(_t("output.weight", "Q8_0", (k, 3000), None)) == 0
    assert amx_extra_bytes(_t("blk.0.attn_q.weight", "Q4_K", (k + 32, n))) == 0
    assert amx_extra_bytes(_t("blk.0.attn_norm.weight", "Q8_0", (k,))) == 0
    assert amx_extra_bytes(_t("blk.0.ffn_up_exps.weight", "Q8_0", (k, n, 8))) == 0
    assert amx_extra_bytes(_t("token_embd.weight", "Q8_0", (k, n), None)) == 0
    assert amx_extra_bytes(_t("token_embd.weight", "Q8_0", (k, n), None), as_output=True) == n * (k // 32) * 4


def test_which_cpus_keep_weights_in_the_amx_buffer():
    cpu = HOST.cpu
    assert not keeps_amx_weights(cpu)
    amx_isa = replace(cpu, isa=("avx2", "avx512f", "avx512_vnni", "amx_int8"))
    assert keeps_amx_weights(amx_isa)  # a build for the machine compiles the AMX buffer in
    assert not keeps_amx_weights(replace(amx_isa, amx_weights=False))  # as detected: off (the guard)
    assert keeps_amx_weights(replace(cpu, amx_weights=True))


def test_the_plan_counts_the_amx_layout_on_what_the_cpu_runs(tmp_path):
    """A tied Q8_0 model (Gemma 3's layout in small): every block's matrices and the output's
    own AMX copy of token_embd are padded where the CPU keeps AMX weights; layers on a GPU
    are not."""
    path = write_model(tmp_path / "g.gguf", arch="gemma3", n_layer=4, n_embd=256, n_head=4, n_head_kv=1,
                       head_dim=128, n_ff=512, n_vocab=4096, ftype="Q8_0")
    spec = load_model_spec(str(path))
    per_layer, output = amx_padding(spec)
    assert spec.tied_embeddings and output == 4096 * (256 // 32) * 4
    assert all(p > 0 for p in per_layer)
    w = Wishes(n_ctx=512, n_gpu_layers=0)
    plain = plan(spec, HOST, w).memory.device("cpu").weights_bytes
    amx_host = replace(HOST, cpu=replace(HOST.cpu, amx_weights=True))
    est = plan(spec, amx_host, w)
    assert est.memory.device("cpu").weights_bytes == plain + sum(per_layer) + output
    assert est.memory.amx_layout_bytes == sum(per_layer) + output == est.memory.to_dict()["amx_layout_bytes"]
    assert "packed layout of llama.cpp's AMX buffer" in format_estimate(est)
    assert "amx_layout_bytes" not in plan(spec, HOST, w).memory.to_dict()
    # layers on a GPU keep theirs there: only the CPU's part is padded
    gpu_host = profile_from_dict({"cpu": {"name": "x", "cores": 2, "threads": 2, "isa": ["avx2"],
                                          "ram_total_bytes": 16 * GiB, "ram_bandwidth_gbs": 20.0,
                                          "amx_weights": True},
                                  "gpus": [{"name": "RTX 3090"}]}, measure_bandwidth=False)
    half = plan(spec, gpu_host, Wishes(n_ctx=512, n_gpu_layers=2))  # the last block and the output
    assert half.memory.layer_devices == ("cpu", "cpu", "cpu", "gpu0", "gpu0")
    assert half.memory.amx_layout_bytes == sum(per_layer[:3])


def test_a_profile_says_whether_llama_cpp_keeps_amx_weights():
    d = {"cpu": {"name": "Xeon", "cores": 8, "threads": 16, "isa": ["avx2", "avx512_vnni", "amx_int8"],
                 "ram_total_bytes": 64 * GiB, "ram_bandwidth_gbs": 200.0, "amx_weights": False}, "backend": "cpu"}
    p = profile_from_dict(d)
    assert p.cpu.amx_weights is False and not keeps_amx_weights(p.cpu)
    assert p.to_dict()["cpu"]["amx_weights"] is False
    del d["cpu"]["amx_weights"]
    p = profile_from_dict(d)
    assert p.cpu.amx_weights is None and keeps_amx_weights(p.cpu)
    assert "amx_weights" not in p.to_dict()["cpu"]


def test_detection_records_the_build_s_amx_weights(monkeypatch):
    """On an AMX CPU detection asks runtime/amx.py (the build's kernels, and whether they run)."""
    from rooflight.hardware import detection
    from rooflight.runtime import amx

    monkeypatch.setattr(amx, "amx_weights_here", lambda: True)
    assert detection._amx_weights() is True

    def broken() -> bool:
        raise OSError("no build")

    monkeypatch.setattr(amx, "amx_weights_here", broken)
    assert detection._amx_weights() is None  # unknown: the plan then goes by the ISA
