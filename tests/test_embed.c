/*
 * test_embed.c — kvik convert on BERT directories and the encoder's
 * embeddings.
 *  - Parity: all-MiniLM-L6-v2 as `kvik pull` converts it, against a NumPy
 *    BERT over the same safetensors with Hugging Face tokenizers' ids
 *    (tests/data/embed, scripts/gen_embed_golden.py): every text's ids
 *    equal, every embedding at cosine >= 0.9999, long texts included.
 *  - The converted vocabulary equals llama.cpp's converter's for the same
 *    WordPiece vocabulary (the ggml-vocab-bert-bge fixture).
 *  - A text's embedding is the same bits alone and in a batch.
 *  - A tiny BERT directory written here converts and embeds; each way of
 *    breaking it (a missing or misshapen tensor, a stray one, a bad dtype,
 *    malformed JSON, holes in the vocabulary) is a clean error and leaves
 *    no output file.
 */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/convert.h"
#include "convert/json.h"
#include "gguf/gguf.h"
#include "model/encoder.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tools/quantize.h"

/* ---- the golden data ----------------------------------------------------- */

struct golden {
    int n;
    char **texts;
    int32_t **ids;
    int *n_ids;
    float *vec; /* [n][384] */
};

static void golden_free(struct golden *g) {
    for (int i = 0; i < g->n; i++) {
        free(g->texts[i]);
        free(g->ids[i]);
    }
    free(g->texts);
    free(g->ids);
    free(g->n_ids);
    free(g->vec);
}

static bool golden_load(struct golden *g, int dim) {
    memset(g, 0, sizeof *g);
    char path[4096];
    size_t tl, il, vl;
    snprintf(path, sizeof path, "%s/embed/texts.jsonl", test_env("KVIK_TEST_DATA"));
    char *texts = test_slurp(path, &tl);
    snprintf(path, sizeof path, "%s/embed/ids.txt", test_env("KVIK_TEST_DATA"));
    char *ids = test_slurp(path, &il);
    snprintf(path, sizeof path, "%s/embed/minilm.f16", test_env("KVIK_TEST_DATA"));
    char *vec = test_slurp(path, &vl);
    bool ok = texts && ids && vec;
    CHECK_MSG(ok, "tests/data/embed is readable");
    int cap = 0;
    for (size_t i = 0; ok && i < tl; i++) cap += texts[i] == '\n';
    g->texts = calloc((size_t)cap + 1, sizeof *g->texts);
    g->ids = calloc((size_t)cap + 1, sizeof *g->ids);
    g->n_ids = calloc((size_t)cap + 1, sizeof *g->n_ids);
    for (char *p = texts, *q = ids; ok && p && *p; g->n++) {
        char *nl = strchr(p, '\n'), *ql = strchr(q, '\n');
        ok = nl && ql;
        if (!ok) break;
        struct json_value v;
        struct kvik_err err = {0};
        ok = json_parse(p, (size_t)(nl - p), &v, &err) == KVIK_OK && v.type == JSON_OBJECT && v.len == 1 &&
             v.members[0].value.type == JSON_STRING;
        CHECK_MSG(ok, "texts.jsonl line %d parses: %s", g->n + 1, err.msg);
        if (!ok) break;
        g->texts[g->n] = strdup(v.members[0].value.str);
        json_free(&v);
        g->n_ids[g->n] = test_parse_ids(q, ql, 600, &g->ids[g->n]);
        p = nl + 1;
        q = ql + 1;
    }
    ok = ok && vl == (size_t)g->n * (size_t)dim * 2;
    CHECK_MSG(ok, "minilm.f16 holds %d vectors of %d", g->n, dim);
    if (ok) {
        g->vec = malloc((size_t)g->n * (size_t)dim * sizeof(float));
        for (size_t i = 0; i < (size_t)g->n * (size_t)dim; i++) {
            uint16_t h;
            memcpy(&h, vec + 2 * i, 2);
            g->vec[i] = fp16_to_fp32(h);
        }
    }
    free(texts);
    free(ids);
    free(vec);
    if (!ok) golden_free(g);
    return ok;
}

