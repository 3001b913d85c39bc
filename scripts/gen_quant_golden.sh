#!/usr/bin/env bash
# gen_quant_golden.sh — regenerates tests/data/quant_golden.json, the
# per-tensor types and data hashes llama.cpp's llama-quantize writes for
# the cases of scripts/gen_quant_golden.py, and checks that llama-bench
# loads one of its outputs. tests/test_quantize.c runs kvik quantize on the
# same inputs and compares.
#
#   scripts/gen_quant_golden.sh        (from the repository root; ~2 minutes on 2 cores)
#
# Needs: llama-quantize and llama-bench (bench/build-llama.sh builds them,
# ~15 minutes the first time), python3, and the default model
# (scripts/fetch-model.sh). Work files go to a temporary folder (~700 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

QUANTIZE=$(bench/build-llama.sh llama-quantize)
BENCH=$(bench/build-llama.sh llama-bench)
make -j2 build/kvik >/dev/null
KVIK=$PWD/build/kvik
SMOL=$(scripts/fetch-model.sh)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for s in quant-llama3 quant-qwen2 quant-gemma3 quant-phi3; do
    "$KVIK" synth --shape "$s" --type f32 --seed 1 --vocab "$SMOL" -o "$WORK/$s-f32.gguf" -t 2 >/dev/null 2>&1
done
"$KVIK" quantize -q "$SMOL" "$WORK/smol-f32.gguf" F32 -t 2 2>/dev/null
python3 scripts/gen_quant_golden.py "$KVIK" "$QUANTIZE" "$BENCH" "$WORK"
