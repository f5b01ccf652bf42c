"""Tiny but real GGUF models, written from random weights, for the machine probe, tests and benchmarks.

The files are complete enough that llama.cpp loads and runs them: a SentencePiece-style
vocabulary, every tensor the architecture's loader asks for, and per-tensor quantization types
picked the way llama.cpp's own quantizer (src/llama-quant.cpp) picks them for a given file type,
including its fallbacks for rows that a 256-wide K-quant block does not divide. The weights are
noise, so the text they generate is noise too; what matters is that sizes, header keys and the
compute graph are the ones a real model of that shape would have.

The tensor list and each tensor's type are the quantization recipe's (gguf/quant_recipe.py,
re-exported here), the one that also sizes catalog files. Supported: arch "llama" (dense,
GQA, or Mixtral-style experts), "gemma3" (sliding-window layers), "qwen3moe"; file types F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M,
Q5_K_S, Q5_K_M, Q6_K, and single-type (pure) IQ4_XS, MXFP4, NVFP4. The gguf package only quantizes the 32-wide block types, so the K-quants
(Q4_K, Q5_K, Q6_K) and IQ4_XS, NVFP4 are quantized here with small vectorized numpy encoders.
The real Gemma-3-270M the tests also run is a test fixture: tests/gemma_model.py.
"""

from __future__ import annotations

import itertools
import os
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter, TokenType
from gguf import quants as gguf_quants

from rooflight.gguf import gptoss_layout
from rooflight.gguf.fast_writer import FastArrayWriter
from rooflight.gguf.quant_recipe import (  # the recipe, importable from here as before
    _ALL_FILE_TYPES,
    _FTYPE_ALIASES,  # noqa: F401
    ARCHITECTURES,
    FILE_TYPES,
    PURE_FILE_TYPES,
    TensorPlan,
    _fallback,  # noqa: F401
    _use_more_bits,  # noqa: F401
    _weight_type,  # noqa: F401
    normalize_ftype,
    plan_tensors,
    tensor_nbytes,
)
from rooflight.gguf.quant_recipe import normalize_ftype as _normalize_ftype  # noqa: F401

__all__ = [
    "ARCHITECTURES",
    "FILE_TYPES",
    "PURE_FILE_TYPES",
    "MINIMAL_VOCAB_SIZE",
    "TensorPlan",
    "plan_tensors",
    "tensor_nbytes",
    "write_model",
]

Q = GGMLQuantizationType

# Special tokens first (the ids llama.cpp assumes for an SPM vocab), then all 256 byte tokens
# so that any UTF-8 text can be tokenized by byte fallback, then "▁" (SPM's space): without it
# as an ordinary token a space would come back from detokenization as the three raw bytes of
# "▁" instead of " ".
_SPECIAL_TOKENS = ("<unk>", "<s>", "</s>")
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
MINIMAL_VOCAB_SIZE = len(_SPECIAL_TOKENS) + 256 + 1

# Rows of output.weight (or of a tied token_embd) set to zero, i.e. logit 0 while every other
# token gets a random one, so greedy decoding never picks them: </s> (generation would stop
# early) and the bytes 0x80-0xFF (a lone continuation byte is not UTF-8, and llama-cpp-python
# then keeps generating past max_tokens to complete the character). Greedy output is thus
# always exactly max_tokens tokens of ASCII, which tests and benchmarks count on.
# (With tied embeddings this also zeroes the input embedding of <s>; harmless: RMS norm of 0 is 0.)
_SILENT_ROWS = np.r_[0 : len(_SPECIAL_TOKENS), len(_SPECIAL_TOKENS) + 0x80 : len(_SPECIAL_TOKENS) + 256]

WEIGHT_STD = 0.02  # small enough that activations and logits stay far from fp16 overflow
_CHUNK_ELEMENTS = 1 << 22  # generate/quantize big tensors in ~16 MiB float32 slices
# a tiled tensor's slice repeats its first rows, this many elements' worth: the quantizers
# (numpy, the K types' and MXFP4's the slowest) then encode a quarter of a slice, which took
# most of the probe's writing time (bench/write_speed.py --tile-encode)
_TILE_ENCODE_ELEMENTS = 1 << 20


# --------------------------------------------------------------------------------------------
# quantization
# --------------------------------------------------------------------------------------------


