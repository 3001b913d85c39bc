/*
 * test_gguf.c — the GGUF reader and writer: round trips of every metadata
 * value type (nested and empty arrays, empty strings) and every tensor type,
 * alignment variants, accessor behaviour on missing keys and wrong types,
 * the public kvik_gguf_* API, and `kvik info` (text and JSON) on the shared
 * vocabulary fixtures and on a file the writer made. Also checks (and, with
 * KVIK_WRITE_FUZZ_SEEDS=DIR set, regenerates) the fuzzer's seed files.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tensor/tensor.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------------ */

/* Writes w into memory and opens it; the caller frees *buf after gguf_close. */
static struct gguf *write_and_open(struct gguf_writer *w, void **buf, size_t *size) {
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    if (gguf_writer_write_memory(w, buf, size, &err)) {
        test_fail(__FILE__, __LINE__, "write: %s", err.msg);
        return NULL;
    }
    if (gguf_open_memory(*buf, *size, &g, &err)) {
        test_fail(__FILE__, __LINE__, "open: %s", err.msg);
        free(*buf);
        *buf = NULL;
        return NULL;
    }
    return g;
}

static bool str_eq(struct gguf_str s, const char *want, size_t len) {
    return s.ptr && s.len == len && memcmp(s.ptr, want, len) == 0;
}

/* Output of one run of the kvik binary. */
struct run {
    int status; /* exit code, or 128 + signal */
    char *out, *err;
    size_t out_len, err_len;
};

static char *slurp(FILE *f, size_t *len) {
    fflush(f);
    long n = ftell(f);
    char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
    rewind(f);
    *len = n > 0 ? fread(s, 1, (size_t)n, f) : 0;
    s[*len] = 0;
    fclose(f);
    return s;
}

/* Runs `$KVIK_BIN args...` with stdout and stderr captured. */
static bool run_kvik(const char *a1, const char *a2, const char *a3, struct run *r) {
    const char *bin = test_env("KVIK_BIN");
    FILE *fo = tmpfile(), *fe = tmpfile();
    if (!bin[0] || !fo || !fe) return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(fo), 1);
        dup2(fileno(fe), 2);
        execl(bin, bin, a1, a2, a3, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
    r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    r->out = slurp(fo, &r->out_len);
    r->err = slurp(fe, &r->err_len);
    return true;
}

static void run_free(struct run *r) {
    free(r->out);
    free(r->err);
}

/* A strict JSON validator (RFC 8259 grammar), enough to check `--json`. */
struct json {
    const char *s;
    size_t i, n;
    int depth;
};

static void j_ws(struct json *j) {
    while (j->i < j->n && j->s[j->i] && strchr(" \t\r\n", j->s[j->i])) j->i++;
}

static bool j_value(struct json *j);

static bool j_string(struct json *j) {
    if (j->i >= j->n || j->s[j->i] != '"') return false;
    for (j->i++; j->i < j->n; j->i++) {
        unsigned char c = (unsigned char)j->s[j->i];
        if (c == '"') {
            j->i++;
            return true;
        }
        if (c < 0x20) return false;
        if (c == '\\') {
            if (++j->i >= j->n) return false;
            char e = j->s[j->i];
            if (e == 'u') {
                for (int k = 0; k < 4; k++)
                    if (++j->i >= j->n || !isxdigit((unsigned char)j->s[j->i])) return false;
            } else if (!e || !strchr("\"\\/bfnrt", e)) {
                return false;
            }
        }
    }
    return false;
}

static bool j_number(struct json *j) {
    size_t start = j->i;
    if (j->i < j->n && j->s[j->i] == '-') j->i++;
    size_t digits = j->i;
    while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') j->i++;
    if (j->i == digits || (j->s[digits] == '0' && j->i - digits > 1)) return false;
    if (j->i < j->n && j->s[j->i] == '.') {
        size_t f = ++j->i;
        while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') j->i++;
        if (j->i == f) return false;
    }
    if (j->i < j->n && (j->s[j->i] == 'e' || j->s[j->i] == 'E')) {
        j->i++;
        if (j->i < j->n && (j->s[j->i] == '+' || j->s[j->i] == '-')) j->i++;
        size_t e = j->i;
        while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') j->i++;
        if (j->i == e) return false;
    }
    return j->i > start;
}

static bool j_seq(struct json *j, char close, bool object) {
    if (++j->depth > 64) return false;
    j->i++;
    j_ws(j);
    if (j->i < j->n && j->s[j->i] == close) {
        j->i++;
        j->depth--;
        return true;
    }
    for (;;) {
        j_ws(j);
        if (object) {
            if (!j_string(j)) return false;
            j_ws(j);
            if (j->i >= j->n || j->s[j->i++] != ':') return false;
        }
        if (!j_value(j)) return false;
        j_ws(j);
        if (j->i >= j->n) return false;
        char c = j->s[j->i++];
        if (c == close) break;
        if (c != ',') return false;
    }
    j->depth--;
    return true;
}

static bool j_value(struct json *j) {
    j_ws(j);
    if (j->i >= j->n) return false;
    char c = j->s[j->i];
    if (c == '{') return j_seq(j, '}', true);
    if (c == '[') return j_seq(j, ']', false);
    if (c == '"') return j_string(j);
    static const char *const lits[] = {"true", "false", "null"};
    for (const char *const *lit = lits; lit < lits + 3; lit++) {
        size_t len = strlen(*lit);
        if (j->n - j->i >= len && !memcmp(j->s + j->i, *lit, len)) {
            j->i += len;
            return true;
        }
    }
    return j_number(j);
}

static bool json_valid(const char *s, size_t n) {
    struct json j = {s, 0, n, 0};
    j_ws(&j);
    if (j.i >= n || s[j.i] != '{' || !j_value(&j)) return false;
    j_ws(&j);
    return j.i == n;
}

