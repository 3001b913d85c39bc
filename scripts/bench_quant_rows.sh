#!/usr/bin/env bash
# bench_quant_rows.sh -- the row quantizers' speed, llama.cpp's ggml-base
# (the llama-quantize build of bench/build-llama.sh) against kvik's
# tensor_quantize_rows: ns per weight, one thread, best of 3 x 3 runs taken
# alternately (scripts/bench_quant_rows.c). Needs `make` first.
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${KVIK_PEER_DIR:-$HOME/.cache/kvik/peer}
VERSION=0.3.36
BUILD=$DIR/build-$VERSION
SRC=$DIR/llama_cpp_python-$VERSION/vendor/llama.cpp
bench/build-llama.sh llama-quantize >/dev/null
[ -f build/libkvik-internal.a ] || { echo "bench_quant_rows: run make first" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -std=gnu11 -O2 -ffp-contract=off -DPEER -I"$SRC/ggml/include" -Itests scripts/bench_quant_rows.c \
    "$BUILD/ggml/src/libggml-base.a" -lstdc++ -lgomp -lm -pthread -o "$TMP/peer"
cc -std=gnu11 -O2 -ffp-contract=off -Iinclude -Isrc -Itests scripts/bench_quant_rows.c \
    build/libkvik-internal.a -lm -pthread -o "$TMP/kvik"

best() { sort -g | head -1; }
printf '%-5s %-8s %10s %10s\n' type weights llama.cpp kvik
for type in Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K; do
    for im in "" imatrix; do
        : >"$TMP/p"; : >"$TMP/k"
        for _ in 1 2 3; do
            "$TMP/peer" $type $im | cut -d' ' -f3 >>"$TMP/p"
            "$TMP/kvik" $type $im | cut -d' ' -f3 >>"$TMP/k"
        done
        printf '%-5s %-8s %10s %10s\n' $type "${im:-none}" "$(best <"$TMP/p")" "$(best <"$TMP/k")"
    done
done
