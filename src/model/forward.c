/*
 * forward.c — the llama-family forward pass over a batch of tokens.
 *
 * For every layer:
 *   xn   = rmsnorm(x) * attn_norm
 *   q,k,v = Wq xn, Wk xn, Wv xn           (matrix products over the batch)
 *   rope(q), rope(k) at each token's position (adjacent pairs, as GGUF's
 *                                            llama files expect)
 *   cache[layer][seq][pos] = k, v
 *   a    = softmax(q k^T / sqrt(d)) v     (causal: positions 0..pos of the
 *                                          token's own sequence; grouped
 *                                          heads share a K/V head)
 *   x   += Wo a
 *   xn   = rmsnorm(x) * ffn_norm
 *   x   += Wdown (silu(Wgate xn) * (Wup xn))
 * then logits = Wout (rmsnorm(x) * output_norm) for the marked tokens.
 *
 * All buffers are allocated once in model_ctx_new; a forward allocates
 * nothing. Weight products go through tensor_matmul_opt on the thread
 * pool, with the norms, the gating, the residual sums, rope and the K/V
 * store, and the logits' argmax folded into them (tensor_matmul_opts);
 * attention is split into (sequence, K/V head, block of the sequence's
 * tokens) items on the same pool: one kernel call per item reads the K/V
 * head's cached rows once for every query head of the group and every
 * token of the block (tensor.h, attention).
 *
 * With an observer (model_ctx_observe) each product's F32 input is also
 * reported: the normalised rows computed apart, and the gating done
 * before the down product instead of inside it.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/model.h"

/* Tokens of one sequence whose queries share a reading of the cache. */
enum { ATTN_BLOCK_TOKENS = 32 };

/* A token of the batch, for sorting by (sequence, position). */
struct attn_tok {
    int32_t seq, pos, idx;
};

/* One attention work item: tokens toks[first .. first + n_tok) (one
 * sequence, ascending positions) against K/V head kvh, for every query
 * head of its group. */
struct attn_item {
    int32_t first, n_tok, kvh;
};

struct model_ctx {
    const struct model *m;
    const struct tensor_kernels *k;
    struct pool *pool;
    int max_tokens, max_ctx;
    float *x;      /* [max_tokens][n_embd] residual stream */
    float *xn;     /* [max_tokens][n_embd] normalised input of a block / block output */
    float *q;      /* [max_tokens][q_dim] */
    float *kv_k;   /* [max_tokens][kv_dim] */
    float *kv_v;   /* [max_tokens][kv_dim] */
    float *attn;   /* [max_tokens][q_dim] */
    float *gate;   /* [max_tokens][n_ff] */
    float *up;     /* [max_tokens][n_ff] */
    int n_threads;
    struct attn_span *spans;   /* [n_threads][max_ctx] runs of cached rows */
    float *attn_scratch;       /* [n_threads][attn_floats] the attention kernel's tiles and row state */
    size_t attn_floats;        /* tensor_attn_scratch_floats for the largest item, rounded to 16 */
    const float **attn_q;      /* [n_threads][ATTN_BLOCK_TOKENS * group] an item's query rows */
    float **attn_out;          /* [n_threads][ATTN_BLOCK_TOKENS * group] and output rows */
    int32_t *attn_last;        /* [n_threads][ATTN_BLOCK_TOKENS * group] and their positions */
    struct attn_tok *toks;     /* [max_tokens] the batch sorted by (sequence, position) */
    struct attn_item *items;   /* [max_items] this batch's attention items */
    int n_items, max_items;
    struct model_profile prof; /* model_ctx_profile */
    float *inv_freq[2]; /* [rope_dim / 2] per set of layers (struct layer_weights.rope_set) */
    float *rope_cs[2];  /* [max_tokens][rope_dim / 2][2] cos and sin of each token's angles, per set */
    int n_rope_sets;    /* 1, or 2 where the sliding layers rotate with a base of their own */
    float *tmp;         /* [max_tokens][n_embd] a block's normalised output (families with post norms) */
    void *scratch;   /* quantized activations for tensor_matmul */
    int32_t *rows;   /* [max_tokens] indices of the marked tokens */
    model_observe_fn obs; /* model_ctx_observe (NULL: none) */
    void *obs_arg;
};

static void *alloc_floats(size_t n, bool *ok) {
    void *p = mem_alloc_aligned(n * sizeof(float));
    if (!p) *ok = false;
    return p;
}

static size_t matrix_scratch(const struct tensor_matrix *w, int n_tok) {
    return tensor_matmul_scratch_size(w->type, w->cols, n_tok);
}

