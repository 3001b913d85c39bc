/*
 * matmul.c — weight x activation products over the thread pool.
 *
 * Y[t][r] = dot(W[r], X[t]). Activations are first quantized to the weight
 * type's vec_dot_type (one row per token, in parallel), then the work is cut
 * into tiles of (ROW_CHUNK weight rows) x (TOK_BLOCK tokens) that threads
 * take from a shared atomic counter, so a slow core never holds the rest
 * back. Within a tile each weight row is read once from memory and reused
 * against every token of the block while it sits in L1; a block of quantized
 * activations (TOK_BLOCK rows) stays in L2.
 *
 * Several matrices that read the same input (a layer's Q, K and V; its gate
 * and up projections) can go in one call: the input is quantized once and
 * the tiles of all of them share one pool_run (with several tokens, the
 * quantization too: threads wait on a counter in between), which matters in
 * decode, where each product is only tens of microseconds.
 *
 * Whole tiles of weight rows x tokens go to the ISA's tile kernel (weights
 * unpacked once per tile row, activations loaded once per tile column); the
 * rest to the two-row or single-row kernels. All of them compute an element
 * exactly as vec_dot does, so the result of a token does not depend on which
 * other tokens share the batch.
 */
#include <math.h>
#include <stdatomic.h>

#include "tensor/kernels.h"

enum { WHOLE_FEW_TOKENS = 64, MAX_RANGES = 64 };
enum { ROW_CHUNK = 16, TOK_BLOCK = 32, MAX_MATS = 4, ITEMS_PER_THREAD = 4, MIN_STREAM = 64 << 10, MAX_STREAM = 1 << 20 };

