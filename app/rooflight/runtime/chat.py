"""A chat over a loaded Engine: streaming replies, stop, regenerate, edit, measurements.

Generation is llama-cpp-python's eval() and llama.cpp's sampler chain driven directly,
token by token, so that
- prefill (evaluating the prompt) and decode (one token at a time) are timed apart;
- a stop request is seen before every decode step: the reply stops within one token;
- the KV cache keeps the longest prefix the new prompt shares with what it already holds
  (the previous turns), so only the new text is evaluated. Sliding-window caches only
  keep the last window of positions: where truncating back would need positions already
  overwritten, the prompt is evaluated again from the start (llama.cpp server's rule).

Context: the prompt plus room for the reply must fit n_ctx. When the conversation
outgrows it the oldest turns are left out of what the model sees (the system prompt
stays), and a single message longer than the context is shortened in the middle; each
reply says so in its notices and stats. Nothing here raises on overflow.

Every reply carries its stats (time to first token, prefill and decode tok/s, token
counts, why it stopped) beside the estimator's prediction for the same context, and is
stored for calibration. With a ChatStore the reply is written as it streams.
"""

from __future__ import annotations

import codecs
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from rooflight.errors import BadInputError, OperationFailedError
from rooflight.runtime.busy import Watch
from rooflight.runtime.engine import Engine
from rooflight.runtime.sampling import SamplerChain, Sampling, default_sampling

log = logging.getLogger(__name__)

TokenCallback = Callable[[str], None]
STORE_FLUSH_S = 0.25  # how often streamed text is written to the chat store
MIN_CALIBRATION_TOKENS = 16  # shorter replies / prompts time too little to calibrate with
TRUNCATION_MARK = "\n[...]\n"


@dataclass
class ChatMessage:
    role: str  # user | assistant
    content: str
    stats: dict[str, Any] | None = None
    id: int | None = None  # row id in the chat store
    complete: bool = True
    images: list = field(default_factory=list)  # runtime/images.ImageData, in order


@dataclass(frozen=True)
class ReplyStats:
    prompt_tokens: int  # tokens in the prompt the model saw
    cached_tokens: int  # of which reused from the KV cache
    prefill_tokens: int  # of which evaluated now
    generated_tokens: int
    time_to_first_token_s: float
    prefill_s: float
    prefill_tok_s: float | None
    decode_s: float
    decode_tok_s: float | None  # None below two generated tokens
    stop_reason: str  # eos | stop_string | max_tokens | context_full | stopped
    dropped_messages: int  # oldest messages left out to fit the context
    truncated: bool  # the newest message was shortened to fit
    predicted: dict[str, float] = field(default_factory=dict)  # for the same context
    seed: int | None = None
    image_tokens: int = 0  # of prompt_tokens, the ones images became (through the projector)
    image_s: float = 0.0  # of the prefill, seconds spent encoding and decoding images

    @property
    def stopped(self) -> bool:
        return self.stop_reason == "stopped"

    def to_dict(self) -> dict[str, Any]:
        r = lambda v, n=3: None if v is None else round(v, n)  # noqa: E731
        return {
            "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
            "prefill_tokens": self.prefill_tokens, "generated_tokens": self.generated_tokens,
            "time_to_first_token_s": r(self.time_to_first_token_s, 4), "prefill_s": r(self.prefill_s, 4),
            "prefill_tok_s": r(self.prefill_tok_s), "decode_s": r(self.decode_s, 4),
            "decode_tok_s": r(self.decode_tok_s), "stop_reason": self.stop_reason, "stopped": self.stopped,
            "dropped_messages": self.dropped_messages, "truncated": self.truncated,
            "predicted": {k: r(v, 4) for k, v in self.predicted.items()}, "seed": self.seed,
            **({"image_tokens": self.image_tokens, "image_s": r(self.image_s, 4)} if self.image_tokens else {}),
        }


@dataclass(frozen=True)
class Reply:
    text: str
    stats: ReplyStats
    notices: tuple[str, ...] = ()
    message_id: int | None = None


# ---- text streaming with stop strings -------------------------------------------------


