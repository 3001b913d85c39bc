/*
 * test_safetensors.c — the safetensors reader and its JSON parser. The
 * golden files in tests/data/safetensors/ were written by the safetensors
 * package (scripts/gen_safetensors_ref.py); every tensor's name, dtype,
 * shape, size, bytes (SHA-256) and first value, and every metadata entry,
 * must match EXPECTED. Malformed headers are built in memory, one per rule
 * the reader enforces, and each must fail with its own message.
 */
#include <stdlib.h>
#include <unistd.h>

#include "convert/json.h"
#include "convert/safetensors.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------------ */

/* A file in memory: the 8-byte length, header, then data_len bytes 0..255. */
static uint8_t *build(const char *header, size_t data_len, size_t *size) {
    size_t n = strlen(header);
    *size = 8 + n + data_len;
    uint8_t *b = malloc(*size ? *size : 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(b + 8, header, n);
    for (size_t i = 0; i < data_len; i++) b[8 + n + i] = (uint8_t)i;
    return b;
}

/* Opens buf; checks that it fails with KVIK_ERR_FORMAT and a message holding want. */
static void expect_error(const uint8_t *buf, size_t size, const char *want, const char *what) {
    struct safetensors *st = (struct safetensors *)1;
    struct kvik_err err = {0};
    kvik_status rc = safetensors_open_memory(buf, size, &st, &err);
    CHECK_MSG(rc == KVIK_ERR_FORMAT, "%s: status %d, want FORMAT", what, (int)rc);
    CHECK_MSG(st == NULL, "%s: out not NULL on failure", what);
    CHECK_MSG(strstr(err.msg, want) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, want);
    CHECK_MSG(strchr(err.msg, '\n') == NULL, "%s: message has a newline", what);
    if (rc == KVIK_OK) safetensors_close(st);
}

static void expect_header_error(const char *header, size_t data_len, const char *want) {
    size_t size;
    uint8_t *b = build(header, data_len, &size);
    expect_error(b, size, want, header);
    free(b);
}

static void sha_hex(const void *p, size_t n, char hex[65]) {
    struct sha256 s;
    uint8_t d[32];
    sha256_init(&s);
    sha256_update(&s, p, n);
    sha256_final(&s, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* The first element of t as a double (exact for every dtype the files use). */
static double first_value(const struct safetensors_tensor *t) {
    const uint8_t *p = t->data;
    uint64_t u = 0;
    size_t sz = safetensors_dtype_size(t->dtype);
    for (size_t i = 0; i < sz; i++) u |= (uint64_t)p[i] << (8 * i);
    switch (t->dtype) {
    case SAFETENSORS_F32: return f32_from_bits((uint32_t)u);
    case SAFETENSORS_F16: return fp16_to_fp32((uint16_t)u);
    case SAFETENSORS_BF16: return bf16_to_fp32((uint16_t)u);
    case SAFETENSORS_F64: {
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    case SAFETENSORS_I8: return (int8_t)u;
    case SAFETENSORS_I16: return (int16_t)u;
    case SAFETENSORS_I32: return (int32_t)u;
    case SAFETENSORS_I64: return (double)(int64_t)u;
    default: return (double)u;
    }
}

/* The bytes of golden file `file` (tests/data/safetensors/FILE.hex: the
 * file as hex digits, any white space between them), malloc'd; NULL if
 * it cannot be read or is not hex. */
static uint8_t *golden_bytes(const char *file, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/safetensors/%s.hex", test_env("KVIK_TEST_DATA"), file);
    size_t n;
    char *hex = test_slurp(path, &n);
    uint8_t *b = hex ? malloc(n / 2 + 1) : NULL;
    size_t k = 0;
    int hi = -1;
    for (size_t i = 0; b && i < n; i++) {
        char c = hex[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) {
            if (!strchr(" \t\r\n", c)) free(b), b = NULL;
            continue;
        }
        if (hi < 0) hi = v;
        else b[k++] = (uint8_t)(hi << 4 | v), hi = -1;
    }
    if (b && hi >= 0) free(b), b = NULL;
    free(hex);
    if (!b) test_fail(__FILE__, __LINE__, "%s: missing or not hex", path);
    *len = k;
    return b;
}

/* Golden file `file` written to a temporary file and opened from there
 * (safetensors_open: the file path, mapped); NULL after a failure. */
static struct safetensors *open_golden(const char *file) {
    size_t len;
    uint8_t *b = golden_bytes(file, &len);
    if (!b) return NULL;
    char path[] = "/tmp/kvik-safetensors-XXXXXX";
    int fd = mkstemp(path);
    bool ok = fd >= 0 && write(fd, b, len) == (ssize_t)len;
    if (fd >= 0) close(fd);
    free(b);
    struct safetensors *st = NULL;
    struct kvik_err err = {0};
    if (!ok) test_fail(__FILE__, __LINE__, "cannot write %s", path);
    else if (safetensors_open(path, &st, &err)) test_fail(__FILE__, __LINE__, "%s: %s", file, err.msg);
    unlink(path); /* the mapping stays */
    return st;
}

/* ---- golden files ------------------------------------------------------------- */

TEST(safetensors_golden_files) {
    char path[1024];
    snprintf(path, sizeof path, "%s/safetensors/EXPECTED", test_env("KVIK_TEST_DATA"));
    size_t len;
    char *text = test_slurp(path, &len);
    REQUIRE(text);
    int n_tensor_lines = 0, n_meta_lines = 0, n_files = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        char *f[9] = {0};
        int nf = 0;
        for (char *s = line; nf < 9; nf++) {
            f[nf] = s;
            char *tab = strchr(s, '\t');
            if (!tab) {
                nf++;
                break;
            }
            *tab = '\0';
            s = tab + 1;
        }
        struct safetensors *st = open_golden(f[1]);
        if (!st) continue;
        if (strcmp(f[0], "count") == 0 && nf == 4) {
            n_files++;
            CHECK_EQ_INT(safetensors_n_tensors(st), atoi(f[2]));
            CHECK_EQ_INT(safetensors_n_metadata(st), atoi(f[3]));
            /* Index order is offset order, and the tensors tile the data. */
            uint64_t pos = 0;
            for (int64_t i = 0; i < safetensors_n_tensors(st); i++) {
                const struct safetensors_tensor *t = safetensors_tensor(st, i);
                CHECK_EQ_INT(t->offset, pos);
                pos += t->n_bytes;
                CHECK_EQ_INT(safetensors_find_tensor(st, t->name), i);
            }
            CHECK_EQ_INT(pos, safetensors_data_size(st));
            CHECK(safetensors_tensor(st, -1) == NULL);
            CHECK(safetensors_tensor(st, safetensors_n_tensors(st)) == NULL);
            CHECK(safetensors_find_tensor(st, "no such tensor") == -1);
            CHECK(safetensors_metadata_key(st, safetensors_n_metadata(st)) == NULL);
            CHECK(safetensors_find_metadata(st, "absent") == NULL);
        } else if (strcmp(f[0], "tensor") == 0 && nf == 8) {
            n_tensor_lines++;
            int64_t i = safetensors_find_tensor(st, f[2]);
            CHECK_MSG(i >= 0, "%s: tensor '%s' not found", f[1], f[2]);
            const struct safetensors_tensor *t = safetensors_tensor(st, i);
            if (t) {
                CHECK_MSG(strcmp(t->name, f[2]) == 0, "name %s", t->name);
                CHECK_MSG(strcmp(safetensors_dtype_name(t->dtype), f[3]) == 0, "%s: dtype %s, want %s",
                          f[2], safetensors_dtype_name(t->dtype), f[3]);
                char shape[128] = "-";
                size_t o = 0;
                for (int d = 0; d < t->n_dims; d++)
                    o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%llu", d ? "x" : "",
                                          (unsigned long long)t->shape[d]);
                CHECK_MSG(strcmp(shape, f[4]) == 0, "%s: shape %s, want %s", f[2], shape, f[4]);
                CHECK_EQ_INT(t->n_bytes, atoll(f[5]));
                CHECK_EQ_INT(t->n_bytes, t->n_elems * safetensors_dtype_size(t->dtype));
                char hex[65];
                sha_hex(t->data, t->n_bytes, hex);
                CHECK_MSG(strcmp(hex, f[6]) == 0, "%s: sha256 %s, want %s", f[2], hex, f[6]);
                if (strcmp(f[7], "-") == 0) CHECK_EQ_INT(t->n_elems, 0);
                else CHECK_MSG(first_value(t) == strtod(f[7], NULL), "%s: first %.17g, want %s",
                               f[2], first_value(t), f[7]);
            }
        } else if (strcmp(f[0], "meta") == 0 && nf == 4) {
            n_meta_lines++;
            const char *v = safetensors_find_metadata(st, f[2]);
            CHECK_MSG(v && strcmp(v, f[3]) == 0, "%s: metadata %s = '%s', want '%s'", f[1], f[2],
                      v ? v : "(absent)", f[3]);
        } else {
            test_fail(__FILE__, __LINE__, "bad EXPECTED line starting '%s'", f[0]);
        }
        safetensors_close(st);
    }
    free(text);
    CHECK_EQ_INT(n_files, 3);
    CHECK_EQ_INT(n_tensor_lines, 13);
    CHECK_EQ_INT(n_meta_lines, 2);
}

TEST(safetensors_golden_scalar_and_empty) {
    struct safetensors *st = open_golden("shapes.safetensors");
    REQUIRE(st);
    const struct safetensors_tensor *t = safetensors_tensor(st, safetensors_find_tensor(st, "scalar"));
    REQUIRE(t);
    CHECK_EQ_INT(t->n_dims, 0);
    CHECK_EQ_INT(t->n_elems, 1);
    t = safetensors_tensor(st, safetensors_find_tensor(st, "empty"));
    REQUIRE(t);
    CHECK_EQ_INT(t->n_dims, 2);
    CHECK_EQ_INT(t->shape[0], 0);
    CHECK_EQ_INT(t->shape[1], 3);
    CHECK_EQ_INT(t->n_bytes, 0);
    safetensors_close(st);

    /* The header length and padding as the reference wrote them. */
    st = open_golden("empty.safetensors");
    REQUIRE(st);
    CHECK_EQ_INT(safetensors_header_size(st), 8);
    CHECK_EQ_INT(safetensors_data_size(st), 0);
    CHECK_EQ_INT(safetensors_n_tensors(st), 0);
    safetensors_close(st);
}

TEST(safetensors_accepts_variants) {
    /* Entry order in the JSON is free; zero-size tensors may share an offset;
     * padding with spaces; escapes in names. */
    const char *h = "{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},"
                    "\"z\":{\"shape\":[0],\"dtype\":\"F32\",\"data_offsets\":[2,2]},"
                    "\"y\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[2,2]},"
                    "\"\\u00e9\\ud83d\\ude00\\n\":{\"dtype\":\"I16\",\"shape\":[1],\"data_offsets\":[0,2]}}   ";
    size_t size;
    uint8_t *b = build(h, 4, &size);
    struct safetensors *st = NULL;
    struct kvik_err err = {0};
    CHECK_MSG(safetensors_open_memory(b, size, &st, &err) == KVIK_OK, "%s", err.msg);
    if (st) {
        CHECK_EQ_INT(safetensors_n_tensors(st), 4);
        CHECK(strcmp(safetensors_tensor(st, 0)->name, "\xc3\xa9\xf0\x9f\x98\x80\n") == 0);
        CHECK(strcmp(safetensors_tensor(st, 3)->name, "b") == 0);
        CHECK(safetensors_tensor(st, 3)->data == b + 8 + strlen(h) + 2);
        CHECK(safetensors_find_tensor(st, "z") >= 0 && safetensors_find_tensor(st, "y") >= 0);
        safetensors_close(st);
    }
    free(b);
}

/* ---- malformed input ---------------------------------------------------------- */

#define T1(dt, shape, offs) "{\"t\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" offs "}}"

TEST(safetensors_rejects_malformed_files) {
    /* Too short, header length past the file or the cap, empty header. */
    uint8_t small[16] = {4, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    expect_error(small, 0, "shorter than the 8-byte header length", "empty file");
    expect_error(small, 7, "shorter than the 8-byte header length", "7 bytes");
    expect_error(small, 11, "runs past the end of the file", "N past the end");
    small[0] = 0;
    expect_error(small, 8, "does not start with '{'", "N = 0");
    uint8_t big[16] = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0}; /* 100000001 */
    expect_error(big, sizeof big, "exceeds the limit", "N over the cap");
    uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    expect_error(huge, sizeof huge, "exceeds the limit", "N = 2^64-1");

    /* JSON. */
    expect_header_error("[1,2]", 0, "does not start with '{'");
    expect_header_error("{", 0, "unterminated object");
    expect_header_error("{\"a\":1,}", 0, "expected a string key");
    expect_header_error("{} x", 0, "trailing characters");
    expect_header_error("{}{}", 0, "trailing characters");
    expect_header_error("{\"a\":tru}", 0, "invalid literal");
    expect_header_error("{\"a\":\"\\x\"}", 0, "invalid escape");
    expect_header_error("{\"a\":\"\\ud800\"}", 0, "high surrogate without a low surrogate");
    expect_header_error("{\"a\":\"\\udc00\\ud800\"}", 0, "lone low surrogate");
    expect_header_error("{\"a\":\"\\u12g4\"}", 0, "invalid \\u escape");
    expect_header_error("{\"a\":\"\xc3\x28\"}", 0, "invalid UTF-8");
    expect_header_error("{\"a\":\"\x01\"}", 0, "control character");
    expect_header_error("{\"a\":01}", 0, "leading zero");
    expect_header_error("{\"a\" 1}", 0, "expected ':'");
    char deep[300] = "{\"a\":";
    for (int i = 0; i < 100; i++) strcat(deep, "[");
    expect_header_error(deep, 0, "nesting too deep");

    /* Entries. */
    expect_header_error("{\"t\":[1]}", 0, "not an object");
    expect_header_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "lacks 'data_offsets'");
    expect_header_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
                        "unknown key 'x'");
    expect_header_error("{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                        4, "duplicate key 'dtype'");
    expect_header_error(T1("F31", "[1]", "[0,4]"), 4, "unknown dtype 'F31'");
    expect_header_error(T1("f32", "[1]", "[0,4]"), 4, "unknown dtype 'f32'");
    expect_header_error("{\"t\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype is an integer");
    expect_header_error(T1("F32", "4", "[0,4]"), 4, "shape is an integer, not an array");
    expect_header_error(T1("F32", "[-1]", "[0,4]"), 4, "shape[0] is a negative");
    expect_header_error(T1("F32", "[1.0]", "[0,4]"), 4, "not a non-negative integer");
    expect_header_error(T1("F32", "[1,\"2\"]", "[0,4]"), 4, "shape[1] is a string");
    expect_header_error(T1("F32", "[18446744073709551616]", "[0,4]"), 4, "too large");
    expect_header_error(T1("F32", "[4294967296,4294967296]", "[0,4]"), 4, "element count overflows");
    expect_header_error(T1("F32", "[4611686018427387904]", "[0,4]"), 4, "byte size overflows");
    expect_header_error(T1("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]"), 4, "more than 8");
    expect_header_error(T1("F32", "[1]", "[0]"), 4, "not two non-negative integers");
    expect_header_error(T1("F32", "[1]", "[0,4,8]"), 4, "not two non-negative integers");
    expect_header_error(T1("F32", "[1]", "[-4,0]"), 4, "not two non-negative integers");
    expect_header_error(T1("F32", "[1]", "{}"), 4, "not two non-negative integers");
    expect_header_error(T1("F32", "[0]", "[4,0]"), 4, "begin 4 is past its end 0");
    expect_header_error(T1("F32", "[1]", "[0,4]"), 3, "past the data buffer (3 bytes)");
    expect_header_error(T1("F32", "[1]", "[0,18446744073709551615]"), 4, "past the data buffer");
    expect_header_error(T1("F32", "[2]", "[0,4]"), 4, "span 4 bytes, but F32 of this shape needs 8");
    expect_header_error(T1("F16", "[]", "[0,4]"), 4, "but F16 scalar needs 2");

    /* Layout of the data buffer. */
    expect_header_error(T1("F32", "[1]", "[0,4]"), 6, "2 bytes at the end of the data buffer belong to no tensor");
    expect_header_error("{}", 1, "1 bytes at the end");
    expect_header_error(T1("F32", "[1]", "[2,6]"), 6, "hole of 2 bytes in the data buffer before tensor 't'");
    expect_header_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                        8, "tensor 'b' (bytes 4..8) overlaps tensor 'a'");
    expect_header_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                        8, "overlaps tensor 'a'");
    expect_header_error("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                        "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                        2, "duplicate tensor name 'a'");
    expect_header_error("{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "empty name");
    expect_header_error("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                        "contains a NUL character");

    /* __metadata__. */
    expect_header_error("{\"__metadata__\":[]}", 0, "__metadata__ is an array, not an object");
    expect_header_error("{\"__metadata__\":{\"k\":1}}", 0, "value of 'k' is an integer, not a string");
    expect_header_error("{\"__metadata__\":{\"k\":{}}}", 0, "value of 'k' is an object");
    expect_header_error("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "duplicate __metadata__ key 'k'");
    expect_header_error("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate __metadata__ entry");
    expect_header_error("{\"__metadata__\":{\"k\":\"a\",\"j\":\"b\",\"k\":\"c\"}}", 0,
                        "duplicate __metadata__ key 'k'");
    expect_header_error("{\"__metadata__\":{\"k\":\"a\\u0000\"}}", 0, "contains a NUL character");
}

TEST(safetensors_rejects_truncated_golden_file) {
    size_t len;
    uint8_t *b = golden_bytes("basic.safetensors", &len);
    REQUIRE(b && len > 8);
    /* Every prefix is rejected; none is read past its end (ASan builds check). */
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b, n);
        struct safetensors *st = NULL;
        struct kvik_err err = {0};
        CHECK_MSG(safetensors_open_memory(copy, n, &st, &err) == KVIK_ERR_FORMAT, "prefix %zu accepted", n);
        safetensors_close(st);
        free(copy);
    }
    free(b);
    struct safetensors *st = NULL;
    struct kvik_err err = {0};
    CHECK(safetensors_open("/nonexistent/x.safetensors", &st, &err) == KVIK_ERR_IO);
    CHECK(st == NULL);
}

