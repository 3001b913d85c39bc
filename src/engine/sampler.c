/*
 * sampler.c — the sampling chain described in sampler.h: penalties, top-k,
 * top-p, min-p, temperature and a seeded draw, over a copy of the logits in
 * scratch space that is the sampler's own or shared with other samplers of
 * the same thread (sampler_scratch).
 *
 * A sampler itself holds only its parameters, its random stream and the
 * ring of the last repeat_last_n accepted tokens. The penalties' counts are
 * not kept per sampler: each sampling call counts the ring into the
 * scratch, under an epoch stamp so that nothing vocabulary-sized is
 * cleared per call.
 */
#include "engine/sampler.h"
#include "tensor/tensor.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

struct cand {
    float v;    // logit after the stages so far
    int32_t id; // token id
};

struct sampler_scratch {
    int32_t n_vocab;
    struct cand *cand;  // [n_vocab] the working copy of one call's logits
    uint32_t *stamp;    // [n_vocab] last epoch the token was in a history window
    int32_t *count;     // [n_vocab] its occurrences there (valid where stamp == epoch)
    uint32_t epoch;     // one per penalised sampling call, whichever sampler made it
};

struct sampler {
    struct sampler_params p; // validated copy
    int32_t n_vocab;
    uint64_t seed;      // resolved seed (never SAMPLER_SEED_RANDOM's meaning)
    struct prng rng;     // the draws (base.h: xoshiro256**)
    struct sampler_scratch *sc;  // scratch in use: shared, or own
    struct sampler_scratch *own; // allocated by sampler_new (NULL when shared)
    int32_t *hist;      // [repeat_last_n + 1] ring of accepted tokens
    int32_t hist_len;   // entries in use
    int32_t hist_pos;   // next slot to write
    int64_t (*argmax)(const float *x, int64_t n); // the kernel table's (greedy without penalties)
};

/* ---- params ----------------------------------------------------------- */

struct sampler_params sampler_params_default(void) {
    return (struct sampler_params){
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .frequency_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .seed = SAMPLER_SEED_RANDOM,
    };
}

