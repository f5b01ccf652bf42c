"""What the Chat page runs in workers (plain callables, no Qt): loading a model, one
reply with its live decode rate, and exporting a chat. Each takes the runner's Task
first (ui/tasks.py): task.progress for the load bar and the live rate, task.stream for
the reply's text, in order.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from rooflight.atomic import write_text_atomic
from rooflight.errors import OperationFailedError
from rooflight.runtime.live_rate import LiveRate
from rooflight.ui.chat_load import FORCE_HINT

if TYPE_CHECKING:
    from rooflight.hardware.monitor import Monitor

def load_model(task, lp, force: bool, cancel: threading.Event, previous, holder: list):
    """Free the model loaded before (if any), then load `lp`'s at its plan."""
    from rooflight.runtime.engine import LoadCancelledError, load_engine

    if previous is not None:
        previous.close()  # waits for a reply still running on it (stopped first)
    engine = load_engine(lp, force=force, on_progress=task.progress, cancel=cancel, force_hint=FORCE_HINT)
    holder.append(engine)  # the page closes it if it shuts down before the result lands
    if cancel.is_set():
        engine.close()
        raise LoadCancelledError()
    return engine


def run_turn(task, session, op: str, index: int, text: str, system_prompt: str, sampling,
             stop: threading.Event, monitor: Monitor | None, images=()):
    """One reply: send a message, regenerate the last reply, or edit message `index` and
    reply again. Text streams through task.stream; returns the runtime's Reply."""
    if session.system_prompt != system_prompt:
        session.set_system_prompt(system_prompt)
    if session.sampling != sampling:
        session.set_sampling(**sampling.to_dict())
    live = LiveRate(session.engine)

    def on_token(chunk: str) -> None:
        task.stream(chunk)
        figure = live.tick()
        if figure is not None:
            if figure[1] is not None and monitor is not None:
                monitor.record_speed("decode", figure[1])
            task.progress(figure)

    if op == "send":
        reply = session.send(text, on_token=on_token, stop_event=stop, images=images)
    elif op == "regenerate":
        reply = session.regenerate(on_token=on_token, stop_event=stop)
    else:
        reply = session.edit_and_resend(index, text, on_token=on_token, stop_event=stop)
    if monitor is not None:
        if reply.stats.prefill_tok_s:
            monitor.record_speed("prompt", reply.stats.prefill_tok_s)
        if reply.stats.decode_tok_s:
            monitor.record_speed("decode", reply.stats.decode_tok_s)
    return reply


def write_export(store, chat_id: int, path: str, fmt: str) -> str:
    """The chat as Markdown or JSON, written atomically (temp file, fsync, rename)."""
    text = (store.export_markdown(chat_id) if fmt == "markdown"
            else json.dumps(store.export_json(chat_id), indent=2, ensure_ascii=False) + "\n")
    target = Path(path)
    try:
        write_text_atomic(target, text)
    except OSError as exc:
        raise OperationFailedError(f"Could not write {target} ({exc.strerror or exc}); "
                                   "choose a folder you can write to.") from exc
    return str(target)