def _safe_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b with 0 where b == 0 (all-zero blocks, e.g. the zeroed special-token rows)."""
    a, b = np.broadcast_arrays(a, b)
    return np.divide(a, b, out=np.zeros(a.shape, np.float32), where=b != 0)


def _f16_bytes(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).reshape(-1, 1).view(np.uint8)


def _pack_k_scales(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The 12-byte 6-bit scale/min packing of Q4_K and Q5_K (inverse of get_scale_min)."""
    out = np.empty((sc.shape[0], 12), np.uint8)
    out[:, 0:4] = sc[:, :4] | ((sc[:, 4:] >> 4) << 6)
    out[:, 4:8] = m[:, :4] | ((m[:, 4:] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:] & 0x0F) | ((m[:, 4:] & 0x0F) << 4)
    return out


def _k_affine(x: np.ndarray, n_bits: int) -> tuple[np.ndarray, ...]:
    """Shared part of Q4_K/Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins per 256 values."""
    n_blocks = x.shape[0]
    xs = x.reshape(n_blocks, 8, 32)
    q_max = (1 << n_bits) - 1
    lo = np.minimum(xs.min(axis=-1), 0.0)  # value = d*sc*q - dmin*m, with m >= 0
    scale = (xs.max(axis=-1) - lo) / q_max
    mins = -lo
    d = (scale.max(axis=-1) / 63).astype(np.float16)
    dmin = (mins.max(axis=-1) / 63).astype(np.float16)
    d32, dmin32 = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    sc = np.clip(np.rint(_safe_div(scale, d32)), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(_safe_div(mins, dmin32)), 0, 63).astype(np.uint8)
    eff_scale = (d32 * sc)[..., None]
    eff_min = (dmin32 * m)[..., None]
    q = np.clip(np.rint(_safe_div(xs + eff_min, eff_scale)), 0, q_max).astype(np.uint8)
    return d, dmin, sc, m, q


def _quantize_q4_k(x: np.ndarray) -> np.ndarray:
    d, dmin, sc, m, q = _k_affine(x, 4)
    q = q.reshape(-1, 4, 2, 32)  # sub-blocks 2c and 2c+1 share byte c*32+j (low, high nibble)
    qs = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(-1, 128)
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), _pack_k_scales(sc, m), qs], axis=1)


def _quantize_q5_k(x: np.ndarray) -> np.ndarray:
    d, dmin, sc, m, q = _k_affine(x, 5)
    low = (q & 0x0F).reshape(-1, 4, 2, 32)
    qs = (low[:, :, 0, :] | (low[:, :, 1, :] << 4)).reshape(-1, 128)
    # bit 4 of sub-block s lives in bit s of qh[j]
    high = ((q >> 4) & 1).astype(np.uint32) << np.arange(8, dtype=np.uint32)[None, :, None]
    qh = high.sum(axis=1).astype(np.uint8)
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), _pack_k_scales(sc, m), qh, qs], axis=1)


def _quantize_q6_k(x: np.ndarray) -> np.ndarray:
    n_blocks = x.shape[0]
    xs = x.reshape(n_blocks, 16, 16)  # 16 sub-blocks of 16, int8 scale each, one fp16 d
    scale = np.abs(xs).max(axis=-1) / 31
    d = (scale.max(axis=-1) / 127).astype(np.float16)
    d32 = d.astype(np.float32)[:, None]
    sc = np.clip(np.rint(_safe_div(scale, d32)), 0, 127).astype(np.int8)
    eff = (d32 * sc)[..., None]
    q = (np.clip(np.rint(_safe_div(xs, eff)), -32, 31) + 32).astype(np.uint8).reshape(n_blocks, 256)
    # each 128-value half: low nibbles of values e and e+64 share ql byte; the 2 high bits of
    # values e, e+32, e+64, e+96 share a qh byte (see Q6_K.dequantize_blocks in gguf)
    lo = (q & 0x0F).reshape(n_blocks, 2, 2, 64)
    ql = (lo[:, :, 0, :] | (lo[:, :, 1, :] << 4)).reshape(n_blocks, 128)
    hi = ((q >> 4) & 3).reshape(n_blocks, 2, 4, 32).astype(np.uint32)
    qh = (hi << (2 * np.arange(4, dtype=np.uint32))[None, None, :, None]).sum(axis=2)
    qh = qh.astype(np.uint8).reshape(n_blocks, 64)
    return np.concatenate([ql, qh, sc.view(np.uint8), _f16_bytes(d)], axis=1)


