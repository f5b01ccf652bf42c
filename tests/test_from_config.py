"""ModelSpecs from config.json fields (gguf/from_config.py), against published figures.

Each fixture is a model's config.json as quoted, with its URL, in a public repository found
with the search tool (find_string on a distinctive field); only the fields the converter
reads are kept. Published parameter counts check the tensor lists; the layouts are what
llama.cpp would derive from the converted GGUF.
"""

import pytest

from rooflight.errors import BadInputError
from rooflight.estimate import Wishes, plan
from rooflight.gguf.from_config import spec_from_config
from rooflight.hardware.profile import CPUInfo, HardwareProfile

GiB = 2**30
HOST = HardwareProfile(
    cpu=CPUInfo("test host", 2, 2, ("avx2",), 64 * GiB, 64 * GiB, 20.0, "profile", 3000.0), backend="cpu")

# https://huggingface.co/Qwen/Qwen3-Coder-Next/blob/main/config.json, quoted in a test of
# a public parameter counter with "published total 79,674,391,296" and active 3,874,929,408
QWEN3_CODER_NEXT = {
    "hidden_size": 2048, "num_hidden_layers": 48, "vocab_size": 151936, "head_dim": 256,
    "num_attention_heads": 16, "num_key_value_heads": 2, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "linear_num_key_heads": 16,
    "linear_key_head_dim": 128, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4, "full_attention_interval": 4, "tie_word_embeddings": False,
}
# nvidia/NVIDIA-Nemotron-Nano-9B-v2 config.json fields, quoted as published values in a
# public memory-formula test; 8,888,227,328 parameters per the Hub (llmfit's hf_models.json,
# also resources/catalog.json's parameters_raw)
NEMOTRON_NANO_9B_V2 = {
    "num_hidden_layers": 56, "hidden_size": 4480, "intermediate_size": 15680, "num_attention_heads": 40,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 131072,
    "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
    "ssm_state_size": 128, "conv_kernel": 4, "mamba_num_groups": 8, "mamba_num_heads": 128, "mamba_head_dim": 80,
}
# Qwen/Qwen3.5-9B text_config, the "real Qwen3.5-9B config" fixture of a public test
QWEN35_9B = {
    "full_attention_interval": 4, "head_dim": 256, "hidden_size": 4096, "intermediate_size": 12288,
    "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 8, "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_value_head_dim": 128, "num_attention_heads": 16, "num_key_value_heads": 4,
    "num_hidden_layers": 32, "vocab_size": 248320, "tie_word_embeddings": False,
}
# Gemma 3n E2B: google-ai-edge's model config for it (30 layers, 2048 wide, vocab 262400,
# 8 heads of 256, 2 KV heads, FFN 8192, window 512, every 5th layer global,
# hidden_size_per_layer_input 256, num_kv_shared_layers 10), written with HF key names
GEMMA_3N_E2B = {"text_config": {
    "num_hidden_layers": 30, "hidden_size": 2048, "vocab_size": 262400, "num_attention_heads": 8,
    "head_dim": 256, "num_key_value_heads": 2, "intermediate_size": 8192, "sliding_window": 512,
    "max_position_embeddings": 32768, "hidden_size_per_layer_input": 256, "num_kv_shared_layers": 10,
    "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 6,
}}


def test_qwen3_next_tensor_list_matches_the_published_parameter_counts():
    spec = spec_from_config(QWEN3_CODER_NEXT, arch="qwen3next", ftype="BF16", name="qwen3-coder-next")
    assert spec.params == 79_674_391_296
    assert spec.active_params == 3_874_929_408
    assert spec.recurrent_layers == tuple((il + 1) % 4 != 0 for il in range(48))
    # n_embd_r = 3 x (2 x 16 x 128 + 4096), n_embd_s = 128 x 4096, f32
    assert spec.ssm_state_bytes_per_seq == (3 * (2 * 16 * 128 + 4096) + 128 * 4096) * 4


def test_nemotron_h_layout_and_size():
    spec = spec_from_config(NEMOTRON_NANO_9B_V2, arch="nemotron_h", ftype="BF16", name="nemotron-nano-9b-v2")
    assert spec.params == 8_888_227_328
    pattern = NEMOTRON_NANO_9B_V2["hybrid_override_pattern"]
    assert spec.recurrent_layers == tuple(p == "M" for p in pattern)
    assert [il for il, kv in enumerate(spec.n_head_kv) if kv] == [il for il, p in enumerate(pattern) if p == "*"]
    # d_inner = 128 heads x 80, 8 groups of 128 states
    assert spec.ssm_state_bytes_per_seq == (3 * (10240 + 2 * 8 * 128) + 128 * 10240) * 4


