"""MoE experts in RAM (--n-cpu-moe): predicted vs measured for what this machine can run,
and the planner's choice on what-if GPUs.

    python bench/moe_offload.py [--repeats N]

1. Generates two random-weight MoE files (qwen3moe-style Q8_0 and gpt-oss-style MXFP4_MOE,
   ~60-90 MB), loads each with experts of N = 0, half and all layers kept in RAM through
   llama.cpp's tensor overrides (runtime/tensor_overrides.py) and prints the tensors
   llama.cpp logged as overridden, planned vs reported buffers, and predicted vs measured
   prefill/decode. On a CPU-only build every buffer is in RAM whatever N is, so the three
   placements should measure alike: the point is that the override path loads, is applied,
   and costs nothing; GPU placements cannot be measured here.
2. Prints the plan for gpt-oss-20b-, Qwen3-30B-A3B- and gpt-oss-120b-shaped models on 8, 12,
   16 and 24 GB what-if GPUs: experts in RAM against a layer split, and which auto takes.
Timings on a shared machine are noisy: the best of --repeats runs is printed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from rooflight.catalog import find_model
from rooflight.estimate import Calibration, Wishes, plan
from rooflight.gguf import load_model_spec
from rooflight.gguf.from_hparams import spec_from_hparams
from rooflight.gguf.synthetic import write_model
from rooflight.hardware import detect, profile_from_dict
from rooflight.runtime.measure import measure
from rooflight.store.probes import current_probe

MIB = 1024 * 1024
GiB = 2**30
MODELS = {
    "qwen3moe-Q8_0": dict(arch="qwen3moe", n_layer=8, n_embd=512, n_head=8, n_head_kv=2, n_ff=512, n_vocab=8000,
                          ftype="Q8_0", n_expert=16, n_expert_used=4),
    "gpt-oss-MXFP4": dict(arch="gpt-oss", n_layer=8, n_embd=512, n_head=8, n_head_kv=2, head_dim=64, n_ff=512,
                          n_vocab=8000, ftype="MXFP4_MOE", n_expert=16, n_expert_used=4, sliding_window=128),
}
GPUS = {8: "RTX 4060", 12: "RTX 3060", 16: "RTX 4060 Ti 16GB", 24: "RTX 3090"}


def measured_part(repeats: int) -> None:
    hw = detect()
    # predicted as the app predicts this machine: on its stored probe where there is one
    cal = Calibration(probe=current_probe(hw))
    print(f"This machine: {hw.cpu.name}, {hw.cpu.cores} cores, backend {hw.backend}; "
          f"load average {os.getloadavg()[0]:.1f} (shared with other work: timings are noisy); "
          f"predictions on {'its stored probe' if cal.probe else 'the table (no current probe: rooflight probe)'}")
    with tempfile.TemporaryDirectory() as d:
        for name, kw in MODELS.items():
            path = write_model(Path(d) / f"{name}.gguf", context_length=4096, **kw)
            spec = load_model_spec(str(path))
            print(f"\n{name}: {spec.file_bytes / MIB:.1f} MiB, {spec.n_expert} experts, {spec.n_expert_used} used")
            print(f"{'N':>3} {'overridden':>10} {'planned MiB':>12} {'llama.cpp MiB':>14} "
                  f"{'decode pred':>12} {'meas':>8} {'prefill pred':>13} {'meas':>8}")
            for n in (0, spec.n_layer // 2, spec.n_layer):
                est = plan(spec, hw, Wishes(n_ctx=1024, n_cpu_moe=n), calibration=cal)
                runs = [measure(path, est.config, prompt_tokens=256, gen_tokens=64) for _ in range(repeats)]
                best = max(runs, key=lambda r: r.decode_tok_s)
                b = best.buffers
                repacked = sum(spec.tensor(t).n_bytes for t in b.repacked_tensors)
                reported = b.model_bytes - repacked + b.kv_bytes + b.compute_bytes + b.output_bytes
                p = est.performance
                print(f"{n:>3} {len(b.overridden):>10} {est.memory.total_bytes / MIB:>12.1f} {reported / MIB:>14.1f} "
                      f"{p.decode_tok_s:>12.1f} {best.decode_tok_s:>8.1f} {p.prefill_tok_s:>13.1f} "
                      f"{max(r.prefill_tok_s for r in runs):>8.1f}")


def _gpt_oss(model_id: str):
    h = find_model(model_id).hparams  # hyper-parameters from the catalog (openai config.json)
    return spec_from_hparams(name=model_id, arch="gpt-oss", ftype="MXFP4_MOE", n_layer=h.n_layer, n_embd=h.n_embd,
                             n_head=h.n_head, n_head_kv=h.n_head_kv, n_ff=h.n_ff, n_vocab=h.n_vocab,
                             context_length=h.context_length, head_dim=h.head_dim, n_expert=h.n_expert,
                             n_expert_used=h.n_expert_used, sliding_window=h.sliding_window,
                             swa_layers=tuple(i % 2 == 0 for i in range(h.n_layer)))


def what_if_part() -> None:
    shapes = {"gpt-oss-20b MXFP4": _gpt_oss("gpt-oss-20b"),
              "Qwen3-30B-A3B Q4_K_M": find_model("qwen3-30b-a3b").spec("Q4_K_M"),
              "gpt-oss-120b MXFP4": _gpt_oss("gpt-oss-120b")}
    cpu = {"name": "what-if CPU", "cores": 8, "threads": 16, "isa": ["avx2", "fma"], "ram_total_bytes": 128 * GiB,
           "ram_available_bytes": int(0.9 * 128 * GiB), "ram_bandwidth_gbs": 50.0, "max_freq_mhz": 4500.0}
    print("\nWhat-if GPUs (8 cores, 128 GB DDR5 at 50 GB/s), 8K context: decode tok/s")
    print(f"{'model':<22}{'GPU':>22} {'layer split':>18} {'experts in RAM':>22}  auto")
    for name, spec in shapes.items():
        for gb, gpu in GPUS.items():
            hw = profile_from_dict({"gpus": [{"name": gpu}], "cpu": cpu}, measure_bandwidth=False)
            est = plan(spec, hw, Wishes(n_ctx=8192, n_cpu_moe="auto"))
            c = est.moe_choice
            s = c.layer_split
            m = c.experts_in_ram
            split = f"{s['decode_tok_s']:.1f} ({s['n_gpu_layers']} layers)"
            moe = f"{m['decode_tok_s']:.1f} (N={m['n_cpu_moe']}, {m['n_gpu_layers']} layers)" if m else "-"
            print(f"{name:<22}{gpu + f' {gb}G':>22} {split:>18} {moe:>22}  {c.placement}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    measured_part(args.repeats)
    what_if_part()


if __name__ == "__main__":
    main()
