# kvik — build, test, install.
#
#   make                 libkvik.a, libkvik.so.$(VERSION), the kvik command
#   make test            make deps, fetch what the tests read (fixtures, model,
#                        cl100k_base, the corpus; skipped offline), then make check
#   make check           build and run every test (prints "N passed, N failed")
#                        with what is already installed and cached
#   make asan            the same tests under AddressSanitizer + UBSan (models over
#                        300 MB left out: KVIK_TEST_QUICK)
#   make fuzz            libFuzzer targets (clang), in build/fuzz/
#   make fuzz-run        run each fuzz target for FUZZ_SECONDS (default 60)
#   make install         PREFIX=/usr/local DESTDIR= : library, kvik.h, kvik.pc, kvik
#   make deps            install the Debian packages of DEPS_PROFILES (default:
#                        build test python) with scripts/install-deps.sh; the
#                        only target that runs apt-get
#   make lib             libkvik.a and libkvik.so only (needs no server library)
#   make fixtures        fetch llama.cpp's vocabulary fixtures and chat templates
#                        (~/.cache/kvik/fixtures)
#   make model           fetch the default model into the cache (~/.cache/kvik/models)
#   make models-test     fetch the registry models the tests also read (TEST_MODELS)
#                        with `kvik pull`
#   make vocab           fetch cl100k_base's tiktoken ranks (~/.cache/kvik/vocab) for its tests
#   make peer            build llama.cpp's llama-quantize, llama-imatrix and llama-bench
#                        from the llama-cpp-python sdist (~/.cache/kvik/peer), which
#                        the tests of kvik quantize and kvik imatrix run against
#   make run             make deps, then make generate: build, fetch the default
#                        model and generate a short text
#
# Variables: CC, BUILD (output folder, default build), SAN=1 (sanitizers),
# OPT (default -O2), KVIK_FIXTURES (the fixtures folder the tests read).

VERSION_MAJOR := 0
VERSION_MINOR := 1
VERSION_PATCH := 0
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)

PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
BUILD ?= build
OPT ?= -O2
OBJCOPY ?= objcopy

# Nothing is installed while the Makefile is read: `make deps` installs.
# A missing compiler or library stops the targets that need it, with a
# message naming `make deps` (need-cc, need-libs below).
HAVE_CC := $(shell command -v $(firstword $(CC)) >/dev/null 2>&1 && echo yes)

# The server's libraries (Debian: libmicrohttpd-dev, libjansson-dev; the load
# generator and the tests also use libcurl4-openssl-dev), found with
# pkg-config. libkvik needs none of them; the kvik command and the tests
# need all three.
PKG_CONFIG ?= pkg-config
SERVER_PKGS := libmicrohttpd jansson
MISSING_PKGS := $(strip $(foreach p,$(SERVER_PKGS) libcurl,$(if $(shell $(PKG_CONFIG) --exists $(p) 2>/dev/null && echo yes),,$(p))))
SERVER_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(SERVER_PKGS) 2>/dev/null)
SERVER_LIBS := $(shell $(PKG_CONFIG) --libs $(SERVER_PKGS) 2>/dev/null)
JSON_LIBS := $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null)
CURL_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcurl 2>/dev/null)
CURL_LIBS := $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)
# order-only prerequisites: empty when the compiler and the libraries are there
NEED_CC := $(if $(HAVE_CC),,need-cc)
NEED_LIBS := $(NEED_CC) $(if $(MISSING_PKGS),need-libs)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS_ALL := -std=c11 -D_GNU_SOURCE $(OPT) -g $(WARN) -fPIC -pthread \
	-ffp-contract=off -fno-strict-aliasing -Iinclude -Isrc -DKVIK_BUILDING_LIBRARY \
	-fvisibility=hidden $(CFLAGS)
LDFLAGS_ALL := -pthread $(LDFLAGS)
LDLIBS_ALL := -lm $(LDLIBS)

ifeq ($(SAN),1)
CFLAGS_ALL += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS_ALL += -fsanitize=address,undefined
endif

# Per-ISA flags: files named *_avx2.c / *_avx512.c / *_amx.c are compiled for that ISA
# and only ever called after a CPUID check.
ISA_AVX2 := -mavx2 -mfma -mf16c
ISA_AVX512 := $(ISA_AVX2) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni

# attention's tiles multiply bf16 (only called after a CPUID check for them too)
$(BUILD)/obj/src/tensor/attn_amx.o: AMX_EXTRA := -mamx-bf16 -mavx512bf16

