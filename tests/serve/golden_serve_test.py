#!/usr/bin/env python3
"""llama.cpp's greedy continuations through a running `kvik serve`, asked
for by the official OpenAI Python client.

    golden_serve_test.py --base-url http://127.0.0.1:PORT/v1 --api-key KEY \
        --golden DIR

DIR holds the golden files of one model (tests/data/golden*/pNN.txt,
written by scripts/gen_golden.py from llama.cpp; format in
tests/data/golden/README.md). For each file the prompt goes to
/v1/completions as its token ids, greedy, for as many tokens as llama.cpp's
continuation is unambiguous: up to its first near-tie (top two
log-probabilities within CLEAR_MARGIN, as tests/test_golden.c) and no
further than its first end-of-generation token. The text must equal
llama.cpp's continuation of that length (its ids detokenized by the
server's /detokenize), whole and streamed alike, with usage counting the
tokens. Run by tests/test_serve.c (serve_golden_openai_client). Prints one
line per check and "N passed, N failed"; exits 1 if anything failed.
"""
import argparse
import json
import os
import sys
import urllib.request

from openai import OpenAI

CLEAR_MARGIN = 0.4


def load(path):
    g = {"top": {}}
    with open(path, encoding="ascii") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#") or " " not in line:
                continue
            key, val = line.split(" ", 1)
            if key in ("prompt_ids", "continuation_ids"):
                g[key] = [int(x) for x in val.split()]
            elif key in ("name", "n_prompt", "eos_at"):
                g[key] = val if key == "name" else int(val)
            elif key == "pos":
                i, rest = val.split(" ", 1)
                g["top"][int(i)] = [float(p.split(":")[1]) for p in rest.split()[:2]]
    return g


def clear_length(g):
    """Tokens of the continuation before llama.cpp's first near-tie or EOS."""
    n = len(g["continuation_ids"])
    if g["eos_at"] >= 0:
        n = min(n, g["eos_at"])
    for k in range(n):
        lp = g["top"][g["n_prompt"] - 1 + k]
        if lp[0] - lp[1] < CLEAR_MARGIN:
            return k
    return n


def detokenize(root, key, ids):
    req = urllib.request.Request(root + "/detokenize", data=json.dumps({"tokens": ids}).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["content"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--api-key", required=True)
    ap.add_argument("--golden", required=True)
    args = ap.parse_args()
    client = OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=300)
    root = args.base_url.rsplit("/v1", 1)[0]
    model = client.models.list().data[0].id
    passed = failed = checked = 0
    for name in sorted(os.listdir(args.golden)):
        if not (name.startswith("p") and name.endswith(".txt")):
            continue
        g = load(os.path.join(args.golden, name))
        k = clear_length(g)
        if k == 0:
            print("skip %s: llama.cpp's first token is a near-tie" % g["name"])
            continue
        want = detokenize(root, args.api_key, g["continuation_ids"][:k])
        # a character split between tokens: stop before it (the server's
        # text holds whole characters only)
        while k > 0 and want.endswith("\ufffd"):
            k -= 1
            want = detokenize(root, args.api_key, g["continuation_ids"][:k])
        if k == 0:
            print("skip %s: no whole character before llama.cpp's first near-tie" % g["name"])
            continue
        try:
            r = client.completions.create(model=model, prompt=g["prompt_ids"], max_tokens=k, temperature=0)
            got = r.choices[0].text
            assert r.usage.prompt_tokens == len(g["prompt_ids"]), (r.usage.prompt_tokens, len(g["prompt_ids"]))
            assert r.usage.completion_tokens == k, (r.usage.completion_tokens, k)
            assert got == want, "whole: %r != llama.cpp's %r" % (got, want)
            parts = []
            for ch in client.completions.create(model=model, prompt=g["prompt_ids"], max_tokens=k, temperature=0,
                                                stream=True):
                if ch.choices:
                    parts.append(ch.choices[0].text or "")
            assert "".join(parts) == want, "streamed: %r != llama.cpp's %r" % ("".join(parts), want)
            passed += 1
            checked += k
            print("ok   %s: %d tokens as llama.cpp's" % (g["name"], k))
        except Exception as e:  # noqa: BLE001 (every failure is reported and counted)
            failed += 1
            print("FAIL %s: %s" % (g["name"], e))
    print("%d tokens compared" % checked)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()
