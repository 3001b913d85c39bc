/*
 * spec.c — the parts of speculative decoding that need no engine (spec.h):
 * the acceptance rule, prompt-lookup drafts, the draft model's vocabulary
 * check, verification of one sequence's draft, and the adaptive draft
 * length.
 */
#include "engine/spec.h"

#include <stdlib.h>

#include "gguf/gguf.h"
#include "model/model.h"

bool spec_mode_parse(const char *s, enum spec_mode *out) {
    if (!strcmp(s, "none")) *out = SPEC_NONE;
    else if (!strcmp(s, "ngram")) *out = SPEC_NGRAM;
    else if (!strcmp(s, "draft")) *out = SPEC_DRAFT;
    else return false;
    return true;
}

const char *spec_mode_name(enum spec_mode m) {
    return m == SPEC_NGRAM ? "ngram" : m == SPEC_DRAFT ? "draft" : "none";
}

/* ---- the acceptance rule ---------------------------------------------- */

int32_t spec_draw(const float *p, int32_t n, double u) {
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += p[i];
    double target = u * sum, cum = 0;
    int32_t last = 0;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] <= 0) continue;
        cum += p[i];
        last = i;
        if (target < cum) return i;
    }
    return last;
}

/* max(0, p(y) - q(y)), q a point mass at x when NULL. */
static inline double residual(const float *p, const float *q, int32_t x, int32_t y) {
    double r = (double)p[y] - (q ? (double)q[y] : y == x ? 1.0 : 0.0);
    return r > 0 ? r : 0;
}

bool spec_accept(const float *p, const float *q, int32_t n, int32_t x, double u_accept, double u_resample,
                 int32_t *out) {
    double px = p[x], qx = q ? q[x] : 1.0;
    if (qx > 0 ? u_accept * qx < px : px > 0) {
        *out = x;
        return true;
    }
    double sum = 0;
    for (int32_t y = 0; y < n; y++) sum += residual(p, q, x, y);
    if (!(sum > 0)) {
        *out = spec_draw(p, n, u_resample);
        return false;
    }
    double target = u_resample * sum, cum = 0;
    int32_t last = 0;
    for (int32_t y = 0; y < n; y++) {
        double r = residual(p, q, x, y);
        if (r <= 0) continue;
        cum += r;
        last = y;
        if (target < cum) break;
    }
    *out = last;
    return false;
}

/* ---- drafts ----------------------------------------------------------- */

int spec_ngram_propose(const int32_t *toks, int n, int ngram_max, int ngram_min, int k, int32_t *out) {
    if (k <= 0) return 0;
    if (ngram_min < 1) ngram_min = 1;
    for (int len = ngram_max; len >= ngram_min; len--) {
        if (n < len + 1) continue;
        const int32_t *pat = toks + n - len;
        for (int i = n - len - 1; i >= 0; i--) {
            if (toks[i] != pat[0] || memcmp(toks + i, pat, (size_t)len * sizeof *toks) != 0) continue;
            int from = i + len, c = n - from < k ? n - from : k;
            memcpy(out, toks + from, (size_t)c * sizeof *out);
            return c;
        }
    }
    return 0;
}

kvik_status spec_check_vocab(const struct model *target, const struct model *draft, struct kvik_err *err) {
    if (target->hp.n_vocab != draft->hp.n_vocab)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "the draft model's vocabulary has %d tokens, the model's %d: a draft model must share the "
                       "model's vocabulary",
                       draft->hp.n_vocab, target->hp.n_vocab);
    struct gguf_str ta, da;
    if (gguf_get_str(target->file, "tokenizer.ggml.model", &ta, NULL) ||
        gguf_get_str(draft->file, "tokenizer.ggml.model", &da, NULL) || ta.len != da.len ||
        memcmp(ta.ptr, da.ptr, ta.len) != 0)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "the draft model's tokenizer type differs from the model's: a draft model must share the "
                       "model's vocabulary");
    const struct gguf_value *tv, *dv;
    if (gguf_get_arr(target->file, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tv, NULL) ||
        gguf_get_arr(draft->file, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &dv, NULL) ||
        gguf_arr_len(tv) != gguf_arr_len(dv))
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "the draft model's token list is missing or of another length than the model's");
    uint64_t n = gguf_arr_len(tv);
    for (uint64_t i = 0; i < n; i++) {
        struct gguf_str a = gguf_arr_str(tv, i), b = gguf_arr_str(dv, i);
        if (a.len != b.len || (a.len && memcmp(a.ptr, b.ptr, a.len) != 0))
            return err_set(err, KVIK_ERR_INVALID_ARG,
                           "the draft model's token %llu ('%.*s') differs from the model's ('%.*s'): a draft model "
                           "must share the model's vocabulary",
                           (unsigned long long)i, (int)(b.len < 40 ? b.len : 40), b.ptr ? b.ptr : "",
                           (int)(a.len < 40 ? a.len : 40), a.ptr ? a.ptr : "");
    }
    return KVIK_OK;
}

