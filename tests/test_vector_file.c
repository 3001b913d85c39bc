/*
 * test_vector_file.c — the vector store's file (src/vector/file.c): a
 * saved store loads back to the same answers for every storage and index,
 * and keeps building the same graph afterwards; a file made for another
 * embedding model is refused; every flipped byte, truncation and stray
 * byte is caught; files whose checksums were fixed up after a change that
 * breaks the graph, the counts or the attributes are refused too; the
 * fuzzer's seeds load.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "vector/vector.h"

enum { FDIM = 24 };

static void rand_vec(uint64_t *st, float *v, int dim) {
    for (int d = 0; d < dim; d++) v[d] = test_rand_uniform(st, -1, 1);
}

/* n vectors with ids 10*i and attributes; every 5th deleted, every 7th
 * replaced (so tombstones and attribute-less nodes are in the file).
 * storage VEC_I8 + 1: int8 rows with F32 copies (rescore). */
static struct vec_store *make_store(int n, int storage, int index, uint64_t seed) {
    struct vec_config c = vec_config_default(FDIM);
    c.storage = storage > VEC_I8 ? VEC_I8 : storage;
    c.rescore = storage > VEC_I8;
    c.index = index;
    c.ef_construction = 64;
    struct kvik_err err = {0};
    struct vec_store *s = vec_store_new(&c, &err);
    if (!s) return NULL;
    uint64_t st = seed;
    float v[FDIM];
    for (int i = 0; i < n; i++) {
        rand_vec(&st, v, FDIM);
        char name[16];
        snprintf(name, sizeof name, "doc-%d", i);
        struct vec_attr a[3] = {{"name", {.type = VEC_STR, .str = name, .len = strlen(name)}},
                                {"n", {.type = VEC_NUM, .num = i * 0.5}},
                                {"even", {.type = VEC_BOOL, .b = i % 2 == 0}}};
        if (vec_add(s, (uint64_t)i * 10, v, a, i % 3 == 0 ? 0 : 3, &err)) break;
    }
    for (int i = 0; i < n; i += 5) vec_delete(s, (uint64_t)i * 10);
    for (int i = 1; i < n; i += 7) {
        rand_vec(&st, v, FDIM);
        vec_add(s, (uint64_t)i * 10, v, NULL, 0, &err);
    }
    return s;
}

static char g_dir[64];

static const char *tmp_file(const char *name) {
    static char path[128];
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/kvik-vecfile-XXXXXX");
        if (!mkdtemp(g_dir)) return NULL;
    }
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

static const struct vec_model MODEL = {"all-minilm-l6-v2", "0123456789abcdef"};

/* Whether a and b answer q alike: the same ids with the same scores. */
static bool same_answers(struct vec_store *a, struct vec_store *b, const float *q, const struct vec_search *p) {
    struct vec_hit ha[20], hb[20];
    struct kvik_err err = {0};
    int na = vec_search(a, q, p, ha, &err), nb = vec_search(b, q, p, hb, &err);
    if (na != nb || na < 0) return false;
    for (int i = 0; i < na; i++)
        if (ha[i].id != hb[i].id || ha[i].score != hb[i].score) return false;
    return true;
}