/* python3's json module agrees, when python3 is installed. */
static int python_json_ok(const char *path) {
    if (system("python3 -c 'import json' >/dev/null 2>&1") != 0) return -1;
    char cmd[4200];
    snprintf(cmd, sizeof cmd,
             "'%s' info '%s' --json | python3 -c 'import json,sys; json.load(sys.stdin)'",
             test_env("KVIK_BIN"), path);
    return system(cmd) == 0;
}

/* ---- round trips ------------------------------------------------------------------ */

static const uint8_t U8S[] = {0, 1, 255};
static const int8_t I8S[] = {-128, 0, 127};
static const uint16_t U16S[] = {0, 1, 65535};
static const int16_t I16S[] = {-32768, -1, 32767};
static const uint32_t U32S[] = {0, 7, UINT32_MAX};
static const int32_t I32S[] = {INT32_MIN, -1, INT32_MAX};
static const float F32S[] = {-1.5f, 0.0f, 3.25e38f};
static const uint8_t BOOLS[] = {1, 0, 1};
static const uint64_t U64S[] = {0, 1, UINT64_MAX};
static const int64_t I64S[] = {INT64_MIN, -1, INT64_MAX};
static const double F64S[] = {-2.5e300, 0.0, 1e-300};
static const void *const ARR_DATA[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = U8S,   [GGUF_TYPE_INT8] = I8S,     [GGUF_TYPE_UINT16] = U16S,
    [GGUF_TYPE_INT16] = I16S,  [GGUF_TYPE_UINT32] = U32S,  [GGUF_TYPE_INT32] = I32S,
    [GGUF_TYPE_FLOAT32] = F32S, [GGUF_TYPE_BOOL] = BOOLS,  [GGUF_TYPE_UINT64] = U64S,
    [GGUF_TYPE_INT64] = I64S,  [GGUF_TYPE_FLOAT64] = F64S,
};

/* A writer holding every value type; shared by several tests. */
static struct gguf_writer *all_values_writer(void) {
    struct gguf_writer *w = gguf_writer_new();
    bool ok = w && !gguf_writer_set_u8(w, "t.u8", 255) && !gguf_writer_set_i8(w, "t.i8", -128) &&
              !gguf_writer_set_u16(w, "t.u16", 65535) && !gguf_writer_set_i16(w, "t.i16", -32768) &&
              !gguf_writer_set_u32(w, "t.u32", UINT32_MAX) &&
              !gguf_writer_set_i32(w, "t.i32", INT32_MIN) &&
              !gguf_writer_set_u64(w, "t.u64", UINT64_MAX) &&
              !gguf_writer_set_i64(w, "t.i64", INT64_MIN) &&
              !gguf_writer_set_f32(w, "t.f32", 1.5f) &&
              !gguf_writer_set_f64(w, "t.f64", -2.25e300) &&
              !gguf_writer_set_bool(w, "t.true", true) &&
              !gguf_writer_set_bool(w, "t.false", false) &&
              !gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo \"w\"\n") &&
              !gguf_writer_set_str(w, "t.str.empty", "") &&
              !gguf_writer_set_strn(w, "t.str.nul", "a\0b", 3);
    char key[64];
    for (int t = 0; ok && t < GGUF_TYPE_COUNT; t++) {
        if (!ARR_DATA[t]) continue;
        snprintf(key, sizeof key, "t.arr.%s", gguf_type_name(t));
        ok = !gguf_writer_set_arr_data(w, key, (enum gguf_type)t, ARR_DATA[t], 3);
        snprintf(key, sizeof key, "t.arr.empty.%s", gguf_type_name(t));
        ok = ok && !gguf_writer_set_arr_data(w, key, (enum gguf_type)t, NULL, 0);
    }
    const char *strs[] = {"a", "", "c\xe2\x82\xac"};
    ok = ok && !gguf_writer_set_arr_str(w, "t.arr.str", strs, 3) &&
         !gguf_writer_set_arr_str(w, "t.arr.str.empty", NULL, 0);
    /* [[1, 2, 3], [], [4]] and [["x", "yy"], [""]] */
    struct gguf_warr *outer = gguf_warr_new(GGUF_TYPE_ARRAY), *a = gguf_warr_new(GGUF_TYPE_UINT32),
                     *b = gguf_warr_new(GGUF_TYPE_UINT32), *c = gguf_warr_new(GGUF_TYPE_UINT32);
    uint32_t v123[] = {1, 2, 3}, v4 = 4;
    ok = ok && outer && a && b && c && !gguf_warr_add_data(a, v123, 3) &&
         !gguf_warr_add_data(c, &v4, 1) && !gguf_warr_add_arr(outer, a) &&
         !gguf_warr_add_arr(outer, b) && !gguf_warr_add_arr(outer, c) &&
         !gguf_writer_set_arr(w, "t.nested.u32", outer);
    gguf_warr_free(outer);
    gguf_warr_free(a);
    gguf_warr_free(b);
    gguf_warr_free(c);
    outer = gguf_warr_new(GGUF_TYPE_ARRAY);
    a = gguf_warr_new(GGUF_TYPE_STRING);
    b = gguf_warr_new(GGUF_TYPE_STRING);
    ok = ok && outer && a && b && !gguf_warr_add_str(a, "x", 1) && !gguf_warr_add_str(a, "yy", 2) &&
         !gguf_warr_add_str(b, "", 0) && !gguf_warr_add_arr(outer, a) &&
         !gguf_warr_add_arr(outer, b) && !gguf_writer_set_arr(w, "t.nested.str", outer);
    gguf_warr_free(outer);
    gguf_warr_free(a);
    gguf_warr_free(b);
    /* an empty array of arrays, and a chain GGUF_MAX_DEPTH deep ending in [i64 5] */
    outer = gguf_warr_new(GGUF_TYPE_ARRAY);
    ok = ok && outer && !gguf_writer_set_arr(w, "t.nested.empty", outer);
    gguf_warr_free(outer);
    struct gguf_warr *chain = gguf_warr_new(GGUF_TYPE_INT64);
    int64_t five = 5;
    ok = ok && chain && !gguf_warr_add_data(chain, &five, 1);
    for (int d = 1; ok && d < GGUF_MAX_DEPTH; d++) {
        struct gguf_warr *up = gguf_warr_new(GGUF_TYPE_ARRAY);
        ok = up && !gguf_warr_add_arr(up, chain);
        gguf_warr_free(chain);
        chain = up;
    }
    ok = ok && !gguf_writer_set_arr(w, "t.nested.deep", chain);
    gguf_warr_free(chain);
    if (!ok) {
        gguf_writer_free(w);
        return NULL;
    }
    return w;
}

