/*
 * vec_dot_amx.c — Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q4_K products on AMX
 * tiles (Sapphire Rapids and later), for mat-vec and mat-mat alike (Q6_K,
 * Q5_K and Q4_K's repacked records: vec_dot_k_amx.c).
 *
 * One tile product C += A B takes 16 weight rows x one 32-weight block (A,
 * 16 x 32 signed bytes) against up to 16 activation rows of the same block
 * (B, VNNI layout: 8 rows of 4 bytes per token) and gives the exact integer
 * block sums S[row][token]. Every element is then
 *
 *     y = fma((float)S_b, d_w * d_a, y)   for blocks b = 0, 1, ... in order
 *
 * a chain of single fused multiply-adds per element. Because S_b is exact,
 * the result does not depend on how the products were tiled, on how many
 * tokens share a tile or on the thread: mat-vec (one token, B read straight
 * from the quantized activation row) and mat-mat (B packed once per call)
 * give the same bits, and so does the single-row reference vec_dot below.
 * This table therefore computes these types differently from the AVX-512
 * table (whose per-lane float accumulation is the other exact-by-
 * construction choice); each table is consistent with itself.
 *
 * Q4_0 weights are unpacked to q - 8 in [-8, 7]; Q8_0 weights are used in
 * place (the tile load takes the row stride), except for a last group of
 * fewer than 16 rows, which is copied and padded with zeros.
 */
#ifndef KVIK_NO_SIMD
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/base.h"
#include "tensor/kernels.h"
#include "tensor/quant_ref.h"
#include "tensor/quant_x86.h"
#include "tensor/quants.h"

enum { GROUP = 16 };
#define T_C 0
#define T_A 1
#define T_B 2

/* The tile intrinsics take literal tile numbers (they are pasted into the
 * assembly); these wrappers expand the names above first. */
#define TILE_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define TILE_STORE(t, p, stride) _tile_stored(t, p, stride)
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)

static inline float f16t(uint16_t h) { return tensor_fp16_table[h]; }

struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* The layout this thread's tiles are configured for (TILES_NONE before the
 * first). Loading a configuration costs about as much as a few tile
 * products, so a thread keeps its tiles configured from one call to the
 * next (every kernel here uses the same layout, TILES_HALF_K), always for
 * a full tile of GROUP tokens: a partial token tile computes zeros in the
 * columns past its last token (the packed activations are zeros there)
 * and they are not stored, which costs less than reconfiguring between a
 * batch's full and partial tiles. */
enum { TILES_NONE, TILES_HALF_K, TILES_FULL, TILES_ATTN };
static _Thread_local int t_tiles;

static void load_config(struct tile_config *c) {
    /* GCC 12 does not see that ldtilecfg reads the whole struct and drops
     * the stores before it without this barrier. */
    __asm__ volatile("" : : "m"(*c) : "memory");
    _tile_loadconfig(c);
}

/* Two sets of tiles (0-2 and 3-5): C, 16 weight rows x 16 tokens (int32);
 * A, 16 rows x 32 bytes; B, 8 x 64 bytes; and tiles 6-7, two more C. */
static void configure_tiles(void) {
    t_tiles = TILES_HALF_K;
    struct tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int set = 0; set < 6; set += 3) {
        c.rows[set + T_C] = GROUP;
        c.colsb[set + T_C] = 4 * GROUP;
        c.rows[set + T_A] = GROUP;
        c.colsb[set + T_A] = 32;
        c.rows[set + T_B] = 8;
        c.colsb[set + T_B] = 4 * GROUP;
    }
    for (int t = 6; t < 8; t++) { /* two more C tiles: a second pair of results in flight */
        c.rows[t] = GROUP;
        c.colsb[t] = 4 * GROUP;
    }
    load_config(&c);
}

static inline void configure(void) {
    if (t_tiles != TILES_HALF_K) configure_tiles();
}

void tensor_amx_configure(void) { configure(); }

/* Every tile 16 rows of 64 bytes. */
static void full_tiles(struct tile_config *c) {
    memset(c, 0, sizeof *c);
    c->palette = 1;
    for (int t = 0; t < 8; t++) {
        c->rows[t] = GROUP;
        c->colsb[t] = 64;
    }
}

void tensor_amx_configure_full(void) {
    if (t_tiles == TILES_FULL) return;
    t_tiles = TILES_FULL;
    struct tile_config c;
    full_tiles(&c);
    load_config(&c);
}

/* attn_amx.c's tiles: 0 the scores (16 x 16 F32), 1 K rows (16 x 32
 * bf16), 2 query rows (16 x 64 bytes, B layout), 3 weights (16 x 16
 * bf16), 4-5 V rows (8 x 64 bytes, B layout), 6-7 the output. */
void tensor_amx_configure_attn(void) {
    if (t_tiles == TILES_ATTN) return;
    t_tiles = TILES_ATTN;
    struct tile_config c;
    full_tiles(&c);
    c.colsb[3] = 32;
    c.rows[4] = c.rows[5] = 8;
    load_config(&c);
}

/* ---- reference: one row, the same chain, integers summed directly ---- */

static int32_t block_sum_q4_0(const block_q4_0 *x, const block_q8_0 *y) {
    int32_t s = 0;
    for (int i = 0; i < QK / 2; i++) {
        s += ((x->qs[i] & 0x0F) - 8) * y->qs[i];
        s += ((x->qs[i] >> 4) - 8) * y->qs[i + QK / 2];
    }
    return s;
}

static int32_t block_sum_q8_0(const block_q8_0 *x, const block_q8_0 *y) {
    int32_t s = 0;
    for (int i = 0; i < QK; i++) s += x->qs[i] * y->qs[i];
    return s;
}

/* The chain over blocks with a given exact block sum. */
static inline float chain_q8_family(int64_t n, const void *vx, size_t bb, const block_q8_0 *y,
                                    int32_t (*block_sum)(const void *x, const block_q8_0 *y)) {
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *x = (const uint8_t *)vx + (size_t)b * bb;
        uint16_t d;
        memcpy(&d, x, 2); /* both block types start with their f16 scale */
        acc = fmaf((float)block_sum(x, &y[b]), f16t(d) * f16t(y[b].d), acc);
    }
    return acc;
}

static int32_t sum_q4_0(const void *x, const block_q8_0 *y) { return block_sum_q4_0(x, y); }
static int32_t sum_q8_0(const void *x, const block_q8_0 *y) { return block_sum_q8_0(x, y); }

static void vec_dot_q4_0_amx(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    *s = chain_q8_family(n, vx, sizeof(block_q4_0), vy, sum_q4_0);
}

static void vec_dot_q8_0_amx(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    *s = chain_q8_family(n, vx, sizeof(block_q8_0), vy, sum_q8_0);
}

/* ---- activations: the A tiles ---------------------------------------- */

/* Token tile `tile` (tokens 16 tile .. +16) of Q8_0 rows: for each block,
 * the tokens' 32 quants one after the other (the A tile, 16 x 32 signed
 * bytes) and their 16 scales d_y (floats); tokens past n_tok are zeros. For
 * a single token (mat-vec), the sum of each block's quants instead, which
 * every row group needs. */
static inline int32_t hsum_epi32(__m256i v);

/* Per block of a packed token tile (Q8_0 and Q8_1 alike): the A tile, then
 * two 64-byte lines of token scales, tokens 0-7 in the first and 8-15 in
 * the second, each with d_y at +0 and (Q8_1) s_y at +32, so that threads
 * quantizing the two halves of a tile (quantize_tile) write no line in
 * common. */
enum { Q80_TILE_BYTES = 512 + 128, TILE_SY = 32 };
static inline size_t tile_dy(int t) { return 512 + (size_t)(t >> 3) * 64 + (size_t)(t & 7) * sizeof(float); }

/* One token's row quantized straight into its tile (what quantize then
 * pack make of it: the same quants, d and s rounded to f16 and back), or
 * zeros for x NULL (a tile's tokens past the last). */
static void quantize_tile_q8(const float *x, int64_t cols, int64_t tok, void *packed, bool has_s) {
    int64_t nb = cols / QK;
    uint8_t *tile = (uint8_t *)packed + (size_t)(tok / GROUP) * (size_t)nb * Q80_TILE_BYTES;
    int t = (int)(tok % GROUP);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = tile + (size_t)b * Q80_TILE_BYTES;
        float *dy = (float *)(blk + tile_dy(t)), *sy = (float *)(blk + tile_dy(t) + TILE_SY);
        float d;
        int32_t sum;
        __m512 d16;
        __m512i sum16;
        if (x && b % 16 == 0 && b + 16 <= nb &&
            q8_blocks16_avx512(x + b * QK, (int8_t *)(blk + 32 * t), Q80_TILE_BYTES, &d16, &sum16)) {
            /* sixteen blocks at once; their d (and s) through f16 and back */
            _Alignas(64) float dv[16], sv[16];
#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
            _mm512_store_ps(dv, _mm512_cvtph_ps(_mm512_cvtps_ph(d16, RNE)));
            _mm512_store_ps(sv, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_cvtepi32_ps(sum16), d16), RNE)));
#undef RNE
            for (int j = 0; j < 16; j++) {
                uint8_t *bj = blk + (size_t)j * Q80_TILE_BYTES;
                *(float *)(bj + tile_dy(t)) = dv[j];
                if (has_s) *(float *)(bj + tile_dy(t) + TILE_SY) = sv[j];
            }
            b += 15;
            continue;
        }
        if (!x) {
            memset(blk + 32 * t, 0, 32);
            *dy = 0.0f;
            if (has_s) *sy = 0.0f;
        } else if (q8_block_avx512(x + b * QK, (int8_t *)(blk + 32 * t), &d, &sum)) {
            *dy = _cvtsh_ss(f16_rne(d));
            if (has_s) *sy = _cvtsh_ss(f16_rne((float)sum * d));
        } else if (has_s) { /* a NaN: the reference's block */
            block_q8_1 y;
            quantize_row_q8_1_ref(x + b * QK, &y, QK);
            memcpy(blk + 32 * t, y.qs, 32);
            *dy = f16t(y.d), *sy = f16t(y.s);
        } else {
            block_q8_0 y;
            quantize_row_q8_0_ref(x + b * QK, &y, QK);
            memcpy(blk + 32 * t, y.qs, 32);
            *dy = f16t(y.d);
        }
    }
}

static void quantize_tile_q8_0(const float *x, int64_t cols, int64_t tok, void *packed) {
    quantize_tile_q8(x, cols, tok, packed, false);
}

static void quantize_tile_q8_1(const float *x, int64_t cols, int64_t tok, void *packed) {
    quantize_tile_q8(x, cols, tok, packed, true);
}

