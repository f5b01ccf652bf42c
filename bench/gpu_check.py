"""The GPU path, proven on a real GPU: one command, nothing read from the network.

    python bench/gpu_check.py            # on a GPU machine (bench/README.md: the device procedure)
    python bench/gpu_check.py --dry-run  # on a CPU machine (CI): everything but the GPU parts

1. Build or reuse a CUDA llama-cpp-python: the installed one if it offloads; else a wheel
   kept from an earlier run (.gpukit-state/wheels); else the app's own one-step GPU build
   (runtime/gpu_build_run.py) from a carried source tarball (.gpukit/, made by
   bench/gpu_kit_prepare.py), CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=<from
   the compute capability NVML reports>", offline.
2. Record `rooflight hardware --json` (real NVML, bandwidth from clocks, compute
   capability) and `rooflight probe --json` where this build of Rooflight has it.
3. Generate test models with the project's writer (gguf/synthetic.py): dense llama-style at
   several sizes and types, a Gemma-style sliding-window model, a MoE model.
4. For each, at the planned config and at forced partial offloads (and, for the MoE model,
   experts in RAM where RunConfig has n_cpu_moe), record: NVML free memory before / while
   loaded / after, llama.cpp's reported buffers (model, KV, compute, output) per device,
   llama.cpp's no-alloc numbers (runtime/confirm.py), pp and tg measured, Rooflight's plan
   and estimate. The per-GPU overhead is measured as NVML's used memory minus the buffers.
5. Print one predicted-vs-measured table and write it all as JSON under bench/results/.

The measurement runs in a child Python, so a CUDA build installed in step 1 is the one
loaded. --dry-run plans for an H200 from the GPU table, shows the build command it would
run, and loads and measures on this machine's CPU with tiny models.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / ".gpukit"  # carried to the device machine: the source tarball, pure-Python wheels
# what a run leaves for a rerun on the still-warm machine: NOT carried (a carried path is
# replaced on every call), so the built wheel and the models survive between two calls
STATE = ROOT / ".gpukit-state"
MIB = 2**20
GB = 1e9

# name -> synthetic.write_model arguments. Shapes are real models' proportions (head size
# 64-256, GQA, 32k vocabulary) at sizes one fresh machine writes in under a minute.
MODELS = {
    "llama-40M-Q4_0": dict(arch="llama", n_layer=4, n_embd=512, n_head=8, n_head_kv=2, n_ff=1536, n_vocab=32000,
                           ftype="Q4_0"),
    "llama-190M-F16": dict(arch="llama", n_layer=8, n_embd=1024, n_head=16, n_head_kv=4, n_ff=4096, n_vocab=32000,
                           ftype="F16"),
    "llama-190M-Q4_K_M": dict(arch="llama", n_layer=8, n_embd=1024, n_head=16, n_head_kv=4, n_ff=4096,
                              n_vocab=32000, ftype="Q4_K_M"),
    "llama-560M-Q8_0": dict(arch="llama", n_layer=12, n_embd=2048, n_head=16, n_head_kv=8, n_ff=5632, n_vocab=32000,
                            ftype="Q8_0"),
    "gemma3-swa-160M-Q8_0": dict(arch="gemma3", n_layer=12, n_embd=1024, n_head=4, n_head_kv=1, head_dim=256,
                                 n_ff=4096, n_vocab=32000, ftype="Q8_0", sliding_window=512),
    "qwen3moe-16x-Q8_0": dict(arch="qwen3moe", n_layer=8, n_embd=1024, n_head=16, n_head_kv=4, n_ff=768,
                              n_vocab=32000, ftype="Q8_0", n_expert=16, n_expert_used=4),
}
DRY_MODELS = {  # the same kinds, tiny: the dry run must take seconds on 2 cores
    "llama-tiny-Q4_0": dict(arch="llama", n_layer=2, n_embd=128, n_head=4, n_head_kv=2, n_ff=256, n_vocab=1000,
                            ftype="Q4_0"),
    "llama-tiny-F16": dict(arch="llama", n_layer=3, n_embd=256, n_head=4, n_head_kv=2, n_ff=512, n_vocab=1000,
                           ftype="F16"),
    "gemma3-swa-tiny-Q8_0": dict(arch="gemma3", n_layer=4, n_embd=128, n_head=2, n_head_kv=1, head_dim=64,
                                 n_ff=256, n_vocab=1000, ftype="Q8_0", sliding_window=64),
    "qwen3moe-tiny-Q8_0": dict(arch="qwen3moe", n_layer=2, n_embd=128, n_head=4, n_head_kv=2, n_ff=128,
                               n_vocab=1000, ftype="Q8_0", n_expert=4, n_expert_used=2),
}
N_CTX = 4096
PROMPT, GEN = 512, 128
DRY_PROMPT, DRY_GEN = 64, 16


def log(text: str) -> None:
    print(text, flush=True)


# ---- step 1: the build ------------------------------------------------------------------

_CHECK = ("import json, os, llama_cpp; d = os.path.join(os.path.dirname(llama_cpp.__file__), 'lib'); "
          "print(json.dumps({'version': llama_cpp.__version__, 'offload': bool(llama_cpp.llama_supports_gpu_offload()), "
          "'libs': sorted(os.listdir(d)) if os.path.isdir(d) else []}))")


def installed_build() -> dict:
    """What the llama-cpp-python this Python would import can do (asked in a child: this
    process must not load the library before a new build is installed)."""
    r = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return {"importable": False, "error": (r.stderr.strip().splitlines() or ["?"])[-1][:300]}
    info = json.loads(r.stdout.strip().splitlines()[-1])
    info["importable"] = True
    info["cuda"] = any("ggml-cuda" in n for n in info["libs"])
    return info


def _gpu_for_build(dry_run: bool):
    from rooflight.hardware import GPUInfo, profile_from_dict
    from rooflight.hardware.nvidia import detect_nvidia

    if dry_run:  # the GPU the kit is prepared for; its figures come from the bundled table
        gpu = profile_from_dict({"gpus": [{"name": "NVIDIA H200"}]}, detect_cpu_if_missing=True,
                                measure_bandwidth=False).gpus[0]
        return dataclasses.replace(gpu, compute_capability=gpu.compute_capability or "9.0")
    gpus, warnings = detect_nvidia()
    for w in warnings:
        log(f"  NVML: {w}")
    return gpus[0] if gpus else GPUInfo(0, "no NVIDIA GPU", "nvidia", None, None, None, None)


def ensure_build(dry_run: bool, source: str | None, deadline_s: float = 480.0) -> dict:
    """Reuse or build the CUDA llama-cpp-python; a record of what was done. A build still
    running 90 s before the deadline is stopped (the CPU build stays; the JSON says so)."""
    from rooflight.hardware.gpu_build import gpu_build_for
    from rooflight.runtime.gpu_build_run import build_and_install

    t0 = time.perf_counter()
    before = installed_build()
    gpu = _gpu_for_build(dry_run)
    tarballs = sorted(KIT.glob("llama_cpp_python-*.tar.gz"))
    source = source or (str(tarballs[-1]) if tarballs else None)
    build = gpu_build_for(gpu, source=source, offline=True) if source else gpu_build_for(gpu)
    record = {"before": before, "gpu": gpu.name, "compute_capability": gpu.compute_capability,
              "command": build.command, "cmake_args": build.cmake_args, "toolkit": build.toolkit, "source": source}
    if dry_run:
        log(f"build: dry run; on the GPU machine this would run: {build.command}")
        return {**record, "action": "dry_run", "seconds": 0.0}
    if before.get("cuda") and before.get("offload"):
        log(f"build: reusing the installed CUDA llama-cpp-python {before.get('version')}")
        return {**record, "action": "reused", "seconds": round(time.perf_counter() - t0, 1)}
    kept = sorted((STATE / "wheels").glob("llama_cpp_python-*.whl"))
    if kept:  # a rerun on a warm machine: the wheel built by the first run
        log(f"build: installing the wheel kept from an earlier run: {kept[-1].name}")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps",
                            "--no-index", str(kept[-1])], capture_output=True, text=True)
        if r.returncode == 0:
            return {**record, "action": "kept_wheel", "after": installed_build(),
                    "seconds": round(time.perf_counter() - t0, 1)}
    log(f"build: {build.command}")
    shown = [-1]

    def progress(fraction: float) -> None:
        step = int(fraction * 10)
        if step > shown[0]:
            shown[0] = step
            log(f"  build {round(fraction * 100)}% ({time.perf_counter() - t0:.0f} s)")

    tail: list[str] = []
    outcome = build_and_install(build, on_line=lambda ln: tail.append(ln) if len(tail) < 100000 else None,
                                on_progress=progress, keep_wheel=str(STATE / "wheels"),
                                should_stop=lambda: time.perf_counter() - t0 > deadline_s - 90)
    log(f"build: {outcome.message}")
    if not outcome.ok:
        for line in tail[-30:]:
            log(f"  | {line}")
    return {**record, "action": "built", "ok": outcome.ok, "message": outcome.message,
            "after": installed_build(), "seconds": round(time.perf_counter() - t0, 1)}


# ---- step 2: what Rooflight says about this machine -----------------------------------


def child_env() -> dict[str, str]:
    """This checkout's app/ first on the path: the kit runs from a checkout without an install."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "app"), os.environ.get("PYTHONPATH", "")]))


