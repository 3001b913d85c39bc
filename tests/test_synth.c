/*
 * test_synth.c — synthetic models (model/synth.h) and the gguf writer's
 * streamed tensors: files of real shapes load in kvik with the shape's
 * hyperparameters, the requested weight types, weights of trained-model
 * magnitude and a working tokenizer; vocabularies are cut (merges stay
 * consistent) or padded (names stay unique); the same seed gives the same
 * bytes whatever the thread count; failures leave no file; the command
 * rejects bad arguments with one line; each family's file has exactly
 * the keys and tensors llama.cpp's conventions give it.
 *
 * Tests that need the default model's vocabulary skip without it; the rest
 * build a small vocabulary with the gguf writer.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "tensor/tensor.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* ---- helpers ------------------------------------------------------------- */

/* A fresh temporary folder (its files are removed by the tests). */
static const char *tmp_dir(char *buf, size_t len) {
    snprintf(buf, len, "/tmp/kvik-synth-test-XXXXXX");
    return mkdtemp(buf);
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* A small shape for fast files. */
static struct synth_shape tiny_shape(int n_vocab, bool tied) {
    return (struct synth_shape){.name = "tiny", .model = "test", .n_layer = 2, .n_embd = 64, .n_ff = 128,
                                .n_head = 4, .n_head_kv = 2, .n_vocab = n_vocab, .n_ctx = 256,
                                .rope_base = 10000.0f, .rms_eps = 1e-5f, .tied_output = tied};
}

/* GPT-2's byte-level alphabet: byte b as UTF-8 of its code point. */
static int byte_char(int b, char *out) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    int cp = b, k = 0;
    if (!printable) {
        for (int c = 0; c < b; c++) k += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE);
        cp = 0x100 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

enum { SMALL_VOCAB = 262 };

/*
 * A small byte-level BPE vocabulary: 0 "<|endoftext|>" (control), 1..256 the
 * bytes, 257..260 "he" "ll" "hell" "hello" with their merges, and 261
 * "<unused_300>", a normal token whose name a padding token would take.
 */
static bool write_small_vocab(const char *path, uint32_t eos_id) {
    struct gguf_writer *w = gguf_writer_new();
    struct gguf_warr *toks = gguf_warr_new(GGUF_TYPE_STRING), *merges = gguf_warr_new(GGUF_TYPE_STRING);
    int32_t types[SMALL_VOCAB];
    float scores[SMALL_VOCAB];
    bool ok = w && toks && merges;
    ok = ok && !gguf_warr_add_str(toks, "<|endoftext|>", 13);
    types[0] = TOKEN_TYPE_CONTROL;
    for (int b = 0; ok && b < 256; b++) {
        char c[2];
        ok = !gguf_warr_add_str(toks, c, (uint64_t)byte_char(b, c));
        types[1 + b] = TOKEN_TYPE_NORMAL;
    }
    static const char *const extra[] = {"he", "ll", "hell", "hello", "<unused_300>"};
    static const char *const rules[] = {"h e", "l l", "he ll", "hell o"};
    for (int i = 0; ok && i < 5; i++) {
        ok = !gguf_warr_add_str(toks, extra[i], strlen(extra[i]));
        types[257 + i] = TOKEN_TYPE_NORMAL;
    }
    for (int i = 0; ok && i < 4; i++) ok = !gguf_warr_add_str(merges, rules[i], strlen(rules[i]));
    for (int i = 0; i < SMALL_VOCAB; i++) scores[i] = -(float)i;
    ok = ok && !gguf_writer_set_str(w, "general.architecture", "llama") &&
         !gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2") &&
         !gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-2") &&
         !gguf_writer_set_arr(w, "tokenizer.ggml.tokens", toks) &&
         !gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, SMALL_VOCAB) &&
         !gguf_writer_set_arr_data(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, SMALL_VOCAB) &&
         !gguf_writer_set_arr(w, "tokenizer.ggml.merges", merges) &&
         !gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 0) &&
         !gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", eos_id) &&
         !gguf_writer_write_file(w, path, NULL);
    gguf_warr_free(toks);
    gguf_warr_free(merges);
    gguf_writer_free(w);
    return ok;
}

/* A temporary folder for the files of a test, and the vocabulary they take:
 * the small one written there, or the default model's. */
struct fixture {
    char dir[64];
    char vocab[4096];
    bool own_vocab;
};

static bool fixture_init(struct fixture *fx, uint32_t eos_id) {
    if (!tmp_dir(fx->dir, sizeof fx->dir)) return false;
    snprintf(fx->vocab, sizeof fx->vocab, "%s/small-vocab.gguf", fx->dir);
    fx->own_vocab = true;
    return write_small_vocab(fx->vocab, eos_id);
}

/* False, with the test skipped, when the default model is not cached. */
static bool fixture_init_default(struct fixture *fx) {
    if (!test_default_model(fx->vocab, sizeof fx->vocab)) return false;
    fx->own_vocab = false;
    if (tmp_dir(fx->dir, sizeof fx->dir)) return true;
    test_fail(__FILE__, __LINE__, "mkdtemp failed");
    return false;
}

static char *fixture_path(const struct fixture *fx, const char *name, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s", fx->dir, name);
    return buf;
}

static void fixture_done(const struct fixture *fx) {
    if (fx->own_vocab) remove(fx->vocab);
    rmdir(fx->dir);
}

/* synth_write to the file `name` of the fixture (path[160] gets its path);
 * false, with a test failure, if it fails. */
static bool fixture_synth(const struct fixture *fx, const char *name, const struct synth_params *p, char *path,
                          struct synth_info *info) {
    struct kvik_err err = {0};
    fixture_path(fx, name, path, 160);
    kvik_status st = synth_write(path, p, info, &err);
    CHECK_MSG(st == KVIK_OK, "synth_write %s (%s): %s", name, tensor_type_name(p->type), err.msg);
    return st == KVIK_OK;
}

/* Opens path and loads its tokenizer; NULL (with a test failure) if either fails. */
static struct tokenizer *load_tokenizer(const char *path, struct gguf **g) {
    struct kvik_err err = {0};
    struct tokenizer *tok = NULL;
    if (gguf_open(path, g, &err) || tokenizer_load(*g, &tok, &err)) {
        test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
        gguf_close(*g);
        *g = NULL;
        return NULL;
    }
    return tok;
}

/* Encodes text with both tokenizers; true if the ids are equal. */
static bool same_encoding(const struct tokenizer *a, const struct tokenizer *b, const char *text) {
    int32_t ia[256], ib[256];
    int64_t na = tokenizer_encode(a, text, strlen(text), false, false, ia, 256);
    int64_t nb = tokenizer_encode(b, text, strlen(text), false, false, ib, 256);
    return na > 0 && na == nb && na <= 256 && !memcmp(ia, ib, sizeof(int32_t) * (size_t)na);
}

/* One forward pass of the first n ids: the last token's logits are finite
 * and not all equal. */
