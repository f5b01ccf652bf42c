"""Argument types and output helpers shared by every subcommand."""

from __future__ import annotations

import argparse
import json
import os
import sys

from rooflight.errors import BadInputError


def emit_json(doc: dict) -> None:
    """Print one JSON document on stdout (CONTRACT.md: --json output)."""
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of at least 1, got {value}")
    return value


def gpu_layers(text: str) -> int | str:
    if text == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("expected 0 or more")
    return value


def n_cpu_moe(text: str) -> int | str:
    """--n-cpu-moe N|auto|all: MoE experts of the first N layers kept in RAM (llama.cpp's flag)."""
    from rooflight.errors import BadInputError
    from rooflight.estimate.experts import parse_wish

    try:
        return parse_wish(text)
    except BadInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


N_CPU_MOE_HELP = ("MoE models: keep the routed experts of the first N layers in RAM, attention and KV cache on "
                  "the GPU (llama.cpp's --n-cpu-moe); all; or auto: the faster of that and a layer split "
                  "(default 0)")


def load_hardware(args):
    """The machine to plan for: the --hardware profile if given, else this one, detected."""
    from rooflight.hardware import detect, load_profile

    if getattr(args, "hardware", None):
        return load_profile(args.hardware)
    return detect()


def calibration_for(args, profile):
    """This machine's calibration, or None for a --hardware profile: measurements taken here
    describe this machine only."""
    if getattr(args, "hardware", None):
        return None
    from rooflight.store.calibration import machine_calibration

    return machine_calibration(profile)


def check_use_case(name: str, *, also: tuple[str, ...] = ()) -> None:
    """BadInputError unless `name` is a ranking use case (or one of `also`: tag filters)."""
    from rooflight.catalog.rank import USE_CASES
    from rooflight.errors import BadInputError

    if name not in USE_CASES and name not in also:
        raise BadInputError(f"Unknown use case {name!r}; use one of {', '.join(USE_CASES)}.")


def add_estimate_options(
    p: argparse.ArgumentParser,
    model_help: str = "a local .gguf path, or hf:OWNER/REPO/FILE.gguf (header read remotely)",
) -> None:
    """The model and plan options of estimate, bench and advise-like commands."""
    p.add_argument("model", help=model_help)
    p.add_argument("--hardware", metavar="FILE", help="estimate for the machine in this JSON profile")
    p.add_argument("--ctx", type=positive_int, help="context length (default: 8192, capped at the model's)")
    p.add_argument("--batch", type=positive_int, default=512)
    p.add_argument("--ubatch", type=positive_int, default=512)
    p.add_argument("--kv-type", choices=["f16", "q8_0", "q4_0"], default="f16")
    p.add_argument("--flash-attn", choices=["on", "off", "auto"], default="auto")
    p.add_argument("--gpu-layers", type=gpu_layers, default="auto", metavar="N|auto")
    p.add_argument("--n-cpu-moe", type=n_cpu_moe, default=0, metavar="N|auto|all", help=N_CPU_MOE_HELP)
    p.add_argument("--threads", type=positive_int)
    p.add_argument("--prompt-tokens", type=positive_int, default=512)
    p.add_argument("--gen-tokens", type=positive_int, default=128)
    add_rpc_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")


def add_rpc_option(p) -> None:
    """--rpc and --link-gbps (commands/rpc.py remotes_from_args reads them)."""
    p.add_argument("--rpc", metavar="HOST:PORT[,...]",
                   help="also run layers on these llama.cpp RPC servers (see `rooflight rpc-server`)")
    p.add_argument("--link-gbps", type=float, default=1.0,
                   help="network link to the RPC servers, Gbit/s (default 1, gigabit Ethernet)")


def wishes_from(args):
    """The estimate.Wishes those options describe."""
    from rooflight.estimate import Wishes

    return Wishes(
        n_ctx=args.ctx,
        n_gpu_layers=args.gpu_layers,
        kv_type=args.kv_type,
        flash_attn=args.flash_attn,
        n_threads=args.threads,
        n_batch=args.batch,
        n_ubatch=args.ubatch,
        prompt_tokens=args.prompt_tokens,
        gen_tokens=args.gen_tokens,
        n_cpu_moe=getattr(args, "n_cpu_moe", 0),
    )


def model_variants(model: str, quant: str | None, mmproj: str | None = None):
    """(variants, current quant) for a MODEL argument: a catalog id (every file the catalog
    lists; current: --quant or the default), a .gguf path or an hf: reference (one file)."""
    from rooflight.catalog import find_model
    from rooflight.estimate.advise import Variant, catalog_variants, default_quant
    from rooflight.gguf import is_hf_uri, load_model_spec

    if not is_hf_uri(model) and not os.path.exists(model):
        entry = find_model(model)
        if entry is None:
            raise BadInputError(unknown_model_message(model))
        from dataclasses import replace

        from rooflight.catalog.hub_vision import catalog_projector, with_vision

        projector = catalog_projector(entry)  # a vision model: advised with its projector
        variants = tuple(replace(v, spec=with_vision(v.spec, projector)) for v in catalog_variants(entry))
        current = quant.upper() if quant else default_quant([v.quant for v in variants], entry.native_quant)
        if current not in {v.quant for v in variants}:
            entry.file_for(current)  # raises the catalog's one-sentence error: the quants it lists
            raise BadInputError(f"{entry.id} {current}: the catalog lists the file but cannot size it yet.")
        return variants, current
    from rooflight.gguf.projector import projector_for_args

    spec = projector_for_args(load_model_spec(model), model, mmproj)  # a vision model's projector too
    if quant and quant.upper() != spec.file_type.upper():
        raise BadInputError(f"{model} is a {spec.file_type} file; --quant only chooses among a catalog model's files.")
    return (Variant(spec.file_type, spec, model),), spec.file_type


def looks_like_path(model: str) -> bool:
    """A MODEL argument written as a file path (a .gguf name or a folder separator), not a
    catalog id: where none exists, it is missing rather than unknown."""
    return model.lower().endswith(".gguf") or "/" in model or os.sep in model


def unknown_model_message(model: str) -> str:
    """One sentence for a MODEL argument that names no file here and no catalog model,
    shaped by what it looks like: a Hub file or repository without hf:, a path, or an id."""
    gguf = model.lower().endswith(".gguf")
    relative = not model.startswith(("/", ".", "~")) and not os.path.isabs(model)
    if gguf and relative and model.count("/") >= 2:  # OWNER/REPO/FILE.gguf
        return f"{model} is not a file here; a file on the Hugging Face Hub is written hf:{model}."
    if not gguf and relative and model.count("/") == 1:  # OWNER/REPO
        return (f"{model} is not a file here or a catalog id; a Hub model is named by one of its files, "
                f"hf:{model}/FILE.gguf (`rooflight search` finds Hub models and ranks them for this machine).")
    if looks_like_path(model):
        return f"{model} does not exist."
    return (f"{model!r} is not a catalog id, a .gguf file or an hf:OWNER/REPO/FILE.gguf reference; "
            "`rooflight rank` lists the catalog.")


def model_spec_for(model: str, quant: str | None = None, mmproj: str | None = None):
    """The ModelSpec a MODEL argument names (a catalog id at --quant or its default quant,
    with its vision projector; a .gguf path; an hf: reference)."""
    variants, current = model_variants(model, quant, mmproj)
    return next(v.spec for v in variants if v.quant == current)
