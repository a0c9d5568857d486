#!/usr/bin/env python3
"""Regenerates tests/unit/tokenizer/data/templates/expectations.json.

Every expected string is rendered by Python jinja2 configured exactly like transformers'
apply_chat_template (`_compile_jinja_template`): ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True, extensions=[loopcontrols] + the `{% generation %}` tag), the `tojson` filter
replaced by json.dumps(ensure_ascii=False, ...), and the globals raise_exception and
strftime_now. Templates see messages, tools=None, documents=None, add_generation_prompt,
bos_token, eos_token and any extra variables, as ChatTemplate::render gives them.

It also extracts SmolLM2's template from the GGUF in models/ (metadata key
tokenizer.chat_template, read with the `gguf` package).

Usage: python3 tests/reference/make_chat_template_expectations.py   (from the repository root)
"""

import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "tests", "unit", "tokenizer", "data", "templates")
GGUF = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker, minus the index tracking: renders its body in place."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()


def extract_smollm2_template():
    path = os.path.join(DATA, "smollm2-135m-instruct.jinja")
    try:
        import gguf
    except ImportError:
        print("warning: python gguf not installed; keeping the existing", path, file=sys.stderr)
        return
    reader = gguf.GGUFReader(GGUF)
    field = reader.fields["tokenizer.chat_template"]
    text = bytes(field.parts[field.data[0]]).decode("utf-8")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def render(source, messages, add_generation_prompt, bos_token, eos_token, extra):
    context = {
        "messages": messages,
        "tools": None,
        "documents": None,
        "add_generation_prompt": add_generation_prompt,
        "bos_token": bos_token,
        "eos_token": eos_token,
    }
    context.update(extra)
    try:
        return {"expected": ENV.from_string(source).render(**context)}
    except TemplateError as e:
        # raise_exception raises the TemplateError base class itself; Jinja's own errors
        # (undefined, syntax, security) are subclasses.
        if type(e) is TemplateError:
            return {"error": str(e), "raised": True}
        return {"error": "%s: %s" % (type(e).__name__, e), "raised": False}
    except Exception as e:  # Python-level TypeError, ValueError, ... inside the template
        return {"error": "%s: %s" % (type(e).__name__, e), "raised": False}


def simple_messages(messages):
    return all(set(m) <= {"role", "content"} and isinstance(m.get("content"), str) for m in messages)


def make_case(name, messages, extra, add_generation_prompt=True, bos="", eos="", source=None, template_file=None):
    if source is None:
        with open(os.path.join(DATA, template_file), encoding="utf-8") as f:
            source = f.read()
    case = {"name": name}
    if template_file:
        case["template_file"] = template_file
    else:
        case["template"] = source
    # Messages beyond {role, content: str} (tool calls, tool results) travel as an extra variable.
    if simple_messages(messages):
        case["messages"] = messages
        case["extra"] = extra
    else:
        case["messages"] = []
        case["extra"] = dict(extra, messages=messages)
    case["add_generation_prompt"] = add_generation_prompt
    case["bos_token"] = bos
    case["eos_token"] = eos
    case.update(render(source, messages, add_generation_prompt, bos, eos, extra))
    return case


# --- model templates -----------------------------------------------------------------------------

MODELS = [
    # (short name, fixture, bos_token, eos_token, accepts a system message)
    ("smollm2", "smollm2-135m-instruct.jinja", "<|im_start|>", "<|im_end|>", True),
    ("llama3", "llama-3-8b-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", True),
    ("llama3.1", "llama-3.1-8b-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", True),
    ("mistral-v0.3", "mistral-7b-instruct-v0.3.jinja", "<s>", "</s>", True),
    ("qwen2.5", "qwen2.5-instruct.jinja", "", "<|im_end|>", True),
    ("qwen3", "qwen3.jinja", "", "<|im_end|>", True),
    ("gemma2", "gemma-2-it.jinja", "<bos>", "<eos>", False),
    ("phi3", "phi-3-mini-4k-instruct.jinja", "<s>", "<|endoftext|>", True),
    ("zephyr", "zephyr-7b-beta.jinja", "<s>", "</s>", True),
    ("gemma3", "gemma-3-it.jinja", "<bos>", "<eos>", True),
    ("tinyllama", "tinyllama-1.1b-chat-v1.0.jinja", "<s>", "</s>", True),
    ("llama2", "llama-2-7b-chat.jinja", "<s>", "</s>", True),
    ("mistral-v0.1", "mistral-7b-instruct-v0.1.jinja", "<s>", "</s>", False),
    ("mistral-v0.2", "mistral-7b-instruct-v0.2.jinja", "<s>", "</s>", True),
]

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}

