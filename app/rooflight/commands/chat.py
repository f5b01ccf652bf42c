"""`rooflight chat MODEL`: chat with a local model in the terminal, streaming.

Interactive on a terminal (prompt "> ", /commands, Ctrl-C stops the reply, Ctrl-C at the
prompt exits); with stdin not a terminal, every line read is one message and the replies
go to stdout one per message, so scripts and tests can pipe a conversation through.
The plan (what will be loaded, the fit, the predicted speed) and each reply's measured
speed go to stderr; only replies go to stdout (or one JSON document with --json).
"""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path

from rooflight.commands.chat_input import LineInput
from rooflight.commands.common import (
    N_CPU_MOE_HELP,
    emit_json,
    gpu_layers,
    looks_like_path,
    n_cpu_moe,
    positive_int,
)
from rooflight.commands.rpc import add_rpc_option, remotes_from_args
from rooflight.errors import BadInputError, RooflightError
from rooflight.hardware.profile import plural

HELP = """commands:
  /system TEXT   set the system prompt (/system alone shows it)
  /reset         start a new conversation (the system prompt stays)
  /regen         generate the last reply again
  /stats         measured speed of the last reply beside the prediction
  /image FILE    attach an image to the next message (a vision model with its projector)
  /help          this list
  /quit          leave (also Ctrl-D, or Ctrl-C at the prompt)
Ctrl-C while the model writes stops the reply."""


def register(subparsers) -> None:
    from rooflight.runtime.templates import FORMAT_NAMES

    p = subparsers.add_parser("chat", help="chat with a local model in the terminal (streaming)")
    p.add_argument("model", help="a local .gguf file, or the catalog id of a downloaded model")
    g = p.add_argument_group("load (as `rooflight estimate`; the plan is what gets loaded)")
    g.add_argument("--ctx", type=positive_int, help="context length (default: 8192, capped at the model's)")
    g.add_argument("--gpu-layers", type=gpu_layers, default="auto", metavar="N|auto")
    g.add_argument("--n-cpu-moe", type=n_cpu_moe, default=0, metavar="N|auto|all", help=N_CPU_MOE_HELP)
    g.add_argument("--threads", type=positive_int)
    g.add_argument("--batch", type=positive_int, default=512)
    g.add_argument("--ubatch", type=positive_int, default=512)
    g.add_argument("--kv-type", choices=["f16", "q8_0", "q4_0"], default="f16")
    g.add_argument("--flash-attn", choices=["on", "off", "auto"], default="auto")
    g.add_argument("--force", action="store_true", help="load even if the plan says it does not fit")
    g.add_argument("--mmproj", metavar="FILE",
                   help="the vision projector to load with the model (default: an mmproj-*.gguf beside it)")
    add_rpc_option(g)
    g.add_argument("--chat-format", choices=FORMAT_NAMES, default="auto",
                   help="auto: the model's template, else its family's format, else a transcript (base models)")
    s = p.add_argument_group("sampling (defaults depend on the model)")
    s.add_argument("--system", metavar="TEXT", default="", help="system prompt")
    s.add_argument("--image", metavar="FILE", action="append", default=[],
                   help="attach an image to the first message (repeat for more; needs a vision model)")
    s.add_argument("--temperature", type=float)
    s.add_argument("--top-p", type=float)
    s.add_argument("--top-k", type=int)
    s.add_argument("--min-p", type=float)
    s.add_argument("--repeat-penalty", type=float)
    s.add_argument("--max-tokens", type=positive_int)
    s.add_argument("--seed", type=int, help="fixed seed (default: a new one per reply)")
    o = p.add_argument_group("output")
    o.add_argument("--no-save", action="store_true", help="do not keep this chat in the history")
    o.add_argument("--json", action="store_true",
                   help="no streaming; print one JSON document (plan, replies, stats) at the end")
    p.set_defaults(func=cmd_chat)


# ---- model resolution ------------------------------------------------------------------