TEST(vector_file_round_trip) {
    struct vec_filter even = {.op = VEC_EQ, .key = "even", .v = {.type = VEC_BOOL, .b = true}};
    for (int storage = VEC_F32; storage <= VEC_I8 + 1; storage++)
        for (int index = VEC_FLAT; index <= VEC_HNSW; index++) {
            struct vec_store *s = make_store(700, storage, index, 11 + storage);
            REQUIRE(s);
            const char *path = tmp_file("round.kvec");
            struct kvik_err err = {0};
            REQUIRE_MSG(vec_save(s, path, &MODEL, &err) == KVIK_OK, "%s", err.msg);
            struct vec_model got;
            struct vec_store *t = vec_load(path, &MODEL, &got, &err);
            REQUIRE_MSG(t, "storage %d index %d: %s", storage, index, err.msg);
            CHECK_STR(got.id, MODEL.id);
            CHECK_STR(got.hash, MODEL.hash);
            CHECK(vec_count(t) == vec_count(s) && vec_tombstones(t) == vec_tombstones(s));
            CHECK(vec_memory(t) > 0);
            uint64_t st = 99;
            float q[FDIM];
            struct vec_search plain = {.k = 10, .threshold = -INFINITY};
            struct vec_search filt = {.k = 10, .threshold = -INFINITY, .filter = &even};
            struct vec_search exact = {.k = 20, .threshold = 0.1f, .exact = true};
            for (int i = 0; i < 20; i++) {
                rand_vec(&st, q, FDIM);
                CHECK_MSG(same_answers(s, t, q, &plain), "storage %d index %d query %d", storage, index, i);
                CHECK(same_answers(s, t, q, &filt));
                CHECK(same_answers(s, t, q, &exact));
            }
            /* both go on alike: the layer draws continue where they were */
            for (int i = 0; i < 100; i++) {
                rand_vec(&st, q, FDIM);
                CHECK(vec_add(s, 100000 + (uint64_t)i, q, NULL, 0, &err) == KVIK_OK);
                CHECK(vec_add(t, 100000 + (uint64_t)i, q, NULL, 0, &err) == KVIK_OK);
            }
            for (int i = 0; i < 10; i++) {
                rand_vec(&st, q, FDIM);
                CHECK(same_answers(s, t, q, &plain));
            }
            /* saving the loaded store writes the same bytes */
            const char *p2 = tmp_file("again.kvec");
            REQUIRE(vec_save(s, path, &MODEL, &err) == KVIK_OK);
            REQUIRE(vec_save(t, p2, &MODEL, &err) == KVIK_OK);
            size_t n1, n2;
            char *b1 = test_slurp(path, &n1), *b2 = test_slurp(p2, &n2);
            CHECK(b1 && b2 && n1 == n2 && !memcmp(b1, b2, n1));
            free(b1);
            free(b2);
            CHECK(access(tmp_file("round.kvec.tmp"), F_OK) != 0); /* no temporary left */
            vec_store_free(s);
            vec_store_free(t);
        }
}

TEST(vector_file_empty_store) {
    struct vec_config c = vec_config_default(8);
    struct kvik_err err = {0};
    struct vec_store *s = vec_store_new(&c, &err);
    REQUIRE(s);
    const char *path = tmp_file("empty.kvec");
    REQUIRE(vec_save(s, path, NULL, &err) == KVIK_OK);
    struct vec_model got = {{1}, {1}};
    struct vec_store *t = vec_load(path, NULL, &got, &err);
    REQUIRE_MSG(t, "%s", err.msg);
    CHECK(vec_count(t) == 0 && !got.id[0] && !got.hash[0]);
    float q[8] = {1};
    struct vec_hit h[1];
    struct vec_search p = {.k = 1, .threshold = -INFINITY};
    CHECK_EQ_INT(vec_search(t, q, &p, h, &err), 0);
    vec_store_free(s);
    vec_store_free(t);
}

TEST(vector_file_refuses_another_model) {
    struct vec_store *s = make_store(50, VEC_F16, VEC_HNSW, 3);
    REQUIRE(s);
    const char *path = tmp_file("model.kvec");
    struct kvik_err err = {0};
    REQUIRE(vec_save(s, path, &MODEL, &err) == KVIK_OK);
    struct vec_model other = {"bge-small-en", ""}, rehashed = {"all-minilm-l6-v2", "fedcba9876543210"},
                     unhashed = {"all-minilm-l6-v2", ""};
    struct vec_model got;
    CHECK(vec_load(path, &other, &got, &err) == NULL);
    CHECK(err.code == KVIK_ERR_INVALID_ARG && strstr(err.msg, "all-minilm-l6-v2") && strstr(err.msg, "bge-small-en"));
    CHECK_STR(got.id, MODEL.id); /* what the file holds, for the message */
    CHECK(vec_load(path, &rehashed, NULL, &err) == NULL);
    CHECK(err.code == KVIK_ERR_INVALID_ARG && strstr(err.msg, "sha256 0123456789ab") && strstr(err.msg, "fedcba"));
    struct vec_store *t = vec_load(path, &unhashed, NULL, &err); /* no hash to compare: the id decides */
    CHECK(t != NULL);
    vec_store_free(t);
    CHECK((t = vec_load(path, NULL, NULL, &err)) != NULL);
    vec_store_free(t);
    CHECK(vec_load(tmp_file("missing.kvec"), NULL, NULL, &err) == NULL && err.code == KVIK_ERR_IO);
    vec_store_free(s);
}

