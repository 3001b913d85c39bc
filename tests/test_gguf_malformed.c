/*
 * test_gguf_malformed.c — the GGUF reader against broken files. Builds a
 * valid file byte by byte (recording every structural boundary), then
 * every truncation of it, then hand-made files that each break one rule
 * (huge lengths, bad types, overflowing dims, misaligned or out-of-file
 * tensors, duplicates, bad alignment, deep nesting, ...), plus valid edge
 * cases that must pass (vocab-only files with and without padding). Each
 * malformed file must fail in-process (an error code, a message naming the
 * problem; leaks show under `make asan`) and in `kvik info` (exit status 1,
 * one line on stderr starting "kvik info: ", nothing on stdout).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tensor/tensor.h"
#include "test.h"

/* ---- a byte builder that records boundaries ---------------------------------- */

struct raw {
    uint8_t p[8192];
    size_t len;
    size_t cuts[256]; /* offsets after each field */
    int n_cuts;
};

static void cut(struct raw *r) {
    if (r->n_cuts < 256) r->cuts[r->n_cuts++] = r->len;
}

static void put(struct raw *r, const void *p, size_t n) {
    if (r->len >= sizeof r->p) return;
    if (n > sizeof r->p - r->len) n = sizeof r->p - r->len;
    memcpy(r->p + r->len, p, n);
    r->len += n;
}

static void u8(struct raw *r, uint8_t v) { put(r, &v, 1); }
static void u32(struct raw *r, uint32_t v) {
    for (int i = 0; i < 4; i++) u8(r, (uint8_t)(v >> (8 * i)));
}
static void u64(struct raw *r, uint64_t v) {
    for (int i = 0; i < 8; i++) u8(r, (uint8_t)(v >> (8 * i)));
}
static void str(struct raw *r, const char *s) {
    u64(r, strlen(s));
    put(r, s, strlen(s));
}
static void pad(struct raw *r, size_t align) {
    while (r->len % align) u8(r, 0);
}

static void header(struct raw *r, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(r, "GGUF", 4);
    u32(r, version);
    u64(r, n_tensors);
    u64(r, n_kv);
}

static void kv_u32(struct raw *r, const char *key, uint32_t v) {
    str(r, key);
    u32(r, GGUF_TYPE_UINT32);
    u32(r, v);
}

static void kv_str(struct raw *r, const char *key, const char *v) {
    str(r, key);
    u32(r, GGUF_TYPE_STRING);
    str(r, v);
}

static void tinfo(struct raw *r, const char *name, uint32_t n_dims, const uint64_t *ne,
                  uint32_t type, uint64_t offset) {
    str(r, name);
    u32(r, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) u64(r, ne[d]);
    u32(r, type);
    u64(r, offset);
}

/* One valid file: seven kvs of various kinds and two F32 tensors (8 and
 * 4x2 floats) whose data ends exactly at the end of the file, so every
 * proper prefix is invalid. Boundaries after every field go to r->cuts. */
