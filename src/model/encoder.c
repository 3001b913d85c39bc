/*
 * encoder.c — the BERT encoder of encoder.h: binding the "bert" GGUF's
 * tensors, and the forward pass over a packed batch of texts (the products
 * over the thread pool, attention split by text and head).
 */
#include "model/encoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/bind.h"
#include "tokenizer/tokenizer.h"

struct enc_layer {
    struct tensor_matrix wq, wk, wv, wo, up, down;
    const float *bq, *bk, *bv, *bo, *bup, *bdown;
    const float *ln1_w, *ln1_b; /* after attention */
    const float *ln2_w, *ln2_b; /* after the feed-forward */
};

struct encoder {
    struct encoder_hparams hp;
    struct gguf *file;
    struct tokenizer *tok;
    struct tensor_matrix tok_embd, pos_embd; /* rows read as embeddings */
    const float *type_embd;                  /* [n_types][n_embd] */
    const float *ln_w, *ln_b;                /* of the summed embeddings */
    struct enc_layer *layers;
    struct tensor_matrix cls, cls_out; /* the head (RANK): cls.data NULL without a pooler */
    const float *cls_b, *cls_out_b;    /* their biases (NULL: none) */
    void *panels;
    uint64_t identity;
};

/* One thread's attention arguments and scratch. */
struct attn_thread {
    const float **q;
    float **out;
    int32_t *last;
    float *scratch;
};

struct encoder_ctx {
    const struct encoder *e;
    struct pool *pool;
    const struct tensor_kernels *k;
    int max_tokens;
    float *x, *q, *kk, *v, *att, *tmp, *ff; /* [max_tokens][n_embd] each; ff [max_tokens][n_ff] */
    struct attn_thread *att_threads;        /* [n_threads] */
    int n_threads;
    void *scratch;
};

static kvik_status get_u32(const struct gguf *g, const char *key, bool required, uint32_t def, uint32_t *out,
                           struct kvik_err *err) {
    kvik_status st = gguf_get_u32(g, key, out, err);
    if (st == KVIK_ERR_NOT_FOUND && !required) {
        *out = def;
        return KVIK_OK;
    }
    if (st == KVIK_ERR_NOT_FOUND) return err_set(err, KVIK_ERR_FORMAT, "encoder: missing key '%s'", key);
    return st;
}

static kvik_status read_hparams(const struct gguf *g, struct encoder_hparams *hp, struct kvik_err *err) {
    struct gguf_str a;
    kvik_status st = gguf_get_str(g, "general.architecture", &a, err);
    if (st) return st == KVIK_ERR_NOT_FOUND ? err_set(err, KVIK_ERR_FORMAT, "encoder: no general.architecture") : st;
    if (a.len != 4 || memcmp(a.ptr, "bert", 4))
        return err_set(err, KVIK_ERR_UNSUPPORTED, "encoder: architecture \"%.*s\" is not an encoder (bert)",
                       (int)(a.len > 32 ? 32 : a.len), a.ptr);
    uint32_t nl, d, ff, nh, ctx, types, pool;
    bool causal = false;
    if ((st = get_u32(g, "bert.block_count", true, 0, &nl, err)) ||
        (st = get_u32(g, "bert.embedding_length", true, 0, &d, err)) ||
        (st = get_u32(g, "bert.feed_forward_length", true, 0, &ff, err)) ||
        (st = get_u32(g, "bert.attention.head_count", true, 0, &nh, err)) ||
        (st = get_u32(g, "bert.context_length", true, 0, &ctx, err)) ||
        (st = get_u32(g, "tokenizer.ggml.token_type_count", false, 2, &types, err)) ||
        (st = get_u32(g, "bert.pooling_type", false, ENCODER_POOL_MEAN, &pool, err)))
        return st;
    st = gguf_get_bool(g, "bert.attention.causal", &causal, err);
    if (st && st != KVIK_ERR_NOT_FOUND) return st;
    if (causal) return err_set(err, KVIK_ERR_UNSUPPORTED, "encoder: causal attention is not an encoder's");
    float eps = 1e-12f;
    st = gguf_get_f32(g, "bert.attention.layer_norm_epsilon", &eps, err);
    if (st && st != KVIK_ERR_NOT_FOUND) return st;
    if (nl < 1 || nl > 1024 || d < 1 || d > 65536 || ff < 1 || ff > 262144 || nh < 1 || d % nh || ctx < 3 ||
        ctx > 1 << 20 || types < 1 || types > 1024 || !(eps > 0 && eps < 1) || pool > ENCODER_POOL_RANK)
        return err_set(err, KVIK_ERR_FORMAT, "encoder: hyperparameters out of range (layers %u, width %u, ff %u, "
                       "heads %u, context %u, types %u, pooling %u)", nl, d, ff, nh, ctx, types, pool);
    *hp = (struct encoder_hparams){.n_layer = (int)nl, .n_embd = (int)d, .n_ff = (int)ff, .n_head = (int)nh,
                                   .head_dim = (int)(d / nh), .n_ctx = (int)ctx, .n_types = (int)types,
                                   .eps = eps, .pooling = pool == ENCODER_POOL_NONE ? ENCODER_POOL_MEAN : (int)pool};
    return KVIK_OK;
}

