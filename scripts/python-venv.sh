#!/usr/bin/env bash
# python-venv.sh — the virtual environment of the Python package's tests
# (python/tests): python/requirements-test.txt in
# ${KVIK_PY_VENV:-~/.cache/kvik/py-venv}, through venv.sh (its exit codes).
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/venv.sh" "$here/../python/requirements-test.txt" "${KVIK_PY_VENV:-$HOME/.cache/kvik/py-venv}"
