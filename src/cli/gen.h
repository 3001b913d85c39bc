/*
 * gen.h — what `kvik run` and `kvik chat` share: the options both take, the
 * model with its tokenizer and chat template, prefilling token ids into a
 * one-sequence flat KV cache in batches, and the decode loop that samples,
 * streams text through the UTF-8-safe detokenizer and stops at an
 * end-of-generation token.
 *
 * The cache holds one sequence at positions 0..n_ctx-1. gen_prefill writes
 * ids[from..to) at positions from..to-1, overwriting whatever was there, so
 * a caller that keeps a conversation refeeds only what changed.
 */
#ifndef KVIK_CLI_GEN_H
#define KVIK_CLI_GEN_H

#include <stdio.h>

#include "engine/sampler.h"
#include "model/model.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

/* The options both commands take. */
struct gen_opts {
    const char *model;         // -m; NULL: cli_resolve_model's default
    const char *chat_template; // --chat-template; NULL: the model's own
    long n_gen;                // -n: tokens to generate (per reply)
    long threads;              // -t
    long n_ctx;                // -c; 0: the model's, at most GEN_MAX_DEFAULT_CTX
    struct sampler_params sp;  // --temp --top-k --top-p --min-p --repeat-penalty -s
    const char *spec;          // --spec none|ngram|draft; NULL: none (draft with --model-draft)
    const char *model_draft;   // --model-draft: the draft model of --spec draft
    long spec_max;             // --spec-max: longest draft (SPEC_DEFAULT_MAX)
    long spec_ngram;           // --spec-ngram: longest n-gram prompt lookup matches (SPEC_DEFAULT_NGRAM)
};

enum { GEN_PREFILL_BATCH = 512, GEN_MAX_DEFAULT_CTX = 4096 };

/* Help lines of the sampling and resource options, in the order listed. */
#define GEN_USAGE_OPTIONS                                                          \
    "  -t N           threads (default: all CPUs)\n"                               \
    "  -c N           context size (default: the model's, at most 4096)\n"        \
    "  --temp X       temperature (default 0.8; 0: greedy)\n"                      \
    "  --top-k N      (default 40; 0: off)\n"                                      \
    "  --top-p X      (default 0.95)\n"                                            \
    "  --min-p X      (default 0.05)\n"                                            \
    "  --repeat-penalty X  (default 1.0: off)\n"                                   \
    "  -s SEED        random seed (default: from the clock)\n"

/* Help lines of the speculative decoding options (`kvik run`). */
#define GEN_USAGE_SPEC                                                             \
    "  --spec MODE    speculative decoding: none (default), ngram (prompt lookup) or\n" \
    "                 draft (a draft model, --model-draft)\n"                        \
    "  --model-draft PATH  draft model with the same vocabulary (implies --spec draft)\n" \
    "  --spec-max N   longest draft, 1..16 (default 8; adapts per step)\n"           \
    "  --spec-ngram N longest n-gram prompt lookup matches, 1..8 (default 3)\n"

/* Defaults for everything but n_gen. */
struct gen_opts gen_opts_default(long n_gen);

/* A command's own option a (v: the next argument, NULL if none): returns
 * GEN_OPT_FLAG for a flag, GEN_OPT_VALUE if it took v (never when v is
 * NULL), 0 if a is not one of the command's. */
enum { GEN_OPT_FLAG = 1, GEN_OPT_VALUE = 2 };
typedef int (*gen_opt_fn)(void *cmd_opts, const char *a, const char *v);

/*
 * Parses argv[1..argc) of `kvik CMD`: --help / -h (usage(stdout), returns
 * 0), the command's own options (opt), then the shared ones (-m -n -t -c
 * --temp --top-k --top-p --min-p --repeat-penalty -s --chat-template) into
 * *o. Returns -1 when all parsed, else 2 after one line on stderr.
 */
int gen_parse_args(int argc, char **argv, const char *cmd, struct gen_opts *o, gen_opt_fn opt,
                   void *cmd_opts, void (*usage)(FILE *));

/* Checks the sampling and speculative options (false after one line on
 * stderr, a usage error) and resolves the model path (cli_resolve_model) into buf. */