struct model_ctx *model_ctx_new(const struct model *m, int n_threads, int max_tokens, int max_ctx,
                                struct kvik_err *err) {
    const struct model_hparams *hp = &m->hp;
    if (max_tokens < 1 || max_tokens > 1 << 16 || max_ctx < 1 || max_ctx > 1 << 24) {
        err_set(err, KVIK_ERR_INVALID_ARG, "model: batch %d or context %d out of range", max_tokens, max_ctx);
        return NULL;
    }
    struct model_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(err, KVIK_ERR_NOMEM, "model: out of memory");
        return NULL;
    }
    c->m = m;
    c->k = tensor_kernels_best();
    c->max_tokens = max_tokens;
    c->max_ctx = max_ctx;
    c->pool = pool_create(n_threads, err);
    if (!c->pool) goto fail;
    size_t T = (size_t)max_tokens, q_dim = (size_t)hp->n_head * hp->head_dim;
    size_t kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    bool ok = true;
    c->x = alloc_floats(T * hp->n_embd, &ok);
    c->xn = alloc_floats(T * hp->n_embd, &ok);
    c->q = alloc_floats(T * q_dim, &ok);
    c->kv_k = alloc_floats(T * kv_dim, &ok);
    c->kv_v = alloc_floats(T * kv_dim, &ok);
    c->attn = alloc_floats(T * q_dim, &ok);
    c->gate = alloc_floats(T * hp->n_ff, &ok);
    c->up = alloc_floats(T * hp->n_ff, &ok);
    c->n_threads = pool_size(c->pool);
    size_t nth = (size_t)c->n_threads, max_rows = (size_t)ATTN_BLOCK_TOKENS * (hp->n_head / hp->n_head_kv);
    c->spans = mem_alloc_aligned(nth * (size_t)max_ctx * sizeof(struct attn_span));
    c->attn_floats = (tensor_attn_scratch_floats(hp->head_dim, (int)max_rows) + 15) & ~(size_t)15;
    c->attn_scratch = alloc_floats(nth * c->attn_floats, &ok);
    c->attn_q = mem_alloc_aligned(nth * max_rows * sizeof(float *));
    c->attn_out = mem_alloc_aligned(nth * max_rows * sizeof(float *));
    c->attn_last = mem_alloc_aligned(nth * max_rows * sizeof(int32_t));
    c->toks = mem_alloc_aligned(T * sizeof(struct attn_tok));
    c->max_items = max_tokens * hp->n_head_kv; /* at most a block per token, times the K/V heads */
    c->items = mem_alloc_aligned((size_t)c->max_items * sizeof(struct attn_item));
    c->n_rope_sets = hp->n_swa > 0 && hp->rope_base_swa != hp->rope_base ? 2 : 1;
    for (int r = 0; r < c->n_rope_sets; r++) {
        c->inv_freq[r] = alloc_floats((size_t)hp->rope_dim / 2, &ok);
        c->rope_cs[r] = alloc_floats(T * (size_t)hp->rope_dim, &ok);
    }
    if (c->n_rope_sets == 1) c->inv_freq[1] = c->inv_freq[0], c->rope_cs[1] = c->rope_cs[0];
    if (m->arch->post_norms) c->tmp = alloc_floats(T * hp->n_embd, &ok);
    c->rows = mem_alloc_aligned(T * sizeof(int32_t));
    size_t scratch = matrix_scratch(&m->output, max_tokens);
    for (int l = 0; l < hp->n_layer; l++) {
        const struct layer_weights *L = &m->layers[l];
        const struct tensor_matrix *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof *mats; i++) {
            size_t s = matrix_scratch(mats[i], max_tokens);
            if (s > scratch) scratch = s;
        }
    }
    c->scratch = mem_alloc_aligned(scratch);
    if (!ok || !c->rows || !c->spans || !c->scratch || !c->attn_q || !c->attn_out || !c->attn_last || !c->toks ||
        !c->items) {
        err_set(err, KVIK_ERR_NOMEM, "model: out of memory for a batch of %d tokens", max_tokens);
        goto fail;
    }
    const float *factors = model_rope_factors(m, max_ctx);
    for (int r = 0; r < c->n_rope_sets; r++)
        for (int i = 0; i < hp->rope_dim / 2; i++) {
            double base = r ? hp->rope_base_swa : hp->rope_base;
            double f = pow(base, -2.0 * i / hp->rope_dim);
            if (factors && !r) f /= (double)factors[i];
            c->inv_freq[r][i] = (float)f;
        }
    return c;
fail:
    model_ctx_free(c);
    return NULL;
}

void model_ctx_free(struct model_ctx *c) {
    if (!c) return;
    pool_free(c->pool);
    float *bufs[] = {c->x, c->xn, c->q, c->kv_k, c->kv_v, c->attn, c->gate, c->up, c->attn_scratch, c->tmp};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) mem_free(bufs[i]);
    for (int r = 0; r < c->n_rope_sets; r++) mem_free(c->inv_freq[r]), mem_free(c->rope_cs[r]);
    mem_free(c->rows);
    mem_free(c->spans);
    mem_free(c->attn_q);
    mem_free(c->attn_out);
    mem_free(c->attn_last);
    mem_free(c->toks);
    mem_free(c->items);
    mem_free(c->scratch);
    free(c);
}

/* The cosines and sines of pos * inv_freq[i], each times mscale (the
 * file's rope.scaling.attn_factor; 1 leaves them exact), once per token and
 * batch (every layer rotates by the same angles). */
static void rope_angles(float *cs, int rope_dim, const float *inv_freq, float pos, float mscale) {
    for (int i = 0; i < rope_dim / 2; i++) {
        float theta = pos * inv_freq[i];
        cs[2 * i] = cosf(theta) * mscale;
        cs[2 * i + 1] = sinf(theta) * mscale;
    }
}

