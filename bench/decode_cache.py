"""How much faster does decode read weights that (partly) fit the CPU's last-level cache?

The probe measures each weight type's decode on a model eight times the last-level cache
(runtime/probe.DECODE_CACHE_FACTOR), so its figure is what a large model pays. A model
near the cache's size reads part of its weights from the cache each token; this sweeps
one shape's layer count so the weights run from a fifth of the cache to eight times it,
and prints the seconds per weight byte against the probe's own point.

    python bench/decode_cache.py [--type F16] [--shape narrow|wide] [--rounds 3]
                                 [--fit] [--check RETAINED,SAVED] [--multiples 4,8,32,128]

Models stay loaded and run interleaved round by round (the machine's speed drifts); the
median of --rounds counts. The per-token fixed cost and the attention of the stored probe
(this machine's; run `rooflight probe` first) are subtracted, leaving the weights' time.
--fit: the two constants of a cache model (below: the share of the cache a token's weights
keep, the share of a RAM read's time a cache hit saves) by least squares on this sweep;
--check: the same model with given constants against this sweep, so a fit on one sweep is
checked on another (another shape, another minute). The model was tried for the estimator
and not kept: fitted on the narrow shape, it priced the wide one worse than no cache term
(docs/DECISIONS.md, "Decode near the cache's size").
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

from rooflight.estimate.config import RunConfig
from rooflight.estimate.cpu_attention import cpu_attention_units
from rooflight.estimate.probe_roofline import fixed_s
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime.probe import (
    PURE_FTYPE,
    _decode_run,
    _Model,
    _tokens_for,
    _weights_of,
    last_level_cache_bytes,
)
from rooflight.store.probes import current_probe

SHAPES = {  # neither is the probe's 2048-wide decode shape
    "narrow": dict(n_embd=512, n_head=8, n_head_kv=8, head_dim=64, n_ff=1408),
    "wide": dict(n_embd=1024, n_head=8, n_head_kv=2, head_dim=128, n_ff=2816),
}
PROBE_CACHE_MULTIPLE = 8.0  # runtime/probe.DECODE_CACHE_FACTOR: the probe's decode models
CACHE_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)


# The cache model: a token reads every weight once, in the same order, so a plain LRU cache
# keeps nothing of weights larger than itself; real last-level caches keep part of such a
# stream. Of a token's nbytes, min(nbytes, retained x cache) come from the cache, each
# costing (1 - saved) of a byte read from RAM.
def relative_cost(nbytes: float, llc: float, retained: float, saved: float) -> float:
    """Time to read nbytes of weights per byte, against reading them all from RAM."""
    return 1.0 - saved * min(1.0, retained * llc / nbytes)


def factor(nbytes: float, llc: float, retained: float, saved: float) -> float:
    """A token's weight reads of nbytes against the probe's per-byte figure (its point)."""
    return relative_cost(nbytes, llc, retained, saved) / relative_cost(PROBE_CACHE_MULTIPLE * llc, llc, retained, saved)


def fit(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(retained, saved, rms relative error) that best fit measured (weights / cache,
    seconds per byte) points, the RAM cost per byte free (a grid of 0.01 steps)."""
    best = (math.inf, 0.0, 0.0)
    for i in range(1, 201):
        for j in range(0, 96):
            retained, saved = i / 100, j / 100
            g = [relative_cost(x, 1.0, retained, saved) / s for x, s in points]
            scale = sum(g) / sum(v * v for v in g)  # the RAM seconds per byte that fits best
            err = math.sqrt(sum((scale * v - 1) ** 2 for v in g) / len(g))
            if err < best[0]:
                best = (err, retained, saved)
    return best[1], best[2], best[0]