static void check_forward(const struct model *m, const int32_t *ids, int n) {
    struct kvik_err err = {0};
    struct model_ctx *c = model_ctx_new(m, 2, n, 16, &err);
    struct kv_flat kv = {0};
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    int32_t pos[16], seq[16] = {0};
    for (int i = 0; i < n; i++) pos[i] = i;
    struct model_batch b = {.n = n, .tokens = ids, .pos = pos, .seq = seq};
    bool ok = c && logits && !kv_flat_init(&kv, m->hp.n_layer, 1, 16, m->hp.n_head_kv * m->hp.head_dim, TENSOR_TYPE_F32, &err) &&
              !model_forward(c, &kv.base, &b, logits, &err);
    CHECK_MSG(ok, "forward: %s", err.msg);
    if (ok) {
        int finite = 0;
        float lo = logits[0], hi = logits[0];
        for (int v = 0; v < m->hp.n_vocab; v++) {
            finite += isfinite(logits[v]);
            lo = logits[v] < lo ? logits[v] : lo;
            hi = logits[v] > hi ? logits[v] : hi;
        }
        CHECK_EQ_INT(finite, m->hp.n_vocab);
        CHECK(hi > lo && hi - lo < 1e4f);
    }
    kv_flat_free(&kv);
    free(logits);
    model_ctx_free(c);
}

/* RMS of a weight matrix's first rows, dequantized. */
static double matrix_rms(const struct tensor_matrix *w, int rows) {
    float *f = malloc(sizeof(float) * (size_t)w->cols);
    double sum = 0;
    for (int r = 0; f && r < rows; r++) {
        tensor_type_traits(w->type)->to_float((const uint8_t *)w->data + (size_t)r * w->row_bytes, f, w->cols);
        for (int64_t i = 0; i < w->cols; i++) sum += (double)f[i] * f[i];
    }
    free(f);
    return sqrt(sum / ((double)rows * (double)w->cols));
}

/* Reads a whole file (malloc'd); NULL on failure. */
static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    uint8_t *p = NULL;
    if (f && !fseek(f, 0, SEEK_END)) {
        long n = ftell(f);
        rewind(f);
        p = n >= 0 ? malloc((size_t)n + 1) : NULL;
        if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
            free(p);
            p = NULL;
        }
        *len = (size_t)n;
    }
    if (f) fclose(f);
    return p;
}

/* ---- the streamed writer --------------------------------------------------- */

struct fill_log {
    int64_t next_row; /* rows must come in order, without gaps */
    int calls;
    bool fail_at_second;
};

/* Row r of an F32 tensor holds r + i / 4096 at column i. */
static kvik_status fill_rows_f32(void *user, void *dst, int64_t row0, int64_t n_rows, struct kvik_err *err) {
    struct fill_log *log = user;
    if (row0 != log->next_row || ((uintptr_t)dst & 63)) return err_set(err, KVIK_ERR_INVALID_ARG, "out of order");
    if (log->fail_at_second && log->calls == 1) return err_set(err, KVIK_ERR_IO, "fill failed on purpose");
    log->calls++;
    log->next_row += n_rows;
    float *f = dst;
    for (int64_t r = 0; r < n_rows; r++)
        for (int i = 0; i < 1024; i++) f[r * 1024 + i] = (float)(row0 + r) + (float)i / 4096.0f;
    return KVIK_OK;
}

TEST(synth_writer_streams_filled_tensors_in_chunks) {
    struct gguf_writer *w = gguf_writer_new();
    REQUIRE(w);
    struct fill_log log = {0}, small = {0};
    int64_t ne[2] = {1024, 3000}; /* 12 MB: two chunks */
    int64_t ne1[1] = {1024};
    static const float plain[4] = {1, 2, 3, 4};
    int64_t ne_plain[1] = {4};
    CHECK_EQ_INT(gguf_writer_add_tensor_fn(w, "big", TENSOR_TYPE_F32, 2, ne, NULL, NULL), KVIK_ERR_INVALID_ARG);
    REQUIRE(gguf_writer_add_tensor(w, "plain", TENSOR_TYPE_F32, 1, ne_plain, plain) == KVIK_OK);
    REQUIRE(gguf_writer_add_tensor_fn(w, "big", TENSOR_TYPE_F32, 2, ne, fill_rows_f32, &log) == KVIK_OK);
    REQUIRE(gguf_writer_add_tensor_fn(w, "row", TENSOR_TYPE_F32, 1, ne1, fill_rows_f32, &small) == KVIK_OK);
    CHECK_EQ_INT(gguf_writer_add_tensor_fn(w, "row", TENSOR_TYPE_F32, 1, ne1, fill_rows_f32, &small),
                 KVIK_ERR_INVALID_ARG); /* duplicate name */
    void *data = NULL;
    size_t size = 0;
    struct kvik_err err = {0};
    REQUIRE(gguf_writer_write_memory(w, &data, &size, &err) == KVIK_OK);
    CHECK_EQ_INT(log.calls, 2);
    CHECK_EQ_INT(log.next_row, 3000);
    CHECK_EQ_INT(small.calls, 1);
    struct gguf *g = NULL;
    REQUIRE(gguf_open_memory(data, size, &g, &err) == KVIK_OK);
    const struct gguf_tensor *t = gguf_tensor(g, gguf_find_tensor(g, "big"));
    REQUIRE(t && t->n_bytes == 1024u * 3000 * 4);
    int bad = 0;
    for (int64_t r = 0; r < 3000; r += 7) {
        float v[2];
        memcpy(v, (const uint8_t *)t->data + (size_t)(r * 1024 + 5) * 4, sizeof v);
        bad += v[0] != (float)r + 5.0f / 4096.0f || v[1] != (float)r + 6.0f / 4096.0f;
    }
    CHECK_EQ_INT(bad, 0);
    t = gguf_tensor(g, gguf_find_tensor(g, "plain"));
    CHECK(t && !memcmp(t->data, plain, sizeof plain));
    gguf_close(g);
    free(data);

    /* a failing callback ends the write with its status and message */
    log = (struct fill_log){.fail_at_second = true};
    small = (struct fill_log){0};
    CHECK_EQ_INT(gguf_writer_write_memory(w, &data, &size, &err), KVIK_ERR_IO);
    CHECK(strstr(err.msg, "on purpose") != NULL);
    gguf_writer_free(w);
}

/* ---- shapes and types ------------------------------------------------------ */