struct matmul_job {
    const struct tensor_kernels *k;
    int n_mats;
    const struct tensor_matrix *w[MAX_MATS];
    float *y[MAX_MATS];
    int64_t y_stride[MAX_MATS];
    int64_t first_tile[MAX_MATS + 1]; /* tiles of matrix i: [first_tile[i], first_tile[i+1]) */
    const float *x;
    int64_t x_stride, cols, n_tok, n_tok_blocks;
    enum tensor_type vt;
    uint8_t *xq; /* quantized activations, n_tok rows of xq_row bytes */
    size_t xq_row;
    uint8_t *packed; /* xq prepared for rows_product by pack[vt], after xq in the scratch */
    bool pack;       /* a matrix goes to rows_product: pack the rows once all are quantized */
    bool tile_own;   /* ... or each thread quantizes its rows straight into the tiles (quantize_tile) */
    int64_t pack_nb, pack_units; /* blocks of the activation type per row; (tile, block run) units
                                    (tile_own: threads) */
    const float *norm_w; /* normalise each row first (tensor_matmul_opt) */
    const float *glu_up; /* or each row silu(x) * up (gelu with glu_gelu) */
    bool glu_gelu;
    int64_t up_stride;
    float *acc;          /* acc[t][r] += y[t][r] (matrix 0), per item */
    int64_t acc_stride;
    uint64_t *best;      /* per token, the best (value, row) of matrix 0 so far (argmax_key) */
    void (*epilogue)(void *arg, int mat, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
    void *epilogue_arg;
    float norm_eps;
    bool whole[MAX_MATS]; /* matrix i goes to rows_product, a work item's row groups per call */
    int64_t row_chunk[MAX_MATS]; /* rows per work item (a multiple of rows_group for those) */
    atomic_bool failed; /* a kernel could not allocate its buffers */
    _Alignas(64) atomic_llong next_tile;
    /* ranges (whole products of a few tokens): thread i owns items [lo, hi)
     * of the call, front and back packed in one word, front << 32 | back */
    bool ranges;
    _Alignas(64) _Atomic uint64_t range[MAX_RANGES];
    _Alignas(64) atomic_llong rows_done;
    _Alignas(64) atomic_llong next_pack;
    _Alignas(64) atomic_llong packs_done;
};

enum { PACK_BLOCKS = 8 }; /* activation blocks per pack unit */

/* Where thread i's share of the rows starts (i == nth: the end); with
 * tile_own at a multiple of 8 tokens, where the tiles' lines split. */
static int64_t rows_from(const struct matmul_job *job, int i, int nth) {
    int64_t t = job->n_tok * i / nth;
    if (job->tile_own && i < nth) t = (t + 4) / 8 * 8 < job->n_tok ? (t + 4) / 8 * 8 : job->n_tok;
    return t;
}

/* Thread ith of nth normalises (norm_w) or gates (glu_up) and quantizes its
 * share of the rows, a fixed range: a shared counter per row cost a
 * cache-line round trip between the cores each, and the rows' lines
 * (written by the other core in the phase before) are all prefetched
 * first. With tile_own each row goes straight into the whole products'
 * tiles (the last thread also writes the padding) and the thread counts
 * itself on packs_done; else into xq, and once every row is (the threads
 * wait for the last one) the packing for the whole products, in units of
 * PACK_BLOCKS blocks of one token tile, from a counter. */
static void quantize_rows(struct matmul_job *job, int ith, int nth) {
    from_float_fn q = job->k->quantize[job->vt];
    float tmp[job->norm_w || job->glu_up ? job->cols : 1]; /* cols <= TENSOR_NORM_MAX_COLS then */
    int64_t t0 = rows_from(job, ith, nth), t1 = rows_from(job, ith + 1, nth);
    for (int64_t t = t0; t < t1; t++)
        for (int64_t c = 0; c < job->cols; c += 16) __builtin_prefetch(job->x + t * job->x_stride + c, 0, 3);
    for (int64_t t = t0; t < t1; t++) {
        const float *x = job->x + t * job->x_stride;
        if (job->norm_w) {
            tensor_rmsnorm(tmp, x, job->norm_w, job->cols, job->norm_eps);
            x = tmp;
        } else if (job->glu_up) {
            memcpy(tmp, x, (size_t)job->cols * sizeof *tmp);
            (job->glu_gelu ? job->k->gelu_mul : job->k->silu_mul)(tmp, job->glu_up + t * job->up_stride, job->cols);
            x = tmp;
        }
        if (job->tile_own) job->k->quantize_tile[job->vt](x, job->cols, t, job->packed);
        else q(x, job->xq + (size_t)t * job->xq_row, job->cols);
    }
    if (job->tile_own) {
        for (int64_t t = job->n_tok; ith == nth - 1 && t % job->k->rows_group; t++)
            job->k->quantize_tile[job->vt](NULL, job->cols, t, job->packed);
        atomic_fetch_add_explicit(&job->packs_done, 1, memory_order_release);
        return;
    }
    atomic_fetch_add_explicit(&job->rows_done, t1 - t0, memory_order_release);
    if (!job->pack) return;
    while (atomic_load_explicit(&job->rows_done, memory_order_acquire) < job->n_tok) cpu_relax();
    int64_t runs = (job->pack_nb + PACK_BLOCKS - 1) / PACK_BLOCKS;
    for (;;) {
        long long u = atomic_fetch_add_explicit(&job->next_pack, 1, memory_order_relaxed);
        if (u >= job->pack_units) break;
        int64_t tile = u / runs, b0 = u % runs * PACK_BLOCKS;
        int64_t b1 = b0 + PACK_BLOCKS < job->pack_nb ? b0 + PACK_BLOCKS : job->pack_nb;
        job->k->pack[job->vt](job->xq, job->xq_row, job->cols, tile, b0, b1, job->n_tok, job->packed);
        atomic_fetch_add_explicit(&job->packs_done, 1, memory_order_release);
    }
}

/* Vectors of the baseline instruction set (two doubles, four floats): the
 * eight partial sums below stay in registers, where a loop over an array
 * of them went through memory at every step. Element by element the same
 * operations as scalar code (no contraction), so the same bits. */
typedef double v2d __attribute__((vector_size(16)));
typedef float v2f __attribute__((vector_size(8)));
typedef float v4f __attribute__((vector_size(16)));

static inline v2d sq2(const float *x) {
    v2f f;
    memcpy(&f, x, sizeof f);
    v2d d = __builtin_convertvector(f, v2d);
    return d * d;
}

void tensor_rmsnorm(float *restrict y, const float *restrict x, const float *restrict w, int64_t n, float eps) {
    /* 8 interleaved partial sums, part[j] over x[8k + j], added in order */
    v2d p0 = {0, 0}, p1 = p0, p2 = p0, p3 = p0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        p0 += sq2(x + i), p1 += sq2(x + i + 2);
        p2 += sq2(x + i + 4), p3 += sq2(x + i + 6);
    }
    double ss = 0;
    ss += p0[0], ss += p0[1], ss += p1[0], ss += p1[1];
    ss += p2[0], ss += p2[1], ss += p3[0], ss += p3[1];
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    const v4f vs = {scale, scale, scale, scale};
    for (i = 0; i + 4 <= n; i += 4) {
        v4f xv, wv;
        memcpy(&xv, x + i, sizeof xv);
        memcpy(&wv, w + i, sizeof wv);
        xv = xv * vs * wv;
        memcpy(y + i, &xv, sizeof xv);
    }
    for (; i < n; i++) y[i] = x[i] * scale * w[i];
}

