"""Fuzzing campaign over GGUF headers: every hostile input ends in one clear sentence.

Starting from valid generated files (dense llama, sliding-window gemma3, MoE qwen3moe, with
their vocabularies), thousands of mutants are fed through the whole path a downloaded header
takes: parse_header -> build_model_spec -> plan() for a CPU machine and a 24 GB GPU. Each
mutant must end either in a valid estimate or in Rooflight's own BadInputError (one line,
naming the file); anything else is a crash. Time and traced-memory peaks per input are
bounded, so no count read from the file drives an allocation or a loop unchecked.

Mutations are structure-aware where it matters: metadata values of the keys the estimator
reads are set to extremes (0, negative, 2**31, 2**63, wrong value types), counts and string
lengths are inflated, tensor dimensions and types are corrupted, and random byte edits,
truncations, deletions and duplicated slices cover the rest. A fixed seed keeps it
reproducible; the figures are printed (pytest -s) and asserted.
"""

from __future__ import annotations

import random
import struct
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
from gguf import GGUFValueType as V

from rooflight.errors import BadInputError
from rooflight.estimate import Wishes, plan
from rooflight.gguf import parse_header
from rooflight.gguf.build import build_model_spec
from rooflight.gguf.sources import BytesSource
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import profile_from_dict

MUTANTS_PER_SEED = 700
# per input, parse + spec + two plans: a pathological input (a loop over a forged count)
# runs for seconds; 0.5 s until a 2-core Zen-1-era EPYC VM (2026-12-04) took 0.68 s for its worst
TIME_LIMIT_S = 1.5
MEMORY_LIMIT_BYTES = 32 * 2**20  # traced peak per input; a valid tiny header needs < 2 MiB
NAME = "mutant.gguf"

EXTREME_INTS = [0, 1, 2, 3, 7, 255, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**53, 2**63 - 1]
NEGATIVE_AS_U64 = [2**64 - 1, 2**64 - 2**31, 2**63]

HARDWARE = [
    {"cpu": {"name": "test cpu", "cores": 4, "threads": 8, "isa": ["avx2"],
             "ram_total_bytes": 16 * 2**30, "ram_available_bytes": 12 * 2**30,
             "ram_bandwidth_gbs": 40.0}, "gpus": [], "backend": "cpu"},
    {"cpu": {"name": "test cpu", "cores": 8, "threads": 16, "isa": ["avx2"],
             "ram_total_bytes": 32 * 2**30, "ram_available_bytes": 24 * 2**30,
             "ram_bandwidth_gbs": 60.0},
     "gpus": [{"name": "NVIDIA GeForce RTX 4090"}], "backend": "cuda"},
]


def _seed_files(tmp: Path) -> dict[str, bytes]:
    """Headers (plus a little tensor data) of three valid models of different shapes."""
    seeds = {
        "llama": dict(arch="llama", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=128),
        "gemma3": dict(arch="gemma3", n_layer=3, n_embd=64, n_head=4, n_head_kv=1, n_ff=128,
                       sliding_window=32),
        "qwen3moe": dict(arch="qwen3moe", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=64,
                         n_expert=4, n_expert_used=2),
    }
    out = {}
    for name, kw in seeds.items():
        path = tmp / f"{name}.gguf"
        write_model(path, ftype="Q8_0", **kw)
        out[name] = path.read_bytes()
    return out