TEST(synth_shape_table) {
    size_t n;
    const struct synth_shape *s = synth_shapes(&n);
    REQUIRE(n >= 4);
    const struct synth_shape *sm = synth_shape_find("smollm2-135m"), *tl = synth_shape_find("tinyllama-1.1b");
    const struct synth_shape *l1 = synth_shape_find("llama-3.2-1b"), *l8 = synth_shape_find("llama-3-8b");
    REQUIRE(sm && tl && l1 && l8);
    CHECK(synth_shape_find("nope") == NULL && synth_shape_find(NULL) == NULL);
    CHECK(sm->n_embd == 576 && sm->n_ff == 1536 && sm->n_layer == 30 && sm->n_head == 9 && sm->n_head_kv == 3);
    CHECK(sm->n_vocab == 49152 && sm->tied_output && sm->rope_base == 100000.0f);
    CHECK(tl->n_embd == 2048 && tl->n_ff == 5632 && tl->n_layer == 22 && tl->n_head == 32 && tl->n_head_kv == 4);
    CHECK(tl->n_vocab == 32000 && !tl->tied_output && tl->n_ctx == 2048);
    CHECK(l1->n_ff == 8192 && l1->n_layer == 16 && l1->n_head_kv == 8 && l1->n_vocab == 128256);
    CHECK(l1->tied_output && l1->rope_base == 500000.0f);
    CHECK(l8->n_embd == 4096 && l8->n_ff == 14336 && l8->n_layer == 32 && !l8->tied_output);
    /* published parameter counts */
    CHECK(synth_shape_params(sm) > 134000000 && synth_shape_params(sm) < 135000000);
    CHECK(synth_shape_params(tl) > 1100000000 && synth_shape_params(tl) < 1101000000);
    CHECK(synth_shape_params(l8) > 8030000000 && synth_shape_params(l8) < 8031000000);
    for (size_t i = 0; i < n; i++) CHECK(synth_shape_find(s[i].name) == &s[i]);
    /* the other families and the llama 3 rope scaling */
    const struct synth_shape *q05 = synth_shape_find("qwen2.5-0.5b"), *g270 = synth_shape_find("gemma3-270m");
    const struct synth_shape *g1 = synth_shape_find("gemma3-1b"), *phi = synth_shape_find("phi3-mini-4k");
    const struct synth_shape *l31 = synth_shape_find("llama-3.1-8b"), *mis = synth_shape_find("mistral-7b");
    REQUIRE(q05 && g270 && g1 && phi && l31 && mis && synth_shape_find("qwen2.5-1.5b"));
    CHECK(q05->family == SYNTH_FAMILY_QWEN2 && q05->n_embd == 896 && q05->n_head == 14 && q05->n_head_kv == 2);
    CHECK(q05->tied_output && q05->n_vocab == 151936 && q05->rope_base == 1e6f && q05->rms_eps == 1e-6f);
    CHECK(g270->family == SYNTH_FAMILY_GEMMA3 && synth_shape_head_dim(g270) == 256 && g270->n_embd == 640);
    CHECK(g270->sliding_window == 512 && g270->rope_base == 1e6f && g270->rope_base_swa == 10000.0f);
    CHECK(g1->n_layer == 26 && g1->n_embd == 1152 && g1->n_ff == 6912 && g1->n_head_kv == 1);
    CHECK(phi->family == SYNTH_FAMILY_PHI3 && synth_shape_head_dim(phi) == 96 && phi->sliding_window == 2047);
    CHECK(phi->n_vocab == 32064 && !phi->tied_output && phi->n_ctx == 4096);
    CHECK(l1->rope_llama3.factor == 32.0f && l1->head_dim == 64 && l1->n_ctx == 131072);
    CHECK(l31->rope_llama3.factor == 8.0f && l31->rope_llama3.orig_ctx == 8192 && l8->rope_llama3.factor == 0);
    CHECK(l31->rope_llama3.low_freq_factor == 1.0f && l31->rope_llama3.high_freq_factor == 4.0f);
    CHECK(mis->family == SYNTH_FAMILY_LLAMA && mis->n_vocab == 32768 && mis->rope_base == 1e6f);
    CHECK(synth_shape_params(q05) > 494000000 && synth_shape_params(q05) < 494100000);
    CHECK(synth_shape_params(g270) > 268000000 && synth_shape_params(g270) < 268200000);
    CHECK(synth_shape_params(phi) > 3821000000 && synth_shape_params(phi) < 3822000000);
    CHECK(synth_shape_params(mis) > 7248000000 && synth_shape_params(mis) < 7249000000);
    CHECK(synth_shape_params(l1) > 1235800000 && synth_shape_params(l1) < 1235900000);
    /* test shapes: SmolLM2's vocabulary, grouped-query attention */
    static const char *const tiny[] = {"tiny-llama", "tiny-llama3", "tiny-qwen2", "tiny-gemma3", "tiny-phi3"};
    for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++) {
        const struct synth_shape *t = synth_shape_find(tiny[i]);
        REQUIRE(t);
        CHECK(t->n_vocab == 49152 && t->n_head_kv < t->n_head && t->n_embd <= 256);
    }
    CHECK(synth_shape_find("tiny-gemma3")->sliding_window <= 16);
    CHECK_STR(synth_family_name(SYNTH_FAMILY_GEMMA3), "gemma3");
    CHECK(synth_family_name(SYNTH_FAMILY_COUNT) == NULL && synth_family_name(-1) == NULL);
    /* gemma3's layer pattern: five sliding layers, then a global one */
    int sliding = 0;
    for (int il = 0; il < 26; il++) sliding += synth_layer_is_sliding(g1, il);
    CHECK(sliding == 22 && !synth_layer_is_sliding(g1, 5) && !synth_layer_is_sliding(g1, 11) &&
          synth_layer_is_sliding(g1, 0) && synth_layer_is_sliding(g1, 6) && !synth_layer_is_sliding(l1, 0));
}

TEST(synth_types_follow_llama_cpp) {
    CHECK(synth_type_supported(TENSOR_TYPE_F16) && synth_type_supported(TENSOR_TYPE_BF16));
    CHECK(synth_type_supported(TENSOR_TYPE_Q4_0) && synth_type_supported(TENSOR_TYPE_Q2_K));
    CHECK(!synth_type_supported(TENSOR_TYPE_Q8_K) && !synth_type_supported(TENSOR_TYPE_Q8_1));
    CHECK(!synth_type_supported(TENSOR_TYPE_I8) && !synth_type_supported(-1) && !synth_type_supported(99));
    CHECK_EQ_INT(synth_matrix_type(TENSOR_TYPE_Q4_0, 2048, false), TENSOR_TYPE_Q4_0);
    CHECK_EQ_INT(synth_matrix_type(TENSOR_TYPE_Q4_0, 2048, true), TENSOR_TYPE_Q6_K);
    CHECK_EQ_INT(synth_matrix_type(TENSOR_TYPE_Q4_1, 576, true), TENSOR_TYPE_Q8_0);
    CHECK_EQ_INT(synth_matrix_type(TENSOR_TYPE_Q8_0, 2048, true), TENSOR_TYPE_Q8_0);
    CHECK_EQ_INT(synth_matrix_type(TENSOR_TYPE_F16, 2048, true), TENSOR_TYPE_F16);
    CHECK_EQ_INT(synth_matrix_type(TENSOR_TYPE_Q4_K, 576, false), TENSOR_TYPE_Q5_0);
    CHECK_EQ_INT(synth_matrix_type(TENSOR_TYPE_Q4_K, 1536, false), TENSOR_TYPE_Q4_K);
    CHECK_EQ_INT(synth_matrix_type(TENSOR_TYPE_Q6_K, 960, false), TENSOR_TYPE_Q8_0);
}

/* ---- real shapes ------------------------------------------------------------ */

/* Checks a written smollm2-135m file of `type` against the table, the
 * source vocabulary and one forward pass. */