static inline const void *activation_row(const struct matmul_job *job, int64_t t) {
    return job->xq ? (const void *)(job->xq + (size_t)t * job->xq_row)
                   : (const void *)(job->x + t * job->x_stride);
}

/* Rows [r, r1) of matrix mi against tokens [t0, t1), one or two rows at a
 * time. */
static void run_rows(const struct matmul_job *job, int mi, int64_t r, int64_t r1, int64_t t0, int64_t t1) {
    const struct tensor_matrix *w = job->w[mi];
    const uint8_t *wdata = w->data;
    float *y = job->y[mi];
    int64_t ys = job->y_stride[mi];
    vec_dot_x2_fn dot2 = job->k->vec_dot_x2[w->type];
    if (dot2) { /* pairs of rows share the activation work */
        for (; r + 1 < r1; r += 2) {
            const uint8_t *wrow = wdata + (size_t)r * w->row_bytes;
            for (int64_t t = t0; t < t1; t++) {
                float out[2];
                dot2(w->cols, out, wrow, w->row_bytes, activation_row(job, t));
                y[t * ys + r] = out[0];
                y[t * ys + r + 1] = out[1];
            }
        }
    }
    vec_dot_fn dot = job->k->vec_dot[w->type];
    for (; r < r1; r++) {
        const uint8_t *wrow = wdata + (size_t)r * w->row_bytes;
        for (int64_t t = t0; t < t1; t++) dot(w->cols, &y[t * ys + r], wrow, activation_row(job, t));
    }
}

/* Rows [r0, r1) of matrix mi against tokens [t0, t1): whole tiles of
 * tile_rows x tile_cols where the kernel table has them, the rest one or two
 * rows at a time. Every kernel computes an element the same way, so the
 * split does not change any result. */
static void run_tile(const struct matmul_job *job, int mi, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
    const struct tensor_matrix *w = job->w[mi];
    vec_dot_tile_fn tile = job->k->vec_dot_tile[w->type];
    int64_t R = job->k->tile_rows, C = job->k->tile_cols;
    int64_t r = r0;
    if (tile && t1 - t0 >= C) {
        /* activation rows: quantized ones, or the F32 input itself (float weights) */
        size_t as = job->xq ? job->xq_row : (size_t)job->x_stride * sizeof(float);
        const uint8_t *wdata = w->data;
        float *y = job->y[mi];
        int64_t ys = job->y_stride[mi], t_tiles = t0 + (t1 - t0) / C * C;
        for (; r + R <= r1; r += R) {
            const uint8_t *wrow = wdata + (size_t)r * w->row_bytes;
            for (int64_t t = t0; t < t_tiles; t += C)
                tile(w->cols, &y[t * ys + r], (size_t)ys, wrow, w->row_bytes, activation_row(job, t), as);
            if (t_tiles < t1) run_rows(job, mi, r, r + R, t_tiles, t1);
        }
    }
    run_rows(job, mi, r, r1, t0, t1);
}

/* tensor_matmul_add: the residual sum of rows [r0, r1) x tokens [t0, t1)
 * of matrix 0, by the thread that computed them, while they are in its
 * cache; four at a time (this file is built for the baseline ISA, where
 * the plain loop stayed scalar). */
