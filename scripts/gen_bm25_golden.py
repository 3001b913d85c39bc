#!/usr/bin/env python3
"""gen_bm25_golden.py -- the BM25 parity data of tests/data/bm25: scores
from bm25s's Lucene variant (k1 1.2, b 0.75: idf = ln(1 + (N - df + 0.5) /
(df + 0.5))), independent of kvik, over the texts of tests/data/embed.
That variant leaves out the numerator's constant factor k1 + 1, as Lucene
does since version 8; the scores written here are multiplied by it, to be
the classic form src/retrieval/bm25.h documents.

The words are split by the rule src/retrieval/bm25.h documents (maximal
runs of ASCII letters and digits and of bytes >= 0x80, ASCII lowercased,
cut at 64 bytes), written again here from that rule; a query's repeated
words count once.

Writes, into --out (default tests/data/bm25):
  queries.txt   one query a line (JSON strings)
  golden.jsonl  per query {"ids": [...], "scores": [...]}: the best 10 texts
                (the line numbers of tests/data/embed/texts.jsonl) with a
                score above 0, best first

Usage: scripts/venv.sh scripts/embed-requirements.txt ~/.cache/kvik/embed-venv
       ~/.cache/kvik/embed-venv/bin/python scripts/gen_bm25_golden.py
"""
import argparse
import json
import os
import random
import re

import bm25s
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K1 = 1.2
WORD = re.compile(rb"[0-9A-Za-z\x80-\xff]+")


def words(text):
    out = []
    for m in WORD.finditer(text.encode("utf-8")):
        w = bytes(c + 32 if 65 <= c <= 90 else c for c in m.group(0)[:64])
        out.append(w.decode("utf-8", "surrogateescape"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/bm25"))
    args = ap.parse_args()
    with open(os.path.join(ROOT, "tests/data/embed/texts.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    docs = [words(t) for t in texts]
    rng = random.Random(7)
    vocab = sorted({w for d in docs for w in d})
    known = set(vocab)
    queries = ["the quick brown fox", "HELLO world", "tokenizer", "café", "日本語のテキストです",
               "def return", "zzzz-not-a-word-anywhere", "", "...", "a a a a the the"]
    while len(queries) < 60:  # words drawn from one text, plus one from anywhere
        d = rng.choice([d for d in docs if len(d) > 5])
        q = rng.sample(d, min(len(d), rng.randint(1, 4))) + [rng.choice(vocab)]
        queries.append(" ".join(q))
    # an empty document list entry is allowed by bm25s as an empty token list
    retriever = bm25s.BM25(method="lucene", k1=K1, b=0.75)
    retriever.index(docs, show_progress=False)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "queries.txt"), "w", encoding="utf-8") as fq, \
         open(os.path.join(args.out, "golden.jsonl"), "w", encoding="utf-8") as fg:
        for q in queries:
            qw = list(dict.fromkeys(w for w in words(q) if w in known))
            scores = retriever.get_scores(qw) * (K1 + 1) if qw else np.zeros(len(docs))
            order = sorted(range(len(docs)), key=lambda i: (-scores[i], i))
            top = [i for i in order if scores[i] > 0][:10]
            fq.write(json.dumps(q, ensure_ascii=False) + "\n")
            fg.write(json.dumps({"ids": top, "scores": [float(scores[i]) for i in top]}) + "\n")
    print(f"{len(queries)} queries over {len(docs)} texts into {args.out}")


if __name__ == "__main__":
    main()
