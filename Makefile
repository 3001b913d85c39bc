# kvik — build, test, install.
#
#   make                 libkvik.a, libkvik.so.$(VERSION), the kvik command
#   make test            build and run every test (prints "N passed, N failed")
#   make asan            the same tests under AddressSanitizer + UBSan
#   make fuzz            libFuzzer targets (clang), in build/fuzz/
#   make fuzz-run        run each fuzz target for FUZZ_SECONDS (default 60)
#   make install         PREFIX=/usr/local DESTDIR= : library, kvik.h, kvik.pc, kvik
#   make deps            install the system packages the build needs (Debian)
#   make model           fetch the default model into the cache (~/.cache/kvik/models)
#   make vocab           fetch cl100k_base's tiktoken ranks (~/.cache/kvik/vocab) for its tests
#   make run             build, fetch the default model and generate a short text
#
# Variables: CC, BUILD (output folder, default build), SAN=1 (sanitizers),
# OPT (default -O2).

VERSION_MAJOR := 0
VERSION_MINOR := 1
VERSION_PATCH := 0
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)

PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
BUILD ?= build
OPT ?= -O2

# Missing compiler or make: install the Debian packages first.
ifeq ($(shell command -v $(CC) >/dev/null 2>&1 && echo yes),)
$(info kvik: $(CC) not found; running scripts/install-deps.sh build)
$(shell scripts/install-deps.sh build >&2)
endif

# The server's libraries (Debian: libmicrohttpd-dev, libjansson-dev; the tests
# also use libcurl4-openssl-dev), found with pkg-config.
PKG_CONFIG ?= pkg-config
SERVER_PKGS := libmicrohttpd jansson
ifeq ($(shell $(PKG_CONFIG) --exists $(SERVER_PKGS) libcurl 2>/dev/null && echo yes),)
$(info kvik: libmicrohttpd, jansson or libcurl development files not found; running scripts/install-deps.sh build)
$(shell scripts/install-deps.sh build >&2)
endif
SERVER_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(SERVER_PKGS) 2>/dev/null)
SERVER_LIBS := $(shell $(PKG_CONFIG) --libs $(SERVER_PKGS) 2>/dev/null)
JSON_LIBS := $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null)
CURL_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcurl 2>/dev/null)
CURL_LIBS := $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)

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

