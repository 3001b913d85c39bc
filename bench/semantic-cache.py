#!/usr/bin/env python3
"""semantic-cache.py -- how often `kvik serve --semantic-cache` would answer
a question with the cached answer of another, on the labelled pairs of
tests/data/semantic_cache, measured through the server itself.

    bench/semantic-cache.py --url http://127.0.0.1:8080/v1 [--api-key KEY]
                            [--svg docs/semantic-cache.svg] [--json OUT] [--markdown]
                            [--max-false 0.01]

For each pair (a, b) it asks a, then b, as chat requests with a system
prompt of their own (so every pair has its own hard key), temperature 0 and
max_tokens 1 (the answer does not matter here). b's response header
X-Kvik-Cache-Nearest gives the cosine of the cached question a and whether
the two say the same thing in the same words (src/retrieval/qmatch.h).
For each threshold t, a pair is a hit
  by cosine alone     when cosine >= t (what a plain semantic cache does)
  with kvik's guard   when cosine >= t and the words match
and the curves give, over the hits,
  precision    the fraction whose pair is labelled same
  recall       of the pairs labelled same, the fraction that hit
  false hits   1 - precision: of the answers served from the cache, the
               fraction that answer another question.
It prints the range of thresholds whose false hits stay at or under
--max-false (1%) with the guard at the best recall that allows, and the
precision and recall at the server's default (--default, 0.80). Only the
Python standard library is used.
"""

import argparse
import json
import math
import os
import sys
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAIRS = os.path.join(ROOT, "tests", "data", "semantic_cache", "pairs.jsonl")


def ask(base, key, system, question):
    body = json.dumps({"messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
                       "temperature": 0, "max_tokens": 1}).encode()
    req = urllib.request.Request(base.rstrip("/") + "/chat/completions", data=body, method="POST")
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    with urllib.request.urlopen(req, timeout=600) as r:
        r.read()
        return r.headers.get("X-Kvik-Cache"), r.headers.get("X-Kvik-Cache-Nearest")


def probe(base, key, pair, run):
    """The cosine and word match of b against a, cached under their own key."""
    system = f"Cache bench run {run}, pair {pair['id']}."
    ask(base, key, system, pair["a"])
    state, nearest = ask(base, key, system, pair["b"])
    if not nearest:
        raise SystemExit(f"semantic-cache.py: no X-Kvik-Cache-Nearest (X-Kvik-Cache: {state}); "
                         "is the server running with --semantic-cache?")
    parts = dict(kv.strip().split("=") for kv in nearest.split(";"))
    return float(parts["cosine"]), parts["words"] == "same", state


def curve(cos, same, words=None):
    """(threshold, precision, recall, hits) at every distinct cosine; with
    words, a hit also needs its pair's words to match."""
    pts = []
    n_same = sum(same)
    ok = words or [True] * len(cos)
    for t in sorted(set(cos)):
        hits = [s for c, s, w in zip(cos, same, ok) if c >= t and w]
        tp = sum(hits)
        pts.append((t, tp / len(hits) if hits else 1.0, tp / n_same if n_same else 0.0, len(hits)))
    return pts


