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
 * Each output element is one vec_dot over the whole row, so the result of a
 * token does not depend on which other tokens share the batch.
 */
#include <stdatomic.h>

#include "tensor/kernels.h"

enum { ROW_CHUNK = 16, TOK_BLOCK = 32 };

struct matmul_job {
    const struct tensor_kernels *k;
    const struct tensor_matrix *w;
    const float *x;
    int64_t x_stride;
    float *y;
    int64_t y_stride;
    int64_t n_tok;
    enum tensor_type vt;
    uint8_t *xq;     /* quantized activations, n_tok rows of xq_row bytes */
    size_t xq_row;
    int64_t n_row_chunks, n_tiles;
    vec_dot_x2_fn dot2; /* two-row kernel for small batches, or NULL */
    _Alignas(64) atomic_llong next_tile;
    _Alignas(64) atomic_llong next_quant_row;
};

static void quantize_rows(struct matmul_job *job) {
    from_float_fn q = job->k->quantize[job->vt];
    for (;;) {
        long long t = atomic_fetch_add_explicit(&job->next_quant_row, 1, memory_order_relaxed);
        if (t >= job->n_tok) break;
        q(job->x + t * job->x_stride, job->xq + (size_t)t * job->xq_row, job->w->cols);
    }
}

static inline const void *activation_row(const struct matmul_job *job, int64_t t) {
    return job->xq ? (const void *)(job->xq + (size_t)t * job->xq_row)
                   : (const void *)(job->x + t * job->x_stride);
}

static void matmul_tiles(struct matmul_job *job) {
    vec_dot_fn dot = job->k->vec_dot[job->w->type];
    const struct tensor_matrix *w = job->w;
    const uint8_t *wdata = w->data;
    for (;;) {
        long long tile = atomic_fetch_add_explicit(&job->next_tile, 1, memory_order_relaxed);
        if (tile >= job->n_tiles) break;
        int64_t rc = tile % job->n_row_chunks, tb = tile / job->n_row_chunks;
        int64_t r0 = rc * ROW_CHUNK, r1 = r0 + ROW_CHUNK < w->rows ? r0 + ROW_CHUNK : w->rows;
        int64_t t0 = tb * TOK_BLOCK, t1 = t0 + TOK_BLOCK < job->n_tok ? t0 + TOK_BLOCK : job->n_tok;
        int64_t r = r0;
        if (job->dot2) { /* pairs of rows share the activation work */
            for (; r + 1 < r1; r += 2) {
                const uint8_t *wrow = wdata + (size_t)r * w->row_bytes;
                for (int64_t t = t0; t < t1; t++) {
                    float out[2];
                    job->dot2(w->cols, out, wrow, w->row_bytes, activation_row(job, t));
                    job->y[t * job->y_stride + r] = out[0];
                    job->y[t * job->y_stride + r + 1] = out[1];
                }
            }
        }
        for (; r < r1; r++) {
            const uint8_t *wrow = wdata + (size_t)r * w->row_bytes;
            for (int64_t t = t0; t < t1; t++)
                dot(w->cols, &job->y[t * job->y_stride + r], wrow, activation_row(job, t));
        }
    }
}

static void matmul_worker(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    matmul_tiles(arg);
}

static void quantize_worker(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    quantize_rows(arg);
}

size_t tensor_matmul_scratch_size(int type, int64_t cols, int64_t n_tok) {
    const struct type_traits *tt = tensor_type_traits(type);
    if (!tt || tt->vec_dot_type == TENSOR_TYPE_F32) return 0;
    return tensor_row_size(tt->vec_dot_type, cols) * (size_t)n_tok;
}

kvik_status tensor_matmul(struct pool *pool, const struct tensor_kernels *k,
                          const struct tensor_matrix *w, const float *x, int64_t x_stride,
                          float *y, int64_t y_stride, int64_t n_tok, void *scratch) {
    const struct type_traits *tt = tensor_type_traits(w->type);
    if (!tt || !k->vec_dot[w->type]) return KVIK_ERR_UNSUPPORTED;
    if (n_tok <= 0 || w->rows <= 0 || w->cols % tt->block_size != 0) return KVIK_ERR_INVALID_ARG;
    struct matmul_job job = {
        .k = k, .w = w, .x = x, .x_stride = x_stride, .y = y, .y_stride = y_stride,
        .n_tok = n_tok, .vt = tt->vec_dot_type,
    };
    if (job.vt != TENSOR_TYPE_F32) {
        if (!k->quantize[job.vt] || w->cols % tensor_type_traits(job.vt)->block_size != 0)
            return KVIK_ERR_UNSUPPORTED;
        job.xq = scratch;
        job.xq_row = tensor_row_size(job.vt, w->cols);
        if (n_tok == 1) quantize_rows(&job);
        else pool_run(pool, quantize_worker, &job);
    }
    job.dot2 = n_tok <= 4 ? k->vec_dot_x2[w->type] : NULL;
    job.n_row_chunks = (w->rows + ROW_CHUNK - 1) / ROW_CHUNK;
    job.n_tiles = job.n_row_chunks * ((n_tok + TOK_BLOCK - 1) / TOK_BLOCK);
    pool_run(pool, matmul_worker, &job);
    return KVIK_OK;
}