static double cosine(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
}

static struct encoder *load_minilm(void) {
    char path[4096];
    if (!test_cached_model("all-MiniLM-L6-v2-F16.gguf", path, sizeof path)) return NULL;
    struct encoder *e = NULL;
    struct kvik_err err = {0};
    CHECK_MSG(encoder_load(path, &e, &err) == KVIK_OK, "encoder_load: %s", err.msg);
    return e;
}

TEST(embed_minilm_matches_numpy_reference) {
    struct encoder *e = load_minilm();
    if (!e) return;
    const struct encoder_hparams *hp = encoder_hparams(e);
    CHECK_EQ_INT(hp->n_embd, 384);
    CHECK_EQ_INT(hp->n_ctx, 512);
    CHECK_EQ_INT(hp->pooling, ENCODER_POOL_MEAN);
    struct golden g;
    if (!golden_load(&g, hp->n_embd)) {
        encoder_free(e);
        return;
    }
    /* the sanitizer and clang runs (KVIK_TEST_QUICK) check every fourth text */
    const char *quick = getenv("KVIK_TEST_QUICK");
    int stride = quick && *quick ? 4 : 1;
    if (stride > 1) {
        int m = 0;
        for (int i = 0; i < g.n; i += stride, m++) {
            char *t = g.texts[m];
            int32_t *d = g.ids[m];
            g.texts[m] = g.texts[i], g.ids[m] = g.ids[i], g.n_ids[m] = g.n_ids[i];
            g.texts[i] = t, g.ids[i] = d;
            memmove(g.vec + (size_t)m * hp->n_embd, g.vec + (size_t)i * hp->n_embd, (size_t)hp->n_embd * 4);
        }
        for (int i = m; i < g.n; i++) free(g.texts[i]), free(g.ids[i]);
        g.n = m;
    }
    CHECK_MSG(g.n * stride >= 200, "%d texts", g.n);
    int at_limit = 0, id_mismatch = 0, low = 0;
    double worst = 1;
    int32_t *ids = malloc((size_t)g.n * (size_t)hp->n_ctx * sizeof *ids);
    int *n_ids = malloc((size_t)g.n * sizeof *n_ids);
    for (int i = 0; i < g.n; i++) {
        int32_t *r = ids + (size_t)i * (size_t)hp->n_ctx;
        int64_t n = encoder_tokenize(e, g.texts[i], strlen(g.texts[i]), r, hp->n_ctx);
        n_ids[i] = (int)n;
        bool same = n == g.n_ids[i] && !memcmp(r, g.ids[i], (size_t)n * sizeof *r);
        if (!same && id_mismatch++ < 5)
            test_fail(__FILE__, __LINE__, "text %d: %lld ids, Hugging Face %d (first differing text: %.60s)", i,
                      (long long)n, g.n_ids[i], g.texts[i]);
        at_limit += n == hp->n_ctx;
    }
    CHECK_MSG(at_limit * stride >= 10, "%d texts reach the 512-position limit", at_limit);
    struct kvik_err err = {0};
    enum { BATCH = 8 };
    struct encoder_ctx *ctx = encoder_ctx_new(e, 2, BATCH * hp->n_ctx, &err);
    REQUIRE_MSG(ctx, "encoder_ctx_new: %s", err.msg);
    float *out = malloc((size_t)BATCH * (size_t)hp->n_embd * sizeof *out);
    for (int i0 = 0; i0 < g.n; i0 += BATCH) {
        int nb = g.n - i0 < BATCH ? g.n - i0 : BATCH;
        const int32_t *rows[BATCH];
        for (int b = 0; b < nb; b++) rows[b] = ids + (size_t)(i0 + b) * (size_t)hp->n_ctx;
        REQUIRE_MSG(encoder_embed(ctx, nb, rows, NULL, n_ids + i0, ENCODER_POOL_NONE, true, out, &err) == KVIK_OK,
                    "encoder_embed: %s", err.msg);
        for (int b = 0; b < nb; b++) {
            double c = cosine(out + (size_t)b * (size_t)hp->n_embd, g.vec + (size_t)(i0 + b) * (size_t)hp->n_embd,
                              hp->n_embd);
            if (c < worst) worst = c;
            if (c < 0.9999 && low++ < 5)
                test_fail(__FILE__, __LINE__, "text %d: cosine %.6f to the reference (%.60s)", i0 + b, c,
                          g.texts[i0 + b]);
        }
    }
    printf("    %d texts (%d at 512 positions): ids equal to Hugging Face's, worst cosine %.7f\n", g.n, at_limit,
           worst);
    free(out);
    free(ids);
    free(n_ids);
    encoder_ctx_free(ctx);
    golden_free(&g);
    encoder_free(e);
}

