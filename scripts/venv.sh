#!/usr/bin/env bash
# venv.sh REQUIREMENTS VENV — a cached Python virtual environment: the
# pinned REQUIREMENTS file installed into VENV. Prints the venv's python on
# stdout. Rebuilt when the requirements file changes (a stamp holds its
# hash). Exit 77 (skip) when python3 with venv is missing or PyPI cannot be
# reached, after one line on stderr saying which; the caller skips its test.
set -u
req=$1 venv=$2
name="$(basename "$req")"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "venv.sh: python3 with venv is not installed (scripts/install-deps.sh test)" >&2
  exit 77
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
if ! python3 -m venv "$venv" >&2; then
  echo "venv.sh: python3 -m venv failed" >&2
  exit 77
fi
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check --timeout 20 --retries 1 -r "$req" >&2; then
  rm -rf "$venv"
  echo "venv.sh: could not install $name (PyPI unreachable?)" >&2
  exit 77
fi
echo "$want" > "$stamp"
echo "$venv/bin/python"