static void pack_q8_0(const void *vxq, size_t xq_row, int64_t cols, int64_t tile, int64_t b0, int64_t b1,
                      int64_t n_tok, void *packed) {
    int64_t nb = cols / QK;
    if (n_tok == 1) { /* mat-vec: the sum of each activation block */
        const block_q8_0 *y = vxq;
        int32_t *sums = packed;
        for (int64_t b = b0; b < b1; b++)
            sums[b] = hsum_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                                     _mm256_loadu_si256((const __m256i *)y[b].qs)));
        return;
    }
    uint8_t *dst = (uint8_t *)packed + (size_t)tile * (size_t)nb * Q80_TILE_BYTES;
    for (int64_t b = b0; b < b1; b++) {
        uint8_t *qs = dst + (size_t)b * Q80_TILE_BYTES;
        for (int t = 0; t < GROUP; t++) {
            int64_t tok = tile * GROUP + t;
            float *d = (float *)(qs + tile_dy(t));
            if (tok >= n_tok) {
                memset(qs + 32 * t, 0, 32);
                *d = 0.0f;
                continue;
            }
            const block_q8_0 *y = (const block_q8_0 *)((const uint8_t *)vxq + (size_t)tok * xq_row) + b;
            memcpy(qs + 32 * t, y->qs, 32);
            *d = f16t(y->d);
        }
    }
}

static size_t packed_size_q8_0(int64_t cols, int64_t n_tok) {
    if (n_tok == 1) return (size_t)(cols / QK) * sizeof(int32_t);
    return (size_t)((n_tok + GROUP - 1) / GROUP) * (size_t)(cols / QK) * Q80_TILE_BYTES;
}

/* ---- weights: B tiles ------------------------------------------------ */

/* Per-thread buffer: the panel of unpacked weights, or a mat-vec's block
 * sums. Freed when the thread exits, through a
 * pthread key whose destructor runs in the exiting thread. */
static _Thread_local uint8_t *t_panel;
static _Thread_local size_t t_panel_cap;
static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *unused) {
    (void)unused;
    mem_free(t_panel);
    t_panel = NULL;
    t_panel_cap = 0;
}

static void scratch_key_init(void) { pthread_key_create(&g_scratch_key, scratch_free); }

static void scratch_register(void) {
    pthread_once(&g_scratch_once, scratch_key_init);
    pthread_setspecific(g_scratch_key, (void *)1);
}

static uint8_t *panel_get(size_t bytes) {
    if (bytes > t_panel_cap) {
        scratch_register();
        mem_free(t_panel);
        t_panel = mem_alloc_aligned(bytes);
        t_panel_cap = t_panel ? bytes : 0;
    }
    return t_panel;
}

uint8_t *tensor_amx_scratch(size_t bytes) { return panel_get(bytes); }


/* The weights of the Q8_0 family (Q4_0, Q8_0) are the B operand of the
 * tile products, and the tokens the A operand: a result tile holds one
 * token per row and sixteen weight rows across, so each token's chain
 * acc = fma((float)S_b, d_w * d_y, acc) runs in the sixteen lanes of one
 * vector and the results are stored as they are. The weights come as
 * records, one group of sixteen rows and one block each: the block's B tile
 * (8 x 64 bytes, VNNI layout: byte 64 k + 4 r + i is row r's q[4 k + i], as
 * signed bytes: Q8_0's quants, Q4_0's q - 8), then d[16] (f16, row order).
 * Repacked Q8_0 weights are such records (below); other weights are put
 * into records call by call. */
enum { Q80_REC = GROUP * 32 + GROUP * 2 };

/* Row r's block (quants q, scale d) into record rec. */
static inline void rec_put_row_q8(uint8_t *rec, int r, const int8_t *q, uint16_t d) {
    for (int k = 0; k < 8; k++) memcpy(rec + 64 * k + 4 * r, q + 4 * k, 4);
    memcpy(rec + GROUP * 32 + 2 * r, &d, 2);
}

/* Row r0 + r of the weights into the group's records, block by block. The
 * caller goes row by row: a group's rows are one contiguous run of memory,
 * read in order so the prefetchers stream it (block-major order touched
 * sixteen rows at once and waited on memory for each). */
static void put_row_q8(int type, const struct tensor_matrix *w, int64_t r0, int r, int64_t nb, uint8_t *recs) {
    const uint8_t *row = (const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes;
    for (int64_t b = 0; b < nb; b++) {
        int8_t q[QK];
        uint16_t d;
        if (type == TENSOR_TYPE_Q4_0) {
            const block_q4_0 *x = (const block_q4_0 *)row + b;
            _mm_prefetch((const char *)x + 2048, _MM_HINT_T0);
            __m128i v = _mm_loadu_si128((const __m128i *)x->qs), m = _mm_set1_epi8(0x0F), e = _mm_set1_epi8(8);
            _mm_storeu_si128((__m128i *)q, _mm_sub_epi8(_mm_and_si128(v, m), e));
            _mm_storeu_si128((__m128i *)(q + 16), _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m), e));
            d = x->d;
        } else {
            const block_q8_0 *x = (const block_q8_0 *)row + b;
            _mm_prefetch((const char *)x + 2048, _MM_HINT_T0);
            memcpy(q, x->qs, QK);
            d = x->d;
        }
        rec_put_row_q8(recs + (size_t)b * Q80_REC, r, q, d);
    }
}

/* A stream's lines some distance ahead, each asked for once (blocks of 144
 * bytes do not end on lines). Where it helps is measured per kernel: the
 * Q4_K mat-vec below gained (tinyllama Q4_K decode +8%), while every line
 * of the Q4_1 and Q8_0 records 1-2 KiB ahead, faster in bench kernels'
 * 4096-column rows, slowed SmolLM2's 576-column decode by ~10%. */

/* The line holding p + ahead. */
static inline const uint8_t *line_ahead(const void *p, size_t ahead) {
    return (const uint8_t *)(((uintptr_t)p + ahead) & ~(uintptr_t)63);
}

/* Prefetches the lines from pf up to end; returns where the next call starts. */
static inline const uint8_t *prefetch_lines(const uint8_t *pf, const uint8_t *end) {
    for (; pf < end; pf += 64) _mm_prefetch((const char *)pf, _MM_HINT_T0);
    return pf;
}

static inline int32_t load_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The group at r0 (nr rows, its records at recs) against every token tile
 * of packed (below, with the Q4 records); pf: prefetch records ahead during
 * the first tile (records streamed from memory). */
static void q8_tiles(const uint8_t *recs, int64_t nb, int64_t r0, int nr, const uint8_t *packed, int64_t n_tok,
                     float *y, int64_t ys, bool pf);

/* Eight 8-lane integer vectors -> their eight horizontal sums, in order. */
static inline __m256i hsum8_epi32(const __m256i a[8]) {
    __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
    __m256i v = _mm256_hadd_epi32(_mm256_hadd_epi32(a[4], a[5]), _mm256_hadd_epi32(a[6], a[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(u, v, 0x20), _mm256_permute2x128_si256(u, v, 0x31));
}

static inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

static inline __m256i q4_nibbles(const uint8_t *qs) {
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

/* Q4_0 mat-vec of 16 rows without tiles (a tile product per block is
 * latency-bound for one token), in two passes. First each row is streamed
 * alone, as the AVX-512 kernel streams it, and its exact block sums q*y are
 * formed eight blocks at a time (q*y - 8*y with the activations' block sums,
 * taken once per call). Then the sixteen rows' chains run side by side:
 * acc = fma((float)S_b, d_w * d_y, acc) per block, as the tile path does, so
 * the results equal it. Missing rows of a last group repeat the last row. */
static bool rows_matvec_q8_family(const struct tensor_matrix *w, int64_t r0, int nr, const block_q8_0 *y,
                                  const int32_t *ysum, float *out) {
    int64_t nb = w->cols / QK;
    const bool q8 = w->type == TENSOR_TYPE_Q8_0;
    const size_t bb = q8 ? sizeof(block_q8_0) : sizeof(block_q4_0);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    const int shift = q8 ? 7 : 3; /* the offset: 128 for Q8_0, 8 for Q4_0 */
    int32_t *S = (int32_t *)panel_get((size_t)GROUP * (size_t)(nb + 8) * sizeof(int32_t));
    if (!S) return false;
    for (int r = 0; r < GROUP; r++) {
        const uint8_t *x = (const uint8_t *)w->data + (size_t)(r0 + (r < nr ? r : nr - 1)) * w->row_bytes;
        int32_t *Sr = S + (size_t)r * (size_t)nb;
        int64_t b = 0;
        for (; b + 8 <= nb; b += 8) {
            __m256i p[8];
            for (int i = 0; i < 8; i++) {
                const uint8_t *blk = x + (size_t)(b + i) * bb;
                _mm_prefetch((const char *)blk + 4096, _MM_HINT_T0);
                __m256i q = q8 ? _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)), flip) : q4_nibbles(blk + 2);
                p[i] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)y[b + i].qs));
            }
            _mm256_storeu_si256((__m256i *)(Sr + b),
                                _mm256_sub_epi32(hsum8_epi32(p), _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(ysum + b)), shift)));
        }
        for (; b < nb; b++) {
            const uint8_t *blk = x + (size_t)b * bb;
            __m256i q = q8 ? _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)), flip) : q4_nibbles(blk + 2);
            Sr[b] = hsum_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)y[b].qs))) -
                    ysum[b] * (1 << shift);
        }
    }
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)nb));
    /* scales of missing rows: the last row's */
    __m512i sidx = _mm512_min_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                    _mm512_set1_epi32(nr - 1));
    sidx = _mm512_mullo_epi32(sidx, _mm512_set1_epi32((int)w->row_bytes));
    const uint8_t *base = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i sums = _mm512_i32gather_epi32(idx, S + b, 4);
        __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(sidx, base + (size_t)b * bb, 1)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(dw, _mm512_set1_ps(f16t(y[b].d))), acc);
    }
    _Alignas(64) float res[GROUP];
    _mm512_store_ps(res, acc);
    for (int r = 0; r < nr; r++) out[r] = res[r];
    return true;
}

/* Mat-mat: rows [r0, r0 + nr) against n_tok packed activation rows, the
 * rows put into records first. */
static bool rows_matmat(int type, const struct tensor_matrix *w, int64_t r0, int nr, const uint8_t *packed,
                        int64_t n_tok, float *y, int64_t ys) {
    int64_t nb = w->cols / QK;
    uint8_t *recs = panel_get((size_t)nb * Q80_REC);
    if (!recs) return false;
    memset(recs, 0, (size_t)nb * Q80_REC);
    for (int r = 0; r < nr; r++) put_row_q8(type, w, r0, r, nb, recs);
    q8_tiles(recs, nb, r0, nr, packed, n_tok, y, ys, false);
    return true;
}

static bool rows_product_q8_family_group(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq,
                                         size_t xq_row, const void *packed, int64_t n_tok, float *y, int64_t ys) {
    int nr = (int)(r1 - r0);
    if (n_tok == 1) {
        float out[GROUP];
        if (!rows_matvec_q8_family(w, r0, nr, xq, packed, out)) return false;
        for (int r = 0; r < nr; r++) y[r0 + r] = out[r];
        return true; /* no tiles touched */
    }
    bool ok = rows_matmat(w->type, w, r0, nr, packed, n_tok, y, ys);
    return ok;
}

/* ---- Q4_K ------------------------------------------------------------ *
 *
 * Per 256-weight super-block b the exact integers
 *     S_b = sum_j sc_j * (q . y over sub-block j)     M_b = sum_j m_j * ysum_j
 * (eight 32-weight sub-blocks with 6-bit scales sc_j and mins m_j; ysum_j
 * from the activations' bsums) enter one chain per element:
 *     y = fma((float)S_b, d * d_y, y);  y = fma((float)M_b, -(dmin * d_y), y)
 * Mat-mat runs the sub-block products on tiles (unsigned weights x signed
 * activations) and scales them in integers; mat-vec forms S_b per row with
 * the AVX-512 kernel's scaled dot products and reduces 16 rows at once.
 */

