#!/usr/bin/env bash
# gen_quant_golden_rows.sh -- regenerates tests/data/quant_rows_golden.txt:
# the sha256 of the bytes llama.cpp's ggml_quantize_chunk writes for every
# case of tests/quant_rows_cases.h (every type kvik quantizes, without and
# with importance weights). The quantizer is llama.cpp's own ggml-base, the
# library bench/build-llama.sh builds for llama-quantize (same objects, same
# flags), linked into scripts/gen_quant_golden_rows.c.
#
# Output lines: TYPE DIST ROWSxN WEIGHTS SHA256, sorted; '#' lines are
# comments. Needs the llama-quantize build (bench/build-llama.sh
# llama-quantize) and cc.

set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${KVIK_PEER_DIR:-$HOME/.cache/kvik/peer}
VERSION=0.3.36
BUILD=$DIR/build-$VERSION
SRC=$DIR/llama_cpp_python-$VERSION/vendor/llama.cpp
OUT=tests/data/quant_rows_golden.txt

bench/build-llama.sh llama-quantize >/dev/null
LIB=$BUILD/ggml/src/libggml-base.a
[ -f "$LIB" ] || { echo "gen_quant_golden_rows: $LIB is missing" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# the generator's own arithmetic (the inputs) is plain float32, no contraction
cc -std=gnu11 -O1 -ffp-contract=off -I"$SRC/ggml/include" -Itests \
    scripts/gen_quant_golden_rows.c "$LIB" -o "$TMP/gen" -lstdc++ -lgomp -lm -pthread
mkdir "$TMP/out"
"$TMP/gen" "$TMP/out"

{
    echo "# sha256 of ggml_quantize_chunk's output on tests/quant_rows_cases.h (llama.cpp from"
    echo "# llama-cpp-python $VERSION, ggml-base as built by bench/build-llama.sh)."
    echo "# Made by scripts/gen_quant_golden_rows.sh. TYPE DIST ROWSxN WEIGHTS SHA256"
    (cd "$TMP/out" && for f in *.bin; do
        set -- $(echo "${f%.bin}" | tr . ' ')
        echo "$1 $2 $3 $4 $(sha256sum "$f" | cut -d' ' -f1)"
    done) | LC_ALL=C sort
} > "$OUT"
echo "gen_quant_golden_rows: wrote $OUT ($(grep -vc '^#' "$OUT") cases)" >&2
