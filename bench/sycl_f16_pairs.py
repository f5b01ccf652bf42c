"""How much faster the estimator says a SYCL build with GGML_SYCL_F16 runs than one without,
beside what one Arc Pro B70 measured with both builds (bench/data/sycl_f16_pairs.json).

    python bench/sycl_f16_pairs.py

The pairs' quantizations are published only as "Q4" / "Q6" (and not at all for Qwen2.5-7B):
they are priced as Q4_K_M and Q6_K, the labels' most common files (an assumption, which the
ratio barely depends on: both builds read and convert the same weights). Gemma-2-9B is not in
the catalog and is left out. Prompt rows only: decode is priced alike for both builds, and
the pairs' decodes agree within 3%.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import fit_constants as fc  # noqa: E402  (bench/ is not a package)

DATA = Path(__file__).parent / "data" / "sycl_f16_pairs.json"
# the table's labels -> (catalog model, the quantization assumed)
PRICED_AS = {
    "DeepSeek-R1-Qwen-32B-Q4": ("deepseek-r1-distill-qwen-32b", "Q4_K_M"),
    "Qwen2.5-32B-Q4": ("qwen2.5-32b", "Q4_K_M"),
    "Qwen2.5-32B-Q6": ("qwen2.5-32b", "Q6_K"),
    "Qwen2.5-7B": ("qwen2.5-7b", "Q4_K_M"),
}


def predicted_ratio(device: str, model: str, quant: str, n_prompt: int) -> float:
    """The estimate's FP16-build prompt speed over its FP32-build one."""
    row = dict(device=device, backend="sycl", model=model, quant=quant, n_prompt=n_prompt, n_gen=0,
               n_ubatch=512, fa=None)
    return fc._seconds({**row, "sycl_f16": False}) / fc._seconds(row)


def main() -> int:
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    print(f"{'model (as labelled)':26} {'test':7} {'measured F16/F32':>17} {'estimate':>9} {'ratio':>6}")
    checks = []
    for pair in doc["pairs"]:
        if pair["n_gen"] or pair["model_label"] not in PRICED_AS:
            continue
        measured = pair["fp16_t_s"] / pair["fp32_t_s"]
        predicted = predicted_ratio(doc["device"], *PRICED_AS[pair["model_label"]], pair["n_prompt"])
        checks.append(measured / predicted)
        print(f"{pair['model_label']:26} {pair['test']:7} {measured:17.2f} {predicted:9.2f} {measured / predicted:6.2f}")
    print(f"measured / estimated speed-up over {len(checks)} prompt pairs: median {statistics.median(checks):.2f}, "
          f"range {min(checks):.2f}-{max(checks):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