enum { K_SUB = 8, K_TILE_BYTES = K_SUB * 512 + 64 + K_SUB * 64 };

static void k_scales(const uint8_t *scales, int32_t sc[K_SUB], int32_t mn[K_SUB]) {
    for (int j = 0; j < K_SUB; j++) {
        uint8_t a, b;
        k_scale_min(j, scales, &a, &b);
        sc[j] = a;
        mn[j] = b;
    }
}

static void vec_dot_q4_K_amx(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int32_t sc[K_SUB], mn[K_SUB], S = 0, M = 0;
        k_scales(x[b].scales, sc, mn);
        for (int j = 0; j < K_SUB; j++) {
            int32_t sj = 0;
            for (int i = 0; i < 32; i++) {
                int q = (j % 2) ? x[b].qs[32 * (j / 2) + i] >> 4 : x[b].qs[32 * (j / 2) + i] & 0x0F;
                sj += q * y[b].qs[32 * j + i];
            }
            S += sc[j] * sj;
            M += mn[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        acc = fmaf((float)S, f16t(x[b].d) * y[b].d, acc);
        acc = fmaf((float)M, -(f16t(x[b].dmin) * y[b].d), acc);
    }
    *s = acc;
}

/* Q8_K activations of one 16-token tile: per super-block, 8 sub-blocks of
 * 8 x 64 bytes (VNNI layout), then 16 scales, then 8 x 16 sub-block sums.
 * For a single token (mat-vec), only its sub-block sums, as 8 x int16 per
 * super-block. */
static void pack_q8_K(const void *vxq, size_t xq_row, int64_t cols, int64_t tile, int64_t b0, int64_t b1,
                      int64_t n_tok, void *packed) {
    int64_t nb = cols / QK_K;
    if (n_tok == 1) { /* mat-vec: the eight sub-block sums (pairs of bsums) */
        const block_q8_K *y = vxq;
        __m128i *bsp = packed;
        for (int64_t b = b0; b < b1; b++)
            _mm_storeu_si128(&bsp[b], _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[b].bsums),
                                                     _mm_loadu_si128((const __m128i *)(y[b].bsums + 8))));
        return;
    }
    uint8_t *dst = (uint8_t *)packed + (size_t)tile * (size_t)nb * K_TILE_BYTES;
    for (int64_t b = b0; b < b1; b++) {
        uint8_t *sb = dst + (size_t)b * K_TILE_BYTES;
        uint32_t *rows = (uint32_t *)sb;
        float *d = (float *)(sb + K_SUB * 512);
        int32_t *bs = (int32_t *)(sb + K_SUB * 512 + 64);
        for (int t = 0; t < GROUP; t++) {
            int64_t tok = tile * GROUP + t;
            const block_q8_K *y = tok < n_tok ? (const block_q8_K *)((const uint8_t *)vxq + (size_t)tok * xq_row) + b : NULL;
            for (int j = 0; j < K_SUB; j++) {
                uint32_t w[8] = {0};
                if (y) memcpy(w, y->qs + 32 * j, 32);
                for (int k = 0; k < 8; k++) rows[(j * 8 + k) * 16 + t] = w[k];
                bs[j * 16 + t] = y ? y->bsums[2 * j] + y->bsums[2 * j + 1] : 0;
            }
            d[t] = y ? y->d : 0.0f;
        }
    }
}

static size_t packed_size_q8_K(int64_t cols, int64_t n_tok) {
    if (n_tok == 1) return (size_t)(cols / QK_K) * sizeof(__m128i);
    return (size_t)((n_tok + GROUP - 1) / GROUP) * (size_t)(cols / QK_K) * K_TILE_BYTES;
}

static inline __m512 neg_ps(__m512 x) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))); }

/* A control for _mm512_shuffle_epi8 that puts 16-bit word a of each
 * 128-bit lane everywhere in the low 256 bits and word b in the high. */
static inline __m512i pick_words(int a, int b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)((2 * a + 1) << 8 | 2 * a))),
                              _mm256_set1_epi16((short)((2 * b + 1) << 8 | 2 * b)), 1);
}

/* Mat-vec: rows [r0, r0 + nr) (missing rows repeat the last) against one
 * Q8_K row, in two passes like Q4_0's: each row streamed alone for its exact
 * S_b and M_b, then the sixteen chains side by side. S_b in 512-bit steps:
 * 64 bytes of nibbles hold sub-blocks (2j, 2j+2) in their low nibbles and
 * (2j+1, 2j+3) in their high ones, so the activations are first laid out
 * in the same pairs (ya), and each step multiplies two sub-blocks by their
 * own scales (integers throughout: any order gives the same S_b). */
static bool rows_matvec_q4_K(const struct tensor_matrix *w, int64_t r0, int nr, const block_q8_K *y,
                             const __m128i *bsp, float *out) {
    int64_t nb = w->cols / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    int32_t *S = (int32_t *)panel_get((size_t)GROUP * (size_t)nb * 2 * sizeof(int32_t) + (size_t)nb * 256);
    if (!S) return false;
    int32_t *M = S + GROUP * nb;
    uint8_t *ya = (uint8_t *)(M + GROUP * nb); /* per super-block: [sb0 sb2] [sb1 sb3] [sb4 sb6] [sb5 sb7] */
    for (int64_t b = 0; b < nb; b++)
        for (int p = 0; p < 4; p++) {
            int lo = p / 2 * 4 + p % 2;
            memcpy(ya + (size_t)b * 256 + 64 * p, y[b].qs + 32 * lo, 32);
            memcpy(ya + (size_t)b * 256 + 64 * p + 32, y[b].qs + 32 * (lo + 2), 32);
        }
    const __m512i pk0 = pick_words(0, 2), pk1 = pick_words(1, 3), pk2 = pick_words(4, 6), pk3 = pick_words(5, 7);
    for (int r = 0; r < GROUP; r++) {
        const block_q4_K *x = (const block_q4_K *)((const uint8_t *)w->data + (size_t)(r0 + (r < nr ? r : nr - 1)) * w->row_bytes);
        /* each line 4 KiB ahead once (a super-block is 2.25 lines) */
        const uint8_t *pf = line_ahead(x, 4096);
        for (int64_t b = 0; b < nb; b++) {
            pf = prefetch_lines(pf, (const uint8_t *)(x + b + 1) + 4096);
            uint32_t wd[4];
            k_scales_mins_words(x[b].scales, wd);
            __m128i p = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)wd[3], (int)wd[2])),
                                       _mm_loadu_si128(&bsp[b]));
            p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
            p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
            M[(size_t)r * nb + b] = _mm_cvtsi128_si32(p);
            /* the eight scales as 16-bit words in every 128-bit lane */
            __m512i s16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)wd[1], (int)wd[0])));
            const uint8_t *yb = ya + (size_t)b * 256;
            __m512i q0 = _mm512_loadu_si512(x[b].qs), q1 = _mm512_loadu_si512(x[b].qs + 64);
            __m512i sumi = _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                               _mm512_maddubs_epi16(_mm512_and_si512(q0, m4), _mm512_loadu_si512(yb)),
                                               _mm512_shuffle_epi8(s16, pk0));
            sumi = _mm512_dpwssd_epi32(
                sumi, _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(q0, 4), m4), _mm512_loadu_si512(yb + 64)),
                _mm512_shuffle_epi8(s16, pk1));
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(_mm512_and_si512(q1, m4), _mm512_loadu_si512(yb + 128)),
                                       _mm512_shuffle_epi8(s16, pk2));
            sumi = _mm512_dpwssd_epi32(
                sumi, _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(q1, 4), m4), _mm512_loadu_si512(yb + 192)),
                _mm512_shuffle_epi8(s16, pk3));
            S[(size_t)r * nb + b] = _mm512_reduce_add_epi32(sumi);
        }
    }
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)nb));
    const __m512i didx = _mm512_mullo_epi32(_mm512_min_epi32(lane, _mm512_set1_epi32(nr - 1)), _mm512_set1_epi32((int)w->row_bytes));
    const uint8_t *base = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        /* d (low half) and dmin (high half) of each row's block */
        __m512i dd = _mm512_i32gather_epi32(didx, base + (size_t)b * sizeof(block_q4_K), 1);
        __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
        __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
        __m512 dy = _mm512_set1_ps(y[b].d);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_i32gather_epi32(idx, S + b, 4)), _mm512_mul_ps(d, dy), acc);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_i32gather_epi32(idx, M + b, 4)), neg_ps(_mm512_mul_ps(dmin, dy)),
                              acc);
    }
    _Alignas(64) float res[GROUP];
    _mm512_store_ps(res, acc);
    for (int r = 0; r < nr; r++) out[r] = res[r];
    return true;
}

#define TILE_DPBUSD(c, a, b) _tile_dpbusd(c, a, b)

