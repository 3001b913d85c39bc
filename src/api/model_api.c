/*
 * model_api.c — the public model and token functions of kvik.h: a
 * kvik_model is a loaded model with its tokenizer and recognised chat
 * template; tokenize, detokenize and the streaming detokenizer wrap the
 * tokenizer module.
 */
#include <stdlib.h>

#include "api/api.h"

KVIK_API void kvik_free(void *p) { free(p); }

KVIK_API void kvik_model_params_init(struct kvik_model_params *p, size_t size) {
    struct kvik_model_params lib = {.size = sizeof lib};
    API_INIT(p, size, &lib);
}

/* The chat template the params name, else the model's own if kvik
 * recognises it; anything else leaves m->has_fmt false. Running out of
 * memory is an error either way. */
static kvik_status load_chat_format(struct kvik_model *m, const char *name, struct kvik_err *e) {
    m->fmt = (struct chat_format){0};
    if (name) {
        kvik_status st = chat_template_from_name(name, &m->fmt.tmpl, e);
        if (!st) m->has_fmt = true;
        return st;
    }
    struct kvik_err de = {0};
    kvik_status st = chat_detect_gguf(m->model->file, &m->fmt, &de);
    if (st == KVIK_ERR_NOMEM) return err_set(e, KVIK_ERR_NOMEM, "%s", de.msg);
    m->has_fmt = st == KVIK_OK; /* a template kvik does not recognise is not an error */
    return KVIK_OK;
}

KVIK_API kvik_status kvik_model_open(const char *arg, const struct kvik_model_params *params, kvik_model **out,
                                     char *err, size_t err_len) {
    struct kvik_err e = {KVIK_OK, ""};
    if (err && err_len) err[0] = 0;
    if (!out) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "model: NULL out");
        return api_fail(&e, err, err_len);
    }
    *out = NULL;
    struct kvik_model_params p = kvik_model_default_params();
    if (params) {
        if (params->size < sizeof(size_t)) {
            err_set(&e, KVIK_ERR_INVALID_ARG, "model: params.size is %zu; start from kvik_model_default_params()",
                    params->size);
            return api_fail(&e, err, err_len);
        }
        API_TAKE(&p, params, chat_template);
    }
    char path[4096];
    kvik_status st = kvik_model_resolve(arg, path, sizeof path, err, err_len);
    if (st) return st;
    struct kvik_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        err_set(&e, KVIK_ERR_NOMEM, "out of memory");
        return api_fail(&e, err, err_len);
    }
    if ((st = model_load(path, &m->model, &e))) goto fail;
    if ((st = tokenizer_load(m->model->file, &m->tok, &e))) goto fail;
    if ((st = load_chat_format(m, p.chat_template, &e))) goto fail;
    int32_t nv = tokenizer_n_vocab(m->tok);
    if (!(m->eog = malloc(sizeof *m->eog * (size_t)(nv > 0 ? nv : 1)))) {
        st = err_set(&e, KVIK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int32_t id = 0; id < nv; id++)
        if (tokenizer_is_eog(m->tok, id)) m->eog[m->n_eog++] = id;
    *out = m;
    return KVIK_OK;
fail:
    kvik_model_close(m);
    /* name the file: the loaders' messages name the key or tensor */
    struct kvik_err full = {st, ""};
    err_set(&full, st, "%.120s: %s", path, e.msg);
    return api_fail(&full, err, err_len);
}

KVIK_API void kvik_model_close(kvik_model *m) {
    if (!m) return;
    if (m->has_fmt) chat_format_free(&m->fmt);
    free(m->eog);
    tokenizer_free(m->tok);
    model_free(m->model);
    free(m->path);
    free(m);
}

