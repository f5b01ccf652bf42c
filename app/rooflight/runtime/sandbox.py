"""Render a chat template from a GGUF file without trusting it.

A GGUF's `tokenizer.chat_template` is Jinja code written by whoever published the file.
It runs in Jinja's ImmutableSandboxedEnvironment (no attribute escapes such as
`''.__class__.__mro__`, no mutation of the values passed in), and on top of that:

- a wall-clock deadline, enforced by a trace function on the rendering thread, so nested
  loops cannot hang the chat (Jinja has no while loop, but range() x range() x ... can);
- bounds on the operations that allocate at C speed where a trace function cannot
  interrupt them: `*` / `**` / `%` and numeric arguments of filters and method calls;
- a bound on the rendered size.

Any breach raises TemplateError; callers fall back to a built-in format.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

RENDER_SECONDS = 1.0  # a real template renders a long chat in milliseconds
MAX_OUTPUT_CHARS = 4_000_000  # far above any context a local model has (~16 chars/token)
MAX_INT_ARGUMENT = 100_000  # widths, repeat counts, indents: nothing in a chat needs more
# a printf / str.format width or precision of 6 digits or more
_WIDE_FORMAT = re.compile(r"%[-#0 +]*(\d{6,}|\*)|%[-#0 +]*\d*\.\d{6,}|\{[^{}]*:[^{}]*\d{6,}[^{}]*\}")


class TemplateError(Exception):
    """The template failed, timed out, or tried something the sandbox does not allow."""


class TemplateRefusedError(TemplateError):
    """The template itself rejected the conversation (raise_exception), e.g. a system role."""


class _Deadline(BaseException):
    """Not an Exception: a template's own error handling must not swallow it."""


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    # Transformers' chat-template tojson (non-ASCII kept, as the model saw it in training)
    if indent is not None and indent > 16:
        raise TemplateError("tojson indent too large")
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _check_args(args: tuple, kwargs: Mapping[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT_ARGUMENT:
            raise TemplateError(f"a numeric argument of {value} is beyond what a chat template needs")
        if isinstance(value, str) and _WIDE_FORMAT.search(value):
            raise TemplateError("a format width beyond what a chat template needs")


def _guarded(fn: Callable) -> Callable:
    def call(*args, **kwargs):
        _check_args(args, kwargs)
        return fn(*args, **kwargs)

    call.__name__ = getattr(fn, "__name__", "filter")
    # keep Jinja's pass_context / pass_environment markers
    for attr in ("jinja_pass_arg",):
        if hasattr(fn, attr):
            setattr(call, attr, getattr(fn, attr))
    return call


def _sized(value: Any) -> int | None:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else None


def _environment():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class IgnoreGenerationTags(jinja2.ext.Extension):
        # HF templates mark assistant text with {% generation %} for training masks
        tags = {"generation"}

        def parse(self, parser):
            parser.stream.skip(1)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    class Env(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "%"})

        def call_binop(self, context, operator, left, right):
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    size = _sized(seq)
                    if size is not None and isinstance(n, int) and size * n > MAX_OUTPUT_CHARS:
                        raise TemplateError("a repetition beyond what a chat template needs")
                return left * right
            if operator == "**":
                if isinstance(right, (int, float)) and abs(right) > 64:
                    raise TemplateError("an exponent beyond what a chat template needs")
                return left**right
            if isinstance(left, str):
                _check_args((left,), {})
            return left % right

        def wrap_str_format(self, value):
            # 'x{:>999999999}'.format(1): the width is in the string the method is bound to
            bound_to = getattr(value, "__self__", None)
            if isinstance(bound_to, str) and getattr(value, "__name__", "") in ("format", "format_map"):
                _check_args((bound_to,), {})
            return super().wrap_str_format(value)

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - Jinja's signature
            _check_args(args, kwargs)
            return super().call(__context, __obj, *args, **kwargs)

    env = Env(trim_blocks=True, lstrip_blocks=True,
              extensions=[IgnoreGenerationTags, jinja2.ext.loopcontrols])
    env.filters = {name: _guarded(fn) for name, fn in env.filters.items()}
    env.filters["tojson"] = _tojson
    return env


class SandboxedTemplate:
    """A compiled chat template; render() enforces the limits above."""

    def __init__(self, source: str, *, seconds: float = RENDER_SECONDS) -> None:
        import jinja2

        self.source = source
        self.seconds = seconds
        try:
            self._template = _with_deadline(lambda: _environment().from_string(source), seconds)
        except (jinja2.TemplateError, TemplateError, RecursionError, MemoryError) as exc:
            raise TemplateError(f"the template does not compile ({_short(exc)})") from exc

    def render(self, **variables: Any) -> str:
        import jinja2

        def raise_exception(message: str) -> None:
            raise TemplateRefusedError(f"the template refused the conversation: {message}")

        def strftime_now(fmt: str) -> str:
            return datetime.now().strftime(str(fmt)[:64])

        variables.setdefault("raise_exception", raise_exception)
        variables.setdefault("strftime_now", strftime_now)
        try:
            text = _with_deadline(lambda: self._template.render(**variables), self.seconds)
        except TemplateError:
            raise
        except (jinja2.TemplateError, RecursionError, MemoryError, TypeError, ValueError,
                AttributeError, KeyError, IndexError, ZeroDivisionError, OverflowError) as exc:
            raise TemplateError(f"the template failed ({_short(exc)})") from exc
        if len(text) > MAX_OUTPUT_CHARS:
            raise TemplateError("the template produced far more text than the conversation")
        return text


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 160 else text[:157] + "..."


def _with_deadline(fn: Callable[[], Any], seconds: float) -> Any:
    """Run fn on this thread; abort it (TemplateError) once `seconds` have passed.

    A trace function sees every line the compiled template executes, so any Python-level
    loop is interrupted within one iteration. The previous tracer (a debugger, coverage)
    is restored afterwards.
    """
    deadline = time.monotonic() + seconds
    previous = sys.gettrace()

    def tracer(frame, event, arg):
        if time.monotonic() > deadline:
            raise _Deadline
        return tracer

    sys.settrace(tracer)
    try:
        return fn()
    except _Deadline:
        raise TemplateError(f"the template took longer than {seconds:g} s to render") from None
    finally:
        sys.settrace(previous)
