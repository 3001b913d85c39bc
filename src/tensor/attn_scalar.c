/*
 * attn_scalar.c — the reference attention of one query head: scores, a
 * softmax with the maximum subtracted, then the weighted sum of V rows, in
 * plain C. The SIMD versions (attn_x86.h) follow the same three passes.
 */
#include <math.h>

#include "tensor/kernels.h"

void attn_head_scalar(int hd, const float *restrict q, const struct attn_span *spans, int n_spans, size_t stride,
                      float scale, float *restrict scores, float *restrict out) {
    int n = 0;
    float maxs = -INFINITY;
    for (int s = 0; s < n_spans; s++) {
        for (int j = 0; j < spans[s].n; j++, n++) {
            const float *k = spans[s].k + (size_t)j * stride;
            float dot = 0.0f;
            for (int d = 0; d < hd; d++) dot += q[d] * k[d];
            scores[n] = dot * scale;
            if (scores[n] > maxs) maxs = scores[n];
        }
    }
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        scores[j] = expf(scores[j] - maxs);
        sum += scores[j];
    }
    float inv = 1.0f / sum;
    for (int d = 0; d < hd; d++) out[d] = 0.0f;
    n = 0;
    for (int s = 0; s < n_spans; s++) {
        for (int j = 0; j < spans[s].n; j++, n++) {
            const float *v = spans[s].v + (size_t)j * stride;
            float p = scores[n] * inv;
            for (int d = 0; d < hd; d++) out[d] += p * v[d];
        }
    }
}
