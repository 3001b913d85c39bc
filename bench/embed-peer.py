#!/usr/bin/env python3
"""embed-peer.py -- sentences a second through POST /v1/embeddings of
`kvik serve` and of llama.cpp's `llama-server --embeddings`, on the same
GGUF, the same threads, alternating; and whether llama.cpp's vectors agree
with kvik's.

    bench/embed-peer.py [-m ~/.cache/kvik/models/all-MiniLM-L6-v2-F16.gguf]
                        [-t 2] [--rounds 3] [--sentences 512] [--json OUT]

llama-server comes from bench/build-llama.sh llama-server (outside the
repository). Each round starts each server in turn (kvik, then llama.cpp,
then the other order next round), warms it up, and times
  batch 1    every sentence as its own request, one request at a time
  batch 32   requests of 32 sentences, one at a time
over --sentences sentences of English conversation (ShareGPT V3 turns from
scripts/fetch-corpus.sh, cut at sentence ends, 5 to 60 words). The table
gives the median over rounds of each and the ratio. Agreement: the cosine
between the two servers' vectors of every sentence (llama-server pools as
the file says: mean for all-MiniLM-L6-v2) -- the file loading in llama.cpp
and giving the same vectors is the check that kvik convert writes
llama.cpp's names and keys. Only the Python standard library is used.
"""

import argparse
import json
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KVIK = os.path.join(ROOT, "build", "kvik")
HOME = os.path.expanduser("~")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def sentences(n):
    corpus = subprocess.run([os.path.join(ROOT, "scripts", "fetch-corpus.sh")], capture_output=True, text=True,
                            check=True).stdout.strip().splitlines()[-1]
    out = []
    with open(os.path.join(corpus, "english.txt"), encoding="utf-8", errors="replace") as f:
        for line in f:
            for s in re.split(r"(?<=[.!?])\s+", line.strip()):
                w = len(s.split())
                if 5 <= w <= 60 and s not in out:
                    out.append(s)
                    if len(out) == n:
                        return out
    return out


def post(port, texts):
    body = json.dumps({"input": texts, "model": "m", "encoding_format": "float"}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        data = json.loads(r.read())["data"]
    return [d["embedding"] for d in sorted(data, key=lambda d: d["index"])]


def start(kind, model, threads, port):
    if kind == "kvik":
        cmd = [KVIK, "serve", "-m", model, "--port", str(port), "--embedding-threads", str(threads), "-t",
               str(threads)]
    else:
        server = subprocess.run([os.path.join(ROOT, "bench", "build-llama.sh"), "llama-server"], capture_output=True,
                                text=True, check=True).stdout.strip()
        cmd = [server, "-m", model, "--embeddings", "--port", str(port), "-t", str(threads), "-c", "8192",
               "-b", "8192", "-ub", "8192", "--parallel", "1"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return p
        except Exception:
            time.sleep(0.2)
    p.kill()
    raise SystemExit(f"embed-peer: {kind} did not come up")


def timed(port, texts, batch):
    t0 = time.perf_counter()
    vecs = []
    for i in range(0, len(texts), batch):
        vecs += post(port, texts[i:i + batch])
    return len(texts) / (time.perf_counter() - t0), vecs


def cos(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", default=os.path.join(HOME, ".cache", "kvik", "models", "all-MiniLM-L6-v2-F16.gguf"))
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=512)
    ap.add_argument("--json")
    args = ap.parse_args()
    texts = sentences(args.sentences)
    res = {"kvik": {"b1": [], "b32": []}, "llama.cpp": {"b1": [], "b32": []}}
    vectors = {}
    for r in range(args.rounds):
        for kind in (("kvik", "llama.cpp") if r % 2 == 0 else ("llama.cpp", "kvik")):
            port = free_port()
            p = start(kind, args.m, args.t, port)
            try:
                timed(port, texts[:32], 32)  # warm-up
                b1, v1 = timed(port, texts[:128], 1)
                b32, v32 = timed(port, texts, 32)
            finally:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=60)
            res[kind]["b1"].append(b1)
            res[kind]["b32"].append(b32)
            vectors[kind] = v32
            print(f"round {r + 1}: {kind}: batch 1 {b1:.1f}/s, batch 32 {b32:.1f}/s", file=sys.stderr)
    cs = [cos(a, b) for a, b in zip(vectors["kvik"], vectors["llama.cpp"])]
    out = {k: {b: statistics.median(v) for b, v in d.items()} for k, d in res.items()}
    out["agreement"] = {"min_cosine": min(cs), "mean_cosine": sum(cs) / len(cs), "sentences": len(cs)}
    out["rounds"] = res
    print("| server | batch 1 sentences/s | batch 32 sentences/s |")
    print("|---|---:|---:|")
    for k in ("kvik", "llama.cpp"):
        print(f"| {k} | {out[k]['b1']:.1f} | {out[k]['b32']:.1f} |")
    print(f"| kvik / llama.cpp | **{out['kvik']['b1'] / out['llama.cpp']['b1']:.2f}x** | "
          f"**{out['kvik']['b32'] / out['llama.cpp']['b32']:.2f}x** |")
    print(f"\nagreement over {len(cs)} sentences: cosine min {min(cs):.6f}, mean {out['agreement']['mean_cosine']:.6f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
