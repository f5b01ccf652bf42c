"""How long does one image take before the first token, measured against the plan?

    python bench/vision_encode.py [--layers 6] [--rounds 3]

A generated Gemma 3 style projector of CLIP-B width (768 wide, 3072 feed-forward, 12
heads, 224-pixel images in 16-pixel patches: 196 patches, pooled 2x2 to 49 tokens) beside
a small generated gemma3 language model of 768 width, on this machine's CPU. Each round
sends one image in a fresh chat and times what the chat loop spent on images (mtmd's
encode of the picture plus decoding its 49 embeddings into the model); the plan's figure
is estimate/vision.py's encode time plus the image tokens at the planned prefill rate, two
ways: the FLOPs estimate (encoder FLOPs at the CPU prefill efficiency of the projector's
weight type, encode_basis "flops") and the probe's (the same FLOPs at the rate the machine
probe's image part measures, runtime/probe.py probe_image_encode, run here first;
encode_basis "probe"). Prints measured, both predictions and their ratios (median of the
rounds), the encode alone (mtmd_encode_chunk, no embeddings decoded) against both, and the
ratio for the language model's own text prefill in the same run, a yardstick for the load.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from rooflight.estimate import Wishes
from rooflight.estimate.probe import FixedCosts, MachineProbe
from rooflight.estimate.vision import vision_for_plan
from rooflight.gguf import load_model_spec
from rooflight.gguf.projector import with_projector
from rooflight.gguf.synthetic import write_model
from rooflight.gguf.synthetic_mmproj import write_projector
from rooflight.runtime.chat import ChatSession
from rooflight.runtime.engine import load_engine
from rooflight.runtime.images import check_image
from rooflight.runtime.loader import plan_load
from rooflight.runtime.probe import probe_image_encode
from rooflight.runtime.probe_vision import EncodeBench
from rooflight.runtime.sampling import Sampling


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from vision_files import png_bytes

    with tempfile.TemporaryDirectory() as d:
        lm = write_model(Path(d) / "lm.gguf", arch="gemma3", n_layer=2, n_embd=768, n_head=12, n_head_kv=4,
                         n_ff=1536, n_vocab=800, context_length=4096)
        proj = write_projector(Path(d) / "mmproj-lm-f16.gguf", projection_dim=768, n_embd=768, n_ff=3072,
                               n_layer=args.layers, n_head=12, image_size=224, patch_size=16, n_merge=2)
        spec = with_projector(load_model_spec(lm), proj)
        lp = plan_load(lm, Wishes(n_ctx=512), spec=spec)
        n_threads = lp.config.n_threads
        # the probe's image part, as `rooflight probe` runs it (kept if disturbed: a bench)
        pr = probe_image_encode(n_threads, keep_disturbed=True)
        if pr.encode is None:
            print(f"the probe's image part: {pr.note}")
            return 1
        probe = MachineProbe(machine="bench", build="", n_threads=n_threads, n_ubatch=512, kernels=(), attention=(),
                             fixed=FixedCosts(0.0, 0.0, 0.0), spread=0.0, disturbed=False, encode=pr.encode)
        v = vision_for_plan(spec.projector, lp.hardware, lp.config)  # no probe: the FLOPs estimate
        vp = vision_for_plan(spec.projector, lp.hardware, lp.config, probe)
        assert (v.encode_basis, vp.encode_basis) == ("flops", "probe")
        tokens_s = v.image_tokens / lp.estimate.performance.prefill_tok_s
        predicted, predicted_probe = v.encode_s + tokens_s, vp.encode_s + tokens_s
        measured = []
        with load_engine(lp) as eng:
            for i in range(args.rounds):
                s = ChatSession(eng, sampling=Sampling(temperature=0.0, max_tokens=1, seed=1),
                                record_calibration=False)
                r = s.send("what is it?", images=[check_image(png_bytes(300, 200, seed=i))])
                measured.append(r.stats.image_s)
            # the encode alone, as the probe times it, on this projector
            enc = EncodeBench(eng.llm, Path(proj))
            try:
                enc.encode_s()  # warm-up
                encode_only = statistics.median(enc.encode_s() for _ in range(args.rounds))
            finally:
                enc.close()
            # the language model's own prefill in the same run, as a yardstick for the load
            t = ChatSession(eng, sampling=Sampling(temperature=0.0, max_tokens=1, seed=1),
                            record_calibration=False).send("word " * 200)
            text_ratio = t.stats.predicted["prefill_tok_s"] / t.stats.prefill_tok_s
        m = statistics.median(measured)
        print(f"projector: {args.layers} layers x 768, {v.image_tokens} tokens per image, "
              f"{v.encode_flops / 1e9:.2f} GFLOP per image, on {v.device} with {lp.config.n_threads} threads")
        e = pr.encode
        print(f"probe's image part: {e.flops_per_s / 1e9:.1f} GFLOP/s ({e.encode_s * 1e3:.1f} ms for "
              f"{e.encode_flops / 1e9:.2f} GFLOP, spread {e.spread:.0%}{', disturbed' if e.disturbed else ''})")
        print(f"image before the first token: measured {m:.3f} s (rounds {', '.join(f'{x:.3f}' for x in measured)}); "
              f"predicted by FLOPs {predicted:.3f} s, ratio measured/predicted {m / predicted:.2f}; "
              f"by the probe {predicted_probe:.3f} s, ratio {m / predicted_probe:.2f}")
        print(f"encode alone: measured {encode_only:.3f} s; FLOPs estimate {v.encode_s:.3f} s, ratio "
              f"{encode_only / v.encode_s:.2f}; probe {vp.encode_s:.3f} s, ratio {encode_only / vp.encode_s:.2f}")
        print(f"the model's text prefill in the same run: measured/predicted time {text_ratio:.2f} "
              "(the machine's load and this build's F16 kernels, which calibration corrects)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