static void check_smollm2_file(const char *path, const char *vocab, int type) {
    const struct synth_shape *s = synth_shape_find("smollm2-135m");
    struct kvik_err err = {0};
    struct model *m = NULL;
    if (model_load(path, &m, &err)) {
        test_fail(__FILE__, __LINE__, "%s: model_load: %s", tensor_type_name(type), err.msg);
        return;
    }
    const struct model_hparams *hp = &m->hp;
    CHECK(hp->n_layer == s->n_layer && hp->n_embd == s->n_embd && hp->n_ff == s->n_ff);
    CHECK(hp->n_head == s->n_head && hp->n_head_kv == s->n_head_kv && hp->n_vocab == s->n_vocab);
    CHECK(hp->n_ctx_train == s->n_ctx && hp->rope_base == s->rope_base && hp->rms_eps == s->rms_eps);
    CHECK(hp->tied_output == s->tied_output && hp->rope_dim == hp->head_dim && hp->head_dim == 64);
    /* types: every matrix as synth_matrix_type says, which is `type` where it fits */
    for (int64_t i = 0; i < gguf_n_tensors(m->file); i++) {
        const struct gguf_tensor *t = gguf_tensor(m->file, i);
        bool norm = strstr(t->name, "norm") != NULL, output = !strcmp(t->name, "token_embd.weight");
        int want = norm ? TENSOR_TYPE_F32 : synth_matrix_type(type, t->ne[0], output);
        CHECK_MSG(t->type == want, "%s: %s is %s, want %s", tensor_type_name(type), t->name,
                  tensor_type_name(t->type), tensor_type_name(want));
        CHECK(t->n_dims == (norm ? 1 : 2));
    }
    CHECK_EQ_INT(m->layers[0].w_down.type, type); /* 1536 fits every block size */
    if (type != TENSOR_TYPE_Q4_K) CHECK_EQ_INT(m->layers[0].wq.type, type);
    /* weights of trained-model magnitude: RMS 1/sqrt(fan_in); norms 1 +- 0.05 */
    double rq = matrix_rms(&m->layers[1].wq, 16) * sqrt(576.0);
    double rd = matrix_rms(&m->layers[1].w_down, 16) * sqrt(1536.0);
    CHECK_MSG(rq > 0.7 && rq < 1.4 && rd > 0.7 && rd < 1.4, "%s: rms x sqrt(fan_in) %.3f %.3f",
              tensor_type_name(type), rq, rd);
    int bad_norm = 0;
    for (int i = 0; i < 576; i++) bad_norm += !(fabsf(m->layers[3].ffn_norm[i] - 1.0f) <= 0.05f);
    CHECK_EQ_INT(bad_norm, 0);
    struct gguf_str name;
    CHECK(gguf_get_str(m->file, "general.name", &name, NULL) == KVIK_OK && name.len > 20 &&
          !memcmp(name.ptr, "synthetic smollm2-135m ", 23));
    /* the tokenizer encodes as the source's does */
    struct gguf *gs = NULL;
    struct tokenizer *tok = NULL, *src = load_tokenizer(vocab, &gs);
    CHECK_MSG(tokenizer_load(m->file, &tok, &err) == KVIK_OK, "tokenizer: %s", err.msg);
    int32_t ids[16];
    if (tok && src) {
        CHECK(same_encoding(tok, src, "Hello world! The year 2024, <|im_start|> caf\xc3\xa9."));
        CHECK_EQ_INT(tokenizer_eos(tok), tokenizer_eos(src));
        int64_t n = tokenizer_encode(tok, "The capital of France is", 24, false, false, ids, 16);
        if (n > 0 && n <= 16) check_forward(m, ids, (int)n);
        else CHECK(n > 0 && n <= 16);
    }
    tokenizer_free(tok);
    tokenizer_free(src);
    gguf_close(gs);
    model_free(m);
}

TEST(synth_smollm2_loads_in_each_type) {
    struct fixture fx;
    char path[160];
    if (!fixture_init_default(&fx)) return;
    static const int types[] = {TENSOR_TYPE_F16, TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q4_K};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        struct synth_params p = {.shape = synth_shape_find("smollm2-135m"), .type = types[i], .seed = 1,
                                 .vocab_path = fx.vocab, .n_threads = 2};
        struct synth_info info;
        if (!fixture_synth(&fx, "smollm2.gguf", &p, path, &info)) continue;
        CHECK_EQ_INT(info.n_tensors, 2 + 9 * 30);
        CHECK_EQ_INT(info.vocab_src, 49152);
        CHECK(info.file_bytes > 60000000);
        check_smollm2_file(path, fx.vocab, types[i]);
        remove(path);
    }
    fixture_done(&fx);
}

/* ---- families ----------------------------------------------------------------- */

/* One key ARCH.SUFFIX the file must have (u32 or f32 value) or lack. */
struct want_key {
    const char *suffix;
    char kind; /* 'u', 'f', or '-' (absent) */
    double v;
};

static void check_keys(const struct gguf *g, const char *arch, const struct want_key *keys, size_t n,
                       const char *shape) {
    for (size_t i = 0; i < n; i++) {
        char key[128];
        snprintf(key, sizeof key, "%s.%s", arch, keys[i].suffix);
        uint32_t u = 0;
        float f = 0;
        if (keys[i].kind == '-') CHECK_MSG(gguf_find_key(g, key) < 0, "%s: %s should be absent", shape, key);
        else if (keys[i].kind == 'u')
            CHECK_MSG(gguf_get_u32(g, key, &u, NULL) == KVIK_OK && u == (uint32_t)keys[i].v, "%s: %s = %u, want %g",
                      shape, key, u, keys[i].v);
        else
            CHECK_MSG(gguf_get_f32(g, key, &f, NULL) == KVIK_OK && f == (float)keys[i].v, "%s: %s = %g, want %g",
                      shape, key, (double)f, keys[i].v);
    }
}

/* The tensor `name` exists with [cols] (rows 0: 1-D, F32) or [cols, rows]
 * of type `type`; returns it, or NULL with a failure. */
static const struct gguf_tensor *want_tensor(const struct gguf *g, const char *name, int64_t cols, int64_t rows,
                                             int type, const char *shape) {
    int64_t i = gguf_find_tensor(g, name);
    const struct gguf_tensor *t = i >= 0 ? gguf_tensor(g, i) : NULL;
    bool ok = t && t->ne[0] == cols && (rows ? t->n_dims == 2 && t->ne[1] == rows && t->type == type
                                             : t->n_dims == 1 && t->type == TENSOR_TYPE_F32);
    CHECK_MSG(ok, "%s: tensor %s missing or not [%lld, %lld] %s", shape, name, (long long)cols, (long long)rows,
              rows ? tensor_type_name(type) : "F32");
    return ok ? t : NULL;
}

