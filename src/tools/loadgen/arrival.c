/*
 * arrival.c — seeded random numbers (xoshiro256**, seeded by splitmix64)
 * and the arrival process of a run: gaps between requests drawn from a gamma
 * distribution with shape k (the --burstiness) and scale 1/(rate k), so the
 * mean gap is 1/rate whatever k is and the coefficient of variation is
 * 1/sqrt(k): k = 1 is the exponential gap of a Poisson process, k < 1 bunches
 * requests into bursts, k > 1 spreads them evenly.
 */
#include <math.h>

#include "tools/loadgen/loadgen.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void lg_rng_seed(struct lg_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t lg_rng_u64(struct lg_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double lg_rng_uniform(struct lg_rng *r) { return (double)(lg_rng_u64(r) >> 11) * 0x1.0p-53; }

double lg_rng_normal(struct lg_rng *r) {
    /* Box-Muller; one of the pair is thrown away to keep the state simple */
    double u1 = 1.0 - lg_rng_uniform(r); /* (0, 1] */
    double u2 = lg_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double lg_rng_gamma(struct lg_rng *r, double shape) {
    if (!(shape > 0)) return 0;
    if (shape < 1) {
        /* Gamma(k) = Gamma(k + 1) * U^(1/k) */
        double u = 1.0 - lg_rng_uniform(r);
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
        double u = 1.0 - lg_rng_uniform(r);
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
    struct lg_rng r;
    lg_rng_seed(&r, seed ^ 0xA5A5A5A5u);
    double now = 0;
    for (int64_t i = 0; i < n; i++) {
        t[i] = now; /* the first request goes at once */
        now += lg_rng_gamma(&r, k) * scale;
    }
}
