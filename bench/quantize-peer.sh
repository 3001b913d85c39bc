#!/usr/bin/env bash
# quantize-peer.sh [TYPE] [THREADS] [RUNS] — `kvik quantize` against
# llama.cpp's llama-quantize on the same F32 input: SmolLM2-135M-Instruct
# dequantized by kvik (the default model). Runs alternate (kvik, llama,
# kvik, ...) RUNS times each (default 3); prints each wall time and the
# medians. Both outputs are compared tensor by tensor at the end
# (scripts/quant_gguf.py). Defaults: Q4_K_M, 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."
TYPE=${1:-Q4_K_M}
T=${2:-2}
RUNS=${3:-3}
QUANTIZE=$(bench/build-llama.sh llama-quantize)
make -j2 build/kvik >/dev/null
KVIK=$PWD/build/kvik
SMOL=$(scripts/fetch-model.sh)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$KVIK" quantize -q "$SMOL" "$WORK/in.gguf" F32 -t "$T" 2>/dev/null

now() { date +%s.%N; }
k=() l=()
for i in $(seq "$RUNS"); do
    t0=$(now); "$KVIK" quantize -q "$WORK/in.gguf" "$WORK/kvik.gguf" "$TYPE" "$T" 2>/dev/null; t1=$(now)
    "$QUANTIZE" "$WORK/in.gguf" "$WORK/llama.gguf" "$TYPE" "$T" >/dev/null 2>&1; t2=$(now)
    k+=("$(echo "$t1 - $t0" | bc)"); l+=("$(echo "$t2 - $t1" | bc)")
    printf 'run %d: kvik %.2f s, llama-quantize %.2f s\n' "$i" "${k[-1]}" "${l[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mk=$(median "${k[@]}"); ml=$(median "${l[@]}")
printf 'median of %d: kvik %.2f s, llama-quantize %.2f s (kvik / llama %.2f), %s, %s threads\n' \
    "$RUNS" "$mk" "$ml" "$(echo "$mk / $ml" | bc -l)" "$TYPE" "$T"
python3 scripts/quant_gguf.py "$WORK/kvik.gguf" "$WORK/llama.gguf" | tail -1
