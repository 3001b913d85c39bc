#!/usr/bin/env python3
"""Decode speed with a JSON Schema against without, on one `kvik serve`.

    bench/grammar-decode.py --url http://127.0.0.1:8080/v1 [--schemas FILE] [--rounds N]

For each schema of the set (tests/data/schemas/schemas.json by default), in
turn: a streamed chat completion held to the schema (greedy), then the same
prompt without it, ignore_eos and max_tokens equal to the first reply's
completion tokens, so both decode as many tokens from the same prompt.
Decode speed is (tokens - 1) over the time from the first streamed token
to the last; the ratio is taken pair by pair and its median printed with
both medians. Requests run one at a time. Standard library only.
"""
import argparse
import json
import statistics
import time
import urllib.request


def stream(url, body):
    """(completion tokens, seconds from the first content chunk to the last)."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    first = last = None
    tokens = 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
            for ch in ev.get("choices", []):
                if ch.get("delta", {}).get("content"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
    return tokens, (last - first) if first and last else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--schemas", default="tests/data/schemas/schemas.json")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    schemas = json.load(open(args.schemas, encoding="utf-8"))
    ratios, with_s, without_s = [], [], []
    for _ in range(args.rounds):
        for s in schemas:
            msgs = [{"role": "system", "content": "Answer with JSON only."}, {"role": "user", "content": s["prompt"]}]
            n, t = stream(args.url, {"messages": msgs, "temperature": 0, "max_tokens": 500,
                                     "response_format": {"type": "json_schema",
                                                         "json_schema": {"name": s["name"], "schema": s["schema"]}}})
            if n < 8 or t <= 0:
                continue
            m, u = stream(args.url, {"messages": msgs, "temperature": 0, "max_tokens": n, "ignore_eos": True})
            if m != n or u <= 0:
                continue
            a, b = (n - 1) / t, (m - 1) / u
            with_s.append(a)
            without_s.append(b)
            ratios.append(a / b)
    out = {"pairs": len(ratios), "with_schema_tok_s": statistics.median(with_s),
           "without_tok_s": statistics.median(without_s), "ratio_median": statistics.median(ratios),
           "ratio_min": min(ratios), "ratio_max": max(ratios)}
    if args.json:
        print(json.dumps(out))
    else:
        print("%d pairs: with a schema %.1f tok/s, without %.1f tok/s (medians); ratio median %.3f (%.3f..%.3f)" %
              (out["pairs"], out["with_schema_tok_s"], out["without_tok_s"], out["ratio_median"], out["ratio_min"],
               out["ratio_max"]))


if __name__ == "__main__":
    main()
