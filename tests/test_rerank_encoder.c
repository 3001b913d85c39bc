/*
 * test_rerank_encoder.c — cross-encoders (encoder.h pooling RANK, rerank.h):
 * a Hugging Face BertForSequenceClassification folder made from
 * all-MiniLM-L6-v2's safetensors (its encoder and pooler) and a classifier
 * of one label whose weights follow a formula, converted by kvik convert,
 * then checked against tests/data/rerank (scripts/gen_rerank_golden.py: a
 * NumPy forward pass with Hugging Face tokenizers for the pair ids):
 *  - every pair's ids (longest-first truncation included) and token types;
 *  - every pair's logit, from an F32 and from an F16 file;
 *  - a pair's logit the same alone and in a batch;
 *  - over HTTP, alone (-m) and beside a chat model (--rerank-model):
 *    /v1/rerank's scores are the sigmoid of the reference logits, best
 *    first; the cross-encoder is refused as an embedding model (and by
 *    kvik embed without --pooling).
 */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/convert.h"
#include "model/encoder.h"
#include "serve_harness.h"
#include "test.h"

enum { DIM = 384, MAX_PAIRS = 128 };

/* KVIK_TEST_QUICK (the sanitizer run): the F32 file only, and the server
 * with the cross-encoder alone. */
static bool quick(void) {
    const char *q = getenv("KVIK_TEST_QUICK");
    return q && *q && strcmp(q, "0");
}

/* ---- the golden data ----------------------------------------------------- */

struct pairs {
    int n;
    char *query[MAX_PAIRS], *doc[MAX_PAIRS];
    int32_t *ids[MAX_PAIRS];
    int n_ids[MAX_PAIRS];
    double logit[MAX_PAIRS];
};

static void pairs_free(struct pairs *g) {
    for (int i = 0; i < g->n; i++) {
        free(g->query[i]);
        free(g->doc[i]);
        free(g->ids[i]);
    }
}

/* A copy of string member key of obj, or NULL. */
static char *member(json_t *obj, const char *key) {
    const char *v = json_string_value(json_object_get(obj, key));
    return v ? strdup(v) : NULL;
}

static bool pairs_load(struct pairs *g) {
    memset(g, 0, sizeof *g);
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/rerank/pairs.jsonl", test_env("KVIK_TEST_DATA"));
    char *pj = test_slurp(path, &len);
    snprintf(path, sizeof path, "%s/rerank/ids.txt", test_env("KVIK_TEST_DATA"));
    char *ids = test_slurp(path, &len);
    snprintf(path, sizeof path, "%s/rerank/logits.txt", test_env("KVIK_TEST_DATA"));
    char *lg = test_slurp(path, &len);
    bool ok = pj && ids && lg;
    CHECK_MSG(ok, "tests/data/rerank is readable");
    char *p = pj, *q = ids, *l = lg;
    while (ok && *p && g->n < MAX_PAIRS) {
        char *nl = strchr(p, '\n'), *ql = strchr(q, '\n');
        ok = nl && ql;
        if (!ok) break;
        json_error_t je;
        json_t *v = json_loadb(p, (size_t)(nl - p), 0, &je);
        g->query[g->n] = member(v, "query");
        g->doc[g->n] = member(v, "doc");
        json_decref(v);
        ok = g->query[g->n] && g->doc[g->n];
        CHECK_MSG(ok, "pairs.jsonl line %d parses", g->n + 1);
        if (!ok) {
            g->n++; /* freed with the rest */
            break;
        }
        g->n_ids[g->n] = test_parse_ids(q, ql, 600, &g->ids[g->n]);
        char *e;
        g->logit[g->n] = strtod(l, &e);
        ok = e != l;
        l = e;
        p = nl + 1;
        q = ql + 1;
        g->n++;
    }
    free(pj);
    free(ids);
    free(lg);
    CHECK_MSG(ok && g->n >= 50, "%d pairs read", g->n);
    if (!ok) pairs_free(g);
    return ok;
}

/* ---- the cross-encoder folder --------------------------------------------- */

static void write_file(const char *dir, const char *name, const void *data, size_t len) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    fwrite(data, 1, len, f);
    fclose(f);
}

