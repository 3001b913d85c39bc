/*
 * quant_search.c — the scale searches of quant_search.h.
 *
 * Each keeps the reference's float32 expression shapes: w * x * l is
 * (w * x) * l, w * l * l is (w * l) * l, and sums run in index order. The
 * build forbids FMA contraction, so these give the reference's bits.
 */
#include <math.h>
#include <string.h>

#include "tensor/quant_ref.h"
#include "tensor/quant_search.h"

/*
 * The searches are written once as always-inlined bodies; the exported
 * functions call them with the group sizes the quantizers use as
 * constants, so the compiler unrolls each fixed-size loop. The arithmetic
 * is the same at every size.
 */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE float fit_scale_min(int n, int nmax, const float *restrict x, const float *restrict w,
                                  uint8_t *restrict L, float *restrict the_min, uint8_t *restrict Laux,
                                  float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)quant_clamp(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = quant_clamp(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float cur_error = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * (float)Laux[i] + this_min - x[i];
            diff = use_mad ? fabsf(diff) : diff * diff;
            cur_error += w[i] * diff;
        }
        if (cur_error < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* The weighted sums of one symmetric grid: sum w*x*l and sum w*l*l. */
ALWAYS_INLINE void symmetric_sums(int n, int nmax, float iscale, const float *restrict x,
                                  const float *restrict w, float *sumlx, float *suml2) {
    float slx = 0, sl2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = quant_clamp(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        slx += w[i] * x[i] * (float)l;
        sl2 += w[i] * (float)l * (float)l;
    }
    *sumlx = slx;
    *suml2 = sl2;
}

ALWAYS_INLINE float fit_symmetric(int n, int nmax, const float *restrict x, const float *restrict w,
                                  int8_t *restrict L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < QUANT_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    /* without weights the reference weighs by x^2; the products are the
     * same computed up front */
    float wx2[32];
    if (!w) {
        for (int i = 0; i < n; i++) wx2[i] = x[i] * x[i];
        w = wx2;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = quant_clamp(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        symmetric_sums(n, nmax, iscale, x, w, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(quant_clamp(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1) + nmax);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

ALWAYS_INLINE float fit_q3(int n, int nmax, const float *restrict x, int8_t *restrict L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < QUANT_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = quant_clamp(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            const int l = quant_clamp(quant_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (l == L[i]) continue;
            slx += w * x[i] * (float)l;
            sl2 += w * (float)l * (float)l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)l;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

ALWAYS_INLINE float fit_positive(int n, int nmax, const float *restrict x, uint8_t *restrict L,
                                 const float *restrict w) {
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max < QUANT_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)quant_nearest_int(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * (float)L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            int l = quant_nearest_int(iscale_is * x[i]);
            if (l > nmax) l = nmax;
            const float diff = x[i] - scale_is * (float)l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = quant_nearest_int(iscale * x[i]);
        if (l > nmax) l = nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * (float)L[i];
            float sl2 = suml2 - w[i] * (float)L[i] * (float)L[i];
            if (!(slx > 0 && sl2 > 0)) continue;
            int l = quant_nearest_int(x[i] * sl2 / slx);
            if (l > nmax) l = nmax;
            if (l == L[i]) continue;
            slx += w[i] * x[i] * (float)l;
            sl2 += w[i] * (float)l * (float)l;
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (uint8_t)l;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- the exported forms, specialized by group size ------------------------- */

float quant_fit_scale_min(int n, int nmax, const float *restrict x, const float *restrict w,
                          uint8_t *restrict L, float *restrict the_min, uint8_t *restrict Laux,
                          float rmin, float rdelta, int nstep, bool use_mad) {
    if (!use_mad) {
        if (n == 32 && nmax == 15) return fit_scale_min(32, 15, x, w, L, the_min, Laux, rmin, rdelta, nstep, false);
        if (n == 32 && nmax == 31) return fit_scale_min(32, 31, x, w, L, the_min, Laux, rmin, rdelta, nstep, false);
        if (n == 16 && nmax == 3) return fit_scale_min(16, 3, x, w, L, the_min, Laux, rmin, rdelta, nstep, false);
    } else if (n == 16 && nmax == 3) {
        return fit_scale_min(16, 3, x, w, L, the_min, Laux, rmin, rdelta, nstep, true);
    }
    return fit_scale_min(n, nmax, x, w, L, the_min, Laux, rmin, rdelta, nstep, use_mad);
}

float quant_fit_symmetric(int n, int nmax, const float *restrict x, const float *restrict w,
                          int8_t *restrict L) {
    if (n == 16 && nmax == 32) return fit_symmetric(16, 32, x, w, L);
    if (n == 16 && nmax == 4) return fit_symmetric(16, 4, x, w, L);
    if (n == 32 && nmax == 8) return fit_symmetric(32, 8, x, w, L);
    if (n == 32 && nmax == 16) return fit_symmetric(32, 16, x, w, L);
    return fit_symmetric(n, nmax, x, w, L);
}

float quant_fit_q3(int n, int nmax, const float *restrict x, int8_t *restrict L) {
    if (n == 16 && nmax == 4) return fit_q3(16, 4, x, L);
    return fit_q3(n, nmax, x, L);
}

float quant_fit_positive(int n, int nmax, const float *restrict x, uint8_t *restrict L,
                         const float *restrict w) {
    if (n == 16 && nmax == 15) return fit_positive(16, 15, x, L, w);
    if (n == 8 && nmax == 63) return fit_positive(8, 63, x, L, w);
    return fit_positive(n, nmax, x, L, w);
}