TEST(gguf_roundtrip_every_value_type) {
    struct gguf_writer *w = all_values_writer();
    REQUIRE(w);
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = write_and_open(w, &buf, &size);
    gguf_writer_free(w);
    REQUIRE(g);
    struct kvik_err err = {0};
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
    bool b;
    struct gguf_str s;
    CHECK_EQ_INT(gguf_version(g), 3);
    CHECK_EQ_INT(gguf_alignment(g), 32);
    CHECK_EQ_INT(gguf_n_tensors(g), 0);
    CHECK(!gguf_get_u32(g, "t.u8", &u32, &err) && u32 == 255);
    CHECK(!gguf_get_i64(g, "t.i8", &i64, &err) && i64 == -128);
    CHECK(!gguf_get_u32(g, "t.u16", &u32, &err) && u32 == 65535);
    CHECK(!gguf_get_i64(g, "t.i16", &i64, &err) && i64 == -32768);
    CHECK(!gguf_get_u32(g, "t.u32", &u32, &err) && u32 == UINT32_MAX);
    CHECK(!gguf_get_i64(g, "t.i32", &i64, &err) && i64 == INT32_MIN);
    CHECK(!gguf_get_u64(g, "t.u64", &u64, &err) && u64 == UINT64_MAX);
    CHECK(!gguf_get_i64(g, "t.i64", &i64, &err) && i64 == INT64_MIN);
    CHECK(!gguf_get_f32(g, "t.f32", &f32, &err) && f32 == 1.5f);
    double d;
    CHECK(gguf_value_to_f64(gguf_kv_value(g, gguf_find_key(g, "t.f64")), &d) && d == -2.25e300);
    CHECK(!gguf_get_bool(g, "t.true", &b, &err) && b);
    CHECK(!gguf_get_bool(g, "t.false", &b, &err) && !b);
    CHECK(!gguf_get_str(g, "t.str", &s, &err) && str_eq(s, "h\xc3\xa9llo \"w\"\n", 11));
    CHECK(!gguf_get_str(g, "t.str.empty", &s, &err) && s.ptr && s.len == 0);
    CHECK(!gguf_get_str(g, "t.str.nul", &s, &err) && str_eq(s, "a\0b", 3));

    char key[64];
    uint8_t tmp[64];
    for (int t = 0; t < GGUF_TYPE_COUNT; t++) {
        if (!ARR_DATA[t]) continue;
        const struct gguf_value *v;
        snprintf(key, sizeof key, "t.arr.%s", gguf_type_name(t));
        REQUIRE(!gguf_get_arr(g, key, t, &v, &err));
        CHECK_EQ_INT(gguf_arr_len(v), 3);
        CHECK_EQ_INT(gguf_arr_type(v), t);
        size_t bytes = 3 * gguf_type_size(t);
        CHECK(!gguf_arr_copy(v, tmp, bytes) && !memcmp(tmp, ARR_DATA[t], bytes));
        CHECK(gguf_arr_data(v) && !memcmp(gguf_arr_data(v), ARR_DATA[t], bytes));
        struct gguf_value e;
        CHECK(gguf_arr_elem(v, 2, &e) && e.type == (enum gguf_type)t);
        CHECK(!gguf_arr_elem(v, 3, &e));
        snprintf(key, sizeof key, "t.arr.empty.%s", gguf_type_name(t));
        REQUIRE(!gguf_get_arr(g, key, t, &v, &err));
        CHECK_EQ_INT(gguf_arr_len(v), 0);
        CHECK(!gguf_arr_copy(v, tmp, 0));
    }
    const struct gguf_value *v;
    REQUIRE(!gguf_get_arr(g, "t.arr.str", GGUF_TYPE_STRING, &v, &err));
    CHECK_EQ_INT(gguf_arr_len(v), 3);
    CHECK(str_eq(gguf_arr_str(v, 0), "a", 1));
    CHECK(gguf_arr_str(v, 1).ptr && gguf_arr_str(v, 1).len == 0);
    CHECK(str_eq(gguf_arr_str(v, 2), "c\xe2\x82\xac", 4));
    CHECK(!gguf_arr_str(v, 3).ptr);
    CHECK(!gguf_arr_data(v));
    REQUIRE(!gguf_get_arr(g, "t.arr.str.empty", GGUF_TYPE_STRING, &v, &err));
    CHECK_EQ_INT(gguf_arr_len(v), 0);

    REQUIRE(!gguf_get_arr(g, "t.nested.u32", GGUF_TYPE_ARRAY, &v, &err));
    CHECK_EQ_INT(gguf_arr_len(v), 3);
    CHECK_EQ_INT(gguf_arr_len(gguf_arr_arr(v, 0)), 3);
    CHECK_EQ_INT(gguf_arr_len(gguf_arr_arr(v, 1)), 0);
    CHECK_EQ_INT(gguf_arr_len(gguf_arr_arr(v, 2)), 1);
    CHECK(!gguf_arr_arr(v, 3));
    struct gguf_value e;
    CHECK(gguf_arr_elem(gguf_arr_arr(v, 0), 2, &e) && gguf_value_to_u64(&e, &u64) && u64 == 3);
    CHECK(gguf_arr_elem(gguf_arr_arr(v, 2), 0, &e) && gguf_value_to_u64(&e, &u64) && u64 == 4);
    REQUIRE(!gguf_get_arr(g, "t.nested.str", GGUF_TYPE_ARRAY, &v, &err));
    CHECK(str_eq(gguf_arr_str(gguf_arr_arr(v, 0), 1), "yy", 2));
    CHECK(gguf_arr_str(gguf_arr_arr(v, 1), 0).len == 0);
    CHECK(gguf_arr_elem(v, 0, &e) && e.type == GGUF_TYPE_ARRAY && e.elem_type == GGUF_TYPE_STRING);
    REQUIRE(!gguf_get_arr(g, "t.nested.empty", GGUF_TYPE_ARRAY, &v, &err));
    CHECK_EQ_INT(gguf_arr_len(v), 0);
    REQUIRE(!gguf_get_arr(g, "t.nested.deep", -1, &v, &err));
    for (int depth = 1; depth < GGUF_MAX_DEPTH && v; depth++) v = gguf_arr_arr(v, 0);
    REQUIRE(v);
    CHECK(gguf_arr_type(v) == GGUF_TYPE_INT64 && gguf_arr_elem(v, 0, &e) &&
          gguf_value_to_i64(&e, &i64) && i64 == 5);

    /* Copying every value into a new writer reproduces the file byte for byte. */
    struct gguf_writer *w2 = gguf_writer_new();
    REQUIRE(w2);
    for (int64_t i = 0; i < gguf_n_kv(g); i++)
        CHECK(!gguf_writer_set_value(w2, gguf_key(g, i), gguf_kv_value(g, i)));
    void *buf2 = NULL;
    size_t size2 = 0;
    CHECK(!gguf_writer_write_memory(w2, &buf2, &size2, &err));
    CHECK(size2 == size && buf2 && !memcmp(buf, buf2, size));
    free(buf2);
    gguf_writer_free(w2);
    gguf_close(g);
    free(buf);
}