/* head.safetensors: the classifier of gen_rerank_golden.py (F32). */
static void write_head(const char *dir) {
    char header[256];
    int hl = snprintf(header, sizeof header,
                      "{\"classifier.weight\":{\"dtype\":\"F32\",\"shape\":[1,%d],\"data_offsets\":[0,%d]},"
                      "\"classifier.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%d,%d]}}",
                      DIM, DIM * 4, DIM * 4, DIM * 4 + 4);
    size_t len = 8 + (size_t)hl + (DIM + 1) * 4;
    unsigned char *buf = malloc(len);
    REQUIRE(buf);
    uint64_t h = (uint64_t)hl;
    memcpy(buf, &h, 8);
    memcpy(buf + 8, header, (size_t)hl);
    for (int i = 0; i <= DIM; i++) {
        float v = i < DIM ? (float)(2.0 * sin(0.61 * i + 0.2)) : -0.1f;
        memcpy(buf + 8 + hl + 4 * i, &v, 4);
    }
    write_file(dir, "head.safetensors", buf, len);
    free(buf);
}

static const char CONFIG[] =
    "{\"architectures\":[\"BertForSequenceClassification\"],\"model_type\":\"bert\",\"hidden_size\":384,"
    "\"intermediate_size\":1536,\"num_hidden_layers\":6,\"num_attention_heads\":12,"
    "\"max_position_embeddings\":512,\"vocab_size\":30522,\"type_vocab_size\":2,\"layer_norm_eps\":1e-12,"
    "\"hidden_act\":\"gelu\",\"position_embedding_type\":\"absolute\",\"id2label\":{\"0\":\"LABEL_0\"},"
    "\"label2id\":{\"LABEL_0\":0}}";
static const char INDEX[] =
    "{\"metadata\":{},\"weight_map\":{\"pooler.dense.weight\":\"model.safetensors\","
    "\"classifier.weight\":\"head.safetensors\",\"classifier.bias\":\"head.safetensors\"}}";

/* The folder unpacked into a new temporary dir, with the classifier added
 * and config.json a classifier's; false (skipped) without the archive. */
static bool make_folder(char *dir, size_t len) {
    char zip[4096], cmd[9000], out[256];
    if (!test_cached_model("all-MiniLM-L6-v2.zip", zip, sizeof zip)) return false;
    snprintf(dir, len, "/tmp/kvik-test-xenc-XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK_MSG(false, "mkdtemp");
        return false;
    }
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' '%s' '%s'", zip,
             dir);
    if (test_run_cmd(cmd, out, sizeof out) != 0) {
        CHECK_MSG(false, "unzip %s", zip);
        return false;
    }
    write_file(dir, "config.json", CONFIG, strlen(CONFIG));
    write_file(dir, "model.safetensors.index.json", INDEX, strlen(INDEX));
    write_head(dir);
    return true;
}

static void remove_folder(const char *dir) {
    char cmd[4200], out[64];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    test_run_cmd(cmd, out, sizeof out);
}

static kvik_status convert(const char *dir, const char *out, int ftype, struct kvik_err *err) {
    struct convert_params p;
    convert_params_default(&p);
    p.dir = dir;
    p.out_path = out;
    p.ftype = ftype;
    p.n_threads = 2;
    p.name = "minilm-xenc";
    return convert_hf(&p, err);
}

/* ---- parity ------------------------------------------------------------- */