TEST(embed_same_bits_alone_and_in_a_batch) {
    struct encoder *e = load_minilm();
    if (!e) return;
    const struct encoder_hparams *hp = encoder_hparams(e);
    static const char longer[] = "A much longer sentence about quantized inference engines and the memory "
                                 "bandwidth they are bound by.";
    const char *texts[] = {"The cat sat on the mat.", longer, "", "日本語", "short"};
    enum { N = 5 };
    int32_t ids[N][64];
    const int32_t *rows[N];
    int n_ids[N];
    for (int i = 0; i < N; i++) {
        /* a buffer shorter than n_ctx is refused */
        CHECK(encoder_tokenize(e, texts[i], strlen(texts[i]), ids[i], 64) == KVIK_ERR_INVALID_ARG);
        int32_t *big = malloc((size_t)hp->n_ctx * sizeof *big);
        n_ids[i] = (int)encoder_tokenize(e, texts[i], strlen(texts[i]), big, hp->n_ctx);
        REQUIRE(n_ids[i] >= 2 && n_ids[i] <= 64);
        memcpy(ids[i], big, (size_t)n_ids[i] * sizeof *big);
        free(big);
        rows[i] = ids[i];
        CHECK_EQ_INT(ids[i][0], 101);
        CHECK_EQ_INT(ids[i][n_ids[i] - 1], 102);
    }
    struct kvik_err err = {0};
    struct encoder_ctx *ctx = encoder_ctx_new(e, 2, N * 64, &err);
    REQUIRE(ctx);
    float all[N][384], one[384], raw[384], cls[384];
    REQUIRE(hp->n_embd == 384);
    REQUIRE(encoder_embed(ctx, N, rows, NULL, n_ids, ENCODER_POOL_NONE, true, &all[0][0], &err) == KVIK_OK);
    for (int i = 0; i < N; i++) {
        REQUIRE(encoder_embed(ctx, 1, &rows[i], NULL, &n_ids[i], ENCODER_POOL_NONE, true, one, &err) == KVIK_OK);
        CHECK_MSG(!memcmp(one, all[i], sizeof one), "text %d: the same bits alone as in a batch of %d", i, N);
        double norm = 0;
        for (int k = 0; k < 384; k++) norm += (double)one[k] * one[k];
        CHECK_MSG(fabs(norm - 1) < 1e-5, "text %d: unit length (%.7f)", i, norm);
    }
    /* unnormalised mean pooling, once normalised, is the normalised one */
    REQUIRE(encoder_embed(ctx, 1, &rows[1], NULL, &n_ids[1], ENCODER_POOL_MEAN, false, raw, &err) == KVIK_OK);
    CHECK(cosine(raw, all[1], 384) > 0.999999);
    double rn = 0;
    for (int k = 0; k < 384; k++) rn += (double)raw[k] * raw[k];
    CHECK(fabs(rn - 1) > 1e-3);
    /* CLS pooling is another vector */
    REQUIRE(encoder_embed(ctx, 1, &rows[1], NULL, &n_ids[1], ENCODER_POOL_CLS, true, cls, &err) == KVIK_OK);
    CHECK(cosine(cls, all[1], 384) < 0.999);
    /* bad input is refused */
    int32_t bad = 1 << 20;
    const int32_t *brow = &bad;
    int one_id = 1, zero = 0;
    CHECK(encoder_embed(ctx, 1, &brow, NULL, &one_id, ENCODER_POOL_NONE, true, one, &err) == KVIK_ERR_INVALID_ARG);
    CHECK(encoder_embed(ctx, 1, &rows[0], NULL, &zero, ENCODER_POOL_NONE, true, one, &err) == KVIK_ERR_INVALID_ARG);
    CHECK(encoder_embed(ctx, 1, &rows[0], NULL, &n_ids[0], 9, true, one, &err) == KVIK_ERR_INVALID_ARG);
    encoder_ctx_free(ctx);
    encoder_free(e);
}

