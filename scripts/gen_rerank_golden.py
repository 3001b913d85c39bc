#!/usr/bin/env python3
"""gen_rerank_golden.py -- the cross-encoder parity data of tests/data/rerank:
a NumPy BertForSequenceClassification (float64) with Hugging Face tokenizers
for the pair ids, independent of kvik.

No cross-encoder is published where this project fetches from, so the model
is made: all-MiniLM-L6-v2's own safetensors (its encoder and its pooler)
with a classifier head of one label whose weights follow a formula,

    classifier.weight[0][i] = float32(2.0 * sin(0.61 * i + 0.2)),  i < 384
    classifier.bias[0]      = float32(-0.1)

and config.json's architectures ["BertForSequenceClassification"], id2label
{"0": "LABEL_0"}. tests/test_rerank_encoder.c builds the same Hugging Face
folder, converts it with kvik convert and checks kvik's logits against
these. The forward pass is Hugging Face's: [CLS] query [SEP] doc [SEP] with
token types 0 then 1, the encoder, the first token through the pooler
(dense, tanh) and the classifier.

Writes, into --out (default tests/data/rerank):
  pairs.jsonl   the pairs, one {"query": ..., "doc": ...} a line
  ids.txt       each pair's ids as Hugging Face tokenizers gives them
                (truncation "longest_first" to 512 positions; text is data:
                "[SEP]" written in a text is not the control token)
  logits.txt    each pair's logit, one a line

Usage: scripts/venv.sh scripts/embed-requirements.txt ~/.cache/kvik/embed-venv
       ~/.cache/kvik/embed-venv/bin/python scripts/gen_rerank_golden.py
(the model archive comes from `kvik pull all-minilm-l6-v2`, the corpus from
scripts/fetch-corpus.sh).
"""
import argparse
import json
import math
import os
import random
import sys
import tempfile
import zipfile

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_embed_golden import hidden  # noqa: E402  the NumPy BERT encoder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HAND = [
    ("What is the capital of France?", "Paris is the capital and largest city of France."),
    ("What is the capital of France?", "Berlin is the capital of Germany."),
    ("What is the capital of France?", "The Eiffel Tower was finished in 1889."),
    ("How do I reverse a list in Python?", "Use reversed(xs) or xs[::-1]; xs.reverse() works in place."),
    ("How do I reverse a list in Python?", "SELECT name FROM users ORDER BY name DESC;"),
    ("boiling point of water", "Water boils at 100 degrees Celsius at sea level."),
    ("boiling point of water", "Ice melts at 0 degrees Celsius."),
    ("who wrote Hamlet", "Hamlet is a tragedy by William Shakespeare, written around 1600."),
    ("who wrote Hamlet", "Macbeth is set in Scotland."),
    ("", "An empty query still makes a pair."),
    ("an empty document", ""),
    ("", ""),
    ("[SEP] [CLS]", "[CLS] [SEP] [MASK] text that spells control tokens is data"),
    ("Café résumé naïve", "Ünïcödé àççéñts everywhere, café"),
    ("日本の首都は?", "東京は日本の首都です。"),
    ("emoji 🎉", "party 🎉🚀 time"),
    ("price in Q3", "The price rose 15% to $1,299.99 in Q3 2024."),
    ("def f(x):", "def f(x):\n    return x ** 2\n"),
    ("Is Paris the capital of France?", "Paris is not the capital of France."),
    ("HELLO WORLD", "hello world"),
]


def words_of(corpus, name):
    with open(os.path.join(corpus, name), encoding="utf-8", errors="replace") as f:
        return f.read().split()


def span(rng, w, k):
    at = rng.randrange(0, max(1, len(w) - k))
    return " ".join(w[at:at + k])


def make_pairs(corpus, rng):
    eng, code = words_of(corpus, "english.txt"), words_of(corpus, "code.txt")
    pairs = list(HAND)
    for _ in range(30):
        w = code if rng.random() < 0.2 else eng
        pairs.append((span(rng, eng, rng.choice([3, 6, 12, 20])), span(rng, w, rng.choice([10, 40, 120, 250]))))
    # past the 512 positions: a long document, a long query, both long, and
    # lengths about the limit
    for qk, dk in [(8, 700), (12, 1200), (600, 10), (900, 40), (500, 500), (700, 650), (200, 260), (250, 250),
                   (240, 300), (300, 240), (30, 480), (480, 30)]:
        pairs.append((span(rng, eng, qk), span(rng, eng, dk)))
    return pairs


def head():
    w = np.array([np.float32(2.0 * math.sin(0.61 * i + 0.2)) for i in range(384)], dtype=np.float32)
    return w.reshape(1, 384), np.array([-0.1], dtype=np.float32)


def logit(W, cfg, cw, cb, ids, types):
    x = hidden(W, cfg, ids, types)[0]
    g = lambda n: W[n].astype(np.float64)
    p = np.tanh(x @ g("pooler.dense.weight").T + g("pooler.dense.bias"))
    return float((p @ cw.astype(np.float64).T + cb.astype(np.float64))[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    models = os.environ.get("KVIK_MODELS", os.path.expanduser("~/.cache/kvik/models"))
    ap.add_argument("--archive", default=os.path.join(models, "all-MiniLM-L6-v2.zip"))
    ap.add_argument("--corpus", default=os.environ.get("KVIK_CORPUS", os.path.expanduser("~/.cache/kvik/corpus")))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "rerank"))
    args = ap.parse_args()
    pairs = make_pairs(args.corpus, random.Random(20261205))
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(args.archive) as z:
            z.extractall(tmp)
        cfg = json.load(open(os.path.join(tmp, "config.json")))
        W = load_file(os.path.join(tmp, "model.safetensors"))
        tok = Tokenizer.from_file(os.path.join(tmp, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(cfg["max_position_embeddings"], strategy="longest_first")
    tok.encode_special_tokens = True
    cw, cb = head()
    os.makedirs(args.out, exist_ok=True)
    lines, logits = [], []
    for i, (q, d) in enumerate(pairs):
        e = tok.encode(q, d)
        ids, types = e.ids, e.type_ids
        first_sep = ids.index(102)
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1), "token types: %d" % i
        lines.append(" ".join(map(str, ids)))
        logits.append(logit(W, cfg, cw, cb, ids, types))
        if i % 10 == 0:
            print("pair %d/%d: %d ids, logit %.4f" % (i + 1, len(pairs), len(ids), logits[-1]), flush=True)
    with open(os.path.join(args.out, "pairs.jsonl"), "w", encoding="utf-8") as f:
        for q, d in pairs:
            f.write(json.dumps({"query": q, "doc": d}, ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "ids.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "logits.txt"), "w") as f:
        f.write("".join("%.9g\n" % v for v in logits))
    print("wrote %d pairs (%d at 512 positions) to %s" % (len(pairs), sum(l.count(" ") == 511 for l in lines),
                                                          args.out))


if __name__ == "__main__":
    main()