def resolve_model(name: str) -> list[Path]:
    """A local .gguf path, or the installed files of a catalog model, largest first."""
    path = Path(name).expanduser()
    if path.is_file():
        return [path]
    if name.startswith("hf:"):
        raise BadInputError("chat needs a downloaded model; download it first with rooflight download.")
    from rooflight.catalog.models import find_model

    model = find_model(name)
    if model is None:
        if looks_like_path(name):
            raise BadInputError(f"{name} does not exist.")
        raise BadInputError(f"{name} is neither a .gguf file nor a catalog model id; give the path of a downloaded model.")
    installed = _installed_files()
    found = [installed[(s.repo, f)] for s in model.gguf for f in s.files.values() if (s.repo, f) in installed]
    if not found:
        repo, file = model.file_for(model.quants[0])
        raise BadInputError(f"{model.id} is not downloaded yet; download one of its files first "
                            f"(for example: rooflight download {repo} {file}).")
    return sorted(found, key=lambda p: p.stat().st_size, reverse=True)


def plan_best(paths: list[Path], wishes, remotes=(), mmproj: str | None = None):
    """The plan of the largest file that fits (the smallest one if none does: its refusal says why).

    A projector given with --mmproj is paired with each file; without one, the loader pairs
    the one beside the file, if any."""
    from rooflight.runtime.loader import plan_load

    plans = []
    for p in paths:
        spec = None
        if mmproj:
            from rooflight.gguf import load_model_spec
            from rooflight.gguf.projector import with_projector

            spec = with_projector(load_model_spec(str(p)), Path(mmproj).expanduser())
        lp = plan_load(p, wishes, spec=spec, remotes=remotes)
        if lp.fits:
            return lp
        plans.append(lp)
    return plans[-1]


def _installed_files() -> dict[tuple[str, str], Path]:
    try:
        from rooflight.store.installed import InstalledStore
    except ImportError:
        return {}
    with InstalledStore() as store:
        return {(m.repo_id, m.filename): Path(m.path) for m in store.list()}


# ---- plan and load ---------------------------------------------------------------------


def _wishes(args):
    from rooflight.estimate import Wishes

    return Wishes(n_ctx=args.ctx, n_gpu_layers=args.gpu_layers, kv_type=args.kv_type, flash_attn=args.flash_attn,
                  n_threads=args.threads, n_batch=args.batch, n_ubatch=args.ubatch, n_cpu_moe=args.n_cpu_moe)


def _sampling(args, base):
    changes = {k: getattr(args, k) for k in ("temperature", "top_p", "top_k", "min_p", "repeat_penalty",
                                             "max_tokens", "seed") if getattr(args, k) is not None}
    return replace(base, **changes)


def plan_summary(lp) -> str:
    est, cfg = lp.estimate, lp.config
    mem_gb = est.memory.total_bytes / 1e9
    p = est.performance
    layers = f"{cfg.n_gpu_layers}/{lp.spec.n_layer + 1} layers on GPU" if lp.hardware.backend != "cpu" else "CPU"
    if lp.hardware.remotes:
        devs = est.memory.layer_devices
        remote = sorted({d for d in devs if d.startswith("rpc")})
        layers = (f"{len(devs) - devs.count('cpu')}/{len(devs)} layers on "
                  + ", ".join(f"{d} ({devs.count(d)})" for d in remote)
                  + ("" if lp.hardware.backend == "cpu" else " and this machine's GPUs"))
    if cfg.n_cpu_moe:
        layers += f" · experts of {cfg.n_cpu_moe} layers in RAM"
    return (f"{lp.spec.name} ({lp.spec.file_type}) · {est.fit} · {layers} · {cfg.n_ctx}-token context · "
            f"{plural(cfg.n_threads, 'thread')} · {mem_gb:.2f} GB · predicted {p.decode_tok_s:.1f} tok/s decode, "
            f"{p.prefill_tok_s:.0f} tok/s prefill" + (" (calibrated)" if p.calibrated else ""))


def _progress_printer(interactive: bool):
    last = [-1]

    def show(fraction: float) -> None:
        pct = int(fraction * 100)
        if interactive and pct != last[0]:
            last[0] = pct
            print(f"\rloading… {pct:3d}%", end="", file=sys.stderr, flush=True)

    return show


