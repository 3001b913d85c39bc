/*
 * kernels.h — internal declarations shared by the per-ISA kernel files and
 * the dispatcher. Not part of any public interface.
 *
 * Each ISA file fills one struct tensor_kernels. The scalar table is the
 * reference: every SIMD kernel must agree with it up to float reduction
 * order (tests/test_kernels.c).
 */
#ifndef KVIK_TENSOR_KERNELS_H
#define KVIK_TENSOR_KERNELS_H

#include "tensor/tensor.h"

void tensor_kernels_init_scalar(struct tensor_kernels *k);
#ifndef KVIK_NO_SIMD
void tensor_kernels_init_avx2(struct tensor_kernels *k);
void tensor_kernels_init_avx512(struct tensor_kernels *k);
void tensor_kernels_init_amx(struct tensor_kernels *k); /* on top of a copy of the AVX-512 table */
/* The K-quant whole products on AMX (vec_dot_k_amx.c): Q6_K, and Q4_K's
 * mat-vec from repacked records, on the table tensor_kernels_init_amx
 * filled (whose Q4_K products it keeps for the rest). */
void tensor_kernels_init_amx_k(struct tensor_kernels *k);
/* Shared by the AMX files: the calling thread's tiles configured for the
 * layout most AMX kernels use (vec_dot_amx.c), kept from call to call; or
 * for the full layout (all eight tiles 16 rows x 64 bytes: K = 64
 * products), which the next tensor_amx_configure replaces; and the
 * thread's scratch of at least bytes bytes (64-byte aligned, kept until
 * the next call asks for more or the thread exits; NULL on no memory). */
void tensor_amx_configure(void);
void tensor_amx_configure_full(void);
/* The layout of attn_amx.c's tiles (also replaced by the next configure). */
void tensor_amx_configure_attn(void);
/* Attention on BF16 tiles (attn_amx.c) on top of the table's vector kernel,
 * which it keeps for the caches and head sizes it does not take. */
void tensor_kernels_init_amx_attn(struct tensor_kernels *k);
uint8_t *tensor_amx_scratch(size_t bytes);
#endif

/* All 65536 half-precision values as floats (filled before any table is
 * handed out). */
extern float tensor_fp16_table[1 << 16];

/* Scalar vec_dot kernels (reference). */
void vec_dot_f32_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_f16_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_bf16_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q4_0_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q4_1_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q5_0_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q5_1_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q8_0_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q2_K_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q3_K_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q4_K_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q5_K_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q6_K_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);

/* ---- attention (attn_scalar.c, attn_x86.h) ---------------------------- */

void attn_scalar(int hd, float scale, const struct attn_kv *kv, const struct attn_rows *rows, float *restrict scratch);

/* An attention call's scratch, carved from the caller's floats; every part
 * starts on 64 bytes. */
struct attn_work {
    int hd_pad;   /* head_dim rounded up to 16 floats */
    float *k, *v; /* [TENSOR_ATTN_TILE][hd_pad] the tile's K and V rows as floats (cache not F32) */
    float *zero;  /* [hd_pad] zeros: the K row of a tile position past every row's last */
    float *m, *l; /* [n_rows] each row's running maximum score and sum of weights */
    float *p;     /* [TENSOR_ATTN_TILE] scores, then weights, of the row in hand */
    uint8_t *q8;  /* [n_rows][q8_stride] quantized query rows (Q8_0 caches), 64-byte aligned */
    size_t q8_stride, q8_bytes;
};

static inline size_t attn_pad16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Floats of scratch attn_amx.c carves for n_rows rows of head size hd
 * (hd a multiple of 32): per tile K, V^T, scores, weights and a zero row;
 * per group of 16 rows Q in B layout, the output and the rows' state. */
static inline size_t attn_tiles_floats(int hd, int n_rows) {
    size_t h = (size_t)hd, T = TENSOR_ATTN_TILE, g = ((size_t)n_rows + 15) / 16;
    return T * h + T * 16 + T * 8 + h + g * (h * 8 + h * 16 + 64) + 2 * attn_pad16(g);
}

/* A Q8_0 cache's quantized query rows: per row its quants in whole 64-byte
 * chunks (the last zero-padded), then its blocks' d as floats and 128 times
 * the sum of each block's quants (attn_x86.h), two of each per chunk. */
static inline int attn_q8_row_bytes(int hd) { return (hd + 63) / 64 * 64; }
static inline size_t attn_q8_stride(int hd) { return (size_t)attn_q8_row_bytes(hd) * 5 / 4; }
static inline size_t attn_q8_floats(int hd, int n_rows) { return attn_q8_stride(hd) * (size_t)n_rows / 4; }

static inline struct attn_work attn_work_carve(float *scratch, int hd, int n_rows) {
    struct attn_work w;
    size_t hp = attn_pad16((size_t)hd), T = TENSOR_ATTN_TILE;
    w.hd_pad = (int)hp;
    w.k = scratch;
    w.v = w.k + T * hp;
    w.zero = w.v + T * hp;
    w.m = w.zero + hp;
    w.l = w.m + attn_pad16((size_t)n_rows);
    w.p = w.l + attn_pad16((size_t)n_rows);
    w.q8 = (uint8_t *)(w.p + T);
    w.q8_stride = attn_q8_stride(hd);
    w.q8_bytes = (size_t)attn_q8_row_bytes(hd);
    return w;
}

