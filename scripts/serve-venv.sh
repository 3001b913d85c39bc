#!/usr/bin/env bash
# serve-venv.sh — the virtual environment of the OpenAI-client test of
# `kvik serve`: scripts/serve-requirements.txt in
# ${KVIK_SERVE_VENV:-~/.cache/kvik/serve-venv}, through venv.sh (its exit codes).
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/venv.sh" "$here/serve-requirements.txt" "${KVIK_SERVE_VENV:-$HOME/.cache/kvik/serve-venv}"
