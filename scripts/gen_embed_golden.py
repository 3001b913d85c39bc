#!/usr/bin/env python3
"""gen_embed_golden.py -- the embedding parity data of tests/data/embed: a
NumPy implementation of BERT (float64) over all-MiniLM-L6-v2's own
safetensors, with Hugging Face tokenizers for the ids, independent of kvik.

Writes, into --out (default tests/data/embed):
  texts.jsonl   the texts, one {"text": ...} a line
  ids.txt       each text's ids as Hugging Face tokenizers gives them, with
                [CLS] ... [SEP], cut to 512 positions (its truncation of a
                single sequence: the text's first 510 tokens); text is data:
                "[CLS]" written in a text is not the control token
  minilm.f16    each text's mean-pooled, L2-normalised embedding, 384
                float16 values a text, little-endian, in text order

The texts: hand-written edge cases (empty, accents, CJK, emoji, code,
numbers, control-token spellings, whitespace), passages of 1 to 400 words
from scripts/fetch-corpus.sh's english.txt, code.txt, multilingual.txt and
cjk.txt, and long ones past the 512-position limit.

Usage: scripts/venv.sh scripts/embed-requirements.txt ~/.cache/kvik/embed-venv
       ~/.cache/kvik/embed-venv/bin/python scripts/gen_embed_golden.py
(the model archive comes from `kvik pull all-minilm-l6-v2`, the corpus from
scripts/fetch-corpus.sh).
"""
import argparse
import json
import math
import os
import random
import tempfile
import zipfile

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EDGE = [
    "", " ", "a", ".", "hello world", "Hello World!", "HELLO WORLD", "The quick brown fox jumps over the lazy dog.",
    "Café résumé naïve façade coöperate", "Ünïcödé àççéñts everywhere", "日本語のテキストです。", "中文文本，包含标点。",
    "한국어 문장입니다", "Привет, как дела?", "مرحبا بالعالم", "emoji 🎉🚀 test 👍🏽", "3.14159 and 2,718,281 and -42",
    "def f(x):\n    return x ** 2\n", "SELECT * FROM users WHERE id = 7;", "https://example.com/path?q=1&r=2#frag",
    "  leading and trailing spaces  ", "tabs\tand\nnewlines\r\nmixed", "[CLS] [SEP] [MASK] [PAD] [UNK]",
    "<s> </s> <|endoftext|> <|im_start|>", "word " * 50, "supercalifragilisticexpialidocious",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis", "x" * 150,
    "e-mail: someone@example.org, phone +1 (555) 010-9999", "ISBN 978-3-16-148410-0; SKU AB-1234-XY",
    "I don't think it's working, isn't it?", "The price rose 15% to $1,299.99 in Q3 2024.",
    "\u00a0non-breaking\u2003spaces\u200bzero width", "control\x01chars\x7fhere", "a.b.c.d.e.f.g",
    "Mr. Smith went to Washington D.C. on Jan. 5th.", "résumé" + " naïve" * 30,
    "Paris is the capital of France.", "Paris is not the capital of France.", "Berlin is the capital of Germany.",
]


def corpus_texts(corpus, rng, n):
    out = []
    files = [("english.txt", 0.6), ("code.txt", 0.15), ("multilingual.txt", 0.15), ("cjk.txt", 0.1)]
    words = {}
    for name, _ in files:
        with open(os.path.join(corpus, name), encoding="utf-8", errors="replace") as f:
            words[name] = f.read().split(" ")
    for i in range(n):
        r, acc = rng.random(), 0.0
        for name, share in files:
            acc += share
            if r <= acc:
                break
        w = words[name]
        k = rng.choice([1, 3, 8, 20, 50, 120, 250, 400])
        at = rng.randrange(0, max(1, len(w) - k))
        out.append(" ".join(w[at:at + k]))
    return out


