#!/usr/bin/env bash
# build-llama-bench.sh -- llama.cpp's llama-bench, the peer for `kvik bench
# offline` (bench/build-llama.sh says how and where); prints its path.
exec "$(dirname "$0")/build-llama.sh" llama-bench