# ---- the conversation ------------------------------------------------------------------


def format_stats(stats) -> str:
    """Measured beside predicted, for /stats."""
    p = stats.predicted
    fmt = lambda v, unit: "—" if v is None else f"{v:.1f} {unit}"  # noqa: E731
    rows = [
        ("", "measured", "predicted", ""),
        ("first token", f"{stats.time_to_first_token_s:.3f} s", f"{p.get('time_to_first_token_s', 0):.3f} s", ""),
        ("prefill", fmt(stats.prefill_tok_s, "tok/s"), fmt(p.get("prefill_tok_s"), "tok/s"),
         f"{stats.prefill_tokens} tokens evaluated, {stats.cached_tokens} reused"),
        ("decode", fmt(stats.decode_tok_s, "tok/s"), fmt(p.get("decode_tok_s"), "tok/s"),
         f"{stats.generated_tokens} tokens generated"),
    ]
    lines = [f"{a:12}{b:>14}{c:>14}  {d}".rstrip() for a, b, c, d in rows]
    lines.append(f"stopped by: {stats.stop_reason}; prompt {stats.prompt_tokens} tokens"
                 + (f"; {stats.dropped_messages} oldest messages left out" if stats.dropped_messages else "")
                 + ("; message shortened" if stats.truncated else ""))
    return "\n".join(lines)


def _one_line(stats) -> str:
    d = stats.decode_tok_s
    pd = stats.predicted.get("decode_tok_s")
    speed = f"{d:.1f} tok/s (predicted {pd:.1f})" if d is not None and pd else "—"
    return f"[{stats.generated_tokens} tokens · {speed} · first token {stats.time_to_first_token_s:.2f} s · {stats.stop_reason}]"