/* gate[i] = silu(gate[i]) * up[i] over n values (the kernel table's
 * silu_mul), cut into one run per thread (each value is computed the same
 * way wherever it falls). */
struct glu_job {
    const struct tensor_kernels *k;
    enum model_act act;
    float *gate;
    const float *up;
    size_t n;
};

static void glu_worker(void *arg, int ith, int nth) {
    struct glu_job *job = arg;
    size_t per = (job->n + (size_t)nth - 1) / (size_t)nth, i0 = per * (size_t)ith;
    size_t i1 = i0 + per < job->n ? i0 + per : job->n;
    if (i1 <= i0) return;
    if (job->act == MODEL_ACT_GELU_TANH) job->k->gelu_mul(job->gate + i0, job->up + i0, (int64_t)(i1 - i0));
    else job->k->silu_mul(job->gate + i0, job->up + i0, (int64_t)(i1 - i0));
}

static void glu(struct model_ctx *c, float *gate, const float *up, size_t n) {
    struct glu_job job = {c->k, c->m->arch->act, gate, up, n};
    if (n < 4096) glu_worker(&job, 0, 1); /* one token: not worth a wake-up */
    else pool_run(c->pool, glu_worker, &job);
}

void model_ctx_observe(struct model_ctx *c, model_observe_fn fn, void *arg) {
    c->obs = fn;
    c->obs_arg = arg;
}

/* Reports x[n][cols] to the observer as the input of weight
 * blk.LAYER.SUFFIX (layer < 0: SUFFIX alone). */
static void observe(const struct model_ctx *c, int layer, const char *suffix, const float *x, int n, int64_t cols) {
    char name[96];
    if (layer >= 0) snprintf(name, sizeof name, "blk.%d.%s", layer, suffix);
    else snprintf(name, sizeof name, "%s", suffix);
    c->obs(c->obs_arg, name, x, n, cols);
}

/* The observer's view of a block's normalised input: c->xn = rmsnorm(c->x)
 * * norm, reported as the input of each of the n_names weights (the fused
 * products normalise each row as they quantize it, so c->xn is free). */
static void observe_normed(struct model_ctx *c, int layer, int n, const float *norm, const char *const *names,
                           int n_names) {
    const struct model_hparams *hp = &c->m->hp;
    for (int t = 0; t < n; t++)
        tensor_rmsnorm(c->xn + (size_t)t * hp->n_embd, c->x + (size_t)t * hp->n_embd, norm, hp->n_embd, hp->rms_eps);
    for (int i = 0; i < n_names; i++) observe(c, layer, names[i], c->xn, n, hp->n_embd);
}

/* c->x += W x (the residual stream), through c->xn. */
static kvik_status matmul_residual(struct model_ctx *c, const struct tensor_matrix *w, const float *x, int n) {
    return tensor_matmul_add(c->pool, c->k, w, x, w->cols, c->xn, w->rows, n, c->scratch, c->x, c->m->hp.n_embd);
}

/* c->x += rmsnorm(c->xn) * norm, token by token. */
static kvik_status post_norm_add(struct model_ctx *c, int n, const float *norm) {
    const struct model_hparams *hp = &c->m->hp;
    for (int t = 0; t < n; t++) {
        float *y = c->tmp + (size_t)t * hp->n_embd, *acc = c->x + (size_t)t * hp->n_embd;
        tensor_rmsnorm(y, c->xn + (size_t)t * hp->n_embd, norm, hp->n_embd, hp->rms_eps);
        for (int i = 0; i < hp->n_embd; i++) acc[i] += y[i];
    }
    return KVIK_OK;
}

/* c->x += rmsnorm(W x) * norm: a block's output normalised before it
 * joins the residual stream (post norms). */
static kvik_status matmul_post_norm(struct model_ctx *c, const struct tensor_matrix *w, const float *x, int n,
                                    const float *norm) {
    kvik_status st = tensor_matmul(c->pool, c->k, w, x, w->cols, c->xn, w->rows, n, c->scratch);
    return st ? st : post_norm_add(c, n, norm);
}

/* A block's output into the residual stream, through its post norm if
 * the layer has one. */
static kvik_status block_out(struct model_ctx *c, const struct tensor_matrix *w, const float *x, int n,
                             const float *post_norm) {
    return post_norm ? matmul_post_norm(c, w, x, n, post_norm) : matmul_residual(c, w, x, n);
}

/* The FFN's down product: act(gate) * up, then Wdown, into the residual
 * stream, through the layer's post norm if it has one (the gating done as
 * the product quantizes each row where it can). */
static kvik_status down_residual(struct model_ctx *c, const struct tensor_matrix *w, float *gate, const float *up,
                                 int n);

