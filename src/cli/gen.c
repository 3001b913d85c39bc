/*
 * gen.c — generation shared by `kvik run` and `kvik chat`: option parsing,
 * model + tokenizer + chat template set-up, the one-sequence engine, and
 * one request submitted and streamed (gen.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/gen.h"
#include "engine/spec.h"
#include "tensor/tensor.h"

struct gen_opts gen_opts_default(long n_gen) {
    return (struct gen_opts){.n_gen = n_gen, .threads = cpu_count(), .kv_type = TENSOR_TYPE_F32,
                             .sp = sampler_params_default(), .spec_max = SPEC_DEFAULT_MAX,
                             .spec_ngram = SPEC_DEFAULT_NGRAM};
}

/* Stores the value v of shared option a: 1, -1 for a bad value, 0 if a is
 * not a shared option. */
static int parse_opt(struct gen_opts *o, const char *a, const char *v) {
    long l;
    bool ok = true;
    if (!strcmp(a, "-m")) o->model = v;
    else if (!strcmp(a, "--chat-template")) o->chat_template = v;
    else if (!strcmp(a, "--spec")) o->spec = v;
    else if (!strcmp(a, "--model-draft")) o->model_draft = v;
    else if (!strcmp(a, "--spec-max")) ok = cli_parse_long(v, 1, SPEC_MAX_DRAFT, &o->spec_max);
    else if (!strcmp(a, "--spec-ngram")) ok = cli_parse_long(v, 1, 8, &o->spec_ngram);
    else if (!strcmp(a, "-n")) ok = cli_parse_long(v, 0, 1 << 24, &o->n_gen);
    else if (!strcmp(a, "-t")) ok = cli_parse_long(v, 1, 1024, &o->threads);
    else if (!strcmp(a, "-c")) ok = cli_parse_long(v, 1, 1 << 20, &o->n_ctx);
    else if (!strcmp(a, "--kv-type")) {
        if (!strcmp(v, "f32")) o->kv_type = TENSOR_TYPE_F32;
        else if (!strcmp(v, "f16")) o->kv_type = TENSOR_TYPE_F16;
        else if (!strcmp(v, "q8_0")) o->kv_type = TENSOR_TYPE_Q8_0;
        else ok = false;
    } else if (!strcmp(a, "--temp")) ok = cli_parse_float(v, -1e9f, 1e9f, &o->sp.temp);
    else if (!strcmp(a, "--top-k")) ok = cli_parse_long(v, 0, 1 << 30, &l) && ((o->sp.top_k = (int32_t)l), 1);
    else if (!strcmp(a, "--top-p")) ok = cli_parse_float(v, 0, 1, &o->sp.top_p);
    else if (!strcmp(a, "--min-p")) ok = cli_parse_float(v, 0, 1, &o->sp.min_p);
    else if (!strcmp(a, "--repeat-penalty")) ok = cli_parse_float(v, 0, 1e9f, &o->sp.repeat_penalty);
    else if (!strcmp(a, "-s")) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        ok = *v && !*end && !errno;
        o->sp.seed = s;
    } else {
        return 0;
    }
    return ok ? 1 : -1;
}

int gen_parse_args(int argc, char **argv, const char *cmd, struct gen_opts *o, gen_opt_fn opt,
                   void *cmd_opts, void (*usage)(FILE *)) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        int r = opt(cmd_opts, a, v);
        if (r == GEN_OPT_FLAG) continue;
        if (!v) {
            fprintf(stderr, "kvik %s: unknown argument or missing value: '%s' (try kvik %s --help)\n", cmd, a, cmd);
            return 2;
        }
        i++;
        if (r == GEN_OPT_VALUE) continue;
        if ((r = parse_opt(o, a, v)) == 0) {
            fprintf(stderr, "kvik %s: unknown argument '%s' (try kvik %s --help)\n", cmd, a, cmd);
            return 2;
        }
        if (r < 0) {
            fprintf(stderr, "kvik %s: bad value '%s' for %s\n", cmd, v, a);
            return 2;
        }
    }
    return -1;
}

/* The speculative decoding o asks for (checked by gen_opts_check). */
static enum spec_mode spec_of(const struct gen_opts *o) {
    enum spec_mode mode = o->model_draft ? SPEC_DRAFT : SPEC_NONE;
    if (o->spec) spec_mode_parse(o->spec, &mode);
    return mode;
}