static void build_valid(struct raw *r) {
    memset(r, 0, sizeof *r);
    put(r, "GG", 2), cut(r);
    put(r, "UF", 2), cut(r);
    u32(r, 3), cut(r);
    u64(r, 2), cut(r);
    u64(r, 7), cut(r);
    /* kv 0: string */
    u64(r, 20), cut(r);
    put(r, "general.architecture", 20), cut(r);
    u32(r, GGUF_TYPE_STRING), cut(r);
    u64(r, 5), cut(r);
    put(r, "llama", 5), cut(r);
    /* kv 1: u32 */
    u64(r, 17), cut(r);
    put(r, "llama.block_count", 17), cut(r);
    u32(r, GGUF_TYPE_UINT32), cut(r);
    u32(r, 1), cut(r);
    /* kv 2: general.alignment */
    str(r, "general.alignment"), cut(r);
    u32(r, GGUF_TYPE_UINT32), cut(r);
    u32(r, 32), cut(r);
    /* kv 3: array of strings */
    str(r, "tokenizer.ggml.tokens"), cut(r);
    u32(r, GGUF_TYPE_ARRAY), cut(r);
    u32(r, GGUF_TYPE_STRING), cut(r);
    u64(r, 2), cut(r);
    u64(r, 3), cut(r);
    put(r, "<s>", 3), cut(r);
    str(r, "</s>"), cut(r);
    /* kv 4: array of arrays of int32: [[1, 2], []] */
    str(r, "t.nested"), cut(r);
    u32(r, GGUF_TYPE_ARRAY), cut(r);
    u32(r, GGUF_TYPE_ARRAY), cut(r);
    u64(r, 2), cut(r);
    u32(r, GGUF_TYPE_INT32), cut(r);
    u64(r, 2), cut(r);
    u32(r, 1), cut(r);
    u32(r, 2), cut(r);
    u32(r, GGUF_TYPE_INT32), cut(r);
    u64(r, 0), cut(r);
    /* kv 5: bool, kv 6: float64 */
    str(r, "t.bool"), cut(r);
    u32(r, GGUF_TYPE_BOOL), cut(r);
    u8(r, 1), cut(r);
    str(r, "t.f64"), cut(r);
    u32(r, GGUF_TYPE_FLOAT64), cut(r);
    u64(r, 0x3ff0000000000000ull), cut(r);
    /* tensor infos */
    str(r, "a"), cut(r);
    u32(r, 1), cut(r);
    u64(r, 8), cut(r);
    u32(r, TENSOR_TYPE_F32), cut(r);
    u64(r, 0), cut(r);
    str(r, "b"), cut(r);
    u32(r, 2), cut(r);
    u64(r, 4), cut(r);
    u64(r, 2), cut(r);
    u32(r, TENSOR_TYPE_F32), cut(r);
    u64(r, 32), cut(r);
    pad(r, 32), cut(r);
    for (int i = 0; i < 8; i++) u32(r, 0x3f800000u);
    cut(r);
    for (int i = 0; i < 4; i++) u32(r, 0x40000000u);
    cut(r);
    for (int i = 0; i < 4; i++) u32(r, 0x40400000u);
}

/* ---- running a case ------------------------------------------------------------ */

static char g_dir[64];
static int g_cases; /* malformed files checked */

/* Runs `$KVIK_BIN info path`; returns the exit status (128 + signal if
 * killed) and fills out/err (first bytes) and their lengths. */
static int run_info(const char *path, char *out, size_t *out_len, char *err, size_t *err_len) {
    FILE *fo = tmpfile(), *fe = tmpfile();
    if (!fo || !fe) {
        if (fo) fclose(fo);
        if (fe) fclose(fe);
        return -1;
    }
    const char *bin = test_env("KVIK_BIN");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(fo), 1);
        dup2(fileno(fe), 2);
        execl(bin, bin, "info", path, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
    FILE *fs[2] = {fo, fe};
    char *bufs[2] = {out, err};
    size_t *lens[2] = {out_len, err_len};
    for (int k = 0; k < 2; k++) {
        fflush(fs[k]);
        *lens[k] = (size_t)ftell(fs[k]);
        rewind(fs[k]);
        size_t got = fread(bufs[k], 1, 1023, fs[k]);
        bufs[k][got] = 0;
        fclose(fs[k]);
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* Checks that the file (bytes) is rejected, with `want` in the message. */
static void expect_bad(const char *name, const uint8_t *bytes, size_t len, const char *want) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s.gguf", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len) {
        test_fail(__FILE__, __LINE__, "%s: cannot write %s", name, path);
        if (f) fclose(f);
        return;
    }
    fclose(f);
    g_cases++;

    struct gguf *g = NULL;
    struct kvik_err err = {KVIK_OK, ""};
    kvik_status st = gguf_open(path, &g, &err);
    CHECK_MSG(st == KVIK_ERR_FORMAT && g == NULL && err.msg[0], "%s: status %d, msg '%s'", name,
              st, err.msg);
    CHECK_MSG(!want || strstr(err.msg, want), "%s: message '%s' lacks '%s'", name, err.msg, want);
    CHECK_MSG(!strchr(err.msg, '\n'), "%s: message has a newline", name);
    if (getenv("KVIK_SHOW_GGUF_ERRORS")) printf("    %-28s %s\n", name, err.msg);
    gguf_close(g);
    struct kvik_err err2 = {KVIK_OK, ""};
    st = gguf_open_memory(len ? bytes : NULL, len, &g, &err2);
    CHECK_MSG(st == KVIK_ERR_FORMAT && !strcmp(err.msg, err2.msg), "%s: memory: %s", name,
              err2.msg);
    gguf_close(g);

    if (test_env("KVIK_BIN")[0]) {
        char out[1024], errs[1024];
        size_t out_len = 0, err_len = 0;
        int status = run_info(path, out, &out_len, errs, &err_len);
        CHECK_MSG(status == 1, "%s: kvik info exit status %d", name, status);
        CHECK_MSG(out_len == 0, "%s: kvik info wrote to stdout: %s", name, out);
        CHECK_MSG(!strncmp(errs, "kvik info: ", 11) && err_len < sizeof errs &&
                      strchr(errs, '\n') == errs + err_len - 1,
                  "%s: stderr is not one 'kvik info: ' line: %s", name, errs);
    }
    unlink(path);
}