/* The bert-bge fixture is llama.cpp's conversion of the same 30522-token
 * uncased WordPiece vocabulary. */
TEST(convert_bert_vocab_matches_llamacpp) {
    char path[4096], ref[4096];
    if (!test_cached_model("all-MiniLM-L6-v2-F16.gguf", path, sizeof path)) return;
    snprintf(ref, sizeof ref, "%s/vocab/ggml-vocab-bert-bge.gguf", test_env("KVIK_FIXTURES"));
    if (access(ref, R_OK)) {
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return;
    }
    struct gguf *a = NULL, *b = NULL;
    struct kvik_err err = {0};
    REQUIRE(gguf_open(path, &a, &err) == KVIK_OK && gguf_open(ref, &b, &err) == KVIK_OK);
    static const char *const keys[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type"};
    for (int k = 0; k < 2; k++) {
        const struct gguf_value *va = gguf_kv_value(a, gguf_find_key(a, keys[k]));
        const struct gguf_value *vb = gguf_kv_value(b, gguf_find_key(b, keys[k]));
        REQUIRE(va && vb);
        REQUIRE(gguf_arr_len(va) == 30522 && gguf_arr_len(vb) == 30522);
        int64_t diff = 0;
        for (uint64_t i = 0; i < 30522; i++) {
            struct gguf_value ea, eb;
            REQUIRE(gguf_arr_elem(va, i, &ea) && gguf_arr_elem(vb, i, &eb));
            if (k == 0) {
                struct gguf_str sa = gguf_arr_str(va, i), sb = gguf_arr_str(vb, i);
                diff += sa.len != sb.len || memcmp(sa.ptr, sb.ptr, sa.len);
            } else {
                int64_t ia, ib;
                REQUIRE(gguf_value_to_i64(&ea, &ia) && gguf_value_to_i64(&eb, &ib));
                diff += ia != ib;
            }
        }
        CHECK_MSG(diff == 0, "%s: %lld entries differ from llama.cpp's", keys[k], (long long)diff);
    }
    static const char *const ids[] = {"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
                                      "tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
                                      "tokenizer.ggml.mask_token_id", "bert.context_length",
                                      "bert.embedding_length", "bert.feed_forward_length",
                                      "bert.attention.head_count"};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        uint32_t x = 0, y = 1;
        CHECK_MSG(gguf_get_u32(a, ids[k], &x, &err) == KVIK_OK && gguf_get_u32(b, ids[k], &y, &err) == KVIK_OK &&
                      x == y, "%s: %u and llama.cpp's %u", ids[k], x, y);
    }
    uint32_t pooling = 0;
    CHECK(gguf_get_u32(a, "bert.pooling_type", &pooling, &err) == KVIK_OK && pooling == 1);
    gguf_close(a);
    gguf_close(b);
}

/* ---- a tiny BERT directory ------------------------------------------------ */

enum { TD = 8, TFF = 16, TVOCAB = 12, TCTX = 16, TLAYERS = 2 };

struct st_entry {
    char name[96];
    const char *dtype;
    int64_t rows, cols; /* cols 0: a vector */
};

static int64_t st_count(const struct st_entry *e) { return e->cols ? e->rows * e->cols : e->rows; }

