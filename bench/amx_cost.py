"""What the AMX guard's ways of loading cost, side by side.

    [LLAMA_CPP_LIB_PATH=DIR] python bench/amx_cost.py [--rounds 3] [--prompt 512] [--gen 32]

Where a build's AMX kernels crash, Rooflight takes the AMX buffer type out of the extra buffer
types llama.cpp places weights in and keeps the CPU repack one (runtime/amx.drop_amx_buffer,
'no AMX' below); where that list cannot be reached it loads with `use_extra_bufts = false`
('plain': neither AMX nor repack). This measures those ways against each other and, on a build
whose AMX kernels run here (one with the tile configuration in read-only data, llama.cpp PR
#26954, loaded through LLAMA_CPP_LIB_PATH, or a machine without the bug), against every extra
buffer ('extra', llama.cpp's default). The same models loaded each way (the 'extra' loads
first: dropping AMX is process-wide and governs loads after it), run interleaved round by round
(the machine's speed drifts between seconds), a prompt of --prompt tokens and --gen tokens of
decode each; the median of --rounds counts. Prints tokens/s each way and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rooflight.gguf.synthetic import write_model  # noqa: E402
from rooflight.runtime import amx  # noqa: E402
from rooflight.runtime.busy import load_now  # noqa: E402

SHAPES = {  # generated llama shapes, in types the AMX buffer takes
    "llama-300M-Q4_K_M": dict(n_layer=16, n_embd=1024, n_head=16, n_head_kv=4, n_ff=2816, n_vocab=32000,
                              ftype="Q4_K_M"),
    "llama-1B-Q4_0": dict(n_layer=16, n_embd=2048, n_head=32, n_head_kv=8, n_ff=5632, n_vocab=32000, ftype="Q4_0"),
    "llama-400M-Q8_0": dict(n_layer=12, n_embd=1280, n_head=20, n_head_kv=4, n_ff=3584, n_vocab=32000, ftype="Q8_0"),
}


def _llama(path: Path, extra_buffers: bool):
    def configure(params) -> None:
        params.use_extra_bufts = extra_buffers

    return amx.llama_with_params(configure)(str(path), n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=2,
                                            n_threads_batch=2, flash_attn=True, verbose=False)


def _load_ways(paths: dict[str, Path], with_amx: bool) -> dict[str, dict]:
    """{model: {way: Llama}}. Every model's 'extra' load (only where AMX runs here) comes
    before the AMX buffer is dropped: the drop is process-wide and governs the loads after it."""
    ways: dict[str, dict] = {name: {} for name in paths}
    if with_amx:
        for name, path in paths.items():
            ways[name]["extra"] = _llama(path, True)
    if not amx.drop_amx_buffer():
        raise SystemExit("This llama.cpp build does not expose its extra buffer types: nothing to compare.")
    for name, path in paths.items():
        ways[name]["no AMX"] = _llama(path, True)
        ways[name]["plain"] = _llama(path, False)
    return ways


def _run(llm, prompt: int, gen: int) -> tuple[float, float, float]:
    """(prompt tok/s, decode tok/s, share of the CPU other programs took meanwhile)."""
    from rooflight.runtime.busy import Watch

    with Watch() as w:
        prompt_rate, decode_rate = _timed(llm, prompt, gen)
    assert w.window is not None
    return prompt_rate, decode_rate, w.window.others_share


def _timed(llm, prompt: int, gen: int) -> tuple[float, float]:
    llm.reset()
    tokens = [10 + (i * 7919) % 200 for i in range(prompt)]
    t0 = time.perf_counter()
    llm.eval(tokens)
    t1 = time.perf_counter()
    for i in range(gen):
        llm.eval([20 + i])
    t2 = time.perf_counter()
    return prompt / (t1 - t0), gen / (t2 - t1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=32)
    args = ap.parse_args()
    if min(args.rounds, args.prompt, args.gen) < 1 or args.prompt + args.gen > 1024:
        print("--rounds, --prompt and --gen must be positive, with --prompt + --gen at most 1024.", file=sys.stderr)
        return 2
    import llama_cpp

    from gemma_model import gemma_270m_path

    with_amx = amx.build_has_amx() and not amx.amx_crashes()
    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    extra = " and ".join(n for n in ("AMX_INT8", "REPACK") if f"{n} = 1" in info) or "none"
    load, cpus = load_now()
    print(f"extra buffers of this build: {extra}; AMX kernels {'run' if with_amx else 'crash or are absent'} here; "
          f"load average before: {load:.2f} on {cpus} CPUs")
    print(f"{'model':22} {'':15} {'prompt tok/s':>13} {'decode tok/s':>13}   (median of {args.rounds} rounds)")
    with tempfile.TemporaryDirectory(prefix="rooflight-amx-cost-") as tmp:
        models = {name: write_model(Path(tmp) / f"{name}.gguf", tiled=True, context_length=4096, **shape)
                  for name, shape in SHAPES.items()}
        models["gemma-3-270m-Q4_K_M"] = gemma_270m_path()
        loaded = _load_ways(models, with_amx)
        for name, ways in loaded.items():
            runs: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
            try:
                for _ in range(args.rounds):
                    for way, llm in ways.items():
                        runs[way].append(_run(llm, args.prompt, args.gen))
            finally:
                for llm in ways.values():
                    llm.close()
            med = {way: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
                   for way, rs in runs.items()}
            for i, way in enumerate(ways):
                print(f"{name if i == 0 else '':22} {way:15} {med[way][0]:13.1f} {med[way][1]:13.1f}")
            others = max(r[2] for rs in runs.values() for r in rs)
            pairs = [("no AMX", "plain")] + ([("extra", "no AMX")] if with_amx else [])
            for a, b in pairs:
                print(f"{'':22} {a + '/' + b:15} {med[a][0] / med[b][0]:13.2f} {med[a][1] / med[b][1]:13.2f}")
            print(f"{'':22} others' CPU at most {others:.0%}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
