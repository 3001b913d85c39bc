/*
 * test_imatrix_file.c — importance-matrix files: a GGUF round trip, a
 * hand-built legacy file, the weights rule for counted and uncounted
 * matrices, and malformed files rejected with their reason. (Files from
 * llama.cpp's own llama-imatrix are read in test_imatrix.c.)
 */
#include <stdlib.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tensor/tensor.h"
#include "test.h"
#include "tools/imatrix_file.h"

static char *tmp_path(char *buf, size_t n, const char *name) {
    const char *d = getenv("TMPDIR");
    snprintf(buf, n, "%s/kvik-imx-%d-%s", d && *d ? d : "/tmp", (int)getpid(), name);
    return buf;
}

TEST(imatrix_gguf_round_trip) {
    float s0[4] = {1, 2, 3, 4}, s1[6] = {6, 0, 3, 9, 12, 15};
    int64_t c0[1] = {2}, c1[2] = {3, 0};
    struct imatrix_entry e[2] = {
        {.name = "blk.1.ffn_down.weight", .n_cols = 4, .n_mat = 1, .sums = s0, .counts = c0},
        {.name = "blk.0.ffn_up_exps.weight", .n_cols = 3, .n_mat = 2, .sums = s1, .counts = c1},
    };
    char *ds[1] = {"calib.txt"};
    struct imatrix m = {.entries = e, .n_entries = 2, .datasets = ds, .n_datasets = 1,
                        .chunk_count = 7, .chunk_size = 512};
    char path[512];
    struct kvik_err err = {0};
    tmp_path(path, sizeof path, "rt.gguf");
    REQUIRE_MSG(imatrix_save(&m, path, &err) == KVIK_OK, "%s", err.msg);

    /* the file is a plain GGUF with llama.cpp's names and shapes */
    struct gguf *g;
    REQUIRE_MSG(gguf_open(path, &g, &err) == KVIK_OK, "%s", err.msg);
    CHECK(gguf_n_tensors(g) == 4);
    int64_t ti = gguf_find_tensor(g, "blk.0.ffn_up_exps.weight.in_sum2");
    REQUIRE(ti >= 0);
    const struct gguf_tensor *t = gguf_tensor(g, ti);
    CHECK(t->type == TENSOR_TYPE_F32 && t->n_dims == 2 && t->ne[0] == 3 && t->ne[1] == 2);
    /* sorted by name: blk.0 before blk.1 */
    CHECK(!strcmp(gguf_tensor(g, 0)->name, "blk.0.ffn_up_exps.weight.in_sum2"));
    struct gguf_str type;
    CHECK(gguf_get_str(g, "general.type", &type, NULL) == KVIK_OK && type.len == 7 && !memcmp(type.ptr, "imatrix", 7));
    gguf_close(g);

    struct imatrix r;
    REQUIRE_MSG(imatrix_load(path, &r, &err) == KVIK_OK, "%s", err.msg);
    unlink(path);
    CHECK(!r.legacy && r.has_metadata && r.chunk_count == 7 && r.chunk_size == 512);
    CHECK(r.n_datasets == 1 && !strcmp(r.datasets[0], "calib.txt"));
    REQUIRE(r.n_entries == 2);
    const struct imatrix_entry *a = imatrix_find(&r, "blk.1.ffn_down.weight");
    const struct imatrix_entry *b = imatrix_find(&r, "blk.0.ffn_up_exps.weight");
    REQUIRE(a && b && !imatrix_find(&r, "blk.2.ffn_down.weight"));
    CHECK(a->n_cols == 4 && a->n_mat == 1 && a->counts[0] == 2 && !memcmp(a->sums, s0, sizeof s0));
    CHECK(b->n_cols == 3 && b->n_mat == 2 && b->counts[0] == 3 && b->counts[1] == 0);

    float w[4];
    imatrix_weights(a, 0, false, w);
    CHECK(w[0] == 0.5f && w[3] == 2.0f);
    imatrix_weights(b, 0, false, w);
    CHECK(w[0] == 2.0f && w[1] == 0.0f && w[2] == 1.0f);
    imatrix_weights(b, 1, false, w); /* no tokens reached this expert: all ones */
    CHECK(w[0] == 1.0f && w[1] == 1.0f && w[2] == 1.0f);
    imatrix_free(&r);
}

/* Appends n bytes to a growing buffer. */
static void put(uint8_t *buf, size_t *len, const void *p, size_t n) {
    memcpy(buf + *len, p, n);
    *len += n;
}

static void put_i32(uint8_t *buf, size_t *len, int32_t v) { put(buf, len, &v, 4); }

static size_t legacy_file(uint8_t *buf, bool trailer) {
    size_t n = 0;
    float v[3] = {3, 6, 9};
    put_i32(buf, &n, 2);
    put_i32(buf, &n, 12);
    put(buf, &n, "output.wt.b1", 12);
    put_i32(buf, &n, 3); /* ncall */
    put_i32(buf, &n, 3);
    put(buf, &n, v, sizeof v);
    put_i32(buf, &n, 5);
    put(buf, &n, "a.wei", 5);
    put_i32(buf, &n, 0);
    put_i32(buf, &n, 1);
    put(buf, &n, v, 4);
    if (trailer) {
        put_i32(buf, &n, 10);
        put_i32(buf, &n, 4);
        put(buf, &n, "wiki", 4);
    }
    return n;
}