/* The classification head of a RANK file: cls.output.weight [n_embd] ->
 * [n_labels] (required) and the pooler cls.weight [n_embd] -> [n_embd]
 * (optional), each with an optional bias. */
static kvik_status bind_head(struct encoder *e, struct kvik_err *err) {
    const struct gguf *g = e->file;
    int64_t d = e->hp.n_embd, i = gguf_find_tensor(g, "cls.output.weight");
    if (i < 0) return err_set(err, KVIK_ERR_FORMAT, "encoder: a ranking file without 'cls.output.weight'");
    const struct gguf_tensor *t = gguf_tensor(g, i);
    if (t->n_dims != 2 || t->ne[1] < 1 || t->ne[1] > 1024)
        return err_set(err, KVIK_ERR_FORMAT, "encoder: cls.output.weight must have 1..1024 rows");
    e->hp.n_labels = (int)t->ne[1];
    kvik_status st;
    if ((st = model_bind_matrix(g, "cls.output.weight", d, e->hp.n_labels, &e->cls_out, err)) ||
        (st = model_bind_vector(g, "cls.output.bias", e->hp.n_labels, true, &e->cls_out_b, err)))
        return st;
    if (gguf_find_tensor(g, "cls.weight") < 0) return KVIK_OK;
    if ((st = model_bind_matrix(g, "cls.weight", d, d, &e->cls, err)) ||
        (st = model_bind_vector(g, "cls.bias", d, true, &e->cls_b, err)))
        return st;
    return KVIK_OK;
}

/* prefix.weight, a matrix [cols] -> [rows] (w) or a vector of rows (v),
 * and prefix.bias, a vector of rows. */
static kvik_status bind_pair(const struct gguf *g, const char *prefix, int64_t cols, int64_t rows,
                             struct tensor_matrix *w, const float **v, const float **b, struct kvik_err *err) {
    char wn[96], bn[96];
    snprintf(wn, sizeof wn, "%s.weight", prefix);
    snprintf(bn, sizeof bn, "%s.bias", prefix);
    kvik_status st = w ? model_bind_matrix(g, wn, cols, rows, w, err) : model_bind_vector(g, wn, rows, false, v, err);
    return st ? st : model_bind_vector(g, bn, rows, false, b, err);
}

static kvik_status bind_linear(const struct gguf *g, const char *prefix, int64_t cols, int64_t rows,
                               struct tensor_matrix *w, const float **b, struct kvik_err *err) {
    return bind_pair(g, prefix, cols, rows, w, NULL, b, err);
}

static kvik_status bind_norm(const struct gguf *g, const char *prefix, int64_t n, const float **w, const float **b,
                             struct kvik_err *err) {
    return bind_pair(g, prefix, n, n, NULL, w, b, err);
}

