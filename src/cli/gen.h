/*
 * gen.h — what `kvik run`, `kvik chat` and `kvik eval` share: the options
 * they take, the model with its tokenizer, draft model and chat template,
 * and one serving engine (engine/engine.h) that every generation is
 * submitted to, as `kvik serve` submits its requests.
 *
 * The engine is set up for the command's own sequences (one for run and
 * chat; eval's cases side by side): a KV pool of just the positions they
 * can use, F32 K/V rows unless --kv-type says otherwise, the
 * end-of-generation ids and the context default of engine.h's "Defaults".
 * gen_generate submits one request and waits for it (gen_submit and
 * gen_wait are its halves); the engine thread streams the text through the
 * UTF-8-safe detokenizer straight to the output as tokens come (the engine
 * serves nobody else, so the event callback does the writing).
 */
#ifndef KVIK_CLI_GEN_H
#define KVIK_CLI_GEN_H

#include <stdio.h>

#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

/* The options both commands take. */
struct gen_opts {
    const char *model;         // -m; NULL: cli_resolve_model's default
    const char *chat_template; // --chat-template; NULL: the model's own
    long n_gen;                // -n: tokens to generate (per reply)
    long threads;              // -t
    long n_ctx;                // -c; 0: engine_default_ctx
    int kv_type;               // --kv-type: TENSOR_TYPE_F32 (default), _F16 or _Q8_0
    struct sampler_params sp;  // --temp --top-k --top-p --min-p --repeat-penalty -s
    const char *spec;          // --spec none|ngram|draft; NULL: none (draft with --model-draft)
    const char *model_draft;   // --model-draft: the draft model of --spec draft
    long spec_max;             // --spec-max: longest draft (SPEC_DEFAULT_MAX)
    long spec_ngram;           // --spec-ngram: longest n-gram prompt lookup matches (SPEC_DEFAULT_NGRAM)
};

enum { GEN_MAX_BATCH = 512 }; /* tokens per forward pass (a prefill goes in pieces of this) */

/* Help lines of the sampling and resource options, in the order listed. */
#define GEN_USAGE_OPTIONS                                                          \
    "  -t N           threads (default: all CPUs)\n"                               \
    "  -c N           context size (default: the model's, at most 8192)\n"        \
    "  --kv-type T    K/V cache rows: f32 (default), f16 or q8_0\n"               \
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
    "  --model-draft M  draft model (a path or a registry name) with the same vocabulary\n"     \
    "                 (implies --spec draft)\n" \
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
 * --kv-type --temp --top-k --top-p --min-p --repeat-penalty -s
 * --chat-template --spec --model-draft --spec-max --spec-ngram) into *o.
 * Returns -1 when all parsed, else 2 after one line on stderr.
 */
int gen_parse_args(int argc, char **argv, const char *cmd, struct gen_opts *o, gen_opt_fn opt,
                   void *cmd_opts, void (*usage)(FILE *));

/* Checks the sampling and speculative options (false after one line on
 * stderr, a usage error) and resolves the model path (cli_resolve_model) into buf:
 * *path is NULL when the model names nothing (a line on stderr said so). */
bool gen_opts_check(const struct gen_opts *o, const char *cmd, char *buf, size_t len, const char **path);

/* A model, its tokenizer, and (after gen_start) the engine. */
struct gen {
    struct model *model;
    struct tokenizer *tok;
    struct model *draft;   // --model-draft; NULL without
    enum spec_mode spec;   // what --spec / --model-draft ask for
    struct engine *engine;
    struct engine_config cfg; // as the engine was made (eog not kept)
    int n_ctx;             // longest sequence: -c, or engine_default_ctx
    int32_t *eog;          // [n_eog] engine_eog_ids
    int n_eog;
};

/* Loads the model, its tokenizer and the draft model o asks for into a
 * zeroed *g (the draft's vocabulary is checked by gen_start); sets n_ctx. */
kvik_status gen_load(struct gen *g, const char *path, const struct gen_opts *o, struct kvik_err *err);

/* Creates the engine for n_seqs sequences (1 for run and chat; eval runs
 * its cases side by side) of at most n_ctx positions each (n_ctx <=
 * g->n_ctx; the KV pool holds n_seqs times that many), forward passes of
 * up to max_batch tokens (>= n_seqs), the prefix cache on or off. */
kvik_status gen_start(struct gen *g, const struct gen_opts *o, int n_seqs, int n_ctx, int max_batch,
                      bool prefix_cache, struct kvik_err *err);
void gen_free(struct gen *g); /* everything; *g is zeroed */

/* The chat template --chat-template names (name != NULL), else the one the
 * model's tokenizer.chat_template is recognised as; warns on stderr, as
 * "kvik CMD: warning: ...", when kvik renders it only approximately. Free
 * with chat_format_free. */
kvik_status gen_chat_format(const struct model *m, const char *name, const char *cmd,
                            struct chat_format *fmt, struct kvik_err *err);

/* Text collected while generating (buf is malloc'd, not NUL-terminated). */
struct gen_text {
    char *buf;
    size_t len, cap;
};

/* What one generation did. */
struct gen_result {
    int64_t n_gen;        // ids written to out, an end-of-generation id that ended it included
    bool eog;             // it ended at an end-of-generation id (the last of out)
    int n_cached;         // prompt tokens whose K/V came from the prefix cache
    int64_t t_submit, t_first, t_end; // clock_ns(): submitted, first token (0: none), finished
};

/*
 * Generates after prompt[0..n_prompt) up to max_tokens ids (n_prompt +
 * max_tokens <= the n_ctx of gen_start; max_tokens 0: the prompt is
 * prefilled, nothing is kept) with sampling sp, under prefix cache key
 * cache_key. The ids go to out (room for max_tokens), the text to stream
 * (flushed per piece) and to text, either may be NULL; an end-of-generation
 * id is stored but gives no text. Returns when the engine has finished the
 * request; an engine error is returned as KVIK_ERR_IO with its message.
 */
kvik_status gen_generate(struct gen *g, const int32_t *prompt, int n_prompt, int max_tokens,
                         const struct sampler_params *sp, uint64_t cache_key, int32_t *out, FILE *stream,
                         struct gen_text *text, struct gen_result *res, struct kvik_err *err);

/* A generation submitted by gen_submit and not yet waited for. */
struct gen_job;

/* gen_generate in two halves: gen_submit queues the request (at most the
 * n_seqs of gen_start at once) and returns; out, stream and text must stay
 * valid until gen_wait, which waits for it to finish, fills *res, frees
 * *job and returns what gen_generate would. Jobs may be waited for in any
 * order; each exactly once. */
kvik_status gen_submit(struct gen *g, const int32_t *prompt, int n_prompt, int max_tokens,
                       const struct sampler_params *sp, uint64_t cache_key, int32_t *out, FILE *stream,
                       struct gen_text *text, struct gen_job **job, struct kvik_err *err);
kvik_status gen_wait(struct gen_job *job, struct gen_result *res, struct kvik_err *err);

#endif /* KVIK_CLI_GEN_H */