/* Writes a safetensors file of the entries, values from a fixed sequence. */
static void write_safetensors(const char *path, const struct st_entry *e, int n) {
    char header[16384];
    size_t at = 0, off = 0;
    at += (size_t)snprintf(header + at, sizeof header - at, "{");
    for (int i = 0; i < n; i++) {
        size_t es = !strcmp(e[i].dtype, "F32") || !strcmp(e[i].dtype, "I32") ? 4 : 2;
        size_t bytes = (size_t)st_count(&e[i]) * es;
        if (e[i].cols)
            at += (size_t)snprintf(header + at, sizeof header - at,
                                   "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", e[i].name, e[i].dtype, (long long)e[i].rows, (long long)e[i].cols,
                                   off, off + bytes);
        else
            at += (size_t)snprintf(header + at, sizeof header - at,
                                   "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", e[i].name, e[i].dtype, (long long)e[i].rows, off, off + bytes);
        off += bytes;
    }
    at += (size_t)snprintf(header + at, sizeof header - at, "}");
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    uint64_t hl = at;
    fwrite(&hl, 8, 1, f);
    fwrite(header, 1, at, f);
    uint64_t seed = 7;
    for (int i = 0; i < n; i++) {
        bool f32 = !strcmp(e[i].dtype, "F32") || !strcmp(e[i].dtype, "I32");
        for (int64_t k = 0; k < st_count(&e[i]); k++) {
            float v = test_rand_uniform(&seed, -0.5f, 0.5f);
            if (strstr(e[i].name, "LayerNorm.weight")) v += 1.0f;
            if (f32) fwrite(&v, 4, 1, f);
            else {
                uint16_t h = fp32_to_fp16(v);
                fwrite(&h, 2, 1, f);
            }
        }
    }
    fclose(f);
}

static int tiny_entries(struct st_entry *e, const char *dtype) {
    int n = 0;
    struct st_entry base[] = {{"embeddings.word_embeddings.weight", "", TVOCAB, TD},
                              {"embeddings.position_embeddings.weight", "", TCTX, TD},
                              {"embeddings.token_type_embeddings.weight", "", 2, TD},
                              {"embeddings.LayerNorm.weight", "", TD, 0},
                              {"embeddings.LayerNorm.bias", "", TD, 0},
                              {"embeddings.position_ids", "", TCTX, 0}};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) e[n++] = base[i];
    static const struct {
        const char *name;
        int rows, cols;
    } per[] = {{"attention.self.query", TD, TD},   {"attention.self.key", TD, TD},
               {"attention.self.value", TD, TD},   {"attention.output.dense", TD, TD},
               {"attention.output.LayerNorm", TD, 0}, {"intermediate.dense", TFF, TD},
               {"output.dense", TD, TFF},          {"output.LayerNorm", TD, 0}};
    for (int l = 0; l < TLAYERS; l++)
        for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
            struct st_entry w = {"", "", per[k].rows, per[k].cols}, b = {"", "", per[k].rows, 0};
            snprintf(w.name, sizeof w.name, "encoder.layer.%d.%s.weight", l, per[k].name);
            snprintf(b.name, sizeof b.name, "encoder.layer.%d.%s.bias", l, per[k].name);
            e[n++] = w;
            e[n++] = b;
        }
    for (int i = 0; i < n; i++) e[i].dtype = !strcmp(e[i].name, "embeddings.position_ids") ? "F32" : dtype;
    return n;
}

static void write_text(const char *dir, const char *name, const char *text) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
}

static const char TINY_CONFIG[] =
    "{\"model_type\":\"bert\",\"hidden_size\":8,\"intermediate_size\":16,\"num_hidden_layers\":2,"
    "\"num_attention_heads\":2,\"max_position_embeddings\":16,\"vocab_size\":12,\"type_vocab_size\":2,"
    "\"layer_norm_eps\":1e-12,\"hidden_act\":\"gelu\"}";
static const char TINY_TOKENIZER[] =
    "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"[MASK]\":4,"
    "\"hello\":5,\"world\":6,\"##s\":7,\"a\":8,\"b\":9,\"##b\":10,\".\":11}},"
    "\"added_tokens\":[{\"id\":0,\"content\":\"[PAD]\",\"special\":true},{\"id\":1,\"content\":\"[UNK]\","
    "\"special\":true},{\"id\":2,\"content\":\"[CLS]\",\"special\":true},{\"id\":3,\"content\":\"[SEP]\","
    "\"special\":true},{\"id\":4,\"content\":\"[MASK]\",\"special\":true}]}";