class _Interrupts:
    """SIGINT while a reply streams sets the stop event; a second one exits."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self._previous = None

    def __enter__(self) -> threading.Event:
        self.stop.clear()
        try:
            self._previous = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not the main thread: no signal handling, Ctrl-C is fatal
            self._previous = None
        return self.stop

    def _handler(self, signum, frame) -> None:
        if self.stop.is_set():
            raise KeyboardInterrupt
        self.stop.set()

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def cmd_chat(args) -> int:
    from rooflight.runtime.chat import ChatSession
    from rooflight.runtime.engine import load_engine
    from rooflight.runtime.images import read_image
    from rooflight.runtime.sampling import Sampling

    _sampling(args, Sampling())  # a bad setting is reported before the model is loaded
    images = [read_image(f) for f in args.image]  # and a bad image too
    interactive = sys.stdin.isatty() and not args.json
    remotes = remotes_from_args(args)  # before llama.cpp loads: an RPC build must be chosen first
    lp = plan_best(resolve_model(args.model), _wishes(args), remotes, getattr(args, "mmproj", None))
    print(plan_summary(lp), file=sys.stderr)
    if lp.cpu_only_build:
        print(f"note: {lp.cpu_only_build}", file=sys.stderr)
    engine = load_engine(lp, force=args.force, on_progress=_progress_printer(interactive),
                         chat_format=args.chat_format, force_hint="use --force to load anyway")
    if interactive:
        print("\r" + " " * 16 + "\r", end="", file=sys.stderr)
    store = None
    try:
        for notice in engine.notices:
            if notice != lp.cpu_only_build:
                print(f"note: {notice}", file=sys.stderr)
        print(f"loaded in {engine.load_s:.2f} s; chat format: {engine.format.describe()}", file=sys.stderr)
        if engine.vision is not None:
            print(f"vision: {engine.vision.path.name} ({lp.spec.projector.image_tokens} tokens per image)",
                  file=sys.stderr)
        elif images:
            from rooflight.runtime.chat_images import no_projector_sentence

            raise BadInputError(no_projector_sentence(engine))
        if not args.no_save:
            from rooflight.store.chats import ChatStore

            store = ChatStore()
        session = ChatSession(engine, system_prompt=args.system, store=store)
        session.sampling = _sampling(args, session.sampling)
        if interactive:
            print("type /help for commands", file=sys.stderr)
        return _loop(session, interactive, args.json, lp, images)
    finally:
        engine.close()
        if store is not None:
            store.close()


def _loop(session, interactive: bool, as_json: bool, lp, images: list | None = None) -> int:
    replies: list[dict] = []
    try:
        with LineInput(interactive) as lines:
            _converse(session, lines, as_json, list(images or []), replies)
    except KeyboardInterrupt:
        # Ctrl-C at the prompt, a second one while a reply streams, or one between the two
        # (a reply's last line printed, the prompt not shown yet): leave, cleanly
        print(file=sys.stderr)
    if as_json:
        est = lp.estimate.to_dict()
        emit_json({"model": est["model"], "config": lp.config.to_dict(), "vision": est.get("vision"),
                   "fit": lp.estimate.fit, "predicted": lp.estimate.performance.to_dict(),
                   "chat_format": session.engine.format.name, "chat_id": session.chat_id,
                   "replies": replies})
    return 0


def _converse(session, lines: LineInput, as_json: bool, pending: list, replies: list[dict]) -> None:
    """Messages and commands until the input ends or /quit; each reply is added to replies.
    pending: images attached to the next message sent."""
    interactive = lines.interactive
    last = None
    interrupts = _Interrupts()
    while True:
        line = lines.read()
        if line is None:
            break
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            command, _, rest = text.partition(" ")
            if command in ("/quit", "/exit"):
                break
            if command == "/help":
                print(HELP, file=sys.stderr)
            elif command == "/system":
                if rest.strip():
                    session.set_system_prompt(rest.strip())
                    print("system prompt set", file=sys.stderr)
                else:
                    print(f"system prompt: {session.system_prompt or '(none)'}", file=sys.stderr)
            elif command == "/reset":
                session.reset()
                print("conversation cleared", file=sys.stderr)
            elif command == "/image":
                from rooflight.runtime.chat_images import check_can_see
                from rooflight.runtime.images import read_image

                try:
                    check_can_see(session.engine)
                    pending.append(read_image(rest.strip()))
                    print(f"image attached to the next message ({len(pending)} waiting)", file=sys.stderr)
                except RooflightError as exc:
                    print(f"rooflight: {exc}", file=sys.stderr)
            elif command == "/stats":
                print(format_stats(last.stats) if last else "no reply yet", file=sys.stderr)
            elif command in ("/regen", "/regenerate"):
                if not session.messages:
                    print("nothing to regenerate", file=sys.stderr)
                    continue
                last = _reply(session, interrupts, None, as_json, interactive)
                replies.append({"prompt": session.messages[-2].content, "reply": last.text,
                                "stats": last.stats.to_dict()})
            else:
                print(f"unknown command {command}; /help lists them", file=sys.stderr)
            continue
        try:
            last = _reply(session, interrupts, text, as_json, interactive, pending)
            pending = []
        except RooflightError as exc:
            print(f"rooflight: {exc}", file=sys.stderr)
            continue
        replies.append({"prompt": text, "reply": last.text, "stats": last.stats.to_dict(),
                        "notices": list(last.notices),
                        **({"images": [m.name for m in session.messages[-2].images]}
                           if session.messages[-2].images else {})})


def _reply(session, interrupts: _Interrupts, text: str | None, as_json: bool, interactive: bool,
           images: list | None = None):
    def on_token(chunk: str) -> None:
        sys.stdout.write(chunk)
        sys.stdout.flush()

    with interrupts as stop:
        callback = None if as_json else on_token
        if text is None:
            reply = session.regenerate(on_token=callback, stop_event=stop)
        else:
            reply = session.send(text, on_token=callback, stop_event=stop, images=images or ())
    if not as_json:
        sys.stdout.write("\n")
        sys.stdout.flush()
    for notice in reply.notices:
        print(f"note: {notice}", file=sys.stderr)
    print(_one_line(reply.stats), file=sys.stderr)
    return reply
