/*
 * test.h — a minimal test harness. Each test file defines tests with
 * TEST(name) { ... }; they register themselves at start-up. CHECK records a
 * failure and goes on; REQUIRE records it and leaves the test. The runner
 * (tests/main.c) ends with the line "N passed, N failed".
 */
#ifndef KVIK_TEST_H
#define KVIK_TEST_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct test_case {
    const char *name;
    void (*fn)(void);
    struct test_case *next;
};

void test_register(struct test_case *tc);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Marks the running test skipped (counted apart; not a failure). */
void test_skip(const char *why);
bool test_failed(void);

/* Paths from the environment the Makefile sets (never NULL; "" if unset). */
const char *test_env(const char *name);

/* The cached default model ($KVIK_MODELS, else ~/.cache/kvik/models):
 * writes its path to buf and returns buf, or marks the running test skipped
 * and returns NULL when it is not there (`make model` fetches it). */
const char *test_default_model(char *buf, size_t len);

/* The same for a registry model's FILE in the model cache (`make
 * models-test` fetches the ones the tests read: gemma3-270m,
 * qwen2.5-coder-0.5b, qwen2.5-coder-1.5b). */
const char *test_cached_model(const char *file, char *buf, size_t len);
/* test_cached_model of a registry model by name ("gemma3-270m"), for tests
 * that run it: with KVIK_TEST_QUICK set (the sanitizer and clang runs),
 * models over 300 MB are skipped too. */
const char *test_registry_model(const char *name, char *buf, size_t len);
/* Whether test_registry_model would give the model (its path in buf),
 * without marking the test skipped: for tests that run several models. */
bool test_registry_model_runs(const char *name, char *buf, size_t len);

/* A whole file, NUL-terminated (malloc'd), its length in *len; NULL if it
 * cannot be read. */
char *test_slurp(const char *path, size_t *len);

/* The decimal ids of the text [s, end) (separated by spaces), up to max,
 * into a new array *out; their count. */
int test_parse_ids(const char *s, const char *end, int max, int32_t **out);

/* The repository's root: KVIK_TEST_DATA without its "/tests/data"; false
 * when KVIK_TEST_DATA does not end so. */
bool test_repo_root(char *buf, size_t len);

/* The first `bytes` bytes of the fetched corpus file english.txt
 * ($KVIK_CORPUS or ~/.cache/kvik/corpus; scripts/fetch-corpus.sh runs when
 * it is missing), cut after their last newline, written to path. Their
 * sha256 must be sha256_hex (the golden data's slice). False, with the
 * test failed, when the corpus cannot be had or the slice differs. */
bool test_corpus_slice(size_t bytes, const char *sha256_hex, const char *path);

/* Runs the shell command cmd; its stdout (up to len - 1 bytes) in out,
 * NUL-terminated. Its exit status, -1 if it could not run or was killed. */
int test_run_cmd(const char *cmd, char *out, size_t len);

/* Runs `$KVIK_BIN ARGS` (shell words): stdout into out, stderr into errbuf
 * (both NUL-terminated, cut to their sizes); returns the exit status, -1 if
 * it died of a signal. */
int test_run_kvik(const char *args, char *out, size_t out_len, char *errbuf, size_t err_len);

/* Deterministic random numbers for tests (xorshift64*). */
uint64_t test_rand_u64(uint64_t *state);
float test_rand_uniform(uint64_t *state, float lo, float hi);

#define TEST(name)                                                                  \
    static void test_##name(void);                                                  \
    __attribute__((constructor)) static void test_register_##name(void) {           \
        static struct test_case tc = {#name, test_##name, NULL};                    \
        test_register(&tc);                                                         \
    }                                                                               \
    static void test_##name(void)

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                        \
    do {                                                                            \
        if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);                    \
    } while (0)

#define REQUIRE(cond)                                                               \
    do {                                                                            \
        if (!(cond)) {                                                              \
            test_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond);                    \
            return;                                                                 \
        }                                                                           \
    } while (0)

/* REQUIRE with a message (printf-style). */
#define REQUIRE_MSG(cond, ...)                                                      \
    do {                                                                            \
        if (!(cond)) {                                                              \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                             \
            return;                                                                 \
        }                                                                           \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                          \
    do {                                                                            \
        long long va_ = (long long)(a), vb_ = (long long)(b);                       \
        if (va_ != vb_)                                                             \
            test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, va_, vb_); \
    } while (0)

#define CHECK_STR(a, b)                                                             \
    do {                                                                            \
        const char *sa_ = (a), *sb_ = (b);                                          \
        if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0)                                  \
            test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,     \
                      sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                  \
    } while (0)

#endif /* KVIK_TEST_H */
