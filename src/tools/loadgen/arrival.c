/*
 * arrival.c — random variates over base.h's seeded stream (xoshiro256**)
 * and the arrival process of a run: gaps between requests drawn from a gamma
 * distribution with shape k (the --burstiness) and scale 1/(rate k), so the
 * mean gap is 1/rate whatever k is and the coefficient of variation is
 * 1/sqrt(k): k = 1 is the exponential gap of a Poisson process, k < 1 bunches
 * requests into bursts, k > 1 spreads them evenly.
 */
#include <math.h>

#include "tools/loadgen/loadgen.h"

double lg_rng_normal(struct prng *r) {
    /* Box-Muller; one of the pair is thrown away to keep the state simple */
    double u1 = 1.0 - prng_uniform(r); /* (0, 1] */
    double u2 = prng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double lg_rng_gamma(struct prng *r, double shape) {
    if (!(shape > 0)) return 0;
    if (shape < 1) {
        /* Gamma(k) = Gamma(k + 1) * U^(1/k) */
        double u = 1.0 - prng_uniform(r);
        return lg_rng_gamma(r, shape + 1.0) * pow(u, 1.0 / shape);
    }
    /* Marsaglia and Tsang, "A simple method for generating gamma variables" (2000) */
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = lg_rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0);
        v = v * v * v;
        double u = 1.0 - prng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}

void lg_arrivals(double rate, double burstiness, uint64_t seed, int64_t n, double *t) {
    if (!(rate > 0) || isinf(rate)) {
        for (int64_t i = 0; i < n; i++) t[i] = 0;
        return;
    }
    double k = burstiness > 0 ? burstiness : 1.0;
    double scale = 1.0 / (rate * k);
    struct prng r;
    prng_seed(&r, seed ^ 0xA5A5A5A5u);
    double now = 0;
    for (int64_t i = 0; i < n; i++) {
        t[i] = now; /* the first request goes at once */
        now += lg_rng_gamma(&r, k) * scale;
    }
}