/* ---- verification ------------------------------------------------------- */

int spec_verify(struct sampler *smp, const float *rows, const float *q_rows, int32_t n_vocab, const int32_t *draft,
                int k, float *p, int32_t *out) {
    bool greedy = sampler_is_greedy(smp); /* p one-hot: u = 0 decides the same, and draws nothing */
    int n = 0;
    for (int j = 0; j < k; j++) {
        sampler_probs(smp, rows + (size_t)j * (size_t)n_vocab, p);
        double u1 = greedy ? 0 : sampler_uniform(smp), u2 = greedy ? 0 : sampler_uniform(smp);
        int32_t t;
        bool ok = spec_accept(p, q_rows ? q_rows + (size_t)j * (size_t)n_vocab : NULL, n_vocab, draft[j], u1, u2, &t);
        sampler_accept(smp, t);
        out[n++] = t;
        if (!ok) return n;
    }
    int32_t bonus = sampler_sample(smp, rows + (size_t)k * (size_t)n_vocab);
    sampler_accept(smp, bonus);
    out[n++] = bonus;
    return n;
}

/* ---- adaptive draft length ----------------------------------------------- */

enum { PAUSE_FIRST = 8, PAUSE_LONGEST = 512 };
/* A verification step of a few tokens costs much more than one token's on
 * small-batch CPU kernels: drafting pays only while most of a draft is
 * accepted. The acceptance rate is averaged over recent drafts (weight
 * RATE_NEW for the newest); below RATE_PAUSE speculation pauses. */
#define RATE_NEW 0.4
#define RATE_PAUSE 0.35
#define RATE_AFTER_PAUSE 0.5

double spec_gain(double a, int k, double r) {
    double e = 0.0, ak = 1.0;
    for (int i = 0; i <= k; i++, ak *= a) e += ak; /* 1 + a + ... + a^k */
    return e / (1.0 + SPEC_VERIFY_COST * k + r * k);
}

/* The best draft length at acceptance a (1..max) and whether it pays. */
static bool best_length(const struct spec_ctl *c, double a, int *k_out) {
    int best = 1;
    double g = spec_gain(a, 1, c->draft_cost);
    for (int k = 2; k <= c->max; k++) {
        double gk = spec_gain(a, k, c->draft_cost);
        if (gk > g) g = gk, best = k;
    }
    *k_out = best;
    return g >= SPEC_MIN_GAIN;
}

double spec_draft_cost(const struct model *target, const struct model *draft) {
    const char *env = getenv("KVIK_SPEC_DRAFT_COST");
    char *end;
    double forced = env ? strtod(env, &end) : -1.0;
    if (env && end != env && *end == '\0' && forced >= 0.0 && forced < 100.0) return forced;
    uint64_t t = model_decode_bytes(target);
    return t ? SPEC_DRAFT_OVERHEAD * (double)model_decode_bytes(draft) / (double)t : 1.0;
}

void spec_ctl_init(struct spec_ctl *c, int max, double draft_cost) {
    *c = (struct spec_ctl){.max = max, .k = max < 4 ? max : 4, .pause_len = PAUSE_FIRST, .rate = 1.0,
                           .draft_cost = draft_cost > 0 ? draft_cost : 0};
    /* a draft model that costs as much as the target never pays, even at
     * full acceptance: never draft (not even a probe, which would make the
     * draft model catch up on the whole prompt) */
    c->off = !best_length(c, 1.0, &c->k_best);
}

int spec_ctl_want(struct spec_ctl *c) {
    if (c->off) return 0;
    if (c->pause > 0) {
        c->pause--;
        return 0;
    }
    return c->k < c->k_best ? c->k : c->k_best;
}

void spec_ctl_update(struct spec_ctl *c, int proposed, int accepted) {
    if (proposed <= 0) return;
    c->rate = (1 - RATE_NEW) * c->rate + RATE_NEW * (double)accepted / (double)proposed;
    if (accepted == proposed) c->k = c->k + 2 < c->max ? c->k + 2 : c->max; /* all taken: try a longer one */
    else if (accepted > 0) c->k = accepted + 1;                            /* just past the first rejection */
    else c->k = c->k / 2 > 1 ? c->k / 2 : 1;
    bool pays = best_length(c, c->rate < 0.999 ? c->rate : 0.999, &c->k_best);
    if (c->rate >= 2 * RATE_PAUSE && pays) c->pause_len = PAUSE_FIRST;
    if (c->rate < RATE_PAUSE || !pays) { /* not paying: pause, longer each time it fails again */
        c->pause = c->pause_len;
        c->pause_len = c->pause_len * 2 < PAUSE_LONGEST ? c->pause_len * 2 : PAUSE_LONGEST;
        c->rate = RATE_AFTER_PAUSE;
    }
}
