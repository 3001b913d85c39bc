#!/usr/bin/env python3
"""Structured output of `kvik serve`, checked as a client would check it.

    structured_output_test.py --base-url http://127.0.0.1:PORT/v1 --schemas FILE
                              [--per-schema N] [--max-tokens N] [--pydantic]

For every schema of FILE (tests/data/schemas/schemas.json: a name, a prompt
and a JSON Schema each, written for the purpose), N chat completions with
response_format json_schema (strict), sampled at temperature 0.7 with
seeds 1..N so that they differ, through the official OpenAI client. Each
reply must parse as JSON and validate against its schema with Python's
jsonschema (Draft 2020-12, formats checked: date, date-time, email, uuid).
A reply cut by max_tokens counts as a failure. --pydantic also checks
client.beta.chat.completions.parse with a pydantic model. Prints a line
per schema, the totals, and "N passed, N failed"; exits 1 on any failure.
"""
import argparse
import json
import sys
import time

import jsonschema
from openai import OpenAI


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--schemas", required=True)
    ap.add_argument("--per-schema", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=500)
    ap.add_argument("--pydantic", action="store_true")
    args = ap.parse_args()
    client = OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=600)
    model = client.models.list().data[0].id
    schemas = json.load(open(args.schemas, encoding="utf-8"))
    fmt = jsonschema.Draft202012Validator.FORMAT_CHECKER
    total = valid = 0
    failed_checks = 0
    t0 = time.time()
    for s in schemas:
        validator = jsonschema.Draft202012Validator(s["schema"], format_checker=fmt)
        ok = 0
        for seed in range(1, args.per_schema + 1):
            total += 1
            r = client.chat.completions.create(
                model=model, temperature=0.7, seed=seed, max_tokens=args.max_tokens,
                messages=[{"role": "system", "content": "Answer with JSON only."},
                          {"role": "user", "content": s["prompt"]}],
                response_format={"type": "json_schema",
                                 "json_schema": {"name": s["name"], "schema": s["schema"], "strict": True}})
            text = r.choices[0].message.content or ""
            why = None
            if r.choices[0].finish_reason != "stop":
                why = "finish_reason %s" % r.choices[0].finish_reason
            else:
                try:
                    validator.validate(json.loads(text))
                except Exception as e:  # noqa: BLE001 -- any parse or validation error is the finding
                    why = "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:160])
            if why:
                print("    %s seed %d: %s\n      %r" % (s["name"], seed, why, text[:300]))
            else:
                ok += 1
        valid += ok
        print("%-14s %d/%d valid" % (s["name"], ok, args.per_schema))
    print("structured output: %d/%d generations valid over %d schemas in %.0f s" %
          (valid, total, len(schemas), time.time() - t0))
    failed_checks += valid != total

    if args.pydantic:
        from pydantic import BaseModel

        class City(BaseModel):
            name: str
            country: str
            population: int

        r = client.beta.chat.completions.parse(
            model=model, temperature=0, max_tokens=120,
            messages=[{"role": "user", "content": "Describe the city of Lyon."}], response_format=City)
        parsed = r.choices[0].message.parsed
        good = isinstance(parsed, City)
        print("%s pydantic parse: %r" % ("ok  " if good else "FAIL", parsed))
        failed_checks += not good
    print("%d passed, %d failed" % (1 + args.pydantic - failed_checks, failed_checks))
    sys.exit(1 if failed_checks else 0)


if __name__ == "__main__":
    main()
