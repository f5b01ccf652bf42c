"""How fast are the probe's models written: tiled tensors streamed tile by tile
(FastArrayWriter.write_tensor_tiles) against built whole in memory first, side by side.

    python bench/write_speed.py [--types F16,Q8_0,Q4_K] [--rounds 3] [--dir /dev/shm]

Writes the probe's decode model of each type (its decode shape, as many layers as the probe
gives it on this machine) both ways, alternating round by round, and prints the median
seconds of each and their ratio. --dir: where to write (default: the temporary folder, as
the probe).

    python bench/write_speed.py --tile-encode 4194304,1048576 [--types ...] [--rounds 3]

The other comparison: each type's three probe models (decode, prompt, MoE experts where the
probe has one) written with a tiled tensor's repeated rows encoded from A elements against
from B (gguf/synthetic._TILE_ENCODE_ELEMENTS), alternating round by round: the median
seconds of each and B / A.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rooflight.gguf import synthetic
from rooflight.gguf.fast_writer import FastArrayWriter
from rooflight.gguf.synthetic import plan_tensors, tensor_nbytes, write_model
from rooflight.runtime import probe


def _write_s(path: Path, ftype: str, n_layer: int, streamed: bool) -> float:
    saved = FastArrayWriter.write_tensor_tiles
    if not streamed:  # gguf/synthetic.write_tensors then builds each tensor in memory
        del FastArrayWriter.write_tensor_tiles
    try:
        t0 = time.perf_counter()
        write_model(path, tiled=True, context_length=4096, n_layer=n_layer, ftype=ftype, pure=True,
                    **probe._DECODE_SHAPE)
        return time.perf_counter() - t0
    finally:
        FastArrayWriter.write_tensor_tiles = saved
        path.unlink()


def _probe_models_s(folder: Path, wt: str, encode_elements: int) -> float:
    """Seconds to write the probe's models of one type with tiles encoded from this many elements."""
    ftype = probe.PURE_FTYPE.get(wt, wt)
    kinds = [dict(n_layer=probe.decode_layers(ftype, probe.last_level_cache_bytes()), **probe._DECODE_SHAPE),
             dict(n_layer=probe.prefill_layers(None), **probe._PREFILL_SHAPE)]
    if wt in probe.EXPERT_TYPES:
        kinds.append(dict(probe._EXPERT_SHAPE))
    saved = synthetic._TILE_ENCODE_ELEMENTS
    synthetic._TILE_ENCODE_ELEMENTS = encode_elements
    try:
        t0 = time.perf_counter()
        for i, kw in enumerate(kinds):
            path = write_model(folder / f"{wt}-{i}.gguf", tiled=True, context_length=4096, ftype=ftype, pure=True, **kw)
            path.unlink()
        return time.perf_counter() - t0
    finally:
        synthetic._TILE_ENCODE_ELEMENTS = saved


def compare_tile_encode(types: list[str], rounds: int, a: int, b: int, folder: Path) -> None:
    print(f"{'type':6} {f'{a} el. s':>13} {f'{b} el. s':>13} {'B / A':>6}")
    total = {a: 0.0, b: 0.0}
    for wt in types:
        times: dict[int, list[float]] = {a: [], b: []}
        for _ in range(rounds):
            for n in (a, b):
                times[n].append(_probe_models_s(folder, wt, n))
        med = {n: statistics.median(v) for n, v in times.items()}
        total[a] += med[a]
        total[b] += med[b]
        print(f"{wt:6} {med[a]:13.3f} {med[b]:13.3f} {med[b] / med[a]:6.2f}")
    print(f"{'all':6} {total[a]:13.3f} {total[b]:13.3f} {total[b] / total[a]:6.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="F16,Q8_0,Q4_K")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--tile-encode", metavar="A,B", help="compare tiles encoded from A and from B elements")
    args = ap.parse_args()
    types = [t.strip().upper() for t in args.types.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(f"writing in {tmp}")
        if args.tile_encode:
            try:
                a, b = (int(x) for x in args.tile_encode.split(","))
            except ValueError:
                ap.error("--tile-encode takes two element counts, such as 4194304,1048576")
            compare_tile_encode(types, args.rounds, a, b, Path(tmp))
            return 0
        print(f"{'type':6} {'MiB':>6} {'built whole s':>14} {'streamed s':>11} {'streamed / whole':>17}")
        for wt in types:
            ftype = probe.PURE_FTYPE.get(wt, wt)
            n_layer = probe.decode_layers(ftype, probe.last_level_cache_bytes())
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.rounds):
                for streamed in (False, True):
                    path = Path(tmp) / f"{wt}-{streamed}.gguf"
                    times[streamed].append(_write_s(path, ftype, n_layer, streamed))
            size = sum(tensor_nbytes(p.n_elements, p.qtype) for p in plan_tensors(
                arch="llama", ftype=ftype, n_layer=n_layer, n_vocab=probe.VOCAB_SMALL, pure=True,
                **probe._DECODE_SHAPE))
            whole, streamed_s = statistics.median(times[False]), statistics.median(times[True])
            print(f"{wt:6} {size / 2**20:6.0f} {whole:14.3f} {streamed_s:11.3f} {streamed_s / whole:17.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