def test_hybrid_kv_cache_is_a_fraction_of_a_transformer_one():
    spec = spec_from_config(QWEN35_9B, arch="qwen35", ftype="Q4_K_M", name="qwen3.5-9b")
    cfg = plan(spec, HOST, Wishes(n_ctx=32768, n_gpu_layers=0)).memory.device("cpu")
    attention = 8 * 32768 * 4 * 256 * 2 * 2  # 8 full-attention layers, K+V f16
    state = 24 * (3 * (2 * 16 * 128 + 32 * 128) + 128 * 4096) * 4
    assert cfg.kv_bytes == attention + state
    # the state does not grow with the context
    small = plan(spec, HOST, Wishes(n_ctx=4096, n_gpu_layers=0)).memory.device("cpu").kv_bytes
    assert small == attention // 8 + state


def test_gemma3n_layers_share_the_kv_cache_of_the_first_twenty():
    spec = spec_from_config(GEMMA_3N_E2B, arch="gemma3n", ftype="Q8_0", name="gemma-3n-e2b")
    assert spec.swa_layers == tuple(il % 5 != 4 for il in range(30))
    assert spec.kv_reuse[:20] == (-1,) * 20
    assert spec.kv_reuse[20:] == tuple(19 if il % 5 == 4 else 18 for il in range(20, 30))
    assert spec.tensor("per_layer_token_embd.weight").shape == (256 * 30, 262400)
    est = plan(spec, HOST, Wishes(n_ctx=32768, n_gpu_layers=0))
    # 4 global layers of the first 20 keep 32768 cells, 16 sliding ones 512 + 512 (padded)
    per_cell = 2 * 256 * 2 * 2
    assert est.memory.device("cpu").kv_bytes == 4 * 32768 * per_cell + 16 * 1024 * per_cell


def test_ministral_style_sliding_window_is_dropped_as_llama_cpp_does():
    # a llama-architecture config with a sliding window (Mistral / Ministral configs carry
    # one): llama.cpp's llama loader reads no window, so every layer keeps the full context
    config = {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2,
              "intermediate_size": 1024, "vocab_size": 1000, "sliding_window": 128,
              "layer_types": ["sliding_attention", "full_attention"] * 2}
    spec = spec_from_config(config, arch="llama", ftype="Q8_0", name="m")
    assert spec.sliding_window == 0 and not any(spec.swa_layers)
    # olmo2's converter writes the per-layer pattern, and llama.cpp follows it
    olmo = spec_from_config({**config, "layer_types": ["sliding_attention"] * 3 + ["full_attention"]},
                            arch="olmo2", ftype="Q8_0", name="o")
    assert olmo.sliding_window == 128 and olmo.swa_layers == (True, True, True, False)


def test_missing_field_is_one_sentence():
    broken = {k: v for k, v in QWEN3_CODER_NEXT.items() if k != "linear_key_head_dim"}
    with pytest.raises(BadInputError, match="config.json cannot describe a qwen3next model"):
        spec_from_config(broken, arch="qwen3next", ftype="Q4_K_M", name="broken")


# LiquidAI/LFM2-8B-A1B config.json as quoted by a public TensorRT port's test (_lfm2_8b_a1b_raw)
_LFM2_8B_TYPES = ["conv"] * 24
for _i in (2, 6, 10, 14, 18, 21):
    _LFM2_8B_TYPES[_i] = "full_attention"
LFM2_8B_A1B = {
    "model_type": "lfm2_moe", "vocab_size": 65536, "hidden_size": 2048, "intermediate_size": 7168,
    "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 8, "layer_types": _LFM2_8B_TYPES,
    "conv_L_cache": 3, "max_position_embeddings": 128000, "num_experts": 32, "num_experts_per_tok": 4,
    "moe_intermediate_size": 1792, "num_dense_layers": 2,
}