TEST(gguf_roundtrip_every_tensor_type) {
    struct gguf_writer *w = gguf_writer_new();
    REQUIRE(w);
    uint8_t *data[256] = {0};
    int n_types = 0;
    uint64_t seed = 7;
    for (int t = 0; t < 256; t++) {
        const struct type_traits *tt = tensor_type_traits(t);
        if (!tt || !tt->name) continue;
        int64_t ne[3] = {2 * tt->block_size, 3, 2};
        size_t bytes = 2 * tt->type_size * 3 * 2;
        data[t] = malloc(bytes);
        for (size_t i = 0; i < bytes; i++) data[t][i] = (uint8_t)test_rand_u64(&seed);
        char name[32];
        snprintf(name, sizeof name, "tensor.%s", tt->name);
        CHECK(!gguf_writer_add_tensor(w, name, t, 1 + t % 3, ne, data[t]));
        n_types++;
    }
    if (n_types == 0) {
        gguf_writer_free(w);
        test_skip("tensor_type_traits knows no types yet");
        return;
    }
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = write_and_open(w, &buf, &size);
    gguf_writer_free(w);
    if (g) {
        CHECK_EQ_INT(gguf_n_tensors(g), n_types);
        for (int t = 0; t < 256; t++) {
            if (!data[t]) continue;
            const struct type_traits *tt = tensor_type_traits(t);
            char name[32];
            snprintf(name, sizeof name, "tensor.%s", tt->name);
            const struct gguf_tensor *ten = gguf_tensor(g, gguf_find_tensor(g, name));
            REQUIRE(ten);
            CHECK_STR(ten->name, name);
            CHECK_EQ_INT(ten->type, t);
            CHECK_EQ_INT(ten->n_dims, 1 + t % 3);
            int64_t want[3] = {2 * tt->block_size, 3, 2};
            for (int d = 0; d < 4; d++) CHECK_EQ_INT(ten->ne[d], d < ten->n_dims ? want[d] : 1);
            uint64_t bytes = (uint64_t)(ten->ne[0] / tt->block_size) * tt->type_size *
                             (uint64_t)(ten->ne[1] * ten->ne[2]);
            CHECK_EQ_INT(ten->n_bytes, bytes);
            CHECK_EQ_INT(ten->file_offset % 32, 0);
            CHECK(!memcmp(ten->data, data[t], bytes));
        }
        gguf_close(g);
    }
    free(buf);
    for (int t = 0; t < 256; t++) free(data[t]);
}