static kvik_status bind_weights(struct encoder *e, struct kvik_err *err) {
    const struct gguf *g = e->file;
    struct encoder_hparams *hp = &e->hp;
    kvik_status st;
    int64_t i = gguf_find_tensor(g, "token_embd.weight");
    if (i < 0) return err_set(err, KVIK_ERR_FORMAT, "encoder: missing tensor 'token_embd.weight'");
    hp->n_vocab = (int)gguf_tensor(g, i)->ne[1];
    if (gguf_tensor(g, i)->ne[1] < 1 || gguf_tensor(g, i)->ne[1] > (1 << 24))
        return err_set(err, KVIK_ERR_FORMAT, "encoder: token_embd.weight has a bad vocabulary size");
    if ((st = model_bind_matrix(g, "token_embd.weight", hp->n_embd, hp->n_vocab, &e->tok_embd, err)) ||
        (st = model_bind_matrix(g, "position_embd.weight", hp->n_embd, hp->n_ctx, &e->pos_embd, err)) ||
        (st = model_bind_vector(g, "token_types.weight", (int64_t)hp->n_types * hp->n_embd, false, &e->type_embd,
                                err)) ||
        (st = bind_norm(g, "token_embd_norm", hp->n_embd, &e->ln_w, &e->ln_b, err)))
        return st;
    if (hp->pooling == ENCODER_POOL_RANK && (st = bind_head(e, err))) return st;
    e->layers = calloc((size_t)hp->n_layer, sizeof *e->layers);
    if (!e->layers) return err_set(err, KVIK_ERR_NOMEM, "encoder: out of memory");
    int64_t d = hp->n_embd, ff = hp->n_ff;
    for (int l = 0; l < hp->n_layer; l++) {
        struct enc_layer *L = &e->layers[l];
        char p[8][48];
        static const char *const part[8] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                            "attn_output_norm", "ffn_up", "ffn_down", "layer_output_norm"};
        for (int k = 0; k < 8; k++) snprintf(p[k], sizeof p[k], "blk.%d.%s", l, part[k]);
        if ((st = bind_linear(g, p[0], d, d, &L->wq, &L->bq, err)) ||
            (st = bind_linear(g, p[1], d, d, &L->wk, &L->bk, err)) ||
            (st = bind_linear(g, p[2], d, d, &L->wv, &L->bv, err)) ||
            (st = bind_linear(g, p[3], d, d, &L->wo, &L->bo, err)) ||
            (st = bind_norm(g, p[4], d, &L->ln1_w, &L->ln1_b, err)) ||
            (st = bind_linear(g, p[5], d, ff, &L->up, &L->bup, err)) ||
            (st = bind_linear(g, p[6], ff, d, &L->down, &L->bdown, err)) ||
            (st = bind_norm(g, p[7], d, &L->ln2_w, &L->ln2_b, err)))
            return st;
    }
    struct tensor_matrix **mats = malloc((size_t)hp->n_layer * 6 * sizeof *mats);
    if (!mats) return err_set(err, KVIK_ERR_NOMEM, "encoder: out of memory");
    size_t n = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        struct enc_layer *L = &e->layers[l];
        struct tensor_matrix *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->up, &L->down};
        for (int k = 0; k < 6; k++) mats[n++] = lm[k];
    }
    st = model_repack_matrices(mats, n, &e->panels, err);
    free(mats);
    return st;
}

kvik_status encoder_load(const char *path, struct encoder **out, struct kvik_err *err) {
    *out = NULL;
    struct encoder *e = calloc(1, sizeof *e);
    if (!e) return err_set(err, KVIK_ERR_NOMEM, "encoder: out of memory");
    kvik_status st = gguf_open(path, &e->file, err);
    if (!st) st = read_hparams(e->file, &e->hp, err);
    if (!st) st = bind_weights(e, err);
    if (!st) st = tokenizer_load(e->file, &e->tok, err);
    if (!st && tokenizer_n_vocab(e->tok) != e->hp.n_vocab)
        st = err_set(err, KVIK_ERR_FORMAT, "encoder: %d tokens but %d embedding rows", tokenizer_n_vocab(e->tok),
                     e->hp.n_vocab);
    if (!st && (tokenizer_bos(e->tok) < 0 || tokenizer_eos(e->tok) < 0))
        st = err_set(err, KVIK_ERR_FORMAT, "encoder: the vocabulary has no [CLS] or [SEP] token");
    if (st) {
        encoder_free(e);
        return st;
    }
    uint64_t size = gguf_file_size(e->file), off = gguf_data_offset(e->file);
    e->identity = hash64(e->file->data, (size_t)(off < size ? off : size), size);
    *out = e;
    return KVIK_OK;
}

