"""Measure a model on this machine with llama.cpp, at exactly a planned RunConfig.

Prefill: evaluate a prompt of `prompt_tokens` tokens in one call (llama-cpp-python splits
it into n_batch / n_ubatch chunks as planned). Decode: generate `gen_tokens` tokens one
at a time with the default sampler chain, as a chat does, ignoring end-of-text so the
count is exact. Times are wall-clock; llama.cpp's reported buffers are captured too.
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass
from pathlib import Path

from rooflight.errors import OperationFailedError
from rooflight.estimate.config import RunConfig
from rooflight.runtime.llama_log import ReportedBuffers, capture_llama_log, parse_buffers


@dataclass(frozen=True)
class Measured:
    prefill_tok_s: float
    decode_tok_s: float
    time_to_first_token_s: float
    load_s: float
    buffers: ReportedBuffers


def _prompt(llm, n_tokens: int) -> list[int]:
    """A deterministic prompt of ordinary (non-control) tokens."""
    text = (
        "The quick brown fox jumps over the lazy dog while seven wizards quietly hex "
        "the jovial bookkeeper near a misty harbour at dawn. "
    )
    tokens = llm.tokenize(text.encode(), add_bos=False, special=False)
    if not tokens:
        raise OperationFailedError("The model's tokenizer produced no tokens for a plain English prompt.")
    out = [llm.token_bos()] if llm.token_bos() >= 0 else []
    while len(out) < n_tokens:
        out.extend(tokens)
    return out[:n_tokens]


def measure(
    model_path: str | Path,
    config: RunConfig,
    *,
    prompt_tokens: int = 512,
    gen_tokens: int = 128,
    seed: int = 0,
    on_loaded=None,
) -> Measured:
    """on_loaded(): called once the model is loaded, before the prompt (bench/gpu_check.py
    reads the GPU's free memory there)."""
    from rooflight.runtime.engine import new_llama  # lazy: it imports llama_cpp

    if prompt_tokens + gen_tokens > config.n_ctx:
        raise OperationFailedError(
            f"A {prompt_tokens}+{gen_tokens}-token benchmark does not fit a {config.n_ctx}-token context."
        )
    t0 = time.perf_counter()
    # verbose=True makes llama.cpp log its buffer sizes (captured); the Python-side prints it
    # also turns on (metadata, CPU features, chat format) are noise for our callers
    with capture_llama_log() as cap, contextlib.redirect_stderr(io.StringIO()):
        try:
            llm = new_llama(str(model_path), config, verbose=True, seed=seed)
        except (ValueError, RuntimeError) as exc:
            raise OperationFailedError(f"llama.cpp could not load {Path(model_path).name}: {exc}") from exc
    load_s = time.perf_counter() - t0
    try:
        if on_loaded is not None:
            on_loaded()
        prompt = _prompt(llm, prompt_tokens)
        t0 = time.perf_counter()
        llm.eval(prompt)
        prefill_s = time.perf_counter() - t0
        first = llm.sample(temp=0.8, top_k=40, top_p=0.95, min_p=0.05)
        t_first = time.perf_counter() - t0
        token = first
        t0 = time.perf_counter()
        for _ in range(gen_tokens):
            llm.eval([token])
            token = llm.sample(temp=0.8, top_k=40, top_p=0.95, min_p=0.05)
        decode_s = time.perf_counter() - t0
    finally:
        llm.close()
    return Measured(
        prefill_tok_s=prompt_tokens / prefill_s,
        decode_tok_s=gen_tokens / decode_s,
        time_to_first_token_s=t_first,
        load_s=load_s,
        buffers=parse_buffers(cap.text),
    )