static inline int8_t *attn_q8_qs(const struct attn_work *w, int r) {
    return (int8_t *)(w->q8 + (size_t)r * w->q8_stride);
}
static inline float *attn_q8_d(const struct attn_work *w, int r) {
    return (float *)(w->q8 + (size_t)r * w->q8_stride + w->q8_bytes);
}
static inline int32_t *attn_q8_corr(const struct attn_work *w, int r) {
    return (int32_t *)(w->q8 + (size_t)r * w->q8_stride + w->q8_bytes + w->q8_bytes / 8);
}

/* The reference's softmax step of one row over n scaled scores p (weights
 * on return): m and l updated; returns the factor that rescales its output. */
float attn_softmax_step(float *p, int n, float *m, float *l);

/* Each row's quants and block scales for a Q8_0 cache, as the reference
 * quantizer makes them (quantize_row_q8_0_ref; a block with a NaN or an
 * infinity: zeros and d NaN). */
void attn_quantize_rows(const struct attn_rows *rows, int hd, struct attn_work *w);

/* Walks a sequence's spans forward, position by position. */
struct attn_cursor {
    const struct attn_span *span;
    int off; /* positions of *span already handed out */
};

/* The K and V row addresses of the next n positions (the spans cover them),
 * a run at a time (a tile is usually one run). True if they all came from
 * one run: then consecutive rows are kv->row_bytes apart. */
static inline bool attn_cursor_take(const struct attn_kv *kv, struct attn_cursor *c, int n, const uint8_t **k,
                                    const uint8_t **v) {
    const size_t rb = kv->row_bytes;
    int runs = 0;
    for (int j = 0; j < n; runs++) {
        while (c->off == c->span->n) c->span++, c->off = 0;
        int run = c->span->n - c->off < n - j ? c->span->n - c->off : n - j;
        const uint8_t *kp = (const uint8_t *)c->span->k + (size_t)c->off * rb;
        const uint8_t *vp = (const uint8_t *)c->span->v + (size_t)c->off * rb;
        c->off += run;
        for (int e = j + run; j < e; j++, kp += rb, vp += rb) k[j] = kp, v[j] = vp;
    }
    return runs == 1;
}

/* The K and V rows of tile positions [t0, t0 + nt), as attn_cursor_take,
 * the positions before kv->start (seen by no row) given the zero row.
 * True if they all came from one run. */
static inline bool attn_tile_take(const struct attn_kv *kv, struct attn_cursor *c, int32_t t0, int nt,
                                  const uint8_t **k, const uint8_t **v, const void *zero) {
    int j = 0;
    for (; j < nt && t0 + j < kv->start; j++) k[j] = v[j] = zero;
    return attn_cursor_take(kv, c, nt - j, k + j, v + j) && j == 0;
}

/* Skips the next n positions without reading them. */
static inline void attn_cursor_skip(struct attn_cursor *c, int32_t n) {
    while (n > 0) {
        while (c->off == c->span->n) c->span++, c->off = 0;
        int run = c->span->n - c->off < n ? c->span->n - c->off : (int)n;
        c->off += run, n -= run;
    }
}

/* Row r's first visible position (struct attn_rows.window). */
static inline int32_t attn_row_first(const struct attn_rows *rows, int r) {
    return rows->window > 0 && rows->last[r] >= rows->window ? rows->last[r] - rows->window + 1 : 0;
}

/* The positions [lo, n) of the tile at t0 (nt positions) that row r sees;
 * none where n <= lo. */
static inline int attn_tile_range(const struct attn_rows *rows, int r, int32_t t0, int nt, int *lo) {
    int32_t first = attn_row_first(rows, r) - t0, n = rows->last[r] + 1 - t0;
    *lo = first > 0 ? (first < nt ? (int)first : nt) : 0;
    return n < 0 ? 0 : n < nt ? (int)n : nt;
}

/* The first tile any row sees: its first position (a multiple of the tile). */
static inline int32_t attn_rows_begin(const struct attn_rows *rows) {
    int32_t b = INT32_MAX;
    for (int r = 0; r < rows->n; r++) {
        int32_t f = attn_row_first(rows, r);
        if (f < b) b = f;
    }
    return b == INT32_MAX ? 0 : b / TENSOR_ATTN_TILE * TENSOR_ATTN_TILE;
}

/* The largest last position of the rows: the call reads up to that. */
static inline int32_t attn_rows_end(const struct attn_rows *rows) {
    int32_t end = -1;
    for (int r = 0; r < rows->n; r++)
        if (rows->last[r] > end) end = rows->last[r];
    return end;
}

/* Q3_K's 16 six-bit scales, unpacked and re-centred to -32..31. */
static inline void q3_K_scales(const uint8_t *q, int8_t out[16]) {
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? (q[i] & 0xF) : (q[i - 8] >> 4);
        int hi = (q[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
        out[i] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

#endif /* KVIK_TENSOR_KERNELS_H */