def long_texts(corpus, rng, n):
    with open(os.path.join(corpus, "english.txt"), encoding="utf-8") as f:
        w = f.read().split()
    out = []
    for i in range(n):
        k = rng.choice([450, 600, 900, 1500])
        at = rng.randrange(0, len(w) - k)
        out.append(" ".join(w[at:at + k]))
    return out


def layer_norm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


_erf = np.vectorize(math.erf)


def hidden(W, cfg, ids, types=None):
    """The last layer's states [len(ids)][hidden] of one text (token types
    types, default all 0), in float64."""
    g = lambda n: W[n].astype(np.float64)
    L, d, H = len(ids), cfg["hidden_size"], cfg["num_attention_heads"]
    hd, eps = d // H, cfg["layer_norm_eps"]
    types = [0] * L if types is None else types
    x = g("embeddings.word_embeddings.weight")[ids] + g("embeddings.position_embeddings.weight")[:L] + \
        g("embeddings.token_type_embeddings.weight")[types]
    x = layer_norm(x, g("embeddings.LayerNorm.weight"), g("embeddings.LayerNorm.bias"), eps)
    for l in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % l
        lin = lambda n, a: a @ g(p + n + ".weight").T + g(p + n + ".bias")
        q = lin("attention.self.query", x).reshape(L, H, hd).transpose(1, 0, 2)
        k = lin("attention.self.key", x).reshape(L, H, hd).transpose(1, 0, 2)
        v = lin("attention.self.value", x).reshape(L, H, hd).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(L, d)
        x = layer_norm(x + lin("attention.output.dense", a), g(p + "attention.output.LayerNorm.weight"),
                       g(p + "attention.output.LayerNorm.bias"), eps)
        h = lin("intermediate.dense", x)
        h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
        x = layer_norm(x + lin("output.dense", h), g(p + "output.LayerNorm.weight"), g(p + "output.LayerNorm.bias"),
                       eps)
    return x


def embed(W, cfg, ids):
    e = hidden(W, cfg, ids).mean(0)
    return e / np.linalg.norm(e)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    models = os.environ.get("KVIK_MODELS", os.path.expanduser("~/.cache/kvik/models"))
    ap.add_argument("--archive", default=os.path.join(models, "all-MiniLM-L6-v2.zip"))
    ap.add_argument("--corpus", default=os.environ.get("KVIK_CORPUS", os.path.expanduser("~/.cache/kvik/corpus")))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "embed"))
    ap.add_argument("--n-corpus", type=int, default=160)
    ap.add_argument("--n-long", type=int, default=16)
    args = ap.parse_args()
    rng = random.Random(20261202)
    texts = EDGE + corpus_texts(args.corpus, rng, args.n_corpus) + long_texts(args.corpus, rng, args.n_long)
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(args.archive) as z:
            z.extractall(tmp)
        top = tmp
        for root, _, files in os.walk(tmp):
            if "config.json" in files:
                top = root
                break
        cfg = json.load(open(os.path.join(top, "config.json")))
        W = load_file(os.path.join(top, "model.safetensors"))
        tok = Tokenizer.from_file(os.path.join(top, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(cfg["max_position_embeddings"])
    tok.encode_special_tokens = True
    os.makedirs(args.out, exist_ok=True)
    vecs, lines = [], []
    for i, t in enumerate(texts):
        ids = tok.encode(t).ids
        lines.append(" ".join(map(str, ids)))
        vecs.append(embed(W, cfg, ids))
        if i % 20 == 0:
            print("text %d/%d: %d ids" % (i + 1, len(texts), len(ids)), flush=True)
    with open(os.path.join(args.out, "texts.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "ids.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    np.asarray(vecs, dtype="<f2").tofile(os.path.join(args.out, "minilm.f16"))
    print("wrote %d texts (%d at 512 positions) to %s" % (len(texts), sum(l.count(" ") == 511 for l in lines),
                                                          args.out))


if __name__ == "__main__":
    main()