/* Every pair's logit from the file at path into y[g->n]. */
static void logits_of(const char *path, const struct pairs *g, float *y, bool check_ids) {
    struct encoder *e = NULL;
    struct kvik_err err = {0};
    REQUIRE_MSG(encoder_load(path, &e, &err) == KVIK_OK, "encoder_load: %s", err.msg);
    const struct encoder_hparams *hp = encoder_hparams(e);
    CHECK_EQ_INT(hp->pooling, ENCODER_POOL_RANK);
    CHECK_EQ_INT(hp->n_labels, 1);
    CHECK_EQ_INT(encoder_out_dim(e), 1);
    struct encoder_ctx *ctx = encoder_ctx_new(e, 2, 4096, &err);
    REQUIRE(ctx);
    static int32_t ids[MAX_PAIRS][512];
    static uint8_t types[MAX_PAIRS][512];
    const int32_t *rows[MAX_PAIRS];
    const uint8_t *trows[MAX_PAIRS];
    int n_ids[MAX_PAIRS], bad_ids = 0, bad_types = 0;
    for (int i = 0; i < g->n; i++) {
        int64_t k = encoder_tokenize_pair(e, g->query[i], strlen(g->query[i]), g->doc[i], strlen(g->doc[i]), ids[i],
                                          types[i], 512);
        REQUIRE(k > 0);
        n_ids[i] = (int)k;
        rows[i] = ids[i];
        trows[i] = types[i];
        bool same = k == g->n_ids[i] && !memcmp(ids[i], g->ids[i], (size_t)k * 4);
        bad_ids += !same;
        if (!same && bad_ids <= 3) printf("    pair %d: %lld ids, the reference %d\n", i, (long long)k, g->n_ids[i]);
        int sep = 0;
        while (sep < k && ids[i][sep] != 102) sep++;
        for (int t = 0; t < k; t++) bad_types += types[i][t] != (t <= sep ? 0 : 1);
    }
    if (check_ids) {
        CHECK_MSG(bad_ids == 0, "%d of %d pairs' ids differ from Hugging Face tokenizers'", bad_ids, g->n);
        CHECK_MSG(bad_types == 0, "%d token types differ", bad_types);
    }
    /* batches within the context's 4096 tokens */
    for (int i0 = 0; i0 < g->n;) {
        int nb = 0, tok = 0;
        while (i0 + nb < g->n && tok + n_ids[i0 + nb] <= 4096) tok += n_ids[i0 + nb++];
        REQUIRE_MSG(encoder_embed(ctx, nb, rows + i0, trows + i0, n_ids + i0, ENCODER_POOL_NONE, true, y + i0,
                                  &err) == KVIK_OK, "encoder_embed: %s", err.msg);
        i0 += nb;
    }
    /* one pair alone gives the bits it gave in a batch */
    float one;
    REQUIRE(encoder_embed(ctx, 1, rows + 5, trows + 5, n_ids + 5, ENCODER_POOL_NONE, true, &one, &err) == KVIK_OK);
    CHECK_MSG(!memcmp(&one, &y[5], 4), "pair 5: %.9g alone, %.9g in a batch", one, y[5]);
    /* types 0 everywhere is another input: the logit moves */
    float untyped;
    REQUIRE(encoder_embed(ctx, 1, rows, NULL, n_ids, ENCODER_POOL_NONE, true, &untyped, &err) == KVIK_OK);
    CHECK_MSG(fabsf(untyped - y[0]) > 1e-4f, "token types change the logit (%.6g, %.6g)", untyped, y[0]);
    /* a type past the table is refused */
    uint8_t two[512];
    memcpy(two, types[0], sizeof two);
    two[1] = 2;
    const uint8_t *tr = two;
    CHECK(encoder_embed(ctx, 1, rows, &tr, n_ids, ENCODER_POOL_NONE, true, &one, &err) == KVIK_ERR_INVALID_ARG);
    encoder_ctx_free(ctx);
    encoder_free(e);
}

static double worst(const struct pairs *g, const float *y, int *at) {
    double w = 0;
    for (int i = 0; i < g->n; i++) {
        double d = fabs((double)y[i] - g->logit[i]);
        if (d > w) w = d, *at = i;
    }
    return w;
}

TEST(rerank_cross_encoder_matches_numpy_reference) {
    struct pairs g;
    if (!pairs_load(&g)) return;
    char dir[64], out[128];
    if (!make_folder(dir, sizeof dir)) {
        pairs_free(&g);
        return;
    }
    static const struct {
        int ftype;
        double tol;
    } files[] = {{0, 1e-4}, {1, 1e-2}}; /* F32, F16 */
    double spread = 0;
    for (int i = 1; i < g.n; i++) spread = fmax(spread, fabs(g.logit[i] - g.logit[0]));
    CHECK_MSG(spread > 1.0, "the reference logits spread over %.3f", spread);
    for (size_t f = 0; f < (quick() ? 1 : sizeof files / sizeof files[0]); f++) {
        snprintf(out, sizeof out, "%s/xenc-%d.gguf", dir, files[f].ftype);
        struct kvik_err err = {0};
        REQUIRE_MSG(convert(dir, out, files[f].ftype, &err) == KVIK_OK, "convert: %s", err.msg);
        float y[MAX_PAIRS];
        logits_of(out, &g, y, f == 0);
        int at = 0;
        double w = worst(&g, y, &at);
        printf("    %s: worst |logit - reference| %.2e (pair %d: %.6f vs %.6f)\n", files[f].ftype ? "F16" : "F32",
               w, at, (double)y[at], g.logit[at]);
        CHECK_MSG(w <= files[f].tol, "%s: logit off by %.3g at pair %d (tolerance %.0e)",
                  files[f].ftype ? "F16" : "F32", w, at, files[f].tol);
    }
    remove_folder(dir);
    pairs_free(&g);
}

/* ---- over HTTP ----------------------------------------------------------- */