KVIK_API const char *kvik_model_path(const kvik_model *m) { return m ? m->path : NULL; }
KVIK_API int32_t kvik_model_n_vocab(const kvik_model *m) { return m ? tokenizer_n_vocab(m->tok) : 0; }
KVIK_API int32_t kvik_model_n_ctx_train(const kvik_model *m) { return m ? m->model->hp.n_ctx_train : 0; }
KVIK_API int32_t kvik_token_bos(const kvik_model *m) { return m ? tokenizer_bos(m->tok) : -1; }
KVIK_API int32_t kvik_token_eos(const kvik_model *m) { return m ? tokenizer_eos(m->tok) : -1; }
KVIK_API bool kvik_token_is_eog(const kvik_model *m, int32_t id) { return m && tokenizer_is_eog(m->tok, id); }

KVIK_API const char *kvik_model_chat_template(const kvik_model *m) {
    return m && m->has_fmt ? chat_template_name(m->fmt.tmpl) : NULL;
}

/* ---- tokens ------------------------------------------------------------ */

KVIK_API int64_t kvik_tokenize(const kvik_model *m, const char *text, size_t len, bool add_special,
                               bool parse_special, int32_t *ids, int64_t max) {
    if (!m || (!text && len) || max < 0 || (!ids && max)) return KVIK_ERR_INVALID_ARG;
    return tokenizer_encode(m->tok, text ? text : "", len, add_special, parse_special, ids, max);
}

KVIK_API int64_t kvik_detokenize(const kvik_model *m, const int32_t *ids, int64_t n, char *buf, size_t len,
                                 bool render_special) {
    if (!m || n < 0 || (!ids && n) || (!buf && len)) return KVIK_ERR_INVALID_ARG;
    int64_t k = tokenizer_decode(m->tok, ids, n, buf, len, render_special);
    if (k >= 0 && (size_t)k < len) buf[k] = 0;
    return k;
}

KVIK_API int64_t kvik_token_piece(const kvik_model *m, int32_t id, char *buf, size_t len, bool render_special) {
    if (!m || (!buf && len)) return KVIK_ERR_INVALID_ARG;
    int64_t k = tokenizer_decode_piece(m->tok, id, buf, len, render_special);
    if (k >= 0 && (size_t)k < len) buf[k] = 0;
    return k;
}

/* ---- streaming detokenizer ---------------------------------------------- */

struct kvik_detok {
    struct detok_stream ds;
    char *buf; /* [cap + 1]: the bytes of the last push or flush, NUL-terminated */
    size_t cap;
};

KVIK_API kvik_status kvik_detok_new(const kvik_model *m, bool render_special, kvik_detok **out) {
    if (!out) return KVIK_ERR_INVALID_ARG;
    *out = NULL;
    if (!m) return KVIK_ERR_INVALID_ARG;
    struct kvik_detok *d = calloc(1, sizeof *d);
    if (!d) return KVIK_ERR_NOMEM;
    d->cap = detok_min_cap(m->tok);
    if (!(d->buf = malloc(d->cap + 1))) {
        free(d);
        return KVIK_ERR_NOMEM;
    }
    detok_init(&d->ds, m->tok, render_special);
    *out = d;
    return KVIK_OK;
}

KVIK_API void kvik_detok_free(kvik_detok *d) {
    if (!d) return;
    free(d->buf);
    free(d);
}

static kvik_status detok_out(kvik_detok *d, int64_t k, const char **text, size_t *len) {
    if (k < 0) return (kvik_status)k;
    d->buf[k] = 0;
    if (text) *text = d->buf;
    if (len) *len = (size_t)k;
    return KVIK_OK;
}

KVIK_API kvik_status kvik_detok_push(kvik_detok *d, int32_t id, const char **text, size_t *len) {
    if (!d) return KVIK_ERR_INVALID_ARG;
    return detok_out(d, detok_push(&d->ds, id, d->buf, d->cap), text, len);
}

KVIK_API kvik_status kvik_detok_flush(kvik_detok *d, const char **text, size_t *len) {
    if (!d) return KVIK_ERR_INVALID_ARG;
    return detok_out(d, detok_flush(&d->ds, d->buf, d->cap), text, len);
}