void encoder_free(struct encoder *e) {
    if (!e) return;
    tokenizer_free(e->tok);
    mem_free(e->panels);
    free(e->layers);
    gguf_close(e->file);
    free(e);
}

const struct encoder_hparams *encoder_hparams(const struct encoder *e) { return &e->hp; }
const struct tokenizer *encoder_tokenizer(const struct encoder *e) { return e->tok; }
uint64_t encoder_identity(const struct encoder *e) { return e->identity; }
int encoder_out_dim(const struct encoder *e) {
    return e->hp.pooling == ENCODER_POOL_RANK ? e->hp.n_labels : e->hp.n_embd;
}

int64_t encoder_tokenize(const struct encoder *e, const char *text, size_t len, int32_t *out, int64_t max) {
    int64_t cap = e->hp.n_ctx - 2;
    if (max < e->hp.n_ctx) return KVIK_ERR_INVALID_ARG;
    int64_t n = tokenizer_encode(e->tok, text, len, false, false, out + 1, cap);
    if (n < 0) return n;
    if (n > cap) n = cap;
    out[0] = tokenizer_bos(e->tok);
    out[n + 1] = tokenizer_eos(e->tok);
    return n + 2;
}

int64_t encoder_tokenize_pair(const struct encoder *e, const char *a, size_t alen, const char *b, size_t blen,
                              int32_t *ids, uint8_t *types, int64_t max) {
    int64_t B = e->hp.n_ctx - 3;
    if (max < e->hp.n_ctx) return KVIK_ERR_INVALID_ARG;
    int32_t *tb = malloc((size_t)B * sizeof *tb);
    if (!tb) return KVIK_ERR_NOMEM;
    /* a's first B tokens straight to their place; b's aside */
    int64_t na = tokenizer_encode(e->tok, a, alen, false, false, ids + 1, B);
    int64_t nb = na < 0 ? 0 : tokenizer_encode(e->tok, b, blen, false, false, tb, B);
    if (na < 0 || nb < 0) {
        free(tb);
        return na < 0 ? na : nb;
    }
    if (na + nb > B) {
        int64_t s = na <= nb ? na : nb, keep_s = s < B / 2 ? s : B / 2;
        if (na <= nb) na = keep_s, nb = B - keep_s;
        else nb = keep_s, na = B - keep_s;
    }
    ids[0] = tokenizer_bos(e->tok);
    ids[na + 1] = tokenizer_eos(e->tok);
    memcpy(ids + na + 2, tb, (size_t)nb * sizeof *tb);
    ids[na + nb + 2] = tokenizer_eos(e->tok);
    free(tb);
    int64_t n = na + nb + 3;
    for (int64_t i = 0; i < n; i++) types[i] = i < na + 2 ? 0 : 1;
    return n;
}

/* ---- forward ----------------------------------------------------------- */