static const char TINY_TOKCFG[] = "{\"unk_token\":\"[UNK]\",\"sep_token\":\"[SEP]\",\"pad_token\":\"[PAD]\","
                                  "\"cls_token\":\"[CLS]\",\"mask_token\":\"[MASK]\"}";

static void tiny_dir(char *dir, size_t len, const char *dtype) {
    snprintf(dir, len, "/tmp/kvik-test-convert-XXXXXX");
    REQUIRE(mkdtemp(dir));
    write_text(dir, "config.json", TINY_CONFIG);
    write_text(dir, "tokenizer.json", TINY_TOKENIZER);
    write_text(dir, "tokenizer_config.json", TINY_TOKCFG);
    struct st_entry e[64];
    int n = tiny_entries(e, dtype);
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_safetensors(path, e, n);
}

static void rm_dir(const char *dir) {
    static const char *const files[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                        "model.safetensors", "out.gguf", "out.gguf.tmp", "out.gguf.f32.tmp"};
    char p[4200];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

static kvik_status convert_tiny(const char *dir, int ftype, struct kvik_err *err) {
    char out[4200];
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    unlink(out);
    struct convert_params p;
    convert_params_default(&p);
    p.dir = dir;
    p.out_path = out;
    p.ftype = ftype;
    p.n_threads = 1;
    return convert_hf(&p, err);
}

TEST(convert_tiny_bert_converts_and_embeds) {
    const char *dtypes[] = {"F32", "F16", "BF16"};
    for (int k = 0; k < 3; k++) {
        char dir[64], out[200];
        tiny_dir(dir, sizeof dir, dtypes[k]);
        snprintf(out, sizeof out, "%s/out.gguf", dir);
        int ftypes[] = {QUANT_FTYPE_F32, QUANT_FTYPE_F16, QUANT_FTYPE_Q8_0};
        for (int f = 0; f < 3; f++) {
            struct kvik_err err = {0};
            CHECK_MSG(convert_tiny(dir, ftypes[f], &err) == KVIK_OK, "%s -> %s: %s", dtypes[k],
                      quant_ftype_name(ftypes[f]), err.msg);
            struct encoder *e = NULL;
            REQUIRE_MSG(encoder_load(out, &e, &err) == KVIK_OK, "encoder_load: %s", err.msg);
            const struct encoder_hparams *hp = encoder_hparams(e);
            CHECK(hp->n_layer == TLAYERS && hp->n_embd == TD && hp->n_ff == TFF && hp->n_ctx == TCTX &&
                  hp->n_vocab == TVOCAB && hp->n_head == 2);
            int32_t ids[TCTX];
            int64_t n = encoder_tokenize(e, "hello worlds", 12, ids, TCTX);
            CHECK(n == 5 && ids[0] == 2 && ids[1] == 5 && ids[2] == 6 && ids[3] == 7 && ids[4] == 3);
            /* past the positions: the first n_ctx - 2 tokens between [CLS] and [SEP] */
            const char *longer = "a a a a a a a a a a a a a a a a a a a a";
            n = encoder_tokenize(e, longer, strlen(longer), ids, TCTX);
            CHECK(n == TCTX && ids[0] == 2 && ids[1] == 8 && ids[TCTX - 2] == 8 && ids[TCTX - 1] == 3);
            struct encoder_ctx *ctx = encoder_ctx_new(e, 1, TCTX, &err);
            REQUIRE(ctx);
            float v[TD];
            const int32_t *row = ids;
            int ni = (int)n;
            CHECK(encoder_embed(ctx, 1, &row, NULL, &ni, ENCODER_POOL_NONE, true, v, &err) == KVIK_OK);
            double norm = 0;
            for (int i = 0; i < TD; i++) norm += (double)v[i] * v[i];
            CHECK_MSG(fabs(norm - 1) < 1e-5 && isfinite(norm), "unit vector (%f)", norm);
            encoder_ctx_free(ctx);
            encoder_free(e);
        }
        rm_dir(dir);
    }
}

/* Breaks the tiny directory one way; the conversion fails with want in the
 * message and leaves no output. */
static void expect_convert_error(const char *what, kvik_status code, const char *want, const char *config,
                                 const char *tokenizer, const struct st_entry *entries, int n_entries) {
    char dir[64], out[200];
    tiny_dir(dir, sizeof dir, "F32");
    if (config) write_text(dir, "config.json", config);
    if (tokenizer) write_text(dir, "tokenizer.json", tokenizer);
    if (entries) {
        char path[200];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        write_safetensors(path, entries, n_entries);
    }
    struct kvik_err err = {0};
    kvik_status st = convert_tiny(dir, QUANT_FTYPE_F16, &err);
    CHECK_MSG(st == code, "%s: status %d, want %d (%s)", what, (int)st, (int)code, err.msg);
    CHECK_MSG(strstr(err.msg, want) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, want);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    CHECK_MSG(access(out, F_OK) != 0, "%s: no output file", what);
    rm_dir(dir);
}

TEST(convert_malformed_directories_are_clean_errors) {
    struct st_entry e[64];
    int n = tiny_entries(e, "F32");
    expect_convert_error("bad JSON", KVIK_ERR_FORMAT, "config.json", "{\"model_type\": bert}", NULL, NULL, 0);
    expect_convert_error("not an object", KVIK_ERR_FORMAT, "not a JSON object", "[1, 2]", NULL, NULL, 0);
    expect_convert_error("unknown family", KVIK_ERR_UNSUPPORTED, "model_type gpt_neox",
                         "{\"model_type\":\"gpt_neox\"}", NULL, NULL, 0);
    expect_convert_error("no width", KVIK_ERR_FORMAT, "hidden_size",
                         "{\"model_type\":\"bert\",\"intermediate_size\":16}", NULL, NULL, 0);
    expect_convert_error("negative width", KVIK_ERR_FORMAT, "hidden_size",
                         "{\"model_type\":\"bert\",\"hidden_size\":-8}", NULL, NULL, 0);
    expect_convert_error("heads do not divide", KVIK_ERR_FORMAT, "inconsistent",
                         "{\"model_type\":\"bert\",\"hidden_size\":8,\"intermediate_size\":16,\"num_hidden_layers\""
                         ":2,\"num_attention_heads\":3,\"max_position_embeddings\":16,\"vocab_size\":12}",
                         NULL, NULL, 0);
    expect_convert_error("another activation", KVIK_ERR_UNSUPPORTED, "hidden_act relu",
                         "{\"model_type\":\"bert\",\"hidden_size\":8,\"intermediate_size\":16,\"num_hidden_layers\""
                         ":2,\"num_attention_heads\":2,\"max_position_embeddings\":16,\"vocab_size\":12,"
                         "\"hidden_act\":\"relu\"}",
                         NULL, NULL, 0);
    expect_convert_error("BPE vocabulary", KVIK_ERR_UNSUPPORTED, "model type BPE",
                         NULL, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", NULL, 0);
    expect_convert_error("a hole in the vocabulary", KVIK_ERR_FORMAT, "no token has id 11", NULL,
                         "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,"
                         "\"[SEP]\":3,\"[MASK]\":4,\"hello\":5,\"world\":6,\"##s\":7,\"a\":8,\"b\":9,\"##b\":10}}}",
                         NULL, 0);
    expect_convert_error("an id twice", KVIK_ERR_FORMAT, "given twice", NULL,
                         "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,"
                         "\"[SEP]\":3,\"[MASK]\":4,\"hello\":5,\"world\":6,\"##s\":7,\"a\":8,\"b\":9,\"##b\":10,"
                         "\"x\":10}}}",
                         NULL, 0);
    expect_convert_error("an id past the embedding", KVIK_ERR_FORMAT, "past the embedding", NULL,
                         "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"[PAD]\":0,\"x\":40}}}", NULL, 0);
    struct st_entry m[64];
    memcpy(m, e, sizeof e);
    m[6].rows = TD + 1; /* blk.0 query weight rows */
    expect_convert_error("a misshapen tensor", KVIK_ERR_FORMAT, "encoder.layer.0.attention.self.query.weight: shape",
                         NULL, NULL, m, n);
    memcpy(m, e, sizeof e);
    expect_convert_error("a missing tensor", KVIK_ERR_FORMAT, "no tensor encoder.layer.1.output.LayerNorm.bias",
                         NULL, NULL, m, n - 1);
    memcpy(m, e, sizeof e);
    m[n] = (struct st_entry){"encoder.layer.0.extra.weight", "F32", 4, 0};
    expect_convert_error("a stray tensor", KVIK_ERR_UNSUPPORTED, "encoder.layer.0.extra.weight has no GGUF",
                         NULL, NULL, m, n + 1);
    memcpy(m, e, sizeof e);
    m[0].dtype = "I32";
    expect_convert_error("an integer matrix", KVIK_ERR_UNSUPPORTED, "dtype I32", NULL, NULL, m, n);
    /* a classifier's config without its head, or with labels that disagree */
    static const char XCONFIG[] =
        "{\"architectures\":[\"BertForSequenceClassification\"],\"model_type\":\"bert\",\"hidden_size\":8,"
        "\"intermediate_size\":16,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"max_position_embeddings\":16,"
        "\"vocab_size\":12,\"type_vocab_size\":2,%s}";
    char cfg[1024];
    snprintf(cfg, sizeof cfg, XCONFIG, "\"id2label\":{\"0\":\"no\",\"1\":\"yes\"}");
    expect_convert_error("a classifier without its head", KVIK_ERR_FORMAT, "pooler.dense.weight", cfg, NULL, NULL, 0);
    snprintf(cfg, sizeof cfg, XCONFIG, "\"num_labels\":3,\"id2label\":{\"0\":\"no\",\"1\":\"yes\"}");
    expect_convert_error("labels that disagree", KVIK_ERR_FORMAT, "3 labels", cfg, NULL, NULL, 0);
    snprintf(cfg, sizeof cfg, XCONFIG, "\"id2label\":{\"0\":\"no\",\"7\":\"yes\"}");
    expect_convert_error("a label id past the labels", KVIK_ERR_FORMAT, "id2label", cfg, NULL, NULL, 0);
    /* a broken safetensors header is the reader's error, with the path */
    char dir[64], path[200];
    tiny_dir(dir, sizeof dir, "F32");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    uint64_t hl = 9;
    fwrite(&hl, 8, 1, f);
    fwrite("{\"a\":{}} ", 1, 9, f);
    fclose(f);
    struct kvik_err err = {0};
    CHECK(convert_tiny(dir, QUANT_FTYPE_F16, &err) == KVIK_ERR_FORMAT && strstr(err.msg, "model.safetensors"));
    rm_dir(dir);
}

TEST(embed_cli) {
    char path[4096];
    if (!test_cached_model("all-MiniLM-L6-v2-F16.gguf", path, sizeof path)) return;
    static char out[65536], errb[4096], args[4300];
    snprintf(args, sizeof args, "embed -m %s -p 'hello world' -p 'second text'", path);
    REQUIRE(test_run_kvik(args, out, sizeof out, errb, sizeof errb) == 0);
    int lines = 0, commas = 0;
    for (char *p = out; *p; p++) lines += *p == '\n', commas += *p == ',';
    CHECK_EQ_INT(lines, 2);
    CHECK_EQ_INT(commas, 2 * 383);
    CHECK(out[0] == '[');
    CHECK(test_run_kvik("embed -p x", out, sizeof out, errb, sizeof errb) == 2);
    snprintf(args, sizeof args, "embed -m %s -p x --pooling max", path);
    CHECK(test_run_kvik(args, out, sizeof out, errb, sizeof errb) == 2 && strstr(errb, "--pooling"));
    char dflt[4096];
    if (test_default_model(dflt, sizeof dflt)) {
        snprintf(args, sizeof args, "embed -m %s -p x", dflt);
        CHECK(test_run_kvik(args, out, sizeof out, errb, sizeof errb) == 1 && strstr(errb, "not an encoder"));
    }
}
