"""Load a GGUF with llama-cpp-python at exactly the planned RunConfig.

load_engine() refuses a plan that does not fit (unless forced), re-reads free memory just
before loading (other programs use memory too), reports load progress through
llama.cpp's progress callback and can be cancelled from another thread: the callback
returns false, llama.cpp aborts and frees what it had loaded, and LoadCancelledError
says so. The loaded Engine holds the Llama object, the buffers llama.cpp reported (to
check the plan against), the chat format, and the tokenizer helpers the chat loop needs.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import io
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rooflight.errors import OperationFailedError, RooflightError
from rooflight.estimate.perf import PerfEstimate, estimate_performance
from rooflight.hardware.profile import HardwareProfile
from rooflight.runtime import amx, resident
from rooflight.runtime.device_map import plan_load_kwargs
from rooflight.runtime.llama_log import ReportedBuffers, capture_llama_log, parse_buffers
from rooflight.runtime.loader import (
    LoadPlan,
    LoadRefusedError,
    memory_now,
    refresh_free_memory,
    refusal,
)
from rooflight.runtime.templates import ChatFormat, ModelInfo, choose_format
from rooflight.runtime.tensor_overrides import BufferOverrides

if TYPE_CHECKING:
    from rooflight.runtime.vision import VisionContext

ProgressCallback = Callable[[float], "bool | None"]  # fraction 0..1; return False to cancel
MemoryProbe = Callable[[HardwareProfile], HardwareProfile]

_told: set[str] = set()  # notices given once per process (the GPU build hint)
_told_lock = threading.Lock()


class LoadCancelledError(RooflightError):
    """The user cancelled the load; nothing stays loaded."""

    def __init__(self, message: str = "Model load cancelled; nothing was loaded.") -> None:
        super().__init__(message)


def _once(notice: str | None) -> list[str]:
    if not notice:
        return []
    with _told_lock:
        if notice in _told:
            return []
        _told.add(notice)
    return [notice]


@functools.cache
def _llama_class():
    """Llama with llama.cpp's load-progress callback (and tensor placement overrides, for
    MoE experts kept in RAM) set on its model parameters.

    llama-cpp-python builds `model_params` inside __init__ and offers no argument for the
    callback; a property on the subclass catches that assignment and sets the callback on
    the struct before the model is loaded. Per instance: no global patching.
    """
    import llama_cpp

    class ProgressLlama(llama_cpp.Llama):
        _rooflight_progress = None  # set per instance before __init__ runs
        _rooflight_overrides = None  # tensor_overrides.BufferOverrides (experts in RAM), or None

        @property
        def model_params(self):
            return self.__dict__["_rooflight_model_params"]

        @model_params.setter
        def model_params(self, params) -> None:
            amx.safe_model_params(params)
            if self._rooflight_progress is not None:
                params.progress_callback = self._rooflight_progress
                params.progress_callback_user_data = None
            if self._rooflight_overrides is not None:
                self._rooflight_overrides.apply(params)
            self.__dict__["_rooflight_model_params"] = params

    return ProgressLlama


def expert_overrides(config) -> BufferOverrides | None:
    """The tensor overrides that keep the experts of config.n_cpu_moe layers in RAM, or None."""
    return BufferOverrides.for_experts(getattr(config, "n_cpu_moe", 0) or 0)


def release_overrides(llm) -> None:
    """After the load: llama.cpp has placed every tensor, the pattern list can go."""
    overrides, llm._rooflight_overrides = llm._rooflight_overrides, None
    if overrides is not None:
        overrides.release(llm.__dict__.get("_rooflight_model_params"))


def new_llama(model_path: str, config, **kwargs):
    """Llama(model_path, **config.runtime_kwargs(), **kwargs) with config's experts in RAM."""
    cls = _llama_class()
    llm = cls.__new__(cls)
    llm._rooflight_overrides = expert_overrides(config)
    try:
        llm.__init__(model_path=model_path, **config.runtime_kwargs(), **kwargs)
    finally:
        release_overrides(llm)
    return llm


