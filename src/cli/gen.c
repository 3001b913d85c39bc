/*
 * gen.c — generation shared by `kvik run` and `kvik chat`: option parsing,
 * model + tokenizer + chat template set-up, batched prefill into the flat
 * KV cache, and the sample / stream / feed-back decode loop.
 */
#include <errno.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/gen.h"
#include "engine/spec.h"

struct gen_opts gen_opts_default(long n_gen) {
    return (struct gen_opts){.n_gen = n_gen, .threads = cpu_count(), .sp = sampler_params_default(),
                             .spec_max = SPEC_DEFAULT_MAX, .spec_ngram = SPEC_DEFAULT_NGRAM};
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
    else if (!strcmp(a, "-c")) ok = cli_parse_long(v, 1, 1 << 24, &o->n_ctx);
    else if (!strcmp(a, "--temp")) ok = cli_parse_float(v, -1e9f, 1e9f, &o->sp.temp);
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

bool gen_opts_check(const struct gen_opts *o, const char *cmd, char *buf, size_t len, const char **path) {
    struct kvik_err err = {0};
    if (sampler_params_validate(&o->sp, &err)) {
        fprintf(stderr, "kvik %s: %s\n", cmd, err.msg);
        return false;
    }
    enum spec_mode mode = o->model_draft ? SPEC_DRAFT : SPEC_NONE;
    if (o->spec && !spec_mode_parse(o->spec, &mode)) {
        fprintf(stderr, "kvik %s: bad value '%s' for --spec (none, ngram or draft)\n", cmd, o->spec);
        return false;
    }
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

int gen_ctx_size(const struct model *m, long requested) {
    if (requested) return (int)requested;
    return m->hp.n_ctx_train < GEN_MAX_DEFAULT_CTX ? m->hp.n_ctx_train : GEN_MAX_DEFAULT_CTX;
}

kvik_status gen_load(struct gen *g, const char *path, struct kvik_err *err) {
    kvik_status st = model_load(path, &g->model, err);
    if (!st) st = tokenizer_load(g->model->file, &g->tok, err);
    return st;
}

/* The status of a constructor that returned NULL. */
static kvik_status failed(struct kvik_err *err) {
    return err->code ? err->code : err_set(err, KVIK_ERR_NOMEM, "out of memory");
}

kvik_status gen_start(struct gen *g, int n_threads, int max_batch, int n_ctx,
                      const struct sampler_params *sp, struct kvik_err *err) {
    const struct model_hparams *hp = &g->model->hp;
    g->n_ctx = n_ctx;
    g->max_batch = max_batch;
    g->argmax = -1;
    if (!(g->logits = malloc(sizeof(float) * (size_t)hp->n_vocab)))
        return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    if (!(g->ctx = model_ctx_new(g->model, n_threads, max_batch, n_ctx, err))) return failed(err);
    kvik_status st = kv_flat_init(&g->kv, hp->n_layer, 1, n_ctx, hp->n_head_kv * hp->head_dim, TENSOR_TYPE_F32, err);
    if (st) return st;
    if (!(g->smp = sampler_new(sp, hp->n_vocab, err))) return failed(err);
    return KVIK_OK;
}

void gen_free(struct gen *g) {
    gen_spec_free(g);
    free(g->logits);
    sampler_free(g->smp);
    kv_flat_free(&g->kv);
    model_ctx_free(g->ctx);
    tokenizer_free(g->tok);
    model_free(g->model);
    *g = (struct gen){0};
}

kvik_status gen_chat_format(const struct model *m, const char *name, const char *cmd,
                            struct chat_format *fmt, struct kvik_err *err) {
    *fmt = (struct chat_format){0};
    if (name) return chat_template_from_name(name, &fmt->tmpl, err);
    struct gguf_str t;
    if (gguf_get_str(m->file, "tokenizer.chat_template", &t, NULL) != KVIK_OK)
        return err_set(err, KVIK_ERR_UNSUPPORTED, "the model has no chat template; name one with --chat-template");
    char *text = malloc(t.len + 1);
    if (!text) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    memcpy(text, t.ptr, t.len);
    text[t.len] = 0;
    kvik_status st = chat_detect(text, fmt, err);
    free(text);
    if (!st && fmt->approximate)
        fprintf(stderr, "kvik %s: warning: the model's %s template does more than kvik renders\n", cmd,
                chat_template_name(fmt->tmpl));
    return st;
}

kvik_status gen_prefill(struct gen *g, const int32_t *ids, int64_t from, int64_t to,
                        struct kvik_err *err) {
    int32_t pos[GEN_PREFILL_BATCH], seq[GEN_PREFILL_BATCH] = {0};
    int max = g->max_batch < GEN_PREFILL_BATCH ? g->max_batch : GEN_PREFILL_BATCH;
    for (int64_t start = from; start < to; start += max) {
        int nb = (int)(to - start < max ? to - start : max);
        for (int i = 0; i < nb; i++) pos[i] = (int32_t)(start + i);
        struct model_batch b = {.n = nb, .tokens = ids + start, .pos = pos, .seq = seq, .argmax = &g->argmax};
        g->argmax = -1;
        kvik_status st = model_forward(g->ctx, &g->kv.base, &b, g->logits, err);
        if (st) return st;
    }
    return KVIK_OK;
}

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
static kvik_status emit(FILE *stream, struct gen_text *text, const char *s, int64_t k, struct kvik_err *err) {
    if (k <= 0) return KVIK_OK;
    if (stream) {
        fwrite(s, 1, (size_t)k, stream);
        fflush(stream);
    }
    if (text && !text_append(text, s, (size_t)k)) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    return KVIK_OK;
}

kvik_status gen_decode(struct gen *g, int32_t *ids, int64_t *n, int64_t n_max, FILE *stream,
                       struct gen_text *text, int64_t *t_first, struct kvik_err *err) {
    struct detok_stream ds;
    detok_init(&ds, g->tok, false);
    size_t piece_cap = detok_min_cap(g->tok);
    char *piece = malloc(piece_cap);
    if (!piece) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    kvik_status st = KVIK_OK;
    int64_t i = *n;
    *t_first = 0;
    bool end = false;
    while (i < n_max && !end) {
        int32_t toks[SPEC_MAX_DRAFT + 1];
        int nt = 1;
        if (g->spec && i > *n) { /* a draft verified with the last token fed */
            if ((st = gen_spec_step(g, ids, i, n_max, toks, &nt, err))) break;
        } else {
            toks[0] = sampler_sample_argmax(g->smp, g->logits, g->argmax);
            sampler_accept(g->smp, toks[0]);
        }
        if (!*t_first) *t_first = clock_ns();
        for (int j = 0; j < nt && !end; j++) {
            int32_t next = ids[i++] = toks[j];
            end = tokenizer_is_eog(g->tok, next) ||
                  (st = emit(stream, text, piece, detok_push(&ds, next, piece, piece_cap), err)) || i >= n_max;
        }
        if (end || g->spec) continue;
        int32_t p = (int32_t)(i - 1), s = 0;
        struct model_batch b = {.n = 1, .tokens = &ids[i - 1], .pos = &p, .seq = &s, .argmax = &g->argmax};
        g->argmax = -1;
        if ((st = model_forward(g->ctx, &g->kv.base, &b, g->logits, err))) break;
    }
    if (!st) st = emit(stream, text, piece, detok_flush(&ds, piece, piece_cap), err);
    free(piece);
    *n = i;
    return st;
}