/* Mat-mat: rows [r0, r0 + nr) against n_tok packed Q8_K rows on tiles. */
static bool rows_matmat_q4_K(const struct tensor_matrix *w, int64_t r0, int nr, const uint8_t *packed, int64_t n_tok,
                             float *y, int64_t ys) {
    int64_t nb = w->cols / QK_K;
    /* per super-block: 8 x 16 x 32 weight bytes, 8 x 16 scales, 8 x 16 mins, 16 d, 16 dmin */
    const size_t per_b = K_SUB * GROUP * 32 + 2 * K_SUB * GROUP * 4 + 2 * GROUP * 4;
    uint8_t *panel = panel_get((size_t)nb * per_b);
    if (!panel) return false;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *pb = panel + (size_t)b * per_b;
        int32_t *sc = (int32_t *)(pb + K_SUB * GROUP * 32), *mn = sc + K_SUB * GROUP;
        float *d = (float *)(mn + K_SUB * GROUP), *dm = d + GROUP;
        for (int r = 0; r < GROUP; r++) {
            if (r >= nr) {
                for (int j = 0; j < K_SUB; j++) {
                    memset(pb + (j * GROUP + r) * 32, 0, 32);
                    sc[j * GROUP + r] = mn[j * GROUP + r] = 0;
                }
                d[r] = dm[r] = 0.0f;
                continue;
            }
            const block_q4_K *x = (const block_q4_K *)((const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes) + b;
            int32_t s8[K_SUB], m8[K_SUB];
            k_scales(x->scales, s8, m8);
            for (int j = 0; j < K_SUB; j++) {
                sc[j * GROUP + r] = s8[j];
                mn[j * GROUP + r] = m8[j];
            }
            for (int jj = 0; jj < 4; jj++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * jj));
                _mm256_storeu_si256((__m256i *)(pb + ((2 * jj) * GROUP + r) * 32), _mm256_and_si256(q, _mm256_set1_epi8(0x0F)));
                _mm256_storeu_si256((__m256i *)(pb + ((2 * jj + 1) * GROUP + r) * 32),
                                    _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F)));
            }
            d[r] = f16t(x->d);
            dm[r] = f16t(x->dmin);
        }
    }
    _Alignas(64) int32_t c0[GROUP * GROUP], c1[GROUP * GROUP];
    for (int64_t t0 = 0; t0 < n_tok; t0 += GROUP) {
        int nt = n_tok - t0 < GROUP ? (int)(n_tok - t0) : GROUP;
        configure();
        const uint8_t *tile = packed + (size_t)(t0 / GROUP) * (size_t)nb * K_TILE_BYTES;
        __m512 acc[GROUP];
        for (int r = 0; r < GROUP; r++) acc[r] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *pb = panel + (size_t)b * per_b, *tb = tile + (size_t)b * K_TILE_BYTES;
            const int32_t *sc = (const int32_t *)(pb + K_SUB * GROUP * 32), *mn = sc + K_SUB * GROUP;
            const float *d = (const float *)(mn + K_SUB * GROUP), *dm = d + GROUP;
            const int32_t *bs = (const int32_t *)(tb + K_SUB * 512 + 64);
            __m512i S[GROUP];
            for (int r = 0; r < GROUP; r++) S[r] = _mm512_setzero_si512();
            for (int j = 0; j < K_SUB; j += 2) {
                TILE_LOAD(1, pb + j * GROUP * 32, 32);
                TILE_LOAD(2, tb + j * 512, 64);
                TILE_ZERO(0);
                TILE_DPBUSD(0, 1, 2);
                TILE_LOAD(4, pb + (j + 1) * GROUP * 32, 32);
                TILE_LOAD(5, tb + (j + 1) * 512, 64);
                TILE_ZERO(3);
                TILE_DPBUSD(3, 4, 5);
                TILE_STORE(0, c0, 64);
                TILE_STORE(3, c1, 64);
                for (int r = 0; r < GROUP; r++) {
                    S[r] = _mm512_add_epi32(S[r], _mm512_mullo_epi32(_mm512_load_si512(c0 + GROUP * r),
                                                                     _mm512_set1_epi32(sc[j * GROUP + r])));
                    S[r] = _mm512_add_epi32(S[r], _mm512_mullo_epi32(_mm512_load_si512(c1 + GROUP * r),
                                                                     _mm512_set1_epi32(sc[(j + 1) * GROUP + r])));
                }
            }
            __m512 dy = _mm512_loadu_ps((const float *)(tb + K_SUB * 512));
            for (int r = 0; r < GROUP; r++) {
                __m512i M = _mm512_setzero_si512();
                for (int j = 0; j < K_SUB; j++)
                    M = _mm512_add_epi32(M, _mm512_mullo_epi32(_mm512_loadu_si512(bs + j * GROUP), _mm512_set1_epi32(mn[j * GROUP + r])));
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r]), _mm512_mul_ps(_mm512_set1_ps(d[r]), dy), acc[r]);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M), neg_ps(_mm512_mul_ps(_mm512_set1_ps(dm[r]), dy)), acc[r]);
            }
        }
        for (int r = 0; r < nr; r++) {
            _Alignas(64) float res[GROUP];
            _mm512_store_ps(res, acc[r]);
            for (int t = 0; t < nt; t++) y[(t0 + t) * ys + r0 + r] = res[t];
        }
    }
    return true;
}

static bool rows_product_q4_K_group(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq,
                                    size_t xq_row, const void *packed, int64_t n_tok, float *y, int64_t ys) {
    int nr = (int)(r1 - r0);
    if (n_tok == 1) {
        float out[GROUP];
        if (!rows_matvec_q4_K(w, r0, nr, xq, packed, out)) return false;
        for (int r = 0; r < nr; r++) y[r0 + r] = out[r];
        return true;
    }
    bool ok = rows_matmat_q4_K(w, r0, nr, packed, n_tok, y, ys);
    return ok;
}

/* ---- Q4_1, and Q4_0 from records -------------------------------------- *
 *
 * Q4_1 weights (q in 0..15, w = d q + m) against Q8_1 activations (scale
 * d_y, and s_y = d_y * sum(y) as the format stores it, in f16). Per 32-value
 * block the exact integer S_b = q . y, and per element the chain
 *     y = fma((float)S_b, d * d_y, y);  y = fma(m, s_y, y)
 * for b = 0, 1, ... in order. Q4_0 (w = d (q - 8)) against Q8_0 has the
 * Q8 family's chain above, with S_b = (q - 8) . y. The single-row vec_dots
 * sum each block's integers directly; mat-vec and mat-mat read the
 * repacked records below. All give the same bits.
 *
 * As for the Q8 family, the weights are the B operand of the tile products
 * and the tokens the A operand: each token's chain runs in the sixteen
 * lanes of one vector, a partial token tile costs only its tokens, and the
 * results are stored as they are.
 */

/* A packed 16-token tile of Q8_1 activations, per block: the tokens' 32
 * quants one after the other (the A tile, 16 x 32 signed bytes), then
 * their d_y and s_y (floats) as for Q8_0 (Q80_TILE_BYTES, tile_dy). */
enum { Q41_TILE_BYTES = Q80_TILE_BYTES };

/* A repacked record (one group of sixteen rows, one block): 256 bytes of
 * nibbles, then d[16] (f16, row order), and for Q4_1 m[16]. Byte 4 r + i
 * of 64-byte chunk c holds row r's q[4c + i] in its low nibble and
 * q[16 + 4c + i] in its high nibble, so chunk c masked is row c of the B
 * tile (VNNI layout: four bytes of each of the sixteen rows) and shifted is
 * row c + 4; and a mat-vec multiplies a chunk's nibbles by four broadcast
 * activation bytes to get sixteen rows' partial sums in sixteen lanes. */
enum { Q40_REC = 256 + GROUP * 2, Q41_REC = 256 + 2 * GROUP * 2 };
/* A record unpacked for the tiles: the B tile (8 x 64 bytes: Q4_1's q,
 * Q4_0's q - 8), then d[16] and (Q4_1) m[16] as floats. */
enum { Q4_PANEL_BLOCK = 512 + 2 * GROUP * (int)sizeof(float) };

static inline int32_t block_sum_q4_1(const block_q4_1 *x, const block_q8_1 *y) {
    return hsum_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q4_nibbles(x->qs),
                                          _mm256_loadu_si256((const __m256i *)y->qs)));
}

static void vec_dot_q4_1_amx(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK; b++) {
        acc = fmaf((float)block_sum_q4_1(&x[b], &y[b]), f16t(x[b].d) * f16t(y[b].d), acc);
        acc = fmaf(f16t(x[b].m), f16t(y[b].s), acc);
    }
    *s = acc;
}

/* Token tile `tile` of Q8_1 rows in Q41_TILE_BYTES per block; tokens past
 * n_tok are zeros. A mat-vec needs nothing packed (it reads the row). */
static void pack_q8_1(const void *vxq, size_t xq_row, int64_t cols, int64_t tile, int64_t b0, int64_t b1,
                      int64_t n_tok, void *packed) {
    if (n_tok == 1) return;
    int64_t nb = cols / QK;
    uint8_t *dst = (uint8_t *)packed + (size_t)tile * (size_t)nb * Q41_TILE_BYTES;
    for (int64_t b = b0; b < b1; b++) {
        uint8_t *qs = dst + (size_t)b * Q41_TILE_BYTES;
        for (int t = 0; t < GROUP; t++) {
            int64_t tok = tile * GROUP + t;
            float *d = (float *)(qs + tile_dy(t)), *sy = (float *)(qs + tile_dy(t) + TILE_SY);
            if (tok >= n_tok) {
                memset(qs + 32 * t, 0, 32);
                *d = *sy = 0.0f;
                continue;
            }
            const block_q8_1 *y = (const block_q8_1 *)((const uint8_t *)vxq + (size_t)tok * xq_row) + b;
            memcpy(qs + 32 * t, y->qs, 32);
            *d = f16t(y->d);
            *sy = f16t(y->s);
        }
    }
}

static size_t packed_size_q8_1(int64_t cols, int64_t n_tok) {
    if (n_tok == 1) return 0;
    return (size_t)((n_tok + GROUP - 1) / GROUP) * (size_t)(cols / QK) * Q41_TILE_BYTES;
}

static size_t repack_size_q4_0(int64_t rows, int64_t cols) {
    return (size_t)((rows + GROUP - 1) / GROUP) * (size_t)(cols / QK) * Q40_REC;
}

static size_t repack_size_q4_1(int64_t rows, int64_t cols) {
    return (size_t)((rows + GROUP - 1) / GROUP) * (size_t)(cols / QK) * Q41_REC;
}

/* Row r's block (nibbles qs as the file stores them, scale d, and for Q4_1
 * the min m) into record rec. */
static void rec_put_row_q4(uint8_t *rec, int r, const uint8_t *qs, uint16_t d, const uint16_t *m) {
    uint8_t q[QK];
    for (int j = 0; j < QK / 2; j++) {
        q[j] = qs[j] & 0x0F;
        q[j + QK / 2] = qs[j] >> 4;
    }
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < 4; i++) rec[64 * c + 4 * r + i] = (uint8_t)(q[4 * c + i] | q[16 + 4 * c + i] << 4);
    uint16_t *dm = (uint16_t *)(rec + 256);
    dm[r] = d;
    if (m) dm[GROUP + r] = *m;
}

static void repack_q4(const struct tensor_matrix *w, void *dst, bool has_min) {
    int64_t nb = w->cols / QK, groups = (w->rows + GROUP - 1) / GROUP;
    size_t rec_bytes = has_min ? Q41_REC : Q40_REC;
    memset(dst, 0, (size_t)groups * (size_t)nb * rec_bytes);
    for (int64_t g = 0; g < groups; g++)
        for (int r = 0; r < GROUP && g * GROUP + r < w->rows; r++) {
            const uint8_t *row = (const uint8_t *)w->data + (size_t)(g * GROUP + r) * w->row_bytes;
            for (int64_t b = 0; b < nb; b++) {
                uint8_t *rec = (uint8_t *)dst + (size_t)(g * nb + b) * rec_bytes;
                if (has_min) {
                    const block_q4_1 *x = (const block_q4_1 *)row + b;
                    rec_put_row_q4(rec, r, x->qs, x->d, &x->m);
                } else {
                    const block_q4_0 *x = (const block_q4_0 *)row + b;
                    rec_put_row_q4(rec, r, x->qs, x->d, NULL);
                }
            }
        }
}

static void repack_q4_0(const struct tensor_matrix *w, void *dst) { repack_q4(w, dst, false); }
static void repack_q4_1(const struct tensor_matrix *w, void *dst) { repack_q4(w, dst, true); }

/* Mat-vec: rows [r0, r0 + nr) (missing rows repeat the last) against one
 * Q8_1 row, from the weights as they are in the file. Each row is streamed
 * alone for its block sums, eight blocks per horizontal reduction; then the
 * sixteen chains run in the lanes of one vector, d and m of each row's
 * block fetched by one 32-bit gather. */
