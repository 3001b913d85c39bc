#!/usr/bin/env python3
"""lm-evaluation-harness against `kvik serve`: its local-completions model
runs the local multiple-choice task tests/data/lm_eval/kvik_mc.yaml (data
in kvik_mc.jsonl next to it; nothing from the hub) through
/v1/completions with echo and logprobs, tokenizing with the server's own
/tokenize (tokenizer_backend=remote), once a prompt per request and once
in batches of 4 prompts (the same numbers). Then every choice's log-likelihood
is computed again straight from the HTTP API (the continuation's tokens'
echoed logprobs, max_tokens 0) and must match lm_eval's within 1e-3, and
the accuracy lm_eval reports must be the one those numbers give.

Run from the test suite (tests/test_serve.c) with the pinned venv of
scripts/lm-eval-venv.sh: lm_eval_test.py --base-url http://127.0.0.1:PORT
--root REPO. Prints "N checks passed, M failed"; exits 1 on a failure.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import urllib.request


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def tokenize(base, text):
    return post(base, "/tokenize", {"prompt": text, "add_special_tokens": False})["tokens"]


def loglikelihood(base, context, continuation):
    """log p(continuation | context) from the echoed prompt logprobs, with
    the split lm_eval makes: the context's tokens, then the rest of the
    whole text's tokens."""
    ctx = tokenize(base, context)
    whole = tokenize(base, context + continuation)
    assert whole[: len(ctx)] == ctx, (context, continuation)
    r = post(base, "/v1/completions", {"prompt": whole, "echo": True, "logprobs": 1, "max_tokens": 0})
    lps = r["choices"][0]["logprobs"]["token_logprobs"]
    assert len(lps) == len(whole) and lps[0] is None, r
    return sum(lps[len(ctx):])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True, help="http://127.0.0.1:PORT")
    ap.add_argument("--root", required=True, help="the repository root")
    args = ap.parse_args()
    base = args.base_url.rstrip("/")
    lm_eval = os.path.join(os.path.dirname(sys.executable), "lm_eval")
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        print(("ok   " if ok else "FAIL ") + what)
        if ok:
            passed += 1
        else:
            failed += 1

    def run_lm_eval(tmp, batch_size):
        """lm_eval on the task: (accuracy, the samples), or None."""
        out = os.path.join(tmp, f"out-{batch_size}")
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=os.path.join(tmp, "hf"),
                   TOKENIZERS_PARALLELISM="false")
        cmd = [lm_eval, "--model", "local-completions",
               "--model_args", f"base_url={base}/v1/completions,model=kvik,tokenizer_backend=remote,"
                               "num_concurrent=1,max_retries=1",
               "--tasks", "kvik_mc", "--include_path", "tests/data/lm_eval", "--batch_size", str(batch_size),
               "--output_path", out, "--log_samples"]
        run = subprocess.run(cmd, cwd=args.root, env=env, capture_output=True, text=True, timeout=900)
        if run.returncode != 0:
            print(run.stdout[-3000:])
            print(run.stderr[-3000:])
        check(run.returncode == 0, f"lm_eval --batch_size {batch_size} exited {run.returncode}")
        results = glob.glob(os.path.join(out, "**", "results_*.json"), recursive=True)
        samples = glob.glob(os.path.join(out, "**", "samples_kvik_mc_*.jsonl"), recursive=True)
        check(len(results) == 1 and len(samples) == 1, "lm_eval wrote its results and samples")
        if len(results) != 1 or len(samples) != 1:
            return None
        acc = json.load(open(results[0]))["results"]["kvik_mc"]["acc,none"]
        return acc, [json.loads(line) for line in open(samples[0])]

    with tempfile.TemporaryDirectory(prefix="kvik-lm-eval-") as tmp:
        one = run_lm_eval(tmp, 1)
        # batch_size 4: lm_eval sends a batch of prompts in one request
        four = run_lm_eval(tmp, 4)
    if not one or not four:
        print(f"lm_eval: {passed} checks passed, {failed} failed")
        return 1
    acc, docs = one
    with open(os.path.join(args.root, "tests/data/lm_eval/kvik_mc.jsonl")) as f:
        n_items = sum(1 for line in f if line.strip())
    check(len(docs) == n_items, f"{len(docs)} items scored of {n_items}")
    by_doc = {d["doc_id"]: d["filtered_resps"] for d in four[1]}
    check(four[0] == acc and all(by_doc.get(d["doc_id"]) == d["filtered_resps"] for d in docs),
          "batched requests give the same numbers")

    worst, right = 0.0, 0
    for d in docs:
        doc = d["doc"]
        theirs = [float(r[0]) for r in d["filtered_resps"]]
        ours = [loglikelihood(base, doc["question"], c) for c in doc["choices"]]
        worst = max(worst, max(abs(a - b) for a, b in zip(theirs, ours)))
        right += max(range(len(ours)), key=lambda i: ours[i]) == doc["answer"]
    check(worst < 1e-3, f"per-choice log-likelihoods match the HTTP API's (largest difference {worst:.2e})")
    direct = right / len(docs)
    check(abs(acc - direct) < 1e-12, f"lm_eval's accuracy {acc:.4f} equals the direct computation's {direct:.4f}")
    print(f"lm_eval: {passed} checks passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
