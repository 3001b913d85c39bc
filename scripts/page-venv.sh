#!/usr/bin/env bash
# page-venv.sh — the virtual environment of the chat page's browser test:
# scripts/page-requirements.txt in ${KVIK_PAGE_VENV:-~/.cache/kvik/page-venv},
# through venv.sh (its exit codes).
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/venv.sh" "$here/page-requirements.txt" "${KVIK_PAGE_VENV:-$HOME/.cache/kvik/page-venv}"