bool gen_opts_check(const struct gen_opts *o, const char *cmd, char *buf, size_t len, const char **path) {
    struct kvik_err err = {0};
    if (sampler_params_validate(&o->sp, &err)) {
        fprintf(stderr, "kvik %s: %s\n", cmd, err.msg);
        return false;
    }
    enum spec_mode mode;
    if (o->spec && !spec_mode_parse(o->spec, &mode)) {
        fprintf(stderr, "kvik %s: bad value '%s' for --spec (none, ngram or draft)\n", cmd, o->spec);
        return false;
    }
    mode = spec_of(o);
    if (mode == SPEC_DRAFT && !o->model_draft) {
        fprintf(stderr, "kvik %s: --spec draft needs --model-draft PATH\n", cmd);
        return false;
    }
    if (mode != SPEC_DRAFT && o->model_draft) {
        fprintf(stderr, "kvik %s: --model-draft goes with --spec draft, not --spec %s\n", cmd, o->spec);
        return false;
    }
    *path = cli_resolve_model(o->model, buf, len);
    return true;
}

kvik_status gen_load(struct gen *g, const char *path, const struct gen_opts *o, struct kvik_err *err) {
    kvik_status st = model_load(path, &g->model, err);
    if (!st) st = tokenizer_load(g->model->file, &g->tok, err);
    if (st) return st;
    g->n_ctx = o->n_ctx ? (int)o->n_ctx : engine_default_ctx(g->model);
    g->spec = spec_of(o);
    if (g->spec == SPEC_DRAFT) {
        struct kvik_err e2 = {0};
        char dpath[4096], derr[512]; /* a registry name, a cache file or a path */
        if ((st = kvik_model_resolve(o->model_draft, dpath, sizeof dpath, derr, sizeof derr)))
            return err_set(err, st, "draft model: %s", derr);
        if ((st = model_load(dpath, &g->draft, &e2))) return err_set(err, st, "draft model: %s", e2.msg);
    }
    if (!(g->eog = engine_eog_ids(g->tok, &g->n_eog))) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    return KVIK_OK;
}

kvik_status gen_start(struct gen *g, const struct gen_opts *o, int n_seqs, int n_ctx, int max_batch,
                      bool prefix_cache, struct kvik_err *err) {
    struct engine_config c = engine_config_default();
    c.n_threads = (int)o->threads;
    c.max_seqs = n_seqs;
    c.max_batch_tokens = max_batch;
    c.prefill_chunk = 0;
    c.max_queue = n_seqs;
    c.n_ctx = n_ctx;
    /* each sequence's blocks, + a tail being copied */
    c.kv_blocks = (int64_t)n_seqs * (((int64_t)n_ctx + c.block_tokens - 1) / c.block_tokens + 1);
    c.kv_type = o->kv_type;
    c.prefix_cache = prefix_cache;
    c.eog = g->eog;
    c.n_eog = g->n_eog;
    c.spec_mode = g->spec;
    c.spec_max = (int)o->spec_max;
    c.spec_ngram = (int)o->spec_ngram;
    c.draft = g->draft;
    if (!(g->engine = engine_new(g->model, &c, err)))
        return err->code ? err->code : err_set(err, KVIK_ERR_NOMEM, "out of memory");
    g->cfg = c;
    g->cfg.eog = NULL;
    return KVIK_OK;
}

void gen_free(struct gen *g) {
    engine_free(g->engine);
    free(g->eog);
    tokenizer_free(g->tok);
    model_free(g->draft);
    model_free(g->model);
    *g = (struct gen){0};
}

kvik_status gen_chat_format(const struct model *m, const char *name, const char *cmd,
                            struct chat_format *fmt, struct kvik_err *err) {
    *fmt = (struct chat_format){0};
    if (name) return chat_template_from_name(name, &fmt->tmpl, err);
    kvik_status st = chat_detect_gguf(m->file, fmt, err);
    if (st == KVIK_ERR_NOT_FOUND)
        return err_set(err, KVIK_ERR_UNSUPPORTED, "the model has no chat template; name one with --chat-template");
    if (!st && fmt->by_architecture)
        fprintf(stderr, "kvik %s: the model has no chat template; using %s, its architecture's\n", cmd,
                chat_template_name(fmt->tmpl));
    if (!st && fmt->approximate)
        fprintf(stderr, "kvik %s: warning: the model's %s template does more than kvik renders\n", cmd,
                chat_template_name(fmt->tmpl));
    return st;
}

/* ---- one request ----------------------------------------------------------- */