static bool rows_matvec_q4_1(const struct tensor_matrix *w, int64_t r0, int nr, const block_q8_1 *y, float *out) {
    int64_t nb = w->cols / QK;
    int32_t *S = (int32_t *)panel_get((size_t)GROUP * (size_t)nb * sizeof(int32_t));
    if (!S) return false;
    for (int r = 0; r < GROUP; r++) {
        const block_q4_1 *x =
            (const block_q4_1 *)((const uint8_t *)w->data + (size_t)(r0 + (r < nr ? r : nr - 1)) * w->row_bytes);
        int32_t *Sr = S + (size_t)r * (size_t)nb;
        int64_t b = 0;
        for (; b + 8 <= nb; b += 8) {
            __m256i p[8];
            for (int i = 0; i < 8; i++) {
                _mm_prefetch((const char *)(x + b + i) + 4096, _MM_HINT_T0);
                p[i] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q4_nibbles(x[b + i].qs),
                                           _mm256_loadu_si256((const __m256i *)y[b + i].qs));
            }
            _mm256_storeu_si256((__m256i *)(Sr + b), hsum8_epi32(p));
        }
        for (; b < nb; b++) Sr[b] = block_sum_q4_1(&x[b], &y[b]);
    }
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)nb));
    const __m512i didx =
        _mm512_mullo_epi32(_mm512_min_epi32(lane, _mm512_set1_epi32(nr - 1)), _mm512_set1_epi32((int)w->row_bytes));
    const uint8_t *base = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        /* d (low half) and m (high half) of each row's block */
        __m512i dm = _mm512_i32gather_epi32(didx, base + (size_t)b * sizeof(block_q4_1), 1);
        __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
        __m512 m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_i32gather_epi32(idx, S + b, 4)),
                              _mm512_mul_ps(d, _mm512_set1_ps(f16t(y[b].d))), acc);
        acc = _mm512_fmadd_ps(m, _mm512_set1_ps(f16t(y[b].s)), acc);
    }
    _Alignas(64) float res[GROUP];
    _mm512_store_ps(res, acc);
    for (int r = 0; r < nr; r++) out[r] = res[r];
    return true;
}

/* Mat-vec of the group at r0 from its records: per record, eight VNNI
 * products of its nibbles with four broadcast activation bytes each give
 * the sixteen rows' sums q . y in the lanes of one vector. Q4_1: against a
 * Q8_1 row; Q4_0: against a Q8_0 row, less 8 ysum (its blocks' sums). */
static inline __attribute__((always_inline)) void panel_matvec_q4(const struct tensor_matrix *w, int64_t r0, int nr,
                                                                   const void *vy, const int32_t *ysum, float *out,
                                                                   const bool has_min) {
    int64_t nb = w->cols / QK;
    const size_t rec_bytes = has_min ? Q41_REC : Q40_REC;
    const uint8_t *rec = (const uint8_t *)w->panel + (size_t)(r0 / GROUP) * (size_t)nb * rec_bytes;
    const __m512i low = _mm512_set1_epi8(0x0F);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, rec += rec_bytes) {
        _mm_prefetch((const char *)rec + 1024, _MM_HINT_T0);
        _mm_prefetch((const char *)rec + 1088, _MM_HINT_T0);
        const uint8_t *yq = has_min ? (const uint8_t *)((const block_q8_1 *)vy)[b].qs
                                    : (const uint8_t *)((const block_q8_0 *)vy)[b].qs;
        uint16_t yd = has_min ? ((const block_q8_1 *)vy)[b].d : ((const block_q8_0 *)vy)[b].d;
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            __m512i q = _mm512_loadu_si512(rec + 64 * c);
            s0 = _mm512_dpbusd_epi32(s0, _mm512_and_si512(q, low), _mm512_set1_epi32(load_i32(yq + 4 * c)));
            s1 = _mm512_dpbusd_epi32(s1, _mm512_and_si512(_mm512_srli_epi16(q, 4), low),
                                     _mm512_set1_epi32(load_i32(yq + 16 + 4 * c)));
        }
        __m512i S = _mm512_add_epi32(s0, s1);
        if (!has_min) S = _mm512_sub_epi32(S, _mm512_set1_epi32(ysum[b] * 8));
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 256)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, _mm512_set1_ps(f16t(yd))), acc);
        if (has_min) {
            __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 256 + 32)));
            acc = _mm512_fmadd_ps(m, _mm512_set1_ps(f16t(((const block_q8_1 *)vy)[b].s)), acc);
        }
    }
    _Alignas(64) float res[GROUP];
    _mm512_store_ps(res, acc);
    for (int r = 0; r < nr; r++) out[r] = res[r];
}

/* A record as a panel block: the B tile and the scales as floats. */
static inline __attribute__((always_inline)) void unpack_rec_q4(const uint8_t *rec, uint8_t *pb, const bool has_min) {
    const __m512i low = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    for (int c = 0; c < 4; c++) {
        __m512i q = _mm512_loadu_si512(rec + 64 * c);
        __m512i lo = _mm512_and_si512(q, low), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
        if (!has_min) lo = _mm512_sub_epi8(lo, eight), hi = _mm512_sub_epi8(hi, eight);
        _mm512_store_si512(pb + 64 * c, lo);
        _mm512_store_si512(pb + 64 * (c + 4), hi);
    }
    _mm512_store_ps(pb + 512, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 256))));
    if (has_min) _mm512_store_ps(pb + 576, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 256 + 32))));
}

/* What a tile pass multiplies: Q8_0 records (B tiles as they are, signed),
 * or Q4_0 / Q4_1 / Q5_0 / Q5_1 records unpacked into panel blocks (q - 8,
 * q - 16 signed; q unsigned, with mins). */
enum tile_kind { KIND_Q8, KIND_Q4_0, KIND_Q4_1, KIND_Q5_0, KIND_Q5_1 };

static inline bool kind_has_min(const enum tile_kind kind) { return kind == KIND_Q4_1 || kind == KIND_Q5_1; }

/* ---- Q5_0 records ------------------------------------------------------ *
 *
 * Q5_0 (w = d (q - 16), q in 0..31: a nibble and a fifth bit) against Q8_0
 * has the Q8 family's chain, with S_b = (q - 16) . y. A repacked record (one
 * group of sixteen rows, one block) is a Q4 record's 256 bytes of nibbles
 * (the same order), then eight 64-bit masks of fifth bits, then d[16] (f16,
 * row order): bit 4 r + i of mask k is the fifth bit of row r's q[4k + i],
 * so B-tile row k (chunk k's low nibbles for k < 4, chunk k - 4's high
 * ones else) gains its fifth bits by one masked add. The same 22 bytes per
 * row and block as the file. Q5_1 (w = d q + m, against Q8_1) has Q4_1's
 * chain with q in 0..31; its record is Q5_0's with m[16] (f16) after d
 * (24 bytes per row and block, as the file).
 */
enum { Q50_HB = 256, Q50_D = 256 + 64, Q50_REC = 256 + 64 + GROUP * 2 };
enum { Q51_M = Q50_REC, Q51_REC = Q50_REC + GROUP * 2 };

static inline size_t rec_size(const enum tile_kind kind) {
    return kind == KIND_Q8     ? Q80_REC
           : kind == KIND_Q4_1 ? Q41_REC
           : kind == KIND_Q5_0 ? Q50_REC
           : kind == KIND_Q5_1 ? Q51_REC
                               : Q40_REC;
}

/* B-tile row k (0..7) of a Q5_0 record: q in 0..31, unsigned bytes. */
static inline __m512i q5_rec_row(const uint8_t *rec, int k) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    __m512i q = _mm512_loadu_si512(rec + 64 * (k & 3));
    if (k >= 4) q = _mm512_srli_epi16(q, 4);
    uint64_t hb;
    memcpy(&hb, rec + Q50_HB + 8 * k, 8);
    q = _mm512_and_si512(q, low);
    return _mm512_mask_add_epi8(q, (__mmask64)hb, q, _mm512_set1_epi8(0x10)); /* bit 4 is clear: add is or */
}

/* A Q5_0 record as a panel block: the B tile of q - 16, then d[16] as
 * floats; a Q5_1 record (has_min): the B tile of q, then d[16] and m[16]. */
static inline void unpack_rec_q5(const uint8_t *rec, uint8_t *pb, bool has_min) {
    const __m512i sixteen = _mm512_set1_epi8(has_min ? 0 : 16);
    for (int k = 0; k < 8; k++) _mm512_store_si512(pb + 64 * k, _mm512_sub_epi8(q5_rec_row(rec, k), sixteen));
    _mm512_store_ps(pb + 512, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + Q50_D))));
    if (has_min) _mm512_store_ps(pb + 576, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + Q51_M))));
}

static inline __attribute__((always_inline)) void unpack_rec(const uint8_t *rec, uint8_t *pb, const enum tile_kind kind) {
    if (kind == KIND_Q5_0 || kind == KIND_Q5_1) unpack_rec_q5(rec, pb, kind == KIND_Q5_1);
    else unpack_rec_q4(rec, pb, kind == KIND_Q4_1);
}

/* The float steps of one block for the tile's tokens: the block sums c
 * (16 tokens x 16 rows, int32); the rows' d from the Q8_0 record (f16) or
 * the panel block (floats, and Q4_1's m); the tokens' d_y (and s_y) at
 * blk + tile_dy(t) (and TILE_SY further). */
static inline __attribute__((always_inline)) void block_chain(__m512 acc[GROUP], const int32_t *c, const uint8_t *wb,
                                                               const uint8_t *blk, int nt, const enum tile_kind kind) {
    __m512 d = kind == KIND_Q8 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wb + GROUP * 32)))
                               : _mm512_load_ps(wb + 512);
    __m512 m = kind_has_min(kind) ? _mm512_load_ps(wb + 576) : d;
#pragma GCC unroll 16
    for (int t = 0; t < GROUP; t++) {
        if (t >= nt) continue;
        const float *dy = (const float *)(blk + tile_dy(t)), *sy = (const float *)(blk + tile_dy(t) + TILE_SY);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + GROUP * t)),
                                 _mm512_mul_ps(d, _mm512_set1_ps(*dy)), acc[t]);
        if (kind_has_min(kind)) acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(*sy), acc[t]);
    }
}

#define TILE_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)

/* A group's chains are complete: stored (the rows of mask) and restarted. */
static inline __attribute__((always_inline)) void group_done(__m512 acc[GROUP], float *y, int64_t ys, int nt,
                                                              __mmask16 rows) {
#pragma GCC unroll 16
    for (int t = 0; t < GROUP; t++) {
        if (t >= nt) continue;
        _mm512_mask_storeu_ps(y + t * ys, rows, acc[t]);
        acc[t] = _mm512_setzero_ps();
    }
}

/* Where the weights of a tile pass come from. Q8_0: the records at rec, read
 * in place; pf, if given, is prefetched a record per block during the first
 * token tile. Q4: with rec, a ring at panel of mask + 1 blocks (a power of
 * two, at least 6 + UNPACK_AHEAD) that each record is unpacked into
 * UNPACK_AHEAD steps before its product is issued, the record D_PF blocks
 * ahead prefetched (past the group's end that is the next group, usually
 * this thread's next); without rec, a panel already holding all the blocks
 * (mask all ones), pf as for Q8_0. */
struct tile_src {
    const uint8_t *rec;
    uint8_t *panel;
    int64_t mask;
    const uint8_t *pf;
};

enum { D_PF = 8 }; /* records prefetched ahead */

/* One token tile (nt tokens; a literal GROUP for full tiles, so that the
 * chains are unrolled without tests) of the products of ng consecutive row
 * groups, whose weights follow each other (group after group, nb blocks
 * each): one pipeline over all ng * nb blocks, so that a matrix of few
 * columns does not fill and drain it once per group. Group g's results go
 * to y + g * GROUP (rows: all sixteen but in the last group, last_rows).
 *
 * Block i's product goes to C tile (0, 3, 6, 7)[i % 4]: four products are
 * in flight. Step i stores block i's sums, issues block i + 4's product in
 * the freed tile and runs block i - 1's float steps, whose sums were stored
 * a step earlier. Blocks enter each chain in order; a group's chains are
 * stored, and restarted from zero, after its last block. */