def svg(plain, guarded, chosen, path, title):
    w, h, pad = 680, 420, 50
    lo = math.floor(min(p[0] for p in plain) * 10) / 10
    x = lambda t: pad + (t - lo) / (1 - lo) * (w - 2 * pad)
    y = lambda v: h - pad - v * (h - 2 * pad)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    for i in range(11):
        v = i / 10
        out.append(f'<line x1="{pad}" y1="{y(v):.1f}" x2="{w - pad}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{pad - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}</text>')
    for i in range(int(round((1 - lo) / 0.05)) + 1):
        t = lo + i * 0.05
        out.append(f'<text x="{x(t):.1f}" y="{h - pad + 16}" text-anchor="middle">{t:.2f}</text>')
    out.append(f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">cosine threshold</text>')
    series = ((plain, 1, "#1f77b4", "4,3", "precision, cosine alone"),
              (plain, 2, "#d62728", "4,3", "recall, cosine alone"),
              (guarded, 1, "#1f77b4", "", "precision, kvik (cosine and the same words)"),
              (guarded, 2, "#d62728", "", "recall, kvik (cosine and the same words)"))
    for k, (pts, idx, colour, dash, name) in enumerate(series):
        d = " ".join(f"{'M' if i == 0 else 'L'}{x(p[0]):.1f},{y(p[idx]):.1f}" for i, p in enumerate(pts))
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="2"{extra}/>')
        out.append(f'<line x1="{pad + 8}" y1="{pad + 8 + 16 * k}" x2="{pad + 32}" y2="{pad + 8 + 16 * k}" '
                   f'stroke="{colour}" stroke-width="2"{extra}/>')
        out.append(f'<text x="{pad + 38}" y="{pad + 12 + 16 * k}">{name}</text>')
    out.append(f'<line x1="{x(chosen):.1f}" y1="{pad}" x2="{x(chosen):.1f}" y2="{h - pad}" stroke="#2ca02c" '
               f'stroke-dasharray="2,2"/>')
    out.append(f'<text x="{x(chosen) + 4:.1f}" y="{h - pad - 8}" fill="#2ca02c">default {chosen:.2f}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", ""))
    ap.add_argument("--max-false", type=float, default=0.01)
    ap.add_argument("--default", type=float, default=0.80,
                    help="the server's default threshold, drawn and reported (SERVER_SEMCACHE_THRESHOLD)")
    ap.add_argument("--svg")
    ap.add_argument("--json")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--title", default="Semantic cache: 353 labelled pairs")
    args = ap.parse_args()
    pairs = [json.loads(line) for line in open(PAIRS, encoding="utf-8")]
    run = os.getpid()
    got = [probe(args.url, args.api_key, p, run) for p in pairs]
    cos = [g[0] for g in got]
    words = [g[1] for g in got]
    same = [bool(p["same"]) for p in pairs]
    plain, guarded = curve(cos, same), curve(cos, same, words)
    ok = [p for p in guarded if 1 - p[1] <= args.max_false and p[3] > 0]
    best = max(ok, key=lambda p: (p[2], -p[0])) if ok else guarded[-1]
    # the thresholds that keep that recall within the bound: [lo, hi]
    keep = [p for p in ok if p[2] == best[2]]
    lo, hi = (min(p[0] for p in keep), max(p[0] for p in keep)) if keep else (best[0], best[0])
    t = args.default
    chosen = next((q for q in guarded if q[0] >= t), guarded[-1])
    n = len(pairs)
    kinds = sorted({p["kind"] for p in pairs})
    per_kind = {}
    for k in kinds:
        idx = [i for i, p in enumerate(pairs) if p["kind"] == k]
        cs = sorted(cos[i] for i in idx)
        per_kind[k] = {"pairs": len(idx), "cos_min": cs[0], "cos_median": cs[len(cs) // 2], "cos_max": cs[-1],
                       "words_same": sum(1 for i in idx if words[i]),
                       "hit_cosine_alone": sum(1 for i in idx if cos[i] >= t),
                       "hit_kvik": sum(1 for i in idx if cos[i] >= t and words[i])}
    best_plain = max(plain, key=lambda p: p[1])
    res = {"threshold": t, "range_lo": lo, "range_hi": hi, "precision": chosen[1], "recall": chosen[2],
           "false_hits": 1 - chosen[1],
           "max_false": args.max_false, "pairs": n, "kinds": per_kind,
           "cosine_alone_best_precision": best_plain[1], "cosine_alone_best_precision_at": best_plain[0],
           "curve_cosine_alone": [{"threshold": p[0], "precision": p[1], "recall": p[2]} for p in plain],
           "curve_kvik": [{"threshold": p[0], "precision": p[1], "recall": p[2]} for p in guarded]}
    print(f"kvik: thresholds {lo:.4f} to {hi:.4f} keep false hits <= {100 * args.max_false:.0f}% at the best "
          f"recall, {best[2]:.4f}; at the default {t:.2f}: precision {chosen[1]:.4f}, recall {chosen[2]:.4f}",
          file=sys.stderr)
    print(f"cosine alone: best precision {best_plain[1]:.3f} (at {best_plain[0]:.4f}, recall {best_plain[2]:.3f})",
          file=sys.stderr)
    if args.svg:
        svg(plain, guarded, t, args.svg, args.title)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    if args.markdown:
        print("| kind | pairs | label | cosine min / median / max | same words | hits, cosine alone | hits, kvik |")
        print("|---|---:|---|---|---:|---:|---:|")
        for k, v in per_kind.items():
            label = "same" if k == "paraphrase" else "different"
            print(f"| {k} | {v['pairs']} | {label} | {v['cos_min']:.3f} / {v['cos_median']:.3f} / {v['cos_max']:.3f} | "
                  f"{v['words_same']} | {v['hit_cosine_alone']} | {v['hit_kvik']} |")
        print()
        print("| threshold | precision, cosine alone | recall, cosine alone | precision, kvik | recall, kvik |")
        print("|---:|---:|---:|---:|---:|")
        for probe_t in (0.70, 0.80, 0.85, 0.90, 0.95, 0.98):
            p = next((q for q in plain if q[0] >= probe_t), plain[-1])
            g = next((q for q in guarded if q[0] >= probe_t), guarded[-1])
            print(f"| {probe_t:.2f} | {p[1]:.3f} | {p[2]:.3f} | {g[1]:.3f} | {g[2]:.3f} |")


if __name__ == "__main__":
    main()