/* The llama3 factors, computed in double from the formula of synth.h. */
static double llama3_factor(const struct synth_shape *s, int i) {
    const struct synth_llama3_rope *r = &s->rope_llama3;
    int dim = synth_shape_head_dim(s);
    double freq = pow(s->rope_base, -2.0 * i / dim), wavelen = 2 * M_PI / freq;
    if (wavelen < r->orig_ctx / r->high_freq_factor) return 1.0;
    if (wavelen > r->orig_ctx / r->low_freq_factor) return r->factor;
    double smooth = (r->orig_ctx / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
    return 1.0 / ((1.0 - smooth) / r->factor + smooth);
}

/* A Q8_0 file of shape s: its keys, every tensor (and no other), the
 * biases' and rope factors' values. */
static void check_family_file(const char *path, const struct synth_shape *s) {
    struct gguf *g = NULL;
    struct kvik_err err = {0};
    if (gguf_open(path, &g, &err)) {
        test_fail(__FILE__, __LINE__, "%s: %s", s->name, err.msg);
        return;
    }
    const char *arch = synth_family_name(s->family);
    struct gguf_str a = {0};
    CHECK(gguf_get_str(g, "general.architecture", &a, NULL) == KVIK_OK && a.len == strlen(arch) &&
          !memcmp(a.ptr, arch, a.len));
    struct gguf_str gn = {0};
    char gname[160] = "";
    if (gguf_get_str(g, "general.name", &gn, NULL) == KVIK_OK)
        snprintf(gname, sizeof gname, "%.*s", (int)gn.len, gn.ptr);
    CHECK_MSG(strstr(gname, "synthetic ") == gname && !strstr(gname, "phi3") && !strstr(gname, "phi-3"),
              "%s: general.name '%s'", s->name, gname); /* llama.cpp's Phi-3 token rule (synth.h) */
    int fam = s->family, hd = synth_shape_head_dim(s);
    bool llama = fam == SYNTH_FAMILY_LLAMA, gemma = fam == SYNTH_FAMILY_GEMMA3, phi = fam == SYNTH_FAMILY_PHI3;
    bool longrope = s->longrope.orig_ctx > 0;
    const struct want_key keys[] = {
        {"block_count", 'u', s->n_layer},
        {"context_length", 'u', s->n_ctx},
        {"embedding_length", 'u', s->n_embd},
        {"feed_forward_length", 'u', s->n_ff},
        {"attention.head_count", 'u', s->n_head},
        {"attention.head_count_kv", 'u', s->n_head_kv},
        {"attention.layer_norm_rms_epsilon", 'f', s->rms_eps},
        {"rope.freq_base", 'f', s->rope_base},
        {"rope.freq_base_swa", gemma ? 'f' : '-', s->rope_base_swa},
        {"attention.key_length", s->head_dim || gemma ? 'u' : '-', hd},
        {"attention.value_length", s->head_dim || gemma ? 'u' : '-', hd},
        {"attention.sliding_window", gemma || phi ? 'u' : '-', s->sliding_window},
        {"attention.sliding_window_pattern", '-', 0},
        {"rope.dimension_count", llama || phi ? 'u' : '-', hd},
        {"rope.scaling.original_context_length", phi ? 'u' : '-', longrope ? s->longrope.orig_ctx : s->n_ctx},
        {"rope.scaling.attn_factor", longrope ? 'f' : '-', s->longrope.attn_factor},
        {"rope.scaling.type", '-', 0},
        {"vocab_size", llama ? 'u' : '-', s->n_vocab},
    };
    check_keys(g, arch, keys, sizeof keys / sizeof *keys, s->name);
    int64_t e = s->n_embd, ff = s->n_ff, q = (int64_t)hd * s->n_head, kv = (int64_t)hd * s->n_head_kv;
    int qt = TENSOR_TYPE_Q8_0;
    int64_t n_want = 2 + !s->tied_output + (s->rope_llama3.factor > 0) + 2 * longrope;
    want_tensor(g, "token_embd.weight", e, s->n_vocab, qt, s->name);
    want_tensor(g, "output_norm.weight", e, 0, 0, s->name);
    if (!s->tied_output) want_tensor(g, "output.weight", e, s->n_vocab, qt, s->name);
    CHECK_EQ_INT(gguf_find_tensor(g, "output.weight") < 0, s->tied_output);
    double bias_sq = 0;
    int64_t bias_n = 0;
    for (int l = 0; l < s->n_layer; l++) {
        struct {
            const char *name;
            int64_t cols, rows;
            bool present;
        } ts[] = {
            {"attn_norm.weight", e, 0, true},
            {"attn_q.weight", e, q, !phi},
            {"attn_k.weight", e, kv, !phi},
            {"attn_v.weight", e, kv, !phi},
            {"attn_qkv.weight", e, q + 2 * kv, phi},
            {"attn_q.bias", q, 0, fam == SYNTH_FAMILY_QWEN2},
            {"attn_k.bias", kv, 0, fam == SYNTH_FAMILY_QWEN2},
            {"attn_v.bias", kv, 0, fam == SYNTH_FAMILY_QWEN2},
            {"attn_q_norm.weight", hd, 0, gemma},
            {"attn_k_norm.weight", hd, 0, gemma},
            {"attn_output.weight", q, e, true},
            {"post_attention_norm.weight", e, 0, gemma},
            {"ffn_norm.weight", e, 0, true},
            {"ffn_gate.weight", e, ff, !phi},
            {"ffn_up.weight", e, phi ? 2 * ff : ff, true},
            {"ffn_down.weight", ff, e, true},
            {"post_ffw_norm.weight", e, 0, gemma},
        };
        for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, ts[i].name);
            if (!ts[i].present) {
                CHECK_MSG(gguf_find_tensor(g, name) < 0, "%s: %s should be absent", s->name, name);
                continue;
            }
            n_want++;
            const struct gguf_tensor *t = want_tensor(g, name, ts[i].cols, ts[i].rows, qt, s->name);
            if (t && strstr(name, ".bias")) {
                for (int64_t k = 0; k < t->ne[0]; k++) {
                    float v;
                    memcpy(&v, (const float *)t->data + k, sizeof v);
                    bias_sq += (double)v * v;
                    bias_n++;
                    CHECK(fabsf(v) <= 0.5f);
                }
            }
        }
    }
    if (bias_n) CHECK(sqrt(bias_sq / (double)bias_n) > 0.2); /* uniform in [-0.5, 0.5]: 0.29 */
    if (s->rope_llama3.factor > 0) {
        const struct gguf_tensor *t = want_tensor(g, "rope_freqs.weight", hd / 2, 0, 0, s->name);
        CHECK(gguf_find_tensor(g, "rope_freqs.weight") == 0); /* first, as the converter writes it */
        int bad = 0, scaled = 0;
        for (int i = 0; t && i < hd / 2; i++) {
            float v;
            memcpy(&v, (const float *)t->data + i, sizeof v);
            double want = llama3_factor(s, i);
            bad += fabs(v - want) > 1e-5 * want;
            scaled += v > 1.0f;
        }
        CHECK_MSG(bad == 0, "%s: %d rope factors off the formula", s->name, bad);
        CHECK(scaled > 0 && scaled < hd / 2);
    } else {
        CHECK(gguf_find_tensor(g, "rope_freqs.weight") < 0);
    }
    /* longrope: long then short, first in the file, the values of synth.h */
    static const char *const lr_names[2] = {"rope_factors_long.weight", "rope_factors_short.weight"};
    for (int set = 0; set < 2; set++) {
        if (!longrope) {
            CHECK(gguf_find_tensor(g, lr_names[set]) < 0);
            continue;
        }
        const struct gguf_tensor *t = want_tensor(g, lr_names[set], hd / 2, 0, 0, s->name);
        CHECK(gguf_find_tensor(g, lr_names[set]) == set);
        int bad = 0;
        for (int i = 0; t && i < hd / 2; i++) {
            float v;
            memcpy(&v, (const float *)t->data + i, sizeof v);
            double want = set == 0 ? 1.0 + i * i / 4.0 + (i % 2) / 2.0 : 1.0 + i / 16.0 + (i % 3) / 8.0;
            bad += v != (float)want;
        }
        CHECK_MSG(bad == 0, "%s: %d values of %s off the formula", s->name, bad, lr_names[set]);
    }
    CHECK_EQ_INT(gguf_n_tensors(g), n_want);
    gguf_close(g);
}