TEST(gguf_alignment_variants) {
    REQUIRE(tensor_type_traits(TENSOR_TYPE_F32));
    const uint32_t aligns[] = {1, 2, 8, 32, 64, 256, 4096};
    for (size_t k = 0; k < sizeof aligns / sizeof aligns[0]; k++) {
        struct gguf_writer *w = gguf_writer_new();
        REQUIRE(w);
        CHECK(!gguf_writer_set_alignment(w, aligns[k]));
        gguf_writer_set_str(w, "general.name", "odd sizes");
        float vals[7] = {1, 2, 3, 4, 5, 6, 7};
        for (int i = 0; i < 3; i++) {
            char name[16];
            int64_t ne = 3 + 2 * i; /* 12, 20, 28 bytes */
            snprintf(name, sizeof name, "t%d", i);
            CHECK(!gguf_writer_add_tensor(w, name, TENSOR_TYPE_F32, 1, &ne, vals));
        }
        void *buf = NULL;
        size_t size = 0;
        struct gguf *g = write_and_open(w, &buf, &size);
        gguf_writer_free(w);
        REQUIRE(g);
        CHECK_EQ_INT(gguf_alignment(g), aligns[k]);
        CHECK_EQ_INT(gguf_find_key(g, "general.alignment") >= 0, aligns[k] != 32);
        CHECK_EQ_INT(gguf_data_offset(g) % aligns[k], 0);
        for (int i = 0; i < 3; i++) {
            const struct gguf_tensor *t = gguf_tensor(g, i);
            CHECK_EQ_INT(t->file_offset % aligns[k], 0);
            CHECK(!memcmp(t->data, vals, (size_t)t->n_bytes));
        }
        gguf_close(g);
        free(buf);
    }
    struct gguf_writer *w = gguf_writer_new();
    CHECK_EQ_INT(gguf_writer_set_alignment(w, 0), KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(gguf_writer_set_alignment(w, 3), KVIK_ERR_INVALID_ARG);
    /* An alignment set as a plain key is checked when writing. */
    CHECK(!gguf_writer_set_u32(w, "general.alignment", 48));
    void *buf = NULL;
    size_t size = 0;
    struct kvik_err err = {0};
    CHECK_EQ_INT(gguf_writer_write_memory(w, &buf, &size, &err), KVIK_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "alignment") != NULL);
    gguf_writer_free(w);
}

TEST(gguf_accessors_missing_keys_and_wrong_types) {
    struct gguf_writer *w = all_values_writer();
    REQUIRE(w);
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = write_and_open(w, &buf, &size);
    gguf_writer_free(w);
    REQUIRE(g);
    struct kvik_err err = {0};
    uint32_t u32 = 17;
    int64_t i64;
    uint64_t u64;
    float f32;
    bool b;
    struct gguf_str s;
    const struct gguf_value *v;
    CHECK_EQ_INT(gguf_find_key(g, "no.such.key"), -1);
    CHECK_EQ_INT(gguf_find_key(g, ""), -1);
    CHECK_EQ_INT(gguf_find_key(g, NULL), -1);
    CHECK_EQ_INT(gguf_get_u32(g, "no.such.key", &u32, &err), KVIK_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "no.such.key") != NULL);
    CHECK_EQ_INT(u32, 17); /* untouched on failure */
    CHECK_EQ_INT(gguf_get_str(g, "t.u32", &s, &err), KVIK_ERR_FORMAT);
    CHECK(strstr(err.msg, "t.u32") && strstr(err.msg, "uint32") && strstr(err.msg, "string"));
    CHECK_EQ_INT(gguf_get_u32(g, "t.str", &u32, &err), KVIK_ERR_FORMAT);
    CHECK_EQ_INT(gguf_get_u32(g, "t.i32", &u32, &err), KVIK_ERR_FORMAT); /* negative */
    CHECK_EQ_INT(gguf_get_u32(g, "t.u64", &u32, &err), KVIK_ERR_FORMAT); /* too big */
    CHECK_EQ_INT(gguf_get_i64(g, "t.u64", &i64, &err), KVIK_ERR_FORMAT);
    CHECK_EQ_INT(gguf_get_u64(g, "t.i64", &u64, &err), KVIK_ERR_FORMAT);
    CHECK_EQ_INT(gguf_get_f32(g, "t.u32", &f32, &err), KVIK_ERR_FORMAT);
    CHECK(!gguf_get_f32(g, "t.f64", &f32, &err) && isinf(f32)); /* -2.25e300 as float */
    CHECK_EQ_INT(gguf_get_bool(g, "t.u8", &b, &err), KVIK_ERR_FORMAT);
    CHECK_EQ_INT(gguf_get_arr(g, "t.u8", -1, &v, &err), KVIK_ERR_FORMAT);
    CHECK_EQ_INT(gguf_get_arr(g, "t.arr.str", GGUF_TYPE_UINT32, &v, &err), KVIK_ERR_FORMAT);
    CHECK(!gguf_get_u32(g, "t.u8", &u32, &err) && u32 == 255); /* widening is fine */
    CHECK(!gguf_get_i64(g, "t.true", &i64, &err) && i64 == 1);
    CHECK(gguf_key(g, -1) == NULL && gguf_key(g, gguf_n_kv(g)) == NULL);
    CHECK(gguf_kv_value(g, -1) == NULL && gguf_kv_value(g, gguf_n_kv(g)) == NULL);
    CHECK(gguf_tensor(g, 0) == NULL && gguf_find_tensor(g, "x") == -1);
    /* Array accessors on the wrong kind of value. */
    const struct gguf_value *scalar = gguf_kv_value(g, gguf_find_key(g, "t.u32"));
    struct gguf_value e;
    CHECK_EQ_INT(gguf_arr_len(scalar), 0);
    CHECK_EQ_INT(gguf_arr_type(scalar), -1);
    CHECK(!gguf_arr_elem(scalar, 0, &e));
    CHECK(!gguf_arr_str(scalar, 0).ptr && !gguf_arr_arr(scalar, 0) && !gguf_arr_data(scalar));
    REQUIRE(!gguf_get_arr(g, "t.arr.uint32", GGUF_TYPE_UINT32, &v, &err));
    uint8_t tmp[16];
    CHECK_EQ_INT(gguf_arr_copy(v, tmp, 11), KVIK_ERR_INVALID_ARG);
    CHECK(!gguf_arr_str(v, 0).ptr && !gguf_arr_arr(v, 0));
    CHECK(!gguf_value_to_i64(scalar, &i64) || i64 == UINT32_MAX);
    const struct gguf_value *str = gguf_kv_value(g, gguf_find_key(g, "t.str"));
    double d;
    CHECK(!gguf_value_to_i64(str, &i64) && !gguf_value_to_u64(str, &u64) &&
          !gguf_value_to_f64(str, &d));
    gguf_close(g);
    free(buf);
}