def _error_lines(log_text: str) -> str:
    """The last lines of llama.cpp's log that say what went wrong."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    bad = [ln for ln in lines if any(w in ln.lower() for w in ("error", "failed", "unable", "cannot", "invalid"))]
    return "; ".join((bad or lines)[-2:])[:300]


class Engine:
    """A model loaded with its planned configuration. Close it (or use `with`) to free it."""

    def __init__(self, llm, lp: LoadPlan, buffers: ReportedBuffers, load_s: float, notices: list[str],
                 chat_format: str = "auto") -> None:
        import llama_cpp

        self.llm = llm
        self.plan = lp
        self.buffers = buffers
        self.load_s = load_s
        self.notices = notices
        self.lock = threading.Lock()  # one generation at a time
        self._lc = llama_cpp
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._pieces: dict[int, bytes] = {}
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self.bos_text = self.special_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
        self.n_swa = int(llama_cpp.llama_model_n_swa(llm.model))
        self.recurrent = bool(llama_cpp.llama_model_is_recurrent(llm.model)
                              or llama_cpp.llama_model_is_hybrid(llm.model))
        self.format: ChatFormat = choose_format(_model_info(llm, self, lp.path), chat_format)
        self.vision: VisionContext | None = None  # when the plan pairs a projector (runtime/vision.py)
        self._resident = resident.register(self, buffers)  # planning a second model counts this one's RAM

    # ---- facts ------------------------------------------------------------------------

    @property
    def spec(self):
        return self.plan.spec

    @property
    def config(self):
        return self.plan.config

    @property
    def n_ctx(self) -> int:
        return int(self.llm.n_ctx())

    @property
    def tokens_evaluated(self) -> int | None:
        """Tokens the model's context holds now (the prompt and the reply so far); None
        once closed. The live rate (runtime/live_rate.py) and Stop's count read this."""
        llm = self.llm
        return None if llm is None else int(llm.n_tokens)

    @property
    def metadata(self) -> dict[str, str]:
        return dict(self.llm.metadata)

    @property
    def model_name(self) -> str:
        return self.spec.name

    # ---- tokens -----------------------------------------------------------------------

    def tokenize_prompt(self, text: str) -> list[int]:
        """Prompt text -> tokens, special tokens parsed; BOS added unless the text has it."""
        add_bos = self.add_bos and not (self.bos_text and text.startswith(self.bos_text))
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _to_piece(self, token: int, special: bool) -> bytes:
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._lc.llama_token_to_piece(self._vocab, token, buf, size, 0, special)
            if n >= 0:
                return buf.raw[:n]
            size = -n  # buffer too small: llama.cpp says how much it needs

    def piece(self, token: int) -> bytes:
        """The bytes a token adds to visible text (control tokens add none). Cached."""
        got = self._pieces.get(token)
        if got is None:
            got = self._pieces[token] = self._to_piece(token, False)
        return got

    def special_text(self, token: int) -> str:
        return self._to_piece(token, True).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        return bool(self._lc.llama_vocab_is_eog(self._vocab, token))

    def is_control(self, token: int) -> bool:
        return bool(self._lc.llama_vocab_is_control(self._vocab, token))

    def has_special(self, text: str) -> bool:
        toks = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        return len(toks) == 1 and self.special_text(toks[0]) == text

    def warm_up(self) -> None:
        """One throw-away decode, as llama.cpp's own tools do after loading: it pages the
        mmapped weights in and sets up the compute graph, so the first reply's time to
        first token (and its measurement) is not the load's."""
        llm = self.llm
        first = [t for t in (llm.token_bos(), llm.token_eos()) if t >= 0][:1] or [0]
        llm.eval(first)
        llm.reset()
        self._lc.llama_memory_clear(self._lc.llama_get_memory(llm.ctx), True)

    # ---- prediction -------------------------------------------------------------------

    def predict(self, prompt_tokens: int, gen_tokens: int, prompt_start: int = 0) -> tuple[PerfEstimate, PerfEstimate]:
        """(calibrated, uncalibrated) estimate for this context: what the user is shown, and
        what a measurement is compared with when it is stored for calibration. prompt_start:
        the positions already cached before the prompt (a later turn of a chat)."""
        lp = self.plan
        args = (lp.spec, lp.hardware, lp.config, lp.estimate.memory)
        kw: dict[str, Any] = dict(prompt_tokens=max(1, prompt_tokens), gen_tokens=max(1, gen_tokens),
                                  prompt_start=max(0, prompt_start))
        # "uncalibrated" keeps this machine's probe: a measurement corrects the probe's kernels
        raw = estimate_performance(*args, **kw, calibration=lp.calibration.uncalibrated())
        cal = estimate_performance(*args, **kw, calibration=lp.calibration) if lp.calibration.active else raw
        return cal, raw

    # ---- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """Free the model; waits for a running generation (set its stop event first)."""
        with self.lock:
            llm, self.llm = self.llm, None
        if llm is not None:
            llm.close()
            resident.release(getattr(self, "_resident", 0))

    @property
    def closed(self) -> bool:
        return self.llm is None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _model_info(llm, engine_like: Engine, path: Path) -> ModelInfo:
    meta = llm.metadata
    names = tuple(meta.get(k, "") for k in ("general.name", "general.finetune", "general.basename")) + (path.stem,)
    eos = llm.token_eos()
    return ModelInfo(
        architecture=meta.get("general.architecture", ""),
        template=meta.get("tokenizer.chat_template"),
        bos_token=engine_like.bos_text,
        eos_token=engine_like.special_text(eos) if eos >= 0 else "",
        names=names,
        has_special=engine_like.has_special,
    )


