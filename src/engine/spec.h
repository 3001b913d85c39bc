/*
 * spec.h — speculative decoding: guess several tokens cheaply, check them
 * all in one forward pass of the model, keep the ones the model would have
 * produced.
 *
 * A draft of k tokens d0..dk-1 follows the last sampled token t. The target
 * model runs [t, d0, .., dk-1] in one batch with logits at every position,
 * so row j is the distribution of the token after d(j-1). Going through the
 * rows in order, draft token x = dj is accepted with probability
 * min(1, p(x) / q(x)), where p is the target's distribution after the
 * request's sampler (sampler_probs: penalties, top-k/top-p/min-p,
 * temperature, with the history as of that position) and q the one the
 * draft was drawn from. The first rejection instead emits a token drawn
 * from max(0, p - q), renormalised, and ends the step; when all k are
 * accepted, row k gives one bonus token drawn from p. The emitted tokens
 * are then distributed exactly as plain decoding's, and a greedy request
 * (p and q one-hot) emits exactly the tokens plain decoding would.
 *
 * Draft sources:
 *   SPEC_NGRAM  prompt lookup: the longest earlier occurrence (ngram_max
 *               tokens down to 1) of the sequence's last tokens, and what
 *               followed it; q is a point mass at the proposed token, so x
 *               is accepted with probability p(x) and a rejection draws
 *               from p without x.
 *   SPEC_DRAFT  a second, smaller model with the same vocabulary
 *               (spec_check_vocab) sampled with the request's sampling
 *               parameters minus the penalties (q then depends on nothing
 *               but the draft logits). Prompt lookup goes first: where the
 *               last ngram_max tokens occurred before (the whole n-gram),
 *               what followed is the draft, at no cost, and the draft
 *               model is not run for the sequence in that step. Each source has its own adaptive
 *               length, so a lookup that stops paying pauses by itself.
 *
 * Draft length adapts per sequence (struct spec_ctl): it grows while whole
 * drafts are accepted and shrinks to just past the first rejection, never
 * past the length a cost model finds best at the recent acceptance rate;
 * when that rate falls below about a third, or the model says no draft
 * length pays (a draft model nearly as costly as the target), speculation
 * pauses for a while (doubling each time it fails again), so a sequence
 * that does not gain decodes at nearly plain speed.
 *
 * The engine's use (one batch for every running sequence's draft, KV
 * rollback with kv_paged_seq_truncate, a second paged pool for the draft
 * model) is in spec_engine.c; `kvik run` and `kvik serve` both use it.
 */
#ifndef KVIK_SPEC_H
#define KVIK_SPEC_H

#include "base/base.h"
#include "engine/sampler.h"

struct model;

enum spec_mode { SPEC_NONE = 0, SPEC_NGRAM, SPEC_DRAFT };

enum {
    SPEC_MAX_DRAFT = 16,      /* longest draft (--spec-max at most) */
    SPEC_DEFAULT_MAX = 8,     /* --spec-max default */
    SPEC_DEFAULT_NGRAM = 3,   /* --spec-ngram default */
};

/* "none", "ngram", "draft" -> *out; false for anything else. */
bool spec_mode_parse(const char *s, enum spec_mode *out);
const char *spec_mode_name(enum spec_mode m);

/* ---- the acceptance rule, pure ------------------------------------------ */

/*
 * One draft token x against target distribution p[n] and draft
 * distribution q[n] (NULL: a point mass at x). u_accept and u_resample are
 * uniform in [0, 1). Returns true when x is accepted (u_accept <
 * p(x) / q(x)); otherwise *out receives a draw (by u_resample) from
 * max(0, p - q) renormalised (from p if that is all zero, which only
 * rounding can cause). With accepted, *out = x.
 */
bool spec_accept(const float *p, const float *q, int32_t n, int32_t x, double u_accept, double u_resample,
                 int32_t *out);

/* A draw from p[n] (summing to about 1) by u in [0, 1): the first id whose
 * cumulative probability exceeds u * sum(p); the last nonzero id if
 * rounding leaves u at the top. */
int32_t spec_draw(const float *p, int32_t n, double u);

/* ---- drafts ----------------------------------------------------------- */

