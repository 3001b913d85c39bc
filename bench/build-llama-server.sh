#!/usr/bin/env bash
# build-llama-server.sh -- llama.cpp's llama-server, the peer for `kvik serve`
# (bench/build-llama.sh says how and where); prints its path.
exec "$(dirname "$0")/build-llama.sh" llama-server
