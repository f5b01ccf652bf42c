"""How far is a Hub file estimated from another file's header (hub_specs.resize_spec) from
the same file estimated from its own tensors?

    python bench/hub_scaled.py [--hardware FILE] [--header Q4_K_M]

`rooflight search` reads one header per repository (the file nearest Q4_K_M) and estimates
every other file of it by resizing that header to the file's size (catalog/hub_rank.py). Here
the catalog's models stand in for repositories: each one's --header quant, built by the size
recipe (gguf/quant_recipe.py, llama.cpp's own per-tensor types), is resized to every other
quant the recipe knows, at that quant's exact recipe size, and both are planned on this
machine (its stored probe, if any) or on --hardware. Prints per target quant the median and
largest |scaled / own - 1| of decode and prompt speed. Nothing is measured with llama.cpp:
the recipe's types are the reference, so this isolates what the resize itself loses.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from rooflight.catalog import load_catalog
from rooflight.catalog.arch_support import unavailable_reason
from rooflight.catalog.hub_specs import resize_spec
from rooflight.errors import BadInputError
from rooflight.estimate import Calibration, Wishes, plan
from rooflight.gguf.quant_recipe import normalize_ftype
from rooflight.hardware import detect, load_profile
from rooflight.store.probes import probe_status

TARGETS = ("Q4_0", "Q4_K_S", "Q5_K_M", "Q6_K", "Q8_0", "F16")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", type=Path, help="a hardware profile JSON (default: this machine)")
    ap.add_argument("--header", default="Q4_K_M", help="the quant whose header is read (default Q4_K_M)")
    args = ap.parse_args()
    try:
        normalize_ftype(args.header)
    except ValueError as exc:
        ap.error(f"--header: {exc}")
    if args.hardware:
        try:
            hw, cal = load_profile(args.hardware, measure_bandwidth=False), None
        except BadInputError as exc:
            print(exc, file=sys.stderr)
            return 2
    else:
        hw = detect()
        probe = probe_status(hw).probe
        cal = Calibration(probe=probe) if probe else None
    print(f"machine: {hw.cpu.name}, {len(hw.gpus)} GPU(s); basis: {'probe' if cal else 'table'}")
    errors: dict[str, dict[str, list[float]]] = {t: {"decode": [], "prefill": []} for t in TARGETS}
    for model in load_catalog():
        if unavailable_reason(model) is not None or model.layout == "gpt-oss":
            continue
        header = model._computed(args.header)
        for quant in TARGETS:
            own = model._computed(quant)
            scaled = resize_spec(header, own.file_bytes, quant=quant)
            wishes = Wishes(n_ctx=4096)
            a = plan(own, hw, wishes, calibration=cal).performance
            b = plan(scaled, hw, wishes, calibration=cal).performance
            errors[quant]["decode"].append(abs(b.decode_tok_s / a.decode_tok_s - 1))
            errors[quant]["prefill"].append(abs(b.prefill_tok_s / a.prefill_tok_s - 1))
    print(f"\nfrom each catalog model's {args.header} header, |scaled / own - 1|:")
    print("| file | models | decode median | decode max | prompt median | prompt max |")
    print("|---|---|---|---|---|---|")
    for quant, e in errors.items():
        d, p = e["decode"], e["prefill"]
        print(f"| {quant} | {len(d)} | {statistics.median(d):.1%} | {max(d):.1%} | "
              f"{statistics.median(p):.1%} | {max(p):.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