def _nearest(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Index of the grid value nearest to each value (grid sorted ascending)."""
    idx = np.clip(np.searchsorted(grid, values), 1, len(grid) - 1)
    return np.where(np.abs(values - grid[idx - 1]) <= np.abs(values - grid[idx]), idx - 1, idx)


_IQ4_GRID = np.array(gguf_quants.IQ4_NL.kvalues, np.float32)  # sorted ascending


def _quantize_iq4_xs(x: np.ndarray) -> np.ndarray:
    """IQ4_XS: 256 values per block, one fp16 d, a 6-bit signed scale per 32, and a 4-bit
    index into the non-linear IQ4_NL grid per value (layout of IQ4_XS.dequantize_blocks)."""
    n_blocks = x.shape[0]
    xs = x.reshape(n_blocks, 8, 32)
    scale = np.abs(xs).max(axis=-1) / 127  # per 32: largest value hits the grid's end
    d = (scale.max(axis=-1) / 31).astype(np.float16)
    d32 = d.astype(np.float32)[:, None]
    ls = np.clip(np.rint(_safe_div(scale, d32)), 0, 31).astype(np.int32)
    eff = (d32 * ls)[..., None]
    q = _nearest(_safe_div(xs, eff), _IQ4_GRID).astype(np.uint8)  # (n, 8, 32)
    u = (ls + 32).astype(np.uint16)  # stored as unsigned 6 bits, minus 32 on read
    scales_l = ((u[:, 0::2] & 0xF) | ((u[:, 1::2] & 0xF) << 4)).astype(np.uint8)  # (n, 4)
    scales_h = ((u >> 4) << (2 * np.arange(8, dtype=np.uint16))).sum(axis=1).astype(np.uint16)
    qs = (q[:, :, :16] | (q[:, :, 16:] << 4)).reshape(n_blocks, 128)
    return np.concatenate([_f16_bytes(d), scales_h.reshape(-1, 1).view(np.uint8), scales_l, qs], axis=1)


_FP4_GRID = np.array(sorted(set(gguf_quants.NVFP4.kvalues)), np.float32)  # doubled E2M1 values


def _quantize_nvfp4(x: np.ndarray) -> np.ndarray:
    """NVFP4: 64 values per block, an unsigned E4M3 scale per 16 and a 4-bit E2M1 code per
    value (layout of NVFP4.dequantize_blocks: value = ue4m3/2 x doubled E2M1)."""
    n_blocks = x.shape[0]
    xs = x.reshape(n_blocks, 4, 16)
    raw = np.abs(xs).max(axis=-1) / 6  # ue4m3 x 0.5 x 12 = block max
    codes = gguf_quants.NVFP4.fp32_to_ue4m3(raw)
    d = gguf_quants.NVFP4.ue4m3_to_fp32(codes)[..., None]
    v = _FP4_GRID[_nearest(_safe_div(xs, d), _FP4_GRID)]
    positive = np.array(gguf_quants.NVFP4.kvalues[:8], np.float32)
    # code of each doubled value: 0..7 positive, 8 + the same for negative (0 written as +0)
    q = (np.searchsorted(positive, np.abs(v)) + np.where(v < 0, 8, 0)).astype(np.uint8)
    qs = (q[:, :, :8] | (q[:, :, 8:] << 4)).reshape(n_blocks, 32)
    return np.concatenate([codes.astype(np.uint8), qs], axis=1)


_K_QUANTIZERS = {Q.Q4_K: _quantize_q4_k, Q.Q5_K: _quantize_q5_k, Q.Q6_K: _quantize_q6_k,
                 Q.IQ4_XS: _quantize_iq4_xs, Q.NVFP4: _quantize_nvfp4}


def _encode(rows: np.ndarray, qtype: int) -> np.ndarray:
    """float32 rows (n, ne0) -> the bytes of those rows in qtype, shape (n, row_bytes)."""
    qtype = Q(int(qtype))  # the recipe's GGMLType -> the gguf package's enum
    if qtype == Q.F32:
        return rows.view(np.uint8)
    if qtype == Q.F16:
        return rows.astype(np.float16).view(np.uint8)
    n_rows, ne0 = rows.shape
    if qtype in _K_QUANTIZERS:
        blocks = _K_QUANTIZERS[qtype](rows.reshape(-1, GGML_QUANT_SIZES[qtype][0]))
        return blocks.reshape(n_rows, -1)
    return gguf_quants.quantize(rows, qtype).view(np.uint8).reshape(n_rows, -1)


def _stream(plan: TensorPlan, seed: int) -> np.random.Generator:
    """A stream per tensor name, so a tensor's values do not depend on the file type or on
    which other tensors the architecture has."""
    return np.random.default_rng([seed, zlib.crc32(plan.name.encode())])


def _tile(plan: TensorPlan, seed: int, std: float, tiles: dict) -> np.ndarray:
    """The encoded slice a tiled tensor repeats (its rows, row bytes): the first of each
    (type, row width) in the file, kept in tiles; a slice's rows are its first
    _TILE_ENCODE_ELEMENTS' worth repeated, so only those are quantized."""
    ne0 = plan.shape[-1]
    key = (plan.qtype, ne0)
    if key not in tiles:
        rng = _stream(plan, seed)
        rows = min(plan.n_elements // ne0, max(1, _CHUNK_ELEMENTS // ne0))
        encoded = min(rows, max(1, _TILE_ENCODE_ELEMENTS // ne0))
        head = _encode(rng.standard_normal((encoded, ne0), dtype=np.float32) * np.float32(std), plan.qtype)
        tiles[key] = np.resize(head, (rows, head.shape[1]))  # its rows repeated in order
    return tiles[key]


def _tensor_bytes(plan: TensorPlan, seed: int, std: float, tiles: dict | None = None) -> np.ndarray:
    """The file bytes of one tensor: float32 weights generated and encoded slice by slice.

    tiles: when given (write_model(tiled=True)), the first encoded slice of each
    (type, row width) is kept there and repeated, so writing costs a memory copy rather
    than a quantization per slice; the file is as large and reads as a random one does."""
    ne0 = plan.shape[-1]
    n_rows = plan.n_elements // ne0
    out = np.empty((n_rows, plan.n_bytes // n_rows), np.uint8)
    if plan.init == "ones":
        out[:] = _encode(np.ones((n_rows, ne0), np.float32), plan.qtype)
        return out
    if tiles is not None and plan.init == "normal":
        tile = _tile(plan, seed, std, tiles)
        for start in range(0, n_rows, len(tile)):
            stop = min(n_rows, start + len(tile))
            out[start:stop] = tile[: stop - start]
        return out
    rng = _stream(plan, seed)
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // ne0)
    for start in range(0, n_rows, rows_per_chunk):
        stop = min(n_rows, start + rows_per_chunk)
        chunk = rng.standard_normal((stop - start, ne0), dtype=np.float32)
        chunk *= np.float32(std)
        if plan.init == "output":
            silent = _SILENT_ROWS[(_SILENT_ROWS >= start) & (_SILENT_ROWS < stop)]
            chunk[silent - start] = 0.0
        out[start:stop] = _encode(chunk, plan.qtype)
    return out


# --------------------------------------------------------------------------------------------
# vocabulary
# --------------------------------------------------------------------------------------------


def _word_pieces() -> Iterator[str]:
    """Ordinary pieces after the byte tokens, closed under SPM's pairwise merges.

    SPM tokenization only reaches a piece through merges of pieces already in the vocab, so we
    list all single characters, then every 2-piece string over a smaller alphabet, then 3, ...
    """
    singles = ["▁"] + [chr(c) for c in range(33, 127)]
    yield from singles
    alphabet = ["▁"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + [
        chr(c) for c in range(ord("A"), ord("Z") + 1)
    ]
    for length in itertools.count(2):
        for combo in itertools.product(alphabet, repeat=length):
            yield "".join(combo)


def _vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    tokens = list(_SPECIAL_TOKENS) + [f"<0x{b:02X}>" for b in range(256)]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    pieces = list(itertools.islice(_word_pieces(), n_vocab - len(tokens)))
    tokens += pieces
    types += [TokenType.NORMAL] * len(pieces)
    # SPM merges the highest-scoring pair first: earlier (shorter) pieces score higher
    scores = [0.0] * (len(_SPECIAL_TOKENS) + 256) + [-float(i) for i in range(len(pieces))]
    return tokens, scores, [int(t) for t in types]


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------


def write_model(
    path: str | os.PathLike[str],
    *,
    arch: str = "llama",
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    n_vocab: int | None = None,
    context_length: int = 2048,
    ftype: str = "F16",
    sliding_window: int = 0,
    swa_pattern: int | Sequence[bool] | None = None,
    n_expert: int = 0,
    n_expert_used: int = 0,
    seed: int = 0,
    name: str | None = None,
    chat_template: str | None = None,
    head_dim: int | None = None,
    tie_embeddings: bool | None = None,
    pure: bool = False,
    tiled: bool = False,
    n_ff_exp: int = 0,
    moe_layer_step: int = 1,
) -> Path:
    """Write a random-weight GGUF model that llama.cpp can load and run; return its path.

    n_vocab defaults to MINIMAL_VOCAB_SIZE (3 special + 256 byte tokens + "▁"); larger
    vocabularies are filled with word pieces. n_ff is the per-expert width when n_expert > 0. head_dim
    defaults to n_embd // n_head. tie_embeddings (no output.weight) defaults to True for
    gemma3, as in the real Gemma files, and False otherwise. sliding_window (gemma3 only) turns
    on interleaved sliding-window attention; swa_pattern is either N (every Nth layer global,
    llama.cpp's default for gemma3 is 6 when the key is absent) or one bool per layer (True =
    sliding window). K-quant types need n_embd and n_ff to be multiples of 256, otherwise the
    affected tensors fall back to 32-wide block types exactly as llama-quantize would do.
    pure: every matrix in the file type's base type (llama-quantize --pure; required for
    IQ4_XS, MXFP4 and NVFP4). tiled: weights repeat one random slice per type and row width
    (fast to write; for timing runs such as runtime/probe.py, where values do not matter).
    llama4: n_ff is the dense blocks' width, n_ff_exp the experts' and the shared expert's,
    every moe_layer_step-th block routed (interleave_moe_layer_step); its chunked attention
    (8192 positions, 3 blocks of 4) is llama.cpp's default without a sliding-window key.
    """
    if arch not in ARCHITECTURES:
        raise ValueError(f"unsupported arch {arch!r}; choose one of {', '.join(ARCHITECTURES)}")
    ftype = normalize_ftype(ftype)
    n_vocab = MINIMAL_VOCAB_SIZE if n_vocab is None else n_vocab
    head_dim = n_embd // n_head if head_dim is None else head_dim
    if tie_embeddings is None:
        tie_embeddings = arch == "gemma3"
    _check_args(arch, n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab,
                sliding_window, swa_pattern, n_expert, n_expert_used)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    file_type = _ALL_FILE_TYPES[ftype][0]
    plans = plan_tensors(arch=arch, ftype=ftype, n_layer=n_layer, n_embd=n_embd, n_head=n_head,
                         n_head_kv=n_head_kv, head_dim=head_dim, n_ff=n_ff, n_vocab=n_vocab,
                         n_expert=n_expert, tie_embeddings=tie_embeddings, pure=pure,
                         n_ff_exp=n_ff_exp or n_ff, moe_layer_step=moe_layer_step)

    writer = FastArrayWriter(path, arch)
    try:
        writer.add_type("model")
        writer.add_name(name or f"synthetic-{arch}-{ftype}")
        writer.add_file_type(int(file_type))
        writer.add_quantization_version(2)
        writer.add_context_length(context_length)
        writer.add_embedding_length(n_embd)
        writer.add_block_count(n_layer)
        writer.add_feed_forward_length(n_ff)
        writer.add_head_count(n_head)
        writer.add_head_count_kv(n_head_kv)
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
        writer.add_rope_dimension_count(head_dim)  # llama requires n_rot == head_dim
        writer.add_layer_norm_rms_eps(1e-6 if arch == "gemma3" else 1e-5)
        if arch == "gemma3":
            writer.add_rope_freq_base(1_000_000.0)
            if sliding_window:
                writer.add_sliding_window(sliding_window)
                writer.add_rope_freq_base_swa(10_000.0)
                if swa_pattern is not None:
                    writer.add_sliding_window_pattern(
                        swa_pattern if isinstance(swa_pattern, int) else [bool(v) for v in swa_pattern]
                    )
        elif arch == gptoss_layout.ARCH:
            gptoss_layout.add_header(writer, n_ff=n_ff, sliding_window=sliding_window)
        else:
            writer.add_rope_freq_base(10_000.0)
        if n_expert:
            writer.add_expert_count(n_expert)
            writer.add_expert_used_count(n_expert_used)
            if arch == "qwen3moe":
                writer.add_expert_feed_forward_length(n_ff)
            if arch == "llama4":  # conversion/llama.py Llama4Model.set_gguf_parameters
                writer.add_expert_feed_forward_length(n_ff_exp or n_ff)
                writer.add_interleave_moe_layer_step(moe_layer_step)

        add_test_vocab(writer, n_vocab)
        if chat_template is not None:
            writer.add_chat_template(chat_template)

        write_tensors(writer, plans, seed, tiled=tiled)
    except BaseException:
        writer.close()
        path.unlink(missing_ok=True)  # never leave a half-written model behind
        raise
    writer.close()
    return path


def add_test_vocab(writer: GGUFWriter, n_vocab: int) -> None:
    """The small SentencePiece-style vocabulary of every generated model (_vocab), with its
    special token ids."""
    tokens, scores, types = _vocab(n_vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_unk_token_id(UNK_ID)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)


def write_tensors(writer: GGUFWriter, plans: Sequence[TensorPlan], seed: int, *, tiled: bool = False) -> None:
    """Header, metadata and tensor infos, then the random weights streamed one tensor at a
    time (only one is in memory at once)."""
    for plan in plans:
        qtype = Q(int(plan.qtype))  # the recipe's GGMLType -> the gguf package's enum
        byte_shape = gguf_quants.quant_shape_to_byte_shape(plan.shape, qtype)
        writer.add_tensor_info(plan.name, byte_shape, np.dtype(np.uint8), plan.n_bytes, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    tiles: dict | None = {} if tiled else None
    write_tiles = getattr(writer, "write_tensor_tiles", None)  # FastArrayWriter's
    for plan in plans:
        if tiles is not None and plan.init == "normal" and write_tiles is not None:
            # written tile by tile: the tensor is never built in memory
            write_tiles(_tile(plan, seed, WEIGHT_STD, tiles), plan.n_elements // plan.shape[-1])
        else:
            writer.write_tensor_data(_tensor_bytes(plan, seed, WEIGHT_STD, tiles))


def _check_args(
    arch: str, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, head_dim: int,
    n_ff: int, n_vocab: int, sliding_window: int, swa_pattern: int | Sequence[bool] | None,
    n_expert: int, n_expert_used: int,
) -> None:
    if min(n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff) < 1:
        raise ValueError("n_layer, n_embd, n_head, n_head_kv, head_dim and n_ff must be positive")
    if n_head % n_head_kv:
        raise ValueError(f"n_head ({n_head}) must be a multiple of n_head_kv ({n_head_kv})")
    if n_embd % 32 or n_ff % 32 or head_dim % 2:
        # every block type ggml has is 32 wide or more; rope needs an even head size
        raise ValueError("n_embd and n_ff must be multiples of 32 and head_dim even")
    if n_vocab < MINIMAL_VOCAB_SIZE:
        raise ValueError(f"n_vocab must be at least {MINIMAL_VOCAB_SIZE} (specials, bytes, '▁')")
    if sliding_window and arch not in ("gemma3", gptoss_layout.ARCH):
        raise ValueError(f"arch {arch!r} has no sliding-window attention in llama.cpp")
    if swa_pattern is not None and not sliding_window:
        raise ValueError("swa_pattern needs sliding_window > 0")
    if swa_pattern is not None and not isinstance(swa_pattern, int) and len(swa_pattern) != n_layer:
        raise ValueError("swa_pattern as a sequence needs one bool per layer")
    if n_expert < 0 or not 0 <= n_expert_used <= n_expert:
        raise ValueError("need 0 <= n_expert_used <= n_expert")
    if n_expert and not n_expert_used:
        raise ValueError("n_expert_used must be > 0 when n_expert > 0")
    if n_expert and arch == "gemma3":
        raise ValueError("gemma3 has no expert layers")
    if arch in ("qwen3moe", gptoss_layout.ARCH, "llama4") and not n_expert:
        raise ValueError(f"{arch} needs n_expert > 0")
