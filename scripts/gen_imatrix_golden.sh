#!/usr/bin/env bash
# gen_imatrix_golden.sh — llama-imatrix's importance matrices for
# tests/test_imatrix.c, summarized into tests/data/imatrix_golden.json.
#
# The text is the slice of the corpus that scripts/gen_ppl_golden.sh uses
# (english.txt of scripts/fetch-corpus.sh, never committed: its first
# SLICE_BYTES bytes, cut back to just after the last newline in them); the
# test makes the same slice and checks its sha256 against the one here.
#
# llama-imatrix is built from the llama-cpp-python sdist by
# bench/build-llama.sh. Each run's file is summarized by
# scripts/imatrix_summary.py (a GGUF reader of its own): per entry its
# name, column count, token count, the sum over columns of the means
# (sum / count) and the means at six columns (0, 1, cols/3, cols/2,
# cols-1 and the largest).
#
#   scripts/gen_imatrix_golden.sh [MODEL]     default: the default model in the cache
set -euo pipefail
cd "$(dirname "$0")/.."

SLICE_BYTES=24576
MODEL=${1:-${KVIK_MODELS:-$HOME/.cache/kvik/models}/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=tests/data/imatrix_golden.json
THREADS=${THREADS:-2}

[ -f "$MODEL" ] || { echo "gen_imatrix_golden.sh: $MODEL not found (make model)" >&2; exit 1; }
BIN=$(bench/build-llama.sh llama-imatrix)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TEXT=$tmp/english-slice.txt
scripts/corpus-slice.sh "$SLICE_BYTES" "$TEXT"

# the runs: context:chunks
RUNS="512:4 128:6"
for r in $RUNS; do
    c=${r%%:*} k=${r##*:}
    echo "gen_imatrix_golden.sh: llama-imatrix -c $c --chunks $k" >&2
    "$BIN" -m "$MODEL" -f "$TEXT" -o "$tmp/im-$c-$k.gguf" -c "$c" --chunks "$k" -t "$THREADS" --no-ppl \
        > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log" >&2; exit 1; }
    scripts/imatrix_summary.py "$tmp/im-$c-$k.gguf" > "$tmp/sum-$c-$k.json"
done

python3 - "$OUT" "$MODEL" "$TEXT" "$SLICE_BYTES" "$THREADS" "$tmp" $RUNS <<'PY'
import hashlib, json, os, sys
out, model, text, slice_bytes, threads, tmp = sys.argv[1:7]
data = open(text, "rb").read()
runs = []
for r in sys.argv[7:]:
    c, k = r.split(":")
    s = json.load(open("%s/sum-%s-%s.json" % (tmp, c, k)))
    runs.append({"n_ctx": int(c), "chunks": int(k),
                 "command": "llama-imatrix -m %s -f TEXT -o FILE -c %s --chunks %s -t %s --no-ppl"
                            % (os.path.basename(model), c, k, threads),
                 "chunk_count": s["chunk_count"], "chunk_size": s["chunk_size"], "entries": s["entries"]})
doc = {
    "peer": "llama-imatrix of llama.cpp as bundled in the llama-cpp-python 0.3.36 sdist (bench/build-llama.sh)",
    "model": os.path.basename(model),
    "text": "the first %s bytes of english.txt (scripts/fetch-corpus.sh), cut after the last newline" % slice_bytes,
    "slice_bytes": int(slice_bytes),
    "text_bytes": len(data),
    "text_sha256": hashlib.sha256(data).hexdigest(),
    "runs": runs,
}
# one entry a line
body = json.dumps(doc, indent=1)
with open(out, "w") as f:
    lines = []
    for run in runs:
        run_entries = run.pop("entries")
        run["entries"] = "@ENTRIES%d@" % len(lines)
        lines.append(",\n".join("   " + json.dumps(e, separators=(",", ":")) for e in run_entries))
    body = json.dumps(doc, indent=1)
    for i, l in enumerate(lines):
        body = body.replace('"@ENTRIES%d@"' % i, "[\n" + l + "\n  ]")
    f.write(body + "\n")
print("gen_imatrix_golden.sh: wrote %s" % out, file=sys.stderr)
PY