TEST(synth_families_follow_llama_cpp_conventions) {
    struct fixture fx;
    char path[160], again[160];
    REQUIRE(fixture_init(&fx, 0));
    static const char *const names[] = {"tiny-llama", "tiny-llama3", "tiny-qwen2", "tiny-gemma3", "tiny-phi3",
                                        "tiny-phi3-longrope", "llama-3.2-1b"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        struct synth_shape s = *synth_shape_find(names[i]);
        s.n_vocab = SMALL_VOCAB; /* the small vocabulary, unpadded */
        if (s.n_embd > 256) s.n_layer = 1, s.n_embd = 256, s.n_ff = 512, s.n_head = 4, s.n_head_kv = 2;
        struct synth_params p = {.shape = &s, .type = TENSOR_TYPE_Q8_0, .seed = 9, .vocab_path = fx.vocab,
                                 .n_threads = 1};
        struct synth_info info;
        if (!fixture_synth(&fx, "family.gguf", &p, path, &info)) continue;
        CHECK_EQ_INT(info.n_params, synth_shape_params(&s));
        check_family_file(path, &s);
        /* the same bytes on another thread count */
        p.n_threads = 2;
        if (fixture_synth(&fx, "family2.gguf", &p, again, &info)) {
            size_t na = 0, nb = 0;
            uint8_t *da = slurp(path, &na), *db = slurp(again, &nb);
            CHECK_MSG(da && db && na == nb && !memcmp(da, db, na), "%s: not deterministic", names[i]);
            free(da), free(db);
            remove(again);
        }
        /* llama files load in kvik with the shape's numbers */
        struct model *m = NULL;
        struct kvik_err err = {0};
        if (s.family == SYNTH_FAMILY_LLAMA) {
            CHECK_MSG(model_load(path, &m, &err) == KVIK_OK, "%s: %s", names[i], err.msg);
            if (m) CHECK(m->hp.head_dim == synth_shape_head_dim(&s) && m->hp.n_ctx_train == s.n_ctx);
            model_free(m);
        }
        /* and the longrope file with its factors, chosen by the context */
        if (s.longrope.orig_ctx > 0) {
            CHECK_MSG(model_load(path, &m, &err) == KVIK_OK, "%s: %s", names[i], err.msg);
            if (m) {
                CHECK_EQ_INT(m->hp.n_ctx_orig, s.longrope.orig_ctx);
                CHECK(m->hp.rope_attn_factor == s.longrope.attn_factor && s.longrope.attn_factor != 1.0f);
                CHECK(m->rope_long && m->rope_short);
                CHECK(model_rope_factors(m, s.longrope.orig_ctx) == m->rope_short);
                CHECK(model_rope_factors(m, s.longrope.orig_ctx + 1) == m->rope_long);
            }
            model_free(m);
        }
        remove(path);
    }
    fixture_done(&fx);
}

TEST(synth_family_shape_checks) {
    struct fixture fx;
    char path[160];
    REQUIRE(fixture_init(&fx, 0));
    fixture_path(&fx, "bad.gguf", path, sizeof path);
    struct kvik_err err = {0};
    struct synth_shape s = *synth_shape_find("tiny-qwen2");
    s.n_vocab = SMALL_VOCAB;
    struct synth_params p = {.shape = &s, .type = TENSOR_TYPE_F16, .vocab_path = fx.vocab, .n_threads = 1};
    s.head_dim = 64; /* qwen2 has no key for a head size other than n_embd / n_head */
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    s.head_dim = 0;
    s.rope_llama3.factor = 8; /* llama3 rope factors belong to the llama family */
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    s = *synth_shape_find("tiny-gemma3");
    s.n_vocab = SMALL_VOCAB;
    s.tied_output = false; /* gemma3 is always tied */
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    s.tied_output = true;
    s.sliding_window = 0;
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    s = *synth_shape_find("tiny-llama3");
    s.n_vocab = SMALL_VOCAB;
    s.rope_llama3.high_freq_factor = s.rope_llama3.low_freq_factor;
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    s.family = SYNTH_FAMILY_COUNT;
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    s = *synth_shape_find("tiny-phi3-longrope");
    s.n_vocab = SMALL_VOCAB;
    s.longrope.orig_ctx = s.n_ctx + 1; /* the original context is not beyond the context */
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    s.longrope.orig_ctx = 256;
    s.longrope.attn_factor = 0;
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    s.longrope.attn_factor = 1.5f;
    s.family = SYNTH_FAMILY_LLAMA; /* longrope belongs to phi3 */
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    CHECK(!file_exists(path));
    fixture_done(&fx);
}

/* ---- vocabularies --------------------------------------------------------- */

/* Merges that name a token the tokenizer does not have. */
static int64_t merges_off_vocab(const struct gguf *g, const struct tokenizer *tok) {
    const struct gguf_value *merges = NULL;
    if (gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, NULL)) return -1;
    int64_t bad = 0;
    for (uint64_t i = 0; i < gguf_arr_len(merges); i++) {
        struct gguf_str m = gguf_arr_str(merges, i);
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        char joined[512];
        size_t la = sp ? (size_t)(sp - m.ptr) : 0, lb = sp ? m.len - la - 1 : 0;
        if (!sp || la + lb > sizeof joined) {
            bad++;
            continue;
        }
        memcpy(joined, m.ptr, la);
        memcpy(joined + la, sp + 1, lb);
        bad += tokenizer_find(tok, m.ptr, la) < 0 || tokenizer_find(tok, sp + 1, lb) < 0 ||
               tokenizer_find(tok, joined, la + lb) < 0;
    }
    return bad;
}

