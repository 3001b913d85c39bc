#!/usr/bin/env bash
# install-deps.sh [--check] PROFILE... — install the Debian packages a
# profile needs, if missing (`make deps` runs it). Profiles: build (C
# compiler, make, pkg-config and the server's libraries: libmicrohttpd,
# jansson, libcurl for the HTTP tests and the load generator), fuzz (clang +
# libFuzzer runtime), python (python3 + pip, for golden-data scripts and
# fetching the model and the fixtures), test (what `make test` uses when
# present: promtool from the prometheus package to check /metrics, python3
# with venv for the OpenAI-client test of `kvik serve`, the Unicode
# Character Database's NormalizationTest.txt from unicode-data, bzip2 to
# read it, chromium and chromium-driver for the chat page's browser test), peer (cmake and g++, to build llama.cpp's tools from the
# llama-cpp-python sdist: bench/build-llama.sh).
#
# --check: install nothing; name the missing packages on stderr and exit 1
# when some are missing, 0 when none are.
set -eu
check_only=0
if [ "${1:-}" = --check ]; then check_only=1; shift; fi
need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
for p in "$@"; do
  case "$p" in
    build)
      have_cmd cc || need+=(gcc libc6-dev)
      have_cmd make || need+=(make)
      have_cmd pkg-config || need+=(pkg-config)
      have_pc() { have_cmd pkg-config && pkg-config --exists "$1"; }
      have_pc libmicrohttpd || need+=(libmicrohttpd-dev)
      have_pc jansson || need+=(libjansson-dev)
      have_pc libcurl || need+=(libcurl4-openssl-dev)
      ;;
    test)
      have_cmd promtool || need+=(prometheus)
      have_cmd python3 || need+=(python3)
      python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
      ls /usr/share/unicode/NormalizationTest.txt* >/dev/null 2>&1 || need+=(unicode-data)
      have_cmd bzcat || need+=(bzip2)
      have_cmd chromium || need+=(chromium)
      have_cmd chromedriver || need+=(chromium-driver)
      ;;
    fuzz)
      have_cmd clang || need+=(clang)
      ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 \
        || need+=(libclang-rt-14-dev)
      ;;
    peer)
      have_cmd cmake || need+=(cmake)
      have_cmd g++ || need+=(g++)
      ;;
    python)
      have_cmd python3 || need+=(python3)
      python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
      ;;
    *) echo "install-deps.sh: unknown profile '$p'" >&2; exit 2 ;;
  esac
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ $check_only = 1 ]; then
  echo "install-deps.sh: missing Debian packages: ${need[*]}" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-deps.sh: missing packages: ${need[*]}; run as root or: sudo apt-get install ${need[*]}" >&2
  exit 1
fi
echo "install-deps.sh: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq "${need[@]}" >&2
