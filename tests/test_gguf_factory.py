"""Small GGUF files for the header tests, written with gguf.GGUFWriter.

`write_gguf` makes a llama-like header (a handful of keys, a few small tensors of mixed
types). The files are honest GGUF but not loadable models: the parser and the spec
builder only need headers. The tests at the bottom cross-check our parser against
gguf.GGUFReader on these files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

from rooflight.gguf import read_header, read_headers

Q = GGMLQuantizationType


def llama_kv(
    arch: str = "llama",
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_head: int | Sequence[int] = 4,
    n_head_kv: int | Sequence[int] | None = 2,
    n_ff: int | Sequence[int] = 512,
    context_length: int = 4096,
    vocab: int = 300,
) -> dict[str, Any]:
    """Metadata of a tiny llama-like model: key -> value (lists become arrays)."""
    kv: dict[str, Any] = {
        "general.name": "Tiny Test",
        f"{arch}.block_count": n_layer,
        f"{arch}.context_length": context_length,
        f"{arch}.embedding_length": n_embd,
        f"{arch}.feed_forward_length": list(n_ff) if not isinstance(n_ff, int) else n_ff,
        f"{arch}.attention.head_count": list(n_head) if not isinstance(n_head, int) else n_head,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-5,
        f"{arch}.rope.freq_base": 10000.0,
        "general.file_type": int(gguf.LlamaFileType.MOSTLY_Q4_K_M),
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
        "tokenizer.ggml.scores": [0.0] * vocab,
        "tokenizer.chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}",
    }
    if n_head_kv is not None:
        kv[f"{arch}.attention.head_count_kv"] = (
            list(n_head_kv) if not isinstance(n_head_kv, int) else n_head_kv
        )
    return kv


def llama_tensors(
    *, n_layer: int = 2, n_embd: int = 256, n_ff: int = 512, vocab: int = 300, tied: bool = False
) -> list[tuple[str, tuple[int, ...], GGMLQuantizationType]]:
    """(name, GGUF shape (ne0, ne1..), type) of a tiny llama-like model."""
    out: list[tuple[str, tuple[int, ...], GGMLQuantizationType]] = [
        ("token_embd.weight", (n_embd, vocab), Q.Q8_0),
        ("output_norm.weight", (n_embd,), Q.F32),
    ]
    if not tied:
        out.append(("output.weight", (n_embd, vocab), Q.Q6_K))
    for i in range(n_layer):
        out += [
            (f"blk.{i}.attn_norm.weight", (n_embd,), Q.F32),
            (f"blk.{i}.attn_q.weight", (n_embd, n_embd), Q.Q4_K),
            (f"blk.{i}.attn_k.weight", (n_embd, n_embd // 2), Q.Q4_K),
            (f"blk.{i}.attn_v.weight", (n_embd, n_embd // 2), Q.Q6_K),
            (f"blk.{i}.attn_output.weight", (n_embd, n_embd), Q.Q4_K),
            (f"blk.{i}.ffn_gate.weight", (n_embd, n_ff), Q.Q4_K),
            (f"blk.{i}.ffn_up.weight", (n_embd, n_ff), Q.Q4_K),
            (f"blk.{i}.ffn_down.weight", (n_ff, n_embd), Q.Q6_K),
        ]
    return out


def tensor_nbytes(shape: Sequence[int], qtype: GGMLQuantizationType) -> int:
    block, size = GGML_QUANT_SIZES[qtype]
    n = 1
    for d in shape:
        n *= d
    return n // block * size


def _add_kv(w: gguf.GGUFWriter, key: str, value: Any) -> None:
    if isinstance(value, bool):
        w.add_bool(key, value)
    elif isinstance(value, int):
        w.add_uint32(key, value)
    elif isinstance(value, float):
        w.add_float32(key, value)
    elif isinstance(value, str):
        w.add_string(key, value)
    elif isinstance(value, list):
        sub = None
        if value and isinstance(value[0], bool):
            sub = GGUFValueType.BOOL
        elif value and isinstance(value[0], int):
            sub = GGUFValueType.INT32
        w.add_array(key, value) if sub is None else w.add_key_value(
            key, value, GGUFValueType.ARRAY, sub_type=sub
        )
    else:
        raise TypeError(f"{key}: {value!r}")


def write_gguf(
    path: Path,
    arch: str = "llama",
    kv: Mapping[str, Any] | None = None,
    tensors: Sequence[tuple[str, tuple[int, ...], GGMLQuantizationType]] | None = None,
    *,
    split_max_tensors: int = 0,
) -> list[Path]:
    """Write a GGUF (or a split set); returns the written paths (first part first)."""
    kv = llama_kv(arch) if kv is None else kv
    tensors = llama_tensors() if tensors is None else tensors
    w = gguf.GGUFWriter(path, arch, split_max_tensors=split_max_tensors)
    for k, v in kv.items():
        _add_kv(w, k, v)
    for name, shape, qtype in tensors:
        # numpy order is GGUF's reversed; the innermost dimension counted in bytes
        byte_shape = (*reversed(shape[1:]), tensor_nbytes(shape[:1], qtype))
        data = np.zeros(byte_shape, dtype=np.uint8)
        w.add_tensor(name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if split_max_tensors:
        return w.format_shard_names(Path(path))
    return [Path(path)]


# ---- the parser agrees with gguf.GGUFReader on these files --------------------------------


def test_parser_matches_gguf_reader(tmp_path: Path) -> None:
    (path,) = write_gguf(tmp_path / "tiny.gguf")
    ours = read_header(path)
    ref = gguf.GGUFReader(path)
    assert ours.file_size == path.stat().st_size
    assert len(ours.tensors) == len(ref.tensors)
    for t, r in zip(ours.tensors, ref.tensors, strict=True):
        assert t.name == r.name
        assert t.shape == tuple(int(x) for x in r.shape)
        assert t.type_id == int(r.tensor_type)
        assert t.n_bytes == int(r.n_bytes)
        assert ours.data_offset + t.offset == r.data_offset
    for key, field in ref.fields.items():
        if key.startswith("GGUF."):
            continue
        value = ours.metadata[key]
        if field.types[0] == GGUFValueType.ARRAY:
            assert len(value) == len(field.data)
        elif field.types[0] == GGUFValueType.FLOAT32:
            assert abs(value - field.contents()) < 1e-6
        else:
            assert value == field.contents()


def test_factory_tensor_sizes(tmp_path: Path) -> None:
    (path,) = write_gguf(tmp_path / "tiny.gguf")
    h = read_header(path)
    expected = {n: tensor_nbytes(s, q) for n, s, q in llama_tensors()}
    assert {t.name: t.n_bytes for t in h.tensors} == expected
    assert h.tensors[0].type_name == "Q8_0"


def test_factory_split(tmp_path: Path) -> None:
    paths = write_gguf(tmp_path / "tiny.gguf", split_max_tensors=7)
    assert len(paths) == 3 and all(p.exists() for p in paths)
    assert paths[0].name == "tiny-00001-of-00003.gguf"
    headers = read_headers(paths[0])
    assert [h.metadata["split.no"] for h in headers] == [0, 1, 2]