bool gen_opts_check(const struct gen_opts *o, const char *cmd, char *buf, size_t len, const char **path);

/* The context size -c asks for, or the model's (at most GEN_MAX_DEFAULT_CTX). */
int gen_ctx_size(const struct model *m, long requested);

/* A model, its tokenizer, and (after gen_start) what generating needs. */
struct gen {
    struct model *model;
    struct tokenizer *tok;
    struct model_ctx *ctx;
    struct sampler *smp;
    struct kv_flat kv; // one sequence of n_ctx positions
    float *logits;     // [n_vocab] after the last token fed
    int64_t argmax;    // their argmax as the forward pass found it (-1: look it up)
    int n_ctx;         // positions the cache holds
    int max_batch;     // tokens per prefill forward
    struct gen_spec *spec; // speculative decoding (gen_spec.c); NULL: plain
};

/* Loads the model and its tokenizer into a zeroed *g. */
kvik_status gen_load(struct gen *g, const char *path, struct kvik_err *err);

/* Creates the forward context, cache and sampler. */
kvik_status gen_start(struct gen *g, int n_threads, int max_batch, int n_ctx,
                      const struct sampler_params *sp, struct kvik_err *err);
void gen_free(struct gen *g); /* everything; *g is zeroed */

/* The chat template --chat-template names (name != NULL), else the one the
 * model's tokenizer.chat_template is recognised as; warns on stderr, as
 * "kvik CMD: warning: ...", when kvik renders it only approximately. Free
 * with chat_format_free. */
kvik_status gen_chat_format(const struct model *m, const char *name, const char *cmd,
                            struct chat_format *fmt, struct kvik_err *err);

/* Feeds ids[from..to) at positions from..to-1 (from < to); g->logits then
 * holds the logits after ids[to-1]. */
kvik_status gen_prefill(struct gen *g, const int32_t *ids, int64_t from, int64_t to,
                        struct kvik_err *err);

/* Speculative decoding for gen_decode as o asks (--spec, --model-draft;
 * nothing for none): loads and checks the draft model (KVIK_ERR_INVALID_ARG
 * when its vocabulary differs). After gen_start; max_batch must be at
 * least o->spec_max + 1. */
kvik_status gen_spec_start(struct gen *g, const struct gen_opts *o, struct kvik_err *err);

/* What speculation did (all zero without it). */
struct gen_spec_stats {
    int64_t steps;     /* verification forwards */
    int64_t drafts;    /* steps with a draft */
    int64_t drafted;   /* draft tokens */
    int64_t accepted;  /* draft tokens accepted */
};
void gen_spec_stats(const struct gen *g, struct gen_spec_stats *out);

/* One speculative step after ids[0..i) (the cache holds all but the last):
 * drafts, verifies in one forward and writes the 1..spec_max+1 tokens to
 * emit to toks (recorded in the sampler), their count in *nt; at most
 * n_max - i. */
kvik_status gen_spec_step(struct gen *g, const int32_t *ids, int64_t i, int64_t n_max, int32_t *toks, int *nt,
                          struct kvik_err *err);
void gen_spec_free(struct gen *g);

/* Text collected while decoding (buf is malloc'd, not NUL-terminated). */
struct gen_text {
    char *buf;
    size_t len, cap;
};

/*
 * Samples from g->logits after the *n ids already fed, appending each token
 * to ids and feeding it back, until an end-of-generation token or n_max ids
 * (ids has room for n_max). The text goes to stream (flushed per piece) and
 * to text, either may be NULL; an end-of-generation token is stored in ids
 * but gives no text. The last token sampled is never fed: afterwards the
 * cache holds ids[0..*n - 1) when anything was sampled (with speculation,
 * maybe rejected positions after them too, overwritten when fed again). *t_first is the
 * clock_ns() of the first sample, 0 if none.
 */
kvik_status gen_decode(struct gen *g, int32_t *ids, int64_t *n, int64_t n_max, FILE *stream,
                       struct gen_text *text, int64_t *t_first, struct kvik_err *err);

#endif /* KVIK_CLI_GEN_H */