struct sampler_params sampler_params_openai(void) {
    struct sampler_params p = sampler_params_default();
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

kvik_status sampler_params_validate(const struct sampler_params *p, struct kvik_err *err) {
    if (!p) return err_set(err, KVIK_ERR_INVALID_ARG, "sampler: params is NULL");
    if (!isfinite(p->temp))
        return err_set(err, KVIK_ERR_INVALID_ARG, "sampler: temp must be finite (got %g)",
                       (double)p->temp);
    if (p->top_k < 0)
        return err_set(err, KVIK_ERR_INVALID_ARG, "sampler: top_k must be >= 0 (0 = off), got %d",
                       (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return err_set(err, KVIK_ERR_INVALID_ARG, "sampler: top_p must be in (0, 1], got %g",
                       (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return err_set(err, KVIK_ERR_INVALID_ARG, "sampler: min_p must be in [0, 1], got %g",
                       (double)p->min_p);
    if (!(isfinite(p->repeat_penalty) && p->repeat_penalty > 0.0f))
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "sampler: repeat_penalty must be finite and > 0 (1 = off), got %g",
                       (double)p->repeat_penalty);
    if (p->repeat_last_n < 0)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "sampler: repeat_last_n must be >= 0, got %d", (int)p->repeat_last_n);
    if (!isfinite(p->frequency_penalty))
        return err_set(err, KVIK_ERR_INVALID_ARG, "sampler: frequency_penalty must be finite");
    if (!isfinite(p->presence_penalty))
        return err_set(err, KVIK_ERR_INVALID_ARG, "sampler: presence_penalty must be finite");
    return KVIK_OK;
}

/* ---- lifecycle -------------------------------------------------------- */

struct sampler_scratch *sampler_scratch_new(int32_t n_vocab, struct kvik_err *err) {
    if (n_vocab <= 0) {
        err_set(err, KVIK_ERR_INVALID_ARG, "sampler: n_vocab must be > 0, got %d", (int)n_vocab);
        return NULL;
    }
    /* one block: the struct, then cand, stamp and count (stamps start at 0) */
    size_t n = (size_t)n_vocab;
    struct sampler_scratch *sc =
        calloc(1, sizeof *sc + n * (sizeof *sc->cand + sizeof *sc->stamp + sizeof *sc->count));
    if (!sc) {
        err_set(err, KVIK_ERR_NOMEM, "sampler: out of memory for n_vocab %d", (int)n_vocab);
        return NULL;
    }
    sc->n_vocab = n_vocab;
    sc->cand = (struct cand *)(sc + 1);
    sc->stamp = (uint32_t *)(sc->cand + n);
    sc->count = (int32_t *)(sc->stamp + n);
    return sc;
}

void sampler_scratch_free(struct sampler_scratch *sc) { free(sc); }

static size_t scratch_bytes(const struct sampler_scratch *sc) {
    return sizeof *sc + (size_t)sc->n_vocab * (sizeof *sc->cand + sizeof *sc->stamp + sizeof *sc->count);
}

struct sampler *sampler_new(const struct sampler_params *p, int32_t n_vocab,
                            struct kvik_err *err) {
    return sampler_new_shared(p, n_vocab, NULL, err);
}

struct sampler *sampler_new_shared(const struct sampler_params *p, int32_t n_vocab,
                                   struct sampler_scratch *sc, struct kvik_err *err) {
    if (sampler_params_validate(p, err) != KVIK_OK) return NULL;
    if (n_vocab <= 0) {
        err_set(err, KVIK_ERR_INVALID_ARG, "sampler: n_vocab must be > 0, got %d", (int)n_vocab);
        return NULL;
    }
    if (sc && sc->n_vocab != n_vocab) {
        err_set(err, KVIK_ERR_INVALID_ARG, "sampler: the shared scratch is for n_vocab %d, not %d",
                (int)sc->n_vocab, (int)n_vocab);
        return NULL;
    }
    struct sampler *s = calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->argmax = tensor_kernels_best()->argmax;
    s->hist = malloc(((size_t)p->repeat_last_n + 1) * sizeof *s->hist);
    if (!s->hist) goto nomem;
    if (!sc && !(sc = s->own = sampler_scratch_new(n_vocab, NULL))) goto nomem;
    s->sc = sc;
    s->seed = p->seed;
    if (p->seed == SAMPLER_SEED_RANDOM) {
        uint64_t x = (uint64_t)clock_ns() ^ (uint64_t)(uintptr_t)s;
        s->seed = prng_splitmix64(&x);
    }
    sampler_reset(s);
    return s;
nomem:
    sampler_free(s);
    err_set(err, KVIK_ERR_NOMEM, "sampler: out of memory for n_vocab %d", (int)n_vocab);
    return NULL;
}

void sampler_free(struct sampler *s) {
    if (!s) return;
    sampler_scratch_free(s->own);
    free(s->hist);
    free(s);
}

size_t sampler_bytes(const struct sampler *s) {
    if (!s) return 0;
    return sizeof *s + ((size_t)s->p.repeat_last_n + 1) * sizeof *s->hist + (s->own ? scratch_bytes(s->own) : 0);
}

void sampler_reset(struct sampler *s) {
    if (!s) return;
    s->hist_len = 0;
    s->hist_pos = 0;
    prng_seed(&s->rng, s->seed);
}

uint64_t sampler_seed(const struct sampler *s) { return s ? s->seed : 0; }

void sampler_accept(struct sampler *s, int32_t token) {
    if (!s || token < 0 || token >= s->n_vocab) return;
    int32_t n = s->p.repeat_last_n;
    if (n == 0) return;
    if (s->hist_len < n) s->hist_len++; /* else the oldest is overwritten */
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % n;
}

/* ---- ordering, selection, sorting ------------------------------------- */

/* The total order of candidates: larger logit first, then lower id. */
static inline bool better(struct cand a, struct cand b) {
    return a.v > b.v || (a.v == b.v && a.id < b.id);
}

static inline void swap_cand(struct cand *a, struct cand *b) {
    struct cand t = *a;
    *a = *b;
    *b = t;
}

/* Rearranges a[0..n) so that a[0..k) hold the k best candidates (in no
 * particular order). Quickselect with a median-of-three pivot. */
static void select_top(struct cand *a, ptrdiff_t n, ptrdiff_t k) {
    ptrdiff_t lo = 0, hi = n; /* the boundary k lies inside [lo, hi) */
    while (k > lo && k < hi && hi - lo > 1) {
        ptrdiff_t mid = lo + (hi - lo) / 2;
        if (better(a[mid], a[lo])) swap_cand(&a[mid], &a[lo]);
        if (better(a[hi - 1], a[lo])) swap_cand(&a[hi - 1], &a[lo]);
        if (better(a[hi - 1], a[mid])) swap_cand(&a[hi - 1], &a[mid]);
        struct cand pivot = a[mid];
        ptrdiff_t i = lo, j = hi - 1;
        while (i <= j) {
            while (better(a[i], pivot)) i++;
            while (better(pivot, a[j])) j--;
            if (i <= j) {
                swap_cand(&a[i], &a[j]);
                i++;
                j--;
            }
        }
        /* [lo, j] not worse than pivot, [i, hi) not better, between: pivot */
        if (k <= j) hi = j + 1;
        else if (k >= i) lo = i;
        else return;
    }
}

/* Sorts a[0..n) best first (heapsort: no recursion, no allocation). */
static void sift_down(struct cand *a, size_t root, size_t n) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        /* the heap keeps the worst candidate at the root */
        if (child + 1 < n && better(a[child], a[child + 1])) child++;
        if (!better(a[root], a[child])) return;
        swap_cand(&a[root], &a[child]);
        root = child;
    }
}

static void sort_best_first(struct cand *a, size_t n) {
    if (n < 2) return;
    for (size_t i = n / 2; i-- > 0;) sift_down(a, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        swap_cand(&a[0], &a[end]);
        sift_down(a, 0, end);
    }
}

/* ---- the chain -------------------------------------------------------- */

static inline float sanitize(float x) {
    if (isnan(x)) return -INFINITY;
    if (x == INFINITY) return FLT_MAX;
    return x;
}

static bool penalties_active(const struct sampler_params *p) {
    return p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
           p->presence_penalty != 0.0f;
}

/* Token t's sanitised logit v after the penalties of its count (t is in
 * the history window just stamped). */
static inline float penalised(const struct sampler *s, int32_t t, float v) {
    const struct sampler_params *p = &s->p;
    int32_t c = s->sc->count[t];
    v = v > 0.0f ? v / p->repeat_penalty : v * p->repeat_penalty;
    v -= (float)c * p->frequency_penalty + (c > 0 ? p->presence_penalty : 0.0f);
    return sanitize(v);
}

/* Starts a new epoch of the scratch, stamps every token of the history
 * window and counts its occurrences; false when no penalty applies. */
static bool stamp_history(struct sampler *s) {
    if (s->hist_len == 0 || !penalties_active(&s->p)) return false;
    struct sampler_scratch *sc = s->sc;
    if (++sc->epoch == 0) { /* wrapped: clear the stamps once every 2^32 calls */
        memset(sc->stamp, 0, (size_t)sc->n_vocab * sizeof *sc->stamp);
        sc->epoch = 1;
    }
    for (int32_t j = 0; j < s->hist_len; j++) {
        int32_t t = s->hist[j];
        if (sc->stamp[t] != sc->epoch) {
            sc->stamp[t] = sc->epoch;
            sc->count[t] = 0;
        }
        sc->count[t]++;
    }
    return true;
}

static void apply_penalties(struct sampler *s) {
    if (!stamp_history(s)) return;
    struct sampler_scratch *sc = s->sc;
    for (int32_t j = 0; j < s->hist_len; j++) {
        int32_t t = s->hist[j];
        if (sc->stamp[t] != sc->epoch) continue; /* done: a repeat in the window */
        sc->stamp[t] = sc->epoch - 1;
        sc->cand[t].v = penalised(s, t, sc->cand[t].v);
    }
}

/* Temperature 0: the argmax of the penalised logits (ties: the lowest id),
 * read straight from the logits, without the candidate copy. */
static int32_t sample_greedy(struct sampler *s, const float *logits, int64_t argmax) {
    size_t n = (size_t)s->n_vocab, best = 0;
    if (stamp_history(s)) {
        const uint32_t *stamp = s->sc->stamp, epoch = s->sc->epoch;
        float bv = stamp[0] == epoch ? penalised(s, 0, sanitize(logits[0])) : sanitize(logits[0]);
        for (size_t i = 1; i < n; i++) {
            float v = sanitize(logits[i]);
            if (stamp[i] == epoch) v = penalised(s, (int32_t)i, v);
            if (v > bv) bv = v, best = i;
        }
        return (int32_t)best;
    }
    /* Raw comparisons give the same answer as sanitised ones (a NaN never
     * compares greater, as -inf would not), except that +inf and FLT_MAX
     * are equal once sanitised: then the first of them wins. The kernel
     * table's argmax (vectors where there are) finds the first maximum. */
    best = argmax >= 0 && argmax < (int64_t)n ? (size_t)argmax : (size_t)s->argmax(logits, (int64_t)n);
    if (logits[best] == INFINITY)
        for (best = 0; !(logits[best] >= FLT_MAX); best++) {}
    return (int32_t)best;
}

/* Stages 1-6 over a private copy of logits. Greedy (temp <= 0, every
 * logit -inf, or a temperature so small 1/temp overflows): returns the
 * argmax id. Otherwise returns -1 and leaves the survivors in
 * s->sc->cand[0..*m), each weighing exp((v - *maxv) * *inv_t). */
static int32_t run_chain(struct sampler *s, const float *logits, int64_t argmax, size_t *m_out, float *maxv_out,
                         double *inv_t_out) {
    const struct sampler_params *p = &s->p;
    struct cand *c = s->sc->cand;
    size_t n = (size_t)s->n_vocab;
    if (p->temp <= 0.0f) return sample_greedy(s, logits, argmax);

    /* 1-2. private copy, sanitised, then penalties (candidate i is token i) */
    for (size_t i = 0; i < n; i++) c[i] = (struct cand){sanitize(logits[i]), (int32_t)i};
    apply_penalties(s);

    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (c[i].v > c[best].v) best = i; /* strict: ties keep the lowest id */
    int32_t best_id = c[best].id;
    if (p->temp <= 0.0f || c[best].v == -INFINITY) return best_id;
    double inv_t = 1.0 / (double)p->temp;
    if (!isfinite(inv_t)) return best_id; /* temp so small it is greedy */

    size_t m = n;       /* candidates still in play: c[0..m) */
    size_t sorted = 0;  /* c[0..sorted) are the best, in order */

    /* 3. top-k */
    if (p->top_k > 0 && (size_t)p->top_k < m) {
        select_top(c, (ptrdiff_t)m, p->top_k);
        m = (size_t)p->top_k;
        sort_best_first(c, m);
        sorted = m;
    }

    float maxv = c[0].v;
    if (sorted == 0) {
        for (size_t i = 1; i < m; i++)
            if (c[i].v > maxv) maxv = c[i].v;
    }

    /* 4. top-p: grow a sorted prefix until its mass reaches top_p */
    if (p->top_p < 1.0f) {
        double sum = 0.0;
        for (size_t i = 0; i < m; i++) sum += exp((double)c[i].v - maxv);
        double target = (double)p->top_p * sum, cum = 0.0;
        size_t chunk = 64;
        for (size_t i = 0; i < m; i++) {
            if (i == sorted) {
                size_t want = sorted + chunk < m ? sorted + chunk : m;
                select_top(c + sorted, (ptrdiff_t)(m - sorted), (ptrdiff_t)(want - sorted));
                sort_best_first(c + sorted, want - sorted);
                sorted = want;
                chunk *= 2;
            }
            cum += exp((double)c[i].v - maxv);
            if (cum >= target) {
                m = i + 1;
                break;
            }
        }
        if (sorted > m) sorted = m;
    }

    /* 5. min-p: logit >= max + log(min_p) */
    if (p->min_p > 0.0f) {
        double thr = (double)maxv + log((double)p->min_p);
        size_t k = 0;
        if (sorted == m) {
            while (k < m && (double)c[k].v >= thr) k++;
        } else {
            for (size_t i = 0; i < m; i++)
                if ((double)c[i].v >= thr) c[k++] = c[i];
        }
        m = k > 0 ? k : 1; /* the maximum always passes; guard anyway */
    }
    *m_out = m;
    *maxv_out = maxv;
    *inv_t_out = inv_t; /* 6. temperature, applied by the callers */
    return -1;
}

int32_t sampler_sample(struct sampler *s, const float *logits) { return sampler_sample_argmax(s, logits, -1); }

int32_t sampler_sample_argmax(struct sampler *s, const float *logits, int64_t argmax) {
    if (!s || !logits) return 0;
    size_t m;
    float maxv;
    double inv_t;
    int32_t g = run_chain(s, logits, argmax, &m, &maxv, &inv_t);
    if (g >= 0) return g;
    /* 7. softmax, one draw */
    const struct cand *c = s->sc->cand;
    double sum = 0.0;
    for (size_t i = 0; i < m; i++) sum += exp(((double)c[i].v - maxv) * inv_t);
    double u = prng_uniform(&s->rng) * sum, cum = 0.0;
    for (size_t i = 0; i < m; i++) {
        cum += exp(((double)c[i].v - maxv) * inv_t);
        if (u < cum) return c[i].id;
    }
    return c[m - 1].id; /* rounding left u at the very top */
}

void sampler_probs(struct sampler *s, const float *logits, float *probs) {
    if (!s || !logits || !probs) return;
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    size_t m;
    float maxv;
    double inv_t;
    int32_t g = run_chain(s, logits, -1, &m, &maxv, &inv_t);
    if (g >= 0) {
        probs[g] = 1.0f;
        return;
    }
    const struct cand *c = s->sc->cand;
    double sum = 0.0;
    for (size_t i = 0; i < m; i++) sum += exp(((double)c[i].v - maxv) * inv_t);
    for (size_t i = 0; i < m; i++) probs[c[i].id] = (float)(exp(((double)c[i].v - maxv) * inv_t) / sum);
}

double sampler_uniform(struct sampler *s) { return s ? prng_uniform(&s->rng) : 0.0; }

bool sampler_is_greedy(const struct sampler *s) { return s && s->p.temp <= 0.0f; }