static void expect_good(const char *name, const uint8_t *bytes, size_t len) {
    struct gguf *g = NULL;
    struct kvik_err err = {KVIK_OK, ""};
    CHECK_MSG(!gguf_open_memory(bytes, len, &g, &err), "%s should be valid: %s", name, err.msg);
    gguf_close(g);
}

static bool setup(void) {
    if (!tensor_type_traits(TENSOR_TYPE_F32) || !tensor_type_traits(TENSOR_TYPE_Q4_0)) {
        test_skip("tensor_type_traits does not know F32/Q4_0 yet");
        return false;
    }
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/kvik-test-malformed-XXXXXX");
        if (!mkdtemp(g_dir)) {
            test_fail(__FILE__, __LINE__, "mkdtemp failed");
            return false;
        }
    }
    return true;
}

/* Removes the temporary folder and whatever a failed check left in it. */
__attribute__((destructor)) static void remove_dir(void) {
    DIR *d = g_dir[0] ? opendir(g_dir) : NULL;
    if (!d) return;
    for (struct dirent *de; (de = readdir(d));) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", g_dir, de->d_name);
        if (de->d_name[0] != '.') unlink(path);
    }
    closedir(d);
    rmdir(g_dir);
}

/* ---- the cases -------------------------------------------------------------------- */

TEST(gguf_malformed_truncations) {
    if (!setup()) return;
    static struct raw r;
    build_valid(&r);
    expect_good("valid", r.p, r.len);
    struct gguf *g = NULL;
    REQUIRE(!gguf_open_memory(r.p, r.len, &g, NULL));
    CHECK_EQ_INT(gguf_n_kv(g), 7);
    CHECK_EQ_INT(gguf_n_tensors(g), 2);
    CHECK_EQ_INT(gguf_tensor(g, 1)->file_offset + 32, r.len);
    gguf_close(g);
    expect_bad("empty", r.p, 0, "magic");
    for (int i = 0; i < r.n_cuts; i++) {
        char name[32];
        snprintf(name, sizeof name, "trunc-%zu", r.cuts[i]);
        expect_bad(name, r.p, r.cuts[i], NULL);
        if (r.cuts[i] > 1 && (i == 0 || r.cuts[i] - 1 > r.cuts[i - 1])) {
            snprintf(name, sizeof name, "trunc-%zu", r.cuts[i] - 1); /* inside a field */
            expect_bad(name, r.p, r.cuts[i] - 1, NULL);
        }
    }
    expect_bad("trunc-last-byte", r.p, r.len - 1, "runs past the end");
}

/* A file with a header and the kvs written by body, no tensors. */
#define KV_CASE(name, n_kv, want, body)                                                     \
    do {                                                                                    \
        memset(&r, 0, sizeof r);                                                            \
        header(&r, 3, 0, n_kv);                                                             \
        body;                                                                               \
        expect_bad(name, r.p, r.len, want);                                                 \
    } while (0)