/* A rerank request for query and pairs' documents [i0, i0 + n). */
static char *rerank_body(const struct pairs *g, int i0, int n) {
    json_t *docs = json_array();
    for (int i = i0; i < i0 + n; i++) json_array_append_new(docs, json_string(g->doc[i]));
    json_t *root = json_pack("{s:s,s:o}", "query", g->query[i0], "documents", docs);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

/* Checks a /v1/rerank reply for pairs [i0, i0 + n) of one query: every
 * document once, best first, each score the sigmoid of its logit. */
static void check_reply(const struct pairs *g, int i0, int n, const char *body, const char *model) {
    json_error_t je;
    json_t *root = json_loads(body ? body : "", 0, &je), *res = json_object_get(root, "results");
    REQUIRE_MSG(json_is_array(res) && (int)json_array_size(res) == n, "results: %.200s", body ? body : "");
    CHECK(json_is_string(json_object_get(root, "model")) &&
          !strcmp(json_string_value(json_object_get(root, "model")), model));
    bool seen[8] = {0};
    double last = 2;
    for (int k = 0; k < n; k++) {
        json_t *x = json_array_get(res, (size_t)k);
        int idx = (int)json_integer_value(json_object_get(x, "index"));
        double sc = json_number_value(json_object_get(x, "relevance_score"));
        REQUIRE(idx >= 0 && idx < n && !seen[idx]);
        seen[idx] = true;
        double want = 1.0 / (1.0 + exp(-g->logit[i0 + idx]));
        CHECK_MSG(fabs(sc - want) < 1e-3, "document %d: score %.6f, the reference's %.6f", idx, sc, want);
        CHECK(sc <= last);
        last = sc;
    }
    json_decref(root);
}

TEST(rerank_cross_encoder_over_http) {
    struct pairs g;
    if (!pairs_load(&g)) return;
    char dir[64], gguf[128], args[4400], chat[4096];
    if (!test_default_model(chat, sizeof chat) || !make_folder(dir, sizeof dir)) {
        pairs_free(&g);
        return;
    }
    snprintf(gguf, sizeof gguf, "%s/xenc.gguf", dir);
    struct kvik_err err = {0};
    REQUIRE_MSG(convert(dir, gguf, 0, &err) == KVIK_OK, "convert: %s", err.msg);
    /* the first three pairs share their query */
    for (int i = 1; i < 3; i++) REQUIRE(!strcmp(g.query[i], g.query[0]));
    char *body = rerank_body(&g, 0, 3);
    struct http_reply r;
    for (int mode = 0; mode < (quick() ? 1 : 2); mode++) {
        if (mode == 0) snprintf(args, sizeof args, "-m %s -t 2", gguf);
        else snprintf(args, sizeof args, "-m %s -t 2 -c 1024 --rerank-model %s", chat, gguf);
        struct serve_proc s;
        if (!serve_start(&s, args, 120)) break;
        CHECK_MSG(http_post(&s, "/v1/rerank", body, &r) == 200, "mode %d: %ld %s", mode, r.status,
                  r.body ? r.body : "");
        check_reply(&g, 0, 3, r.body, "xenc");
        http_reply_free(&r);
        /* the long pairs, one query each, through the truncation */
        for (int i = g.n - 12; i < g.n; i++) {
            char *b = rerank_body(&g, i, 1);
            CHECK(http_post(&s, "/rerank", b, &r) == 200);
            check_reply(&g, i, 1, r.body, "xenc");
            http_reply_free(&r);
            free(b);
        }
        REQUIRE(http_call(&s, "GET", "/v1/models", NULL, NULL, false, 0, &r) == 200);
        CHECK_MSG(r.body && strstr(r.body, "\"xenc\""), "/v1/models lists the reranker: %s", r.body ? r.body : "");
        http_reply_free(&r);
        long st = http_post(&s, "/v1/embeddings", "{\"input\":\"x\",\"model\":\"xenc\"}", &r);
        CHECK_MSG(st == 400, "embeddings from a cross-encoder: %ld", st);
        http_reply_free(&r);
        if (mode == 1) { /* the chat model still chats */
            CHECK(http_post(&s, "/v1/chat/completions",
                            "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":4}", &r) == 200);
            http_reply_free(&r);
        }
        CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
    }
    free(body);
    /* a cross-encoder is not an embedding model */
    char out[256], errs[2048];
    snprintf(args, sizeof args, "serve --port 0 -m %s --embedding-model %s", chat, gguf);
    CHECK(test_run_kvik(args, out, sizeof out, errs, sizeof errs) != 0);
    CHECK_MSG(strstr(errs, "cross-encoder") && strstr(errs, "--rerank-model"), "stderr: %s", errs);
    snprintf(args, sizeof args, "embed -m %s -p hello", gguf);
    CHECK(test_run_kvik(args, out, sizeof out, errs, sizeof errs) != 0);
    CHECK_MSG(strstr(errs, "cross-encoder"), "kvik embed: %s", errs);
    remove_folder(dir);
    pairs_free(&g);
}
