/*
 * bench_attn.c — the attention kernel of a kernel table on a decode step's
 * shape: per call one sequence's K/V head and its group of query rows at
 * the sequence's last position, the cache in blocks of 16 positions laid
 * out like the paged pool's (a block holds its 16 K rows, then its 16 V
 * rows, of every K/V head) at random places of the pool.
 *
 * Two measurements: "in cache", each thread calling over one sequence
 * again and again (a few hundred KiB: L2), and "from memory", the threads
 * walking sequences spread over a pool of p->bandwidth_bytes / 2 (several
 * times the last-level cache), each sequence once per repetition.
 */
#include <stdlib.h>
#include <string.h>

#include "tools/bench.h"

enum { BLOCK = 16, KV_HEADS = 3, GROUP = 3, HEAD_DIM = 64 };

struct attn_bench {
    const struct tensor_kernels *k;
    int type, ctx, n_blocks; /* blocks per sequence */
    size_t row_bytes, head_bytes, block_bytes;
    uint8_t *pool;
    int32_t *place; /* [n_seqs * n_blocks] each block's slot in the pool */
    int n_seqs, reps_each;
    bool in_cache;
    float *q, *out, *scratch; /* per thread */
    struct attn_span *spans;  /* per thread [n_blocks] */
    size_t scratch_floats;
};

static void attn_call(struct attn_bench *b, int ith, int seq, int head) {
    struct attn_span *sp = b->spans + (size_t)ith * b->n_blocks;
    for (int i = 0; i < b->n_blocks; i++) {
        const uint8_t *blk = b->pool + (size_t)b->place[(size_t)seq * b->n_blocks + i] * b->block_bytes;
        int n = b->ctx - i * BLOCK < BLOCK ? b->ctx - i * BLOCK : BLOCK;
        size_t off = (size_t)head * b->head_bytes;
        sp[i] = (struct attn_span){blk + off, blk + BLOCK * b->row_bytes + off, n};
    }
    const float *q[GROUP];
    float *o[GROUP];
    int32_t last[GROUP];
    for (int g = 0; g < GROUP; g++) {
        q[g] = b->q + ((size_t)ith * GROUP + g) * HEAD_DIM;
        o[g] = b->out + ((size_t)ith * GROUP + g) * HEAD_DIM;
        last[g] = b->ctx - 1;
    }
    struct attn_kv kv = {.type = b->type, .row_bytes = b->row_bytes, .spans = sp, .n_spans = b->n_blocks};
    struct attn_rows rows = {.n = GROUP, .q = q, .out = o, .last = last};
    b->k->attn(HEAD_DIM, 0.125f, &kv, &rows, b->scratch + (size_t)ith * b->scratch_floats);
}

static void attn_worker(void *arg, int ith, int nth) {
    struct attn_bench *b = arg;
    if (b->in_cache) {
        for (int r = 0; r < b->reps_each; r++)
            for (int h = 0; h < KV_HEADS; h++) attn_call(b, ith, ith, h);
        return;
    }
    for (int s = ith; s < b->n_seqs; s += nth)
        for (int h = 0; h < KV_HEADS; h++) attn_call(b, ith, s, h);
}