def rooflight_cli(*args: str, timeout: float = 300) -> dict:
    r = subprocess.run([sys.executable, "-m", "rooflight", *args], capture_output=True, text=True, timeout=timeout,
                       cwd=ROOT, env=child_env())
    out = {"args": list(args), "exit": r.returncode, "stderr": r.stderr.strip()[-2000:]}
    try:
        out["json"] = json.loads(r.stdout)
    except ValueError:
        out["stdout"] = r.stdout[-4000:]
    return out


def has_command(name: str) -> bool:
    r = subprocess.run([sys.executable, "-m", "rooflight", name, "--help"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, env=child_env())
    return r.returncode == 0


# ---- step 3 and 4: models and measurements (in the child) ------------------------------


def _write(args: tuple[str, dict, str]) -> str:
    from rooflight.gguf.synthetic import write_model

    name, kw, folder = args
    path = Path(folder) / f"{name}.gguf"
    if not path.exists():  # kept while the machine stays warm: a rerun skips the writing
        write_model(path, context_length=32768, name=name, **kw)
    return str(path)


def write_models(models: dict, folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    jobs = [(n, kw, str(folder)) for n, kw in models.items()]
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
        return dict(zip(models, pool.map(_write, jobs), strict=True))


class NVML:
    """Free memory per NVIDIA GPU, read straight from NVML (None without a driver)."""

    def __init__(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:
            self.nvml, self.handles = None, []

    def free(self) -> list[int] | None:
        if self.nvml is None:
            return None
        return [int(self.nvml.nvmlDeviceGetMemoryInfo(h).free) for h in self.handles]


# With no layer on the GPU a GPU build still runs a long prompt's matmuls there (op_offload):
# the prefill estimate says so, and the GPU compute buffer for those copies is not planned
# (README, Prefill). One dense model measures both, the GPU's used memory among them.
NO_LAYER_MODELS = ("llama-560M-Q8_0", "llama-tiny-Q4_0")


def configs_for(name: str, kw: dict, dry_run: bool) -> list[tuple[str, dict]]:
    """(label, Wishes fields): the plan's own choice, then forced partial offloads."""
    from rooflight.estimate.config import RunConfig

    n = kw["n_layer"]
    out = [("planned", {}), ("half-offload", {"n_gpu_layers": n // 2 + 1}), ("output-only", {"n_gpu_layers": 1})]
    if kw.get("n_expert"):
        if "n_cpu_moe" in RunConfig.__dataclass_fields__:
            out.append(("experts-in-ram", {"n_cpu_moe": n}))
        else:
            out.append(("experts-in-ram", {"skip": "RunConfig.n_cpu_moe is not in this build of Rooflight "
                                                   "(the MoE issue adds it): experts in RAM not measured"}))
    if name in NO_LAYER_MODELS:
        out.append(("no-layers", {"n_gpu_layers": 0}))
    if dry_run:
        out = out[:2] + out[3:]  # fewer loads on 2 cores; every code path still runs
    return out


def _devices(memory) -> dict:
    return {d.device: {"weights_bytes": d.weights_bytes, "kv_bytes": d.kv_bytes, "compute_bytes": d.compute_bytes,
                       "overhead_bytes": d.overhead_bytes, "buffers_bytes": d.weights_bytes + d.kv_bytes
                       + d.compute_bytes, "total_bytes": d.total_bytes} for d in memory.devices}


def measure_one(name: str, path: str, label: str, fields: dict, hw_plan, hw_run, nvml: NVML,
                dry_run: bool, probe=None) -> dict:
    from rooflight.estimate import Wishes, plan
    from rooflight.gguf import load_model_spec
    from rooflight.runtime.confirm import confirm
    from rooflight.runtime.loader import refresh_free_memory
    from rooflight.runtime.measure import measure
    from rooflight.runtime.stress import reported_memory

    row: dict = {"model": name, "label": label}
    if "skip" in fields:
        row["skipped"] = fields["skip"]
        return row
    spec = load_model_spec(path)
    wishes = Wishes(n_ctx=N_CTX, **fields)
    if not dry_run:
        hw_run = hw_plan = refresh_free_memory(hw_plan)  # free VRAM just before loading
    est = plan(spec, hw_plan, wishes)
    row["plan"] = {"config": est.config.to_dict(), "fit": est.fit, "devices": _devices(est.memory),
                   "decode_tok_s": est.performance.decode_tok_s, "prefill_tok_s": est.performance.prefill_tok_s,
                   "bound": est.performance.bound, "prefill_bound": est.performance.prefill_bound}
    run_est = est if hw_run is hw_plan else plan(spec, hw_run, wishes)  # dry run: loads on this CPU
    if run_est is not est:
        row["run_plan"] = {"config": run_est.config.to_dict(), "devices": _devices(run_est.memory),
                           "decode_tok_s": run_est.performance.decode_tok_s,
                           "prefill_tok_s": run_est.performance.prefill_tok_s}
    if est.fit == "too_large":
        row["skipped"] = "the plan says it does not fit"
        return row
    c = confirm(path, run_est, hw_run)
    row["no_alloc"] = {**c.to_dict(), "read_bytes_during_load": c.read_bytes_during_load}
    free_before = nvml.free()
    seen: dict = {}
    prompt, gen = (DRY_PROMPT, DRY_GEN) if dry_run else (PROMPT, GEN)
    m = measure(path, run_est.config, prompt_tokens=prompt, gen_tokens=gen,
                on_loaded=lambda: seen.setdefault("free_loaded", nvml.free()))
    free_after = nvml.free()
    reported = reported_memory(spec, m.buffers)
    row["llama_buffers"] = reported.to_dict()
    row["measured"] = {"prefill_tok_s": round(m.prefill_tok_s, 2), "decode_tok_s": round(m.decode_tok_s, 2),
                       "load_s": round(m.load_s, 3), "prompt_tokens": prompt, "gen_tokens": gen}
    row["nvml"] = {"free_before": free_before, "free_loaded": seen.get("free_loaded"), "free_after": free_after}
    if free_before and seen.get("free_loaded"):
        used = [b - a for b, a in zip(free_before, seen["free_loaded"], strict=True)]
        gpu_buffers = [reported.devices.get(f"gpu{i}", {}).get("total_bytes", 0) for i in range(len(used))]
        row["nvml"]["used_by_load"] = used
        row["nvml"]["overhead_measured"] = [u - b for u, b in zip(used, gpu_buffers, strict=True)]
    predicted = run_est.performance
    row["ratio"] = {"decode": round(m.decode_tok_s / predicted.decode_tok_s, 3) if predicted.decode_tok_s else None,
                    "prefill": round(m.prefill_tok_s / predicted.prefill_tok_s, 3) if predicted.prefill_tok_s else None}
    if probe is not None and probe.gpus:
        # the same plan priced on the GPU constants step 2's probe measured (estimate/probe_gpu.py)
        from rooflight.estimate import Calibration

        p = plan(spec, hw_run, replace_config(wishes, run_est.config), calibration=Calibration(probe=probe)).performance
        row["probe_plan"] = {"basis": p.basis, "decode_tok_s": p.decode_tok_s, "prefill_tok_s": p.prefill_tok_s}
        row["ratio_probe"] = {"decode": round(m.decode_tok_s / p.decode_tok_s, 3),
                              "prefill": round(m.prefill_tok_s / p.prefill_tok_s, 3)}
    return row


def replace_config(wishes, config):
    """The wishes that plan exactly this config again (its GPU layers, threads)."""
    return dataclasses.replace(wishes, n_gpu_layers=config.n_gpu_layers, n_threads=config.n_threads)


def measure_all(dry_run: bool, folder: Path, budget_s: float) -> dict:
    from rooflight.hardware import detect, profile_from_dict

    t0 = time.perf_counter()
    models = DRY_MODELS if dry_run else MODELS
    paths = write_models(models, folder)
    log(f"models: {len(paths)} written in {time.perf_counter() - t0:.0f} s ({folder})")
    hw_run = detect(measure_bandwidth=not dry_run)
    # the dry run plans for the kit's GPU (from the table) while it loads on this CPU
    hw_plan = hw_run
    if dry_run:
        table_gpu = profile_from_dict({"gpus": [{"name": "NVIDIA H200"}]}, detect_cpu_if_missing=True,
                                      measure_bandwidth=False).gpus
        hw_plan = dataclasses.replace(hw_run, gpus=table_gpu, backend="cuda")
    nvml = NVML()
    from rooflight.store.probes import current_probe

    probe = current_probe(hw_run)  # step 2's, where it was stored
    rows = []
    for name, kw in models.items():
        for label, fields in configs_for(name, kw, dry_run):
            if time.perf_counter() - t0 > budget_s:
                rows.append({"model": name, "label": label, "skipped": f"time budget of {budget_s:.0f} s spent"})
                continue
            try:
                rows.append(measure_one(name, paths[name], label, fields, hw_plan, hw_run, nvml, dry_run, probe))
            except Exception as exc:  # one failed load is a finding, not the end of the run
                rows.append({"model": name, "label": label, "error": f"{type(exc).__name__}: {exc}"})
            log(f"  {name} {label}: {_short(rows[-1])}")
    return {"hardware_planned_for": hw_plan.to_dict(), "rows": rows,
            "seconds": round(time.perf_counter() - t0, 1)}


def _short(row: dict) -> str:
    if "skipped" in row or "error" in row:
        return row.get("skipped") or row["error"]
    m = row["measured"]
    return f"tg {m['decode_tok_s']:.0f} tok/s, pp {m['prefill_tok_s']:.0f} tok/s"


# ---- step 5: the table -----------------------------------------------------------------


def _gb(n) -> str:
    return "-" if n is None else f"{n / GB:.3f}"


def _rate(priced: dict | None, key: str) -> str:
    return "-" if not priced else f"{priced[key]:.0f}"


def probe_gpu_lines(probe: dict) -> list[str]:
    """One line per GPU the probe measured (`rooflight probe --json` as rooflight_cli keeps it:
    {"json": {...}}), each constant beside "-" where it has none; one line saying so where the
    probe measured no GPU. The first GPU run's figures, readable in the run's output tail."""
    devices = [d for d in (probe.get("json") or {}).get("devices", []) if d.get("device", "").startswith("gpu")]
    if not devices:
        return ["probe: no GPU figures" + (f" ({probe['json'].get('refused')})" if probe.get("json", {}).get("refused")
                                           else "")]

    def fig(d: dict, key: str, fmt: str, unit: str = "") -> str:
        return "-" if d.get(key) is None else format(d[key], fmt) + unit

    return [f"probe {d['device']} {d['name']} ({d['backend']}): decode eff {fig(d, 'decode_efficiency', '.3f')}, "
            f"layer {fig(d, 'layer_overhead_us', '.1f', ' us')}, prompt eff F16 "
            f"{fig(d, 'prefill_efficiency_float', '.3f')} Q4_K {fig(d, 'prefill_efficiency_quant', '.3f')}, copy "
            f"{fig(d, 'h2d_gbs', '.1f', ' GB/s')}, MoE block {fig(d, 'moe_layer_overhead_us', '+.1f', ' us')}, MoE "
            f"prompt {fig(d, 'moe_expert_overhead_tokens', '.0f', ' tokens per expert')} "
            f"(spread {fig(d, 'spread', '.0%')})" for d in devices]


def table(rows: list[dict]) -> str:
    head = (f"{'model':<22} {'config':<15} {'ngl':>4} {'GPU plan':>9} {'GPU llama':>9} {'GPU NVML':>9} "
            f"{'ovh MiB':>8} {'RAM plan':>9} {'RAM llama':>9} {'noalloc%':>8} {'tg pred':>8} {'tg meas':>8} "
            f"{'pp pred':>8} {'pp meas':>8} {'tg probe':>8} {'pp probe':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if "plan" not in r or "measured" not in r:
            lines.append(f"{r['model']:<22} {r['label']:<15} {r.get('skipped') or r.get('error', '')}")
            continue
        p = r.get("run_plan") or r["plan"]
        gpu_plan = r["plan"]["devices"].get("gpu0", {})  # the dry run: the H200 plan, loads on the CPU
        got = {d["device"]: d for d in r["llama_buffers"]["devices"]}
        used = (r["nvml"].get("used_by_load") or [None])[0]
        ovh = (r["nvml"].get("overhead_measured") or [None])[0]
        na = r["no_alloc"].get("max_difference_pct")
        lines.append(
            f"{r['model']:<22} {r['label']:<15} {p['config']['n_gpu_layers']:>4} "
            f"{_gb(gpu_plan.get('buffers_bytes')):>9} {_gb(got.get('gpu0', {}).get('total_bytes')):>9} {_gb(used):>9} "
            f"{'-' if ovh is None else round(ovh / MIB):>8} {_gb(p['devices']['cpu']['buffers_bytes']):>9} "
            f"{_gb(got.get('cpu', {}).get('total_bytes')):>9} {'-' if na is None else na:>8} "
            f"{p['decode_tok_s']:>8.0f} {r['measured']['decode_tok_s']:>8.0f} "
            f"{p['prefill_tok_s']:>8.0f} {r['measured']['prefill_tok_s']:>8.0f} "
            f"{_rate(r.get('probe_plan'), 'decode_tok_s'):>8} {_rate(r.get('probe_plan'), 'prefill_tok_s'):>8}")
    lines.append("GPU/RAM plan and llama: weights + KV + compute buffers (GB); GPU NVML: memory the load took "
                 "on GPU 0; ovh: NVML's figure less llama.cpp's GPU buffers (the plan assumes 457 MiB); "
                 "noalloc%: largest per-device gap between the plan and llama.cpp's no-alloc numbers; "
                 "tg/pp probe: the same plan on the GPU constants the probe measured (- where it measured none)")
    return "\n".join(lines)


# ---- the two processes -------------------------------------------------------------------


def child(args) -> int:
    """The measurement, in a fresh Python (the build just installed is the one loaded)."""
    result = measure_all(args.dry_run, Path(args.models), args.budget)
    Path(args.child_out).write_text(json.dumps(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="no GPU: plan for an H200, load on this CPU, tiny models")
    ap.add_argument("--out", help="folder for the JSON result (default: bench/results; a dry run: the temp dir)")
    ap.add_argument("--source", help="llama-cpp-python source tarball to build (default: .gpukit/*.tar.gz)")
    ap.add_argument("--models", help="folder for the generated models (default: .gpukit-state/models; dry run: temp)")
    ap.add_argument("--deadline", type=float, default=480.0,
                    help="seconds for the whole run, build included (default 480: 8 minutes); the "
                         "measurements stop in time and say which were left out")
    ap.add_argument("--budget", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "app"))  # runs from a checkout without an install too
    if args.child_out:
        return child(args)
    t0 = time.perf_counter()
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc: dict = {"kit": "bench/gpu_check.py", "dry_run": args.dry_run, "started": started,
                 "host": platform.node(), "python": sys.version.split()[0], "platform": platform.platform()}
    doc["build"] = ensure_build(args.dry_run, args.source, args.deadline)
    doc["rooflight_hardware"] = rooflight_cli("hardware", "--json")
    probe_args = ("--types", "Q4_0", "--budget", "5") if args.dry_run else ()  # the dry run: one type, short
    doc["rooflight_probe"] = (rooflight_cli("probe", "--json", *probe_args, timeout=240) if has_command("probe")
                              else {"skipped": "this build of Rooflight has no `rooflight probe` command"})
    if "skipped" in doc["rooflight_probe"]:
        log(f"probe: {doc['rooflight_probe']['skipped']}")
    for line in probe_gpu_lines(doc["rooflight_probe"]):
        log(line)
    with tempfile.TemporaryDirectory(prefix="rooflight-gpu-check-") as tmp:
        models = args.models or (tmp if args.dry_run else str(STATE / "models"))
        budget = max(60.0, args.deadline - (time.perf_counter() - t0) - 20)
        child_out = Path(tmp) / "measured.json"
        env = child_env()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child-out", str(child_out), "--models", models,
               "--budget", str(budget)] + (["--dry-run"] if args.dry_run else [])
        r = subprocess.run(cmd, env=env)
        doc["measurements"] = json.loads(child_out.read_text()) if child_out.exists() else {
            "error": f"the measuring process ended with status {r.returncode}"}
    rows = doc["measurements"].get("rows", [])
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    log("")
    log(table(rows))
    # real results are committed (bench/results/); a dry run's are not results
    out = Path(args.out or (tempfile.gettempdir() if args.dry_run else ROOT / "bench" / "results"))
    out.mkdir(parents=True, exist_ok=True)
    gpu = doc["build"].get("gpu", "gpu").replace(" ", "-")
    target = out / f"gpu_check-{'dryrun' if args.dry_run else gpu}-{started[:10]}.json"
    target.write_text(json.dumps(doc, indent=1))
    log(f"\nwrote {target} ({doc['seconds']:.0f} s in all)")
    ok = bool(rows) and all("error" not in r for r in rows) and "error" not in doc["measurements"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
