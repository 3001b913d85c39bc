#!/usr/bin/env python3
"""The official OpenAI Python client against `kvik serve`'s /v1/embeddings.

    openai_embeddings_test.py --base-url http://127.0.0.1:PORT/v1 --api-key KEY

Run by tests/test_serve.c (serve_openai_embeddings_client) on a server of
all-MiniLM-L6-v2 alone, in the venv of scripts/serve-venv.sh. The client
asks for base64 unless told otherwise and decodes it itself; the checks:
the same vectors as floats and as base64, unit length, one vector per
input in order, token-array input equal to the text's, usage, the model
id, a 400 as BadRequestError, a wrong key as AuthenticationError. Prints
one line per check and "N passed, N failed"; exits 1 if anything failed.
"""
import argparse
import math
import sys
import traceback

import openai
from openai import OpenAI


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--api-key", required=True)
    args = ap.parse_args()
    client = OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=120)
    model = client.models.list().data[0].id
    checks = []

    def check(name):
        def wrap(fn):
            checks.append((name, fn))
            return fn
        return wrap

    texts = ["The cat sat on the mat.", "Quantized inference on a CPU.", "", "日本語のテキスト"]

    @check("floats and base64 agree, unit length, in order")
    def _():
        f = client.embeddings.create(model=model, input=texts, encoding_format="float")
        b = client.embeddings.create(model=model, input=texts)  # the client's default: base64, decoded
        assert [d.index for d in f.data] == [0, 1, 2, 3] and len(b.data) == 4
        for x, y in zip(f.data, b.data):
            assert len(x.embedding) == 384 and len(y.embedding) == 384
            assert max(abs(p - q) for p, q in zip(x.embedding, y.embedding)) < 1e-6
            assert abs(math.sqrt(sum(v * v for v in x.embedding)) - 1) < 1e-4
        assert f.model == model and f.object == "list"
        assert f.usage.prompt_tokens == f.usage.total_tokens and f.usage.prompt_tokens > 8

    @check("related texts are closer than unrelated ones")
    def _():
        r = client.embeddings.create(model=model, input=["A cat sits on a mat.", "The kitten rests on the rug.",
                                                         "Interest rates rose in March."], encoding_format="float")
        e = [d.embedding for d in r.data]
        dot = lambda a, b: sum(p * q for p, q in zip(a, b))
        assert dot(e[0], e[1]) > dot(e[0], e[2]) + 0.2

    @check("token arrays equal the text")
    def _():
        a = client.embeddings.create(model=model, input="hello world", encoding_format="float").data[0].embedding
        t = client.embeddings.create(model=model, input=[7592, 2088], encoding_format="float").data[0].embedding
        assert max(abs(p - q) for p, q in zip(a, t)) < 1e-6

    @check("a bad request is BadRequestError")
    def _():
        try:
            client.embeddings.create(model=model, input="x", dimensions=10)
        except openai.BadRequestError as e:
            assert e.status_code == 400
        else:
            raise AssertionError("no error")

    @check("a wrong key is AuthenticationError")
    def _():
        bad = OpenAI(base_url=args.base_url, api_key="wrong", max_retries=0)
        try:
            bad.embeddings.create(model=model, input="x")
        except openai.AuthenticationError:
            pass
        else:
            raise AssertionError("no error")

    failed = 0
    for name, fn in checks:
        try:
            fn()
            print("ok   %s" % name)
        except Exception:
            failed += 1
            print("FAIL %s" % name)
            traceback.print_exc()
    print("%d passed, %d failed" % (len(checks) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
