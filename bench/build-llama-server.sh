#!/usr/bin/env bash
# build-llama-server.sh -- builds llama.cpp's llama-server (the peer for
# `kvik bench serve` / bench/serve-peer.sh) from the same llama-cpp-python
# sdist bench/build-llama-bench.sh uses, in its own build folder beside that
# one under $KVIK_PEER_DIR (default ~/.cache/kvik/peer); a second run is a
# no-op. Same instruction sets as llama-bench (AVX-512, no AMX: see there).
#
#   bench/build-llama-server.sh          prints the path of llama-server
#
# ~10-15 minutes on 2 cores. Needs cmake and g++ (apt-get install cmake g++).
set -euo pipefail

VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
DIR=${KVIK_PEER_DIR:-$HOME/.cache/kvik/peer}
SRC=$DIR/llama_cpp_python-$VERSION
BUILD=$DIR/build-server-$VERSION
BIN=$BUILD/bin/llama-server
STAMP=$BUILD/kvik-config-1   # bump when the cmake options below change

if [ -x "$BIN" ] && [ -f "$STAMP" ]; then
    echo "$BIN"
    exit 0
fi

mkdir -p "$DIR"
TARBALL=$DIR/llama_cpp_python-$VERSION.tar.gz
if [ ! -f "$TARBALL" ]; then
    echo "build-llama-server: downloading the llama-cpp-python $VERSION sdist" >&2
    if ! python3 -m pip download --quiet --no-deps --no-binary :all: \
            -d "$DIR" "llama-cpp-python==$VERSION" >&2; then
        echo "build-llama-server: cannot download llama-cpp-python $VERSION from PyPI (offline?)" >&2
        exit 1
    fi
fi
echo "$SHA256  $TARBALL" | sha256sum -c --quiet - || {
    echo "build-llama-server: $TARBALL does not match the pinned sha256" >&2
    exit 1
}
[ -d "$SRC" ] || tar -xzf "$TARBALL" -C "$DIR"

for tool in cmake g++; do
    command -v $tool >/dev/null || {
        echo "build-llama-server: $tool is missing (apt-get install cmake g++)" >&2
        exit 1
    }
done

echo "build-llama-server: building llama-server in $BUILD (several minutes)" >&2
cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DGGML_AVX_VNNI=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TOOLS=ON >&2
cmake --build "$BUILD" --target llama-server -j "$(nproc)" >&2
[ -x "$BIN" ] || { echo "build-llama-server: $BIN was not produced" >&2; exit 1; }
"$BIN" --help >/dev/null 2>&1 || { echo "build-llama-server: $BIN does not run" >&2; exit 1; }
touch "$STAMP"
echo "$BIN"
