#!/usr/bin/env bash
# itl-ratio.sh -- the serving issue's two batching targets, measured as
# pairs: `kvik serve` with one stream, then at once with N streams, each run
# by bench/serve-peer.sh --only kvik, repeated. A single stream's speed
# follows the machine's memory speed, which drifts, so each ratio comes from
# one back-to-back pair, never from runs minutes apart.
#
#   bench/itl-ratio.sh [-t THREADS] [--streams 16] [--pairs 3] [--input-len 128]
#                      [--output-len 128] [--out DIR]
#
# Prints, per pair and as medians over the pairs: ITL p50 (ms) of one stream
# and of N, their ratio (target at most 3x) and the decode rate of N streams
# against one's, N / ITL_N over 1 / ITL_1 (target at least 4x). Each run's
# sweep report stays in DIR/pairK-1 and DIR/pairK-N (default
# ~/.cache/kvik/itl-ratio/<date>). Extra environment as serve-peer.sh
# ($KVIK_BIN, $KVIK_SERVE_BIN, $KVIK_SERVE_FLAGS).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
THREADS=$(nproc)
STREAMS=16
PAIRS=3
IN=128
OUTLEN=128
OUT=""

while [ $# -gt 0 ]; do
    case "$1" in
        -t) THREADS=$2; shift 2 ;;
        --streams) STREAMS=$2; shift 2 ;;
        --pairs) PAIRS=$2; shift 2 ;;
        --input-len) IN=$2; shift 2 ;;
        --output-len) OUTLEN=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "itl-ratio: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
case "$STREAMS$PAIRS" in *[!0-9]*) echo "itl-ratio: --streams and --pairs take positive integers" >&2; exit 2 ;; esac
[ "$STREAMS" -ge 2 ] && [ "$PAIRS" -ge 1 ] || { echo "itl-ratio: --streams >= 2, --pairs >= 1" >&2; exit 2; }
[ -n "$OUT" ] || OUT="$HOME/.cache/kvik/itl-ratio/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"

run() { # run CONCURRENCY PROMPTS DIR
    "$ROOT/bench/serve-peer.sh" -t "$THREADS" --only kvik --concurrency "$1" --num-prompts "$2" \
        --input-len "$IN" --output-len "$OUTLEN" --out "$3" >"$3.log" 2>&1 ||
        { echo "itl-ratio: serve-peer failed (see $3.log)" >&2; exit 1; }
}

for k in $(seq 1 "$PAIRS"); do
    run 1 24 "$OUT/pair$k-1"
    run "$STREAMS" $((STREAMS * 2)) "$OUT/pair$k-$STREAMS"
done

python3 - "$OUT" "$PAIRS" "$STREAMS" <<'EOF'
import json, statistics, sys
out, pairs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def itl(d):
    return json.load(open(f"{d}/kvik.json"))["points"][0]["summary"]["itl_ms"]["median"]
rows = []
for k in range(1, pairs + 1):
    one, many = itl(f"{out}/pair{k}-1"), itl(f"{out}/pair{k}-{n}")
    rows.append((one, many, many / one, n * one / many))
print(f"{'pair':>4} {'ITL 1 ms':>9} {'ITL %d ms' % n:>10} {'ITL ratio':>10} {'decode rate':>12}")
for k, r in enumerate(rows, 1):
    print(f"{k:>4} {r[0]:>9.2f} {r[1]:>10.2f} {r[2]:>9.2f}x {r[3]:>11.2f}x")
med = [statistics.median(c) for c in zip(*rows)]
print(f"{'med':>4} {med[0]:>9.2f} {med[1]:>10.2f} {med[2]:>9.2f}x {med[3]:>11.2f}x")
print(f"targets: ITL ratio at most 3x, decode rate at least 4x; reports in {out}")
EOF
