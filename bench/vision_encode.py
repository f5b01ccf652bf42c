"""How long does one image take before the first token, measured against the plan?

    python bench/vision_encode.py [--layers 6] [--rounds 3]

A generated Gemma 3 style projector of CLIP-B width (768 wide, 3072 feed-forward, 12
heads, 224-pixel images in 16-pixel patches: 196 patches, pooled 2x2 to 49 tokens) beside
a small generated gemma3 language model of 768 width, on this machine's CPU. Each round
sends one image in a fresh chat and times what the chat loop spent on images (mtmd's
encode of the picture plus decoding its 49 embeddings into the model); the plan's figure
is estimate/vision.py's encode time (FLOPs at CPU_ENCODE_EFFICIENCY) plus the image
tokens at the planned prefill rate. Prints measured, predicted and their ratio (median
of the rounds), and the same ratio for the language model's own text prefill in the same
run: the two should agree (the encoder is costed like prefill); both move with the load.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from rooflight.estimate import Wishes
from rooflight.gguf import load_model_spec
from rooflight.gguf.projector import with_projector
from rooflight.gguf.synthetic import write_model
from rooflight.gguf.synthetic_mmproj import write_projector
from rooflight.runtime.chat import ChatSession
from rooflight.runtime.engine import load_engine
from rooflight.runtime.images import check_image
from rooflight.runtime.loader import plan_load
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
        v = lp.estimate.vision
        predicted = v.encode_s + v.image_tokens / lp.estimate.performance.prefill_tok_s
        measured = []
        with load_engine(lp) as eng:
            for i in range(args.rounds):
                s = ChatSession(eng, sampling=Sampling(temperature=0.0, max_tokens=1, seed=1),
                                record_calibration=False)
                r = s.send("what is it?", images=[check_image(png_bytes(300, 200, seed=i))])
                measured.append(r.stats.image_s)
            # the language model's own prefill in the same run, as a yardstick for the load
            t = ChatSession(eng, sampling=Sampling(temperature=0.0, max_tokens=1, seed=1),
                            record_calibration=False).send("word " * 200)
            text_ratio = t.stats.predicted["prefill_tok_s"] / t.stats.prefill_tok_s
        m = statistics.median(measured)
        print(f"projector: {args.layers} layers x 768, {v.image_tokens} tokens per image, "
              f"{v.encode_flops / 1e9:.2f} GFLOP per image, on {v.device} with {lp.config.n_threads} threads")
        print(f"image before the first token: measured {m:.3f} s (rounds {', '.join(f'{x:.3f}' for x in measured)}), "
              f"predicted {predicted:.3f} s, ratio measured/predicted {m / predicted:.2f}")
        print(f"the model's text prefill in the same run: measured/predicted time {text_ratio:.2f} "
              "(the machine's load and this build's F16 kernels, which calibration corrects)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
