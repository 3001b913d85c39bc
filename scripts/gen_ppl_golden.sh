#!/usr/bin/env bash
# gen_ppl_golden.sh — llama-perplexity's figures for tests/test_perplexity.c,
# written to tests/data/ppl_golden.json.
#
# The text is a slice of the corpus of scripts/fetch-corpus.sh (english.txt:
# ShareGPT conversations, fetched into ~/.cache/kvik/corpus, never
# committed): its first SLICE_BYTES bytes, cut back to just after the last
# newline in them. The test makes the same slice and checks its sha256
# against the one recorded here.
#
# llama-perplexity is built from the llama-cpp-python sdist by
# bench/build-llama.sh (no AMX; see there). Each run is recorded with its
# command, its final "PPL = X +/- Y" and its chunk count.
#
#   scripts/gen_ppl_golden.sh [MODEL]     default: the default model in the cache
set -euo pipefail
cd "$(dirname "$0")/.."

SLICE_BYTES=24576
MODEL=${1:-${KVIK_MODELS:-$HOME/.cache/kvik/models}/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=tests/data/ppl_golden.json
THREADS=${THREADS:-2}

[ -f "$MODEL" ] || { echo "gen_ppl_golden.sh: $MODEL not found (make model)" >&2; exit 1; }
BIN=$(bench/build-llama.sh llama-perplexity)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TEXT=$tmp/english-slice.txt
scripts/corpus-slice.sh "$SLICE_BYTES" "$TEXT"

# the runs: context, chunks (0: all the text gives)
RUNS="512:0 512:4 128:8"
results=()
for r in $RUNS; do
    c=${r%%:*} k=${r##*:}
    args=(-m "$MODEL" -f "$TEXT" -c "$c" -t "$THREADS")
    [ "$k" = 0 ] || args+=(--chunks "$k")
    echo "gen_ppl_golden.sh: llama-perplexity -c $c --chunks $k" >&2
    "$BIN" "${args[@]}" > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log" >&2; exit 1; }
    line=$(grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' "$tmp/run.log")
    chunks=$(grep -o 'calculating perplexity over [0-9]* chunks' "$tmp/run.log" | grep -o '[0-9]*')
    ppl=$(echo "$line" | awk '{print $5}')
    err=$(echo "$line" | awk '{print $7}')
    results+=("$c $k $chunks $ppl $err")
done

python3 - "$OUT" "$MODEL" "$TEXT" "$SLICE_BYTES" "$THREADS" "$BIN" "${results[@]}" <<'EOF'
import hashlib, json, os, sys
out, model, text, slice_bytes, threads, binpath = sys.argv[1:7]
data = open(text, "rb").read()
runs = []
for r in sys.argv[7:]:
    c, k, chunks, ppl, err = r.split()
    cmd = "llama-perplexity -m %s -f TEXT -c %s -t %s" % (os.path.basename(model), c, threads)
    if k != "0":
        cmd += " --chunks %s" % k
    runs.append({"n_ctx": int(c), "chunks_arg": int(k), "n_chunks": int(chunks),
                 "ppl": float(ppl), "ppl_err": float(err), "command": cmd})
doc = {
    "peer": "llama-perplexity of llama.cpp as bundled in the llama-cpp-python 0.3.36 sdist (bench/build-llama.sh)",
    "model": os.path.basename(model),
    "text": "the first %s bytes of english.txt (scripts/fetch-corpus.sh), cut after the last newline" % slice_bytes,
    "slice_bytes": int(slice_bytes),
    "text_bytes": len(data),
    "text_sha256": hashlib.sha256(data).hexdigest(),
    "runs": runs,
}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
print("gen_ppl_golden.sh: wrote %s" % out, file=sys.stderr)
EOF
