#!/usr/bin/env bash
# serve-peer.sh -- `kvik serve` against llama.cpp's llama-server under the
# same load: same model, same threads, same context per sequence and the same
# number of parallel sequences, one server after the other on a free port,
# each driven by the same `kvik bench sweep` (same seed, same prompts).
#
#   bench/serve-peer.sh [-m MODEL] [-t THREADS] [--concurrency 1,4,8 | --rates 1,2,inf]
#                       [--num-prompts 32] [--input-len 128] [--output-len 64]
#                       [--out DIR] [--only llama|kvik] [-- EXTRA SWEEP FLAGS]
#
# llama-server is built by bench/build-llama-server.sh from the llama-cpp-python
# sdist bench/build-llama-bench.sh uses (cached under ~/.cache/kvik/peer).
# Writes into DIR (default ~/.cache/kvik/serve-peer/<date>): llama.json,
# kvik.json (sweep reports), llama.svg, kvik.svg, compare.txt and compare.svg
# (both curves), and each server's log. A server that does not start (kvik
# serve before it exists) is reported and skipped; the other still runs.
# $KVIK_BIN is the kvik that generates the load (default build/kvik),
# $KVIK_SERVE_BIN the one that serves (default the same); $KVIK_SERVE_FLAGS
# adds flags to its command line (e.g. "--prefill-chunk 64").
#
# Requests are chat completions at temperature 0 with ignore_eos, so both
# servers generate exactly --output-len tokens for every request.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KVIK=${KVIK_BIN:-$ROOT/build/kvik}          # the load generator
KVIK_SERVE=${KVIK_SERVE_BIN:-$KVIK}         # the kvik that serves (another build may be given)
MODEL=""
THREADS=$(nproc)
SWEEP=(--concurrency 1,4,8)
NP=8
NUM=32
IN=128
OUTLEN=64
OUT=""
ONLY=""
EXTRA=()

max_of_list() { tr ',' '\n' <<<"$1" | grep -v inf | sort -n | tail -1; }

while [ $# -gt 0 ]; do
    case "$1" in
        -m) MODEL=$2; shift 2 ;;
        -t) THREADS=$2; shift 2 ;;
        --concurrency) SWEEP=(--concurrency "$2"); NP=$(max_of_list "$2"); shift 2 ;;
        --rates) SWEEP=(--rates "$2"); shift 2 ;;
        --parallel) NP=$2; shift 2 ;;
        --num-prompts) NUM=$2; shift 2 ;;
        --input-len) IN=$2; shift 2 ;;
        --output-len) OUTLEN=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        --) shift; EXTRA=("$@"); break ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "serve-peer: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

[ -n "$MODEL" ] || MODEL="${KVIK_MODELS:-$HOME/.cache/kvik/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$MODEL" ] || { echo "serve-peer: model $MODEL not found (make model)" >&2; exit 1; }
[ -x "$KVIK" ] || { echo "serve-peer: $KVIK not built (make)" >&2; exit 1; }
[ -n "$OUT" ] || OUT="$HOME/.cache/kvik/serve-peer/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"

# every sequence gets its prompt, its output and room for the chat template
CTX_SEQ=$(( (IN + OUTLEN + 64 + 15) / 16 * 16 ))
CTX_ALL=$(( CTX_SEQ * NP ))

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_ready URL PID: until GET URL/health answers 200, the process dies, or 300 s pass
wait_ready() {
    local url=$1 pid=$2
    for _ in $(seq 1 600); do
        kill -0 "$pid" 2>/dev/null || return 1
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health" || true)" = 200 ]; then return 0; fi
        sleep 0.5
    done
    return 1
}

stop() {
    local pid=$1
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
}

# run_side NAME CMD...: start the server, sweep it, stop it
run_side() {
    local name=$1; shift
    local port; port=$(free_port)
    local url="http://127.0.0.1:$port"
    echo "serve-peer: starting $name on $url" >&2
    "$@" --port "$port" >"$OUT/$name.log" 2>&1 &
    local pid=$!
    if ! wait_ready "$url" "$pid"; then
        echo "serve-peer: $name did not start (see $OUT/$name.log):" >&2
        tail -3 "$OUT/$name.log" >&2 || true
        stop "$pid"
        return 1
    fi
    echo "serve-peer: sweeping $name" >&2
    local rc=0
    "$KVIK" bench sweep --url "$url" "${SWEEP[@]}" --num-prompts "$NUM" --input-len "$IN" \
        --output-len "$OUTLEN" --temperature 0 -m "$MODEL" --seed 1 --quiet \
        --json "$OUT/$name.json" --plot "$OUT/$name.svg" ${EXTRA[@]+"${EXTRA[@]}"} \
        | tee "$OUT/$name.txt" || rc=$?
    stop "$pid"
    return $rc
}

have_llama=0 have_kvik=0
if [ "$ONLY" != kvik ]; then
    LLAMA_SERVER=$("$ROOT/bench/build-llama-server.sh")
    run_side llama "$LLAMA_SERVER" -m "$MODEL" -t "$THREADS" -tb "$THREADS" --host 127.0.0.1 \
        -c "$CTX_ALL" -np "$NP" --metrics -ngl 0 && have_llama=1 || true
fi
if [ "$ONLY" != llama ]; then
    if "$KVIK_SERVE" serve --help >/dev/null 2>&1; then
        run_side kvik "$KVIK_SERVE" serve -m "$MODEL" -t "$THREADS" --host 127.0.0.1 -c "$CTX_SEQ" \
            --max-seqs "$NP" --ctx-total "$CTX_ALL" ${KVIK_SERVE_FLAGS:-} && have_kvik=1 || true
    else
        echo "serve-peer: $KVIK_SERVE has no 'serve' command yet; kvik side skipped" >&2
    fi
fi

if [ $have_llama = 1 ] && [ $have_kvik = 1 ]; then
    "$KVIK" bench compare "$OUT/llama.json" "$OUT/kvik.json" --names llama.cpp,kvik \
        --plot "$OUT/compare.svg" | tee "$OUT/compare.txt"
fi
echo "serve-peer: results in $OUT" >&2
[ $have_llama = 1 ] || [ $have_kvik = 1 ]
