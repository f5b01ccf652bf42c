"""CPU decode attention of whole models, measured against its price: what a token costs after
a long cache less after a short one (weights, per-token and per-layer costs cancel), beside
the probe-based price of the same difference with and without the scalar remainder of
llama.cpp's F16 V accumulation (estimate/cpu_attention.py f16_simd_block, SCALAR_V_CYCLES).

    python bench/attention_delta.py [--rounds 3] [--long 512]

Models: bench/accuracy_probe.py's two 64-wide shapes (25M F16, 8 heads; 100M Q8_0, 12 heads
on 4 KV heads), a generated model of gpt-oss-20b's attention (64 heads of 64 on 8 KV heads,
attention sinks, every other layer a 128-token window; 8 layers, tiny experts; decode after
--long x 4 positions) and the Gemma-3-270M package model (five of six layers a 512-token
window; decode after --long x 8 positions). Decode of 32 tokens after 16 and after the long
prompt, the median of --rounds, the models run interleaved round by round, flash attention
on, this machine's plan threads. Needs a stored probe of this machine (`rooflight probe`):
its attention figure is what prices the difference. Prints the 1-minute load average before
the run.

The last two columns price every layer over the cells up to the position (a sliding-window
layer: its whole window + n_ubatch cache), as the estimate did before it followed the
kernel's split of the cache over threads (cpu_attention.cpu_attention_cells).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

from rooflight.estimate import Wishes, cpu_attention, kv, plan
from rooflight.estimate.cpu_attention import cpu_attention_units, f16_simd_block
from rooflight.gguf import load_model_spec
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect
from rooflight.runtime.measure import measure
from rooflight.store.probes import current_probe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_probe import SHAPES  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from gemma_model import gemma_270m_path  # noqa: E402 - the test suite's Gemma-3-270M

SHORT, GEN = 16, 32
GPT_OSS_ATTENTION = dict(arch="gpt-oss", n_layer=8, n_embd=2880, n_head=64, n_head_kv=8, head_dim=64, n_ff=256,
                         n_expert=4, n_expert_used=2, ftype="MXFP4_MOE", sliding_window=128, n_vocab=32000)


@contextlib.contextmanager
def whole_cache():
    """Every layer priced over the cells up to the position, a sliding-window layer over its
    whole cache (the rule before cpu_attention.cpu_attention_cells)."""
    saved = cpu_attention.cpu_attention_cells
    cpu_attention.cpu_attention_cells = lambda spec, cfg, position: kv.kv_cells_seen(spec, cfg, position, padded=False)
    try:
        yield
    finally:
        cpu_attention.cpu_attention_cells = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--long", type=int, default=512, help="positions for the two shapes (gpt-oss: 4x)")
    args = ap.parse_args()
    if args.rounds < 1 or args.long <= SHORT:
        ap.error(f"--rounds must be at least 1 and --long more than {SHORT}")
    hw = detect()
    probe = current_probe(hw)
    att = probe.attention_for(True) if probe else None
    if att is None:
        print("No probe of this machine and build with a flash-attention figure: run `rooflight probe` first.",
              file=sys.stderr)
        return 2
    print(f"load average before: {os.getloadavg()[0]:.2f}; {hw.cpu.name}; F16 SIMD block {f16_simd_block(hw.cpu.isa)}")
    shapes = dict(SHAPES)
    wanted = [("llama-25M-F16-mha", shapes["llama-25M-F16-mha"], args.long),
              ("llama-100M-Q8_0-gqa", shapes["llama-100M-Q8_0-gqa"], args.long),
              ("gpt-oss-20b attention", GPT_OSS_ATTENTION, 4 * args.long),
              ("gemma-3-270m Q4_K_M", None, 8 * args.long)]
    with tempfile.TemporaryDirectory() as tmp:
        models = []
        for name, kw, long in wanted:
            path = (gemma_270m_path() if kw is None else
                    write_model(Path(tmp) / f"{len(models)}.gguf", context_length=8192, tiled=True, **kw))
            spec = load_model_spec(str(path))
            cfg = plan(spec, hw, Wishes(n_ctx=long + 512, n_gpu_layers=0, prompt_tokens=long, gen_tokens=GEN,
                                        flash_attn="on")).config
            models.append((name, path, spec, cfg, long))
        times: dict[tuple[int, int], list[float]] = {}
        for _ in range(args.rounds):
            for i, (_, path, _, cfg, long) in enumerate(models):
                for prompt in (SHORT, long):
                    got = measure(path, cfg, prompt_tokens=prompt, gen_tokens=GEN)
                    times.setdefault((i, prompt), []).append(1 / got.decode_tok_s)
    print(f"{'model':24} {'measured ms':>12} {'unit model':>11} {'measured/':>10} {'with the':>10} {'measured/':>10}"
          f" {'whole':>10} {'measured/':>10}")
    print(f"{'':24} {'(long-short)':>12} {'ms':>11} {'predicted':>10} {'term, ms':>10} {'predicted':>10}"
          f" {'cache, ms':>10} {'predicted':>10}")

    def priced(spec, cfg, long, isa) -> float:
        return ((cpu_attention_units(spec, cfg, long + SHORT, isa) - cpu_attention_units(spec, cfg, 2 * SHORT, isa))
                * att.decode_s_per_unit)

    for i, (name, _, spec, cfg, long) in enumerate(models):
        measured = statistics.median(times[(i, long)]) - statistics.median(times[(i, SHORT)])
        unit, term = priced(spec, cfg, long, ()), priced(spec, cfg, long, hw.cpu.isa)
        with whole_cache():
            whole = priced(spec, cfg, long, hw.cpu.isa)
        print(f"{name:24} {measured * 1e3:12.2f} {unit * 1e3:11.2f} {measured / unit:10.2f}"
              f" {term * 1e3:10.2f} {measured / term:10.2f} {whole * 1e3:10.2f} {measured / whole:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
