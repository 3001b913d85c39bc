/*
 * ppl.h — perplexity and KL divergence of a model over a text, scored as
 * llama.cpp's llama-perplexity scores them, and the file that keeps a base
 * model's log-probabilities for a later KL-divergence run.
 *
 * What is scored: the text's tokens (BOS first where the vocabulary adds
 * it) are cut into non-overlapping chunks of n_ctx tokens. Each chunk runs
 * from an empty cache, its first token replaced by BOS where the vocabulary
 * adds BOS. The logits at positions ppl_first(n_ctx) .. n_ctx - 2 predict
 * the tokens after them: ppl_n_scored(n_ctx) tokens per chunk, the second
 * half, so every scored token has at least n_ctx / 2 tokens of context.
 * PPL = exp(mean of -log p(next token)); its ± is PPL times the standard
 * error of that mean.
 *
 * The base file keeps, per scored token, the log-probability of the token
 * that came and the top_k largest log-probabilities with their ids, plus
 * the log of the mass outside them (the format is the table above
 * ppl_base_parse in ppl.c). KL(base || model) is computed over those top_k
 * ids and one bucket for the rest: by the log-sum inequality this is never
 * more than the full KL divergence; the part it leaves out is the
 * divergence inside the tail the base gives little mass to.
 */
#ifndef KVIK_TOOLS_PPL_H
#define KVIK_TOOLS_PPL_H

#include <stdio.h>

#include "base/base.h"

enum {
    PPL_TOPK_DEFAULT = 256, /* ids kept per token in a base file */
    PPL_TOPK_MAX = 1024,
    PPL_MIN_CTX = 4,
    PPL_BASE_HEADER = 32, /* bytes before the tokens */
};

struct tokenizer;

/* The text of the file at path as llama-perplexity and llama-imatrix
 * tokenize -f: one trailing newline dropped, BOS in front where the
 * vocabulary adds it, special-token text as plain text. Returns the ids
 * (malloc'd, *n of them), or NULL after err (KVIK_ERR_IO, KVIK_ERR_NOMEM,
 * the tokenizer's status). */
int32_t *ppl_tokenize_file(const struct tokenizer *tok, const char *path, int64_t *n, struct kvik_err *err);

/* The first scored position of a chunk, and the tokens scored per chunk. */
static inline int ppl_first(int n_ctx) { return n_ctx / 2; }
static inline int ppl_n_scored(int n_ctx) { return n_ctx - 1 - n_ctx / 2; }
/* Bytes of one token's record in a base file. */
static inline size_t ppl_record_bytes(int top_k) { return 8 + 8 * (size_t)top_k; }

/* One scored position. */
struct ppl_row {
    double nll;      /* -log p(the next token), log-softmax in double */
    int32_t argmax;  /* the id of the first largest logit */
    /* against a base record (ppl_score_kld) */
    double nll_base; /* the base's -log p(the next token) */
    double kld;      /* KL(base || this) over the base's top-k ids and the rest */
    double dp;       /* p(the next token) - the base's */
    bool same_top;   /* argmax is the base's most likely id */
};

/* Scores one row of logits[n_vocab] against the token that came next. */
void ppl_score(const float *logits, int n_vocab, int32_t next, struct ppl_row *out);

/* ppl_score, and writes the row's base-file record into rec
 * ([ppl_record_bytes(top_k)]); top_k <= n_vocab. */
void ppl_score_record(const float *logits, int n_vocab, int32_t next, int top_k, uint8_t *rec,
                      struct ppl_row *out);

/* ppl_score, and the figures against the base record rec (one that
 * ppl_base_parse accepted, of top_k ids). A row scored against the record
 * that its own logits wrote has kld 0, dp 0 and same_top exactly. */
void ppl_score_kld(const float *logits, int n_vocab, int32_t next, const uint8_t *rec, int top_k,
                   struct ppl_row *out);

/*
 * Scores rows logits[n_rows][n_vocab] against next[n_rows] on the pool's
 * threads: with recs_out, as ppl_score_record (records written there, in
 * row order); else with recs_in, as ppl_score_kld; else as ppl_score.
 */
void ppl_score_rows(struct pool *pool, const float *logits, int n_rows, int n_vocab, const int32_t *next,
                    int top_k, uint8_t *recs_out, const uint8_t *recs_in, struct ppl_row *out);

/* ---- statistics --------------------------------------------------------- */

/* Sums of -log p for a perplexity and its uncertainty. */
struct ppl_stats {
    double sum, sum2;
    int64_t count;
};

void ppl_stats_add(struct ppl_stats *s, double nll);
double ppl_stats_ppl(const struct ppl_stats *s); /* exp(mean); 0 when empty */
/* PPL times the standard error of the mean nll (llama-perplexity's ±);
 * 0 with fewer than two values. */
double ppl_stats_err(const struct ppl_stats *s);

/* The KL-divergence run's figures over all its rows. */
struct ppl_kld_summary {
    int64_t count;
    double ppl, ppl_err;           /* this model's */
    double ppl_base, ppl_base_err; /* the base's, from its records */
    double ln_ratio, ln_ratio_err; /* ln(ppl / ppl_base), its uncertainty with the covariance */
    double kld_mean, kld_err, kld_median, kld_p99, kld_max;
    double dp_mean, dp_rms, dp_p1, dp_p99, dp_max; /* dp_max: the largest |dp| */
    double same_top;               /* fraction of rows with the same top id */
};

/* Summarizes rows[0..n) (n >= 1; percentiles interpolated as
 * llama-perplexity does). KVIK_ERR_NOMEM only. */
kvik_status ppl_kld_summarize(const struct ppl_row *rows, int64_t n, struct ppl_kld_summary *s,
                              struct kvik_err *err);

/* The fraction-th value of sorted[0..n), linearly interpolated between
 * neighbours (fraction * (n - 1) as the position). */
double ppl_percentile(const double *sorted, int64_t n, double fraction);

/* ---- the base file -------------------------------------------------------- */

/* A parsed base file; pointers into the caller's bytes. */
struct ppl_base {
    int n_ctx, n_vocab, n_chunk, top_k, n_scored;
    const uint8_t *tokens;  /* [n_chunk * n_ctx] int32: the text's tokens as tokenized */
    const uint8_t *records; /* [n_chunk * n_scored][ppl_record_bytes(top_k)] */
};

/* Checks data[0..size) whole: magic, version, sizes, that every token and
 * id is in range, that the log-probabilities are finite, at most 0 and in
 * order. KVIK_ERR_FORMAT names what is wrong; KVIK_ERR_NOMEM. */
kvik_status ppl_base_parse(const uint8_t *data, size_t size, struct ppl_base *out, struct kvik_err *err);

int32_t ppl_base_token(const struct ppl_base *b, int64_t i);
/* The record of scored row j of chunk c. */
const uint8_t *ppl_base_record(const struct ppl_base *b, int c, int j);

/* Writes a base file's header and tokens[n_chunk * n_ctx]; the records of
 * every chunk follow, in order (ppl_score_rows' recs_out). KVIK_ERR_IO. */
kvik_status ppl_base_write_header(FILE *f, int n_ctx, int n_vocab, int n_chunk, int top_k, const int32_t *tokens,
                                  struct kvik_err *err);

#endif /* KVIK_TOOLS_PPL_H */