def test_nemotron_3_nano_moe_layout_and_size():
    """Nemotron 3 Nano 30B-A3B (nemotron_h_moe) from the catalog's config.json fields: the
    paper (arXiv 2512.20848) gives 31.6B parameters, 3.2B active per token, 3.6B with the
    embeddings; 23 Mamba-2 layers, 6 attention layers, 23 expert layers of 128 experts."""
    from rooflight.catalog import find_model

    config = dict(find_model("nemotron-3-nano-30b-a3b").hparams.config)
    spec = spec_from_config(config, arch="nemotron_h_moe", ftype="BF16", name="nemotron-3-nano-30b-a3b")
    embd = spec.tensor("token_embd.weight").n_elements
    assert spec.params == pytest.approx(31.6e9, rel=0.005)
    assert spec.active_params == pytest.approx(3.6e9, rel=0.01)
    assert spec.active_params - embd == pytest.approx(3.2e9, rel=0.02)
    pattern = config["hybrid_override_pattern"]
    assert spec.recurrent_layers == tuple(p == "M" for p in pattern) and sum(spec.recurrent_layers) == 23
    assert [il for il, kv in enumerate(spec.n_head_kv) if kv] == [il for il, p in enumerate(pattern) if p == "*"]
    first_e = pattern.index("E")
    assert spec.tensor(f"blk.{first_e}.ffn_up_exps.weight").shape[-1] == 128
    assert spec.tensor(f"blk.{first_e}.ffn_gate_exps.weight") is None  # squared ReLU: no gate
    assert spec.tensor(f"blk.{first_e}.ffn_up_shexp.weight") is not None
    assert (spec.n_expert, spec.n_expert_used) == (128, 6)
    with pytest.raises(BadInputError, match="latent"):
        spec_from_config({**config, "moe_latent_size": 1024}, arch="nemotron_h_moe", ftype="BF16", name="x")


def test_llama4_scout_matches_the_published_file():
    """Llama 4 Scout from the catalog's config.json fields: llama-bench printed unsloth's
    Llama-4-Scout-17B-16E-Instruct-Q4_K_M as 60.86 GiB, 107.77 B parameters (find_string
    hit 49139139534, an MS-S1 MAX benchmark page); every block routes to 16 experts beside a
    shared one, chunked attention in 3 of 4 blocks."""
    from rooflight.catalog import find_model

    config = dict(find_model("llama-4-scout").hparams.config)
    spec = spec_from_config(config, arch="llama4", ftype="Q4_K_M", name="llama-4-scout")
    assert spec.params == pytest.approx(107.77e9, abs=0.005e9)
    assert spec.file_bytes / 2**30 == pytest.approx(60.86, abs=0.01)
    assert spec.active_params == pytest.approx(17.17e9, rel=0.01)  # "17B active"
    assert spec.swa_type == "chunked" and spec.sliding_window == 8192
    assert spec.swa_layers == (True, True, True, False) * 12
    assert spec.tensor("blk.0.ffn_up_shexp.weight").n_elements == 5120 * 8192
    assert (spec.n_expert, spec.n_expert_used, spec.n_ff_exp) == (16, 1, 8192)


def test_gemma4_31b_matches_the_published_figures():
    """Gemma 4 31B from the catalog's config.json fields: 30.70 B parameters as llama-bench
    printed them (llama.cpp PR #22078, an Arc B70 run of gemma-4-31B-it), unsloth's Q6_K
    file of 25,201,484,800 bytes within 0.1%; window layers of 16 KV heads of 256, full
    layers of 4 KV heads of 512 without a V projection (attention_k_eq_v)."""
    from rooflight.catalog import find_model

    config = dict(find_model("gemma-4-31b").hparams.config)
    spec = spec_from_config(config, arch="gemma4", ftype="Q6_K", name="gemma-4-31b")
    assert round(spec.params / 1e9, 2) == 30.70
    assert spec.file_bytes == pytest.approx(25_201_484_800, rel=0.001)
    assert spec.swa_layers == ((True,) * 5 + (False,)) * 10 and spec.sliding_window == 1024
    assert spec.head_dims(0) == (256, 256) and spec.head_dims(5) == (512, 512)
    assert (spec.n_head_kv[0], spec.n_head_kv[5]) == (16, 4)
    assert spec.tensor("blk.0.attn_v.weight") is not None and spec.tensor("blk.5.attn_v.weight") is None
    # 8K context: 50 window layers of 1024 + 512 cells, 10 full layers of 8192, K and V f16
    kv = plan(spec, HOST, Wishes(n_ctx=8192, n_gpu_layers=0, flash_attn="on")).memory.device("cpu").kv_bytes
    assert kv == 50 * 1536 * 16 * 256 * 2 * 2 + 10 * 8192 * 4 * 512 * 2 * 2


def test_gemma4_26b_a4b_matches_the_published_figures():
    """Gemma 4 26B-A4B from the catalog's config.json fields: 25,233,142,046 parameters as
    llama-bench's CSV printed them (find_string hit 65862611205) and a Q4_K_M file of 15.63
    GiB (hit 55783345299); 128 experts of 704, top 8, beside every block's dense FFN."""
    from rooflight.catalog import find_model

    config = dict(find_model("gemma-4-26b-a4b").hparams.config)
    spec = spec_from_config(config, arch="gemma4", ftype="Q4_K_M", name="gemma-4-26b-a4b")
    assert spec.params == 25_233_142_046
    assert spec.file_bytes / 2**30 == pytest.approx(15.63, abs=0.01)
    assert (spec.n_expert, spec.n_expert_used, spec.n_ff_exp) == (128, 8, 704)
    assert spec.tensor("blk.0.ffn_gate.weight") is not None and spec.tensor("blk.0.ffn_up_exps.weight") is not None
    assert spec.active_params == pytest.approx(3.8e9, rel=0.01)