/* The cut file: 32000 tokens, consistent merges, ASCII round trips. */
static void check_cut(const char *path, const struct synth_info *info) {
    struct gguf *g = NULL;
    struct tokenizer *tok = load_tokenizer(path, &g);
    if (!tok) return;
    CHECK_EQ_INT(tokenizer_n_vocab(tok), 32000);
    CHECK_EQ_INT(tokenizer_eos(tok), 2);
    const struct gguf_value *merges = NULL, *types = NULL;
    CHECK(gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types, NULL) == KVIK_OK &&
          gguf_arr_len(types) == 32000);
    CHECK(gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, NULL) == KVIK_OK &&
          (int64_t)gguf_arr_len(merges) == info->merges_kept);
    CHECK_EQ_INT(merges_off_vocab(g, tok), 0);
    /* ASCII text encodes below the cut and decodes back */
    static const char text[] = "The quick brown fox jumps over the lazy dog. Hello, world! 12345 (ok) {x: y}";
    int32_t ids[128];
    char back[256];
    int64_t n = tokenizer_encode(tok, text, strlen(text), false, false, ids, 128), high = 0;
    for (int64_t i = 0; i < n && i < 128; i++) high += ids[i] < 0 || ids[i] >= 32000;
    CHECK(n > 8 && n <= 128 && high == 0);
    int64_t k = n > 8 && n <= 128 ? tokenizer_decode(tok, ids, n, back, sizeof back, false) : -1;
    CHECK(k == (int64_t)strlen(text) && !memcmp(back, text, strlen(text)));
    tokenizer_free(tok);
    gguf_close(g);
    struct kvik_err err = {0};
    struct model *m = NULL;
    CHECK_MSG(model_load(path, &m, &err) == KVIK_OK, "model_load: %s", err.msg);
    if (!m) return;
    CHECK_EQ_INT(m->hp.n_vocab, 32000);
    CHECK(!m->hp.tied_output && m->output.type == TENSOR_TYPE_Q8_0);
    if (n > 8) check_forward(m, ids, 8);
    model_free(m);
}

TEST(synth_vocab_cut_keeps_only_consistent_merges) {
    struct fixture fx;
    char path[160];
    if (!fixture_init_default(&fx)) return;
    struct synth_shape s = *synth_shape_find("tinyllama-1.1b"); /* its vocabulary, a small body */
    s.n_layer = 1, s.n_embd = 64, s.n_ff = 128, s.n_head = 4, s.n_head_kv = 2;
    struct synth_params p = {.shape = &s, .type = TENSOR_TYPE_Q8_0, .seed = 3, .vocab_path = fx.vocab};
    struct synth_info info;
    if (fixture_synth(&fx, "cut.gguf", &p, path, &info)) {
        CHECK_EQ_INT(info.vocab_src, 49152);
        CHECK(info.merges_kept > 20000 && info.merges_dropped > 0);
        CHECK_EQ_INT(info.merges_kept + info.merges_dropped, 48900);
        check_cut(path, &info);
        remove(path);
    }
    fixture_done(&fx);
}

/* The padded file: 320 tokens, the source's 262 then unique UNUSED ones. */
static void check_padded(const char *path, const char *vocab) {
    struct gguf *g = NULL, *gs = NULL;
    struct tokenizer *tok = load_tokenizer(path, &g), *src = load_tokenizer(vocab, &gs);
    if (tok && src) {
        CHECK_EQ_INT(tokenizer_n_vocab(tok), 320);
        int bad = 0;
        for (int32_t id = SMALL_VOCAB; id < 320; id++) {
            const char *t = tokenizer_token_text(tok, id);
            bad += tokenizer_token_type(tok, id) != TOKEN_TYPE_UNUSED || tokenizer_find(tok, t, strlen(t)) != id;
        }
        CHECK_EQ_INT(bad, 0);
        CHECK_STR(tokenizer_token_text(tok, 261), "<unused_300>"); /* the source's own token stays */
        CHECK_EQ_INT(tokenizer_find(tok, "<unused_300>", 12), 261);
        CHECK_STR(tokenizer_token_text(tok, 300), "<unused_300_1>");
        CHECK_STR(tokenizer_token_text(tok, 301), "<unused_301>");
        CHECK(same_encoding(tok, src, "hello hello, hell!"));
        int32_t id;
        CHECK(tokenizer_encode(tok, "hello", 5, false, false, &id, 1) == 1 && id == 260);
        const struct gguf_value *scores;
        struct gguf_value e5, e310;
        float sc[2] = {1, 1};
        bool ok = gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores, NULL) == KVIK_OK &&
                  gguf_arr_len(scores) == 320 && gguf_arr_elem(scores, 5, &e5) &&
                  gguf_arr_elem(scores, 310, &e310);
        if (ok) memcpy(&sc[0], e5.p, 4), memcpy(&sc[1], e310.p, 4);
        CHECK(ok && sc[0] == -5.0f && sc[1] == 0.0f); /* the source's score, then 0 */
    }
    tokenizer_free(tok);
    tokenizer_free(src);
    gguf_close(g);
    gguf_close(gs);
    struct kvik_err err = {0};
    struct model *m = NULL;
    CHECK_MSG(model_load(path, &m, &err) == KVIK_OK, "model_load: %s", err.msg);
    if (m) {
        CHECK_EQ_INT(m->hp.n_vocab, 320);
        CHECK_EQ_INT(m->output.type, TENSOR_TYPE_Q8_0); /* 64 columns: no Q6_K */
        static const int32_t ids[] = {260, 1, 300, 319};
        check_forward(m, ids, 4);
        model_free(m);
    }
}

TEST(synth_vocab_pad_adds_unique_unused_tokens) {
    struct fixture fx;
    char path[160];
    REQUIRE(fixture_init(&fx, 0));
    struct synth_shape s = tiny_shape(320, false);
    struct synth_params p = {.shape = &s, .type = TENSOR_TYPE_Q4_0, .seed = 5, .vocab_path = fx.vocab};
    struct synth_info info;
    if (fixture_synth(&fx, "pad.gguf", &p, path, &info)) {
        CHECK_EQ_INT(info.vocab_src, SMALL_VOCAB);
        CHECK_EQ_INT(info.merges_dropped, 0);
        check_padded(path, fx.vocab);
    }
    remove(path);
    fixture_done(&fx);
}

TEST(synth_failures_leave_no_file) {
    struct fixture fx;
    char path[160], tmp[160], other[160];
    REQUIRE(fixture_init(&fx, 299)); /* eos past a 280-token cut */
    fixture_path(&fx, "out.gguf", path, sizeof path);
    fixture_path(&fx, "out.gguf.tmp", tmp, sizeof tmp);
    struct synth_shape s = tiny_shape(280, true);
    struct synth_params p = {.shape = &s, .type = TENSOR_TYPE_Q8_0, .vocab_path = fx.vocab};
    struct kvik_err err = {0};
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "tokenizer.ggml.eos_token_id is 299") != NULL);
    CHECK(!file_exists(path) && !file_exists(tmp));
    /* a file without a tokenizer, a file that is not a GGUF, no file */
    struct gguf_writer *w = gguf_writer_new();
    fixture_path(&fx, "no-tokenizer.gguf", other, sizeof other);
    REQUIRE(w && !gguf_writer_set_str(w, "general.architecture", "llama") &&
            !gguf_writer_write_file(w, other, NULL));
    gguf_writer_free(w);
    p.vocab_path = other;
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_FORMAT);
    CHECK(strstr(err.msg, "no tokenizer") != NULL);
    FILE *f = fopen(other, "w");
    REQUIRE(f);
    fputs("not a gguf file at all\n", f);
    fclose(f);
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_FORMAT);
    CHECK(strstr(err.msg, "not a usable GGUF") != NULL);
    remove(other);
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_IO);
    CHECK(!file_exists(path) && !file_exists(tmp));
    /* an unwritable output, a bad shape, an unsupported type */
    p.vocab_path = fx.vocab;
    s.n_vocab = 300; /* eos 299 fits */
    CHECK_EQ_INT(synth_write("/nonexistent-dir/x.gguf", &p, NULL, &err), KVIK_ERR_IO);
    s.n_head = 3;
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    s.n_head = 4;
    p.type = TENSOR_TYPE_Q8_K;
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    p.type = TENSOR_TYPE_Q4_0;
    s.n_embd = 48; /* not a whole number of 32-weight blocks */
    CHECK_EQ_INT(synth_write(path, &p, NULL, &err), KVIK_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "is not a whole number of Q8_0 blocks") != NULL); /* the tied output comes first */
    CHECK(!file_exists(path) && !file_exists(tmp));
    fixture_done(&fx);
}