def _multiples(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of positive numbers (e.g. 4,8,32)")
    return values


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--type", default="F16")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="narrow")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--check", help="RETAINED,SAVED: the model's constants to check on this sweep")
    ap.add_argument("--multiples", type=_multiples, help="comma-separated weights / cache points (default: "
                    + ",".join(f"{m:g}" for m in CACHE_MULTIPLES) + "); past 8x: do large models pay the probe's figure?")
    args = ap.parse_args()
    hw = detect()
    probe = current_probe(hw)
    if probe is None:
        print("No probe of this machine and build is stored: run `rooflight probe` first.", file=sys.stderr)
        return 2
    llc = last_level_cache_bytes()
    shape, wt = SHAPES[args.shape], args.type.upper()
    ftype = PURE_FTYPE.get(wt, wt)
    with tempfile.TemporaryDirectory(prefix="rooflight-cache-") as tmp:
        first = write_model(Path(tmp) / "one.gguf", tiled=True, ftype=ftype, pure=True, n_layer=1, n_vocab=260,
                            context_length=4096, **shape)
        one = _Model(first, args.threads, 512, True, 512)
        layer_bytes = _weights_of(one.spec, wt, prompt=False)[1]
        one.close()
        models = []
        for m in args.multiples or CACHE_MULTIPLES:
            n_layer = max(1, round(m * llc / layer_bytes))
            if models and models[-1][0] == n_layer:
                continue
            path = write_model(Path(tmp) / f"m{n_layer}.gguf", tiled=True, ftype=ftype, pure=True, n_layer=n_layer,
                               n_vocab=260, context_length=4096, **shape)
            model = _Model(path, args.threads, 512, True, 512)
            models.append((n_layer, model, _tokens_for(model, 0.2)))
        runs: dict[int, list[float]] = {n: [] for n, _, _ in models}
        for _ in range(args.rounds):
            for n_layer, model, tokens in models:
                runs[n_layer].append(_decode_run(model, tokens)())
        rows = []
        cfg = RunConfig(n_ctx=512, n_gpu_layers=0, n_threads=args.threads, flash_attn=True)
        att = probe.attention_for(True)
        for n_layer, model, tokens in models:
            t = statistics.median(runs[n_layer])
            _, nbytes = _weights_of(model.spec, wt, prompt=False)
            other = fixed_s(probe, n_layer, model.spec.n_vocab)
            if att is not None:
                other += att.decode_s_per_unit * cpu_attention_units(model.spec, cfg, 4 + min(tokens, 256) / 2, hw.cpu.isa)
            spread = (max(runs[n_layer]) - min(runs[n_layer])) / t
            rows.append((nbytes / llc, (t - other) / nbytes, spread))
            model.close()
    probe_x = PROBE_CACHE_MULTIPLE
    ref = min(rows, key=lambda r: abs(r[0] - probe_x))[1]
    print(f"{wt} {args.shape} decode, {args.threads} threads, last-level cache {llc >> 20} MiB, "
          f"median of {args.rounds} rounds; per byte against the {probe_x:g}x point (the probe's)")
    print(f"{'weights / cache':>16} {'ps per byte':>12} {'x the probe':>12} {'spread':>7}")
    for x, s, spread in rows:
        print(f"{x:16.2f} {s * 1e12:12.2f} {s / ref:12.3f} {spread:7.0%}")
    if args.fit:
        retained, saved, err = fit([(x, s) for x, s, _ in rows])
        print(f"fit: retained {retained:.3f} of the cache, saved {saved:.3f} of a RAM read per hit; "
              f"rms relative error {err:.1%}")
    if args.check:
        retained, saved = (float(v) for v in args.check.split(","))
        errs = [factor(x * llc, llc, retained, saved) / (s / ref) - 1 for x, s, _ in rows]
        for (x, _, _), e in zip(rows, errs, strict=True):
            print(f"check {x:6.2f}x: model / measured {e:+.1%}")
        print(f"check: median |error| {statistics.median(abs(e) for e in errs):.1%}; without the cache term "
              f"{statistics.median(abs(ref / s - 1) for _, s, _ in rows):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
