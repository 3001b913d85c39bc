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
family's EOS text. Run from the repository root: python3 scripts/gen_chat_golden.py
(needs: pip install jinja2). The conversations must match CONVERSATIONS in
tests/test_chat.c.
"""
import os
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

# gemma-3-it.
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
}


def raise_exception(message):
    raise TemplateError(message)


def main():
    out_dir = os.path.join("tests", "data", "chat")
    if not os.path.isdir(out_dir):
        sys.exit("run from the repository root (tests/data/chat missing)")
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    for name, (text, eos) in TEMPLATES.items():
        with open(os.path.join(out_dir, name + ".jinja"), "wb") as f:
            f.write(text.encode("utf-8"))
        tmpl = env.from_string(text)
        for conv, msgs in CONVERSATIONS.items():
            messages = [{"role": r, "content": c} for r, c in msgs]
            for gen in (True, False):
                rendered = tmpl.render(messages=messages, add_generation_prompt=gen,
                                       bos_token="", eos_token=eos)
                path = os.path.join(out_dir, "%s.%s.%s.txt" % (name, conv, "gen" if gen else "nogen"))
                with open(path, "wb") as f:
                    f.write(rendered.encode("utf-8"))
    print("wrote", out_dir)


if __name__ == "__main__":
    main()
