"""LFM2's layout from config.json fields, and the "estimate not available" path."""

from dataclasses import replace

import pytest

from rooflight.errors import EstimateUnavailableError
from rooflight.estimate import Wishes, plan
from rooflight.estimate.support import unavailable_reason
from rooflight.gguf.from_config import spec_from_config
from rooflight.hardware.profile import CPUInfo, HardwareProfile

GiB = 2**30
HOST = HardwareProfile(
    cpu=CPUInfo("test host", 2, 2, ("avx2",), 16 * GiB, 16 * GiB, 20.0, "profile", 3000.0), backend="cpu")

# LiquidAI/LFM2-1.2B config.json as quoted (fetched 2026-08-19 from
# huggingface.co/LiquidAI/LFM2-1.2B/resolve/main/config.json) in a public test found with
# the search tool (find_string '"conv_L_cache": 3'); only the fields used here
LFM2_1_2B = {"model_type": "lfm2", "num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 32,
             "num_key_value_heads": 8, "conv_L_cache": 3, "full_attn_idxs": [2, 5, 8, 10, 12, 14],
             "max_position_embeddings": 128000,
             # not in the quote; they size the weights only, not the cache and state tested here
             "vocab_size": 65536, "block_ff_dim": 8192}


def _lfm2_spec():
    return spec_from_config(LFM2_1_2B, arch="lfm2", ftype="Q8_0", name="lfm2-1.2b")


def test_lfm2_config_gives_conv_state_and_attention_layers():
    spec = _lfm2_spec()
    assert [il for il in range(16) if not spec.recurrent_layers[il]] == [2, 5, 8, 10, 12, 14]
    # llama.cpp: n_embd_r = n_embd * (l_cache - 1) f32 values per conv layer, no SSM state
    assert spec.ssm_state_bytes_per_seq == 2048 * 2 * 4
    est = plan(spec, HOST, Wishes(n_ctx=8192, n_gpu_layers=0, flash_attn="on"))
    kv = est.memory.device("cpu").kv_bytes
    # 6 attention layers x 8192 cells x 8 heads x 64 x (K+V) x f16, plus 10 conv states
    assert kv == 6 * 8192 * 8 * 64 * 2 * 2 + 10 * 2048 * 2 * 4


def test_unmodeled_architecture_gets_one_sentence():
    spec = replace(_lfm2_spec(), architecture="rwkv7", recurrent_layers=())
    with pytest.raises(EstimateUnavailableError) as info:
        plan(spec, HOST, Wishes(n_ctx=2048))
    assert str(info.value) == unavailable_reason("rwkv7")
    assert str(info.value).startswith("Estimate not available for rwkv7: ")
    assert str(info.value).count(".") == 1  # one sentence
    assert unavailable_reason("llama") is None and unavailable_reason("granitehybrid") is None


def test_cli_estimate_of_unmodeled_architecture(tmp_path, capsys):
    import numpy as np
    from gguf import GGUFWriter

    from rooflight.cli import main

    path = tmp_path / "rwkv.gguf"
    w = GGUFWriter(path, "rwkv7")
    w.add_block_count(1)
    w.add_embedding_length(64)
    w.add_context_length(1024)
    w.add_tensor("token_embd.weight", np.zeros((300, 64), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert main(["estimate", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert "Estimate not available for rwkv7: Rooflight does not model its RWKV recurrent state." in err
    assert "Traceback" not in err


def test_rank_lists_unmodeled_architectures_apart():
    from rooflight.catalog.models import load_catalog
    from rooflight.catalog.rank import rank_models

    model = replace(load_catalog()[0], architecture="rwkv7")  # an entry naming an RWKV model
    rows: list[dict] = []
    ranked = rank_models(HOST, models=(model,), unavailable=rows)
    assert ranked == []
    assert [(r["id"], r["architecture"], r["reason"]) for r in rows] == [
        (model.id, "rwkv7", unavailable_reason("rwkv7"))]
