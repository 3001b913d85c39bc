#!/usr/bin/env python3
"""The official OpenAI Python client calling tools through `kvik serve`.

    openai_tools_test.py --base-url http://127.0.0.1:PORT/v1 [--api-key KEY]

Run by tests/test_serve_tools.c on a server of Qwen2.5-Coder (its template
asks for Hermes-style <tool_call> blocks), in the venv of
scripts/serve-venv.sh. Greedy throughout. The checks: a question the tool
answers gets a call (name, arguments that parse and name the city,
finish_reason "tool_calls", an id); the tool loop: the call and the tool's
result sent back (the history through the template: the assistant's
tool_calls and the tool message), the model answers in text with the
result's figure;
streaming gives the same call as deltas; tool_choice "required" and a
named function force a call, "none" gets text; bad tools, an unknown
function and a tool message without its call id are BadRequestErrors.
Prints one line per check and "N passed, N failed"; exits 1 if anything
failed.
"""
import argparse
import json
import sys
import traceback

import openai
from openai import OpenAI

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}, {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the local time in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]

QUESTION = [{"role": "user", "content": "What is the weather like in Paris right now?"}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--api-key", default="none")
    args = ap.parse_args()
    client = OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=300)
    model = client.models.list().data[0].id
    checks = []

    def check(name):
        def wrap(fn):
            checks.append((name, fn))
            return fn
        return wrap

    def ask(messages, **kw):
        return client.chat.completions.create(model=model, messages=messages, tools=TOOLS, temperature=0,
                                              max_tokens=120, **kw)

    def weather_call(msg):
        assert msg.tool_calls, "no tool call: %r" % msg.content
        call = msg.tool_calls[0]
        assert call.type == "function" and call.id.startswith("call_"), call
        assert call.function.name == "get_weather", call.function.name
        a = json.loads(call.function.arguments)
        assert "paris" in a.get("city", "").lower(), a
        return call

    @check("auto: the question gets a get_weather call")
    def _():
        r = ask(QUESTION)
        assert r.choices[0].finish_reason == "tool_calls", r.choices[0].finish_reason
        weather_call(r.choices[0].message)

    @check("the tool loop: call, result, answer")
    def _():
        r = ask(QUESTION)
        msg = r.choices[0].message
        call = weather_call(msg)
        history = QUESTION + [msg.model_dump(exclude_none=True),
                              {"role": "tool", "tool_call_id": call.id,
                               "content": json.dumps({"city": "Paris", "temperature_c": 17, "sky": "overcast"})}]
        # the answer turn: the tools are still sent; tool_choice "none" asks
        # for text (Qwen2.5-Coder-1.5B otherwise tends to call again)
        r2 = ask(history, tool_choice="none")
        text = r2.choices[0].message.content or ""
        assert r2.choices[0].finish_reason == "stop", (r2.choices[0].finish_reason, r2.choices[0].message)
        assert not r2.choices[0].message.tool_calls, r2.choices[0].message.tool_calls
        assert "17" in text, text
        print("    answer: %s" % text.replace("\n", " ")[:160])

    @check("streaming: the same call as deltas")
    def _():
        whole = ask(QUESTION).choices[0].message.tool_calls[0]
        calls, finish = {}, None
        for chunk in ask(QUESTION, stream=True):
            for ch in chunk.choices:
                for tc in ch.delta.tool_calls or []:
                    c = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                    c["id"] = tc.id or c["id"]
                    c["name"] += tc.function.name or ""
                    c["arguments"] += tc.function.arguments or ""
                    assert not ch.delta.content, ch.delta.content
                finish = ch.finish_reason or finish
        assert finish == "tool_calls", finish
        assert len(calls) == 1 and calls[0]["name"] == whole.function.name, calls
        assert json.loads(calls[0]["arguments"]) == json.loads(whole.function.arguments), calls
        assert calls[0]["id"].startswith("call_")

    @check("tool_choice required and named force a call")
    def _():
        msgs = [{"role": "user", "content": "Tell me about Rome."}]
        r = ask(msgs, tool_choice="required")
        assert r.choices[0].message.tool_calls, r.choices[0].message
        assert r.choices[0].message.tool_calls[0].function.name in ("get_weather", "get_time")
        r = ask(msgs, tool_choice={"type": "function", "function": {"name": "get_time"}})
        tc = r.choices[0].message.tool_calls
        assert tc and tc[0].function.name == "get_time", r.choices[0].message
        assert isinstance(json.loads(tc[0].function.arguments), dict)

    @check("tool_choice none answers in text")
    def _():
        r = ask([{"role": "user", "content": "Say hello."}], tool_choice="none")
        assert not r.choices[0].message.tool_calls and r.choices[0].message.content
        assert r.choices[0].finish_reason in ("stop", "length")

    @check("bad tools, an unknown function, a tool result without its id: 400")
    def _():
        bad = [dict(tools=[{"type": "function", "function": {"description": "no name"}}]),
               dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}),
               dict(tools=TOOLS, tool_choice="sometimes")]
        for kw in bad:
            try:
                client.chat.completions.create(model=model, messages=QUESTION, max_tokens=4, **kw)
            except openai.BadRequestError:
                continue
            raise AssertionError("accepted: %r" % kw)
        try:
            ask(QUESTION + [{"role": "assistant", "content": "x"}, {"role": "tool", "content": "17"}])
        except openai.BadRequestError:
            pass
        else:
            raise AssertionError("a tool message without tool_call_id was accepted")

    passed = failed = 0
    for name, fn in checks:
        try:
            fn()
            print("ok   %s" % name)
            passed += 1
        except Exception:
            print("FAIL %s" % name)
            traceback.print_exc(limit=3, file=sys.stdout)
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