TEST(gguf_malformed_header_and_metadata) {
    if (!setup()) return;
    static struct raw r;
    KV_CASE("bad-magic", 0, "bad magic", r.p[3] = 'X');
    KV_CASE("version-1", 0, "version 1", r.p[4] = 1);
    KV_CASE("version-4", 0, "unsupported version 4", r.p[4] = 4);
    KV_CASE("version-big-endian", 0, "big-endian", (r.p[4] = 0, r.p[7] = 3));
    KV_CASE("n-kv-huge", UINT64_MAX, "n_kv 18446744073709551615", (void)0);
    KV_CASE("n-kv-too-many", 3, "n_kv 3", kv_u32(&r, "a", 1));
    memset(&r, 0, sizeof r);
    header(&r, 3, (uint64_t)1 << 40, 0);
    expect_bad("n-tensors-huge", r.p, r.len, "n_tensors");
    KV_CASE("key-len-huge", 1, "key length 18446744073709551615",
            (u64(&r, UINT64_MAX), pad(&r, 64)));
    KV_CASE("key-len-over-limit", 1, "exceeds the limit", (u64(&r, 2000), pad(&r, 2048)));
    KV_CASE("key-empty", 1, "empty key",
            (u64(&r, 0), u32(&r, GGUF_TYPE_UINT8), u8(&r, 0), pad(&r, 64)));
    KV_CASE("key-with-nul", 1, "NUL", (u64(&r, 3), put(&r, "a\0b", 3), u32(&r, 0), u8(&r, 0)));
    KV_CASE("key-duplicate", 2, "duplicate key", (kv_u32(&r, "k", 1), kv_u32(&r, "k", 2)));
    KV_CASE("value-type-13", 1, "bad value type 13", (str(&r, "k"), u32(&r, 13), u64(&r, 0)));
    KV_CASE("value-type-max", 1, "bad value type 4294967295",
            (str(&r, "k"), u32(&r, UINT32_MAX), u64(&r, 0)));
    KV_CASE("string-len-huge", 1, "string length 18446744073709551615 at offset 39 exceeds",
            (str(&r, "key"), u32(&r, GGUF_TYPE_STRING), u64(&r, UINT64_MAX)));
    KV_CASE("string-len-past-end", 1, "string length 100",
            (str(&r, "key"), u32(&r, GGUF_TYPE_STRING), u64(&r, 100), put(&r, "abc", 3)));
    KV_CASE("array-len-huge", 1, "array length 18446744073709551615",
            (str(&r, "a"), u32(&r, GGUF_TYPE_ARRAY), u32(&r, GGUF_TYPE_UINT32),
             u64(&r, UINT64_MAX)));
    KV_CASE("array-len-overflows-bytes", 1, "array length 4611686018427387904",
            (str(&r, "a"), u32(&r, GGUF_TYPE_ARRAY), u32(&r, GGUF_TYPE_UINT64),
             u64(&r, (uint64_t)1 << 62), u64(&r, 0)));
    KV_CASE("array-of-strings-len-huge", 1, "array length 1152921504606846976",
            (str(&r, "tokenizer.ggml.tokens"), u32(&r, GGUF_TYPE_ARRAY),
             u32(&r, GGUF_TYPE_STRING), u64(&r, (uint64_t)1 << 60)));
    KV_CASE("array-string-elem-huge", 1, "array element 1: string length",
            (str(&r, "t"), u32(&r, GGUF_TYPE_ARRAY), u32(&r, GGUF_TYPE_STRING), u64(&r, 2),
             str(&r, "ok"), u64(&r, (uint64_t)1 << 50)));
    KV_CASE("array-of-arrays-len-huge", 1, "array length",
            (str(&r, "t"), u32(&r, GGUF_TYPE_ARRAY), u32(&r, GGUF_TYPE_ARRAY),
             u64(&r, UINT64_MAX / 2)));
    KV_CASE("array-elem-type-13", 1, "bad array element type 13",
            (str(&r, "t"), u32(&r, GGUF_TYPE_ARRAY), u32(&r, 13), u64(&r, 0)));
    KV_CASE("nested-elem-type-bad", 1, "bad array element type 99",
            (str(&r, "t"), u32(&r, GGUF_TYPE_ARRAY), u32(&r, GGUF_TYPE_ARRAY), u64(&r, 1),
             u32(&r, 99), u64(&r, 0)));
    KV_CASE("bool-2", 1, "bool value 2", (str(&r, "b"), u32(&r, GGUF_TYPE_BOOL), u8(&r, 2)));
    KV_CASE("bool-array-2", 1, "bool value 2",
            (str(&r, "b"), u32(&r, GGUF_TYPE_ARRAY), u32(&r, GGUF_TYPE_BOOL), u64(&r, 3),
             u8(&r, 0), u8(&r, 1), u8(&r, 2)));
    KV_CASE("alignment-0", 1, "alignment 0", kv_u32(&r, "general.alignment", 0));
    KV_CASE("alignment-3", 1, "alignment 3", kv_u32(&r, "general.alignment", 3));
    KV_CASE("alignment-string", 1, "expected uint32", kv_str(&r, "general.alignment", "32"));
    KV_CASE("alignment-u64", 1, "type uint64 at offset",
            (str(&r, "general.alignment"), u32(&r, GGUF_TYPE_UINT64), u64(&r, 32)));
    KV_CASE("value-truncated", 1, "truncated: uint64",
            (str(&r, "k"), u32(&r, GGUF_TYPE_UINT64), u32(&r, 0)));

    /* Arrays nested one level deeper than GGUF_MAX_DEPTH; exactly that deep is fine. */
    for (int depth = GGUF_MAX_DEPTH; depth <= GGUF_MAX_DEPTH + 1; depth++) {
        memset(&r, 0, sizeof r);
        header(&r, 3, 0, 1);
        str(&r, "deep");
        u32(&r, GGUF_TYPE_ARRAY);
        for (int d = 1; d < depth; d++) u32(&r, GGUF_TYPE_ARRAY), u64(&r, 1);
        u32(&r, GGUF_TYPE_UINT8), u64(&r, 1), u8(&r, 7);
        if (depth == GGUF_MAX_DEPTH) expect_good("nested-max-depth", r.p, r.len);
        else expect_bad("nested-too-deep", r.p, r.len, "nested deeper than 8");
    }
    /* Absurd nesting (a stack-exhaustion attempt) stops at the limit too. */
    memset(&r, 0, sizeof r);
    header(&r, 3, 0, 1);
    str(&r, "deeper");
    u32(&r, GGUF_TYPE_ARRAY);
    for (int d = 0; d < 500; d++) u32(&r, GGUF_TYPE_ARRAY), u64(&r, 1);
    expect_bad("nested-500-deep", r.p, r.len, "nested deeper");
}

