#!/usr/bin/env bash
# quality.sh [MODEL ...] [--types T,T] [-t N] [--force] [--no-speed] [--no-doc] -- regenerates
# the quality table of docs/quality.md: every registry model (default: all
# four), dequantized to F32 as the base, against its requantizations
# (Q8_0 .. Q2_K, with and without an importance matrix) and the f16 / q8_0
# KV caches: size, speed, PPL, KL divergence, same top token and the eval
# pass rate per tag. Builds kvik and fetches the corpus first. The figures
# are kept in bench/quality-results (committed), the files made on the way
# in ~/.cache/kvik/quality, so a rerun measures only what is missing.
# Hours for all four models on 2 cores (the 1.5B's F32 base is slow).
set -euo pipefail
cd "$(dirname "$0")/.."
make -j"$(nproc)" >/dev/null
[ -f "${KVIK_CORPUS:-$HOME/.cache/kvik/corpus}/english.txt" ] || scripts/fetch-corpus.sh >/dev/null
exec python3 bench/quality.py "$@"