static void add_region(const struct matmul_job *job, int mi, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
    if (!job->acc || mi != 0) return;
    const float *y = job->y[0];
    for (int64_t t = t0; t < t1; t++) {
        float *a = job->acc + t * job->acc_stride;
        const float *v = y + t * job->y_stride[0];
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) {
            v4f av, vv;
            memcpy(&av, a + r, sizeof av);
            memcpy(&vv, v + r, sizeof vv);
            av += vv;
            memcpy(a + r, &av, sizeof av);
        }
        for (; r < r1; r++) a[r] += v[r];
    }
}

/* tensor_matmul_opts.argmax: each item finds the first largest element of
 * its part of a token's row with the kernel table's argmax and offers it as
 * a key that orders (value, then lower row first), kept by an atomic
 * maximum per token. For finite and infinite values that is exactly the
 * first largest of the whole row, whatever the items; -0 is offered as +0,
 * as the argmax treats them as equal. An item whose answer is a NaN (a part
 * that is all NaN, or begins with one) offers NO_KEY, above every key: the
 * call reports -1 for that token. */
#define NO_KEY UINT64_MAX
static uint64_t argmax_key(float v, int64_t r) {
    uint32_t u;
    v += 0.0f; /* -0 -> +0 */
    memcpy(&u, &v, sizeof u);
    u = u & 0x80000000u ? ~u : u | 0x80000000u; /* order of the floats as unsigned */
    return (uint64_t)u << 32 | (uint32_t)~(uint32_t)r;
}