static inline __attribute__((always_inline)) void tile_pass(const struct tile_src *src, int64_t nb, int64_t ng,
                                                             const uint8_t *tile, const int nt, bool pf_on, float *y,
                                                             int64_t ys, __mmask16 last_rows,
                                                             const enum tile_kind kind) {
    enum { UNPACK_AHEAD = 2 };
    const size_t rec_bytes = rec_size(kind);
    const size_t tile_bytes = kind_has_min(kind) ? Q41_TILE_BYTES : Q80_TILE_BYTES;
    const bool unpack = kind != KIND_Q8 && src->rec;
    const int64_t n = nb * ng;
    _Alignas(64) int32_t cs[4][GROUP * GROUP];
    const uint8_t *rec = src->rec;
    /* the activation blocks of the next product issued and of the next
     * block of the chains (block i's is i mod nb), and the chains' group */
    const uint8_t *a_issue = tile, *a_chain = tile, *const a_end = tile + (size_t)nb * tile_bytes;
    int64_t g = 0;
/* block b's Q4 panel block; its weights: its Q8_0 record, or that block */
#define P_AT(b) (src->panel + (size_t)((b) & src->mask) * Q4_PANEL_BLOCK)
#define W_AT(b) (kind == KIND_Q8 ? rec + (size_t)(b) * Q80_REC : (const uint8_t *)P_AT(b))
#define T_UNPACK(b)                                                                                       \
    do {                                                                                                  \
        const uint8_t *r_ = rec + (size_t)(b) * rec_bytes;                                                \
        for (size_t o_ = 0; o_ < rec_bytes; o_ += 64)                                                     \
            _mm_prefetch((const char *)r_ + D_PF * rec_bytes + o_, _MM_HINT_T0);                          \
        unpack_rec(r_, P_AT(b), kind);                                                                    \
    } while (0)
#define T_ISSUE(c, b)                                                                                     \
    do {                                                                                                  \
        TILE_LOAD(1, a_issue, 32);                                                                        \
        if ((a_issue += tile_bytes) == a_end) a_issue = tile;                                             \
        TILE_LOAD(2, W_AT(b), 64);                                                                        \
        TILE_ZERO(c);                                                                                     \
        if (kind_has_min(kind)) TILE_DPBSUD(c, 1, 2);                                                     \
        else TILE_DPBSSD(c, 1, 2);                                                                        \
    } while (0)
#define T_CHAIN(k, b)                                                                                     \
    do {                                                                                                  \
        block_chain(acc, cs[k], W_AT(b), a_chain, nt, kind);                                              \
        if ((a_chain += tile_bytes) == a_end) {                                                           \
            a_chain = tile;                                                                               \
            group_done(acc, y + g * GROUP, ys, nt, g == ng - 1 ? last_rows : (__mmask16)0xFFFF);          \
            g++;                                                                                          \
        }                                                                                                 \
    } while (0)
#define T_STEP(c, k)                                                                                      \
    do {                                                                                                  \
        int64_t b_ = b + (k);                                                                             \
        if (b_ >= n) break;                                                                               \
        TILE_STORE(c, cs[k], 64);                                                                         \
        if (unpack && b_ + 4 + UNPACK_AHEAD < n) T_UNPACK(b_ + 4 + UNPACK_AHEAD);                         \
        if (pf_on)                                                                                        \
            for (size_t o_ = 0; o_ < rec_bytes; o_ += 64)                                                 \
                _mm_prefetch((const char *)src->pf + (size_t)b_ * rec_bytes + o_, _MM_HINT_T0);           \
        if (b_ + 4 < n) T_ISSUE(c, b_ + 4);                                                               \
        if (b_ > 0) T_CHAIN(((k) + 3) % 4, b_ - 1);                                                       \
    } while (0)
    __m512 acc[GROUP];
#pragma GCC unroll 16
    for (int t = 0; t < GROUP; t++) acc[t] = _mm512_setzero_ps();
    if (unpack)
        for (int64_t b = 0; b < 4 + UNPACK_AHEAD && b < n; b++) T_UNPACK(b);
    if (n > 0) T_ISSUE(0, 0);
    if (n > 1) T_ISSUE(3, 1);
    if (n > 2) T_ISSUE(6, 2);
    if (n > 3) T_ISSUE(7, 3);
    for (int64_t b = 0; b < n; b += 4) {
        T_STEP(0, 0);
        T_STEP(3, 1);
        T_STEP(6, 2);
        T_STEP(7, 3);
    }
    T_CHAIN((n - 1) % 4, n - 1);
#undef P_AT
#undef W_AT
#undef T_UNPACK
#undef T_ISSUE
#undef T_CHAIN
#undef T_STEP
}

/* The products of the groups from r0 on (nr rows in all; ng groups when a
 * single token tile makes one pass of them all, else one group) against
 * every token tile of packed, the weights from src. */
static inline __attribute__((always_inline)) void tiles(const struct tile_src *src, int64_t nb, int64_t r0, int nr,
                                                         const uint8_t *packed, int64_t n_tok, float *y, int64_t ys,
                                                         const enum tile_kind kind) {
    const int64_t ng = (nr + GROUP - 1) / GROUP;
    const __mmask16 last_rows = (__mmask16)((1u << (nr - (ng - 1) * GROUP)) - 1);
    const size_t tile_bytes = kind_has_min(kind) ? Q41_TILE_BYTES : Q80_TILE_BYTES;
    configure();
    for (int64_t t0 = 0; t0 < n_tok; t0 += GROUP) {
        const uint8_t *tile = packed + (size_t)(t0 / GROUP) * (size_t)nb * tile_bytes;
        bool pf_on = src->pf && t0 == 0;
        if (n_tok - t0 >= GROUP) tile_pass(src, nb, ng, tile, GROUP, pf_on, y + t0 * ys + r0, ys, last_rows, kind);
        else tile_pass(src, nb, ng, tile, (int)(n_tok - t0), pf_on, y + t0 * ys + r0, ys, last_rows, kind);
    }
}

static void q8_tiles(const uint8_t *recs, int64_t nb, int64_t r0, int nr, const uint8_t *packed, int64_t n_tok,
                     float *y, int64_t ys, bool pf) {
    struct tile_src src = {.rec = recs, .pf = pf ? recs + D_PF * Q80_REC : NULL};
    tiles(&src, nb, r0, nr, packed, n_tok, y, ys, KIND_Q8);
}

static void q4_0_tiles(const struct tile_src *src, int64_t nb, int64_t r0, int nr, const uint8_t *packed,
                       int64_t n_tok, float *y, int64_t ys) {
    tiles(src, nb, r0, nr, packed, n_tok, y, ys, KIND_Q4_0);
}

static void q4_1_tiles(const struct tile_src *src, int64_t nb, int64_t r0, int nr, const uint8_t *packed,
                       int64_t n_tok, float *y, int64_t ys) {
    tiles(src, nb, r0, nr, packed, n_tok, y, ys, KIND_Q4_1);
}

/* Mat-mat (Q4_1): rows [r0, r0 + nr) against n_tok packed Q8_1 rows, from
 * the weights as they are in the file: each row's blocks put into records
 * (as the repacking does), then unpacked into the panel. */