/* A file with general.alignment = 32, the tensor infos written by body,
 * padding and data_len bytes of data. */
#define TENSOR_CASE(name, n_tensors, data_len, want, body)                                  \
    do {                                                                                    \
        memset(&r, 0, sizeof r);                                                            \
        header(&r, 3, n_tensors, 1);                                                        \
        kv_u32(&r, "general.alignment", 32);                                                \
        body;                                                                               \
        pad(&r, 32);                                                                        \
        for (int i_ = (int)(data_len); i_ > 0; i_--) u8(&r, 0);                             \
        expect_bad(name, r.p, r.len, want);                                                 \
    } while (0)

TEST(gguf_malformed_tensors) {
    if (!setup()) return;
    static struct raw r;
    uint64_t ne8[1] = {8}, ne42[2] = {4, 2}, ne0[2] = {4, 0}, ne5[5] = {1, 1, 1, 1, 1};
    uint64_t big[4] = {(uint64_t)1 << 20, (uint64_t)1 << 20, 1, 1};
    uint64_t bytes_over[1] = {(uint64_t)1 << 62};
    uint64_t over_i64[1] = {(uint64_t)INT64_MAX + 1};
    uint64_t q33[1] = {33};
    TENSOR_CASE("n-dims-0", 1, 32, "n_dims 0", tinfo(&r, "t", 0, ne8, 0, 0));
    TENSOR_CASE("n-dims-5", 1, 32, "n_dims 5", tinfo(&r, "t", 5, ne5, 0, 0));
    TENSOR_CASE("dim-zero", 1, 32, "ne[1] is 0", tinfo(&r, "t", 2, ne0, 0, 0));
    TENSOR_CASE("dims-overflow-int64", 1, 32, "overflows int64",
                tinfo(&r, "t", 4, (uint64_t[]){(uint64_t)1 << 32, (uint64_t)1 << 31, 2, 1}, 0, 0));
    TENSOR_CASE("dim-over-int64-max", 1, 32, "exceeds INT64_MAX",
                tinfo(&r, "t", 1, over_i64, 0, 0));
    TENSOR_CASE("bytes-overflow", 1, 32, "byte size", tinfo(&r, "t", 1, bytes_over, 0, 0));
    TENSOR_CASE("bytes-past-end", 1, 32, "runs past the end", tinfo(&r, "t", 2, big, 0, 0));
    TENSOR_CASE("type-unknown-99", 1, 32, "unknown tensor type 99", tinfo(&r, "t", 1, ne8, 99, 0));
    TENSOR_CASE("type-removed-4", 1, 32, "unknown tensor type 4", tinfo(&r, "t", 1, ne8, 4, 0));
    TENSOR_CASE("type-huge", 1, 32, "unknown tensor type 4294967295",
                tinfo(&r, "t", 1, ne8, UINT32_MAX, 0));
    TENSOR_CASE("block-size-mismatch", 1, 64, "not a multiple of the block size 32",
                tinfo(&r, "t", 1, q33, TENSOR_TYPE_Q4_0, 0));
    TENSOR_CASE("offset-misaligned", 1, 64, "not a multiple of the alignment 32",
                tinfo(&r, "t", 1, ne8, 0, 4));
    TENSOR_CASE("offset-out-of-file", 1, 32, "runs past the end", tinfo(&r, "t", 1, ne8, 0, 4096));
    TENSOR_CASE("offset-wraps", 1, 32, "runs past the end",
                tinfo(&r, "t", 1, ne8, 0, UINT64_MAX - 31));
    TENSOR_CASE("data-truncated", 1, 16, "runs past the end", tinfo(&r, "t", 1, ne8, 0, 0));
    TENSOR_CASE("no-data-section", 1, 0, "runs past the end", tinfo(&r, "t", 1, ne8, 0, 0));
    TENSOR_CASE("overlap", 2, 64, "overlaps",
                (tinfo(&r, "a", 1, ne42, 0, 0), tinfo(&r, "b", 2, ne42, 0, 0)));
    TENSOR_CASE("duplicate-name", 2, 64, "duplicate tensor name",
                (tinfo(&r, "w", 1, ne8, 0, 0), tinfo(&r, "w", 1, ne8, 0, 32)));
    TENSOR_CASE("name-empty", 1, 32, "empty tensor name", tinfo(&r, "", 1, ne8, 0, 0));
    TENSOR_CASE("name-len-huge", 1, 32, "tensor name length 18446744073709551615",
                u64(&r, UINT64_MAX));
    TENSOR_CASE("n-tensors-too-many", 3, 64, "tensor[1]", tinfo(&r, "t", 1, ne8, 0, 0));

    /* The control case: the same shape as above with nothing broken opens. */
    memset(&r, 0, sizeof r);
    header(&r, 3, 1, 1);
    kv_u32(&r, "general.alignment", 32);
    tinfo(&r, "t", 1, ne8, 0, 0);
    pad(&r, 32);
    for (int i = 0; i < 32; i++) u8(&r, 0);
    expect_good("tensor-ok", r.p, r.len);
}

