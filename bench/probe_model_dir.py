"""Where should the probe write its models: the temporary folder's disk, or memory (tmpfs)?

    python bench/probe_model_dir.py [--types F16,Q8_0,Q4_K] [--rounds 5] [--mb 96]

The probe writes about 1.3 GB of generated GGUF files inside its 30 s budget. This writes the
same decode models (the probe's decode shape, --mb MB each) to the default temporary folder
and to /dev/shm, timing each write, then loads both copies and runs them interleaved round by
round (the machine's speed drifts between seconds), 32 tokens after a 4-token prompt each. It
prints the write rate in each place, the decode ns per weight of each copy (median of
--rounds) and their ratio: a model mapped from memory must read as fast as one mapped from
the page cache, or the probe would measure something the user's models (on disk) do not get.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.runtime.probe import _DECODE_SHAPE, PURE_FTYPE, _Model, _weights_of

SHM = Path("/dev/shm")


def _write(folder: Path, wt: str, n_layer: int) -> tuple[Path, float]:
    path = folder / f"decode-{wt}.gguf"
    t0 = time.perf_counter()
    write_model(path, tiled=True, context_length=4096, n_layer=n_layer, ftype=PURE_FTYPE.get(wt, wt),
                pure=True, **_DECODE_SHAPE)
    return path, time.perf_counter() - t0


def _decode_s(model: _Model, n: int = 32) -> float:
    model.llm.reset()
    model.llm.eval(model.tokens(4))
    return model.decode(n, max_s=10.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="F16,Q8_0,Q4_K")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mb", type=float, default=96.0)
    args = ap.parse_args()
    if not SHM.is_dir():
        print("no /dev/shm on this machine: nothing to compare")
        return 0
    types = [t.strip().upper() for t in args.types.split(",")]
    with tempfile.TemporaryDirectory() as disk_tmp, tempfile.TemporaryDirectory(dir=SHM) as shm_tmp:
        places = {"disk": Path(disk_tmp), "shm": Path(shm_tmp)}
        print(f"disk: {disk_tmp}   memory: {shm_tmp}")
        models: dict[tuple[str, str], _Model] = {}
        written: dict[str, list[float]] = {p: [] for p in places}
        weights: dict[str, int] = {}
        for wt in types:
            # layers for about --mb MB (a probe decode model is 2 x the last-level cache)
            one = write_model(places["shm"] / "one.gguf", tiled=True, context_length=4096, n_layer=1,
                              ftype=PURE_FTYPE.get(wt, wt), pure=True, **_DECODE_SHAPE)
            n_layer = max(1, round(args.mb * 1e6 / one.stat().st_size))
            one.unlink()
            for place, folder in places.items():
                path, secs = _write(folder, wt, n_layer)
                written[place].append(path.stat().st_size / secs / 1e6)
                models[(wt, place)] = _Model(path, 2, 512, True, 512)
            weights[wt] = _weights_of(load_model_spec(str(path)), wt, prompt=False)[0]
        for place, rates in written.items():
            print(f"write rate, {place}: {statistics.median(rates):7.0f} MB/s (median of {len(rates)} models)")
        times: dict[tuple[str, str], list[float]] = {k: [] for k in models}
        for _ in range(args.rounds):
            for key, model in models.items():
                times[key].append(_decode_s(model))
        print(f"\n{'type':7} {'disk ns/weight':>15} {'memory ns/weight':>17} {'memory / disk':>14}")
        for wt in types:
            disk, shm = (statistics.median(times[(wt, p)]) * 1e9 / weights[wt] for p in ("disk", "shm"))
            print(f"{wt:7} {disk:15.4f} {shm:17.4f} {shm / disk:14.3f}")
        for model in models.values():
            model.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