struct encoder_ctx *encoder_ctx_new(const struct encoder *e, int n_threads, int max_tokens, struct kvik_err *err) {
    if (max_tokens < e->hp.n_ctx) max_tokens = e->hp.n_ctx;
    struct encoder_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(err, KVIK_ERR_NOMEM, "encoder: out of memory");
        return NULL;
    }
    c->e = e;
    c->k = tensor_kernels_best();
    c->max_tokens = max_tokens;
    c->pool = pool_create(n_threads, err);
    if (!c->pool) {
        free(c);
        return NULL;
    }
    c->n_threads = pool_size(c->pool);
    size_t d = (size_t)e->hp.n_embd, T = (size_t)max_tokens;
    float **bufs[] = {&c->x, &c->q, &c->kk, &c->v, &c->att, &c->tmp};
    bool ok = true;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ok = ok && (*bufs[i] = mem_alloc_aligned(T * d * 4));
    ok = ok && (c->ff = mem_alloc_aligned(T * (size_t)e->hp.n_ff * 4));
    ok = ok && (c->att_threads = calloc((size_t)c->n_threads, sizeof *c->att_threads));
    for (int t = 0; ok && t < c->n_threads; t++) {
        struct attn_thread *w = &c->att_threads[t];
        size_t n = (size_t)e->hp.n_ctx;
        ok = (w->q = malloc(n * sizeof *w->q)) && (w->out = malloc(n * sizeof *w->out)) &&
             (w->last = malloc(n * sizeof *w->last)) &&
             (w->scratch = mem_alloc_aligned(tensor_attn_scratch_floats(e->hp.head_dim, (int)n) * sizeof(float)));
    }
    size_t scratch = 0;
    for (int l = 0; l < e->hp.n_layer; l++) {
        const struct enc_layer *L = &e->layers[l];
        const struct tensor_matrix *m[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->up, &L->down};
        for (int k = 0; k < 6; k++) {
            size_t s = tensor_matmul_scratch_size(m[k]->type, m[k]->cols, max_tokens);
            if (s > scratch) scratch = s;
        }
    }
    ok = ok && (c->scratch = mem_alloc_aligned(scratch ? scratch : 64));
    if (!ok) {
        err_set(err, KVIK_ERR_NOMEM, "encoder: out of memory for a batch of %d tokens", max_tokens);
        encoder_ctx_free(c);
        return NULL;
    }
    return c;
}

void encoder_ctx_free(struct encoder_ctx *c) {
    if (!c) return;
    float *bufs[] = {c->x, c->q, c->kk, c->v, c->att, c->tmp, c->ff};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) mem_free(bufs[i]);
    for (int t = 0; c->att_threads && t < c->n_threads; t++) {
        free(c->att_threads[t].q);
        free(c->att_threads[t].out);
        free(c->att_threads[t].last);
        mem_free(c->att_threads[t].scratch);
    }
    free(c->att_threads);
    mem_free(c->scratch);
    pool_free(c->pool);
    free(c);
}

/* y = LayerNorm(x) * w + b over each of n rows of d values, in place. */
static void layer_norm(float *x, int64_t n, int64_t d, const float *w, const float *b, float eps) {
    for (int64_t t = 0; t < n; t++) {
        float *r = x + t * d;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; i++) mean += r[i];
        mean /= (double)d;
        for (int64_t i = 0; i < d; i++) var += ((double)r[i] - mean) * ((double)r[i] - mean);
        float inv = (float)(1.0 / sqrt(var / (double)d + (double)eps)), m = (float)mean;
        for (int64_t i = 0; i < d; i++) r[i] = (r[i] - m) * inv * w[i] + b[i];
    }
}

/* y[t] = W x[t] + bias for n rows. */
static kvik_status linear(struct encoder_ctx *c, const struct tensor_matrix *w, const float *bias, const float *x,
                          float *y, int64_t n) {
    kvik_status st = tensor_matmul(c->pool, c->k, w, x, w->cols, y, w->rows, n, c->scratch);
    if (st) return st;
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < w->rows; r++) y[t * w->rows + r] += bias[r];
    return KVIK_OK;
}

struct attn_job {
    struct encoder_ctx *c;
    int n;                /* texts */
    const int *start;     /* [n] first row of each text */
    const int *len;       /* [n] */
};

/* Each thread takes (text, head) pairs ith, ith + nth, ...: all of the
 * text's query rows of the head go to the kernel table's attention at
 * once, each row seeing every position of the text (its "last" position
 * is the text's last: no causal mask), K and V read where the products
 * left them. */
