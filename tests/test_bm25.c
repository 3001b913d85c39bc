/*
 * test_bm25.c — the BM25 index and rank fusion (src/retrieval/bm25.h): the
 * word rule; scores against bm25s's Lucene variant on 60 queries over the
 * 216 texts of tests/data/embed (scripts/gen_bm25_golden.py); deletes,
 * replacements and the rebuild give what an index built afresh over the
 * same texts gives; filters; reciprocal rank fusion by hand.
 */
#include <math.h>
#include <stdlib.h>

#include "convert/json.h"
#include "retrieval/bm25.h"
#include "test.h"

struct words_seen {
    char buf[512];
    size_t len;
};

static void collect(const char *w, size_t n, void *ctx) {
    struct words_seen *s = ctx;
    if (s->len + n + 2 >= sizeof s->buf) return;
    memcpy(s->buf + s->len, w, n);
    s->len += n;
    s->buf[s->len++] = '|';
    s->buf[s->len] = 0;
}

TEST(bm25_word_rule) {
    static const struct {
        const char *text, *want;
        int n;
    } cases[] = {
        {"", "", 0},
        {"  ,.;  ", "", 0},
        {"Hello, World!", "hello|world|", 2},
        {"don't e-mail x2 3.14", "don|t|e|mail|x2|3|14|", 7},
        {"Café ÜBER", "caf\xc3\xa9|\xc3\x9c" "ber|", 2}, /* only ASCII is lowercased */
        {"日本語 テキスト", "日本語|テキスト|", 2},
        {"tab\tnew\nline_under", "tab|new|line|under|", 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct words_seen s = {{0}, 0};
        int64_t n = bm25_words(cases[i].text, strlen(cases[i].text), collect, &s);
        CHECK_MSG(n == cases[i].n, "case %zu: %lld words", i, (long long)n);
        CHECK_STR(s.buf, cases[i].want);
    }
    char longw[200];
    memset(longw, 'q', sizeof longw - 1);
    longw[sizeof longw - 1] = 0;
    struct words_seen s = {{0}, 0};
    CHECK(bm25_words(longw, strlen(longw), collect, &s) == 1 && s.len == BM25_MAX_WORD + 1);
}

/* The texts of tests/data/embed/texts.jsonl; *n of them. */
static char **read_lines_json(const char *rel, int *n, bool object) {
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", test_env("KVIK_TEST_DATA"), rel);
    char *buf = test_slurp(path, &len);
    if (!buf) return NULL;
    int cap = 1;
    for (size_t i = 0; i < len; i++) cap += buf[i] == '\n';
    char **out = calloc((size_t)cap, sizeof *out);
    *n = 0;
    for (char *p = buf; *p;) {
        char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        struct json_value v;
        struct kvik_err err = {0};
        if (json_parse(p, l, &v, &err) != KVIK_OK) break;
        const struct json_value *s = object && v.type == JSON_OBJECT && v.len ? &v.members[0].value : &v;
        if (s->type == JSON_STRING) out[(*n)++] = strdup(s->str);
        json_free(&v);
        if (!nl) break;
        p = nl + 1;
    }
    free(buf);
    return out;
}

static void free_lines(char **l, int n) {
    for (int i = 0; i < n; i++) free(l[i]);
    free(l);
}

TEST(bm25_matches_bm25s) {
    int nt = 0, nq = 0;
    char **texts = read_lines_json("embed/texts.jsonl", &nt, true);
    char **queries = read_lines_json("bm25/queries.txt", &nq, false);
    char path[4096];
    size_t gl;
    snprintf(path, sizeof path, "%s/bm25/golden.jsonl", test_env("KVIK_TEST_DATA"));
    char *golden = test_slurp(path, &gl);
    REQUIRE(texts && queries && golden && nt == 216 && nq == 60);
    struct bm25 *ix = bm25_new(BM25_K1, BM25_B);
    REQUIRE(ix);
    for (int i = 0; i < nt; i++) CHECK(bm25_add(ix, (uint64_t)i, texts[i], strlen(texts[i])) == KVIK_OK);
    CHECK(bm25_count(ix) == nt);
    int worst_q = -1, compared = 0;
    double worst = 0;
    char *p = golden;
    for (int q = 0; q < nq && p; q++) {
        char *nl = strchr(p, '\n');
        struct json_value v;
        struct kvik_err err = {0};
        REQUIRE(json_parse(p, nl ? (size_t)(nl - p) : strlen(p), &v, &err) == KVIK_OK);
        const struct json_value *ids = &v.members[0].value, *sc = &v.members[1].value;
        struct bm25_hit h[10];
        int n = bm25_search(ix, queries[q], strlen(queries[q]), 10, NULL, NULL, h);
        CHECK_MSG(n == (int)ids->len, "query %d '%s': %d hits, bm25s %zu", q, queries[q], n, ids->len);
        for (int i = 0; i < n && i < (int)ids->len; i++) {
            double want = sc->items[i].num, rel = fabs(h[i].score - want) / want;
            if (rel > worst) worst = rel, worst_q = q;
            /* ids agree except where bm25s's float32 scores tie */
            bool tie = (i > 0 && fabs(sc->items[i - 1].num - want) < 1e-4 * want) ||
                       (i + 1 < (int)ids->len && fabs(sc->items[i + 1].num - want) < 1e-4 * want);
            CHECK_MSG(tie || h[i].id == ids->items[i].u, "query %d rank %d: text %llu, bm25s %llu", q, i,
                      (unsigned long long)h[i].id, (unsigned long long)ids->items[i].u);
            compared++;
        }
        json_free(&v);
        p = nl ? nl + 1 : NULL;
    }
    CHECK_MSG(worst < 1e-4, "worst relative score difference %.2g (query %d)", worst, worst_q);
    CHECK(compared > 300);
    bm25_free(ix);
    free(golden);
    free_lines(texts, nt);
    free_lines(queries, nq);
}

static bool odd_only(uint64_t id, void *ctx) {
    (void)ctx;
    return id % 2 == 1;
}

/* Texts of a few words from a small vocabulary, so words repeat. */
static void make_text(uint64_t *st, char *buf, size_t cap) {
    static const char *const w[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
                                    "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi"};
    size_t n = 0;
    int words = 3 + (int)(test_rand_u64(st) % 12);
    for (int i = 0; i < words && n + 12 < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s ", w[test_rand_u64(st) % 16 % (1 + test_rand_u64(st) % 16)]);
    buf[n] = 0;
}

static bool same_results(struct bm25 *a, struct bm25 *b, const char *q, bm25_accept_fn acc) {
    struct bm25_hit ha[20], hb[20];
    int na = bm25_search(a, q, strlen(q), 20, acc, NULL, ha), nb = bm25_search(b, q, strlen(q), 20, acc, NULL, hb);
    if (na != nb || na < 0) return false;
    for (int i = 0; i < na; i++)
        if (ha[i].id != hb[i].id || fabsf(ha[i].score - hb[i].score) > 1e-5f * hb[i].score) return false;
    return true;
}

TEST(bm25_deletes_and_replacements_match_a_fresh_index) {
    enum { N = 3000 };
    static char texts[N][200];
    uint64_t st = 17;
    struct bm25 *ix = bm25_new(BM25_K1, BM25_B);
    REQUIRE(ix);
    for (int i = 0; i < N; i++) {
        make_text(&st, texts[i], sizeof texts[i]);
        REQUIRE(bm25_add(ix, (uint64_t)i, texts[i], strlen(texts[i])) == KVIK_OK);
    }
    /* replace every 3rd, delete most of the rest: past half dead, the postings are rebuilt */
    bool gone[N] = {0};
    for (int i = 0; i < N; i += 3) {
        make_text(&st, texts[i], sizeof texts[i]);
        REQUIRE(bm25_add(ix, (uint64_t)i, texts[i], strlen(texts[i])) == KVIK_OK);
    }
    for (int i = 1; i < N; i += 3) gone[i] = bm25_delete(ix, (uint64_t)i) == KVIK_OK;
    for (int i = 2; i < N; i += 6) gone[i] = bm25_delete(ix, (uint64_t)i) == KVIK_OK;
    CHECK(bm25_delete(ix, 1) == KVIK_ERR_NOT_FOUND);
    CHECK(bm25_delete(ix, N + 5) == KVIK_ERR_NOT_FOUND);
    struct bm25 *fresh = bm25_new(BM25_K1, BM25_B);
    int live = 0;
    for (int i = 0; i < N; i++)
        if (!gone[i]) {
            bm25_add(fresh, (uint64_t)i, texts[i], strlen(texts[i]));
            live++;
        }
    CHECK(bm25_count(ix) == live && bm25_count(fresh) == live);
    const char *qs[] = {"alpha", "beta gamma", "pi pi omicron", "xi nu mu lambda", "unknownword", "alpha zeta eta"};
    for (size_t i = 0; i < sizeof qs / sizeof *qs; i++) {
        CHECK_MSG(same_results(ix, fresh, qs[i], NULL), "'%s'", qs[i]);
        CHECK_MSG(same_results(ix, fresh, qs[i], odd_only), "'%s' filtered", qs[i]);
        struct bm25_hit h[20];
        int n = bm25_search(ix, qs[i], strlen(qs[i]), 20, odd_only, NULL, h);
        for (int k = 0; k < n; k++) CHECK(h[k].id % 2 == 1 && !gone[h[k].id]);
    }
    struct bm25_hit h[5];
    CHECK(bm25_search(ix, "unknownword", 11, 5, NULL, NULL, h) == 0);
    CHECK(bm25_search(ix, "", 0, 5, NULL, NULL, h) == 0);
    bm25_free(ix);
    bm25_free(fresh);
}

TEST(rrf_fuses_by_hand) {
    uint64_t a[] = {1, 2, 3}, b[] = {3, 1, 4};
    const uint64_t *lists[] = {a, b};
    int n[] = {3, 3};
    struct bm25_hit out[8];
    int got = rrf_fuse(lists, n, 2, 60, 8, out);
    REQUIRE(got == 4);
    /* 1: 1/61 + 1/62; 3: 1/63 + 1/61; 2: 1/62; 4: 1/63 */
    CHECK(out[0].id == 1 && out[1].id == 3 && out[2].id == 2 && out[3].id == 4);
    CHECK(fabs(out[0].score - (1.0 / 61 + 1.0 / 62)) < 1e-7);
    CHECK(fabs(out[3].score - 1.0 / 63) < 1e-7);
    CHECK(rrf_fuse(lists, n, 2, 60, 2, out) == 2 && out[1].id == 3);
    int none[] = {0, 0};
    CHECK(rrf_fuse(lists, none, 2, 60, 8, out) == 0);
    /* equal scores: the smaller id first */
    uint64_t c[] = {9}, d[] = {5};
    const uint64_t *tie[] = {c, d};
    int one[] = {1, 1};
    CHECK(rrf_fuse(tie, one, 2, 60, 2, out) == 2 && out[0].id == 5 && out[1].id == 9);
}