class _TextStream:
    """Decodes token bytes, finds stop strings, and releases only text that is final.

    Text that could be the start of a stop string, and trailing whitespace, is held back
    until the next token decides it; leading whitespace of a reply is dropped.
    """

    def __init__(self, stops: tuple[str, ...], emit: Callable[[str], None]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.longest = max((len(s) for s in self.stops), default=0)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.start = 0  # leading whitespace skipped
        self.emitted = 0
        self.emit = emit
        self.stopped = False
        self.started = False

    def feed(self, data: bytes, final: bool = False) -> bool:
        """Add token bytes; True when a stop string has been reached."""
        new = self.decoder.decode(data, final)
        if not new:
            return False
        before = len(self.text)
        self.text += new
        if not self.started:  # skip the reply's leading whitespace
            self.start = self.emitted = len(self.text) - len(self.text.lstrip())
            self.started = self.start < len(self.text)
        if self.stops:
            search_from = max(0, before - self.longest + 1)  # a stop may begin in skipped whitespace
            hits = [i for i in (self.text.find(s, search_from) for s in self.stops) if i >= 0]
            if hits:
                self.text = self.text[: min(hits)]
                self.stopped = True
                self._release(len(self.text.rstrip()))
                return True
        self._release(self._safe_end())
        return False

    def _safe_end(self) -> int:
        end = len(self.text)
        for k in range(min(self.longest - 1, end), 0, -1):
            tail = self.text[end - k:]
            if any(s.startswith(tail) for s in self.stops):
                end -= k
                break
        return min(end, len(self.text[:end].rstrip()))

    def _release(self, end: int) -> None:
        if end > self.emitted:
            chunk = self.text[self.emitted:end]
            self.emitted = end
            self.emit(chunk)

    def finish(self) -> str:
        if not self.stopped:
            self.feed(b"", final=True)
        reply = self.text[self.start:].rstrip()
        self._release(self.start + len(reply))
        return reply


class _StoreWriter:
    """Streams a reply into the chat store in batches (a crash loses at most ~0.25 s)."""

    def __init__(self, store, message_id: int | None) -> None:
        self.store, self.message_id = store, message_id
        self.pending: list[str] = []
        self.last = time.monotonic()

    def add(self, text: str) -> None:
        if self.message_id is None:
            return
        self.pending.append(text)
        if time.monotonic() - self.last >= STORE_FLUSH_S:
            self.flush()

    def flush(self) -> None:
        if self.message_id is not None and self.pending:
            self.store.append_to_message(self.message_id, "".join(self.pending))
            self.pending.clear()
        self.last = time.monotonic()


# ---- the session --------------------------------------------------------------------


class ChatSession:
    """One conversation with a loaded engine. Not thread-safe: call from one worker thread
    (stop it from any thread through the stop event)."""

    def __init__(self, engine: Engine, *, system_prompt: str = "", sampling: Sampling | None = None,
                 store=None, chat_id: int | None = None, title: str | None = None,
                 record_calibration: bool = True) -> None:
        self.engine = engine
        self.system_prompt = system_prompt
        self.sampling = sampling or default_sampling(
            engine.spec.architecture, engine.metadata, completion=engine.format.is_completion)
        self.messages: list[ChatMessage] = []
        self.store = store
        self.chat_id = chat_id
        self.title = title
        self.record_calibration = record_calibration
        self._first_kept = 0  # index of the first message the model still sees
        self._pending_notices: list[str] = list(engine.notices)
        if store is not None and chat_id is not None:
            self._load_from_store()

    # ---- conversation editing -------------------------------------------------------

    def _load_from_store(self) -> None:
        chat = self.store.get_chat(self.chat_id)
        self.system_prompt = chat.system_prompt
        self.title = chat.title
        if chat.settings:
            self.sampling = Sampling.from_dict(chat.settings, self.sampling)
        from rooflight.runtime.chat_images import stored_images

        self.messages = [ChatMessage(m.role, m.content, m.stats, m.id, m.complete,
                                     stored_images(self.store, m))
                         for m in self.store.messages(self.chat_id) if m.role in ("user", "assistant")]

    def _ensure_chat(self, first_text: str) -> None:
        if self.store is None or self.chat_id is not None:
            return
        title = self.title or (first_text.strip().splitlines() or ["New chat"])[0][:60]
        self.chat_id = self.store.create_chat(title, str(self.engine.plan.path), self.system_prompt,
                                              self.sampling.to_dict())

    def set_system_prompt(self, text: str) -> None:
        self.system_prompt = text
        if self.store is not None and self.chat_id is not None:
            self.store.set_system_prompt(self.chat_id, text)

    def set_sampling(self, **changes: Any) -> Sampling:
        self.sampling = replace(self.sampling, **changes)
        if self.store is not None and self.chat_id is not None:
            self.store.set_settings(self.chat_id, self.sampling.to_dict())
        return self.sampling

    def reset(self) -> None:
        """Start over with an empty conversation (the system prompt stays). With a store,
        the next message starts a new stored chat; the old one is kept."""
        self.messages = []
        self._first_kept = 0
        if self.store is not None:
            self.chat_id = None
            self.title = None

    def _truncate_after(self, index: int) -> None:
        """Drop messages after `index` (kept), in memory and in the store."""
        keep = self.messages[index]
        del self.messages[index + 1:]
        self._first_kept = min(self._first_kept, index)
        if self.store is not None and self.chat_id is not None and keep.id is not None:
            self.store.delete_messages_after(self.chat_id, keep.id)

    def _add(self, role: str, content: str) -> ChatMessage:
        msg = ChatMessage(role, content)
        if self.store is not None:
            self._ensure_chat(content)
            msg.id = self.store.add_message(self.chat_id, role, content)
        self.messages.append(msg)
        return msg

    # ---- public operations -----------------------------------------------------------

    def send(self, text: str, *, on_token: TokenCallback | None = None,
             stop_event: threading.Event | None = None, images: list | tuple = ()) -> Reply:
        """Add a user message (with images: runtime/images.ImageData) and generate the reply."""
        if not text.strip():
            raise BadInputError("The message is empty; type something to send.")
        if self.messages and self.messages[-1].role == "user":
            raise BadInputError("The last message has no reply yet; regenerate or edit it instead.")
        if images:
            from rooflight.runtime.chat_images import check_can_see

            check_can_see(self.engine)
        msg = self._add("user", text)
        if images:
            from rooflight.runtime.chat_images import attach

            attach(self, msg, list(images))
        return self.generate(on_token=on_token, stop_event=stop_event)

    def regenerate(self, *, on_token: TokenCallback | None = None,
                   stop_event: threading.Event | None = None) -> Reply:
        """Drop the last reply and generate it again (a new seed unless one is set)."""
        last_user = self.last_user_index()
        self._truncate_after(last_user)
        return self.generate(on_token=on_token, stop_event=stop_event)

    def edit_and_resend(self, index: int, text: str, *, on_token: TokenCallback | None = None,
                        stop_event: threading.Event | None = None) -> Reply:
        """Replace the user message at `index`, drop everything after it, reply again."""
        if not 0 <= index < len(self.messages) or self.messages[index].role != "user":
            raise BadInputError(f"Message {index} is not a user message of this chat.")
        if not text.strip():
            raise BadInputError("The message is empty; type something to send.")
        msg = self.messages[index]
        msg.content = text
        if self.store is not None and msg.id is not None:
            self.store.update_message(msg.id, text)
        self._truncate_after(index)
        return self.generate(on_token=on_token, stop_event=stop_event)

    def last_user_index(self) -> int:
        """Index of the newest user message (what regenerate replies to again)."""
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].role == "user":
                return i
        raise BadInputError("There is no message to reply to yet.")

    # ---- context window --------------------------------------------------------------

    def _conversation(self, start: int, last_override: str | None = None) -> list[dict[str, str]]:
        msgs = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        marker = self.engine.vision.marker if self.engine.vision is not None else None
        turns = [{"role": m.role, "content": _with_markers(m, m.content, marker)} for m in self.messages[start:]]
        if last_override is not None:
            turns[-1] = {"role": turns[-1]["role"],
                         "content": _with_markers(self.messages[-1], last_override, marker)}
        return msgs + turns

    def _prompt_tokens(self, start: int, last_override: str | None = None) -> list[int]:
        text = self.engine.format.render(self._conversation(start, last_override))
        return self.engine.tokenize_prompt(text)

    def _fit_window(self) -> tuple[list[int], int, bool, list[str]]:
        """Prompt tokens that fit the context with room for the reply.

        Returns (tokens, dropped message count, newest message truncated, notices).
        """
        n_ctx = self.engine.n_ctx
        reserve = min(self.sampling.max_tokens, n_ctx // 2)
        budget = n_ctx - reserve
        start = min(self._first_kept, self.last_user_index())
        while self.messages[start].role != "user":
            start += 1
        tokens = self._prompt_tokens(start)
        while len(tokens) > budget:
            later = [i for i in range(start + 1, len(self.messages)) if self.messages[i].role == "user"]
            if not later:
                break
            start = later[0]  # drop the oldest turn (a user message and its reply)
            tokens = self._prompt_tokens(start)
        notices = []
        dropped = start
        self._first_kept = start
        if dropped:
            notices.append(f"The conversation is longer than the {n_ctx}-token context: the oldest {dropped} "
                           "messages are left out of what the model sees (the system prompt is kept).")
        truncated = False
        if len(tokens) > budget:
            tokens = self._truncate_last(start, budget)
            truncated = True
            notices.append(f"The message is longer than the {n_ctx}-token context allows with room for the reply; "
                           f"its middle part was left out for the model (it kept {len(tokens)} prompt tokens).")
        return tokens, dropped, truncated, notices

    def _truncate_last(self, start: int, budget: int) -> list[int]:
        """Shorten the newest message in the middle until the prompt fits `budget`."""
        llm = self.engine.llm
        content = self.messages[-1].content
        overhead = len(self._prompt_tokens(start, TRUNCATION_MARK))
        body = llm.tokenize(content.encode("utf-8"), add_bos=False, special=False)
        allowed = budget - overhead
        if allowed < 8:
            raise OperationFailedError(
                f"The system prompt and chat format alone take {overhead} of the {self.engine.n_ctx}-token "
                f"context, leaving no room for a message and a {min(self.sampling.max_tokens, self.engine.n_ctx // 2)}"
                "-token reply; shorten the system prompt, lower max tokens or load with a longer context.")
        while allowed >= 8:
            head = allowed // 2
            tail = allowed - head
            text = (llm.detokenize(body[:head]).decode("utf-8", errors="ignore") + TRUNCATION_MARK
                    + llm.detokenize(body[-tail:]).decode("utf-8", errors="ignore"))
            tokens = self._prompt_tokens(start, text)
            if len(tokens) <= budget:
                return tokens
            allowed -= max(1, len(tokens) - budget)
        raise OperationFailedError("The message could not be shortened to fit the context; load with a longer context.")

    # ---- generation ------------------------------------------------------------------

    def _reuse_prefix(self, tokens: list[int]) -> int:
        """Keep the KV cache's longest prefix shared with `tokens`; returns its length."""
        import llama_cpp as lc

        engine, llm = self.engine, self.engine.llm
        n_cached = llm.n_tokens
        common = 0
        limit = min(n_cached, len(tokens))
        ids = llm.input_ids
        while common < limit and ids[common] == tokens[common]:
            common += 1
        if common == len(tokens):
            common -= 1  # at least one token must be evaluated to get fresh logits
        if common > 0 and not engine.recurrent:
            mem = lc.llama_get_memory(llm.ctx)
            ok = bool(lc.llama_memory_seq_rm(mem, 0, common, -1))
            if ok and engine.n_swa > 0 and common < n_cached:
                # a sliding-window cache keeps only the last window; going back needs the
                # positions before `common` that the window may already have overwritten
                pos_min = lc.llama_memory_seq_pos_min(mem, 0)
                ok = 0 <= pos_min <= max(0, common - engine.n_swa)
            if ok:
                llm.n_tokens = common
                return common
        llm.reset()
        mem = lc.llama_get_memory(llm.ctx)
        lc.llama_memory_clear(mem, True)
        return 0

    def generate(self, *, on_token: TokenCallback | None = None,
                 stop_event: threading.Event | None = None) -> Reply:
        """Reply to the conversation as it stands (its last message is the user's)."""
        if not self.messages or self.messages[-1].role != "user":
            raise BadInputError("There is no user message to reply to.")
        engine = self.engine
        if engine.closed:
            raise OperationFailedError("The model was unloaded; load it again to chat.")
        with engine.lock:
            return self._generate_locked(on_token, stop_event)

    def _generate_locked(self, on_token: TokenCallback | None, stop_event: threading.Event | None) -> Reply:
        engine, llm, s = self.engine, self.engine.llm, self.sampling
        t_start = time.perf_counter()
        tokens, dropped, truncated, notices = self._fit_window()
        notices = self._take_notices() + notices
        from rooflight.runtime.chat_images import vision_prompt_for

        vision_prompt = vision_prompt_for(self, notices)  # None without images in view
        image_s = 0.0
        n_prompt, n_ctx = len(tokens), engine.n_ctx
        if vision_prompt is not None:
            n_prompt = vision_prompt.n_tokens
        max_new = max(0, min(s.max_tokens, n_ctx - n_prompt))

        reply_msg = self._add("assistant", "")
        reply_msg.complete = False
        writer = _StoreWriter(self.store, reply_msg.id)
        parts: list[str] = []

        def emit(chunk: str) -> None:
            parts.append(chunk)
            writer.add(chunk)
            if on_token is not None:
                on_token(chunk)

        stream = _TextStream(engine.format.stop, emit)
        stop_specials = set(engine.format.stop)
        generated = n_decode = 0
        reason = "max_tokens"
        sampler = SamplerChain(s, llm.n_vocab())
        # other programs' CPU during the reply: a reply slowed by them does not calibrate
        watch = Watch().__enter__()
        try:
            if vision_prompt is not None:  # images in view: mtmd evaluates text and images
                cached = 0
                t0 = time.perf_counter()
                image_s = vision_prompt.evaluate()
            else:
                cached = self._reuse_prefix(tokens)
                t0 = time.perf_counter()
                llm.eval(tokens[cached:])
            t_prefill_end = time.perf_counter()
            token = sampler.sample(llm.ctx) if max_new > 0 else -1
            t_first = time.perf_counter()
            ctx_ptr, piece, is_eog, is_control = llm.ctx, engine.piece, engine.is_eog, engine.is_control
            while max_new > 0:
                if is_eog(token):
                    reason = "eos"
                    break
                generated += 1
                if is_control(token):
                    if engine.special_text(token) in stop_specials:
                        reason = "stop_string"
                        break
                elif stream.feed(piece(token)):
                    reason = "stop_string"
                    break
                if generated >= max_new:
                    reason = "max_tokens" if max_new == s.max_tokens else "context_full"
                    break
                if llm.n_tokens >= n_ctx:
                    reason = "context_full"
                    break
                if stop_event is not None and stop_event.is_set():
                    reason = "stopped"
                    break
                llm.eval([token])
                n_decode += 1
                token = sampler.sample(ctx_ptr)
            t_end = time.perf_counter()
            watch.__exit__(None, None, None)
        except BaseException:
            writer.flush()  # keep what was shown; the message stays marked incomplete
            reply_msg.content = "".join(parts)
            raise
        finally:
            sampler.close()
            if vision_prompt is not None:
                vision_prompt.close()
        text = stream.finish()
        if max_new == 0:
            reason = "context_full"
        prefill_s = t_prefill_end - t0
        decode_s = t_end - t_first
        stats = ReplyStats(
            prompt_tokens=n_prompt, cached_tokens=cached, prefill_tokens=n_prompt - cached,
            generated_tokens=generated, time_to_first_token_s=t_first - t_start, prefill_s=prefill_s,
            prefill_tok_s=(n_prompt - cached) / prefill_s if prefill_s > 0 else None,
            decode_s=decode_s, decode_tok_s=n_decode / decode_s if n_decode and decode_s > 0 else None,
            stop_reason=reason, dropped_messages=dropped, truncated=truncated, seed=sampler.seed,
            predicted=self._predicted(n_prompt, n_prompt - cached, max(1, n_decode),
                                      vision_prompt.n_images if vision_prompt is not None else 0),
            image_tokens=vision_prompt.image_tokens if vision_prompt is not None else 0, image_s=image_s,
        )
        writer.flush()
        reply_msg.content, reply_msg.stats, reply_msg.complete = text, stats.to_dict(), True
        if self.store is not None and reply_msg.id is not None:
            self.store.update_message(reply_msg.id, text)  # the final text (trailing space trimmed)
            self.store.finish_message(reply_msg.id, stats.to_dict())
        assert watch.window is not None
        self._record_calibration(stats, watch.window.others_share)
        return Reply(text, stats, tuple(notices), reply_msg.id)

    def _take_notices(self) -> list[str]:
        out = list(self._pending_notices)
        self._pending_notices.clear()
        if self.engine.format.notice:  # a model template that failed at run time
            out.append(self.engine.format.notice)
            self.engine.format.notice = None
        return out

    def _predicted(self, n_prompt: int, n_prefill: int, n_decode: int, n_images: int = 0) -> dict[str, float]:
        """The estimate for what this reply did: prefill of n_prefill tokens, decode after n_prompt
        (and encoding n_images images, whose tokens n_prefill already counts)."""
        decode_cal, _ = self.engine.predict(n_prompt, n_decode)
        # the new tokens are prefilled after the cached conversation, and attend to it
        prefill_cal, _ = self.engine.predict(max(1, n_prefill), 1, prompt_start=n_prompt - n_prefill)
        ttft = prefill_cal.time_to_first_token_s
        if self.engine.spec.projector is not None:
            from rooflight.runtime.chat_images import images_first_token_s

            ttft = images_first_token_s(self.engine, prefill_cal, n_images)
        return {
            "decode_tok_s": decode_cal.decode_tok_s,
            "prefill_tok_s": prefill_cal.prefill_tok_s,
            "time_to_first_token_s": ttft,
        }

    def _record_calibration(self, st: ReplyStats, others_cpu: float = 0.0) -> None:
        """Store measured vs (uncalibrated) predicted, as `rooflight bench` does; others_cpu:
        the share of the CPU other programs used meanwhile (runtime/busy.py)."""
        lp = self.engine.plan
        if not (self.record_calibration and lp.live_hardware):
            return  # only measurements of this machine, as detected, calibrate it
        if st.decode_tok_s is None or st.prefill_tok_s is None:
            return
        if st.image_tokens:  # its prefill time holds image encoding: not a text prefill rate
            return
        n_decode = round(st.decode_tok_s * st.decode_s)
        if n_decode < MIN_CALIBRATION_TOKENS or st.prefill_tokens < MIN_CALIBRATION_TOKENS:
            return
        from rooflight.store.calibration import CalibrationStore, Measurement, machine_key

        _, raw_decode = self.engine.predict(st.prompt_tokens, n_decode)
        _, raw_prefill = self.engine.predict(st.prefill_tokens, 1, prompt_start=st.cached_tokens)
        try:
            store = CalibrationStore()
            try:
                store.add(Measurement(
                    machine=machine_key(lp.hardware), backend=lp.hardware.backend, model=lp.spec.name,
                    quant=lp.spec.file_type, n_ctx=lp.config.n_ctx, n_gpu_layers=lp.config.n_gpu_layers,
                    prompt_tokens=st.prefill_tokens, gen_tokens=n_decode,
                    predicted_decode=raw_decode.decode_tok_s, measured_decode=st.decode_tok_s,
                    predicted_prefill=raw_prefill.prefill_tok_s, measured_prefill=st.prefill_tok_s,
                    n_threads=lp.config.n_threads, model_bytes=lp.spec.file_bytes, basis=raw_decode.basis,
                    kernels=_kernels_of(raw_decode, raw_prefill), others_cpu=others_cpu,
                ))
            finally:
                store.close()
        except Exception as exc:  # calibration is a bonus: never lose a reply over it
            log.warning("could not store the reply's measurement for calibration: %s", exc)


def _kernels_of(decode_est, prefill_est):
    """The kernel shares of a reply's two predictions: decode's from one, prefill's from the
    other (a later turn's prompt starts after the cached conversation)."""
    if decode_est.kernels is None or prefill_est.kernels is None:
        return None
    from rooflight.estimate.kernel_calibration import KernelShares

    return KernelShares(decode_est.kernels.decode, prefill_est.kernels.prefill)


def _with_markers(msg: ChatMessage, text: str, marker: str | None) -> str:
    """A message's text with one media marker per image before it (Gemma 3, Qwen-VL and
    LLaVA templates all put the image first); no marker where no projector is loaded."""
    if not msg.images or marker is None:
        return text
    return "".join(marker + "\n" for _ in msg.images) + text