/* ---- damage ------------------------------------------------------------- */

static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* The section tagged tag in file f: its bytes and size (NULL if absent). */
static uint8_t *section(uint8_t *f, const char *tag, uint64_t *size) {
    uint32_t n = rd32(f + 12), t;
    memcpy(&t, tag, 4);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *e = f + 32 + 24 * i;
        if (rd32(e) != t) continue;
        *size = rd64(e + 16);
        return f + rd64(e + 8);
    }
    return NULL;
}

/* Every checksum of f recomputed, as a forger would. */
static void fix_checksums(uint8_t *f) {
    uint32_t n = rd32(f + 12);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *e = f + 32 + 24 * i;
        wr32(e + 4, crc32c(f + rd64(e + 8), rd64(e + 16)));
    }
    wr32(f + 24, crc32c(f + 32, 24 * (size_t)n));
    wr32(f + 28, crc32c(f, 28));
}

static bool refused(const uint8_t *f, size_t n, const char *want) {
    struct kvik_err err = {0};
    struct vec_store *s = vec_load_memory(f, n, NULL, NULL, &err);
    vec_store_free(s);
    if (s) return false;
    return err.code < 0 && err.msg[0] && (!want || strstr(err.msg, want));
}

TEST(vector_file_every_damage_is_caught) {
    struct vec_store *s = make_store(40, VEC_F32, VEC_HNSW, 5);
    REQUIRE(s);
    const char *path = tmp_file("damage.kvec");
    struct kvik_err err = {0};
    REQUIRE(vec_save(s, path, &MODEL, &err) == KVIK_OK);
    vec_store_free(s);
    size_t n;
    uint8_t *f = (uint8_t *)test_slurp(path, &n);
    REQUIRE(f && n > 1000);
    CHECK(!refused(f, n, NULL));
    int missed = 0;
    for (size_t i = 0; i < n; i++) { /* one bit of every byte */
        f[i] ^= (uint8_t)(1u << (i % 8));
        if (!refused(f, n, NULL)) missed++;
        f[i] ^= (uint8_t)(1u << (i % 8));
    }
    CHECK_MSG(missed == 0, "%d flipped bits loaded", missed);
    for (size_t len = 0; len < n; len += len < 64 ? 1 : 97) CHECK_MSG(refused(f, len, NULL), "cut at %zu", len);
    uint8_t *longer = malloc(n + 8);
    memcpy(longer, f, n);
    memset(longer + n, 0, 8);
    CHECK(refused(longer, n + 8, "truncated"));
    free(longer);
    free(f);
}

/* Changes that keep every checksum right (fixed up after) but break what
 * the parts say of each other. */