TEST(safetensors_json_values) {
    struct json_value v;
    struct kvik_err err = {0};
    const char *doc = " [0, 18446744073709551615, 18446744073709551616, -0, 1e2, 2.5, true, false,"
                      " null, \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20ac\\ud834\\udd1e\", {}] ";
    REQUIRE(json_parse(doc, strlen(doc), &v, &err) == KVIK_OK);
    CHECK_EQ_INT(v.type, JSON_ARRAY);
    REQUIRE(v.len == 11);
    CHECK(v.items[0].type == JSON_UINT && v.items[0].u == 0);
    CHECK(v.items[1].type == JSON_UINT && v.items[1].u == UINT64_MAX);
    CHECK_EQ_INT(v.items[2].type, JSON_NUMBER);
    CHECK_EQ_INT(v.items[3].type, JSON_NUMBER);
    CHECK_EQ_INT(v.items[4].type, JSON_NUMBER);
    CHECK_EQ_INT(v.items[5].type, JSON_NUMBER);
    CHECK(v.items[1].num == 18446744073709551615.0 && v.items[2].num == 18446744073709551616.0);
    CHECK(v.items[3].num == 0.0 && v.items[4].num == 100.0 && v.items[5].num == 2.5);
    CHECK_EQ_INT(v.items[6].type, JSON_TRUE);
    CHECK_EQ_INT(v.items[7].type, JSON_FALSE);
    CHECK_EQ_INT(v.items[8].type, JSON_NULL);
    const char *want = "\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e";
    CHECK(v.items[9].type == JSON_STRING && v.items[9].len == strlen(want) &&
          strcmp(v.items[9].str, want) == 0);
    CHECK(v.items[10].type == JSON_OBJECT && v.items[10].len == 0);
    json_free(&v);

    const char *bad[] = {"", " ", "[1 2]", "[1,]", "-", "1.", "1e", ".5", "+1", "'a'", "\"a",
                         "[", "{\"a\"}", "nul", "[1]]", "\"\\ud800\\u0041\"", "/* c */ 1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_MSG(json_parse(bad[i], strlen(bad[i]), &v, &err) == KVIK_ERR_FORMAT, "accepted '%s'", bad[i]);
        CHECK(strstr(err.msg, "at byte") != NULL);
    }
    /* Depth: JSON_MAX_DEPTH nested arrays parse, one more does not. */
    char deep[2 * JSON_MAX_DEPTH + 8];
    for (int extra = 0; extra <= 1; extra++) {
        int n = JSON_MAX_DEPTH + extra;
        for (int i = 0; i < n; i++) deep[i] = '[';
        for (int i = 0; i < n; i++) deep[n + i] = ']';
        kvik_status rc = json_parse(deep, (size_t)(2 * n), &v, &err);
        CHECK_EQ_INT(rc, extra ? KVIK_ERR_FORMAT : KVIK_OK);
        if (!rc) json_free(&v);
    }
}