TEST(gguf_writer_replaces_keys_and_rejects_bad_input) {
    struct gguf_writer *w = gguf_writer_new();
    REQUIRE(w);
    CHECK(!gguf_writer_set_u32(w, "a", 1));
    CHECK(!gguf_writer_set_u32(w, "b", 2));
    CHECK(!gguf_writer_set_str(w, "a", "replaced"));
    CHECK_EQ_INT(gguf_writer_set_u32(w, "", 1), KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(gguf_writer_set_u32(w, NULL, 1), KVIK_ERR_INVALID_ARG);
    char long_key[GGUF_MAX_NAME + 2];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = 0;
    CHECK_EQ_INT(gguf_writer_set_u32(w, long_key, 1), KVIK_ERR_INVALID_ARG);
    long_key[GGUF_MAX_NAME] = 0;
    CHECK(!gguf_writer_set_u32(w, long_key, 3)); /* exactly the limit */
    uint8_t bad_bools[] = {0, 2};
    CHECK_EQ_INT(gguf_writer_set_arr_data(w, "bools", GGUF_TYPE_BOOL, bad_bools, 2),
                 KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(gguf_writer_set_arr_data(w, "strs", GGUF_TYPE_STRING, bad_bools, 2),
                 KVIK_ERR_INVALID_ARG);
    CHECK(gguf_warr_new((enum gguf_type)13) == NULL);
    struct gguf_warr *a = gguf_warr_new(GGUF_TYPE_UINT32);
    CHECK_EQ_INT(gguf_warr_add_str(a, "x", 1), KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(gguf_warr_add_arr(a, a), KVIK_ERR_INVALID_ARG);
    gguf_warr_free(a);
    /* Nesting deeper than the reader accepts is refused. */
    struct gguf_warr *chain = gguf_warr_new(GGUF_TYPE_UINT8);
    int depth = 1;
    kvik_status st = KVIK_OK;
    while (!st) {
        struct gguf_warr *up = gguf_warr_new(GGUF_TYPE_ARRAY);
        st = gguf_warr_add_arr(up, chain);
        gguf_warr_free(chain);
        chain = up;
        if (!st) depth++;
    }
    CHECK_EQ_INT(st, KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(depth, GGUF_MAX_DEPTH);
    gguf_warr_free(chain);

    if (tensor_type_traits(TENSOR_TYPE_Q4_0)) {
        int64_t ne[5] = {32, 2, 1, 1, 1}, bad0[2] = {0, 2}, odd[1] = {33};
        int64_t huge[4] = {INT64_MAX / 2 + 1, 2, 1, 1};
        CHECK(!gguf_writer_add_tensor(w, "q", TENSOR_TYPE_Q4_0, 2, ne, NULL));
        CHECK_EQ_INT(gguf_writer_add_tensor(w, "q", TENSOR_TYPE_Q4_0, 2, ne, NULL),
                     KVIK_ERR_INVALID_ARG); /* duplicate name */
        CHECK_EQ_INT(gguf_writer_add_tensor(w, "x", TENSOR_TYPE_Q4_0, 0, ne, NULL),
                     KVIK_ERR_INVALID_ARG);
        CHECK_EQ_INT(gguf_writer_add_tensor(w, "x", TENSOR_TYPE_Q4_0, 5, ne, NULL),
                     KVIK_ERR_INVALID_ARG);
        CHECK_EQ_INT(gguf_writer_add_tensor(w, "x", TENSOR_TYPE_Q4_0, 2, bad0, NULL),
                     KVIK_ERR_INVALID_ARG);
        CHECK_EQ_INT(gguf_writer_add_tensor(w, "x", TENSOR_TYPE_Q4_0, 1, odd, NULL),
                     KVIK_ERR_INVALID_ARG);
        CHECK_EQ_INT(gguf_writer_add_tensor(w, "x", 4, 1, ne, NULL), KVIK_ERR_INVALID_ARG);
        CHECK_EQ_INT(gguf_writer_add_tensor(w, "x", TENSOR_TYPE_F32, 2, huge, NULL),
                     KVIK_ERR_INVALID_ARG);
        CHECK_EQ_INT(gguf_writer_add_tensor(w, "", TENSOR_TYPE_F32, 1, ne, NULL),
                     KVIK_ERR_INVALID_ARG);
    }
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = write_and_open(w, &buf, &size);
    gguf_writer_free(w);
    REQUIRE(g);
    CHECK_EQ_INT(gguf_n_kv(g), 3);
    CHECK_STR(gguf_key(g, 0), "a"); /* the replaced key keeps its place */
    struct gguf_str s;
    CHECK(!gguf_get_str(g, "a", &s, NULL) && str_eq(s, "replaced", 8));
    if (gguf_n_tensors(g) == 1) { /* NULL data writes zeros */
        const struct gguf_tensor *t = gguf_tensor(g, 0);
        const uint8_t *p = t->data;
        uint8_t any = 0;
        for (uint64_t i = 0; i < t->n_bytes; i++) any |= p[i];
        CHECK_EQ_INT(any, 0);
    }
    gguf_close(g);
    free(buf);
}

/* ---- files, the public API and `kvik info` -------------------------------------------- */

static char g_tmpdir[64];

static const char *tmp_path(const char *name, char *buf, size_t cap) {
    if (!g_tmpdir[0]) {
        snprintf(g_tmpdir, sizeof g_tmpdir, "/tmp/kvik-test-gguf-XXXXXX");
        if (!mkdtemp(g_tmpdir)) return NULL;
    }
    snprintf(buf, cap, "%s/%s", g_tmpdir, name);
    return buf;
}

/* Removes the temporary folder and whatever a failed test left in it. */
__attribute__((destructor)) static void remove_tmpdir(void) {
    DIR *d = g_tmpdir[0] ? opendir(g_tmpdir) : NULL;
    if (!d) return;
    for (struct dirent *de; (de = readdir(d));) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", g_tmpdir, de->d_name);
        if (de->d_name[0] != '.') unlink(path);
    }
    closedir(d);
    rmdir(g_tmpdir);
}

/* A small model-like file: metadata with a long chat template, a vocab,
 * nested arrays and a few tensors. */
static bool write_sample(const char *path) {
    struct gguf_writer *w = all_values_writer();
    if (!w) return false;
    char tmpl[300];
    memset(tmpl, 'x', sizeof tmpl - 1);
    tmpl[sizeof tmpl - 1] = 0;
    const char *vocab[] = {"<s>", "</s>", "a", "b", "\xc4\xa0the", "\xff\xfe bad utf8", "\n", "z"};
    bool ok = !gguf_writer_set_str(w, "general.architecture", "llama") &&
              !gguf_writer_set_str(w, "tokenizer.chat_template", tmpl) &&
              !gguf_writer_set_str(w, "weird key\twith tab", "ctl \x01 chars") &&
              !gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", vocab, 8) &&
              !gguf_writer_set_f32(w, "t.nan", NAN);
    int64_t ne[2] = {256, 4};
    if (tensor_type_traits(TENSOR_TYPE_Q4_K))
        ok = ok && !gguf_writer_add_tensor(w, "blk.0.attn_q.weight", TENSOR_TYPE_Q4_K, 2, ne, NULL);
    if (tensor_type_traits(TENSOR_TYPE_F32))
        ok = ok && !gguf_writer_add_tensor(w, "output_norm.weight", TENSOR_TYPE_F32, 1, ne, NULL);
    struct kvik_err err = {0};
    ok = ok && !gguf_writer_write_file(w, path, &err);
    gguf_writer_free(w);
    return ok;
}

TEST(gguf_public_api_and_file_io) {
    char path[128];
    REQUIRE(tmp_path("sample.gguf", path, sizeof path));
    REQUIRE(write_sample(path));
    kvik_gguf *f = NULL;
    char err[256] = "";
    REQUIRE(kvik_gguf_open(path, &f, err, sizeof err) == KVIK_OK);
    CHECK_EQ_INT(kvik_gguf_version(f), 3);
    CHECK(kvik_gguf_n_kv(f) > 40);
    CHECK_STR(kvik_gguf_key(f, 0), "t.u8");
    CHECK(kvik_gguf_key(f, kvik_gguf_n_kv(f)) == NULL);
    if (kvik_gguf_n_tensors(f) == 2) CHECK_STR(kvik_gguf_tensor_name(f, 1), "output_norm.weight");
    CHECK(kvik_gguf_tensor_name(f, -1) == NULL);
    kvik_gguf_close(f);
    CHECK_EQ_INT(kvik_gguf_open("/nonexistent/x.gguf", &f, err, sizeof err), KVIK_ERR_IO);
    CHECK(f == NULL && strstr(err, "/nonexistent/x.gguf") != NULL);
    struct gguf *g = NULL;
    struct kvik_err e = {0};
    CHECK_EQ_INT(gguf_open(g_tmpdir, &g, &e), KVIK_ERR_IO); /* a directory */
    CHECK(g == NULL);
    unlink(path);
}

TEST(gguf_open_vocab_fixtures) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/vocab", test_env("KVIK_FIXTURES"));
    DIR *d = opendir(dir);
    if (!d) {
        test_skip("no $KVIK_FIXTURES/vocab");
        return;
    }
    int files = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 5, ".gguf")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct gguf *g = NULL;
        struct kvik_err err = {0};
        CHECK_MSG(!gguf_open(path, &g, &err), "%s: %s", de->d_name, err.msg);
        if (!g) continue;
        files++;
        CHECK_EQ_INT(gguf_n_tensors(g), 0);
        const struct gguf_value *tokens;
        CHECK(!gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, &err));
        uint64_t total = 0;
        for (uint64_t i = 0; i < gguf_arr_len(tokens); i++) total += gguf_arr_str(tokens, i).len;
        CHECK(gguf_arr_len(tokens) > 1000 && total > gguf_arr_len(tokens));
        struct gguf_str model;
        CHECK(!gguf_get_str(g, "tokenizer.ggml.model", &model, &err) && model.len > 0);
        gguf_close(g);
    }
    closedir(d);
    CHECK(files >= 1);
}