/* One request's output side, filled on the engine thread. */
struct gen_call {
    int32_t *out;       // [max] the ids kept
    int max;            // ids to keep (0: none)
    int64_t n;          // ids kept so far
    FILE *stream;
    struct gen_text *text;
    struct detok_stream ds;
    char *piece;        // [piece_cap] detokenizer output
    size_t piece_cap;
    bool nomem;         // text could not grow
    bool eog;
    int n_cached;
    enum engine_finish finish;
    char error[256];
    int64_t t_first, t_end;
    bool done;          // the final event came (mu)
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static bool text_append(struct gen_text *t, const char *s, size_t n) {
    if (t->len + n > t->cap) {
        size_t nc = (t->cap ? t->cap * 2 : 4096) + n;
        char *nb = realloc(t->buf, nc);
        if (!nb) return false;
        t->buf = nb, t->cap = nc;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    return true;
}

/* Writes a piece to the stream and the collected text. */
static void emit(struct gen_call *c, int64_t k) {
    if (k <= 0) return;
    if (c->stream) {
        fwrite(c->piece, 1, (size_t)k, c->stream);
        fflush(c->stream);
    }
    if (c->text && !text_append(c->text, c->piece, (size_t)k)) c->nomem = true;
}

static bool on_event(void *user, const struct engine_event *ev) {
    struct gen_call *c = user;
    int64_t now = clock_ns();
    if (ev->finish == ENGINE_FINISH_NONE) {
        if (!c->t_first) c->t_first = now;
        if (c->n >= c->max) return false; /* a prefill only */
        c->out[c->n++] = ev->token;
        emit(c, detok_push(&c->ds, ev->token, c->piece, c->piece_cap));
        return !c->nomem;
    }
    if (ev->token >= 0 && c->n < c->max) { /* the end-of-generation id: kept, no text */
        c->out[c->n++] = ev->token;
        c->eog = true;
    }
    if (!c->t_first) c->t_first = now;
    emit(c, detok_flush(&c->ds, c->piece, c->piece_cap));
    c->t_end = now;
    c->n_cached = ev->n_cached;
    c->finish = ev->finish;
    if (ev->finish == ENGINE_FINISH_ERROR) snprintf(c->error, sizeof c->error, "%s", ev->error ? ev->error : "");
    pthread_mutex_lock(&c->mu);
    c->done = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return false;
}

struct gen_job {
    struct gen_call c;
    int64_t t_submit;
};

static void job_free(struct gen_job *j) {
    pthread_cond_destroy(&j->c.cv);
    pthread_mutex_destroy(&j->c.mu);
    free(j->c.piece);
    free(j);
}

kvik_status gen_submit(struct gen *g, const int32_t *prompt, int n_prompt, int max_tokens,
                       const struct sampler_params *sp, uint64_t cache_key, int32_t *out, FILE *stream,
                       struct gen_text *text, struct gen_job **job, struct kvik_err *err) {
    *job = NULL;
    struct gen_job *j = calloc(1, sizeof *j);
    if (!j) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    struct gen_call *c = &j->c;
    *c = (struct gen_call){.out = out, .max = max_tokens, .stream = stream, .text = text};
    c->piece_cap = detok_min_cap(g->tok);
    if (!(c->piece = malloc(c->piece_cap))) {
        free(j);
        return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    }
    detok_init(&c->ds, g->tok, false);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    struct engine_request r = {.prompt = prompt, .n_prompt = n_prompt, .max_tokens = max_tokens > 0 ? max_tokens : 1,
                               .n = 1, .sampling = *sp, .top_logprobs = -1, .cache_key = cache_key,
                               .on_event = on_event, .user = c};
    j->t_submit = clock_ns();
    kvik_status st = engine_submit(g->engine, &r, NULL, err);
    if (st) {
        job_free(j);
        return st;
    }
    *job = j;
    return KVIK_OK;
}

kvik_status gen_wait(struct gen_job *j, struct gen_result *res, struct kvik_err *err) {
    struct gen_call *c = &j->c;
    kvik_status st = KVIK_OK;
    pthread_mutex_lock(&c->mu);
    while (!c->done) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    if (c->finish == ENGINE_FINISH_ERROR) st = err_set(err, KVIK_ERR_IO, "%s", c->error);
    else if (c->nomem) st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
    *res = (struct gen_result){.n_gen = c->n, .eog = c->eog, .n_cached = c->n_cached, .t_submit = j->t_submit,
                               .t_first = c->t_first, .t_end = c->t_end};
    job_free(j);
    return st;
}

kvik_status gen_generate(struct gen *g, const int32_t *prompt, int n_prompt, int max_tokens,
                         const struct sampler_params *sp, uint64_t cache_key, int32_t *out, FILE *stream,
                         struct gen_text *text, struct gen_result *res, struct kvik_err *err) {
    *res = (struct gen_result){0};
    struct gen_job *j;
    kvik_status st = gen_submit(g, prompt, n_prompt, max_tokens, sp, cache_key, out, stream, text, &j, err);
    return st ? st : gen_wait(j, res, err);
}
