"""The benchmark workflow (`rooflight bench`, and any GUI that wants one): measure a local
model like llama-bench beside the estimate, and store it for calibration.

Prefill (pp) and decode (tg) are measured at exactly the planned configuration
(runtime/measure.py), `repetitions` times, and the medians are stored with the
uncalibrated prediction; the ratio is what calibrates later estimates on this machine
(store/calibration.py). With `threads_sweep` the thread count is measured first
(runtime/threads.py), the fastest is kept for plans of models of this size, and the
benchmark runs at it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rooflight.errors import BadInputError, RooflightError
from rooflight.hardware.profile import plural
from rooflight.runtime.probe_defaults import DEFAULT_BUSY_THRESHOLD, disturbed

# The sweep runs every candidate twice: shorter runs than the benchmark keep it to
# seconds for small models and about a minute for 7B ones on a laptop.
SWEEP_PROMPT_TOKENS = 128
SWEEP_GEN_TOKENS = 64
# One run can land on a moment when something else has the CPU; the median of three
# keeps such a run out of the calibration (llama-bench repeats 5 times for the same reason).
REPETITIONS = 3


@dataclass(frozen=True)
class BenchResult:
    estimate: Any  # estimate.Estimate, uncalibrated, at the configuration measured
    runs: list  # runtime.measure results, one per repetition
    median: Any  # their median rates (runtime.measure result)
    sweep: Any  # runtime.threads.ThreadSweep, or None
    used_for_calibration: bool  # store/calibration.Measurement.usable
    others_cpu: float = 0.0  # the most of the CPU other programs used during a run kept (quiet_runs)

    @property
    def ratio(self) -> dict[str, float]:
        p, got = self.estimate.performance, self.median
        return {"decode": round(got.decode_tok_s / p.decode_tok_s, 3),
                "prefill": round(got.prefill_tok_s / p.prefill_tok_s, 3)}

    def to_dict(self) -> dict:
        """`rooflight bench --json` (CONTRACT.md)."""
        est, got, runs, sweep = self.estimate, self.median, self.runs, self.sweep
        p = est.performance
        return {
            "model": est.to_dict()["model"],
            "config": est.config.to_dict(),
            "predicted": {"decode_tok_s": round(p.decode_tok_s, 3), "prefill_tok_s": round(p.prefill_tok_s, 3),
                          "memory_bytes": est.memory.total_bytes - sum(d.overhead_bytes for d in est.memory.devices)},
            "measured": {"decode_tok_s": round(got.decode_tok_s, 3), "prefill_tok_s": round(got.prefill_tok_s, 3),
                         "time_to_first_token_s": round(got.time_to_first_token_s, 4),
                         "load_s": round(got.load_s, 3),
                         "memory_bytes": got.buffers.model_bytes + got.buffers.kv_bytes
                         + got.buffers.compute_bytes + got.buffers.output_bytes,
                         "runs": len(runs),
                         "decode_tok_s_runs": [round(r.decode_tok_s, 3) for r in runs],
                         "prefill_tok_s_runs": [round(r.prefill_tok_s, 3) for r in runs]},
            "ratio": self.ratio,
            "stored": True,
            # a run far off the roofline is kept but not used (store/calibration.py)
            "used_for_calibration": self.used_for_calibration,
            # share of all cores other programs used during the runs kept (the most of any);
            # past busy_threshold the measurement is stored but not used
            "others_cpu_share": round(self.others_cpu, 3),
            "busy_threshold": DEFAULT_BUSY_THRESHOLD,
            "threads_sweep": sweep.to_dict() if sweep else None,
            # a probe-based prediction: how its kernel time split over the probe's kernels,
            # which the measurement corrects by those shares (estimate/kernel_calibration.py)
            "kernel_shares": p.kernels.to_dict() if p.kernels is not None else None,
        }


def quiet_runs(run: Callable[[], Any], repetitions: int, say: Callable[[str], None]) -> tuple[list, float]:
    """`repetitions` runs taken while nothing else used the CPU (runtime/busy.py), and the
    most of the CPU other programs used during any of them.

    A run disturbed past DEFAULT_BUSY_THRESHOLD is taken again, up to `repetitions` extra
    runs in all; if the machine stays busy, the quietest runs are kept and the share says
    so (the measurement is then stored but not used for calibration)."""
    from rooflight.runtime.busy import Watch

    taken: list[tuple[float, Any]] = []
    for _ in range(2 * repetitions):
        with Watch() as w:
            result = run()
        assert w.window is not None
        taken.append((w.window.others_share, result))
        if disturbed(w.window.others_share):
            say(f"  other programs used {w.window.others_share:.0%} of the CPU during that run; measuring again")
        if sum(not disturbed(share) for share, _ in taken) == repetitions:
            break
    quietest = sorted(sorted(range(len(taken)), key=lambda i: taken[i][0])[:repetitions])  # in the order taken
    return [taken[i][1] for i in quietest], max(taken[i][0] for i in quietest)


def median_run(runs):
    """The runs' median rates (each independently), with the first run's load and buffers."""
    from statistics import median

    return replace(runs[0], decode_tok_s=median(r.decode_tok_s for r in runs),
                   prefill_tok_s=median(r.prefill_tok_s for r in runs),
                   time_to_first_token_s=median(r.time_to_first_token_s for r in runs))


def run_bench(model_path: str, wishes, *, profile=None, repetitions: int = REPETITIONS,
              threads_sweep: bool = False, on_status: Callable[[str], None] | None = None) -> BenchResult:
    """Plan `model_path` on this machine with `wishes`, measure it, store the measurement
    for calibration. `profile`: this machine's (detected after the file is read when not
    given); `on_status` hears a line per step (the CLI prints them on stderr)."""
    from rooflight.estimate import plan
    from rooflight.gguf import load_model_spec
    from rooflight.runtime.measure import measure
    from rooflight.runtime.threads import store_sweep, sweep_threads
    from rooflight.store.calibration import CalibrationStore, Measurement, machine_key

    say = on_status or (lambda _text: None)
    spec = load_model_spec(model_path)
    if profile is None:
        from rooflight.hardware import detect

        profile = detect()
    if wishes.n_ctx is None:
        wishes = replace(wishes, n_ctx=max(2048, wishes.prompt_tokens + wishes.gen_tokens))
    store = CalibrationStore()
    try:
        machine = machine_key(profile)
        if wishes.n_threads is None:
            # measure at the thread count later plans will use, so the ratio applies to them
            preferred = store.calibration(machine, profile.backend).preferred_threads(spec.file_bytes)
            wishes = replace(wishes, n_threads=preferred)
        # uncalibrated: the ratio is what calibration learns; on this machine's probe where
        # one is current, so the ratio corrects the probe's kernels (store/calibration.py)
        from rooflight.estimate import Calibration
        from rooflight.store.probes import current_probe

        base = Calibration(probe=current_probe(profile))
        est = plan(spec, profile, wishes, calibration=base)
        if est.fit == "too_large":
            raise RooflightError("The model does not fit this machine at this context; nothing was run.")
        if wishes.prompt_tokens + wishes.gen_tokens > est.config.n_ctx:  # before the sweep and the status line
            raise BadInputError(f"A {wishes.prompt_tokens}+{wishes.gen_tokens}-token benchmark does not fit a "
                                f"{est.config.n_ctx}-token context; give --ctx {wishes.prompt_tokens + wishes.gen_tokens} "
                                "or more, or fewer --prompt-tokens / --gen-tokens.")
        sweep = None
        if threads_sweep:
            say(f"sweeping thread counts for {spec.name}...")
            sweep = sweep_threads(
                model_path, est.config,
                prompt_tokens=min(wishes.prompt_tokens, SWEEP_PROMPT_TOKENS),
                gen_tokens=min(wishes.gen_tokens, SWEEP_GEN_TOKENS),
                progress=lambda n, d, p: say(f"  {n:3d} threads: decode {d:9.1f} tok/s, prefill {p:9.1f} tok/s"),
            )
            store_sweep(profile, spec.name, spec.file_bytes, sweep, store)
            est = plan(spec, profile, replace(wishes, n_threads=sweep.best), calibration=base)
        prompt, gen = wishes.prompt_tokens, wishes.gen_tokens
        say(f"measuring {spec.name} ({prompt}-token prompt, {gen} tokens, "
            f"{plural(est.config.n_threads, 'thread')}, {repetitions} runs)...")
        runs, others = quiet_runs(lambda: measure(model_path, est.config, prompt_tokens=prompt, gen_tokens=gen),
                                  repetitions, say)
        got = median_run(runs)
        measurement = Measurement(
            machine=machine, backend=profile.backend, model=spec.name, quant=spec.file_type,
            n_ctx=est.config.n_ctx, n_gpu_layers=est.config.n_gpu_layers,
            prompt_tokens=prompt, gen_tokens=gen,
            predicted_decode=est.performance.decode_tok_s, measured_decode=got.decode_tok_s,
            predicted_prefill=est.performance.prefill_tok_s, measured_prefill=got.prefill_tok_s,
            n_threads=est.config.n_threads, model_bytes=spec.file_bytes, basis=est.performance.basis,
            kernels=est.performance.kernels, others_cpu=others,
        )
        store.add(measurement)
    finally:
        store.close()
    return BenchResult(est, runs, got, sweep, measurement.usable, others)
