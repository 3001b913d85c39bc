#!/usr/bin/env bash
# lm-eval-venv.sh — the virtual environment of the lm-evaluation-harness
# test of `kvik serve`: scripts/lm-eval-requirements.txt in
# ${KVIK_LM_EVAL_VENV:-~/.cache/kvik/lm-eval-venv}, through venv.sh (its exit codes).
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/venv.sh" "$here/lm-eval-requirements.txt" "${KVIK_LM_EVAL_VENV:-$HOME/.cache/kvik/lm-eval-venv}"