LIB_SRC := $(sort $(wildcard src/base/*.c src/grammar/*.c src/gguf/*.c src/tensor/*.c src/model/*.c src/tokenizer/*.c src/kv/*.c src/engine/*.c src/tools/*.c src/api/*.c src/convert/*.c src/vector/*.c src/retrieval/*.c src/template/*.c))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
# The load generator of `kvik bench serve` (libcurl + jansson) and the HTTP
# server of `kvik serve` (libmicrohttpd + jansson): linked into the kvik
# command and the tests, not into libkvik.
LOADGEN_SRC := $(sort $(wildcard src/tools/loadgen/*.c))
SERVER_SRC := $(sort $(wildcard src/server/*.c))
# their parsers (no sockets): fuzz targets link them
LOADGEN_PURE_SRC := src/tools/loadgen/sse.c src/tools/loadgen/prom.c src/tools/loadgen/dataset.c \
	src/tools/loadgen/arrival.c
SERVER_PURE_SRC := src/server/request.c src/server/stop.c src/server/http_check.c src/server/multipart.c \
	src/server/stores.c src/server/toolcall.c
TEST_SRC := $(sort $(wildcard tests/*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
LOADGEN_OBJ := $(LOADGEN_SRC:%.c=$(BUILD)/obj/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/chat_page.o
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)

# STATIC_LIB is the plain archive of the library objects, internal symbols
# and all: the kvik command and the tests link it. PUBLIC_STATIC_LIB is the
# libkvik.a that is installed: the same objects as one relocatable object
# whose only global symbols are the kvik_ API.
STATIC_LIB := $(BUILD)/libkvik-internal.a
PUBLIC_STATIC_LIB := $(BUILD)/libkvik.a
SHARED_LIB := $(BUILD)/libkvik.so.$(VERSION)
SONAME := libkvik.so.$(VERSION_MAJOR)
KVIK := $(BUILD)/kvik
TESTS := $(BUILD)/kvik-tests
FAKE_OPENAI := $(BUILD)/kvik-fake-openai

.PHONY: all test asan fuzz fuzz-run install uninstall clean deps model vocab peer run fake-openai \
	check-symbols example-check pytest api-checks
all: $(STATIC_LIB) $(PUBLIC_STATIC_LIB) $(SHARED_LIB) $(KVIK)

.PHONY: lib check fixtures generate need-cc need-libs models-test
lib: $(STATIC_LIB) $(SHARED_LIB)

# What stops a build whose compiler or libraries are missing.
need-cc:
	@echo "kvik: the C compiler '$(CC)' is not installed; run \`make deps\` (Debian, as root) or install it" >&2; exit 1
need-libs:
	@echo "kvik: pkg-config finds no development files for: $(MISSING_PKGS)." >&2; \
	echo "kvik: the kvik command, the server, the load generator and the tests need them (libkvik does not: \`make lib\`);" >&2; \
	echo "kvik: run \`make deps\` (Debian, as root) or install them" >&2; exit 1

$(BUILD)/obj/%_amx.o: %_amx.c | $(NEED_CC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ISA_AVX512) -mamx-tile -mamx-int8 $(AMX_EXTRA) -MMD -MP -c $< -o $@

$(BUILD)/obj/%_avx512.o: %_avx512.c | $(NEED_CC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ISA_AVX512) -MMD -MP -c $< -o $@

$(BUILD)/obj/%_avx2.o: %_avx2.c | $(NEED_CC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ISA_AVX2) -MMD -MP -c $< -o $@

$(BUILD)/obj/src/tools/loadgen/%.o: src/tools/loadgen/%.c | $(NEED_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SERVER_CFLAGS) $(CURL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/src/server/%.o: src/server/%.c | $(NEED_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SERVER_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/tests/%.o: tests/%.c | $(NEED_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SERVER_CFLAGS) $(CURL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.c | $(NEED_CC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(STATIC_LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# One object (ld -r) with every hidden symbol made local: a program that
# links libkvik.a may define its own log_msg or pool_create.
$(PUBLIC_STATIC_LIB): $(LIB_OBJ)
	@rm -f $@
	$(LD) -r -o $(BUILD)/obj/libkvik.o $^
	$(OBJCOPY) --localize-hidden $(BUILD)/obj/libkvik.o
	ar rcs $@ $(BUILD)/obj/libkvik.o

$(SHARED_LIB): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)
	ln -sf libkvik.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libkvik.so

$(KVIK): $(CLI_OBJ) $(SERVER_OBJ) $(LOADGEN_OBJ) $(STATIC_LIB) | $(NEED_LIBS)
	$(CC) $(LDFLAGS_ALL) -o $@ $(CLI_OBJ) $(SERVER_OBJ) $(LOADGEN_OBJ) $(STATIC_LIB) $(SERVER_LIBS) $(CURL_LIBS) $(JSON_LIBS) $(LDLIBS_ALL)

$(TESTS): $(TEST_OBJ) $(SERVER_OBJ) $(LOADGEN_OBJ) $(STATIC_LIB) | $(NEED_LIBS)
	$(CC) $(LDFLAGS_ALL) -o $@ $(TEST_OBJ) $(SERVER_OBJ) $(LOADGEN_OBJ) $(STATIC_LIB) $(SERVER_LIBS) $(CURL_LIBS) $(LDLIBS_ALL)

# A fake OpenAI-compatible server (the one the load-generator tests start),
# for benchmarking `kvik bench serve` itself: bench/fake-openai.c.
fake-openai: $(FAKE_OPENAI)
$(FAKE_OPENAI): $(BUILD)/obj/bench/fake-openai.o $(BUILD)/obj/tests/fake_openai.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(SERVER_LIBS) $(LDLIBS_ALL)

# The chat page `kvik serve` answers at / (src/server/chat_page.html), as
# a C array of its bytes (src/server/page.h).
$(BUILD)/gen/chat_page.c: src/server/chat_page.html
	@mkdir -p $(dir $@)
	@{ echo '/* generated by the Makefile from src/server/chat_page.html */'; \
	  echo '#include "server/page.h"'; \
	  echo 'const unsigned char kvik_chat_page[] = {'; \
	  od -An -v -tx1 $< | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '};'; \
	  echo 'const unsigned long kvik_chat_page_len = sizeof kvik_chat_page;'; } > $@

$(BUILD)/obj/gen/chat_page.o: $(BUILD)/gen/chat_page.c src/server/page.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/obj/bench/%.o: bench/%.c | $(NEED_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SERVER_CFLAGS) -Itests -MMD -MP -c $< -o $@

# make test: the packages of `make deps`, then the data the tests read,
# fetched once into ~/.cache/kvik (offline: a message, and the tests that
# need what is missing skip; the perplexity tests, which need the corpus of
# scripts/fetch-corpus.sh, try to fetch it themselves and fail without it),
# then make check.
test: deps
	@scripts/fetch-fixtures.sh >/dev/null || echo "kvik: fixtures not fetched; the tests read $(SHARED_FIXTURES) or skip" >&2
	@scripts/fetch-model.sh >/dev/null || echo "kvik: default model not fetched; its tests skip" >&2
	+@$(MAKE) --no-print-directory models-test || echo "kvik: test models not fetched; their tests skip" >&2
	@scripts/fetch-vocab.sh >/dev/null || echo "kvik: cl100k_base not fetched; its parity test skips" >&2
	@scripts/fetch-corpus.sh >/dev/null 2>&1 || echo "kvik: the corpus not fetched; the perplexity tests fail" >&2
	+@$(MAKE) --no-print-directory peer || echo "kvik: llama.cpp's tools not built; the tests against them skip" >&2
	+@$(MAKE) --no-print-directory check

# The tests' fixtures: $(KVIK_FIXTURES) when set, else the fetched copy
# (make fixtures), else the shared folder beside the repository.
SHARED_FIXTURES := $(abspath ../shared/fixtures)
check: $(TESTS) $(KVIK)
	@fx='$(KVIK_FIXTURES)'; [ -n "$$fx" ] || fx=$$(scripts/fetch-fixtures.sh --cached) || fx='$(SHARED_FIXTURES)'; \
	echo "KVIK_FIXTURES=$$fx $(TESTS) $(TEST_ARGS)"; \
	KVIK_NO_RECORD=1 KVIK_BIN=$(abspath $(KVIK)) KVIK_TEST_DATA=$(abspath tests/data) \
	KVIK_FIXTURES="$$fx" $(TESTS) $(TEST_ARGS)

fixtures:
	@scripts/fetch-fixtures.sh

asan:
	KVIK_TEST_QUICK=1 $(MAKE) BUILD=build/asan SAN=1 OPT=-O2 test

# ---- fuzzing (clang + libFuzzer) ----
FUZZ_CC ?= clang
FUZZ_BUILD := build/fuzz
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -Iinclude -Isrc -ffp-contract=off \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -pthread
FUZZ_BINS := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_SECONDS ?= 60

fuzz:
	@scripts/install-deps.sh --check fuzz || { echo "kvik: run \`make deps DEPS_PROFILES=fuzz\`" >&2; exit 1; }
	$(MAKE) $(FUZZ_BINS)

$(FUZZ_BUILD)/%: tests/fuzz/%.c $(LIB_SRC) $(LOADGEN_PURE_SRC) $(SERVER_PURE_SRC) $(wildcard src/*/*.h src/*/*/*.h)
	@mkdir -p $(FUZZ_BUILD)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(SERVER_CFLAGS) $(filter-out %_avx2.c %_avx512.c %_amx.c,$(LIB_SRC)) \
	  $(LOADGEN_PURE_SRC) $(SERVER_PURE_SRC) -DKVIK_NO_SIMD $< -o $@ $(JSON_LIBS) -lm

fuzz-run: fuzz
	@python3 scripts/gen_ppl_seeds.py
	@for f in $(FUZZ_BINS); do \
	  n=$$(basename $$f); mkdir -p fuzz-corpus/$$n; \
	  echo "fuzzing $$n for $(FUZZ_SECONDS)s"; \
	  d=; [ -f tests/fuzz/$$n.dict ] && d=-dict=tests/fuzz/$$n.dict; \
	  $$f $$d -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 fuzz-corpus/$$n tests/fuzz/seeds/$$n || exit 1; \
	done

# ---- install ----
install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(PUBLIC_STATIC_LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libkvik.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libkvik.so
	install -m 644 include/kvik.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(KVIK) $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' kvik.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/kvik.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libkvik.a $(DESTDIR)$(PREFIX)/lib/libkvik.so* \
	  $(DESTDIR)$(PREFIX)/include/kvik.h $(DESTDIR)$(PREFIX)/lib/pkgconfig/kvik.pc \
	  $(DESTDIR)$(PREFIX)/bin/kvik

# ---- the public API's checks ----
# make check (and so make test) runs them before the suite unless
# TEST_ARGS picks tests or SAN=1 (the checks link programs without the
# sanitizers).
#   make check-symbols   libkvik.so and libkvik.a define only kvik_ symbols
#   make example-check   examples/generate.c against an installed kvik
#   make pytest          the Python package's tests (python/tests)

# The default model when it is cached (else empty: the checks skip running it).
API_MODEL = $(shell f="$${KVIK_MODELS:-$$HOME/.cache/kvik/models}/SmolLM2-135M-Instruct.Q4_1.gguf"; [ -f "$$f" ] && echo "$$f")
API_PROMPT := The capital of France is
API_CHECK_CFLAGS := -std=c11 -O1 -Wall -Wextra -Werror -Wno-unused-parameter

# libkvik.so and libkvik.a define only kvik_ global symbols, and a program
# with functions named like kvik internals links against each and runs.
check-symbols: $(PUBLIC_STATIC_LIB) $(SHARED_LIB)
	@bad=$$(nm -D --defined-only $(SHARED_LIB) | awk 'NF == 3 && $$3 !~ /^kvik_/ {print $$3}'); \
	  [ -z "$$bad" ] || { echo "check-symbols: $(SHARED_LIB) exports non-kvik_ symbols:" $$bad; exit 1; }
	@bad=$$(nm -g --defined-only $(PUBLIC_STATIC_LIB) | awk 'NF == 3 && $$3 !~ /^kvik_/ {print $$3}'); \
	  [ -z "$$bad" ] || { echo "check-symbols: $(PUBLIC_STATIC_LIB) defines non-kvik_ globals:" $$bad; exit 1; }
	$(CC) $(API_CHECK_CFLAGS) -Iinclude tests/link/own_symbols.c $(PUBLIC_STATIC_LIB) -lm -pthread \
	  -o $(BUILD)/own-symbols-static
	$(CC) $(API_CHECK_CFLAGS) -Iinclude tests/link/own_symbols.c -L$(BUILD) -lkvik \
	  -Wl,-rpath,$(abspath $(BUILD)) -o $(BUILD)/own-symbols-shared
	$(BUILD)/own-symbols-static $(API_MODEL)
	$(BUILD)/own-symbols-shared $(API_MODEL)

# Installs into a temporary prefix, builds examples/generate.c against the
# installed kvik.h with pkg-config, and checks its greedy text against
# `kvik run --temp 0`.
example-check: all
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	$(MAKE) --no-print-directory install PREFIX="$$d" DESTDIR= >/dev/null && \
	export PKG_CONFIG_PATH="$$d/lib/pkgconfig" && \
	echo "$(CC) $$($(PKG_CONFIG) --cflags kvik) examples/generate.c $$($(PKG_CONFIG) --libs kvik)" && \
	$(CC) $(API_CHECK_CFLAGS) $$($(PKG_CONFIG) --cflags kvik) examples/generate.c $$($(PKG_CONFIG) --libs kvik) \
	  -o "$$d/generate" && \
	$(CC) $(API_CHECK_CFLAGS) $$($(PKG_CONFIG) --cflags kvik) examples/generate.c \
	  $$($(PKG_CONFIG) --libs-only-L kvik) -Wl,-Bstatic -lkvik -Wl,-Bdynamic \
	  $$($(PKG_CONFIG) --static --libs kvik | sed 's/-lkvik//') -o "$$d/generate-static" && \
	! readelf -d "$$d/generate-static" | grep -q 'libkvik' && \
	if [ -z "$(API_MODEL)" ]; then echo "example-check: built; not run (default model not cached; make model)"; exit 0; fi && \
	LD_LIBRARY_PATH="$$d/lib" "$$d/generate" "$(API_MODEL)" "$(API_PROMPT)" 24 > "$$d/out.txt" 2>/dev/null && \
	"$$d/generate-static" "$(API_MODEL)" "$(API_PROMPT)" 24 > "$$d/out-static.txt" 2>/dev/null && \
	$(KVIK) run -m "$(API_MODEL)" -p "$(API_PROMPT)" -n 24 --temp 0 -t 2 > "$$d/want.txt" 2>/dev/null && \
	if cmp -s "$$d/out.txt" "$$d/want.txt" && cmp -s "$$d/out-static.txt" "$$d/want.txt"; then \
	  echo "example-check: ok, installed examples/generate (shared and static) prints what kvik run prints"; \
	else echo "example-check: FAILED: generate printed:"; cat "$$d/out.txt"; \
	  echo "kvik run printed:"; cat "$$d/want.txt"; exit 1; fi

# The Python package's tests (python/tests) in a cached virtual environment
# with pinned pytest (scripts/python-venv.sh); skipped with a message when
# it cannot be built (no python3 venv, PyPI unreachable). The package is
# installed into the venv from ./python as a user would.
pytest: $(SHARED_LIB) $(KVIK)
	@py=$$(scripts/python-venv.sh); rc=$$?; \
	if [ $$rc = 77 ]; then echo "pytest: skipped (see the message above)"; exit 0; fi; \
	[ $$rc = 0 ] || exit $$rc; \
	"$$py" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall ./python \
	  >/dev/null || { echo "pytest: pip install ./python failed"; exit 1; }; \
	rm -rf python/build python/*.egg-info; \
	KVIK_LIB=$(abspath $(SHARED_LIB)) KVIK_BIN=$(abspath $(KVIK)) "$$py" -m pytest -q -p no:cacheprovider python/tests

api-checks: check-symbols example-check pytest
check: $(if $(TEST_ARGS)$(filter 1,$(SAN)),,api-checks)

model:
	@scripts/fetch-model.sh >/dev/null

# The registry models (src/api/registry.c) whose tokenizers and chat
# templates the tests check against llama.cpp and Jinja2; the tests find
# them in the model cache and skip the ones missing.
TEST_MODELS := gemma3-270m qwen2.5-coder-0.5b qwen2.5-coder-1.5b all-minilm-l6-v2

models-test: $(KVIK)
	@for m in $(TEST_MODELS); do $(KVIK) pull $$m >/dev/null || exit 1; done

vocab: $(KVIK)
	@scripts/fetch-vocab.sh $(KVIK) >/dev/null

# llama.cpp's tools the tests compare with (a no-op once built; ~6 minutes
# on 2 cores the first time).
PEER_TOOLS := llama-quantize llama-imatrix llama-bench
peer:
	@scripts/install-deps.sh peer
	@for t in $(PEER_TOOLS); do bench/build-llama.sh $$t >/dev/null || exit 1; done

run: deps
	+@$(MAKE) --no-print-directory generate

# make run without make deps
generate: all
	@m=$$(scripts/fetch-model.sh) && $(KVIK) run -m "$$m" -p "The capital of France is" -n 32 --temp 0

# The profiles of scripts/install-deps.sh: build (compiler, libraries),
# test (promtool, python3-venv, unicode-data), python (pip, for fetching),
# peer (cmake, g++: llama.cpp's tools, installed by make peer), fuzz (clang,
# libFuzzer) on request.
DEPS_PROFILES ?= build test python
deps:
	@scripts/install-deps.sh $(DEPS_PROFILES)

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SERVER_OBJ:.o=.d) $(LOADGEN_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