static bool rows_matmat_q4_1(const struct tensor_matrix *w, int64_t r0, int nr, const uint8_t *packed, int64_t n_tok,
                             float *y, int64_t ys) {
    int64_t nb = w->cols / QK;
    uint8_t *panel = panel_get((size_t)nb * (Q4_PANEL_BLOCK + Q41_REC));
    if (!panel) return false;
    uint8_t *recs = panel + (size_t)nb * Q4_PANEL_BLOCK;
    memset(recs, 0, (size_t)nb * Q41_REC);
    /* row by row: the group's rows are one contiguous run of memory, read
     * in order so the prefetchers stream it */
    for (int r = 0; r < nr; r++) {
        const block_q4_1 *x = (const block_q4_1 *)((const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes);
        for (int64_t b = 0; b < nb; b++) rec_put_row_q4(recs + (size_t)b * Q41_REC, r, x[b].qs, x[b].d, &x[b].m);
    }
    for (int64_t b = 0; b < nb; b++) unpack_rec_q4(recs + (size_t)b * Q41_REC, panel + (size_t)b * Q4_PANEL_BLOCK, true);
    struct tile_src src = {.panel = panel, .mask = -1};
    q4_1_tiles(&src, nb, r0, nr, packed, n_tok, y, ys);
    return true;
}

/* Mat-mat from the records of the groups from r0 on (nr rows): one token
 * tile in one pass over all of them (each record unpacked into a ring just
 * before its product, so the float steps of earlier blocks run while the
 * records stream in); more tokens, one group (nr <= GROUP), its records
 * unpacked once into a panel every token tile reads. */
static void q5_0_tiles(const struct tile_src *src, int64_t nb, int64_t r0, int nr, const uint8_t *packed,
                       int64_t n_tok, float *y, int64_t ys) {
    tiles(src, nb, r0, nr, packed, n_tok, y, ys, KIND_Q5_0);
}

static void q5_1_tiles(const struct tile_src *src, int64_t nb, int64_t r0, int nr, const uint8_t *packed,
                       int64_t n_tok, float *y, int64_t ys) {
    tiles(src, nb, r0, nr, packed, n_tok, y, ys, KIND_Q5_1);
}

/* Mat-mat from the records rec of the groups from r0 on (nr rows), kind
 * Q4_0, Q4_1, Q5_0 or Q5_1: one token tile in one pass over all of them (each
 * record unpacked into a ring just before its product, so the float steps
 * of earlier blocks run while the records stream in); more tokens, one
 * group (nr <= GROUP), its records unpacked once into a panel every token
 * tile reads (panel: nb panel blocks, or NULL for this thread's buffer). */
static bool recs_matmat(const uint8_t *rec, int64_t nb, int64_t r0, int nr, const uint8_t *packed, int64_t n_tok,
                        float *y, int64_t ys, enum tile_kind kind, uint8_t *panel) {
    enum { RING = 8 };
    const size_t rec_bytes = rec_size(kind);
    void (*run)(const struct tile_src *, int64_t, int64_t, int, const uint8_t *, int64_t, float *, int64_t) =
        kind == KIND_Q4_1 ? q4_1_tiles : kind == KIND_Q5_0 ? q5_0_tiles : kind == KIND_Q5_1 ? q5_1_tiles : q4_0_tiles;
    if (n_tok <= GROUP) {
        _Alignas(64) uint8_t ring[RING * Q4_PANEL_BLOCK];
        struct tile_src src = {.rec = rec, .panel = ring, .mask = RING - 1};
        run(&src, nb, r0, nr, packed, n_tok, y, ys);
        return true;
    }
    if (!panel) panel = panel_get((size_t)nb * Q4_PANEL_BLOCK);
    if (!panel) return false;
    for (int64_t b = 0; b < nb; b++) {
        for (size_t o = 0; o < rec_bytes; o += 64)
            _mm_prefetch((const char *)rec + (size_t)(b + 8) * rec_bytes + o, _MM_HINT_T0);
        unpack_rec(rec + (size_t)b * rec_bytes, panel + (size_t)b * Q4_PANEL_BLOCK, kind);
    }
    /* while the tiles work, the next group's records come in (the next
     * group is usually this thread's next, and past the end a prefetch
     * does nothing) */
    struct tile_src src = {.panel = panel, .mask = -1, .pf = rec + (size_t)nb * rec_bytes};
    run(&src, nb, r0, nr, packed, n_tok, y, ys);
    return true;
}

/* recs_matmat from the repacked weights of w (Q4_0 or Q4_1). */
static bool panel_matmat_q4(const struct tensor_matrix *w, int64_t r0, int nr, const uint8_t *packed, int64_t n_tok,
                            float *y, int64_t ys, bool has_min) {
    int64_t nb = w->cols / QK;
    const size_t rec_bytes = has_min ? Q41_REC : Q40_REC;
    const uint8_t *rec = (const uint8_t *)w->panel + (size_t)(r0 / GROUP) * (size_t)nb * rec_bytes;
    return recs_matmat(rec, nb, r0, nr, packed, n_tok, y, ys, has_min ? KIND_Q4_1 : KIND_Q4_0, NULL);
}

/* ---- repacked weights (tensor_matrix.panel) ----------------------------- *
 *
 * At load the Q8_0 weights are rearranged once (as the Q4_1 weights are,
 * above) into the records the tiles take (see Q80_REC), group of sixteen
 * rows by group, block by block, rows past the matrix's last zeros. Mat-mat
 * then streams the records in order as B tiles, and mat-vec multiplies each
 * 64-byte row of a record by four broadcast activation bytes, the sixteen
 * rows' partial sums in sixteen lanes. The integers and the chain of each
 * element are those of the row kernels above, so the results are the same
 * bits.
 */

static size_t repack_size_q8_0(int64_t rows, int64_t cols) {
    return (size_t)((rows + GROUP - 1) / GROUP) * (size_t)(cols / QK) * Q80_REC;
}

static void repack_q8_0(const struct tensor_matrix *w, void *dst) {
    int64_t nb = w->cols / QK, groups = (w->rows + GROUP - 1) / GROUP;
    memset(dst, 0, repack_size_q8_0(w->rows, w->cols));
    for (int64_t g = 0; g < groups; g++)
        for (int r = 0; r < GROUP && g * GROUP + r < w->rows; r++) {
            const block_q8_0 *x = (const block_q8_0 *)((const uint8_t *)w->data + (size_t)(g * GROUP + r) * w->row_bytes);
            for (int64_t b = 0; b < nb; b++)
                rec_put_row_q8((uint8_t *)dst + (size_t)(g * nb + b) * Q80_REC, r, x[b].qs, x[b].d);
        }
}

/* Mat-vec of the group at r0 against one Q8_0 row (ysum: the sums of its
 * blocks' quants): sums of (q + 128) y, less 128 ysum, the sixteen rows in
 * the lanes of two vectors. */
static void panel_matvec_q8_0(const struct tensor_matrix *w, int64_t r0, int nr, const block_q8_0 *y,
                              const int32_t *ysum, float *out) {
    int64_t nb = w->cols / QK;
    const uint8_t *rec = (const uint8_t *)w->panel + (size_t)(r0 / GROUP) * (size_t)nb * Q80_REC;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, rec += Q80_REC) {
        for (int o = 0; o < Q80_REC; o += 64) _mm_prefetch((const char *)rec + 2048 + o, _MM_HINT_T0);
        const uint8_t *yq = (const uint8_t *)y[b].qs;
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) {
            s0 = _mm512_dpbusd_epi32(s0, _mm512_xor_si512(_mm512_loadu_si512(rec + 64 * k), flip),
                                     _mm512_set1_epi32(load_i32(yq + 4 * k)));
            s1 = _mm512_dpbusd_epi32(s1, _mm512_xor_si512(_mm512_loadu_si512(rec + 64 * (k + 4)), flip),
                                     _mm512_set1_epi32(load_i32(yq + 16 + 4 * k)));
        }
        __m512i sums = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(ysum[b] * 128));
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + GROUP * 32)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(d, _mm512_set1_ps(f16t(y[b].d))), acc);
    }
    _Alignas(64) float res[GROUP];
    _mm512_store_ps(res, acc);
    for (int r = 0; r < nr; r++) out[r] = res[r];
}

static bool rows_product_q4_1_group(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq,
                                    size_t xq_row, const void *packed, int64_t n_tok, float *y, int64_t ys) {
    int nr = (int)(r1 - r0);
    if (n_tok == 1) {
        float out[GROUP];
        if (w->panel) panel_matvec_q4(w, r0, nr, xq, NULL, out, true);
        else if (!rows_matvec_q4_1(w, r0, nr, xq, out)) return false;
        for (int r = 0; r < nr; r++) y[r0 + r] = out[r];
        return true;
    }
    return w->panel ? panel_matmat_q4(w, r0, nr, packed, n_tok, y, ys, true)
                    : rows_matmat_q4_1(w, r0, nr, packed, n_tok, y, ys);
}

static bool rows_product_q4_0_group(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq,
                                    size_t xq_row, const void *packed, int64_t n_tok, float *y, int64_t ys) {
    if (!w->panel) return rows_product_q8_family_group(w, r0, r1, xq, xq_row, packed, n_tok, y, ys);
    int nr = (int)(r1 - r0);
    if (n_tok == 1) {
        float out[GROUP];
        panel_matvec_q4(w, r0, nr, xq, packed, out, false);
        for (int r = 0; r < nr; r++) y[r0 + r] = out[r];
        return true;
    }
    return panel_matmat_q4(w, r0, nr, packed, n_tok, y, ys, false);
}

static bool rows_product_q8_0_group(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq,
                                    size_t xq_row, const void *packed, int64_t n_tok, float *y, int64_t ys) {
    if (!w->panel) return rows_product_q8_family_group(w, r0, r1, xq, xq_row, packed, n_tok, y, ys);
    int nr = (int)(r1 - r0);
    int64_t nb = w->cols / QK;
    if (n_tok == 1) {
        float out[GROUP];
        panel_matvec_q8_0(w, r0, nr, xq, packed, out);
        for (int r = 0; r < nr; r++) y[r0 + r] = out[r];
        return true;
    }
    q8_tiles((const uint8_t *)w->panel + (size_t)(r0 / GROUP) * (size_t)nb * Q80_REC, nb, r0, nr, packed, n_tok, y,
             ys, true);
    return true;
}

/* ---- Q5_0 products (records above, before the tile passes) ------------ */

static int32_t block_sum_q5_0(const block_q5_0 *x, const block_q8_0 *y) {
    uint32_t qh;
    memcpy(&qh, x->qh, 4);
    int32_t s = 0;
    for (int j = 0; j < QK / 2; j++) {
        s += ((int)((x->qs[j] & 0x0F) | ((qh >> j) & 1) << 4) - 16) * y->qs[j];
        s += ((int)((x->qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16) * y->qs[j + QK / 2];
    }
    return s;
}

static int32_t sum_q5_0(const void *x, const block_q8_0 *y) { return block_sum_q5_0(x, y); }

static void vec_dot_q5_0_amx(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    *s = chain_q8_family(n, vx, sizeof(block_q5_0), vy, sum_q5_0);
}

static void vec_dot_q5_1_amx(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK; b++) {
        uint32_t qh;
        memcpy(&qh, x[b].qh, 4);
        int32_t S = 0;
        for (int j = 0; j < QK / 2; j++) {
            S += (int)((x[b].qs[j] & 0x0F) | ((qh >> j) & 1) << 4) * y[b].qs[j];
            S += (int)((x[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) * y[b].qs[j + QK / 2];
        }
        acc = fmaf((float)S, f16t(x[b].d) * f16t(y[b].d), acc);
        acc = fmaf(f16t(x[b].m), f16t(y[b].s), acc);
    }
    *s = acc;
}

/* Row r's block into record rec (zeros before the first row goes in), a
 * block_q5_0 or (has_min) a block_q5_1: chunk c of the nibbles is the
 * block's qs[4c .. 4c + 3] as they are. */
static void rec_put_row_q5(uint8_t *rec, int r, const uint8_t *blk, bool has_min) {
    const block_q5_0 *x0 = (const block_q5_0 *)blk;
    const block_q5_1 *x1 = (const block_q5_1 *)blk;
    const uint8_t *qs = has_min ? x1->qs : x0->qs;
    uint32_t qh;
    memcpy(&qh, has_min ? x1->qh : x0->qh, 4);
    for (int c = 0; c < 4; c++) memcpy(rec + 64 * c + 4 * r, qs + 4 * c, 4);
    for (int k = 0; k < 8; k++) {
        uint64_t m;
        memcpy(&m, rec + Q50_HB + 8 * k, 8);
        m |= (uint64_t)((qh >> (4 * k)) & 0xF) << (4 * r);
        memcpy(rec + Q50_HB + 8 * k, &m, 8);
    }
    memcpy(rec + Q50_D + 2 * r, has_min ? &x1->d : &x0->d, 2);
    if (has_min) memcpy(rec + Q51_M + 2 * r, &x1->m, 2);
}

/* Rows [r0, r0 + nr) (nr <= GROUP) of w (Q5_0 or Q5_1) into the records of one group. */
static void recs_put_group_q5(const struct tensor_matrix *w, int64_t r0, int nr, uint8_t *recs) {
    const bool has_min = w->type == TENSOR_TYPE_Q5_1;
    const size_t rb = has_min ? Q51_REC : Q50_REC, bb = has_min ? sizeof(block_q5_1) : sizeof(block_q5_0);
    int64_t nb = w->cols / QK;
    memset(recs, 0, (size_t)nb * rb);
    for (int r = 0; r < nr; r++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes;
        for (int64_t b = 0; b < nb; b++) rec_put_row_q5(recs + (size_t)b * rb, r, row + (size_t)b * bb, has_min);
    }
}

static size_t repack_size_q5_0(int64_t rows, int64_t cols) {
    return (size_t)((rows + GROUP - 1) / GROUP) * (size_t)(cols / QK) * Q50_REC;
}

static size_t repack_size_q5_1(int64_t rows, int64_t cols) {
    return (size_t)((rows + GROUP - 1) / GROUP) * (size_t)(cols / QK) * Q51_REC;
}

/* Q5_0 or Q5_1 (w->type). */
static void repack_q5(const struct tensor_matrix *w, void *dst) {
    const size_t rb = w->type == TENSOR_TYPE_Q5_1 ? Q51_REC : Q50_REC;
    int64_t nb = w->cols / QK;
    for (int64_t g = 0; g * GROUP < w->rows; g++) {
        int nr = w->rows - g * GROUP < GROUP ? (int)(w->rows - g * GROUP) : GROUP;
        recs_put_group_q5(w, g * GROUP, nr, (uint8_t *)dst + (size_t)g * (size_t)nb * rb);
    }
}

/* Mat-vec of one group's records against a Q8_0 row (ysum: the sums of its
 * blocks' quants): eight VNNI products of q in 0..31 with four broadcast
 * activation bytes each, less 16 ysum, the sixteen rows in sixteen lanes.
 * Q5_1 (has_min): against a Q8_1 row, no offset, and the mins' term. */
static inline __attribute__((always_inline)) void recs_matvec_q5(const uint8_t *rec, int64_t nb, int nr,
                                                                  const void *vy, const int32_t *ysum, float *out,
                                                                  const bool has_min) {
    const size_t rb = has_min ? Q51_REC : Q50_REC;
    __m512 acc = _mm512_setzero_ps();
    const uint8_t *pf = line_ahead(rec, 2048);
    for (int64_t b = 0; b < nb; b++, rec += rb) {
        pf = prefetch_lines(pf, rec + rb + 2048);
        const uint8_t *yq = has_min ? (const uint8_t *)((const block_q8_1 *)vy)[b].qs
                                    : (const uint8_t *)((const block_q8_0 *)vy)[b].qs;
        uint16_t yd = has_min ? ((const block_q8_1 *)vy)[b].d : ((const block_q8_0 *)vy)[b].d;
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) {
            s0 = _mm512_dpbusd_epi32(s0, q5_rec_row(rec, k), _mm512_set1_epi32(load_i32(yq + 4 * k)));
            s1 = _mm512_dpbusd_epi32(s1, q5_rec_row(rec, k + 4), _mm512_set1_epi32(load_i32(yq + 16 + 4 * k)));
        }
        __m512i S = _mm512_add_epi32(s0, s1);
        if (!has_min) S = _mm512_sub_epi32(S, _mm512_set1_epi32(ysum[b] * 16));
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + Q50_D)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, _mm512_set1_ps(f16t(yd))), acc);
        if (has_min) {
            __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + Q51_M)));
            acc = _mm512_fmadd_ps(m, _mm512_set1_ps(f16t(((const block_q8_1 *)vy)[b].s)), acc);
        }
    }
    _Alignas(64) float res[GROUP];
    _mm512_store_ps(res, acc);
    for (int r = 0; r < nr; r++) out[r] = res[r];
}

