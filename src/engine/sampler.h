/*
 * sampler.h — turning one row of logits into one token id.
 *
 * The chain follows llama.cpp's default sampler order (common/sampling:
 * penalties -> dry -> top_n_sigma -> top_k -> typ_p -> top_p -> min_p ->
 * xtc -> temperature -> dist); kvik implements the stages below and skips
 * the ones it does not have (dry, top_n_sigma, typ_p, xtc):
 *
 *   1. sanitise   NaN -> -inf, +inf -> FLT_MAX (so several +inf logits
 *                 share the mass equally); the caller's logits are never
 *                 modified, the chain works on a private copy.
 *   2. penalties  over the distinct tokens among the last repeat_last_n
 *                 accepted ones, each seen c times:
 *                   repetition: logit > 0 ? logit / repeat_penalty
 *                                         : logit * repeat_penalty
 *                   then logit -= c * frequency_penalty
 *                               + (c > 0) * presence_penalty
 *   (temp <= 0: greedy — argmax of the penalised logits, ties -> lowest id;
 *    the remaining stages are skipped and no random number is drawn.)
 *   3. top-k      keep the k largest logits (k == 0: off).
 *   4. top-p      softmax (temperature 1) over what is left; keep the
 *                 smallest prefix, in descending order, whose probability
 *                 sum reaches top_p (the token that crosses top_p is kept).
 *                 top_p == 1: off.
 *   5. min-p      keep tokens with p >= min_p * p_max, i.e.
 *                 logit >= max_logit + log(min_p). min_p == 0: off.
 *   6. temperature  logits /= temp.
 *   7. dist       softmax and one draw from a seeded xoshiro256** stream.
 *
 * Candidates are ordered by (logit descending, id ascending), a total order,
 * so results do not depend on the selection algorithm. Top-k uses a
 * quickselect (O(n_vocab)) and sorts only the k survivors; top-p without
 * top-k grows a sorted prefix by repeated selection instead of sorting the
 * whole vocabulary. If every logit is -inf (or NaN) the sampler returns the
 * lowest id, 0. sampler_sample allocates nothing.
 *
 * Memory: the chain works in scratch space of 16 bytes per vocabulary
 * entry (the candidate copy, and the penalties' per-token stamps and
 * counts). sampler_new gives each sampler its own; samplers that are only
 * ever used one after another on one thread can share one instead
 * (sampler_new_shared), and then hold a few hundred bytes each (the
 * engine shares one among all its requests, so a long queue of waiting
 * requests costs no vocabulary-sized buffers). The penalties' counts are
 * recounted from the history ring on each call, O(repeat_last_n).
 *
 * A sampler is not thread-safe; use one per sequence. Samplers sharing a
 * scratch must not be used concurrently (creating one, sampler_accept and
 * sampler_reset do not touch the scratch and may run on another thread).
 */
#ifndef KVIK_SAMPLER_H
#define KVIK_SAMPLER_H

#include <stdint.h>

#include "base/base.h"

/* seed value meaning "seed from the clock" (llama.cpp's LLAMA_DEFAULT_SEED) */
#define SAMPLER_SEED_RANDOM UINT64_C(0xFFFFFFFF)

struct sampler_params {
    float temp;              // 0.8; <= 0: greedy
    int32_t top_k;           // 40; 0: off
    float top_p;             // 0.95; in (0, 1], 1: off
    float min_p;             // 0.05; in [0, 1], 0: off
    float repeat_penalty;    // 1.0 (off); > 0
    int32_t repeat_last_n;   // 64; how many accepted tokens the penalties see, 0: none
    float frequency_penalty; // 0 (off)
    float presence_penalty;  // 0 (off)
    uint64_t seed;           // SAMPLER_SEED_RANDOM: from the clock
};

/* The defaults of llama.cpp's command line, listed above (kvik run and
 * kvik chat). */
struct sampler_params sampler_params_default(void);
/* The OpenAI API's defaults (kvik serve's requests): temp 1, top_k 0,
 * top_p 1, min_p 0, the rest as above. */
struct sampler_params sampler_params_openai(void);

/* KVIK_OK, or KVIK_ERR_INVALID_ARG naming the first bad field. */
kvik_status sampler_params_validate(const struct sampler_params *p, struct kvik_err *err);

struct sampler;

/* Scratch space for samplers of n_vocab entries (see Memory above). NULL
 * on n_vocab <= 0 (KVIK_ERR_INVALID_ARG) or no memory. */
struct sampler_scratch;
struct sampler_scratch *sampler_scratch_new(int32_t n_vocab, struct kvik_err *err);
/* After every sampler using it is freed. */
void sampler_scratch_free(struct sampler_scratch *sc);

/* A sampler with its own scratch. NULL on invalid params / n_vocab <= 0
 * (KVIK_ERR_INVALID_ARG) or no memory. */
struct sampler *sampler_new(const struct sampler_params *p, int32_t n_vocab,
                            struct kvik_err *err);
/* A sampler working in sc (which must be for n_vocab and outlive it); sc
 * NULL: the same as sampler_new. */
struct sampler *sampler_new_shared(const struct sampler_params *p, int32_t n_vocab,
                                   struct sampler_scratch *sc, struct kvik_err *err);
void sampler_free(struct sampler *s);

/* Bytes s holds itself: the sampler, its history ring and its own scratch
 * (none when it shares one). */
size_t sampler_bytes(const struct sampler *s);

/* One token id in [0, n_vocab) from logits[n_vocab]; logits are not modified. */
int32_t sampler_sample(struct sampler *s, const float *logits);

/* sampler_sample, given argmax: the kernel table's argmax of logits (as
 * model_batch.argmax reports it), or -1. Greedy sampling without
 * penalties then reads nothing else; any other sampling ignores it. */
int32_t sampler_sample_argmax(struct sampler *s, const float *logits, int64_t argmax);

/* The distribution sampler_sample draws from, given the history as it is
 * now: probs[n_vocab] after penalties, top-k, top-p, min-p and temperature
 * (zero outside the survivors; greedy: 1 at the argmax). Draws nothing.
 * Speculative decoding verifies drafts against it (spec.h). */
void sampler_probs(struct sampler *s, const float *logits, float *probs);

/* One uniform number in [0, 1) from the sampler's random stream. */
double sampler_uniform(struct sampler *s);

/* temp <= 0: sampler_sample returns the argmax and draws nothing. */
bool sampler_is_greedy(const struct sampler *s);

/* Records a token (prompt or generated) for the penalties; ids outside
 * [0, n_vocab) are ignored. */
void sampler_accept(struct sampler *s, int32_t token);

/* Forgets the history and restarts the random stream from the seed. */
void sampler_reset(struct sampler *s);

/* The seed actually in use (the clock-derived one for SAMPLER_SEED_RANDOM). */
uint64_t sampler_seed(const struct sampler *s);

#endif /* KVIK_SAMPLER_H */
