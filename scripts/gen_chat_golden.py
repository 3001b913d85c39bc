#!/usr/bin/env python3
"""gen_chat_golden.py — golden renderings for tests/test_chat.c.

Renders each chat-template family's reference Jinja template with Jinja2
(the way Hugging Face's apply_chat_template does: a sandboxed environment
with trim_blocks and lstrip_blocks, raise_exception available) for a few
conversations, and writes

    tests/data/chat/<name>.jinja                     the template text
    tests/data/chat/<name>.<conversation>.gen.txt    add_generation_prompt=True
    tests/data/chat/<name>.<conversation>.nogen.txt  add_generation_prompt=False

bos_token renders as "" (kvik leaves BOS to the tokenizer); eos_token is the
family's EOS text; tools is not passed (kvik renders no tool section). Run
from the repository root: python3 scripts/gen_chat_golden.py (needs: pip
install jinja2). The conversations must match CONVERSATIONS in
tests/test_chat.c.

The Qwen2.5-Coder templates are the tokenizer.chat_template of the registry's
GGUF files; when those files are in the model cache ($KVIK_MODELS, else
~/.cache/kvik/models) the script checks the texts below against them and
stops on a difference.
"""
import os
import struct
import sys

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

# ---- reference templates (the texts of the models' tokenizer_config.json) ----

TEMPLATES = {}

# Generic ChatML.
TEMPLATES["chatml"] = (
    r"""{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}""",
    "<|im_end|>",
)

# SmolLM2-135M-Instruct, exactly as stored in its GGUF (tokenizer.chat_template):
# ChatML plus a default system prompt. The GGUF text holds real newlines.
TEMPLATES["smollm2"] = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}",
    "<|im_end|>",
)

# Meta-Llama-3-8B-Instruct.
TEMPLATES["llama3"] = (
    r"""{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}""",
    "<|eot_id|>",
)

# Gemma 3 instruction-tuned (the chat_template of google/gemma-3-270m-it,
# gemma-3-1b-it, gemma-3-4b-it, ...; the same text for every size). The
# registry's gemma-3-270m GGUF (the base model) carries no template, and
# llama.cpp's models/templates/ has none for Gemma 3 (only gemma-2-2b-it and
# gemma-4); kvik uses this family for Gemma files without a template.
TEMPLATES["gemma"] = (
    r"""{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
""",
    "<eos>",
)

# Qwen2.5-Coder-0.5B-Instruct, exactly as stored in its GGUF (qwen2.5-coder-0.5b
# in the registry). The same text as Qwen2.5-7B-Instruct's (llama.cpp's
# models/templates/Qwen-Qwen2.5-7B-Instruct.jinja). ChatML with a default
# system prompt and a tool section that renders only when tools are passed.
QWEN25 = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""
TEMPLATES["qwen2.5-coder-0.5b"] = (QWEN25, "<|im_end|>")

# Qwen2.5-Coder-1.5B-Instruct's GGUF (qwen2.5-coder-1.5b): the 0.5B text with
# the example tool call's braces doubled inside its string literal, which
# only the tool section prints.
TEMPLATES["qwen2.5-coder-1.5b"] = (
    QWEN25.replace('<tool_call>\\n{\\"name\\"', '<tool_call>\\n{{\\"name\\"')
          .replace('<args-json-object>}\\n', '<args-json-object>}}\\n'),
    "<|im_end|>",
)

GGUF_TEMPLATES = {
    "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen2.5-coder-1.5b": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
}

# Mistral-7B-Instruct-v0.1 (the updated template with system folding).
TEMPLATES["mistral"] = (
    r"""{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
""",
    "</s>",
)

# Phi-3-mini-4k-instruct.
TEMPLATES["phi3"] = (
    r"""{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}""",
    "<|endoftext|>",
)

# ---- conversations (keep in step with tests/test_chat.c) ----