static void attn_worker(void *arg, int ith, int nth) {
    const struct attn_job *j = arg;
    struct encoder_ctx *c = j->c;
    const struct encoder_hparams *hp = &c->e->hp;
    int d = hp->n_embd, hd = hp->head_dim, H = hp->n_head;
    float scale = 1.0f / sqrtf((float)hd);
    struct attn_thread *w = &c->att_threads[ith];
    for (int job = ith; job < j->n * H; job += nth) {
        int txt = job / H, h = job % H, o = j->start[txt], L = j->len[txt];
        for (int i = 0; i < L; i++) {
            w->q[i] = c->q + (size_t)(o + i) * d + h * hd;
            w->out[i] = c->att + (size_t)(o + i) * d + h * hd;
            w->last[i] = L - 1;
        }
        struct attn_span span = {c->kk + (size_t)o * d + h * hd, c->v + (size_t)o * d + h * hd, L};
        struct attn_kv kv = {TENSOR_TYPE_F32, (size_t)d * sizeof(float), &span, 1, 0};
        struct attn_rows rows = {L, (const float *const *)w->q, (float *const *)w->out, w->last, 0};
        c->k->attn(hd, scale, &kv, &rows, w->scratch);
    }
}

/* Row `row` of an embedding table, as floats. */
static void embd_row(const struct tensor_matrix *m, int64_t row, float *out) {
    tensor_type_traits(m->type)->to_float((const uint8_t *)m->data + (size_t)row * m->row_bytes, out, m->cols);
}

/* y[n_labels] = the head over the first token's state x[n_embd]; tmp has
 * n_embd floats. */
static void rank_head(const struct encoder *e, const float *x, float *tmp, float *y) {
    int64_t d = e->hp.n_embd;
    float *row = tmp + d; /* a weight row, after the pooled state */
    const float *h = x;
    if (e->cls.data) {
        for (int64_t r = 0; r < d; r++) {
            embd_row(&e->cls, r, row);
            double s = e->cls_b ? e->cls_b[r] : 0.0;
            for (int64_t k = 0; k < d; k++) s += (double)row[k] * x[k];
            tmp[r] = (float)tanh(s);
        }
        h = tmp;
    }
    for (int r = 0; r < e->hp.n_labels; r++) {
        embd_row(&e->cls_out, r, row);
        double s = e->cls_out_b ? e->cls_out_b[r] : 0.0;
        for (int64_t k = 0; k < d; k++) s += (double)row[k] * h[k];
        y[r] = (float)s;
    }
}