TEST(imatrix_legacy_file) {
    uint8_t buf[256];
    size_t n = legacy_file(buf, true);
    struct imatrix m;
    struct kvik_err err = {0};
    REQUIRE_MSG(imatrix_load_memory(buf, n, &m, &err) == KVIK_OK, "%s", err.msg);
    CHECK(m.legacy && !m.has_metadata && m.chunk_count == 10);
    CHECK(m.n_datasets == 1 && !strcmp(m.datasets[0], "wiki"));
    REQUIRE(m.n_entries == 2);
    CHECK(!strcmp(m.entries[0].name, "a.wei")); /* sorted */
    const struct imatrix_entry *e = imatrix_find(&m, "output.wt.b1");
    REQUIRE(e && e->n_cols == 3 && e->counts[0] == 3);
    float w[3];
    imatrix_weights(e, 0, true, w);
    CHECK(w[0] == 1.0f && w[1] == 2.0f && w[2] == 3.0f);
    imatrix_weights(&m.entries[0], 0, true, w); /* ncall 0: the sums as they are */
    CHECK(w[0] == 3.0f);
    imatrix_free(&m);

    /* without the optional trailer */
    n = legacy_file(buf, false);
    REQUIRE(imatrix_load_memory(buf, n, &m, &err) == KVIK_OK);
    CHECK(m.chunk_count == 0 && m.n_datasets == 0 && m.n_entries == 2);
    imatrix_free(&m);

    /* every truncation before the trailer is an error, never a crash */
    for (size_t cut = 0; cut < n; cut++) {
        struct imatrix t;
        CHECK_MSG(imatrix_load_memory(buf, cut, &t, NULL) == KVIK_ERR_FORMAT, "cut at %zu accepted", cut);
        CHECK(t.n_entries == 0 && t.entries == NULL);
    }
}

/* A GGUF with the given tensors (name, type, ne0, ne1), zero data. */
static size_t gguf_with(void **out, int n, const char *const *names, const int *types, const int64_t (*ne)[2]) {
    struct gguf_writer *w = gguf_writer_new();
    for (int i = 0; i < n; i++) gguf_writer_add_tensor(w, names[i], types[i], 2, ne[i], NULL);
    size_t size = 0;
    gguf_writer_write_memory(w, out, &size, NULL);
    gguf_writer_free(w);
    return size;
}

TEST(imatrix_malformed_gguf) {
    static const struct {
        int n;
        const char *names[2];
        int types[2];
        int64_t ne[2][2];
        const char *want;
    } bad[] = {
        {1, {"w.in_sum2"}, {TENSOR_TYPE_F32}, {{4, 1}}, "no counts"},
        {1, {"w.counts"}, {TENSOR_TYPE_F32}, {{1, 1}}, "no sums"},
        {2, {"w.in_sum2", "w.counts"}, {TENSOR_TYPE_F16, TENSOR_TYPE_F32}, {{4, 1}, {1, 1}}, "must be F32"},
        {2, {"w.in_sum2", "w.counts"}, {TENSOR_TYPE_F32, TENSOR_TYPE_F32}, {{5, 1}, {1, 2}}, "sums for"},
        {1, {"unrelated"}, {TENSOR_TYPE_F32}, {{4, 1}}, "no entries"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *data = NULL;
        size_t size = gguf_with(&data, bad[i].n, bad[i].names, bad[i].types, bad[i].ne);
        REQUIRE(data);
        struct imatrix m;
        struct kvik_err err = {0};
        CHECK_MSG(imatrix_load_memory(data, size, &m, &err) == KVIK_ERR_FORMAT && strstr(err.msg, bad[i].want),
                  "case %zu: '%s'", i, err.msg);
        free(data);
    }
    /* counts that are not token counts */
    void *data = NULL;
    const char *names[2] = {"w.in_sum2", "w.counts"};
    int types[2] = {TENSOR_TYPE_F32, TENSOR_TYPE_F32};
    int64_t ne[2][2] = {{2, 1}, {1, 1}};
    struct gguf_writer *w = gguf_writer_new();
    float sums[2] = {1, 2}, cnt = -3;
    gguf_writer_add_tensor(w, names[0], types[0], 2, ne[0], sums);
    gguf_writer_add_tensor(w, names[1], types[1], 2, ne[1], &cnt);
    size_t size = 0;
    REQUIRE(gguf_writer_write_memory(w, &data, &size, NULL) == KVIK_OK);
    gguf_writer_free(w);
    struct imatrix m;
    struct kvik_err err = {0};
    CHECK(imatrix_load_memory(data, size, &m, &err) == KVIK_ERR_FORMAT && strstr(err.msg, "bad count"));
    free(data);
    CHECK(imatrix_load("/nonexistent/kvik.imatrix", &m, &err) == KVIK_ERR_IO);
}
