#!/usr/bin/env bash
# corpus-slice.sh BYTES DST -- writes the first BYTES bytes of english.txt
# (scripts/fetch-corpus.sh, fetched when missing), cut back to just after
# the last newline in them, to DST: the text the perplexity and imatrix
# golden data are made from (tests/main.c's test_corpus_slice makes the
# same slice).
set -euo pipefail
[ $# = 2 ] || { echo "usage: scripts/corpus-slice.sh BYTES DST" >&2; exit 2; }
corpus=$("$(dirname "$0")/fetch-corpus.sh" | tail -n 1)
python3 - "$corpus/english.txt" "$1" "$2" <<'PY'
import sys
src, n, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = open(src, "rb").read()[:n]
d = d[: d.rfind(b"\n") + 1]
open(dst, "wb").write(d)
PY