def test_gemma4_e4b_cache_is_the_one_llama_cpp_reports():
    """Gemma 4 E4B from the catalog's config.json fields: llama.cpp reported 104 MiB of KV
    cache at 4K and 552 MiB at 32K for it (find_string hit 71128581735): 24 layers keep one
    (4 full, 20 window), the last 18 attend to layers 22 / 23; per-layer embeddings of 256."""
    from rooflight.catalog import find_model

    config = dict(find_model("gemma-4-e4b").hparams.config)
    spec = spec_from_config(config, arch="gemma4", ftype="Q8_0", name="gemma-4-e4b")
    assert spec.kv_reuse[:24] == (-1,) * 24 and set(spec.kv_reuse[24:]) == {22, 23}
    assert spec.tensor("per_layer_token_embd.weight").n_elements == 262144 * 42 * 256
    for n_ctx, mib in ((4096, 104), (32768, 552)):
        kv = plan(spec, HOST, Wishes(n_ctx=n_ctx, n_gpu_layers=0, flash_attn="on")).memory.device("cpu").kv_bytes
        assert kv == mib * 2**20
    # the E2B's shared layers have an FFN twice as wide (use_double_wide_mlp)
    e2b = spec_from_config(dict(find_model("gemma-4-e2b").hparams.config), arch="gemma4", ftype="Q8_0",
                           name="gemma-4-e2b")
    assert e2b.n_ff[:15] == (6144,) * 15 and e2b.n_ff[15:] == (12288,) * 20
    # unsloth's Q8_0 files are 1.9% (E2B) and 2.2% (E4B) larger than these tensors: some
    # small per-layer tensors are kept in more bits than the recipe knows (not sourced)
    assert e2b.file_bytes == pytest.approx(5_048_350_848, rel=0.025)
    assert spec.file_bytes == pytest.approx(8_192_951_456, rel=0.025)


def test_lfm2_moe_layout():
    spec = spec_from_config(LFM2_8B_A1B, arch="lfm2moe", ftype="Q4_K_M", name="lfm2-8b-a1b")
    assert [il for il in range(24) if not spec.recurrent_layers[il]] == [2, 6, 10, 14, 18, 21]
    assert spec.ssm_state_bytes_per_seq == 2048 * 2 * 4
    assert spec.tensor("blk.1.ffn_up.weight") is not None and spec.tensor("blk.2.ffn_up_exps.weight") is not None
    assert spec.n_expert == 32 and spec.n_expert_used == 4


def test_recipe_vocab_floor_is_the_writers():
    from rooflight.gguf import arch_recipe, synthetic

    assert arch_recipe.MINIMAL_VOCAB_SIZE == synthetic.MINIMAL_VOCAB_SIZE
    from gguf import ExpertGatingFuncType

    assert arch_recipe.EXPERT_GATING_SIGMOID == int(ExpertGatingFuncType.SIGMOID)


def test_config_spec_is_the_written_files_spec(tmp_path):
    # one recipe: the header of a written file and the spec from config fields agree
    from rooflight.gguf import load_model_spec
    from rooflight.gguf.synthetic_hybrid import write_hybrid_model

    spec = spec_from_config(QWEN35_9B, arch="qwen35", ftype="Q8_0", name="q")
    shape_config = {**QWEN35_9B, "hidden_size": 256, "num_attention_heads": 4, "head_dim": 64,
                    "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
                    "linear_key_head_dim": 32, "linear_value_head_dim": 32}
    small = spec_from_config(shape_config, arch="qwen35", ftype="Q8_0", name="q")
    from rooflight.gguf.arch_recipe import HybridShape

    shape = HybridShape("qwen35", n_embd=256, n_head=4, head_dim=64, n_head_kv=(2,) * 32, n_ff=(512,) * 32,
                        n_vocab=1000, context_length=small.context_length, ssm_d_conv=4, ssm_d_inner=32 * 32,
                        ssm_d_state=32, ssm_dt_rank=32, ssm_n_group=16, tie_embeddings=False)
    written = load_model_spec(str(write_hybrid_model(tmp_path / "q.gguf", shape, ftype="Q8_0")))
    assert [(t.name, t.ggml_type, t.shape) for t in written.tensors] == [
        (t.name, t.ggml_type, t.shape) for t in small.tensors]
    for field in ("recurrent_layers", "n_head_kv", "ssm_state_bytes_per_seq", "n_ff", "file_type"):
        assert getattr(written, field) == getattr(small, field), field
    assert spec.params > small.params