TEST(gguf_valid_edge_cases) {
    static struct raw r;
    /* Header only: no kvs, no tensors. */
    memset(&r, 0, sizeof r);
    header(&r, 3, 0, 0);
    expect_good("header-only", r.p, r.len);
    /* Vocab-only, ending right after the metadata, or padded, or v2. */
    for (int v = 2; v <= 3; v++) {
        memset(&r, 0, sizeof r);
        header(&r, (uint32_t)v, 0, 2);
        kv_str(&r, "tokenizer.ggml.model", "gpt2");
        str(&r, "tokenizer.ggml.tokens");
        u32(&r, GGUF_TYPE_ARRAY), u32(&r, GGUF_TYPE_STRING), u64(&r, 3);
        str(&r, "a"), str(&r, ""), str(&r, "\xff not utf8");
        expect_good("vocab-only", r.p, r.len);
        pad(&r, 32);
        expect_good("vocab-only-padded", r.p, r.len);
        struct gguf *g = NULL;
        REQUIRE(!gguf_open_memory(r.p, r.len, &g, NULL));
        CHECK_EQ_INT(gguf_version(g), v);
        CHECK_EQ_INT(gguf_n_tensors(g), 0);
        gguf_close(g);
    }
    if (!tensor_type_traits(TENSOR_TYPE_F32)) return;
    /* Alignment 1: tensors back to back at odd offsets; trailing bytes are fine. */
    memset(&r, 0, sizeof r);
    header(&r, 3, 2, 1);
    kv_u32(&r, "general.alignment", 1);
    tinfo(&r, "a", 1, (uint64_t[]){3}, TENSOR_TYPE_F32, 0);
    tinfo(&r, "b", 1, (uint64_t[]){1}, TENSOR_TYPE_F32, 12);
    for (int i = 0; i < 16 + 5; i++) u8(&r, (uint8_t)i);
    expect_good("alignment-1", r.p, r.len);
}

TEST(gguf_malformed_case_count) {
    /* Runs last in this file: every case above counted itself. */
    if (!tensor_type_traits(TENSOR_TYPE_F32)) {
        test_skip("no tensor types yet");
        return;
    }
    CHECK_MSG(g_cases >= 40, "only %d malformed cases", g_cases);
    printf("    %d malformed GGUF files rejected\n", g_cases);
}
