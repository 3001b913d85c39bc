#!/usr/bin/env python3
"""compare-llama.py -- kvik against llama.cpp's llama-bench, same files,
same threads, interleaved.

    bench/compare-llama.py [--rounds 3] [--reps 5] [-t 2] [-p 512] [-n 128]
                           [--models default,tinyllama-q4_0,...] [--markdown]

For each model and round, runs `kvik bench offline` and then `llama-bench`
(built by bench/build-llama-bench.sh, outside the repository) with the same
prompt length, generation length, repetitions and threads. Each tool reports
its own median (kvik) or mean (llama-bench) over the repetitions of a round;
the table gives the median over rounds of each, and the ratio kvik / llama.cpp
of those medians, plus the per-round ratios' range, since the machine's
memory bandwidth drifts from minute to minute.

Models: `default` is the cached default model (SmolLM2-135M-Instruct Q4_1);
`SHAPE-TYPE` (e.g. tinyllama-1.1b-q4_0) is a synthetic random-weight model
written by `kvik synth` into $KVIK_SYNTH_DIR (default ~/.cache/kvik/synth)
the first time it is needed; any other value is a path to a GGUF file.

Both tools measure the same thing: ppN prefills N random tokens into an empty
cache in micro-batches of 512 and computes the logits of the last; tgN runs N
single-token forward passes from an empty cache. llama-bench runs with its
defaults otherwise (F16 KV cache, no flash attention, mmap).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KVIK = os.path.join(ROOT, "build", "kvik")
HOME = os.path.expanduser("~")
MODELS_DIR = os.environ.get("KVIK_MODELS") or os.path.join(HOME, ".cache", "kvik", "models")
SYNTH_DIR = os.environ.get("KVIK_SYNTH_DIR") or os.path.join(HOME, ".cache", "kvik", "synth")
DEFAULT_MODELS = "default,tinyllama-1.1b-q4_0,tinyllama-1.1b-q8_0,tinyllama-1.1b-q4_k"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def resolve_model(name):
    if name == "default":
        return os.path.join(MODELS_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.sep in name or name.endswith(".gguf"):
        return name
    shape, _, qtype = name.rpartition("-")
    path = os.path.join(SYNTH_DIR, f"{shape}.{qtype}.gguf")
    if not os.path.exists(path):
        os.makedirs(SYNTH_DIR, exist_ok=True)
        log(f"compare-llama: writing synthetic {shape} {qtype} to {path}")
        subprocess.run([KVIK, "synth", "--shape", shape, "--type", qtype, "-o", path], check=True)
    return path


def run_kvik(model, args):
    cmd = [KVIK, "bench", "offline", "-m", model, "-p", str(args.p), "-n", str(args.n),
           "-r", str(args.reps), "-t", str(args.threads), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return j["pp_tok_s"], j["tg_tok_s"], j.get("tg_pct_bw", 0.0), j.get("read_gbs", 0.0)


def run_llama(bench, model, args):
    cmd = [bench, "-m", model, "-p", str(args.p), "-n", str(args.n), "-r", str(args.reps),
           "-t", str(args.threads), "-o", "json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    pp = tg = 0.0
    for test in json.loads(out):
        # llama-bench reports the mean; take the median of its samples to
        # match kvik's statistic when the samples are there
        samples = test.get("samples_ts") or [test["avg_ts"]]
        rate = statistics.median(samples)
        if test["n_prompt"] > 0 and test["n_gen"] == 0:
            pp = rate
        elif test["n_gen"] > 0 and test["n_prompt"] == 0:
            tg = rate
    return pp, tg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()

    if not os.access(KVIK, os.X_OK):
        sys.exit("compare-llama: build kvik first (make)")
    bench = subprocess.run([os.path.join(ROOT, "bench", "build-llama-bench.sh")], check=True,
                           capture_output=True, text=True).stdout.strip().splitlines()[-1]
    rows = []
    for name in args.models.split(","):
        model = resolve_model(name)
        if not os.path.exists(model):
            sys.exit(f"compare-llama: model {model} not found (make model fetches the default)")
        k_pp, k_tg, l_pp, l_tg, pct, bw = [], [], [], [], [], []
        for r in range(args.rounds):
            log(f"compare-llama: {name} round {r + 1}/{args.rounds}")
            a, b, c, d = run_kvik(model, args)
            k_pp.append(a), k_tg.append(b), pct.append(c), bw.append(d)
            a, b = run_llama(bench, model, args)
            l_pp.append(a), l_tg.append(b)
        med = statistics.median
        rows.append({
            "model": name, "file": os.path.basename(model),
            "kvik_pp": med(k_pp), "llama_pp": med(l_pp),
            "kvik_tg": med(k_tg), "llama_tg": med(l_tg),
            "pp_ratios": [x / y for x, y in zip(k_pp, l_pp) if y > 0],
            "tg_ratios": [x / y for x, y in zip(k_tg, l_tg) if y > 0],
            "tg_pct_bw": med(pct), "read_gbs": med(bw),
        })

    def ratio(a, b):
        return a / b if b > 0 else float("nan")

    def rng(v):
        return f"{min(v):.2f}-{max(v):.2f}" if v else "-"

    if args.markdown:
        print(f"| model | pp{args.p} kvik | pp{args.p} llama.cpp | ratio (rounds) "
              f"| tg{args.n} kvik | tg{args.n} llama.cpp | ratio (rounds) | kvik tg % of read bw |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for x in rows:
            print(f"| {x['model']} | {x['kvik_pp']:.1f} | {x['llama_pp']:.1f} "
                  f"| **{ratio(x['kvik_pp'], x['llama_pp']):.2f}x** ({rng(x['pp_ratios'])}) "
                  f"| {x['kvik_tg']:.1f} | {x['llama_tg']:.1f} "
                  f"| **{ratio(x['kvik_tg'], x['llama_tg']):.2f}x** ({rng(x['tg_ratios'])}) "
                  f"| {x['tg_pct_bw']:.0f}% of {x['read_gbs']:.1f} GB/s |")
    else:
        print(f"{'model':<24} {'pp kvik':>9} {'pp llama':>9} {'ratio':>6}   "
              f"{'tg kvik':>8} {'tg llama':>8} {'ratio':>6}")
        for x in rows:
            print(f"{x['model']:<24} {x['kvik_pp']:9.1f} {x['llama_pp']:9.1f} "
                  f"{ratio(x['kvik_pp'], x['llama_pp']):6.2f}   {x['kvik_tg']:8.1f} {x['llama_tg']:8.1f} "
                  f"{ratio(x['kvik_tg'], x['llama_tg']):6.2f}")
    print(json.dumps({"threads": args.threads, "n_prompt": args.p, "n_gen": args.n,
                      "rounds": args.rounds, "reps": args.reps, "rows": rows}), file=sys.stderr)


if __name__ == "__main__":
    main()