/*
 * Prompt lookup over toks[0..n): for len = ngram_max down to ngram_min
 * (at least 1), the latest earlier occurrence of the last len tokens that
 * has something after it; copies up to k of the tokens that followed it
 * into out and returns how many (0: no match).
 */
int spec_ngram_propose(const int32_t *toks, int n, int ngram_max, int ngram_min, int k, int32_t *out);

/* Refuses a draft model whose vocabulary differs from the target's (size,
 * tokenizer model, or any token's text): KVIK_ERR_INVALID_ARG naming the
 * first difference. */
kvik_status spec_check_vocab(const struct model *target, const struct model *draft, struct kvik_err *err);

/* ---- verification ------------------------------------------------------- */

/*
 * Verifies draft[0..k) against the target's rows[k + 1][n_vocab] (row j:
 * the logits after draft[j - 1], row 0 after the last sampled token) with
 * the sampler's history as of each position, q_rows[k][n_vocab] the draft
 * distributions (NULL: point masses). Writes the tokens to emit to out
 * (accepted drafts, then the resampled or bonus token: 1..k+1 of them),
 * records each in the sampler (sampler_accept) and returns their count.
 * p is scratch [n_vocab].
 */
int spec_verify(struct sampler *smp, const float *rows, const float *q_rows, int32_t n_vocab, const int32_t *draft,
                int k, float *p, int32_t *out);

/* ---- adaptive draft length ----------------------------------------------- */

struct spec_ctl {
    int max;        /* longest draft */
    int k;          /* draft length to ask for next */
    double rate;    /* recent acceptance rate (moving average over drafts) */
    int pause;      /* steps left without speculation */
    int pause_len;  /* the next pause's length */
    double draft_cost; /* one draft token's cost in target decode steps */
    int k_best;     /* the draft length the cost model finds best at this rate */
    bool off;       /* no length pays even at full acceptance: never draft */
};

/* The cost model. With per-token acceptance a, a draft of k tokens yields
 * E(k) = 1 + a + ... + a^k tokens per verification step, and costs
 *     C(k) = 1 + SPEC_VERIFY_COST * k + draft_cost * k
 * target decode steps: a verification of k + 1 tokens streams the
 * weights once, and each extra token adds its products (with the few-token
 * K-quant products a fraction of a step; docs/benchmarks.md has the
 * figures), and a draft model's token costs its share of the bytes a
 * decode reads. The best draft length
 * maximises E(k) / C(k); when even that is below SPEC_MIN_GAIN, speculation
 * does not pay and pauses. */
#define SPEC_VERIFY_COST 0.1
/* The gain a draft length must promise: the model leaves out the draft's
 * own overheads (catching up on the accepted tokens as a small batch, its
 * sampling), which a Q4_1 draft for a Q8_0 copy of the same model showed
 * to be worth about a tenth of a step. */
#define SPEC_MIN_GAIN 1.1
#define SPEC_DRAFT_OVERHEAD 1.2
/* E(k) / C(k) for acceptance a, draft length k, draft_cost r. */
double spec_gain(double a, int k, double r);

/* A draft model's cost per token in target decode steps: its decode
 * bytes over the target's (decoding one token reads the weights once),
 * times SPEC_DRAFT_OVERHEAD: the draft runs one- and two-token batches
 * with their own per-call costs, and a 94 MiB Q4_1 draft measured 0.79 of
 * its 145 MiB Q8_0 target's step, not the 0.67 the bytes say.
 * KVIK_SPEC_DRAFT_COST=C in the environment sets it instead (tests and
 * experiments: 0 makes any draft model worth asking). */
double spec_draft_cost(const struct model *target, const struct model *draft);

/* draft_cost: 0 for prompt lookup; the draft model's decode bytes over
 * the target's for a draft model. */
void spec_ctl_init(struct spec_ctl *c, int max, double draft_cost);
/* The draft length to propose this step (0 while paused; each call counts
 * one step of a pause). */
int spec_ctl_want(struct spec_ctl *c);
/* Records a verified draft: proposed tokens, accepted of them. */
void spec_ctl_update(struct spec_ctl *c, int proposed, int accepted);

#endif /* KVIK_SPEC_H */
