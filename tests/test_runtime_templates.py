"""Chat formats: which one a model gets, what it renders, and the template sandbox."""

import sys
import time

import pytest

from rooflight.runtime.sandbox import SandboxedTemplate, TemplateError
from rooflight.runtime.templates import ModelInfo, choose_format, looks_instruct

CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Mistral-style: refuses a system role outright
NO_SYSTEM_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}"
)
CONVO = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Capital of France?"},
]


def info(arch="gemma3", template=None, names=("Gemma 3 270m",), specials=()):
    return ModelInfo(architecture=arch, template=template, bos_token="<s>", eos_token="</s>", names=names,
                     has_special=lambda t: t in specials)


GEMMA_SPECIALS = ("<start_of_turn>", "<end_of_turn>")


def test_base_model_without_template_is_driven_as_a_transcript():
    fmt = choose_format(info(names=("Gemma 3 270m", "", "gemma-3", "gemma-3-270m-q4_k_m"), specials=GEMMA_SPECIALS))
    assert fmt.name == "transcript" and fmt.is_completion
    text = fmt.render(CONVO)
    assert text == "Be brief.\n\nUser: Hi\n\nAssistant: Hello!\n\nUser: Capital of France?\n\nAssistant:"
    assert "\nUser:" in fmt.stop


def test_instruct_gemma_without_template_gets_gemma_turns_with_system_folded():
    fmt = choose_format(info(names=("gemma-3-270m-it",), specials=GEMMA_SPECIALS))
    assert fmt.name == "gemma" and fmt.source == "builtin"
    assert fmt.render(CONVO) == (
        "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nCapital of France?<end_of_turn>\n<start_of_turn>model\n"
    )
    assert "<end_of_turn>" in fmt.stop


@pytest.mark.parametrize(
    ("arch", "specials", "expected"),
    [
        ("llama", ("<|start_header_id|>", "<|eot_id|>"), "llama3"),
        ("llama", ("[INST]",), "mistral"),
        ("llama", (), "llama2"),
        ("qwen2", ("<|im_start|>", "<|im_end|>"), "chatml"),
        ("phi3", ("<|user|>", "<|end|>"), "phi3"),
        ("somethingnew", ("<|im_start|>", "<|im_end|>"), "chatml"),
        ("somethingnew", (), "chatml"),
        # the vocabulary overrides an architecture whose own format it lacks
        ("qwen2", ("<start_of_turn>", "<end_of_turn>"), "gemma"),
    ],
)
def test_builtin_format_follows_architecture_and_vocabulary(arch, specials, expected):
    assert choose_format(info(arch, names=("x-Instruct",), specials=specials)).name == expected