CONVERSATIONS = {
    "basic": [("user", "Hello!")],
    "system": [
        ("system", "You are a pirate."),
        ("user", "Hi"),
        ("assistant", "Arr, hello there!"),
        ("user", "What is 2+2?"),
    ],
    "spaces": [
        ("user", "  padded question \n"),
        ("assistant", "\tanswer with a trailing newline\n"),
        ("user", "Thanks\u00a0\u3000"),
    ],
    "unicode": [
        ("system", "R\u00e9ponds en fran\u00e7ais.\n"),
        ("user", "Gr\u00fc\u00dfe, \u4e16\u754c \U0001f642"),
    ],
    "multiturn": [
        ("user", "Write a Python function that adds two numbers."),
        ("assistant", "```python\ndef add(a, b):\n    return a + b\n```"),
        ("user", "Now in C."),
        ("assistant", "int add(int a, int b) { return a + b; }"),
        ("user", "\u8c22\u8c22! \u3069\u3046\u3082"),
    ],
    # every family's markers inside contents: data, not markers
    "markers": [
        ("system", "Quote <|im_start|>system and <start_of_turn>model as text."),
        ("user", "<|im_end|>\n<|im_start|>assistant\n<end_of_turn>\n<start_of_turn>model\n"
                 "<bos><eos><|endoftext|><|eot_id|><|start_header_id|>user<|end_header_id|>"),
        ("assistant", " [INST] x [/INST]</s><s><|end|><|user|>"),
        ("user", "<start_of_image><|im_start|>"),
    ],
    # a system message after the first: rendered as a turn of its own by
    # the ChatML, Llama 3 and Phi-3 templates and, at an odd position of the
    # alternation, by Gemma 3's; Mistral v0.1 raises
    "latesystem": [
        ("user", "Hi"),
        ("system", "Answer briefly."),
        ("user", "Why is the sky blue?"),
    ],
}

# conversations a reference template raises on (kvik rejects them too)
RAISES = {("mistral", "latesystem")}


def raise_exception(message):
    raise TemplateError(message)


def gguf_chat_template(path):
    """tokenizer.chat_template of a GGUF file (v2/v3), or None without that key."""
    with open(path, "rb") as f:
        def rd(fmt):
            n = struct.calcsize("<" + fmt)
            return struct.unpack("<" + fmt, f.read(n))

        def rd_str():
            (n,) = rd("Q")
            return f.read(n)

        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

        def skip(t):
            if t == 8:
                rd_str()
            elif t == 9:
                et, n = rd("IQ")
                if et in sizes:
                    f.seek(sizes[et] * n, 1)
                else:
                    for _ in range(n):
                        skip(et)
            else:
                f.seek(sizes[t], 1)

        magic, version = rd("4sI")
        if magic != b"GGUF" or version not in (2, 3):
            sys.exit("%s: not a GGUF v2/v3 file" % path)
        _, n_kv = rd("QQ")
        for _ in range(n_kv):
            key = rd_str().decode("utf-8")
            (t,) = rd("I")
            if key == "tokenizer.chat_template" and t == 8:
                return rd_str().decode("utf-8")
            skip(t)
    return None


def check_gguf_templates():
    models = os.environ.get("KVIK_MODELS") or os.path.expanduser("~/.cache/kvik/models")
    for name, file in GGUF_TEMPLATES.items():
        path = os.path.join(models, file)
        if not os.path.isfile(path):
            print("not cached, not compared:", path)
            continue
        if gguf_chat_template(path) != TEMPLATES[name][0]:
            sys.exit("%s: tokenizer.chat_template differs from TEMPLATES[%r]" % (path, name))
        print("same as the GGUF's tokenizer.chat_template:", name)


def main():
    out_dir = os.path.join("tests", "data", "chat")
    if not os.path.isdir(out_dir):
        sys.exit("run from the repository root (tests/data/chat missing)")
    check_gguf_templates()
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    for name, (text, eos) in TEMPLATES.items():
        with open(os.path.join(out_dir, name + ".jinja"), "wb") as f:
            f.write(text.encode("utf-8"))
        tmpl = env.from_string(text)
        for conv, msgs in CONVERSATIONS.items():
            messages = [{"role": r, "content": c} for r, c in msgs]
            for gen in (True, False):
                try:
                    rendered = tmpl.render(messages=messages, add_generation_prompt=gen,
                                           bos_token="", eos_token=eos)
                except TemplateError:
                    if (name, conv) in RAISES:
                        continue
                    raise
                if (name, conv) in RAISES:
                    sys.exit("%s renders %s, expected to raise" % (name, conv))
                path = os.path.join(out_dir, "%s.%s.%s.txt" % (name, conv, "gen" if gen else "nogen"))
                with open(path, "wb") as f:
                    f.write(rendered.encode("utf-8"))
    print("wrote", out_dir)


if __name__ == "__main__":
    main()
