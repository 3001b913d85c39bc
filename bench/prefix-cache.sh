#!/usr/bin/env bash
# prefix-cache.sh -- `kvik serve` with and without its prefix cache under the
# prefix workload of `kvik bench serve` (one shared system prompt, distinct
# questions): the same server settings, the same seed and prompts, runs
# alternating off/on, each server started fresh on a free port.
#
#   bench/prefix-cache.sh [-m MODEL] [-t THREADS] [--repeats 3] [--num-prompts 40]
#                         [--prefix-len 1000] [--question-len 32] [--output-len 16]
#                         [--concurrency 4] [--out DIR]
#
# Writes DIR (default ~/.cache/kvik/prefix-cache/<date>)/{off,on}-N.json and
# each server's log, and prints one line per run plus the medians over runs:
# median TTFT, mean TTFT, output and total tokens/s, and the cache hit rate
# from /metrics. $KVIK_BIN is the kvik used for both sides (default build/kvik).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KVIK=${KVIK_BIN:-$ROOT/build/kvik}
MODEL=""
THREADS=2
REPEATS=3
NUM=40
PREFIX=1000
QUESTION=32
OUTLEN=16
CONC=4
OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
    -m) MODEL=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --num-prompts) NUM=$2; shift 2 ;;
    --prefix-len) PREFIX=$2; shift 2 ;;
    --question-len) QUESTION=$2; shift 2 ;;
    --output-len) OUTLEN=$2; shift 2 ;;
    --concurrency) CONC=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "prefix-cache.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$MODEL" ] || MODEL=$(ls "$HOME"/.cache/kvik/models/SmolLM2-135M-Instruct.Q4_1.gguf)
OUT=${OUT:-$HOME/.cache/kvik/prefix-cache/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"

serve_and_bench() { # NAME EXTRA_SERVE_FLAGS...
    local name=$1; shift
    local log=$OUT/$name.log
    "$KVIK" serve -m "$MODEL" -t "$THREADS" -c 2048 --ctx-total 32768 --port 0 "$@" 2>"$log" &
    local pid=$! port=""
    for _ in $(seq 600); do
        port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" | head -1)
        [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
        sleep 0.1
    done
    "$KVIK" bench serve --url "http://127.0.0.1:$port" -m "$MODEL" --dataset prefix --num-prefixes 1 \
        --prefix-len "$PREFIX" --question-len "$QUESTION" --output-len "$OUTLEN" --num-prompts "$NUM" \
        --max-concurrency "$CONC" --temperature 0 --seed 1 --quiet --json "$OUT/$name.json" >/dev/null
    local hits queries
    hits=$(curl -s "http://127.0.0.1:$port/metrics" | awk '$1=="kvik_prefix_cache_hits_total"{print $2}')
    queries=$(curl -s "http://127.0.0.1:$port/metrics" | awk '$1=="kvik_prefix_cache_queries_total"{print $2}')
    kill -TERM "$pid"; wait "$pid" || true
    python3 - "$OUT/$name.json" "$name" "${hits:-0}" "${queries:-0}" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("summary", r)
def find(d, *keys):
    for k in keys:
        if isinstance(d, dict) and k in d: d = d[k]
        else: return None
    return d
ttft = find(s, "ttft_ms") or find(s, "ttft")
tput = s.get("output_throughput") or s.get("output_tok_s")
total = s.get("total_token_throughput") or s.get("total_tok_s")
q = float(sys.argv[4]); h = float(sys.argv[3])
print(f"{sys.argv[2]:6s} ttft_median_ms {ttft['median']:9.1f} ttft_mean_ms {ttft['mean']:9.1f} "
      f"out_tok_s {tput:7.2f} total_tok_s {total:8.1f} hit_rate {h / q if q else 0:5.3f} load1 {sys.argv[5]}")
PY
}

for i in $(seq "$REPEATS"); do
    serve_and_bench "off-$i" --no-prefix-cache | tee -a "$OUT/runs.txt"
    serve_and_bench "on-$i" | tee -a "$OUT/runs.txt"
done
echo "medians over $REPEATS runs:"
python3 - "$OUT/runs.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for side in ("off", "on"):
    runs = [r for r in rows if r[0].startswith(side + "-")]
    med = lambda i: statistics.median(float(r[i]) for r in runs)
    print(f"{side:4s} ttft_median_ms {med(2):9.1f} ttft_mean_ms {med(4):9.1f} out_tok_s {med(6):7.2f} "
          f"total_tok_s {med(8):8.1f}")
PY
