"""Chat formatting: turn a conversation into the prompt text a model was trained on.

Choice, in order (choose_format):
1. The model's own `tokenizer.chat_template` from its GGUF metadata, rendered in a
   sandbox (runtime/sandbox.py). A template that fails, times out or misbehaves on a probe
   conversation is replaced by the built-in format, with a notice saying so.
2. No template, but the file is an instruction-tuned model (its name says -it, instruct,
   chat...): the built-in turn format of its family, picked from the architecture and
   confirmed by the special tokens the vocabulary really has.
3. No template and no sign of instruction tuning: a base (pretrained) model. Turn markers
   mean nothing to it (Gemma-3-270M base echoes the question back in Gemma's own format,
   and llama-cpp-python's llama-2 fallback makes it answer ''), so it is driven as a
   completion model with a plain "User: / Assistant:" transcript and stop strings.

Every format carries its stop strings; end-of-generation tokens (EOS, <end_of_turn>,
<|im_end|>...) are caught by token in the chat loop as well.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rooflight.runtime.sandbox import SandboxedTemplate, TemplateError, TemplateRefusedError

Messages = Sequence[Mapping[str, str]]
Renderer = Callable[[list[dict[str, str]], bool], str]

TRANSCRIPT_PREAMBLE = "The following is a conversation between a user and a helpful assistant."

# Text that ends an assistant turn in common formats; a model template that mentions one
# gets it as a stop string.
END_MARKERS = ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>", "<|endoftext|>",
               "<|end_of_text|>", "</s>", "<|return|>", "<|im_start|>", "<start_of_turn>")

# Signs of an instruction-tuned file in general.name / finetune / basename / file name.
_INSTRUCT = re.compile(
    r"(^|[^a-z0-9])(it|instruct|instruction|chat|sft|dpo|rlhf|orpo|kto|assistant|hermes|"
    r"dolphin|openchat|vicuna|zephyr|tulu|wizardlm|coder-instruct|reasoning|thinking)([^a-z0-9]|$)",
    re.IGNORECASE,
)


def _fold_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """For formats without a system role: put the system prompt atop the first user turn."""
    if not messages or messages[0]["role"] != "system":
        return messages
    system, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
    if not system:
        return rest
    for m in rest:
        if m["role"] == "user":
            m["content"] = f"{system}\n\n{m['content']}"
            return rest
    return [{"role": "user", "content": system}, *rest]


# ---- built-in formats -------------------------------------------------------------------
# Each renders messages already normalised to: optional system first, then turns.


def _gemma(msgs: list[dict[str, str]], gen: bool) -> str:
    out = []
    for m in _fold_system(msgs):
        role = "model" if m["role"] == "assistant" else "user"
        out.append(f"<start_of_turn>{role}\n{m['content']}<end_of_turn>\n")
    if gen:
        out.append("<start_of_turn>model\n")
    return "".join(out)


def _chatml(msgs: list[dict[str, str]], gen: bool) -> str:
    out = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs]
    if gen:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


def _llama3(msgs: list[dict[str, str]], gen: bool) -> str:
    out = [f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content']}<|eot_id|>" for m in msgs]
    if gen:
        out.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(out)


def _phi3(msgs: list[dict[str, str]], gen: bool) -> str:
    out = [f"<|{m['role']}|>\n{m['content']}<|end|>\n" for m in msgs]
    if gen:
        out.append("<|assistant|>\n")
    return "".join(out)


def _mistral(msgs: list[dict[str, str]], gen: bool) -> str:
    out = []
    for m in _fold_system(msgs):
        if m["role"] == "user":
            out.append(f"[INST] {m['content']} [/INST]")
        else:
            out.append(f"{m['content']}</s>")
    return "".join(out)


def _llama2(msgs: list[dict[str, str]], gen: bool) -> str:
    system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""
    turns = msgs[1:] if system or (msgs and msgs[0]["role"] == "system") else msgs
    out, first = [], True
    for m in turns:
        if m["role"] == "user":
            content = m["content"]
            if first and system:
                content = f"<<SYS>>\n{system}\n<</SYS>>\n\n{content}"
            out.append(("" if first else "<s>") + f"[INST] {content} [/INST]")
            first = False
        else:
            out.append(f" {m['content']} </s>")
    return "".join(out)


def _transcript(msgs: list[dict[str, str]], gen: bool) -> str:
    system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""
    parts = [system.strip() or TRANSCRIPT_PREAMBLE]
    for m in msgs:
        if m["role"] == "user":
            parts.append(f"User: {m['content'].strip()}")
        elif m["role"] == "assistant":
            parts.append(f"Assistant: {m['content'].strip()}")
    text = "\n\n".join(parts)
    return text + "\n\nAssistant:" if gen else text


@dataclass(frozen=True)
class BuiltinFormat:
    name: str
    render: Renderer
    stop: tuple[str, ...]
    markers: tuple[str, ...]  # special tokens the vocabulary must have for the format to apply


BUILTIN: dict[str, BuiltinFormat] = {
    "gemma": BuiltinFormat("gemma", _gemma, ("<end_of_turn>", "<start_of_turn>"),
                           ("<start_of_turn>", "<end_of_turn>")),
    "chatml": BuiltinFormat("chatml", _chatml, ("<|im_end|>", "<|im_start|>"), ("<|im_start|>", "<|im_end|>")),
    "llama3": BuiltinFormat("llama3", _llama3, ("<|eot_id|>", "<|start_header_id|>"),
                            ("<|start_header_id|>", "<|eot_id|>")),
    "phi3": BuiltinFormat("phi3", _phi3, ("<|end|>", "<|user|>", "<|endoftext|>"), ("<|user|>", "<|end|>")),
    "mistral": BuiltinFormat("mistral", _mistral, ("</s>", "[INST]"), ("[INST]",)),
    "llama2": BuiltinFormat("llama2", _llama2, ("</s>", "[INST]"), ()),
    "transcript": BuiltinFormat("transcript", _transcript, ("\nUser:", "\nAssistant:"), ()),
}
FORMAT_NAMES = ("auto", "template", *BUILTIN)

# llama.cpp architecture -> built-in formats to try, best first (the vocabulary decides).
_ARCH_FORMATS: dict[str, tuple[str, ...]] = {
    "gemma": ("gemma",), "gemma2": ("gemma",), "gemma3": ("gemma",), "gemma3n": ("gemma",),
    "llama": ("llama3", "mistral", "chatml", "llama2"),
    "llama4": ("llama3", "chatml"),
    "mistral3": ("mistral", "chatml"),
    "qwen": ("chatml",), "qwen2": ("chatml",), "qwen2moe": ("chatml",), "qwen3": ("chatml",),
    "qwen3moe": ("chatml",), "qwen2vl": ("chatml",),
    "phi3": ("phi3", "chatml"), "phimoe": ("phi3", "chatml"), "phi2": ("chatml",),
    "granite": ("chatml",), "olmo2": ("chatml",), "smollm3": ("chatml",), "internlm2": ("chatml",),
}


@dataclass(frozen=True)
class ModelInfo:
    """What choose_format needs to know about a loaded model."""

    architecture: str
    template: str | None  # tokenizer.chat_template, None when absent
    bos_token: str = ""
    eos_token: str = ""
    names: tuple[str, ...] = ()  # general.name, general.finetune, general.basename, file name
    has_special: Callable[[str], bool] = lambda text: False  # is this text one special token?


def looks_instruct(names: Sequence[str]) -> bool:
    return any(_INSTRUCT.search(n or "") for n in names)


def _normalise(messages: Messages) -> list[dict[str, str]]:
    out = [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in messages]
    # at most one system message, first: later ones are folded into it
    systems = [m["content"] for m in out if m["role"] == "system" and m["content"]]
    turns = [m for m in out if m["role"] != "system"]
    return ([{"role": "system", "content": "\n\n".join(systems)}] if systems else []) + turns


class ChatFormat:
    """How one loaded model's conversations become prompt text.

    render() never raises for a model template at run time: a failure switches the format
    to its fallback for good and sets `notice` (the session reports it once).
    """

    def __init__(self, name: str, source: str, renderer: Renderer, stop: Sequence[str], *,
                 supports_system: bool = True, notice: str | None = None,
                 fallback: ChatFormat | None = None, template: SandboxedTemplate | None = None) -> None:
        self.name = name
        self.source = source  # "model" | "builtin" | "transcript" | "user"
        self._renderer = renderer
        self._stop = tuple(stop)
        self.supports_system = supports_system
        self.notice = notice
        self.fallback = fallback
        self.template = template

    @property
    def stop(self) -> tuple[str, ...]:
        return self._stop

    @property
    def is_completion(self) -> bool:
        """True for a base model driven as a transcript completion."""
        return self.name == "transcript"

    def describe(self) -> str:
        if self.source == "model":
            return "the model's own chat template"
        if self.source == "user":
            return f"the {self.name} format (chosen by the user)"
        if self.name == "transcript":
            return "a plain User/Assistant transcript (base model without a chat template)"
        return f"the built-in {self.name} format (the model ships no chat template)"

    def render(self, messages: Messages, *, add_generation_prompt: bool = True) -> str:
        msgs = _normalise(messages)
        if not self.supports_system:
            msgs = _fold_system(msgs)
        try:
            return self._renderer(msgs, add_generation_prompt)
        except TemplateError as exc:
            if self.fallback is None:
                raise
            self._become_fallback(f"The model's chat template failed ({exc}); using {self.fallback.describe()} instead.")
            return self._renderer(_normalise(messages), add_generation_prompt)

    def _become_fallback(self, notice: str) -> None:
        fb = self.fallback
        assert fb is not None
        self.name, self.source, self._renderer, self._stop = fb.name, fb.source, fb._renderer, fb._stop
        self.supports_system, self.fallback, self.template = fb.supports_system, None, None
        self.notice = notice


def builtin_format(name: str, *, source: str = "builtin", notice: str | None = None) -> ChatFormat:
    fmt = BUILTIN[name]
    return ChatFormat(fmt.name, "transcript" if name == "transcript" and source == "builtin" else source,
                      fmt.render, fmt.stop, notice=notice)


def _builtin_for(info: ModelInfo) -> str:
    """The architecture's built-in format whose special tokens this vocabulary really has."""
    candidates = _ARCH_FORMATS.get(info.architecture, ())
    for name in candidates:
        if all(info.has_special(t) for t in BUILTIN[name].markers):
            return name
    # the architecture's formats do not match the vocabulary: try every format with markers
    for name, fmt in BUILTIN.items():
        if fmt.markers and all(info.has_special(t) for t in fmt.markers):
            return name
    if "llama2" in candidates:
        return "llama2"
    return "chatml"