def _value_offsets(data: bytes) -> list[tuple[int, int]]:
    """(offset of the value-type field, offset of the value) for every scalar uint32/int32/
    uint64/float32 metadata value, found by walking the header the way the parser does."""
    offsets = []
    pos = 24
    n_kv = struct.unpack_from("<q", data, 16)[0]
    scalar = {V.UINT8: 1, V.INT8: 1, V.UINT16: 2, V.INT16: 2, V.UINT32: 4, V.INT32: 4,
              V.FLOAT32: 4, V.BOOL: 1, V.UINT64: 8, V.INT64: 8, V.FLOAT64: 8}
    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + klen
        type_pos = pos
        (vtype,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if vtype == V.STRING:
            (slen,) = struct.unpack_from("<Q", data, pos)
            offsets.append((type_pos, -pos))  # negative: a string length field
            pos += 8 + slen
        elif vtype == V.ARRAY:
            etype, count = struct.unpack_from("<IQ", data, pos)
            offsets.append((type_pos, -(pos + 4)))  # the array count
            pos += 12
            if etype == V.STRING:
                for _ in range(count):
                    (slen,) = struct.unpack_from("<Q", data, pos)
                    pos += 8 + slen
            else:
                pos += scalar[V(etype)] * count
        else:
            offsets.append((type_pos, pos))
            pos += scalar[V(vtype)]
    return offsets


def _mutate(rng: random.Random, data: bytes, value_offsets: list[tuple[int, int]]) -> tuple[str, bytes]:
    b = bytearray(data)
    kind = rng.choice(["value", "value", "type", "length", "count", "flip", "truncate",
                       "delete", "duplicate", "splice_header", "tensor"])
    if kind == "value":
        type_pos, pos = rng.choice([o for o in value_offsets if o[1] > 0])
        (vtype,) = struct.unpack_from("<I", b, type_pos)
        width = 8 if vtype in (V.UINT64, V.INT64, V.FLOAT64) else 4 if vtype in (
            V.UINT32, V.INT32, V.FLOAT32) else 1 if vtype in (V.UINT8, V.INT8, V.BOOL) else 2
        value = rng.choice(EXTREME_INTS + NEGATIVE_AS_U64)
        b[pos:pos + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
    elif kind == "type":
        type_pos, _ = rng.choice(value_offsets)
        struct.pack_into("<I", b, type_pos, rng.choice([0, 1, 4, 5, 6, 7, 8, 9, 10, 12, 13, 99, 2**31]))
    elif kind == "length":
        _, pos = rng.choice([o for o in value_offsets if o[1] < 0])
        struct.pack_into("<Q", b, -pos, rng.choice(EXTREME_INTS + NEGATIVE_AS_U64))
    elif kind == "count":
        struct.pack_into("<Q", b, rng.choice([8, 16]), rng.choice(EXTREME_INTS + NEGATIVE_AS_U64))
    elif kind == "flip":
        end = min(len(b), _header_end(data))
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(end)] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        del b[rng.randrange(len(b)):]
    elif kind == "delete":
        i = rng.randrange(_header_end(data))
        del b[i:i + rng.randint(1, 64)]
    elif kind == "duplicate":
        i = rng.randrange(_header_end(data))
        chunk = b[i:i + rng.randint(1, 256)]
        b[i:i] = chunk
    elif kind == "splice_header":
        # a second copy of the metadata block: duplicate keys, shifted tensor infos
        end = _header_end(data)
        i, j = sorted(rng.sample(range(24, end), 2))
        b[j:j] = b[i:j]
    else:  # tensor infos: dims, n_dims and types to extremes
        end = _header_end(data)
        tail = bytes(b[:end]).rfind(b".weight")
        if tail < 0:
            return kind, bytes(b)
        pos = tail + len(b".weight")
        field = rng.choice(["n_dims", "dim", "type", "offset"])
        if field == "n_dims":
            struct.pack_into("<I", b, pos, rng.choice([0, 3, 5, 2**31, 2**32 - 1]))
        elif field == "dim":
            struct.pack_into("<Q", b, pos + 4, rng.choice(EXTREME_INTS + NEGATIVE_AS_U64))
        elif field == "type":
            (n_dims,) = struct.unpack_from("<I", b, pos)
            struct.pack_into("<I", b, pos + 4 + 8 * min(n_dims, 4),
                             rng.choice([4, 5, 31, 39, 40, 99, 2**31 - 1]))
        else:
            (n_dims,) = struct.unpack_from("<I", b, pos)
            struct.pack_into("<Q", b, pos + 8 + 8 * min(n_dims, 4), rng.choice(EXTREME_INTS))
    return kind, bytes(b)


def _header_end(data: bytes) -> int:
    """Where tensor data starts (the bytes before are the header)."""
    header = parse_header(BytesSource(data, NAME))
    return header.data_offset


def _run_one(data: bytes, hardware) -> str:
    header = parse_header(BytesSource(data, NAME))
    spec = build_model_spec([header], default_name="mutant")
    for hw in hardware:
        plan(spec, hw, Wishes())
        plan(spec, hw, Wishes(n_ctx=4096, kv_type="q8_0", flash_attn="on"))
    return "estimated"


@pytest.mark.slow
def test_gguf_mutation_campaign(tmp_path: Path) -> None:
    hardware = [profile_from_dict(h, measure_bandwidth=False, detect_cpu_if_missing=False)
                for h in HARDWARE]
    seeds = _seed_files(tmp_path)
    rng = random.Random(20261130)
    outcomes: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    crashes: list[str] = []
    unclear: list[str] = []
    worst_time = 0.0
    worst_memory = 0
    tried = 0
    for seed_name, data in seeds.items():
        offsets = _value_offsets(data)
        assert _run_one(data, hardware) == "estimated"  # each seed itself is valid
        for _ in range(MUTANTS_PER_SEED):
            kind, mutant = _mutate(rng, data, offsets)
            kinds[kind] += 1
            tried += 1
            tracemalloc.start()
            t0 = time.perf_counter()
            try:
                outcomes[_run_one(mutant, hardware)] += 1
            except BadInputError as exc:
                outcomes["clear error"] += 1
                message = str(exc)
                if "\n" in message or len(message) > 400 or (NAME not in message and "mutant" not in message):
                    unclear.append(f"{seed_name}/{kind}: {message}")
            except Exception as exc:  # noqa: BLE001 - counting crashes is the point
                crashes.append(f"{seed_name}/{kind}: {type(exc).__name__}: {exc}")
            finally:
                elapsed = time.perf_counter() - t0
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            worst_time = max(worst_time, elapsed)
            worst_memory = max(worst_memory, peak)

    print(f"\nGGUF campaign: {tried} inputs from {len(seeds)} seeds; outcomes {dict(outcomes)}; "
          f"mutations {dict(kinds)}")
    print(f"  crashes {len(crashes)}, unclear messages {len(unclear)}, "
          f"worst time {worst_time * 1000:.1f} ms, worst traced memory {worst_memory / 2**20:.2f} MiB")
    assert not crashes, "\n".join(crashes[:20])
    assert not unclear, "\n".join(unclear[:20])
    assert worst_time < TIME_LIMIT_S
    assert worst_memory < MEMORY_LIMIT_BYTES
    assert outcomes["clear error"] > tried // 4  # the campaign really reached the checks