kvik_status encoder_embed(struct encoder_ctx *c, int n, const int32_t *const *ids, const uint8_t *const *types,
                          const int *n_ids, int pooling, bool normalize, float *out, struct kvik_err *err) {
    const struct encoder *e = c->e;
    const struct encoder_hparams *hp = &e->hp;
    int64_t d = hp->n_embd, T = 0;
    if (n < 1) return err_set(err, KVIK_ERR_INVALID_ARG, "encoder: no texts");
    if (pooling == ENCODER_POOL_NONE) pooling = hp->pooling;
    if (pooling < ENCODER_POOL_MEAN || pooling > ENCODER_POOL_RANK)
        return err_set(err, KVIK_ERR_INVALID_ARG, "encoder: unknown pooling %d", pooling);
    if (pooling == ENCODER_POOL_RANK && !e->hp.n_labels)
        return err_set(err, KVIK_ERR_INVALID_ARG, "encoder: the model has no classification head to rank with");
    for (int i = 0; i < n; i++) {
        if (n_ids[i] < 1 || n_ids[i] > hp->n_ctx)
            return err_set(err, KVIK_ERR_INVALID_ARG, "encoder: text %d has %d tokens (1..%d)", i, n_ids[i],
                           hp->n_ctx);
        for (int t = 0; t < n_ids[i]; t++)
            if (ids[i][t] < 0 || ids[i][t] >= hp->n_vocab)
                return err_set(err, KVIK_ERR_INVALID_ARG, "encoder: token %d of text %d is out of range", t, i);
        for (int t = 0; types && t < n_ids[i]; t++)
            if (types[i][t] >= hp->n_types)
                return err_set(err, KVIK_ERR_INVALID_ARG, "encoder: token %d of text %d has type %d (0..%d)", t, i,
                               types[i][t], hp->n_types - 1);
        T += n_ids[i];
    }
    if (T > c->max_tokens)
        return err_set(err, KVIK_ERR_INVALID_ARG, "encoder: %lld tokens in a batch of at most %d", (long long)T,
                       c->max_tokens);
    int *start = malloc((size_t)n * 2 * sizeof *start);
    if (!start) return err_set(err, KVIK_ERR_NOMEM, "encoder: out of memory");
    int *len = start + n;
    float *pos = c->tmp; /* a position row, before tmp is used */
    for (int i = 0, o = 0; i < n; o += n_ids[i], i++) {
        start[i] = o;
        len[i] = n_ids[i];
        for (int t = 0; t < n_ids[i]; t++) {
            float *x = c->x + (size_t)(o + t) * d;
            embd_row(&e->tok_embd, ids[i][t], x);
            embd_row(&e->pos_embd, t, pos);
            const float *type = e->type_embd + (types ? (size_t)types[i][t] * (size_t)d : 0);
            for (int64_t k = 0; k < d; k++) x[k] = x[k] + pos[k] + type[k];
        }
    }
    layer_norm(c->x, T, d, e->ln_w, e->ln_b, hp->eps);
    kvik_status st = KVIK_OK;
    for (int l = 0; l < hp->n_layer && !st; l++) {
        const struct enc_layer *L = &e->layers[l];
        if ((st = linear(c, &L->wq, L->bq, c->x, c->q, T)) || (st = linear(c, &L->wk, L->bk, c->x, c->kk, T)) ||
            (st = linear(c, &L->wv, L->bv, c->x, c->v, T)))
            break;
        struct attn_job job = {c, n, start, len};
        pool_run(c->pool, attn_worker, &job);
        if ((st = linear(c, &L->wo, L->bo, c->att, c->tmp, T))) break;
        for (int64_t i = 0; i < T * d; i++) c->x[i] += c->tmp[i];
        layer_norm(c->x, T, d, L->ln1_w, L->ln1_b, hp->eps);
        if ((st = linear(c, &L->up, L->bup, c->x, c->ff, T))) break;
        c->k->gelu_erf(c->ff, T * hp->n_ff);
        if ((st = linear(c, &L->down, L->bdown, c->ff, c->tmp, T))) break;
        for (int64_t i = 0; i < T * d; i++) c->x[i] += c->tmp[i];
        layer_norm(c->x, T, d, L->ln2_w, L->ln2_b, hp->eps);
    }
    if (st) {
        free(start);
        return err_set(err, st, "encoder: a product failed");
    }
    for (int i = 0; pooling == ENCODER_POOL_RANK && i < n; i++)
        rank_head(e, c->x + (size_t)start[i] * d, c->tmp, out + (size_t)i * hp->n_labels);
    for (int i = 0; pooling != ENCODER_POOL_RANK && i < n; i++) {
        float *y = out + (size_t)i * d;
        const float *x = c->x + (size_t)start[i] * d;
        if (pooling == ENCODER_POOL_MEAN) {
            for (int64_t k = 0; k < d; k++) {
                double s = 0;
                for (int t = 0; t < len[i]; t++) s += x[(size_t)t * d + k];
                y[k] = (float)(s / len[i]);
            }
        } else {
            memcpy(y, x + (pooling == ENCODER_POOL_CLS ? 0 : (size_t)(len[i] - 1) * d), (size_t)d * 4);
        }
        if (normalize) {
            double s = 0;
            for (int64_t k = 0; k < d; k++) s += (double)y[k] * y[k];
            float inv = s > 0 ? (float)(1.0 / sqrt(s)) : 0.0f;
            for (int64_t k = 0; k < d; k++) y[k] *= inv;
        }
    }
    free(start);
    return KVIK_OK;
}