def test_llama3_render():
    fmt = choose_format(info("llama", names=("Llama-3.2-1B-Instruct",), specials=("<|start_header_id|>", "<|eot_id|>")))
    assert fmt.render(CONVO[:2]) == (
        "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_model_template_is_used_and_gives_stop_strings():
    fmt = choose_format(info("qwen2", CHATML_TEMPLATE, names=("Qwen2.5",)))
    assert fmt.source == "model" and fmt.notice is None
    assert fmt.render(CONVO[:2]) == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert "<|im_end|>" in fmt.stop


def test_template_without_system_role_gets_it_folded_into_the_first_user_turn():
    fmt = choose_format(info("llama", NO_SYSTEM_TEMPLATE, names=("Mistral-7B-Instruct",), specials=("[INST]",)))
    assert fmt.source == "model" and not fmt.supports_system
    assert fmt.render(CONVO) == "<s>[INST] Be brief.\n\nHi [/INST]Hello!</s>[INST] Capital of France? [/INST]"


@pytest.mark.parametrize(
    "hostile",
    [
        "{{ ''.__class__.__mro__ }}{% for m in messages %}{{ m.content }}{% endfor %}",
        "{{ messages.__class__.__base__.__subclasses__() }}",
        "{% for m in messages %}{{ m.content }}{% endfor %}{{ cycler.__init__.__globals__.os }}",
        "{{ 'a' * 1000000000 }}",
        "{{ 'x' | center(1000000000) }}",
        "{{ '%0999999999d' % 1 }}",
        "{{ '{:>999999999}'.format(1) }}",
        "{{ 9 ** 9 ** 9 }}",
        "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
        "{% for m in messages %}{{ m.content }}{% endfor %",  # does not compile
        "{{ raise_exception('no') }}",
        "hello",  # ignores the conversation
    ],
)
def test_hostile_or_broken_templates_fall_back_with_a_notice(hostile):
    fmt = choose_format(info(template=hostile, names=("gemma-3-it",), specials=GEMMA_SPECIALS))
    assert fmt.name == "gemma" and fmt.source == "builtin"
    assert fmt.notice and "template" in fmt.notice
    assert fmt.render(CONVO).endswith("<start_of_turn>model\n")


def test_endless_template_is_stopped_by_the_deadline():
    endless = ("{% for m in messages %}{{ m.content }}{% endfor %}"
               "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}")
    t0 = time.monotonic()
    fmt = choose_format(info(template=endless, names=("gemma-3-it",), specials=GEMMA_SPECIALS))
    assert time.monotonic() - t0 < 5
    assert fmt.name == "gemma" and "longer than" in fmt.notice


def test_template_failing_later_switches_to_the_fallback_once():
    # renders the probe, then refuses a message containing "boom"
    tricky = ("{% for m in messages %}{% if 'boom' in m.content %}{{ raise_exception('boom') }}{% endif %}"
              "{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fmt = choose_format(info("qwen2", tricky, names=("qwen-instruct",), specials=("<|im_start|>", "<|im_end|>")))
    assert fmt.source == "model"
    text = fmt.render([{"role": "user", "content": "boom"}])
    assert fmt.source == "builtin" and fmt.name == "chatml" and "refused" in fmt.notice
    assert text == "<|im_start|>user\nboom<|im_end|>\n<|im_start|>assistant\n"


def test_sandbox_restores_the_previous_tracer():
    def outer(frame, event, arg):
        return None

    sys.settrace(outer)
    try:
        assert SandboxedTemplate("{{ x }}").render(x="ok") == "ok"
        assert sys.gettrace() is outer
    finally:
        sys.settrace(None)


def test_sandbox_gives_templates_what_real_ones_use():
    t = SandboxedTemplate(
        "{%- set ns = namespace(n=0) -%}{%- for m in messages -%}{%- set ns.n = ns.n + 1 -%}{%- endfor -%}"
        "{{ ns.n }} {{ messages | tojson }} {{ strftime_now('%Y') | length }} {{ messages[0].content.strip() }}"
        "{% generation %}x{% endgeneration %}{% for i in range(3) %}{% if i == 1 %}{% break %}{% endif %}{{ i }}{% endfor %}"
    )
    assert t.render(messages=[{"role": "user", "content": " é "}]) == '1 [{"role": "user", "content": " é "}] 4 éx0'


def test_sandbox_rejects_nothing_ordinary_but_raises_template_error_on_refusal():
    with pytest.raises(TemplateError, match="refused"):
        SandboxedTemplate("{{ raise_exception('nope') }}").render()


def test_instruct_names():
    assert looks_instruct(["Qwen2.5-7B-Instruct"]) and looks_instruct(["gemma-3-4b-it"])
    assert looks_instruct(["", "chat", ""]) and looks_instruct(["Hermes-3-Llama-3.1-8B"])
    assert not looks_instruct(["Gemma 3 270m", "", "gemma-3", "gemma-3-270m-q4_k_m"])
    assert not looks_instruct(["Llama-3.1-8B", "italian-base"])


def test_override_picks_a_builtin_or_refuses_unknown():
    from rooflight.errors import BadInputError

    assert choose_format(info(template=CHATML_TEMPLATE), "gemma").source == "user"
    with pytest.raises(BadInputError):
        choose_format(info(), "nonsense")
    with pytest.raises(BadInputError, match="no chat template"):
        choose_format(info(), "template")
