#!/usr/bin/env python3
"""retrieval.py -- recall, MRR and no-answer precision of a vector store's
search, on the labelled set in tests/data/retrieval, over HTTP.

    bench/retrieval.py --url http://127.0.0.1:8080/v1 [--api-key KEY]
                       [--rankers dense,bm25,hybrid,hybrid+rerank] [--k 10]
                       [--rerank-candidates 20] [--json OUT.json] [--markdown]

Talks to any server with OpenAI's Vector Stores API plus kvik's
`POST /v1/vector_stores/{id}/texts` (to load 1,040 passages in a few
requests): it makes a store, adds every passage with its attributes, asks
every question with each ranker (`ranking_options.ranker`), and deletes the
store. Only the Python standard library is used.

For each ranker, over the answerable questions:
  recall@5   the fraction of a question's answer passages in the first 5,
             averaged
  MRR@10     1 / the rank of the first answer passage in the first 10 (0
             when none), averaged
and, for the threshold on the best hit's score (the server drops hits below
`score_threshold`, so "no context" means the best hit is under it):
  the threshold that best separates answerable from unanswerable questions
  (the most questions decided right: unanswerable ones left without
  context, answerable ones keeping theirs), and at it
  no-answer precision   of the questions left without context, the fraction
                        that truly have no answer
  no-answer recall      of the unanswerable questions, the fraction left
                        without context
  answered kept         of the answerable questions, the fraction that keep
                        their context
Scores are the ranker's own: the cosine for dense and hybrid, BM25's score,
the reranker's probability for "+rerank".
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SET = os.path.join(ROOT, "tests", "data", "retrieval")


def call(base, key, method, path, body=None, timeout=600):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base.rstrip("/") + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise SystemExit(f"retrieval.py: {method} {path}: HTTP {e.code}: {e.read()[:300]!r}")


def load(name):
    with open(os.path.join(SET, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def best_threshold(top_scores, answerable):
    """The threshold on the best score (keep when score >= it) that decides
    the most questions right; of equals, the lowest."""
    cands = [float("-inf")] + sorted(set(top_scores)) + [float("inf")]
    best = (-1, None)
    for thr in cands:
        right = sum(1 for s, a in zip(top_scores, answerable) if (s >= thr) == a)
        if right > best[0]:
            best = (right, thr)
    return best[1]


def evaluate(hits_per_q, questions, k):
    ans = [q for q in questions if q["answers"]]
    rec, rr = [], []
    for q in ans:
        ids = [h["attributes"]["pid"] for h in hits_per_q[q["id"]]]
        want = set(q["answers"])
        rec.append(len(want & set(ids[:5])) / len(want))
        r = next((i + 1 for i, p in enumerate(ids[:k]) if p in want), None)
        rr.append(1.0 / r if r else 0.0)
    tops = [hits_per_q[q["id"]][0]["score"] if hits_per_q[q["id"]] else float("-inf") for q in questions]
    answerable = [bool(q["answers"]) for q in questions]
    thr = best_threshold(tops, answerable)
    none_pred = [s < thr for s in tops]
    tp = sum(1 for p, a in zip(none_pred, answerable) if p and not a)
    npred = sum(none_pred)
    nnone = sum(1 for a in answerable if not a)
    kept = sum(1 for p, a in zip(none_pred, answerable) if not p and a)
    return {
        "recall_at_5": sum(rec) / len(rec),
        "mrr_at_10": sum(rr) / len(rr),
        "threshold": thr,
        "no_answer_precision": tp / npred if npred else None,
        "no_answer_recall": tp / nnone if nnone else None,
        "answered_kept": kept / len(ans),
        "n_questions": len(questions),
        "n_answerable": len(ans),
    }


def by_style(hits_per_q, questions, k):
    out = {}
    for style in sorted({q["style"] for q in questions if q["answers"]}):
        qs = [q for q in questions if q["style"] == style]
        e = evaluate(hits_per_q, qs + [q for q in questions if not q["answers"]], k)
        out[style] = {"recall_at_5": e["recall_at_5"], "mrr_at_10": e["mrr_at_10"]}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="the server's /v1 base URL")
    ap.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", ""))
    ap.add_argument("--rankers", default="dense,bm25,hybrid,hybrid+rerank")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--rerank-candidates", type=int, default=20,
                    help="the ranking's first hits the reranker scores (ranking_options.rerank_candidates)")
    ap.add_argument("--json")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    passages, questions = load("passages.jsonl"), load("questions.jsonl")
    base, key = args.url, args.api_key
    vs = call(base, key, "POST", "/vector_stores", {"name": "retrieval-bench"})["id"]
    t0 = time.time()
    for i in range(0, len(passages), 100):
        texts = [{"text": p["title"] + "\n" + p["text"], "filename": p["id"] + ".txt",
                  "attributes": dict(p["attributes"], pid=p["id"])} for p in passages[i:i + 100]]
        call(base, key, "POST", f"/vector_stores/{vs}/texts", {"texts": texts})
    load_s = time.time() - t0
    results = {"passages": len(passages), "load_seconds": load_s, "rankers": {}}
    for ranker in args.rankers.split(","):
        opts = {"ranker": ranker}
        if "rerank" in ranker:
            opts["rerank_candidates"] = args.rerank_candidates
        hits, t0 = {}, time.time()
        for q in questions:
            r = call(base, key, "POST", f"/vector_stores/{vs}/search",
                     {"query": q["question"], "max_num_results": args.k, "ranking_options": opts})
            hits[q["id"]] = r["data"]
        secs = time.time() - t0
        e = evaluate(hits, questions, args.k)
        e["by_style"] = by_style(hits, questions, args.k)
        e["ms_per_query"] = 1000 * secs / len(questions)
        results["rankers"][ranker] = e
        print(f"{ranker:15s} recall@5 {e['recall_at_5']:.3f}  MRR@10 {e['mrr_at_10']:.3f}  "
              f"threshold {e['threshold']:.4g}: no-answer precision {e['no_answer_precision'] or 0:.3f} "
              f"recall {e['no_answer_recall'] or 0:.3f}, answered kept {e['answered_kept']:.3f}  "
              f"{e['ms_per_query']:.0f} ms/query", file=sys.stderr)
    call(base, key, "DELETE", f"/vector_stores/{vs}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.markdown:
        print("| ranker | recall@5 | MRR@10 | threshold | no-answer precision | no-answer recall | answered kept | ms/query |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, e in results["rankers"].items():
            nap = "-" if e["no_answer_precision"] is None else f"{e['no_answer_precision']:.2f}"
            nar = "-" if e["no_answer_recall"] is None else f"{e['no_answer_recall']:.2f}"
            print(f"| {name} | {e['recall_at_5']:.3f} | {e['mrr_at_10']:.3f} | {e['threshold']:.3g} | {nap} | "
                  f"{nar} | {e['answered_kept']:.2f} | {e['ms_per_query']:.0f} |")
        styles = sorted({s for e in results["rankers"].values() for s in e["by_style"]})
        print()
        print("| ranker | " + " | ".join(f"{s} recall@5 / MRR@10" for s in styles) + " |")
        print("|---|" + "---:|" * len(styles))
        for name, e in results["rankers"].items():
            print(f"| {name} | " + " | ".join(
                f"{e['by_style'][s]['recall_at_5']:.3f} / {e['by_style'][s]['mrr_at_10']:.3f}" for s in styles) + " |")


if __name__ == "__main__":
    main()