kvik_status bench_attn(struct pool *pool, const struct bench_params *p, int type, struct bench_attn_result *out,
                       struct kvik_err *err) {
    const struct type_traits *tt = tensor_type_traits(type);
    if (!tt || (type != TENSOR_TYPE_F32 && type != TENSOR_TYPE_F16 && type != TENSOR_TYPE_Q8_0))
        return err_set(err, KVIK_ERR_UNSUPPORTED, "no %s attention cache", tt ? tensor_type_name(type) : "?");
    int nth = pool_size(pool);
    struct attn_bench b = {.k = p->kernels ? p->kernels : tensor_kernels_best(), .type = type, .ctx = p->attn_ctx};
    b.n_blocks = (b.ctx + BLOCK - 1) / BLOCK;
    b.head_bytes = tensor_row_size(type, HEAD_DIM);
    b.row_bytes = KV_HEADS * b.head_bytes;
    b.block_bytes = 2 * BLOCK * b.row_bytes;
    size_t seq_bytes = (size_t)b.n_blocks * b.block_bytes, pool_bytes = p->bandwidth_bytes / 2;
    b.n_seqs = (int)(pool_bytes / seq_bytes);
    if (b.n_seqs < nth) b.n_seqs = nth;
    size_t n_slots = (size_t)b.n_seqs * (size_t)b.n_blocks;
    b.scratch_floats = (tensor_attn_scratch_floats(HEAD_DIM, GROUP) + 15) & ~(size_t)15;
    b.pool = mem_alloc_aligned(n_slots * b.block_bytes);
    b.place = malloc(n_slots * sizeof *b.place);
    b.q = mem_alloc_aligned(sizeof(float) * (size_t)nth * GROUP * HEAD_DIM);
    b.out = mem_alloc_aligned(sizeof(float) * (size_t)nth * GROUP * HEAD_DIM);
    b.scratch = mem_alloc_aligned(sizeof(float) * (size_t)nth * b.scratch_floats);
    b.spans = malloc(sizeof *b.spans * (size_t)nth * (size_t)b.n_blocks);
    float *row = malloc(sizeof(float) * KV_HEADS * HEAD_DIM);
    kvik_status st = KVIK_ERR_NOMEM;
    if (!b.pool || !b.place || !b.q || !b.out || !b.scratch || !b.spans || !row) {
        err_set(err, st, "attention buffers (%.0f MiB of cache)", (double)(n_slots * b.block_bytes) / (1 << 20));
        goto done;
    }
    /* 16 blocks of values in [-1, 1) stored in the cache's type, copied
     * round the pool; the blocks at a random permutation of the slots */
    uint64_t rng = 0x2545f4914f6cdd1dull;
    enum { TEMPLATES = 16 };
    for (size_t s = 0; s < n_slots; s++) {
        uint8_t *blk = b.pool + s * b.block_bytes;
        if (s >= TEMPLATES) {
            memcpy(blk, b.pool + (s % TEMPLATES) * b.block_bytes, b.block_bytes);
        } else {
            for (int r = 0; r < 2 * BLOCK; r++) {
                for (int d = 0; d < KV_HEADS * HEAD_DIM; d++) {
                    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                    row[d] = (float)(rng >> 40) / (float)(1 << 23) - 1.0f;
                }
                uint8_t *dst = blk + (size_t)r * b.row_bytes;
                if (type == TENSOR_TYPE_F32) memcpy(dst, row, sizeof(float) * KV_HEADS * HEAD_DIM);
                else tt->from_float(row, dst, KV_HEADS * HEAD_DIM);
            }
        }
        b.place[s] = (int32_t)s;
    }
    for (size_t i = n_slots - 1; i > 0; i--) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        size_t j = (size_t)(rng % (i + 1));
        int32_t t = b.place[i];
        b.place[i] = b.place[j], b.place[j] = t;
    }
    for (size_t i = 0; i < (size_t)nth * GROUP * HEAD_DIM; i++) b.q[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    int reps = p->reps < 5 ? p->reps : 5;
    double tc[5], tm[5];
    /* in cache: enough calls to time milliseconds, after a warm-up */
    b.in_cache = true;
    b.reps_each = 1;
    pool_run(pool, attn_worker, &b);
    b.reps_each = (int)(20000 / b.ctx) + 1;
    for (int r = 0; r < reps; r++) {
        int64_t t0 = clock_ns();
        pool_run(pool, attn_worker, &b);
        tc[r] = (double)(clock_ns() - t0) / ((double)b.reps_each * KV_HEADS * b.ctx);
    }
    b.in_cache = false;
    for (int r = 0; r < reps; r++) {
        int64_t t0 = clock_ns();
        pool_run(pool, attn_worker, &b);
        tm[r] = (double)(clock_ns() - t0);
    }
    double per_thread = (double)((b.n_seqs + nth - 1) / nth) * KV_HEADS * b.ctx;
    *out = (struct bench_attn_result){.type = type, .head_dim = HEAD_DIM, .group = GROUP, .ctx = b.ctx};
    out->cache_ns = bench_median(tc, reps);
    out->memory_ns = bench_median(tm, reps) / per_thread;
    out->memory_gbs = (double)b.n_seqs * b.ctx * KV_HEADS * 2.0 * (double)b.head_bytes / bench_median(tm, reps);
    st = KVIK_OK;
done:
    mem_free(b.pool), mem_free(b.q), mem_free(b.out), mem_free(b.scratch);
    free(b.place), free(b.spans), free(row);
    return st;
}