static kvik_status ffn_out(struct model_ctx *c, const struct layer_weights *L, int layer, int n) {
    if (c->obs) { /* the gating apart, so that its output can be seen */
        glu(c, c->gate, c->up, (size_t)n * (size_t)L->w_down.cols);
        observe(c, layer, "ffn_down.weight", c->gate, n, L->w_down.cols);
        return block_out(c, &L->w_down, c->gate, n, L->post_ffn_norm);
    }
    if (!L->post_ffn_norm) return down_residual(c, &L->w_down, c->gate, c->up, n);
    const struct tensor_matrix *w = &L->w_down;
    struct tensor_matmul_opts o = {.glu_up = c->up, .up_stride = w->cols,
                                   .glu_gelu = c->m->arch->act == MODEL_ACT_GELU_TANH};
    float *y = c->xn;
    int64_t ys = w->rows;
    kvik_status st = tensor_matmul_opt(c->pool, c->k, 1, &w, c->gate, w->cols, &y, &ys, n, c->scratch, &o);
    if (st == KVIK_OK) return post_norm_add(c, n, L->post_ffn_norm);
    if (st != KVIK_ERR_INVALID_ARG) return st;
    glu(c, c->gate, c->up, (size_t)n * (size_t)w->cols);
    return block_out(c, w, c->gate, n, L->post_ffn_norm);
}

/* c->x += Wdown (act(gate) * up), the gating done on each row as it is
 * quantized; else (activations not quantized, or too wide) by glu first. */
static kvik_status down_residual(struct model_ctx *c, const struct tensor_matrix *w, float *gate, const float *up,
                                 int n) {
    struct tensor_matmul_opts o = {.glu_up = up, .up_stride = w->cols, .acc = c->x, .acc_stride = c->m->hp.n_embd,
                                   .glu_gelu = c->m->arch->act == MODEL_ACT_GELU_TANH};
    float *y = c->xn;
    int64_t ys = w->rows;
    kvik_status st = tensor_matmul_opt(c->pool, c->k, 1, &w, gate, w->cols, &y, &ys, n, c->scratch, &o);
    if (st != KVIK_ERR_INVALID_ARG) return st;
    glu(c, gate, up, (size_t)n * (size_t)w->cols);
    return matmul_residual(c, w, gate, n);
}

/* What the Q/K/V products do with the rows they have just computed, on
 * the thread that computed them (tensor_matmul_opts.epilogue): rotate Q
 * and K (the kernel table's rope over each head's first rope_dim values),
 * and with an F16 or F32 cache (a value per element, so any run of rows)
 * store K and V into it; a cache of blocks (Q8_0) is stored whole rows at
 * a time at the start of attention. Row ranges start at multiples of 16,
 * so no pair is cut. mat0: the call's first matrix (0 Q, 1 K, 2 V). */
struct qkv_epi {
    struct model_ctx *c;
    struct kv_cache *kv;
    const struct model_batch *b;
    int layer, mat0;
    const float *cs;     /* the layer's angles (model_ctx.rope_cs) */
    from_float_fn store; /* F16: the converter; F32: NULL (copied) */
    bool store_rows;     /* the cache is stored here */
};

static void qkv_epilogue(void *arg, int mi, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
    const struct qkv_epi *e = arg;
    struct model_ctx *c = e->c;
    const struct model_hparams *hp = &c->m->hp;
    int mat = e->mat0 + mi, hd = hp->head_dim;
    size_t dim = (size_t)(mat == 0 ? hp->n_head : hp->n_head_kv) * (size_t)hd;
    float *base = mat == 0 ? c->q : mat == 1 ? c->kv_k : c->kv_v;
    for (int64_t t = t0; t < t1; t++) {
        float *row = base + (size_t)t * dim;
        if (mat < 2) {
            const float *cs = e->cs + (size_t)t * hp->rope_dim;
            for (int64_t h0 = r0 / hd * hd; h0 < r1; h0 += hd) { /* each head's rotated part in the range */
                int64_t a = h0 > r0 ? h0 : r0, z = h0 + hp->rope_dim < r1 ? h0 + hp->rope_dim : r1;
                if (z > a) c->k->rope(row + a, cs + (a - h0), z - a);
            }
        }
        if (mat == 0 || !e->store_rows) continue;
        uint8_t *dst = e->kv->row(e->kv, e->layer, e->b->seq[t], e->b->pos[t], mat == 2);
        if (e->store) e->store(row + r0, dst + (size_t)r0 * 2, r1 - r0);
        else memcpy(dst + (size_t)r0 * sizeof(float), row + r0, (size_t)(r1 - r0) * sizeof(float));
    }
}

/* The Q/K/V rows of families whose steps need whole heads (biases, Q/K
 * norms, NEOX pairs), token by token from a shared counter: bias added,
 * each Q and K head normalised, then rotated. The cache store is left to
 * attention (attn_worker). */
struct qkv_finish_job {
    struct model_ctx *c;
    const struct layer_weights *L;
    const float *cs;
    int n;
    atomic_int next;
};

/* RoPE of one head by the kernel table's pairwise rotation: NEOX pairs
 * (i, i + rope_dim / 2) are moved next to each other and back. */
