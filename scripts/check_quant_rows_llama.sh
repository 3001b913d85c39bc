#!/usr/bin/env bash
# check_quant_rows_llama.sh [MODEL.gguf] -- checks tensor_quantize_rows
# against the real llama-quantize program (bench/build-llama.sh
# llama-quantize) on a whole model: llama-quantize makes an F32 copy of
# MODEL (default: the cached SmolLM2-135M-Instruct Q4_1), then, for every
# type kvik quantizes, a --pure quantization without and with an importance
# matrix (made by scripts/check_quant_rows_llama.c --make-imatrix); the
# checker quantizes the F32 tensors with tensor_quantize_rows and compares
# every tensor's bytes. Needs `make` first. Work files go to a temporary
# folder (~1.5 GB); one thread each; a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=${1:-$HOME/.cache/kvik/models/SmolLM2-135M-Instruct.Q4_1.gguf}
QUANTIZE=$(bench/build-llama.sh llama-quantize)
[ -f build/libkvik-internal.a ] || { echo "check_quant_rows_llama: run make first" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -std=gnu11 -O2 -ffp-contract=off -Iinclude -Isrc -Itests scripts/check_quant_rows_llama.c \
    build/libkvik-internal.a -lm -pthread -o "$TMP/check"
"$QUANTIZE" --allow-requantize "$MODEL" "$TMP/f32.gguf" F32 1 >"$TMP/log" 2>&1 || { cat "$TMP/log" >&2; exit 1; }
"$TMP/check" --make-imatrix "$TMP/f32.gguf" "$TMP/im.dat"

status=0
for type in Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K F16 BF16; do
    for im in none imatrix; do
        args=(--pure)
        [ $im = imatrix ] && args+=(--imatrix "$TMP/im.dat")
        "$QUANTIZE" "${args[@]}" "$TMP/f32.gguf" "$TMP/q.gguf" $type 1 >"$TMP/log" 2>&1 || {
            cat "$TMP/log" >&2; exit 1; }
        echo -n "$type $im: "
        if [ $im = imatrix ]; then "$TMP/check" "$TMP/f32.gguf" "$TMP/q.gguf" "$TMP/im.dat" || status=1
        else "$TMP/check" "$TMP/f32.gguf" "$TMP/q.gguf" || status=1; fi
        rm -f "$TMP/q.gguf"
    done
done
exit $status