static void argmax_region(struct matmul_job *job, int mi, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
    if (!job->best || mi != 0) return;
    for (int64_t t = t0; t < t1; t++) {
        const float *y = job->y[0] + t * job->y_stride[0];
        int64_t r = r0 + job->k->argmax(y + r0, r1 - r0);
        uint64_t key = y[r] != y[r] ? NO_KEY : argmax_key(y[r], r), cur = __atomic_load_n(&job->best[t], __ATOMIC_RELAXED);
        while (key > cur &&
               !__atomic_compare_exchange_n(&job->best[t], &cur, key, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    }
}

/* The next item of thread ith with ranges: the front of its own range,
 * else (its range done) the back of another's; -1 when none is left. */
static long long claim_range(struct matmul_job *job, int ith, int nth) {
    for (int k = 0; k < nth; k++) {
        _Atomic uint64_t *r = &job->range[(ith + k) % nth];
        uint64_t cur = atomic_load_explicit(r, memory_order_relaxed);
        for (;;) {
            uint32_t front = (uint32_t)(cur >> 32), back = (uint32_t)cur;
            if (front >= back) break;
            uint64_t next = k == 0 ? cur + (1ull << 32) : cur - 1;
            if (atomic_compare_exchange_weak_explicit(r, &cur, next, memory_order_relaxed, memory_order_relaxed))
                return k == 0 ? front : back - 1;
        }
    }
    return -1;
}

static void matmul_worker(void *arg, int ith, int nth) {
    struct matmul_job *job = arg;
    int64_t total = job->first_tile[job->n_mats];
    for (;;) {
        long long tile = job->ranges ? claim_range(job, ith, nth)
                                     : atomic_fetch_add_explicit(&job->next_tile, 1, memory_order_relaxed);
        if (tile < 0 || tile >= total) break;
        int mi = 0;
        while (tile >= job->first_tile[mi + 1]) mi++;
        int64_t local = tile - job->first_tile[mi];
        int64_t rows = job->w[mi]->rows;
        int64_t chunk = job->row_chunk[mi], n_row_chunks = (rows + chunk - 1) / chunk;
        if (job->whole[mi]) { /* the item's row groups in one call */
            int64_t end = (local + 1) * chunk < rows ? (local + 1) * chunk : rows;
            if (!job->k->rows_product[job->w[mi]->type](job->w[mi], local * chunk, end, job->xq, job->xq_row,
                                                        job->packed, job->n_tok, job->y[mi], job->y_stride[mi]))
                atomic_store_explicit(&job->failed, true, memory_order_relaxed);
            add_region(job, mi, local * chunk, end, 0, job->n_tok);
            argmax_region(job, mi, local * chunk, end, 0, job->n_tok);
            if (job->epilogue) job->epilogue(job->epilogue_arg, mi, local * chunk, end, 0, job->n_tok);
            continue;
        }
        int64_t rc = local % n_row_chunks, tb = local / n_row_chunks;
        int64_t r0 = rc * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
        int64_t t0 = tb * TOK_BLOCK, t1 = t0 + TOK_BLOCK < job->n_tok ? t0 + TOK_BLOCK : job->n_tok;
        run_tile(job, mi, r0, r1, t0, t1);
        add_region(job, mi, r0, r1, t0, t1);
        argmax_region(job, mi, r0, r1, t0, t1);
        if (job->epilogue) job->epilogue(job->epilogue_arg, mi, r0, r1, t0, t1);
    }
}

/* The whole call in one pool_run: the activations quantized (and packed),
 * every thread waiting until they all are, then the products. */
static void quantize_matmul_worker(void *arg, int ith, int nth) {
    struct matmul_job *job = arg;
    quantize_rows(job, ith, nth);
    if (job->pack) {
        while (atomic_load_explicit(&job->packs_done, memory_order_acquire) < job->pack_units) cpu_relax();
    } else {
        while (atomic_load_explicit(&job->rows_done, memory_order_acquire) < job->n_tok) cpu_relax();
    }
    matmul_worker(arg, ith, nth);
}

/* Weight rows per work item. With a few tokens the product streams the
 * weights once, and the stream runs fastest when each thread reads long
 * contiguous runs: decode on tinyllama Q4_K went from 25 to 32 tok/s when
 * items grew from 16 rows (18 KiB) to 512 KiB. Items are still small enough
 * that every thread gets about ITEMS_PER_THREAD of them, so a slow core does
 * not hold the rest back. */
static int64_t row_chunk(const struct tensor_matrix *w, int64_t n_tok, size_t call_bytes, int n_threads,
                         int64_t unit, bool whole) {
    if (n_tok > TOK_BLOCK / 4) {
        if (!whole) return unit;
        /* A whole product takes every token at once: items of one row
         * group each would make the shared counter a hot spot (the output
         * matrix alone has thousands); 8 items per thread. With up to
         * WHOLE_FEW_TOKENS tokens the product streams its weights and a
         * thread does best with long contiguous runs, which the threads'
         * ranges of consecutive items give (matmul_n; with items handed
         * out one by one, 2 per thread were 8% faster than 8); with more
         * tokens it is compute-bound, and 8 balance the threads better
         * (pp512 -3% with 2). */
        int64_t per = 8;
        int64_t rows = (w->rows + (int64_t)n_threads * per - 1) / ((int64_t)n_threads * per);
        return (rows + unit - 1) / unit * unit;
    }
    size_t bytes = call_bytes / ((size_t)n_threads * ITEMS_PER_THREAD);
    bytes = bytes < MIN_STREAM ? MIN_STREAM : bytes > MAX_STREAM ? MAX_STREAM : bytes;
    int64_t rows = ((int64_t)bytes + (int64_t)w->row_bytes - 1) / (int64_t)w->row_bytes;
    return (rows + unit - 1) / unit * unit;
}

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* Room for the packed activations of any table's rows_product (16-token
 * tiles, see vec_dot_amx.c). */
static size_t packed_room(int vt, int64_t cols, int64_t n_tok) {
    if (n_tok < 1) return 0;
    if (n_tok == 1) /* mat-vec: a sum per block (Q8_0) or 8 x int16 per super-block (Q8_K); nothing for Q8_1 */
        return vt == TENSOR_TYPE_Q8_0 ? (size_t)(cols / 32) * 4 : vt == TENSOR_TYPE_Q8_K ? (size_t)(cols / 256) * 16 : 0;
    size_t tiles = (size_t)((n_tok + 15) / 16);
    /* Q8_0, Q8_1: per block 512 quant bytes, then two lines of 8 scales (and 8 sums) */
    if (vt == TENSOR_TYPE_Q8_0 || vt == TENSOR_TYPE_Q8_1) return tiles * (size_t)(cols / 32) * (512 + 128);
    /* Q8_K: per super-block 8 x 512 quant bytes, 16 scales, 8 x 16 sums */
    if (vt == TENSOR_TYPE_Q8_K) return tiles * (size_t)(cols / 256) * (8 * 512 + 64 + 8 * 64);
    return 0;
}

size_t tensor_matmul_scratch_size(int type, int64_t cols, int64_t n_tok) {
    const struct type_traits *tt = tensor_type_traits(type);
    if (!tt || tt->vec_dot_type == TENSOR_TYPE_F32) return 0;
    return round_up(tensor_row_size(tt->vec_dot_type, cols) * (size_t)n_tok, 64) +
           packed_room(tt->vec_dot_type, cols, n_tok);
}

kvik_status tensor_matmul_opt(struct pool *pool, const struct tensor_kernels *k, int n_mats,
                              const struct tensor_matrix *const *w, const float *x, int64_t x_stride,
                              float *const *y, const int64_t *y_stride, int64_t n_tok, void *scratch,
                              const struct tensor_matmul_opts *o) {
    static const struct tensor_matmul_opts none;
    if (!o) o = &none;
    if (n_mats < 1 || n_mats > MAX_MATS || n_tok <= 0) return KVIK_ERR_INVALID_ARG;
    const bool prep = o->norm_w || o->glu_up; /* rows rewritten before they are quantized */
    if ((o->norm_w && o->glu_up) || (prep && w[0]->cols > TENSOR_NORM_MAX_COLS)) return KVIK_ERR_INVALID_ARG;
    if (o->glu_up && !(o->glu_gelu ? k->gelu_mul : k->silu_mul)) return KVIK_ERR_UNSUPPORTED;
    if (o->argmax && (!k->argmax || w[0]->rows > INT32_MAX)) return KVIK_ERR_UNSUPPORTED;
    struct matmul_job job = {.k = k, .n_mats = n_mats, .x = x, .x_stride = x_stride, .cols = w[0]->cols,
                             .n_tok = n_tok, .norm_w = o->norm_w, .norm_eps = o->norm_eps, .glu_up = o->glu_up, .glu_gelu = o->glu_gelu,
                             .up_stride = o->up_stride, .acc = o->acc, .acc_stride = o->acc_stride,
                             .best = (uint64_t *)o->argmax, .epilogue = o->epilogue,
                             .epilogue_arg = o->epilogue_arg};
    if (job.best) memset(job.best, 0, (size_t)n_tok * sizeof *job.best); /* below every key */
    job.n_tok_blocks = (n_tok + TOK_BLOCK - 1) / TOK_BLOCK;
    for (int i = 0; i < n_mats; i++) {
        const struct type_traits *tt = tensor_type_traits(w[i]->type);
        if (!tt || !k->vec_dot[w[i]->type]) return KVIK_ERR_UNSUPPORTED;
        if (w[i]->rows <= 0 || w[i]->cols != job.cols || w[i]->cols % tt->block_size != 0)
            return KVIK_ERR_INVALID_ARG;
        if (i == 0) job.vt = tt->vec_dot_type;
        else if (tt->vec_dot_type != job.vt) return KVIK_ERR_INVALID_ARG; /* one shared quantization */
        job.w[i] = w[i];
        job.y[i] = y[i];
        job.y_stride[i] = y_stride[i];
        job.whole[i] = k->rows_product[w[i]->type] != NULL;
    }
    if (prep && job.vt == TENSOR_TYPE_F32) return KVIK_ERR_INVALID_ARG; /* no quantization to fold it into */
    size_t call_bytes = 0;
    for (int i = 0; i < n_mats; i++) call_bytes += (size_t)w[i]->rows * w[i]->row_bytes;
    for (int i = 0; i < n_mats; i++) {
        job.row_chunk[i] = row_chunk(w[i], n_tok, call_bytes, pool_size(pool), job.whole[i] ? k->rows_group : ROW_CHUNK,
                                     job.whole[i]);
        int64_t items = (w[i]->rows + job.row_chunk[i] - 1) / job.row_chunk[i];
        job.first_tile[i + 1] = job.first_tile[i] + (job.whole[i] ? items : items * job.n_tok_blocks);
    }
    bool any_whole = false, all_whole = true;
    for (int i = 0; i < n_mats; i++) any_whole |= job.whole[i], all_whole &= job.whole[i];
    int nth = pool_size(pool);
    if (all_whole && n_tok <= WHOLE_FEW_TOKENS && nth <= MAX_RANGES && job.first_tile[n_mats] < UINT32_MAX) {
        /* Each thread a contiguous run of items, so that what a thread
         * prefetches past the end of one item is its next (claimed one by
         * one from a shared counter, the threads' items alternated: gate/up
         * at batch 16 -0.2 ms a step); a thread done with its own takes
         * the others' last items. */
        job.ranges = true;
        for (int i = 0; i < nth; i++) {
            uint64_t lo = (uint64_t)(job.first_tile[n_mats] * i / nth), hi = (uint64_t)(job.first_tile[n_mats] * (i + 1) / nth);
            atomic_init(&job.range[i], lo << 32 | hi);
        }
    }
    if (job.vt != TENSOR_TYPE_F32) {
        if (!k->quantize[job.vt] || job.cols % tensor_type_traits(job.vt)->block_size != 0)
            return KVIK_ERR_UNSUPPORTED;
        job.xq = scratch;
        job.xq_row = tensor_row_size(job.vt, job.cols);
        if (any_whole) { /* each row packed once quantized, for every row group */
            if (!k->pack[job.vt] || k->packed_size[job.vt](job.cols, n_tok) > packed_room(job.vt, job.cols, n_tok))
                return KVIK_ERR_UNSUPPORTED;
            job.packed = job.xq + round_up(job.xq_row * (size_t)n_tok, 64);
            job.pack = true;
            job.pack_nb = job.cols / tensor_type_traits(job.vt)->block_size;
            job.pack_units = (n_tok + k->rows_group - 1) / k->rows_group * ((job.pack_nb + PACK_BLOCKS - 1) / PACK_BLOCKS);
            if (all_whole && n_tok > 1 && k->quantize_tile[job.vt]) { /* no xq rows: threads, not units, counted */
                job.tile_own = true;
                job.pack_units = nth;
            }
        }
        if (n_tok > 1) pool_run(pool, quantize_matmul_worker, &job);
        else quantize_rows(&job, 0, 1);
    } else if (any_whole) {
        return KVIK_ERR_UNSUPPORTED;
    }
    if (job.vt == TENSOR_TYPE_F32 || n_tok == 1) pool_run(pool, matmul_worker, &job);
    if (atomic_load(&job.failed)) return KVIK_ERR_NOMEM;
    if (job.best) /* keys -> rows */
        for (int64_t t = 0; t < n_tok; t++)
            o->argmax[t] = job.best[t] == NO_KEY ? -1 : (int64_t)(uint32_t)~(uint32_t)job.best[t];
    return KVIK_OK;
}

kvik_status tensor_matmul_n(struct pool *pool, const struct tensor_kernels *k, int n_mats,
                            const struct tensor_matrix *const *w, const float *x, int64_t x_stride,
                            float *const *y, const int64_t *y_stride, int64_t n_tok, void *scratch) {
    return tensor_matmul_opt(pool, k, n_mats, w, x, x_stride, y, y_stride, n_tok, scratch, NULL);
}

kvik_status tensor_matmul(struct pool *pool, const struct tensor_kernels *k,
                          const struct tensor_matrix *w, const float *x, int64_t x_stride,
                          float *y, int64_t y_stride, int64_t n_tok, void *scratch) {
    return tensor_matmul_n(pool, k, 1, &w, x, x_stride, &y, &y_stride, n_tok, scratch);
}

kvik_status tensor_matmul_add(struct pool *pool, const struct tensor_kernels *k, const struct tensor_matrix *w,
                              const float *x, int64_t x_stride, float *y, int64_t y_stride, int64_t n_tok,
                              void *scratch, float *acc, int64_t acc_stride) {
    if (!acc) return KVIK_ERR_INVALID_ARG;
    struct tensor_matmul_opts o = {.acc = acc, .acc_stride = acc_stride};
    return tensor_matmul_opt(pool, k, 1, &w, x, x_stride, &y, &y_stride, n_tok, scratch, &o);
}