TEST(vector_file_inconsistent_files_are_refused) {
    struct vec_store *s = make_store(40, VEC_F32, VEC_HNSW, 5);
    REQUIRE(s);
    const char *path = tmp_file("forged.kvec");
    struct kvik_err err = {0};
    REQUIRE(vec_save(s, path, &MODEL, &err) == KVIK_OK);
    vec_store_free(s);
    size_t n;
    uint8_t *orig = (uint8_t *)test_slurp(path, &n), *f = malloc(n);
    REQUIRE(orig && f);
    uint64_t size = 0;
    enum { CASES = 11 };
    static const char *const want[CASES] = {"links to a node", "links on layer", "above the top layer",
                                            "live twice", "other than 0 or 1", "not finite", "impossible",
                                            "counts do not agree", "attribute", "metric", "MODL"};
    for (int c = 0; c < CASES; c++) {
        memcpy(f, orig, n);
        uint8_t *p;
        switch (c) {
        case 0: /* a link past the last node */
            p = section(f, "LNK0", &size);
            REQUIRE(p && rd32(p) >= 1);
            wr32(p + 4, 40000);
            break;
        case 1: /* more links than the layer holds */
            p = section(f, "LNK0", &size);
            wr32(p, 33);
            break;
        case 2: /* a node above the top layer */
            p = section(f, "LEVL", &size);
            p[3] = 17;
            break;
        case 3: { /* two live nodes with one id */
            p = section(f, "IDS_", &size);
            uint8_t *dead = section(f, "DEAD", &size);
            int a = -1, b = -1;
            for (int i = 0; i < (int)size && b < 0; i++)
                if (!dead[i]) *(a < 0 ? &a : &b) = i;
            REQUIRE(b > a && a >= 0);
            memcpy(p + 8 * b, p + 8 * a, 8);
            break;
        }
        case 4:
            p = section(f, "DEAD", &size);
            p[1] = 2;
            break;
        case 5: {
            p = section(f, "ROWS", &size);
            float nan = NAN;
            memcpy(p + 8, &nan, 4);
            break;
        }
        case 6: /* dimension 0 */
            p = section(f, "META", &size);
            wr32(p, 0);
            break;
        case 7: /* more live nodes than nodes */
            p = section(f, "META", &size);
            memset(p + 48, 0xff, 8);
            break;
        case 8: { /* a key with a NUL in it */
            p = section(f, "ATTR", &size);
            size_t k = 0;
            while (k + 4 < size && rd32(p + k) == 0) k += 4; /* past the nodes without attributes */
            REQUIRE(rd32(p + k) == 3);
            p[k + 8] = 0;  /* the first key's first byte */
            break;
        }
        case 9:
            p = section(f, "META", &size);
            wr32(p + 28, 1);
            break;
        case 10: /* the model id's length past its section */
            p = section(f, "MODL", &size);
            wr32(p, 1000);
            break;
        }
        fix_checksums(f);
        CHECK_MSG(refused(f, n, want[c]), "case %d (%s)", c, want[c]);
    }
    free(f);
    free(orig);
}

/* ---- fuzz seeds --------------------------------------------------------- */

/* KVIK_WRITE_FUZZ_SEEDS=DIR writes small valid files there (seed-N.kvec);
 * every seed in tests/fuzz/seeds/fuzz_vector_file must load. */
TEST(vector_file_fuzz_seeds) {
    const char *out_dir = getenv("KVIK_WRITE_FUZZ_SEEDS");
    if (out_dir) {
        int kinds[3][2] = {{VEC_F32, VEC_HNSW}, {VEC_I8, VEC_HNSW}, {VEC_F16, VEC_FLAT}};
        for (int i = 0; i < 3; i++) {
            struct vec_store *s = make_store(12, kinds[i][0], kinds[i][1], 21 + i);
            char path[4096];
            snprintf(path, sizeof path, "%s/seed-%d.kvec", out_dir, i);
            struct kvik_err err = {0};
            CHECK_MSG(s && !vec_save(s, path, &MODEL, &err), "%s: %s", path, err.msg);
            vec_store_free(s);
        }
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/../fuzz/seeds/fuzz_vector_file", test_env("KVIK_TEST_DATA"));
    DIR *d = opendir(dir);
    if (!d) {
        test_skip("no tests/fuzz/seeds/fuzz_vector_file");
        return;
    }
    int seen = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (strncmp(de->d_name, "seed-", 5)) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct kvik_err err = {0};
        struct vec_store *s = vec_load(path, &MODEL, NULL, &err);
        CHECK_MSG(s, "%s: %s", de->d_name, err.msg);
        vec_store_free(s);
        seen++;
    }
    closedir(d);
    CHECK(seen >= 3);
}
