#!/usr/bin/env bash
# fetch-fixtures.sh [--cached] — the test fixtures that come from llama.cpp's
# `models/` folder, taken from the llama-cpp-python sdist (pinned version and
# sha256; it bundles llama.cpp's sources), extracted once into a cache and
# printed as one folder, the value for $KVIK_FIXTURES:
#
#   vocab/ggml-vocab-NAME.gguf      vocabulary-only GGUF files
#   vocab/ggml-vocab-NAME.gguf.inp  test strings, each followed by "\n__ggml_vocab_test__\n"
#   vocab/ggml-vocab-NAME.gguf.out  the ids Hugging Face tokenizers gives them, a line each
#   templates/*.jinja               chat templates of real models
#   SOURCE                          where the files came from
#
# Folder: $KVIK_FIXTURES_CACHE (default ~/.cache/kvik/fixtures), then
# llama-cpp-python-VERSION. The sdist is kept in $KVIK_PEER_DIR (default
# ~/.cache/kvik/peer), where bench/build-llama.sh finds it too. A second run
# is a no-op; a folder is only ever complete (extracted aside, then renamed).
#
# --cached: fetch nothing; print the folder if it is there, else exit 1.
# Exit 1 too when the sdist cannot be downloaded (offline) or does not match
# its sha256; the message says so on stderr.
set -euo pipefail

VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
CACHE=${KVIK_FIXTURES_CACHE:-$HOME/.cache/kvik/fixtures}
DEST=$CACHE/llama-cpp-python-$VERSION
PEER=${KVIK_PEER_DIR:-$HOME/.cache/kvik/peer}
TARBALL=$PEER/llama_cpp_python-$VERSION.tar.gz
MODELS=llama_cpp_python-$VERSION/vendor/llama.cpp/models
# vocabularies the tests read by name; the extraction must hold them
REQUIRED="gpt-2 starcoder refact mpt deepseek-coder llama-spm bert-bge"

if [ -f "$DEST/SOURCE" ]; then
    echo "$DEST"
    exit 0
fi
if [ "${1:-}" = --cached ]; then
    exit 1
fi

sha_ok() { echo "$SHA256  $1" | sha256sum -c --status 2>/dev/null; }

mkdir -p "$PEER" "$CACHE"
if ! sha_ok "$TARBALL"; then
    if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
        echo "fetch-fixtures: python3 with pip is missing (make deps installs it)" >&2
        exit 1
    fi
    dl=$(mktemp -d "$PEER/.download.XXXXXX")
    trap 'rm -rf "$dl"' EXIT
    echo "fetch-fixtures: downloading the llama-cpp-python $VERSION sdist (77 MB) from PyPI" >&2
    if ! python3 -m pip download --quiet --no-deps --no-binary :all: \
            --retries 1 --timeout 30 -d "$dl" "llama-cpp-python==$VERSION" >&2; then
        echo "fetch-fixtures: cannot download llama-cpp-python $VERSION from PyPI (offline?)" >&2
        exit 1
    fi
    if ! sha_ok "$dl/llama_cpp_python-$VERSION.tar.gz"; then
        echo "fetch-fixtures: the downloaded sdist does not match sha256 $SHA256" >&2
        exit 1
    fi
    mv "$dl/llama_cpp_python-$VERSION.tar.gz" "$TARBALL"
fi

tmp=$(mktemp -d "$CACHE/.extract.XXXXXX")
trap 'rm -rf "$tmp" ${dl:+"$dl"}' EXIT
tar -xzf "$TARBALL" -C "$tmp" --wildcards "$MODELS/ggml-vocab-*" "$MODELS/templates/*"
mkdir -p "$tmp/out"
mv "$tmp/$MODELS" "$tmp/out/vocab"
mv "$tmp/out/vocab/templates" "$tmp/out/templates"
for name in $REQUIRED; do
    for ext in gguf gguf.inp gguf.out; do
        [ -f "$tmp/out/vocab/ggml-vocab-$name.$ext" ] || {
            echo "fetch-fixtures: ggml-vocab-$name.$ext is not in the sdist" >&2
            exit 1
        }
    done
done
cat > "$tmp/out/SOURCE" <<EOF
llama.cpp's models/ggml-vocab-* (vocab/) and models/templates/ (templates/),
from the PyPI sdist llama_cpp_python-$VERSION.tar.gz (sha256 $SHA256),
folder $MODELS.
EOF
# another run may have finished first: its folder is as good as ours
mv -T "$tmp/out" "$DEST" 2>/dev/null || [ -f "$DEST/SOURCE" ]
echo "$DEST"