static void recs_matvec_q5_0(const uint8_t *rec, int64_t nb, int nr, const void *y, const int32_t *ysum, float *out) {
    recs_matvec_q5(rec, nb, nr, y, ysum, out, false);
}

static void recs_matvec_q5_1(const uint8_t *rec, int64_t nb, int nr, const void *y, float *out) {
    recs_matvec_q5(rec, nb, nr, y, NULL, out, true);
}

/* One group (Q5_0 or Q5_1): from the repacked records, or (no panel) from
 * records made of the file's rows for this call. */
static bool rows_product_q5_group(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq,
                                  size_t xq_row, const void *packed, int64_t n_tok, float *y, int64_t ys) {
    (void)xq_row;
    const bool has_min = w->type == TENSOR_TYPE_Q5_1;
    const size_t rb = has_min ? Q51_REC : Q50_REC;
    int nr = (int)(r1 - r0);
    int64_t nb = w->cols / QK;
    const uint8_t *rec;
    uint8_t *panel = NULL;
    if (w->panel) {
        rec = (const uint8_t *)w->panel + (size_t)(r0 / GROUP) * (size_t)nb * rb;
    } else {
        panel = panel_get((size_t)nb * (Q4_PANEL_BLOCK + rb));
        if (!panel) return false;
        uint8_t *recs = panel + (size_t)nb * Q4_PANEL_BLOCK;
        recs_put_group_q5(w, r0, nr, recs);
        rec = recs;
    }
    if (n_tok == 1) {
        float out[GROUP];
        if (has_min) recs_matvec_q5_1(rec, nb, nr, xq, out);
        else recs_matvec_q5_0(rec, nb, nr, xq, packed, out);
        for (int r = 0; r < nr; r++) y[r0 + r] = out[r];
        return true;
    }
    return recs_matmat(rec, nb, r0, nr, packed, n_tok, y, ys, has_min ? KIND_Q5_1 : KIND_Q5_0, panel);
}

/* ---- whole products over any number of row groups ----------------------
 *
 * rows_product takes rows [r0, r1) from a group boundary on: the repacked
 * Q4_0, Q4_1 and Q8_0 weights of a decode step's few tokens (one token
 * tile) in one tile pass over all the groups, everything else one group at
 * a time. */

typedef bool (*group_product_fn)(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq,
                                 size_t xq_row, const void *packed, int64_t n_tok, float *y, int64_t ys);

static bool by_groups(group_product_fn f, const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq,
                      size_t xq_row, const void *packed, int64_t n_tok, float *y, int64_t ys) {
    for (int64_t g = r0; g < r1; g += GROUP)
        if (!f(w, g, g + GROUP < r1 ? g + GROUP : r1, xq, xq_row, packed, n_tok, y, ys)) return false;
    return true;
}

static inline bool one_pass(const struct tensor_matrix *w, int64_t n_tok) {
    return w->panel && n_tok > 1 && n_tok <= GROUP;
}

static bool rows_product_q8_family(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq,
                                   size_t xq_row, const void *packed, int64_t n_tok, float *y, int64_t ys) {
    return by_groups(rows_product_q8_family_group, w, r0, r1, xq, xq_row, packed, n_tok, y, ys);
}

static bool rows_product_q4_K(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq, size_t xq_row,
                              const void *packed, int64_t n_tok, float *y, int64_t ys) {
    return by_groups(rows_product_q4_K_group, w, r0, r1, xq, xq_row, packed, n_tok, y, ys);
}

static bool rows_product_q4_1(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq, size_t xq_row,
                              const void *packed, int64_t n_tok, float *y, int64_t ys) {
    if (one_pass(w, n_tok)) return panel_matmat_q4(w, r0, (int)(r1 - r0), packed, n_tok, y, ys, true);
    return by_groups(rows_product_q4_1_group, w, r0, r1, xq, xq_row, packed, n_tok, y, ys);
}

static bool rows_product_q4_0(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq, size_t xq_row,
                              const void *packed, int64_t n_tok, float *y, int64_t ys) {
    if (one_pass(w, n_tok)) return panel_matmat_q4(w, r0, (int)(r1 - r0), packed, n_tok, y, ys, false);
    return by_groups(rows_product_q4_0_group, w, r0, r1, xq, xq_row, packed, n_tok, y, ys);
}

static bool rows_product_q8_0(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq, size_t xq_row,
                              const void *packed, int64_t n_tok, float *y, int64_t ys) {
    if (one_pass(w, n_tok)) {
        int64_t nb = w->cols / QK;
        q8_tiles((const uint8_t *)w->panel + (size_t)(r0 / GROUP) * (size_t)nb * Q80_REC, nb, r0, (int)(r1 - r0),
                 packed, n_tok, y, ys, true);
        return true;
    }
    return by_groups(rows_product_q8_0_group, w, r0, r1, xq, xq_row, packed, n_tok, y, ys);
}

/* Q5_0 or Q5_1 (w->type). */
static bool rows_product_q5(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq, size_t xq_row,
                            const void *packed, int64_t n_tok, float *y, int64_t ys) {
    if (one_pass(w, n_tok)) {
        const bool has_min = w->type == TENSOR_TYPE_Q5_1;
        int64_t nb = w->cols / QK;
        return recs_matmat((const uint8_t *)w->panel + (size_t)(r0 / GROUP) * (size_t)nb * (has_min ? Q51_REC : Q50_REC),
                           nb, r0, (int)(r1 - r0), packed, n_tok, y, ys, has_min ? KIND_Q5_1 : KIND_Q5_0, NULL);
    }
    return by_groups(rows_product_q5_group, w, r0, r1, xq, xq_row, packed, n_tok, y, ys);
}

void tensor_kernels_init_amx(struct tensor_kernels *k) {
    k->name = "avx512-amx";
    k->isa = TENSOR_ISA_AMX;
    static const int types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q8_0};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        k->vec_dot_x2[types[i]] = NULL;
        k->vec_dot_tile[types[i]] = NULL;
        k->rows_product[types[i]] = rows_product_q8_family;
    }
    k->vec_dot_x2[TENSOR_TYPE_Q4_K] = NULL;
    k->vec_dot_tile[TENSOR_TYPE_Q4_K] = NULL;
    k->rows_product[TENSOR_TYPE_Q4_K] = rows_product_q4_K;
    k->vec_dot[TENSOR_TYPE_Q4_K] = vec_dot_q4_K_amx;
    k->vec_dot_x2[TENSOR_TYPE_Q4_1] = NULL;
    k->vec_dot_tile[TENSOR_TYPE_Q4_1] = NULL;
    k->rows_product[TENSOR_TYPE_Q4_1] = rows_product_q4_1;
    k->vec_dot[TENSOR_TYPE_Q4_1] = vec_dot_q4_1_amx;
    k->pack[TENSOR_TYPE_Q8_1] = pack_q8_1;
    k->quantize_tile[TENSOR_TYPE_Q8_1] = quantize_tile_q8_1;
    k->quantize_tile[TENSOR_TYPE_Q8_0] = quantize_tile_q8_0;
    k->packed_size[TENSOR_TYPE_Q8_1] = packed_size_q8_1;
    k->pack[TENSOR_TYPE_Q8_K] = pack_q8_K;
    k->packed_size[TENSOR_TYPE_Q8_K] = packed_size_q8_K;
    k->vec_dot[TENSOR_TYPE_Q4_0] = vec_dot_q4_0_amx;
    k->vec_dot[TENSOR_TYPE_Q8_0] = vec_dot_q8_0_amx;
    k->pack[TENSOR_TYPE_Q8_0] = pack_q8_0;
    k->packed_size[TENSOR_TYPE_Q8_0] = packed_size_q8_0;
    k->rows_product[TENSOR_TYPE_Q8_0] = rows_product_q8_0;
    k->rows_product[TENSOR_TYPE_Q4_0] = rows_product_q4_0;
    k->repack_size[TENSOR_TYPE_Q4_0] = repack_size_q4_0;
    k->repack[TENSOR_TYPE_Q4_0] = repack_q4_0;
    k->repack_size[TENSOR_TYPE_Q4_1] = repack_size_q4_1;
    k->repack[TENSOR_TYPE_Q4_1] = repack_q4_1;
    k->repack_size[TENSOR_TYPE_Q8_0] = repack_size_q8_0;
    k->repack[TENSOR_TYPE_Q8_0] = repack_q8_0;
    k->vec_dot[TENSOR_TYPE_Q5_0] = vec_dot_q5_0_amx;
    k->vec_dot_x2[TENSOR_TYPE_Q5_0] = NULL;
    k->vec_dot_tile[TENSOR_TYPE_Q5_0] = NULL;
    k->rows_product[TENSOR_TYPE_Q5_0] = rows_product_q5;
    k->repack_size[TENSOR_TYPE_Q5_0] = repack_size_q5_0;
    k->repack[TENSOR_TYPE_Q5_0] = repack_q5;
    k->vec_dot[TENSOR_TYPE_Q5_1] = vec_dot_q5_1_amx;
    k->vec_dot_x2[TENSOR_TYPE_Q5_1] = NULL;
    k->vec_dot_tile[TENSOR_TYPE_Q5_1] = NULL;
    k->rows_product[TENSOR_TYPE_Q5_1] = rows_product_q5;
    k->repack_size[TENSOR_TYPE_Q5_1] = repack_size_q5_1;
    k->repack[TENSOR_TYPE_Q5_1] = repack_q5;
    k->rows_group = GROUP;
}
#endif