/* ---- determinism ------------------------------------------------------------- */

TEST(synth_same_seed_same_bytes) {
    struct fixture fx;
    char a[160], b[160], c[160];
    REQUIRE(fixture_init(&fx, 0));
    fixture_path(&fx, "a.gguf", a, sizeof a);
    fixture_path(&fx, "b.gguf", b, sizeof b);
    fixture_path(&fx, "c.gguf", c, sizeof c);
    struct synth_shape s = tiny_shape(SMALL_VOCAB, true);
    s.n_embd = 256; /* room for K-quant blocks */
    struct synth_params p = {.shape = &s, .type = TENSOR_TYPE_Q4_K, .seed = 42, .vocab_path = fx.vocab,
                             .n_threads = 1};
    struct kvik_err err = {0};
    REQUIRE(synth_write(a, &p, NULL, &err) == KVIK_OK);
    p.n_threads = 2; /* other row split, same rows */
    REQUIRE(synth_write(b, &p, NULL, &err) == KVIK_OK);
    p.seed = 43;
    REQUIRE(synth_write(c, &p, NULL, &err) == KVIK_OK);
    size_t na = 0, nb = 0, nc = 0;
    uint8_t *da = slurp(a, &na), *db = slurp(b, &nb), *dc = slurp(c, &nc);
    REQUIRE(da && db && dc);
    CHECK(na == nb && !memcmp(da, db, na));
    /* another seed: the same metadata, other weights in every matrix */
    struct gguf *ga = NULL, *gc = NULL;
    REQUIRE(gguf_open(a, &ga, &err) == KVIK_OK && gguf_open(c, &gc, &err) == KVIK_OK);
    CHECK(na == nc && gguf_data_offset(ga) == gguf_data_offset(gc) && !memcmp(da, dc, gguf_data_offset(ga)));
    int same = 0, matrices = 0;
    for (int64_t i = 0; i < gguf_n_tensors(ga); i++) {
        const struct gguf_tensor *ta = gguf_tensor(ga, i), *tc = gguf_tensor(gc, i);
        if (ta->n_dims != 2) continue;
        matrices++;
        same += !memcmp(ta->data, tc->data, ta->n_bytes);
    }
    CHECK(matrices == 1 + 7 * 2 && same == 0);
    gguf_close(ga);
    gguf_close(gc);
    free(da), free(db), free(dc);
    remove(a), remove(b), remove(c);
    fixture_done(&fx);
}

/* ---- the command -------------------------------------------------------------- */

/* Runs `kvik synth ARGS`; returns the exit status, stderr's line count and
 * whether stdout was empty. */
static int synth_cmd(const char *args, int *err_lines, bool *quiet, char *errbuf, size_t errlen) {
    char cmd[2048], outp[64], errp[64];
    snprintf(outp, sizeof outp, "/tmp/kvik-synth-cmd-%d.out", (int)getpid());
    snprintf(errp, sizeof errp, "/tmp/kvik-synth-cmd-%d.err", (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s' synth %s >%s 2>%s", test_env("KVIK_BIN"), args, outp, errp);
    int st = system(cmd);
    size_t n_out = 0, n_err = 0;
    uint8_t *o = slurp(outp, &n_out), *e = slurp(errp, &n_err);
    *quiet = n_out == 0;
    *err_lines = 0;
    for (size_t i = 0; e && i < n_err; i++) *err_lines += e[i] == '\n';
    snprintf(errbuf, errlen, "%.*s", e ? (int)n_err : 0, e ? (const char *)e : "");
    free(o), free(e);
    remove(outp), remove(errp);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(synth_command_errors) {
    if (!test_env("KVIK_BIN")[0]) {
        test_skip("KVIK_BIN not set (run through make test)");
        return;
    }
    struct fixture fx;
    char args[512], msg[1024];
    REQUIRE(fixture_init(&fx, 0));
    static const char *const usage_errors[] = {
        "--shape nope --type q4_0 -o x.gguf", "--shape smollm2-135m --type q9_9 -o x.gguf",
        "--shape smollm2-135m --type q8_k -o x.gguf", "--shape smollm2-135m --type q4_0",
        "--type q4_0 -o x.gguf", "--shape smollm2-135m -o x.gguf",
        "--shape smollm2-135m --type q4_0 -o x --seed -1",
        "--shape smollm2-135m --type q4_0 -o x -t 0", "--bogus", "--shape",
    };
    int lines;
    bool quiet;
    for (size_t i = 0; i < sizeof usage_errors / sizeof *usage_errors; i++) {
        int st = synth_cmd(usage_errors[i], &lines, &quiet, msg, sizeof msg);
        CHECK_MSG(st == 2 && lines == 1 && quiet, "kvik synth %s: exit %d, %d lines: %s", usage_errors[i], st,
                  lines, msg);
    }
    CHECK_EQ_INT(synth_cmd("--shape nope --type q4_0 -o x.gguf", &lines, &quiet, msg, sizeof msg), 2);
    CHECK(strstr(msg, "unknown shape 'nope'") != NULL);
    /* runtime errors: exit 1, one line */
    static const char *const runtime[] = {"-o /nonexistent-dir/x.gguf --vocab '%s'",
                                          "-o '%s.out' --vocab /nonexistent.gguf", "-o x.gguf --vocab /dev/null"};
    for (size_t i = 0; i < sizeof runtime / sizeof *runtime; i++) {
        char tail[300];
        snprintf(tail, sizeof tail, runtime[i], i == 1 ? fx.dir : fx.vocab);
        snprintf(args, sizeof args, "--shape smollm2-135m --type q4_0 %s", tail);
        int st = synth_cmd(args, &lines, &quiet, msg, sizeof msg);
        CHECK_MSG(st == 1 && lines == 1 && quiet, "kvik synth %s: exit %d, %d lines: %s", args, st, lines, msg);
    }
    CHECK_EQ_INT(synth_cmd("--list", &lines, &quiet, msg, sizeof msg), 0);
    CHECK(!quiet && lines == 0);
    fixture_done(&fx);
}
