/*
 * quant_search.h — the scale searches the K-quant and importance-weighted
 * quantizers share, and the importance-weighted row quantizers themselves.
 * Internal to the library.
 *
 * Every search is the GGUF ecosystem's algorithm (llama.cpp's
 * ggml-quants.c) step by step, with its float32 operations in the same
 * order, so that with the build's -ffp-contract=off the results are the
 * same bits. Integer conversions keep the reference's narrowing: a value
 * stored into a uint8_t / int8_t quant wraps modulo 256 as it does there.
 * None of them allocates; scratch is the caller's.
 */
#ifndef KVIK_TENSOR_QUANT_SEARCH_H
#define KVIK_TENSOR_QUANT_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

/* A group whose weights are all below this in magnitude is stored as zeros. */
#define QUANT_GROUP_MAX_EPS 1e-15f

static inline int quant_clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/*
 * Fits x[i] ≈ scale * L[i] - *the_min, 0 <= L[i] <= nmax, *the_min >= 0,
 * minimizing sum w[i] * err^2 (sum w[i] * |err| if use_mad). Starts from
 * the plain min/max grid, then tries nstep+1 grids of nmax + rmin +
 * rdelta*is steps across the range, solving the weighted least-squares
 * scale and min of each one's quants and keeping the best. Returns the
 * scale; L gets the quants, Laux (n bytes) is scratch. (make_qkx2_quants
 * and, with the same arithmetic, make_qkx3_quants.)
 */
float quant_fit_scale_min(int n, int nmax, const float *restrict x, const float *restrict w,
                          uint8_t *restrict L, float *restrict the_min, uint8_t *restrict Laux,
                          float rmin, float rdelta, int nstep, bool use_mad);

/*
 * Fits x[i] ≈ scale * (L[i] - nmax), -nmax <= L[i] - nmax <= nmax - 1,
 * weighting each squared error by w[i] (x[i]^2 when w is NULL): the grid
 * from the largest-magnitude weight, then scales max / -(nmax + 0.1*is),
 * is = -9..9, keeping the least-squares scale of the best. Returns the
 * scale, 0 (and L all 0) for a group below QUANT_GROUP_MAX_EPS.
 * (make_qx_quants with rmse_type 1.)
 */
float quant_fit_symmetric(int n, int nmax, const float *restrict x, const float *restrict w,
                          int8_t *restrict L);

/*
 * The Q3_K reference fit: the grid from the largest-magnitude weight, then
 * up to 5 passes moving single quants where that raises the x^2-weighted
 * fit. L gets quants in 0 .. 2*nmax - 1 (all 0 for a zero group). Returns
 * the least-squares scale. (make_q3_quants with do_rmse.)
 */
float quant_fit_q3(int n, int nmax, const float *restrict x, int8_t *restrict L);

/*
 * Fits non-negative x[i] ≈ scale * L[i], 0 <= L[i] <= nmax, minimizing
 * sum w[i] * err^2: the grid from max, 8 neighbouring grids, then up to 5
 * passes moving single quants. Used on a super-block's sub-block scales
 * and mins. Returns the scale, 0 (L all 0) when max < QUANT_GROUP_MAX_EPS.
 * (make_qp_quants.)
 */
float quant_fit_positive(int n, int nmax, const float *restrict x, uint8_t *restrict L,
                         const float *restrict w);

/* ---- the importance-weighted row quantizers (quant_weighted.c) --------- */

/*
 * Each quantizes one row of n weights (n a multiple of the block size)
 * guided by qw, n non-negative importance weights (one per column). A
 * weight's error counts qw[i] * sqrt(sigma2 + x[i]^2) (Q6_K: qw[i]), sigma2
 * the row's or super-block's mean square (twice it for Q3_K, Q4_K, Q5_K).
 * The bytes equal llama.cpp's quantize_row_<type>_impl with quant weights.
 */
void quantize_row_q4_0_weighted(const float *restrict x, void *restrict y, int64_t n,
                                const float *restrict qw);
void quantize_row_q4_1_weighted(const float *restrict x, void *restrict y, int64_t n,
                                const float *restrict qw);
void quantize_row_q5_0_weighted(const float *restrict x, void *restrict y, int64_t n,
                                const float *restrict qw);
void quantize_row_q5_1_weighted(const float *restrict x, void *restrict y, int64_t n,
                                const float *restrict qw);
void quantize_row_q2_K_weighted(const float *restrict x, void *restrict y, int64_t n,
                                const float *restrict qw);
void quantize_row_q3_K_weighted(const float *restrict x, void *restrict y, int64_t n,
                                const float *restrict qw);
void quantize_row_q4_K_weighted(const float *restrict x, void *restrict y, int64_t n,
                                const float *restrict qw);
void quantize_row_q5_K_weighted(const float *restrict x, void *restrict y, int64_t n,
                                const float *restrict qw);
void quantize_row_q6_K_weighted(const float *restrict x, void *restrict y, int64_t n,
                                const float *restrict qw);

/* ---- the block tails the reference and weighted K-quantizers share (quant_k.c) */

/*
 * Q4_K / Q5_K: packs the 6-bit scales ls[] and mins lm[] (the low 6 bits of
 * each, with the reference's overflow of larger values into the next
 * fields), stores d and dmin as halves, and re-rounds the 256 weights of x
 * onto the stored grid into L (0..nmax); a sub-block whose scale is 0 keeps
 * its L.
 */
void quant_k_finish_scale_min(const float *restrict x, int nmax, const uint8_t ls[8],
                              const uint8_t lm[8], float d, float dmin, uint16_t *d_out,
                              uint16_t *dmin_out, uint8_t scales_out[12], uint8_t L[256]);
/* Q4_K's 4-bit quants of L into qs[128]. */
void quant_k_pack_q4(const uint8_t L[256], uint8_t qs[128]);
/* Q5_K's 5-bit quants of L into qs[128] and qh[32]. */
void quant_k_pack_q5(const uint8_t L[256], uint8_t qs[128], uint8_t qh[32]);
/* Q2_K / Q3_K: the 2-bit quants of L (values 0..3, upper bits dropped) into qs[64]. */
void quant_k_pack_q2(const uint8_t L[256], uint8_t qs[64]);
/*
 * Q2_K: with y's scales, d and dmin stored, re-rounds the weights of x onto
 * the stored grid into L (a sub-block whose scale is 0 keeps its L, 0..3),
 * then packs qs. y_block is a block_q2_K.
 */
void quant_k_finish_q2(const float *restrict x, uint8_t L[256], void *restrict y_block);
/*
 * Q3_K: with y's scales and d stored, re-rounds the weights of x onto the
 * stored grid (a sub-block whose scale is 0 keeps its L, 0..7), then packs
 * hmask and qs. L is clobbered. y_block is a block_q3_K.
 */
void quant_k_finish_q3(const float *restrict x, int8_t L[256], void *restrict y_block);
/* Q3_K: the 16 6-bit scales ls[] (0..63) packed into scales[12]. */
void quant_k_store_q3_scales(const int ls[16], uint8_t scales[12]);
/*
 * Q6_K, one super-block: fits each 16-weight sub-block (weights qw, or
 * x^2 when qw is NULL), quantizes the 16 scales to int8 against the largest
 * and re-rounds the weights. y_block is a block_q6_K.
 */
void quant_q6_K_block(const float *restrict x, const float *restrict qw, void *restrict y_block);

#endif /* KVIK_TENSOR_QUANT_SEARCH_H */
