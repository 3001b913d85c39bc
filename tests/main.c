/*
 * main.c — the test runner. `kvik-tests [SUBSTRING...]` runs the tests whose
 * names contain any SUBSTRING (all if none), in registration order, and ends
 * with "N passed, N failed" (", N skipped" when some were skipped). Exit
 * status is non-zero if any test failed.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>

#include "api/api.h"
#include "base/base.h"
#include "test.h"

static struct test_case *g_head, **g_tail = &g_head;
static int g_cur_failures;
static const char *g_cur_skip;

void test_register(struct test_case *tc) {
    *g_tail = tc;
    g_tail = &tc->next;
}

void test_fail(const char *file, int line, const char *fmt, ...) {
    if (g_cur_failures < 20) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stdout, "    %s:%d: ", file, line);
        vfprintf(stdout, fmt, ap);
        fputc('\n', stdout);
        va_end(ap);
    } else if (g_cur_failures == 20) {
        fprintf(stdout, "    (further failures of this test not shown)\n");
    }
    g_cur_failures++;
}

void test_skip(const char *why) { g_cur_skip = why; }
bool test_failed(void) { return g_cur_failures > 0; }

const char *test_env(const char *name) {
    const char *v = getenv(name);
    return v ? v : "";
}

static const char *cached_model(const char *file, char *buf, size_t len, const char *why) {
    const char *dir = getenv("KVIK_MODELS");
    if (dir && *dir) snprintf(buf, len, "%s/%s", dir, file);
    else snprintf(buf, len, "%s/.cache/kvik/models/%s", test_env("HOME"), file);
    FILE *f = fopen(buf, "rb");
    if (!f) {
        if (why) test_skip(why); /* NULL: the caller says */
        return NULL;
    }
    fclose(f);
    return buf;
}

/* A model over 300 MB while KVIK_TEST_QUICK is set (sanitizer builds run
 * ten times slower: only the small models there). */
static bool quick_leaves_out(int64_t size) {
    const char *quick = getenv("KVIK_TEST_QUICK");
    return quick && *quick && strcmp(quick, "0") && size > (300 << 20);
}

static bool too_large_for_quick(int64_t size) {
    if (!quick_leaves_out(size)) return false;
    test_skip("a large model, left out with KVIK_TEST_QUICK (sanitizer builds)");
    return true;
}

int test_parse_ids(const char *s, const char *end, int max, int32_t **out) {
    *out = malloc((size_t)max * sizeof **out);
    int k = 0;
    while (*out && s < end && k < max) {
        char *e;
        long id = strtol(s, &e, 10);
        if (e == s) break;
        (*out)[k++] = (int32_t)id;
        s = e;
    }
    return k;
}

bool test_repo_root(char *buf, size_t len) {
    const char *data = test_env("KVIK_TEST_DATA");
    size_t n = strlen(data);
    if (n < 11 || strcmp(data + n - 11, "/tests/data") || n - 11 >= len) return false;
    memcpy(buf, data, n - 11);
    buf[n - 11] = 0;
    return true;
}

const char *test_default_model(char *buf, size_t len) {
    return cached_model("SmolLM2-135M-Instruct.Q4_1.gguf", buf, len,
                        "default model not cached; run `make model`");
}

const char *test_cached_model(const char *file, char *buf, size_t len) {
    return cached_model(file, buf, len, "model not cached; run `make models-test`");
}

/* The registry entry of name, or NULL with the test failed. */
static const struct api_model_entry *registry_entry(const char *name) {
    const struct api_model_entry *e = api_model_find(name);
    if (!e) test_fail(__FILE__, __LINE__, "no registry model '%s'", name);
    return e;
}

const char *test_registry_model(const char *name, char *buf, size_t len) {
    const struct api_model_entry *e = registry_entry(name);
    if (!e || too_large_for_quick(e->size)) return NULL;
    return test_cached_model(e->file, buf, len);
}

bool test_registry_model_runs(const char *name, char *buf, size_t len) {
    const struct api_model_entry *e = registry_entry(name);
    return e && !quick_leaves_out(e->size) && cached_model(e->file, buf, len, NULL);
}