static void rope_head(const struct model_ctx *c, float *x, const float *cs, float *pairs) {
    const struct model_hparams *hp = &c->m->hp;
    int half = hp->rope_dim / 2;
    if (c->m->arch->rope == MODEL_ROPE_NORM) {
        c->k->rope(x, cs, hp->rope_dim);
        return;
    }
    for (int i = 0; i < half; i++) pairs[2 * i] = x[i], pairs[2 * i + 1] = x[i + half];
    c->k->rope(pairs, cs, hp->rope_dim);
    for (int i = 0; i < half; i++) x[i] = pairs[2 * i], x[i + half] = pairs[2 * i + 1];
}

static void add_bias(float *x, const float *b, int n) {
    if (b)
        for (int i = 0; i < n; i++) x[i] += b[i];
}

static void qkv_finish_worker(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    struct qkv_finish_job *job = arg;
    struct model_ctx *c = job->c;
    const struct model_hparams *hp = &c->m->hp;
    const struct layer_weights *L = job->L;
    int hd = hp->head_dim, q_dim = hp->n_head * hd, kv_dim = hp->n_head_kv * hd;
    float pairs[1024], normed[1024]; /* head_dim <= 1024 (model_load) */
    for (;;) {
        int t = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
        if (t >= job->n) break;
        float *q = c->q + (size_t)t * q_dim, *k = c->kv_k + (size_t)t * kv_dim, *v = c->kv_v + (size_t)t * kv_dim;
        const float *cs = job->cs + (size_t)t * hp->rope_dim;
        add_bias(q, L->bq, q_dim);
        add_bias(k, L->bk, kv_dim);
        add_bias(v, L->bv, kv_dim);
        for (int h = 0; h < hp->n_head + hp->n_head_kv; h++) {
            float *x = h < hp->n_head ? q + (size_t)h * hd : k + (size_t)(h - hp->n_head) * hd;
            const float *w = h < hp->n_head ? L->q_norm : L->k_norm;
            if (w) {
                tensor_rmsnorm(normed, x, w, hd, hp->rms_eps);
                memcpy(x, normed, sizeof(float) * (size_t)hd);
            }
            rope_head(c, x, cs, pairs);
        }
    }
}

/* Whether layer L's Q/K/V steps fit the products' epilogue (llama's:
 * NORM pairs, nothing else per head). */
static bool qkv_in_epilogue(const struct model *m, const struct layer_weights *L) {
    return m->arch->rope == MODEL_ROPE_NORM && !L->bq && !L->bk && !L->bv && !L->q_norm && !L->k_norm;
}

/* Two or three products of rmsnorm(c->x) * norm in one pass over the pool:
 * each row normalised as it is quantized when the activation types agree;
 * else c->xn is normalised here and the products go one by one. */
static kvik_status matmul3_norm(struct model_ctx *c, int n, const float *norm, const struct tensor_matrix *w0,
                                float *y0, const struct tensor_matrix *w1, float *y1, const struct tensor_matrix *w2,
                                float *y2, struct qkv_epi *epi) {
    const struct model_hparams *hp = &c->m->hp;
    const struct tensor_matrix *w[3] = {w0, w1, w2};
    float *y[3] = {y0, y1, y2};
    int64_t ys[3] = {w0->rows, w1->rows, w2 ? w2->rows : 0};
    int count = w2 ? 3 : 2;
    struct tensor_matmul_opts o = {.norm_w = norm, .norm_eps = hp->rms_eps};
    if (epi) o.epilogue = qkv_epilogue, o.epilogue_arg = epi, epi->mat0 = 0;
    kvik_status st = tensor_matmul_opt(c->pool, c->k, count, w, c->x, hp->n_embd, y, ys, n, c->scratch, &o);
    if (st != KVIK_ERR_INVALID_ARG) return st;
    for (int t = 0; t < n; t++)
        tensor_rmsnorm(c->xn + (size_t)t * hp->n_embd, c->x + (size_t)t * hp->n_embd, norm, hp->n_embd, hp->rms_eps);
    o.norm_w = NULL;
    st = tensor_matmul_opt(c->pool, c->k, count, w, c->xn, w0->cols, y, ys, n, c->scratch, &o);
    if (st != KVIK_ERR_INVALID_ARG) return st;
    st = KVIK_OK; /* types that share no quantization: one product each */
    for (int i = 0; i < count && !st; i++) {
        if (epi) epi->mat0 = i;
        st = tensor_matmul_opt(c->pool, c->k, 1, &w[i], c->xn, w0->cols, &y[i], &ys[i], n, c->scratch, &o);
    }
    return st;
}