def check_memory_now(lp: LoadPlan, probe: MemoryProbe | None = None, *, force_hint: str) -> None:
    """Re-read free memory; refuse a plan that fit when made but does not fit now."""
    if probe is None and not lp.live_hardware:
        return  # a hand-written profile: nothing to re-read
    now = (probe or refresh_free_memory)(lp.hardware)
    mem = memory_now(lp, now)
    if mem.fit == "too_large" and lp.fits:
        raise LoadRefusedError(refusal(lp, mem, since_planning=True, force_hint=force_hint))


def load_engine(
    lp: LoadPlan,
    *,
    force: bool = False,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    chat_format: str = "auto",
    seed: int = 0,
    memory_probe: MemoryProbe | None = None,
    force_hint: str = "force the load anyway",
    warmup: bool = True,
) -> Engine:
    """Load the model of `lp` with exactly lp.config.

    Raises LoadRefusedError when the plan (or the memory free right now) does not fit and
    force is False, LoadCancelledError when cancelled (cancel set, or on_progress returned
    False), OperationFailedError when llama.cpp cannot load the file.
    """
    if not lp.fits and not force:
        raise LoadRefusedError(refusal(lp, force_hint=force_hint))
    notices = _once(lp.cpu_only_build)
    if not force:
        check_memory_now(lp, memory_probe, force_hint=force_hint)
    if lp.hardware.remotes:  # layers planned on RPC servers: register them before the load
        from rooflight.runtime import rpc

        rpc.connect([r.endpoint for r in lp.hardware.remotes])

    import llama_cpp

    cancelled = threading.Event()
    callback_error: list[BaseException] = []

    def progress(fraction: float, _user_data) -> bool:
        # runs on this thread, inside llama.cpp; an exception here must not escape into C
        try:
            if cancel is not None and cancel.is_set():
                cancelled.set()
                return False
            if on_progress is not None and on_progress(float(fraction)) is False:
                cancelled.set()
                return False
            return True
        except BaseException as exc:  # noqa: BLE001 - re-raised after llama.cpp returns
            callback_error.append(exc)
            return False

    if cancel is not None and cancel.is_set():
        raise LoadCancelledError()  # before the Llama exists: one never initialised breaks in __del__
    c_progress = llama_cpp.llama_progress_callback(progress)
    cls = _llama_class()
    llm = cls.__new__(cls)
    llm._rooflight_progress = c_progress  # the callback must outlive the load
    overrides = expert_overrides(lp.config)
    llm._rooflight_overrides = overrides  # the patterns must outlive the load, too
    t0 = time.perf_counter()
    # verbose=True so llama.cpp's log carries the buffer sizes (captured, not printed);
    # llama-cpp-python's own prints (system info, metadata) go to a buffer, not the terminal
    with capture_llama_log() as cap, contextlib.redirect_stderr(io.StringIO()):
        try:
            llm.__init__(model_path=str(lp.path), verbose=True, seed=seed,
                         **plan_load_kwargs(lp.config, lp.hardware))
        except (ValueError, RuntimeError, OSError) as exc:
            if callback_error:
                raise callback_error[0] from exc
            if cancelled.is_set():
                raise LoadCancelledError() from None
            detail = _error_lines(cap.text) or str(exc)
            raise OperationFailedError(
                f"llama.cpp could not load {lp.path.name} ({detail}); check that the file is a complete GGUF "
                "model this llama-cpp-python version supports."
            ) from exc
        finally:
            release_overrides(llm)
    load_s = time.perf_counter() - t0
    llm.verbose = False  # later calls (tokenize, eval) must not print
    llm._rooflight_progress = None
    try:
        if cancel is not None and cancel.is_set():  # cancelled after the last progress call
            raise LoadCancelledError()
        buffers = parse_buffers(cap.text)
        engine = Engine(llm, lp, buffers, load_s, notices, chat_format)
        if lp.spec.projector is not None:  # a vision model: its projector beside it, as planned
            from rooflight.estimate.vision import projector_device
            from rooflight.runtime.vision import VisionContext

            try:
                engine.vision = VisionContext(llm, lp.spec.projector.source,
                                              use_gpu=projector_device(lp.hardware, lp.config) != "cpu")
            except OperationFailedError as exc:  # the model still chats; images say why not
                engine.notices.append(f"{exc} Text chat works; images cannot be sent.")
        if warmup:
            engine.warm_up()
            engine.load_s = time.perf_counter() - t0
        if engine.format.notice:
            engine.notices.append(engine.format.notice)
            engine.format.notice = None
        if on_progress is not None:
            on_progress(1.0)
        return engine
    except BaseException:
        llm.close()
        raise


def with_format(engine: Engine, chat_format: str) -> Engine:
    """Switch the chat format of a loaded engine (auto, template, or a built-in name)."""
    engine.format = choose_format(_model_info(engine.llm, engine, engine.plan.path), chat_format)
    return engine


__all__ = ["Engine", "LoadCancelledError", "LoadRefusedError", "load_engine", "with_format"]