uint64_t test_rand_u64(uint64_t *s) {
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

float test_rand_uniform(uint64_t *s, float lo, float hi) {
    double u = (double)(test_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

char *test_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    *len = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

int test_run_cmd(const char *cmd, char *out, size_t len) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, len - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int test_run_kvik(const char *args, char *out, size_t out_len, char *errbuf, size_t err_len) {
    static int serial;
    char errpath[128];
    snprintf(errpath, sizeof errpath, "/tmp/kvik-test-%d-%d.err", (int)getpid(), serial++);
    size_t cap = strlen(args) + strlen(test_env("KVIK_BIN")) + sizeof errpath + 16;
    char *cmd = malloc(cap);
    if (!cmd) return -1;
    snprintf(cmd, cap, "'%s' %s 2>%s", test_env("KVIK_BIN"), args, errpath);
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p) return -1;
    size_t n = fread(out, 1, out_len - 1, p);
    out[n] = 0;
    int st = pclose(p);
    FILE *e = fopen(errpath, "r");
    size_t m = e ? fread(errbuf, 1, err_len - 1, e) : 0;
    errbuf[m] = 0;
    if (e) fclose(e);
    remove(errpath);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Wall-clock seconds (the runner prints how long a test over a second took). */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool selected(const char *name, int argc, char **argv) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; i++)
        if (strstr(name, argv[i])) return true;
    return false;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    int passed = 0, failed = 0, skipped = 0;
    for (struct test_case *tc = g_head; tc; tc = tc->next) {
        if (!selected(tc->name, argc, argv)) continue;
        g_cur_failures = 0;
        g_cur_skip = NULL;
        double t0 = now_s();
        tc->fn();
        char took[32] = "";
        double dt = now_s() - t0;
        if (dt >= 1.0) snprintf(took, sizeof took, " [%.0f s]", dt);
        if (g_cur_failures) {
            printf("FAIL %s%s\n", tc->name, took);
            failed++;
        } else if (g_cur_skip) {
            printf("skip %s (%s)%s\n", tc->name, g_cur_skip, took);
            skipped++;
        } else {
            printf("ok   %s%s\n", tc->name, took);
            passed++;
        }
    }
    if (skipped)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* The corpus file english.txt: $KVIK_CORPUS or ~/.cache/kvik/corpus,
 * fetched with scripts/fetch-corpus.sh when it is not there; NULL with
 * the test failed when it cannot be had. */
static const char *corpus_english(char *buf, size_t len) {
    const char *dir = getenv("KVIK_CORPUS");
    char home[2048];
    if (!dir || !*dir) {
        snprintf(home, sizeof home, "%s/.cache/kvik/corpus", getenv("HOME") ? getenv("HOME") : "/root");
        dir = home;
    }
    snprintf(buf, len, "%s/english.txt", dir);
    struct stat sb;
    if (stat(buf, &sb) == 0 && sb.st_size > 0) return buf;
    char cmd[4600];
    snprintf(cmd, sizeof cmd, "'%s/../../scripts/fetch-corpus.sh' >/dev/null", test_env("KVIK_TEST_DATA"));
    int rc = system(cmd);
    if (rc == 0 && stat(buf, &sb) == 0 && sb.st_size > 0) return buf;
    test_fail(__FILE__, __LINE__, "%s is missing and scripts/fetch-corpus.sh could not fetch it (exit %d)", buf,
              WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
    return NULL;
}

bool test_corpus_slice(size_t bytes, const char *want, const char *path) {
    char cpath[4096];
    if (!corpus_english(cpath, sizeof cpath)) return false;
    size_t len;
    char *text = test_slurp(cpath, &len);
    if (!text) return false;
    size_t n = bytes < len ? bytes : len;
    while (n > 0 && text[n - 1] != '\n') n--;
    struct sha256 s;
    uint8_t d[32];
    char hex[65];
    sha256_init(&s);
    sha256_update(&s, text, n);
    sha256_final(&s, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    bool ok = want && !strcmp(hex, want);
    if (!ok) test_fail(__FILE__, __LINE__, "the corpus slice's sha256 is %s, the golden file's %s", hex, want ? want : "?");
    FILE *f = ok ? fopen(path, "wb") : NULL;
    if (f) {
        ok = fwrite(text, 1, n, f) == n;
        ok = fclose(f) == 0 && ok;
    } else {
        ok = false;
    }
    free(text);
    return ok;
}