static int cmp_attn_tok(const void *pa, const void *pb) {
    const struct attn_tok *x = pa, *y = pb;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* The batch's attention items: each sequence's tokens in blocks of up to
 * ATTN_BLOCK_TOKENS, times the K/V heads, the latest blocks (longest
 * contexts) first. A K/V head is never split between items: decoding at
 * long context streams the cache from memory, and one reading per group
 * beat a reading per query head that kept more threads busy (3 items on 2
 * threads against 9; docs/benchmarks.md). */
static void attn_plan(struct model_ctx *c, const struct model_batch *b) {
    const struct model_hparams *hp = &c->m->hp;
    for (int t = 0; t < b->n; t++) c->toks[t] = (struct attn_tok){b->seq[t], b->pos[t], t};
    qsort(c->toks, (size_t)b->n, sizeof *c->toks, cmp_attn_tok);
    c->n_items = 0;
    /* blocks from the end of the sorted batch */
    for (int e = b->n; e > 0;) {
        int t = e - 1;
        while (t > 0 && c->toks[t - 1].seq == c->toks[e - 1].seq) t--;
        /* the sequence's tokens are [t, e): blocks aligned to its first token */
        int start = t + (e - 1 - t) / ATTN_BLOCK_TOKENS * ATTN_BLOCK_TOKENS;
        for (int s0 = start; s0 >= t; s0 -= ATTN_BLOCK_TOKENS) {
            int n = e - s0 < ATTN_BLOCK_TOKENS ? e - s0 : ATTN_BLOCK_TOKENS;
            for (int kvh = 0; kvh < hp->n_head_kv; kvh++)
                c->items[c->n_items++] = (struct attn_item){s0, n, kvh};
            e = s0;
        }
        e = t;
    }
}

struct attn_job {
    struct model_ctx *c;
    struct kv_cache *kv;
    const struct model_batch *b;
    int layer;
    int32_t window;      /* the layer's sliding window (0: none) */
    from_float_fn store; /* F32 -> the cache's row type; NULL: F32 rows, copied */
    bool stored;         /* the Q/K/V products' epilogue stored the rows already */
    atomic_int next;
    atomic_bool failed;
    _Alignas(64) atomic_int next_tok;
    _Alignas(64) atomic_int toks_done;
};

/* Token t's K and V rows (rotated by the products' epilogue) stored in a
 * cache of blocks (model_forward checked that the cache has them). */
static void store_rows(struct attn_job *job, int t) {
    struct model_ctx *c = job->c;
    const struct model_hparams *hp = &c->m->hp;
    const struct model_batch *b = job->b;
    struct kv_cache *kv = job->kv;
    size_t kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    void *kr = kv->row(kv, job->layer, b->seq[t], b->pos[t], false);
    void *vr = kv->row(kv, job->layer, b->seq[t], b->pos[t], true);
    if (job->store) {
        job->store(c->kv_k + t * kv_dim, kr, (int64_t)kv_dim);
        job->store(c->kv_v + t * kv_dim, vr, (int64_t)kv_dim);
    } else {
        memcpy(kr, c->kv_k + t * kv_dim, kv_dim * sizeof(float));
        memcpy(vr, c->kv_v + t * kv_dim, kv_dim * sizeof(float));
    }
}

/* An item's runs of cached rows: the sequence's positions from the first
 * its tokens see (0, or the window's start in a sliding layer: *start) to
 * the block's last, run by run from the cache (this K/V head's part of
 * each row). Returns the number of runs, -1 if the cache has no row for a
 * position. */
static int attn_item_spans(const struct model_ctx *c, struct kv_cache *kv, int layer, int32_t window,
                           const struct attn_item *it, struct attn_span *spans, int32_t *start) {
    int seq = c->toks[it->first].seq;
    int32_t end = c->toks[it->first + it->n_tok - 1].pos, first = c->toks[it->first].pos;
    size_t head_off = tensor_row_size(kv->type, (int64_t)it->kvh * c->m->hp.head_dim);
    int n_spans = 0;
    *start = window > 0 && first >= window ? first - window + 1 : 0;
    for (int p = *start; p <= end;) {
        const void *k, *v;
        int len = kv->span(kv, layer, seq, p, end + 1 - p, &k, &v);
        if (len < 1) return -1;
        spans[n_spans++] = (struct attn_span){(const uint8_t *)k + head_off, (const uint8_t *)v + head_off, len};
        p += len;
    }
    return n_spans;
}

/* With a cache of blocks, first the batch's K/V rows are stored, token by
 * token from a shared counter, and every thread waits until all are
 * (attention reads them; an F16 or F32 cache got them from the products'
 * epilogue); then the items, each one call of the kernel table's
 * attention with the item's query rows. (Claiming the next item ahead and prefetching its
 * first rows measured no faster: the kernel's own prefetch already fills
 * the line fill buffers.) */
static void attn_worker(void *arg, int ith, int nth) {
    struct attn_job *job = arg;
    for (; !job->stored;) {
        int t = atomic_fetch_add_explicit(&job->next_tok, 1, memory_order_relaxed);
        if (t >= job->b->n) break;
        store_rows(job, t);
        atomic_fetch_add_explicit(&job->toks_done, 1, memory_order_release);
    }
    while (!job->stored && atomic_load_explicit(&job->toks_done, memory_order_acquire) < job->b->n) cpu_relax();
    struct model_ctx *c = job->c;
    const struct model_hparams *hp = &c->m->hp;
    struct kv_cache *kv = job->kv;
    int hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    size_t max_rows = (size_t)ATTN_BLOCK_TOKENS * group;
    struct attn_span *spans = c->spans + (size_t)ith * c->max_ctx;
    float *scratch = c->attn_scratch + (size_t)ith * c->attn_floats;
    const float **rq = c->attn_q + (size_t)ith * max_rows;
    float **ro = c->attn_out + (size_t)ith * max_rows;
    int32_t *rl = c->attn_last + (size_t)ith * max_rows;
    float scale = hp->attn_scale;
    /* A thread takes all K/V heads of a block at once when there are items
     * enough for every thread (the heads' rows interleave in the cache, and
     * what the prefetchers bring in for one head serves the next on the
     * same core: batch-16 decode +11%); one head at a time otherwise, so a
     * single sequence's attention still spreads over the threads. */
    int per = c->n_items >= 4 * nth * hp->n_head_kv ? hp->n_head_kv : 1, i = 0, claimed_end = 0;
    for (;; i++) {
        if (i >= claimed_end) {
            i = atomic_fetch_add_explicit(&job->next, per, memory_order_relaxed);
            claimed_end = i + per;
        }
        if (i >= c->n_items) break;
        const struct attn_item *it = &c->items[i];
        int32_t start;
        int n_spans = attn_item_spans(c, kv, job->layer, job->window, it, spans, &start);
        if (n_spans < 0) {
            atomic_store(&job->failed, true);
            return;
        }
        int n_rows = 0;
        for (int j = 0; j < it->n_tok; j++) {
            const struct attn_tok *tk = &c->toks[it->first + j];
            for (int g = 0; g < group; g++) {
                size_t row = ((size_t)tk->idx * hp->n_head + (size_t)it->kvh * group + g) * hd;
                rq[n_rows] = c->q + row, ro[n_rows] = c->attn + row, rl[n_rows] = tk->pos;
                n_rows++;
            }
        }
        struct attn_kv akv = {
            .type = kv->type, .row_bytes = kv->row_bytes, .spans = spans, .n_spans = n_spans, .start = start};
        struct attn_rows rows = {.n = n_rows, .q = rq, .out = ro, .last = rl, .window = job->window};
        c->k->attn(hd, scale, &akv, &rows, scratch);
    }
}

void model_ctx_profile(struct model_ctx *c, int n_tokens) {
    c->prof = (struct model_profile){.n_tokens = n_tokens > 0 ? n_tokens : 0};
}

void model_ctx_profile_get(const struct model_ctx *c, struct model_profile *out) { *out = c->prof; }

const char *model_phase_name(int phase) {
    static const char *const names[MODEL_PHASE_COUNT] = {"setup", "qkv", "attention", "wo",
                                                         "gate_up", "glu", "down", "output"};
    return phase >= 0 && phase < MODEL_PHASE_COUNT ? names[phase] : "?";
}

/* A profiled pass adds the time since the last mark to phase p. */
static inline void prof_mark(struct model_ctx *c, bool on, int64_t *t, int p) {
    if (!on) return;
    int64_t now = clock_ns();
    c->prof.seconds[p] += (double)(now - *t) * 1e-9;
    *t = now;
}

kvik_status model_forward(struct model_ctx *c, struct kv_cache *kv, const struct model_batch *b, float *out,
                          struct kvik_err *err) {
    const struct model *m = c->m;
    const struct model_hparams *hp = &m->hp;
    int n = b->n;
    if (n < 1 || n > c->max_tokens)
        return err_set(err, KVIK_ERR_INVALID_ARG, "model: batch of %d tokens (max %d)", n, c->max_tokens);
    size_t kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    if (kv->row_floats != (int)kv_dim || !kv_type_fits(kv->type, kv->row_floats, hp->head_dim) ||
        kv->row_bytes != tensor_row_size(kv->type, kv->row_floats))
        return err_set(err, KVIK_ERR_INVALID_ARG, "model: cache rows of %d %s values, model needs %zu in heads of %d",
                       kv->row_floats, tensor_type_name(kv->type), kv_dim, hp->head_dim);
    from_float_fn store = kv->type == TENSOR_TYPE_F32 ? NULL : c->k->quantize[kv->type];
    if (kv->type != TENSOR_TYPE_F32 && !store) store = tensor_type_traits(kv->type)->from_float;
    struct qkv_epi epi = {.c = c, .kv = kv, .b = b, .store = store};
    const bool prof = c->prof.n_tokens == n;
    int64_t t_mark = prof ? clock_ns() : 0;
    if (prof) c->prof.calls++;
    int n_out = 0;
    for (int t = 0; t < n; t++) {
        if (b->tokens[t] < 0 || b->tokens[t] >= hp->n_vocab)
            return err_set(err, KVIK_ERR_INVALID_ARG, "model: token id %d out of range (vocabulary %d)",
                           b->tokens[t], hp->n_vocab);
        if (b->pos[t] < 0 || b->pos[t] >= c->max_ctx)
            return err_set(err, KVIK_ERR_INVALID_ARG, "model: position %d outside the context of %d", b->pos[t],
                           c->max_ctx);
        if (b->logits ? b->logits[t] : t == n - 1) c->rows[n_out++] = t;
    }
    /* embeddings */
    const struct type_traits *et = tensor_type_traits(m->token_embd.type);
    for (int t = 0; t < n; t++)
        et->to_float((const uint8_t *)m->token_embd.data + (size_t)b->tokens[t] * m->token_embd.row_bytes,
                     c->x + (size_t)t * hp->n_embd, hp->n_embd);
    if (m->arch->embd_scale) {
        float sc = sqrtf((float)hp->n_embd);
        for (size_t i = 0; i < (size_t)n * hp->n_embd; i++) c->x[i] *= sc;
    }
    /* every token's rows exist in the cache (a block holds all layers, so
     * layer 0 answers for each) */
    for (int t = 0; t < n; t++)
        if (!kv->row(kv, 0, b->seq[t], b->pos[t], false) || !kv->row(kv, 0, b->seq[t], b->pos[t], true))
            return err_set(err, KVIK_ERR_INVALID_ARG, "model: no cache room for sequence %d position %d", b->seq[t],
                           b->pos[t]);
    for (int r = 0; r < c->n_rope_sets; r++)
        for (int t = 0; t < n; t++)
            rope_angles(c->rope_cs[r] + (size_t)t * hp->rope_dim, hp->rope_dim, c->inv_freq[r],
                        (float)b->pos[t] * (r ? 1.0f : hp->rope_scale), hp->rope_attn_factor);
    attn_plan(c, b);
    prof_mark(c, prof, &t_mark, MODEL_PHASE_SETUP);
    kvik_status st = KVIK_OK;
    for (int l = 0; l < hp->n_layer && !st; l++) {
        const struct layer_weights *L = &m->layers[l];
        bool fast = qkv_in_epilogue(m, L);
        epi.layer = l;
        epi.cs = c->rope_cs[L->rope_set];
        epi.store_rows = fast && (kv->type == TENSOR_TYPE_F32 || kv->type == TENSOR_TYPE_F16);
        if (c->obs) {
            static const char *const qkv[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight"};
            static const char *const qkv_fused[] = {"attn_qkv.weight"};
            if (m->arch->fused_qkv) observe_normed(c, l, n, L->attn_norm, qkv_fused, 1);
            else observe_normed(c, l, n, L->attn_norm, qkv, 3);
        }
        if ((st = matmul3_norm(c, n, L->attn_norm, &L->wq, c->q, &L->wk, c->kv_k, &L->wv, c->kv_v,
                               fast ? &epi : NULL)))
            break;
        if (!fast) {
            struct qkv_finish_job fj = {.c = c, .L = L, .cs = epi.cs, .n = n};
            if (n == 1) qkv_finish_worker(&fj, 0, 1);
            else pool_run(c->pool, qkv_finish_worker, &fj);
        }
        prof_mark(c, prof, &t_mark, MODEL_PHASE_QKV);
        struct attn_job job = {.c = c, .kv = kv, .b = b, .layer = l, .window = L->window, .store = store,
                               .stored = epi.store_rows};
        pool_run(c->pool, attn_worker, &job);
        if (atomic_load(&job.failed))
            return err_set(err, KVIK_ERR_INVALID_ARG, "model: cache is missing positions of a sequence");
        prof_mark(c, prof, &t_mark, MODEL_PHASE_ATTN);
        if (c->obs) observe(c, l, "attn_output.weight", c->attn, n, L->wo.cols);
        if ((st = block_out(c, &L->wo, c->attn, n, L->post_attn_norm))) break;
        prof_mark(c, prof, &t_mark, MODEL_PHASE_WO);
        if (c->obs) {
            static const char *const gate_up[] = {"ffn_gate.weight", "ffn_up.weight"};
            static const char *const up_fused[] = {"ffn_up.weight"};
            if (m->arch->fused_gate_up) observe_normed(c, l, n, L->ffn_norm, up_fused, 1);
            else observe_normed(c, l, n, L->ffn_norm, gate_up, 2);
        }
        if ((st = matmul3_norm(c, n, L->ffn_norm, &L->w_gate, c->gate, &L->w_up, c->up, NULL, NULL, NULL))) break;
        prof_mark(c, prof, &t_mark, MODEL_PHASE_GATE_UP);
        prof_mark(c, prof, &t_mark, MODEL_PHASE_GLU); /* now part of the down product */
        if ((st = ffn_out(c, L, l, n))) break;
        prof_mark(c, prof, &t_mark, MODEL_PHASE_DOWN);
    }
    if (st) return err_set(err, st, "model: matrix product failed (%s)", kvik_status_string(st));
    if (n_out == 0) return KVIK_OK;
    for (int i = 0; i < n_out; i++)
        tensor_rmsnorm(c->xn + (size_t)i * hp->n_embd, c->x + (size_t)c->rows[i] * hp->n_embd, m->output_norm, hp->n_embd,
                hp->rms_eps);
    const struct tensor_matrix *wout = &m->output;
    if (c->obs) observe(c, -1, hp->tied_output ? "token_embd.weight" : "output.weight", c->xn, n_out, hp->n_embd);
    int64_t out_stride = m->output.rows;
    struct tensor_matmul_opts o = {.argmax = b->argmax};
    st = tensor_matmul_opt(c->pool, c->k, 1, &wout, c->xn, hp->n_embd, &out, &out_stride, n_out, c->scratch, &o);
    if (st) return err_set(err, st, "model: output product failed");
    prof_mark(c, prof, &t_mark, MODEL_PHASE_OUTPUT);
    return KVIK_OK;
}
