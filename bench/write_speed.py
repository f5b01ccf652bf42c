"""How fast are the probe's models written: tiled tensors streamed tile by tile
(FastArrayWriter.write_tensor_tiles) against built whole in memory first, side by side.

    python bench/write_speed.py [--types F16,Q8_0,Q4_K] [--rounds 3] [--dir /dev/shm]

Writes the probe's decode model of each type (its decode shape, as many layers as the probe
gives it on this machine) both ways, alternating round by round, and prints the median
seconds of each and their ratio. --dir: where to write (default: the temporary folder, as
the probe).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="F16,Q8_0,Q4_K")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(f"writing in {tmp}")
        print(f"{'type':6} {'MiB':>6} {'built whole s':>14} {'streamed s':>11} {'streamed / whole':>17}")
        for wt in (t.strip().upper() for t in args.types.split(",")):
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