LIB_SRC := $(sort $(wildcard src/base/*.c src/gguf/*.c src/tensor/*.c src/model/*.c src/tokenizer/*.c src/kv/*.c src/engine/*.c src/tools/*.c))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
# The load generator of `kvik bench serve` (libcurl + jansson) and the HTTP
# server of `kvik serve` (libmicrohttpd + jansson): linked into the kvik
# command and the tests, not into libkvik.
LOADGEN_SRC := $(sort $(wildcard src/tools/loadgen/*.c))
SERVER_SRC := $(sort $(wildcard src/server/*.c))
# their parsers (no sockets): fuzz targets link them
LOADGEN_PURE_SRC := src/tools/loadgen/sse.c src/tools/loadgen/prom.c src/tools/loadgen/dataset.c \
	src/tools/loadgen/arrival.c
SERVER_PURE_SRC := src/server/request.c src/server/stop.c src/server/http_check.c
TEST_SRC := $(sort $(wildcard tests/*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
LOADGEN_OBJ := $(LOADGEN_SRC:%.c=$(BUILD)/obj/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)

STATIC_LIB := $(BUILD)/libkvik.a
SHARED_LIB := $(BUILD)/libkvik.so.$(VERSION)
SONAME := libkvik.so.$(VERSION_MAJOR)
KVIK := $(BUILD)/kvik
TESTS := $(BUILD)/kvik-tests
FAKE_OPENAI := $(BUILD)/kvik-fake-openai

.PHONY: all test asan fuzz fuzz-run install uninstall clean deps model vocab run fake-openai
all: $(STATIC_LIB) $(SHARED_LIB) $(KVIK)

$(BUILD)/obj/%_amx.o: %_amx.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ISA_AVX512) -mamx-tile -mamx-int8 -MMD -MP -c $< -o $@

$(BUILD)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ISA_AVX512) -MMD -MP -c $< -o $@

$(BUILD)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ISA_AVX2) -MMD -MP -c $< -o $@

$(BUILD)/obj/src/tools/loadgen/%.o: src/tools/loadgen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SERVER_CFLAGS) $(CURL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/src/server/%.o: src/server/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SERVER_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SERVER_CFLAGS) $(CURL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(STATIC_LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(SHARED_LIB): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)
	ln -sf libkvik.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libkvik.so

$(KVIK): $(CLI_OBJ) $(SERVER_OBJ) $(LOADGEN_OBJ) $(STATIC_LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $(CLI_OBJ) $(SERVER_OBJ) $(LOADGEN_OBJ) $(STATIC_LIB) $(SERVER_LIBS) $(CURL_LIBS) $(JSON_LIBS) $(LDLIBS_ALL)

$(TESTS): $(TEST_OBJ) $(SERVER_OBJ) $(LOADGEN_OBJ) $(STATIC_LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $(TEST_OBJ) $(SERVER_OBJ) $(LOADGEN_OBJ) $(STATIC_LIB) $(SERVER_LIBS) $(CURL_LIBS) $(LDLIBS_ALL)

# A fake OpenAI-compatible server (the one the load-generator tests start),
# for benchmarking `kvik bench serve` itself: bench/fake-openai.c.
fake-openai: $(FAKE_OPENAI)
$(FAKE_OPENAI): $(BUILD)/obj/bench/fake-openai.o $(BUILD)/obj/tests/fake_openai.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(SERVER_LIBS) $(LDLIBS_ALL)

$(BUILD)/obj/bench/%.o: bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SERVER_CFLAGS) -Itests -MMD -MP -c $< -o $@

# The shared fixtures live beside the repository (../shared); tests that
# need them skip with a message when they are absent.
test: $(TESTS) $(KVIK)
	KVIK_NO_RECORD=1 KVIK_BIN=$(abspath $(KVIK)) KVIK_TEST_DATA=$(abspath tests/data) \
	KVIK_FIXTURES=$(abspath ../shared/fixtures) $(TESTS) $(TEST_ARGS)

asan:
	$(MAKE) BUILD=build/asan SAN=1 OPT=-O1 test

# ---- fuzzing (clang + libFuzzer) ----
FUZZ_CC ?= clang
FUZZ_BUILD := build/fuzz
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -Iinclude -Isrc -ffp-contract=off \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -pthread
FUZZ_BINS := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_SECONDS ?= 60

fuzz:
	@scripts/install-deps.sh fuzz
	$(MAKE) $(FUZZ_BINS)

$(FUZZ_BUILD)/%: tests/fuzz/%.c $(LIB_SRC) $(LOADGEN_PURE_SRC) $(SERVER_PURE_SRC) $(wildcard src/*/*.h src/*/*/*.h)
	@mkdir -p $(FUZZ_BUILD)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(SERVER_CFLAGS) $(filter-out %_avx2.c %_avx512.c %_amx.c,$(LIB_SRC)) \
	  $(LOADGEN_PURE_SRC) $(SERVER_PURE_SRC) -DKVIK_NO_SIMD $< -o $@ $(JSON_LIBS) -lm

fuzz-run: fuzz
	@for f in $(FUZZ_BINS); do \
	  n=$$(basename $$f); mkdir -p fuzz-corpus/$$n; \
	  echo "fuzzing $$n for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 fuzz-corpus/$$n tests/fuzz/seeds/$$n || exit 1; \
	done

# ---- install ----
install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(PREFIX)/lib/
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

model:
	@scripts/fetch-model.sh >/dev/null

vocab: $(KVIK)
	@scripts/fetch-vocab.sh $(KVIK) >/dev/null

run: all
	@m=$$(scripts/fetch-model.sh) && $(KVIK) run -m "$$m" -p "The capital of France is" -n 32 --temp 0

deps:
	scripts/install-deps.sh build fuzz

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SERVER_OBJ:.o=.d) $(LOADGEN_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