_PROBE = [
    {"role": "system", "content": "PROBE-SYSTEM"},
    {"role": "user", "content": "PROBE-USER-1"},
    {"role": "assistant", "content": "PROBE-ASSISTANT"},
    {"role": "user", "content": "PROBE-USER-2"},
]


def _template_format(info: ModelInfo, fallback: ChatFormat) -> ChatFormat:
    """The model's template, checked on a probe conversation; the fallback if it misbehaves."""
    assert info.template is not None
    try:
        template = SandboxedTemplate(info.template)
    except TemplateError as exc:
        fallback.notice = f"The model's chat template cannot be used ({exc}); using {fallback.describe()} instead."
        return fallback

    def renderer(msgs: list[dict[str, str]], gen: bool) -> str:
        return template.render(messages=msgs, add_generation_prompt=gen, bos_token=info.bos_token,
                               eos_token=info.eos_token, tools=None, documents=None)

    supports_system = True
    try:
        text = renderer(_normalise(_PROBE), True)
        if "PROBE-SYSTEM" not in text:
            supports_system = False  # dropped silently: fold it into the first user turn instead
            text = renderer(_fold_system(_normalise(_PROBE)), True)
    except TemplateRefusedError:
        try:  # many templates refuse a system role outright (raise_exception)
            text = renderer(_fold_system(_normalise(_PROBE)), True)
            supports_system = False
        except TemplateError as exc:
            fallback.notice = (f"The model's chat template does not render a conversation ({exc}); "
                               f"using {fallback.describe()} instead.")
            return fallback
    except TemplateError as exc:
        fallback.notice = (f"The model's chat template does not render a conversation ({exc}); "
                           f"using {fallback.describe()} instead.")
        return fallback
    missing = [p for p in ("PROBE-USER-1", "PROBE-ASSISTANT", "PROBE-USER-2", "PROBE-SYSTEM") if p not in text]
    if missing or text.index("PROBE-USER-2") < text.index("PROBE-USER-1"):
        fallback.notice = ("The model's chat template drops or reorders parts of the conversation; "
                           f"using {fallback.describe()} instead.")
        return fallback
    stop = tuple(m for m in END_MARKERS if m in info.template)
    return ChatFormat("template", "model", renderer, stop, supports_system=supports_system,
                      fallback=fallback, template=template)


def choose_format(info: ModelInfo, override: str = "auto") -> ChatFormat:
    """The chat format for this model (see the module docstring for the order).

    override: "auto", "template" (the model's, error if none), or a built-in name.
    """
    if override not in FORMAT_NAMES:
        from rooflight.errors import BadInputError

        raise BadInputError(f"Unknown chat format {override!r}; use one of {', '.join(FORMAT_NAMES)}.")
    if override in BUILTIN:
        return builtin_format(override, source="user")
    arch_default = builtin_format(_builtin_for(info))
    if info.template and info.template.strip():
        return _template_format(info, arch_default)
    if override == "template":
        from rooflight.errors import BadInputError

        raise BadInputError("This model ships no chat template; use --chat-format auto or a built-in format.")
    if looks_instruct(info.names):
        return arch_default
    return builtin_format("transcript")