CONVERSATIONS = [
    ("system_user", [SYSTEM, {"role": "user", "content": "Hello! How are you?"}], True),
    ("user_only", [{"role": "user", "content": "What is 2+2?"}], True),
    ("multi_turn", [
        SYSTEM,
        {"role": "user", "content": "Name a color."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one?"},
    ], True),
    ("multi_turn_no_generation_prompt", [
        {"role": "user", "content": "Name a color."},
        {"role": "assistant", "content": "Blue."},
    ], False),
    ("unicode", [
        {"role": "user", "content": "Ünïcödé — 日本語のテキスト 🎉 naïve café"},
        {"role": "assistant", "content": "Ça va ✓ — Ελληνικά, русский"},
        {"role": "user", "content": "👍🏽 and \u2028 separator"},
    ], True),
    ("quotes_newlines", [
        {"role": "system", "content": "Be \"precise\".\nUse 'quotes' and \\backslashes\\."},
        {"role": "user", "content": "Line 1\nLine 2\n\n  indented {{ not a tag }} {% neither %} {# nor #}"},
        {"role": "assistant", "content": "  padded answer with trailing newline  \n"},
        {"role": "user", "content": "\t tabs\r\nand CRLF "},
    ], False),
    ("empty_content", [{"role": "user", "content": ""}], True),
    ("reasoning", [
        {"role": "user", "content": "Think first."},
        {"role": "assistant", "content": "<think>\nLet me see.\n</think>\n\nThe answer."},
        {"role": "user", "content": "And again?"},
        {"role": "assistant", "content": "<think>\nHmm.\n</think>\n\nSure."},
    ], False),
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

TOOL_CONVERSATION = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call12345", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}}]},
    {"role": "tool", "tool_call_id": "call12345", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
]


def model_cases():
    cases = []
    for short, fixture, bos, eos, system_ok in MODELS:
        for conv_name, messages, agp in CONVERSATIONS:
            cases.append(make_case(f"{short}/{conv_name}", messages, {}, agp, bos, eos, template_file=fixture))
        bad = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
        cases.append(make_case(f"{short}/bad_alternation", bad, {}, True, bos, eos, template_file=fixture))
        if not system_ok:
            cases.append(make_case(f"{short}/system_rejected", [SYSTEM, {"role": "user", "content": "hi"}], {},
                                   True, bos, eos, template_file=fixture))
    fixture = "llama-3.1-8b-instruct.jinja"
    base = [SYSTEM, {"role": "user", "content": "What day is it?"}]
    cases.append(make_case("llama3.1/date_string", base, {"date_string": "15 Aug 2025"}, True,
                           "<|begin_of_text|>", "<|eot_id|>", template_file=fixture))
    for short, fixture, bos, eos in [("llama3.1", "llama-3.1-8b-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
                                     ("qwen2.5", "qwen2.5-instruct.jinja", "", "<|im_end|>"),
                                     ("qwen3", "qwen3.jinja", "", "<|im_end|>")]:
        cases.append(make_case(f"{short}/tools", TOOL_CONVERSATION, {"tools": [WEATHER_TOOL]}, True, bos, eos,
                               template_file=fixture))
    cases.append(make_case("llama3.1/tools_in_system", TOOL_CONVERSATION[:2],
                           {"tools": [WEATHER_TOOL], "tools_in_user_message": False}, True,
                           "<|begin_of_text|>", "<|eot_id|>", template_file="llama-3.1-8b-instruct.jinja"))
    cases.append(make_case("llama3.1/builtin_tools", TOOL_CONVERSATION[:2],
                           {"builtin_tools": ["code_interpreter", "brave_search"]}, True,
                           "<|begin_of_text|>", "<|eot_id|>", template_file="llama-3.1-8b-instruct.jinja"))
    mistral_tools = [
        {"role": "user", "content": "Weather in Zürich?"},
        {"role": "assistant", "tool_calls": [
            {"id": "abc123xyz", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
        {"role": "tool", "tool_call_id": "abc123xyz", "content": "21C"},
        {"role": "assistant", "content": "It is 21C."},
        {"role": "user", "content": "Thanks"},
    ]
    cases.append(make_case("mistral-v0.3/tools", mistral_tools, {"tools": [WEATHER_TOOL]}, True, "<s>", "</s>",
                           template_file="mistral-7b-instruct-v0.3.jinja"))
    bad_id = [dict(m) for m in mistral_tools[:2]]
    bad_id[1] = {"role": "assistant", "tool_calls": [{"id": "short", "function": {"name": "f", "arguments": {}}}]}
    cases.append(make_case("mistral-v0.3/bad_tool_call_id", bad_id, {}, True, "<s>", "</s>",
                           template_file="mistral-7b-instruct-v0.3.jinja"))
    # Role-order errors: the template's raise_exception message must come back verbatim.
    assistant_first = [{"role": "assistant", "content": "I speak first."}, {"role": "user", "content": "hi"}]
    system_assistant = [SYSTEM, {"role": "assistant", "content": "Hello."}]
    user_twice_after_system = [SYSTEM, {"role": "user", "content": "one"}, {"role": "assistant", "content": "a"},
                               {"role": "assistant", "content": "b"}]
    tool_role = [{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}]
    for short, fixture, bos, eos in [("gemma3", "gemma-3-it.jinja", "<bos>", "<eos>"),
                                     ("llama2", "llama-2-7b-chat.jinja", "<s>", "</s>"),
                                     ("mistral-v0.1", "mistral-7b-instruct-v0.1.jinja", "<s>", "</s>"),
                                     ("mistral-v0.2", "mistral-7b-instruct-v0.2.jinja", "<s>", "</s>")]:
        cases.append(make_case(f"{short}/assistant_first", assistant_first, {}, True, bos, eos,
                               template_file=fixture))
        cases.append(make_case(f"{short}/system_then_assistant", system_assistant, {}, True, bos, eos,
                               template_file=fixture))
        cases.append(make_case(f"{short}/assistant_twice", user_twice_after_system, {}, True, bos, eos,
                               template_file=fixture))
    for short, fixture in [("mistral-v0.1", "mistral-7b-instruct-v0.1.jinja"),
                           ("mistral-v0.2", "mistral-7b-instruct-v0.2.jinja")]:
        cases.append(make_case(f"{short}/tool_role_rejected", tool_role, {}, True, "<s>", "</s>",
                               template_file=fixture))
    # Llama 2 puts bos_token before every [INST] and strips each message.
    cases.append(make_case("llama2/system_multi_turn_stripped", [
        {"role": "system", "content": "  Answer briefly.\n"},
        {"role": "user", "content": " First? "},
        {"role": "assistant", "content": "\nYes.  "},
        {"role": "user", "content": "Second?"},
        {"role": "assistant", "content": "No."},
    ], {}, False, "<s>", "</s>", template_file="llama-2-7b-chat.jinja"))
    # Gemma 3: content as a list of parts (text and image), and a system message given as parts.
    gemma3_parts = [
        {"role": "system", "content": [{"type": "text", "text": "Describe images. "}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  What is this?  "}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
        {"role": "user", "content": "And now?"},
    ]
    cases.append(make_case("gemma3/content_parts", gemma3_parts, {}, True, "<bos>", "<eos>",
                           template_file="gemma-3-it.jinja"))
    cases.append(make_case("gemma3/invalid_content_type", [{"role": "user", "content": 5}], {}, True, "<bos>",
                           "<eos>", template_file="gemma-3-it.jinja"))
    cases.append(make_case("qwen3/thinking_disabled", [{"role": "user", "content": "Hi"}],
                           {"enable_thinking": False}, True, template_file="qwen3.jinja"))
    return cases


# --- constructs ----------------------------------------------------------------------------------

# (name, template, extra variables). Each is rendered by jinja2 and compared byte for byte; one
# that jinja2 rejects must be rejected by the C++ interpreter too.
D = {"a": 1, "b": [1, 2, 3], "c": {"x": "y"}, "s": "  Hello, World  ", "e": "", "n": None, "f": 2.5,
     "u": "héllo wörld", "t": True, "msgs": [{"role": "user", "content": "hi", "n": 2},
                                             {"role": "assistant", "content": "yo", "n": 1},
                                             {"role": "user", "content": "bye", "n": 3}]}

CONSTRUCTS = [
    # output, literals, printing Python values
    ("print_literals", "{{ 1 }}|{{ 1.5 }}|{{ 'x' }}|{{ \"y\" }}|{{ true }}|{{ False }}|{{ none }}|{{ None }}", {}),
    ("print_containers", "{{ [1, 'a', none, true, 2.0] }}|{{ {'k': 'v', 'n': [1]} }}|{{ (1,) }}|{{ (1, 2) }}|{{ () }}|{{ [] }}|{{ {} }}", {}),
    ("print_tuple_expr", "{{ 1, 2 }}", {}),
    ("print_floats", "{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1e16 }}|{{ 1.5e-5 }}|{{ 0.0001 }}|{{ 123456789.123 }}|{{ 3.0 }}|{{ -0.0 }}|{{ 1/3 }}", {}),
    ("print_string_repr", "{{ ['it\\'s', 'say \"hi\"', 'both \\' \"', 'nl\\n', 'tab\\t', 'back\\\\slash', 'é'] }}", {}),
    ("print_undefined", "[{{ nope }}][{{ c.missing }}][{{ b[10] }}]", D),
    ("print_more_floats", "{{ [1e-7, 1.7976931348623157e308, 5e-324, 100.0, 1e15, 123456789012345678.0, 0.5, 2.5e-5, 1e300 * 1e300, -1e300 * 1e300, 2 ** 62] }}", {}),
    ("print_unicode_repr", "{{ ['\\x01\\x7f', '\\u00a0\\u00ad\\u2028\\u200b', 'é日本🎉', '\\ue000'] }}", {}),
    ("print_nested", "{{ {'a': {'b': [1, (2, 3), {'c': none}]}, 'd': 'it\\'s'} }}", {}),
    ("string_escapes", "{{ 'a\\tb\\nc' }}|{{ \"\\u00e9\\x41\\101\" }}|{{ 'keep \\d \\q' }}|{{ 'q\\'s' }}", {}),
    ("adjacent_strings", "{{ 'a' 'b' \"c\" }}", {}),
    ("comments", "a{# comment #}b{#- trimmed -#}  c", {}),
    # whitespace control, trim_blocks, lstrip_blocks
    ("ws_trim_blocks", "{% if true %}\nyes\n{% endif %}\nend", {}),
    ("ws_lstrip_blocks", "  {% if true %}\n  x\n  {% endif %}\n  y  {{ 1 }}\n", {}),
    ("ws_minus", "a  {%- if true -%}  b  {%- endif -%}  c", {}),
    ("ws_var_minus", "a  {{- 'b' -}}  \n c {{ 'd' }} \n", {}),
    ("ws_plus_lstrip", "  {%+ if true %}x{% endif %}", {}),
    ("ws_plus_trim", "{% if true +%}\nx{% endif %}", {}),
    ("ws_comment_lstrip", "a\n  {# c #}\n  b", {}),
    ("ws_comment_minus", "a\n  {#- c #}\n  b", {}),
    ("ws_inline_block_not_stripped", "x  {% if true %}y{% endif %}  z", {}),
    ("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n", {}),
    ("ws_trailing_newline", "x\n", {}),
    ("ws_two_trailing_newlines", "x\n\n", {}),
    ("ws_tab_indent", "\t{% for i in [1,2] %}\n\t{{ i }}\n\t{% endfor %}\n", {}),
    ("ws_nested", "{% for i in [1, 2] %}\n    {% if i == 2 %}\n        two\n    {% else %}\n        one\n    {% endif %}\n{% endfor %}\n", {}),
    ("ws_minus_unicode_space", "a\u3000{%- if true %}b{% endif %}", {}),
    ("ws_lstrip_after_output_line", "{{ 'x' }}\n  {% if true %}y{% endif %}|{{ 'x' }}  {% if true %}y{% endif %}", {}),
    ("ws_inline_blocks_in_line", "a {% if true %}b{% endif %} c\n  d {% for i in [1] %}{{ i }}{% endfor %}\n", {}),
    ("ws_minus_both_comment", "a\n  {#- c -#}\n  b", {}),
    ("ws_block_end_no_newline", "{% if true %}x{% endif %}y\n{% if true %}\n\nz{% endif %}", {}),
    ("ws_var_does_not_trim", "{{ 'a' }}\n{{ 'b' }}\n", {}),
    ("ws_set_lines", "{% set a = 1 %}\n{% set b = 2 %}\n{{ a + b }}\n", {}),
    ("ws_raw_strip", "x  {%- raw -%}  {{ y }}  {%- endraw -%}  z", {}),
    ("raw_block", "{% raw %}{{ x }} {% if %}{% endraw %}!", {}),
    # operators
    ("arith_int", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 8 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}", {}),
    ("arith_float", "{{ 10.5 // 4 }} {{ -7.5 // 2 }} {{ 10 % 4.5 }} {{ -3.5 % 2 }} {{ 1.5 * 2 }} {{ 2 ** 0.5 }} {{ 1 + true }}", {}),
    ("arith_precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 10 - 2 - 3 }} {{ 2 * 3 % 4 }}", {}),
    ("unary", "{{ -a }} {{ +a }} {{ - -1 }} {{ -f }} {{ not a }} {{ not not a }}", D),
    ("string_ops", "{{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ 3 * 'x' }} {{ 'a' ~ 1 ~ none ~ true }} {{ [1] + [2, 3] }} {{ [0] * 3 }} {{ (1,) + (2,) }}", {}),
    ("concat_binds_tighter_than_plus", "{{ 'x' ~ 2 * 3 }} {{ 1 ~ 2 ~ 3 }}", {}),
    ("concat_precedence_error", "{{ 1 + 2 ~ 3 }}", {}),
    ("concat_undefined", "{{ 'a' ~ nope ~ 'b' }}", {}),
    ("compare", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 4 >= 4 }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}", {}),
    ("compare_mixed_eq", "{{ 1 == '1' }} {{ none == none }} {{ nope == nope2 }} {{ [1] == [1] }} {{ {'a': 1} == {'a': 1} }} {{ (1,) == [1] }}", {}),
    ("in_operator", "{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'x' in {'x': 1} }} {{ 'z' not in 'abc' }} {{ 5 not in [1] }} {{ 1 in nope }}", {}),
    ("logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ none or none }} {{ a and b }} {{ e or 'default' }}", D),
    ("logic_precedence", "{{ not 1 == 2 }} {{ true or false and false }} {{ not true or true }}", {}),
    ("ternary", "{{ 'y' if t else 'n' }} {{ 'y' if e else 'n' }} [{{ 'x' if false }}] {{ 1 if false else 2 if false else 3 }}", D),
    ("subscripts", "{{ b[0] }} {{ b[-1] }} {{ c['x'] }} {{ c.x }} {{ msgs[1].role }} {{ msgs[1]['content'] }} {{ b.1 }} {{ 'hello'[1] }} {{ u[1] }}", D),
    ("slices", "{{ b[1:] }} {{ b[:-1] }} {{ b[::-1] }} {{ b[::2] }} {{ b[5:] }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ u[::-1] }} {{ u[2:5] }} {{ b[-2:] }} {{ 'abc'[-100:100] }} {{ b[3:0:-1] }}", D),
    ("slices_none_bounds", "{{ b[none:2] }} {{ b[1:none] }} {{ 'abcdef'[-2::-2] }} {{ 'x' * -1 }}|{{ [1] * 0 }}", D),
    ("slice_zero_step_error", "{{ b[::0] }}", D),
    ("slice_tuple", "{{ (1, 2, 3)[1:] }}", {}),
    # statements
    ("if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.depth }};{% endfor %}", {}),
    ("for_prev_next", "{% for x in [1, 2, 3] %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", {}),
    ("for_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("for_else", "{% for x in [] %}a{% else %}empty{% endfor %}|{% for x in [1] %}a{% else %}empty{% endfor %}", {}),
    ("for_else_break", "{% for x in [1, 2] %}{% break %}{% else %}E{% endfor %}|{% for x in [1, 2] %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% else %}E{% endfor %}", {}),
    ("for_filter", "{% for m in msgs if m.role == 'user' %}{{ loop.index }}/{{ loop.length }}:{{ m.content }} {% endfor %}", D),
    ("for_dict", "{% for k in c %}{{ k }}{% endfor %} {% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %} {% for k, v in c|items %}{{ k }}{{ v }}{% endfor %}", D),
    ("for_unpack_parens", "{% for (a, b) in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}", {}),
    ("for_string", "{% for ch in 'héllo' %}{{ ch }}.{% endfor %}", {}),
    ("for_undefined", "{% for x in nope %}x{% else %}none{% endfor %}", {}),
    ("for_none_error", "{% for x in n %}x{% endfor %}", D),
    ("for_break_continue", "{% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("for_nested_loop", "{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("scope_for_set", "{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("scope_for_no_leak", "{% for i in range(2) %}{% set y = i %}{% endfor %}{{ y is defined }}|{{ i is defined }}", {}),
    ("scope_if_leaks", "{% if true %}{% set z = 5 %}{% endif %}{{ z }}", {}),
    ("namespace", "{% set ns = namespace(count=0, items=[]) %}{% for m in msgs %}{% set ns.count = ns.count + m.n %}{% set ns.items = ns.items + [m.role] %}{% endfor %}{{ ns.count }} {{ ns.items }} {{ ns.missing }}", D),
    ("namespace_print", "{% set ns = namespace(a=1) %}{% set ns.b = 'x' %}{{ ns }}", {}),
    ("namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", {}),
    ("set_tuple_unpack", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set x, y = 'xy' %}{{ y }}{{ x }}", {}),
    ("set_unpack_error", "{% set a, b = [1, 2, 3] %}", {}),
    ("set_block", "{% set s %}abc{{ 1 + 1 }}\n{% endset %}[{{ s }}]", {}),
    ("set_overrides_context", "{% set messages = messages[1:] %}{{ messages|length }}", {"messages": [1, 2, 3]}),
    ("set_nonnamespace_attr_error", "{% set x = 1 %}{% set x.y = 2 %}", {}),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("macro_basic", "{% macro m(a, b='x', c=none) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(1, c=3) }}{{ m() }}", {}),
    ("macro_scope", "{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}{% for x in [5] %}{{ m() }}{% endfor %}", {}),
    ("macro_in_loop_closure", "{% for a in [1, 2] %}{% macro m() %}{{ a }}{% endmacro %}{{ m() }}{% endfor %}", {}),
    ("macro_recursive", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}),
    ("macro_bad_kwarg", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", {}),
    ("call_block", "{% macro box(title) %}<{{ title }}:{{ caller() }}>{% endmacro %}{% call box('t') %}inner {{ 1 + 1 }}{% endcall %}", {}),
    ("call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}({{ v }}){% endcall %}", {}),
    ("filter_block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}|{% filter trim|title %}  x y  {% endfilter %}", {}),
    ("generation_block", "a{% generation %}b{{ 1 }}{% endgeneration %}c", {}),
    # filters
    ("f_trim_case", "[{{ s|trim }}][{{ s|upper }}][{{ s|lower }}][{{ 'hELLO wORLD'|capitalize }}][{{ \"they're a-b (c)d [e\"|title }}][{{ u|upper }}][{{ 'xxhixx'|trim('x') }}]", D),
    ("unicode_case", "{{ 'ΟΔΟΣ ΟΔΟΣ.'|lower }}|{{ 'straße ﬁne ŉ'|upper }}|{{ 'ǆemal ßa'|title }}|{{ 'ǆEMAL'|capitalize }}|{{ 'İstanbul'|lower }}|{{ 'Ωμέγα ἀρχή'|upper }}|{{ 'ԱԲԳ აბგ'|lower }}|{{ 'աբգ'|upper }}|{{ 'ǅ'|upper }}{{ 'ǅ'|lower }}", {}),
    ("unicode_classes", "{{ 'éa'.isalpha() }}{{ '日本'.isalpha() }}{{ '١٢'.isalpha() }}{{ '١٢٣'.isdigit() }}{{ '١٢a'.isalnum() }}{{ 'Σ'.isupper() }}{{ 'ǅ'.islower() }}{{ 'hello wORLD'.title() }}{{ 'a1b'.title() }}", {}),
    ("f_length", "{{ b|length }} {{ c|count }} {{ u|length }} {{ nope|length }} {{ ''|length }} {{ '日本'|length }}", D),
    ("f_first_last", "{{ b|first }} {{ b|last }} {{ 'abc'|first }} {{ 'abc'|last }} {{ c|first }} [{{ []|first }}]", D),
    ("f_join", "{{ b|join(', ') }} {{ ['a', 'b']|join }} {{ msgs|join('-', attribute='role') }} {{ [1, none, 'x']|join('|') }}", D),
    ("f_default", "{{ nope|default('d') }} {{ e|default('d') }} {{ e|default('d', true) }} {{ n|d('x') }} {{ n|default('x', boolean=true) }} {{ nope|default }}", D),
    ("f_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} {{ 123|replace('2', 'x') }}", {}),
    ("f_tojson", "{{ c|tojson }} {{ msgs|tojson }} {{ 'é\"\\n\\t\\u0001'|tojson }} {{ [1, 2.5, none, true, false]|tojson }} {{ (1, 2)|tojson }} {{ {}|tojson }} {{ []|tojson }}", D),
    ("f_tojson_indent", "{{ {'a': [1, {'b': none}], 'c': {}, 'd': []}|tojson(indent=2) }}\n{{ [1]|tojson(indent=0) }}\n{{ {'z': 1, 'a': 2}|tojson(sort_keys=true) }}\n{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}\n{{ 'é'|tojson(ensure_ascii=true) }}\n{{ '😀'|tojson(ensure_ascii=true) }}", {}),
    ("f_tojson_undefined_error", "{{ nope|tojson }}", {}),
    ("f_string_int_float", "{{ 12|string ~ 'x' }} {{ '42'|int + 1 }} {{ '3.7'|int }} {{ 3.7|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(base=16) }} {{ ' 12 '|int }} {{ '1_000'|int }} {{ 3|float }} {{ '2.5'|float }} {{ 'y'|float }} {{ true|int }} {{ none|int }}", {}),
    ("f_list_items", "{{ 'ab'|list }} {{ c|list }} {{ c|items|list }} {{ nope|items|list }} {{ (1, 2)|list }}", D),
    ("f_select_reject", "{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ [1, 5, 10]|select('gt', 3)|list }} {{ ['a', 'b']|select('in', ['b', 'c'])|list }}", {}),
    ("f_selectattr", "{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ msgs|rejectattr('role', 'eq', 'user')|list|length }} {{ msgs|selectattr('n', 'gt', 1)|list|length }} {{ msgs|selectattr('tool_calls', 'undefined')|list|length }} {{ msgs|selectattr('missing')|list }}", D),
    ("f_map", "{{ msgs|map(attribute='n')|list }} {{ ['a', 'b']|map('upper')|list }} {{ msgs|map(attribute='zz', default='?')|list }} {{ [[1, 2], [3]]|map('length')|list }} {{ ['a,b']|map('replace', ',', ';')|list }}", D),
    ("f_sort", "{{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ msgs|sort(attribute='n')|map(attribute='content')|list }} {{ msgs|sort(attribute='role,n')|map(attribute='n')|list }}", D),
    ("f_sort_mixed_error", "{{ [1, 'a']|sort }}", {}),
    ("f_unique_reverse", "{{ ['b', 'A', 'a', 'b']|unique|list }} {{ ['b', 'A', 'a']|unique(case_sensitive=true)|list }} {{ b|reverse|list }} {{ 'abc'|reverse }} {{ u|reverse }}", D),
    ("f_dictsort", "{{ {'b': 1, 'A': 3, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}", {}),
    ("f_numeric", "{{ -3|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 3.14159|round(2) }} {{ 2.675|round(2) }} {{ 3|round }} {{ 3.7|round(method='floor') }} {{ 3.2|round(method='ceil') }} {{ 1234.5|round(-2) }} {{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ msgs|sum(attribute='n') }} {{ [3, 1, 2]|max }} {{ [3, 1, 2]|min }} {{ ['b', 'A']|max }} {{ msgs|max(attribute='n') }}", D),
    ("f_format", "{{ '%s and %d'|format('x', 3) }} {{ '%5.2f|%-4s|%03d|%r|%%|%x|%e'|format(3.14159, 'a', 7, 'x', 255, 12345.678) }} {{ 'hi %s' % 'there' }} {{ '%s-%s' % (1, 2) }}", {}),
    ("f_escape_safe", "{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|escape }} {{ '<i>'|safe }} {{ 5|safe }}", {}),
    ("f_markup", "{% macro f() %}x{% endmacro %}{{ 'a<\\'' + f() + '>' }}|{{ ('<'|e) + '<' }}|{{ ('<'|safe) + '<\"' }}|{{ '<' + ('&'|safe) }}|{{ ('<b>'|e)|e }}|{{ '<'|forceescape|forceescape }}|{{ ('<'|e) is escaped }}{{ '<' is escaped }}{{ f() is escaped }}|{{ ('%s|%d'|safe) % ('<', 3) }}|{{ ('<'|e) ~ '<' }}", {}),
    ("macro_output_is_plain", "{% macro f() %}{{ caller() + '<' }}{% endmacro %}{% call f() %}c&{% endcall %}", {}),
    ("f_indent", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(width='> ', blank=true) }}|{{ 'x\\n'|indent(2) }}", {}),
    ("f_batch", "{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }}", {}),
    ("f_attr", "{{ c|attr('x') }}|{{ 'abc'|attr('upper') is defined }}", D),
    ("generators", "{% if []|select %}truthy{% endif %}|{% set g = [1, 2]|select %}{% for x in g %}{{ x }}{% endfor %}|{% for x in g %}{{ x }}{% endfor %}|{{ g|list }}|[{{ ([1, 2]|select)[0] }}]|{{ ([1, 2]|select)|first }}|{{ ([1, 2]|select) == [1, 2] }}|{{ 1 in [1, 2]|select }}|{{ ([3, 1]|map('int'))|reverse }}|{% for x in [3, 1]|select %}{{ loop.length }}{{ loop.last }}{% endfor %}|{{ [1, 2]|select|sort }}|{{ ([1]|select) is iterable }}{{ ([1]|select) is sequence }}|{{ [1, 2]|reverse|first }}|{{ 'ab'|reverse|length }}", {}),
    ("generator_len_error", "{{ [1, 2]|map('string')|length }}", {}),
    ("generator_reverse_len_error", "{{ [1, 2]|reverse|length }}", {}),
    ("generator_last_error", "{{ [1, 2]|select|last }}", {}),
    ("generator_tojson_error", "{{ [1, 2]|select|tojson }}", {}),
    ("generator_add_error", "{{ ([1, 2]|select) + [3] }}", {}),
    ("generator_items_len_error", "{{ {'a': 1}|items|length }}", {}),
    ("slice_bool_bound", "{{ b[true:] }} {{ b[:false] }} [{{ a[0] }}] [{{ n[0] }}]", D),
    ("slice_non_sequence_error", "{{ n[1:] }}", D),
    ("slice_int_error", "{{ a[::-1] }}", D),
    ("slice_str_bound_error", "{{ b['a':] }}", D),
    ("slice_undefined_bound_error", "{{ b[nope:] }}", D),
    ("slice_generator_error", "{{ (b|select)[1:] }}", D),
    ("slice_undefined_error", "{{ nope[1:] }}", {}),
    ("f_chained", "{{ msgs|map(attribute='content')|map('upper')|join('/')|replace('/', ' | ')|lower|title }}", D),
    ("f_on_undefined", "[{{ nope|upper }}][{{ nope|trim }}][{{ nope|join(',') }}][{{ nope|list }}][{{ nope|first }}][{{ nope|last }}][{{ nope|string }}][{{ nope|sort }}][{{ nope|sum }}][{{ nope|max }}][{{ nope|replace('a', 'b') }}][{{ nope|selectattr('x')|list }}][{{ nope|batch(2)|list }}][{{ nope|title }}]", {}),
    ("f_int_undefined_error", "{{ nope|int }}", {}),
    ("f_float_undefined_error", "{{ nope|float }}", {}),
    ("f_indent_undefined_error", "{{ nope|indent }}", {}),
    ("f_unary_minus_binds_tighter", "{{ -1|abs }} {{ -(1|abs) }} {{ not e|length }}", D),
    # tests
    ("tests_types", "{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ 'a' is string }}{{ n is none }}{{ c is mapping }}{{ b is mapping }}{{ true is boolean }}{{ 1 is boolean }}", D),
    ("tests_iterable", "{{ 'a' is iterable }}{{ b is iterable }}{{ c is iterable }}{{ 1 is iterable }}{{ nope is iterable }}{{ n is iterable }}{{ 'a' is sequence }}{{ c is sequence }}{{ 1 is sequence }}", D),
    ("tests_defined", "{{ a is defined }}{{ nope is defined }}{{ nope is undefined }}{{ c.x is defined }}{{ c.zz is defined }}{{ msgs[0].tool_calls is not defined }}{{ b[9] is defined }}", D),
    ("tests_values", "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 'aBc' is lower }}", {}),
    ("tests_compare", "{{ 'x' is eq 'x' }}{{ 'x' is equalto 'y' }}{{ 3 is gt 2 }}{{ 3 is ge 3 }}{{ 3 is lt 2 }}{{ 3 is le 3 }}{{ 3 is ne 3 }}{{ 3 is greaterthan 1 }}{{ 3 is lessthan 1 }}{{ 2 is in [1, 2] }}{{ 'a' is in 'cat' }}", {}),
    ("tests_negated", "{{ 1 is not string }}{{ n is not none }}{{ nope is not defined }}{{ not a is defined }}", D),
    ("tests_misc", "{{ c is sameas c }}{{ none is sameas none }}{{ range is callable }}{{ 1 is callable }}{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}", D),
    # methods
    ("m_strip", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxhixx'.strip('x') }}][{{ '\\n\\nx\\n'.lstrip('\\n') }}][{{ 'ab\\n\\n'.rstrip('\\n') }}]", D),
    ("m_split", "{{ 'a,b,,c'.split(',') }} {{ '  a  b  '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'x'.split('y') }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }} {{ '<think>a</think>b'.split('</think>')[-1] }}", {}),
    ("m_affix", "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith('lo') }}{{ 'hello'.startswith(('x', 'h')) }}{{ 'hello'.endswith('x') }}{{ 'hello'.startswith('l', 2) }}", {}),
    ("m_case_find", "{{ 'Hello World'.upper() }} {{ 'Hello World'.lower() }} {{ 'hello world'.title() }} {{ \"they're\".title() }} {{ 'hELLO'.capitalize() }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ 'héllo'.find('l') }} {{ 'a-b'.replace('-', '+') }}", {}),
    ("m_join_format", "{{ ', '.join(['a', 'b']) }} {{ '{} and {}'.format(1, 'x') }} {{ '{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='Bob') }} {{ '{{literal}}'.format() }}", {}),
    ("m_is", "{{ '123'.isdigit() }}{{ '12a'.isdigit() }}{{ 'abc'.isalpha() }}{{ 'ab1'.isalnum() }}{{ '  '.isspace() }}{{ 'abc'.islower() }}{{ 'ABC'.isupper() }}", {}),
    ("m_dict", "{{ c.get('x') }} {{ c.get('zz') }} {{ c.get('zz', 'd') }} {{ c.keys()|list }} {{ c.values()|list }} {{ c.items()|list }} {{ {'a': 1}.items()|list }}", D),
    ("m_list", "{{ b.index(2) }} {{ b.count(3) }}", D),
    ("m_mutation_blocked", "{{ b.append(4) }}", D),
    # globals
    ("g_range", "{{ range(5)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }} {{ range(3)|length }}", {}),
    ("g_range_too_big", "{{ range(1000000)|length }}", {}),
    ("g_dict", "{{ dict(a=1, b='x') }} {{ dict(a=1)|tojson }}", {}),
    ("g_raise", "{% if true %}{{ raise_exception('Custom failure: ' ~ 42) }}{% endif %}", {}),
    # errors Jinja raises at render time
    ("err_attr_of_undefined", "{{ nope.attr }}", {}),
    ("err_defined_on_undefined_attr", "{{ nope.attr is defined }}", {}),
    ("err_add_undefined", "{{ nope + 1 }}", {}),
    ("err_type_add", "{{ 'a' + 1 }}", {}),
    ("err_compare", "{{ 1 < 'a' }}", {}),
    ("err_div_zero", "{{ 1 / 0 }}", {}),
    ("err_call_undefined", "{{ nope() }}", {}),
    ("err_call_non_callable", "{{ a() }}", D),
    ("err_in_none", "{{ 'a' in n }}", D),
    ("err_break_outside", "{% break %}", {}),
    ("err_syntax_unclosed_if", "{% if true %}x", {}),
    ("err_syntax_unknown_filter", "{{ 'x'|frobnicate }}", {}),
    ("err_syntax_unknown_test", "{{ 'x' is frobnicated }}", {}),
    ("err_syntax_bad_expr", "{{ 1 + }}", {}),
    ("err_syntax_unclosed_tag", "{{ x ", {}),
    ("err_syntax_stray_end", "{% endif %}", {}),
    ("err_syntax_unterminated_string", "{{ 'abc }}", {}),
    ("err_syntax_unclosed_comment", "a {# comment", {}),
]


def construct_cases():
    return [make_case("construct/" + name, [], extra, False, "", "", source=source)
            for name, source, extra in CONSTRUCTS]


def main():
    extract_smollm2_template()
    cases = model_cases() + construct_cases()
    out = {
        "generator": "tests/reference/make_chat_template_expectations.py",
        "jinja2_version": jinja2.__version__,
        "cases": cases,
    }
    path = os.path.join(DATA, "expectations.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"wrote {len(cases)} cases ({errors} expected errors) to {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