/* kvik info PATH (text and --json) succeeds: exit 0, output, no stderr, valid JSON. */
static void check_info_ok(const char *path) {
    struct run r;
    REQUIRE(run_kvik("info", path, NULL, &r));
    CHECK_MSG(r.status == 0 && r.out_len > 0 && r.err_len == 0, "kvik info %s: status %d, %s",
              path, r.status, r.err);
    CHECK(strstr(r.out, "version:") && strstr(r.out, "metadata:") && strstr(r.out, "tensors:"));
    run_free(&r);
    REQUIRE(run_kvik("info", path, "--json", &r));
    CHECK_MSG(r.status == 0 && r.err_len == 0, "kvik info --json %s: status %d, %s", path,
              r.status, r.err);
    CHECK_MSG(json_valid(r.out, r.out_len), "kvik info --json %s: invalid JSON", path);
    run_free(&r);
    CHECK_MSG(python_json_ok(path) != 0, "python3 rejects the JSON of %s", path);
}

TEST(kvik_info_on_vocab_fixtures) {
    if (!test_env("KVIK_BIN")[0]) {
        test_skip("KVIK_BIN not set");
        return;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/vocab", test_env("KVIK_FIXTURES"));
    DIR *d = opendir(dir);
    if (!d) {
        test_skip("no $KVIK_FIXTURES/vocab");
        return;
    }
    for (struct dirent *de; (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 5, ".gguf")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        check_info_ok(path);
    }
    closedir(d);
}

TEST(kvik_info_on_written_file) {
    if (!test_env("KVIK_BIN")[0]) {
        test_skip("KVIK_BIN not set");
        return;
    }
    char path[128];
    REQUIRE(tmp_path("info.gguf", path, sizeof path));
    REQUIRE(write_sample(path));
    check_info_ok(path);
    struct run r;
    REQUIRE(run_kvik("info", path, NULL, &r));
    CHECK(strstr(r.out, "tokenizer.ggml.tokens") && strstr(r.out, "array[string]") &&
          strstr(r.out, "len 8") && strstr(r.out, ", ...]"));
    CHECK(strstr(r.out, "\xe2\x80\xa6\" (299 bytes)")); /* the long template, cut */
    CHECK(strstr(r.out, "\"weird key\\twith tab\""));
    if (tensor_type_traits(TENSOR_TYPE_Q4_K))
        CHECK(strstr(r.out, "blk.0.attn_q.weight") && strstr(r.out, "Q4_K") &&
              strstr(r.out, "256 x 4"));
    run_free(&r);
    REQUIRE(run_kvik("info", "--json", path, &r)); /* options may come first */
    CHECK(r.status == 0);
    CHECK(strstr(r.out, "\"tokenizer.ggml.tokens\": {\"type\":\"array\",\"elem_type\":\"string\","
                        "\"length\":8,\"head\":[\"<s>\""));
    CHECK(strstr(r.out, "\"t.nan\": {\"type\":\"float32\",\"value\":null}"));
    CHECK(strstr(r.out, "\"\\ufffd\\ufffd bad utf8\""));
    run_free(&r);
    unlink(path);
}

TEST(kvik_info_usage_and_errors) {
    if (!test_env("KVIK_BIN")[0]) {
        test_skip("KVIK_BIN not set");
        return;
    }
    struct run r;
    REQUIRE(run_kvik("info", "--help", NULL, &r));
    CHECK(r.status == 0 && strstr(r.out, "usage: kvik info") && r.err_len == 0);
    run_free(&r);
    REQUIRE(run_kvik("info", NULL, NULL, &r));
    CHECK(r.status == 2 && r.out_len == 0 && !strncmp(r.err, "kvik info: ", 11));
    run_free(&r);
    REQUIRE(run_kvik("info", "--bogus", "x.gguf", &r));
    CHECK(r.status == 2 && !strncmp(r.err, "kvik info: ", 11));
    run_free(&r);
    REQUIRE(run_kvik("info", "a.gguf", "b.gguf", &r));
    CHECK(r.status == 2);
    run_free(&r);
    REQUIRE(run_kvik("info", "/nonexistent/model.gguf", NULL, &r));
    CHECK(r.status == 1 && r.out_len == 0 && !strncmp(r.err, "kvik info: ", 11));
    CHECK(strchr(r.err, '\n') == r.err + r.err_len - 1); /* exactly one line */
    run_free(&r);
}

/* ---- fuzz seeds ------------------------------------------------------------------ */

/* Seeds are small valid files named seed-N.seed (not .gguf: .gitignore
 * ignores those); KVIK_WRITE_FUZZ_SEEDS=DIR rewrites them. */
static struct gguf_writer *seed_writer(int which) {
    struct gguf_writer *w = which == 0 ? all_values_writer() : gguf_writer_new();
    if (!w) return NULL;
    int64_t ne[2] = {32, 2};
    if (which == 1) { /* a tiny "model" */
        gguf_writer_set_str(w, "general.architecture", "llama");
        gguf_writer_set_u32(w, "llama.block_count", 1);
        gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
        const char *toks[] = {"<unk>", "<s>", "</s>", "a", "b"};
        gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
        gguf_writer_set_alignment(w, 64);
        gguf_writer_add_tensor(w, "token_embd.weight", TENSOR_TYPE_Q8_0, 2, ne, NULL);
        gguf_writer_add_tensor(w, "output_norm.weight", TENSOR_TYPE_F32, 1, ne, NULL);
        gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", TENSOR_TYPE_F16, 2, ne, NULL);
    } else if (which == 2) { /* every tensor type, one block each */
        for (int t = 0; t < TENSOR_TYPE_COUNT; t++) {
            const struct type_traits *tt = tensor_type_traits(t);
            if (!tt || !tt->name) continue;
            int64_t n = tt->block_size;
            gguf_writer_add_tensor(w, tt->name, t, 1, &n, NULL);
        }
    }
    return w;
}

TEST(gguf_fuzz_seeds) {
    const char *out_dir = getenv("KVIK_WRITE_FUZZ_SEEDS");
    if (out_dir && tensor_type_traits(TENSOR_TYPE_Q8_0)) {
        for (int i = 0; i < 3; i++) {
            struct gguf_writer *w = seed_writer(i);
            char path[4096];
            snprintf(path, sizeof path, "%s/seed-%d.seed", out_dir, i);
            struct kvik_err err = {0};
            CHECK_MSG(w && !gguf_writer_write_file(w, path, &err), "%s: %s", path, err.msg);
            gguf_writer_free(w);
        }
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/../fuzz/seeds/fuzz_gguf", test_env("KVIK_TEST_DATA"));
    DIR *d = opendir(dir);
    if (!d) {
        test_skip("no tests/fuzz/seeds/fuzz_gguf");
        return;
    }
    for (struct dirent *de; (de = readdir(d));) {
        if (strncmp(de->d_name, "seed-", 5)) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct gguf *g = NULL;
        struct kvik_err err = {0};
        CHECK_MSG(!gguf_open(path, &g, &err), "%s: %s", de->d_name, err.msg);
        gguf_close(g);
    }
    closedir(d);
}
