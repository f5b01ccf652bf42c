"""The memory plan on a CPU whose llama.cpp keeps weights in its AMX buffer, against
llama.cpp's own figures.

    [LLAMA_CPP_LIB_PATH=DIR] python bench/amx_memory.py

For the generated models of tests/test_integration_plan_vs_llama.py and the Gemma-3-270M package
model: the plan's RAM weights with the AMX buffer's packed layout (estimate/amx_layout.py) and
without it, beside what llama.cpp's no-alloc load says it would allocate (`estimate --confirm`,
runtime/confirm.py, which counts a tied output's second copy once). Needs a build whose AMX
kernels run here (one with llama.cpp PR #26954's fix, loaded through LLAMA_CPP_LIB_PATH, or a
machine without the crash): where they do not, it says so in one sentence. CI cannot run it:
its VMs' AMX kernels crash. 2026-12-05, the AMX Xeon VM with a fixed build: all six to the byte
with the layout, -0.9% to -9.2% without it.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from gemma_model import gemma_270m_path  # noqa: E402
from rooflight.estimate import Wishes, plan  # noqa: E402
from rooflight.gguf import load_model_spec  # noqa: E402
from rooflight.gguf.synthetic import write_model  # noqa: E402
from rooflight.runtime import amx  # noqa: E402
from rooflight.runtime.confirm import confirm  # noqa: E402
from test_integration_plan_vs_llama import CASES, HOST  # noqa: E402


def main() -> int:
    if not amx.amx_weights_here():
        print("This llama.cpp build keeps no weights in an AMX buffer here (no AMX kernels, or they crash): "
              "point LLAMA_CPP_LIB_PATH at a build whose AMX kernels run.", file=sys.stderr)
        return 2
    with_amx = replace(HOST, cpu=replace(HOST.cpu, amx_weights=True))
    without = replace(HOST, cpu=replace(HOST.cpu, amx_weights=False))
    print(f"{'model':14} {'llama.cpp':>12} {'plan':>12} {'difference':>11} {'plan without':>13} {'difference':>11}")
    with tempfile.TemporaryDirectory(prefix="rooflight-amx-memory-") as tmp:
        paths = {name: write_model(Path(tmp) / f"{name}.gguf", context_length=16384, **kw)
                 for name, kw in CASES.items()}
        paths["gemma-3-270m"] = gemma_270m_path()
        worst = 0.0
        for name, path in paths.items():
            spec = load_model_spec(str(path))
            wishes = Wishes(n_ctx=512, n_gpu_layers=0, flash_attn="off")
            est = plan(spec, with_amx, wishes)
            told = confirm(path, est)
            if told.by is None:
                print(f"{name:14} llama.cpp could not say: {told.reason}")
                continue
            real = told.devices[0].weights_bytes
            planned = est.memory.device("cpu").weights_bytes
            plain = plan(spec, without, wishes).memory.device("cpu").weights_bytes
            worst = max(worst, abs(planned / real - 1))
            print(f"{name:14} {real:12d} {planned:12d} {planned / real - 1:+11.2%} {plain:13d} {plain / real - 1:+11.2%}")
    print(f"largest difference with the layout: {worst:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
