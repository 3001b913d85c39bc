#!/usr/bin/env bash
# build-llama.sh TOOL -- builds one of llama.cpp's own programs, llama-bench
# (the peer for `kvik bench offline`, bench/compare-llama.py), llama-server
# (the peer for `kvik serve`, bench/serve-peer.sh), llama-perplexity (the
# peer for `kvik perplexity`, scripts/gen_ppl_golden.sh), llama-quantize or
# llama-imatrix (the peers for `kvik quantize` and `kvik imatrix`), from the
# llama-cpp-python sdist, which bundles the llama.cpp sources. Everything
# lives outside the repository, in $KVIK_PEER_DIR (default ~/.cache/kvik/peer),
# one build folder per tool (all but llama-server share llama-bench's); a
# second run is a no-op. Prints the program's path.
# bench/build-llama-bench.sh and bench/build-llama-server.sh call this.
# scripts/fetch-fixtures.sh takes the tests' vocabulary files from the same
# sdist in the same folder.
#
# llama.cpp gets every instruction set this machine has that it can use:
# AVX-512 (F, BW, DQ, VL, VBMI, VNNI, BF16), AVX-VNNI, AVX2, FMA, F16C, BMI2.
# Not AMX: with GGML_NATIVE=ON llama.cpp 0.3.36's AMX path faults on its
# first ldtilecfg here (it never asks Linux for the AMX tile state with
# arch_prctl(ARCH_REQ_XCOMP_PERM)), so a native build cannot run at all.
# ~10-15 minutes on 2 cores. Needs cmake and g++ (apt-get install cmake g++).

set -euo pipefail

VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
DIR=${KVIK_PEER_DIR:-$HOME/.cache/kvik/peer}
SRC=$DIR/llama_cpp_python-$VERSION
TOOL=${1:-}
case "$TOOL" in
    # bump a stamp when its cmake options below change
    llama-bench|llama-perplexity|llama-quantize|llama-imatrix) BUILD=$DIR/build-$VERSION; STAMP=$BUILD/kvik-config-2; SERVER=(-DLLAMA_BUILD_SERVER=OFF) ;;
    llama-server) BUILD=$DIR/build-server-$VERSION; STAMP=$BUILD/kvik-config-1
        SERVER=(-DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF) ;;
    *) echo "usage: bench/build-llama.sh llama-bench|llama-server|llama-perplexity|llama-quantize|llama-imatrix" >&2; exit 2 ;;
esac
BIN=$BUILD/bin/$TOOL

if [ -x "$BIN" ] && [ -f "$STAMP" ]; then
    echo "$BIN"
    exit 0
fi

mkdir -p "$DIR"
TARBALL=$DIR/llama_cpp_python-$VERSION.tar.gz
if [ ! -f "$TARBALL" ]; then
    echo "build-llama: downloading the llama-cpp-python $VERSION sdist" >&2
    if ! python3 -m pip download --quiet --no-deps --no-binary :all: \
            -d "$DIR" "llama-cpp-python==$VERSION" >&2; then
        echo "build-llama: cannot download llama-cpp-python $VERSION from PyPI (offline?)" >&2
        exit 1
    fi
fi
echo "$SHA256  $TARBALL" | sha256sum -c --quiet - || {
    echo "build-llama: $TARBALL does not match the pinned sha256" >&2
    exit 1
}
[ -d "$SRC" ] || tar -xzf "$TARBALL" -C "$DIR"

for tool in cmake g++; do
    command -v $tool >/dev/null || {
        echo "build-llama: $tool is missing (apt-get install cmake g++)" >&2
        exit 1
    }
done

echo "build-llama: building $TOOL in $BUILD (several minutes)" >&2
cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DGGML_AVX_VNNI=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "${SERVER[@]}" \
    -DLLAMA_BUILD_TOOLS=ON >&2
cmake --build "$BUILD" --target "$TOOL" -j "$(nproc)" >&2
[ -x "$BIN" ] || { echo "build-llama: $BIN was not produced" >&2; exit 1; }
# llama-quantize's --help exits 1; 126 and up mean it cannot run at all (or died)
rc=0
"$BIN" --help >/dev/null 2>&1 || rc=$?
[ "$rc" -lt 126 ] || { echo "build-llama: $BIN does not run (exit $rc)" >&2; exit 1; }
touch "$STAMP"
echo "$BIN"
