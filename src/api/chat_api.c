/*
 * chat_api.c — the public chat functions of kvik.h: a conversation rendered
 * with the model's chat template (tokenizer/chat.h).
 */
#include <stdlib.h>

#include "api/api.h"

_Static_assert(sizeof(struct kvik_chat_msg) == sizeof(struct chat_msg) &&
                   offsetof(struct kvik_chat_msg, role) == offsetof(struct chat_msg, role) &&
                   offsetof(struct kvik_chat_msg, content) == offsetof(struct chat_msg, content),
               "a kvik_chat_msg is a chat_msg");

/* The model's chat format, or KVIK_ERR_UNSUPPORTED. */
static kvik_status model_format(const kvik_model *m, const struct kvik_chat_msg *msgs, size_t n,
                                struct kvik_err *e) {
    if (!m || (!msgs && n)) return err_set(e, KVIK_ERR_INVALID_ARG, "chat: NULL %s", m ? "messages" : "model");
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return err_set(e, KVIK_ERR_INVALID_ARG, "chat: message %zu has a NULL %s", i,
                           msgs[i].role ? "content" : "role");
    if (!m->has_fmt)
        return err_set(e, KVIK_ERR_UNSUPPORTED,
                       "chat: the model has no chat template kvik renders; name one (chat_template: chatml, "
                       "llama3, gemma, mistral, phi3)");
    return KVIK_OK;
}

KVIK_API kvik_status kvik_chat_render(const kvik_model *m, const struct kvik_chat_msg *msgs, size_t n,
                                      bool add_generation_prompt, char **text, size_t *len, char *err,
                                      size_t err_len) {
    struct kvik_err e = {KVIK_OK, ""};
    if (err && err_len) err[0] = 0;
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!text) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "chat: NULL text");
        return api_fail(&e, err, err_len);
    }
    if (model_format(m, msgs, n, &e)) return api_fail(&e, err, err_len);
    const struct chat_msg *cm = (const struct chat_msg *)msgs;
    size_t needed = 0;
    if (chat_format_apply(&m->fmt, cm, n, add_generation_prompt, NULL, 0, &needed, &e))
        return api_fail(&e, err, err_len);
    char *out = malloc(needed + 1);
    if (!out) {
        err_set(&e, KVIK_ERR_NOMEM, "out of memory");
        return api_fail(&e, err, err_len);
    }
    if (chat_format_apply(&m->fmt, cm, n, add_generation_prompt, out, needed + 1, &needed, &e)) {
        free(out);
        return api_fail(&e, err, err_len);
    }
    *text = out;
    if (len) *len = needed;
    return KVIK_OK;
}

/* ---- tokenizing a conversation ------------------------------------------ */

/*
 * Interim, until tokenizer/chat.h has chat_encode: the rendered text is
 * tokenized whole with special tokens, as `kvik run --chat` does, and kept
 * only if its control tokens are exactly those of the same conversation
 * with every content blanked to a sentinel byte (so no message text became
 * a control token, nor broke one). Otherwise KVIK_ERR_UNSUPPORTED.
 */
#define API_CHAT_SENTINEL "\x01"

/* The ids of text (parse_special on) after an optional BOS, malloc'd. */
static kvik_status encode_all(const struct tokenizer *tok, const char *text, int32_t **ids, size_t *n,
                              struct kvik_err *e) {
    size_t len = strlen(text);
    bool bos = tokenizer_add_bos(tok) && tokenizer_bos(tok) >= 0;
    int64_t k = tokenizer_encode(tok, text, len, false, true, NULL, 0);
    if (k < 0) return err_set(e, (kvik_status)k, "chat: cannot tokenize the conversation");
    int32_t *v = malloc(sizeof *v * ((size_t)k + 2));
    if (!v) return err_set(e, KVIK_ERR_NOMEM, "out of memory");
    size_t at = 0;
    if (bos) v[at++] = tokenizer_bos(tok);
    tokenizer_encode(tok, text, len, false, true, v + at, k);
    at += (size_t)k;
    if (tokenizer_add_eos(tok) && tokenizer_eos(tok) >= 0) v[at++] = tokenizer_eos(tok);
    *ids = v;
    *n = at;
    return KVIK_OK;
}

static bool same_controls(const struct tokenizer *tok, const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t i = 0, j = 0;
    for (;;) {
        while (i < na && tokenizer_token_type(tok, a[i]) != TOKEN_TYPE_CONTROL) i++;
        while (j < nb && tokenizer_token_type(tok, b[j]) != TOKEN_TYPE_CONTROL) j++;
        if (i == na || j == nb) return i == na && j == nb;
        if (a[i++] != b[j++]) return false;
    }
}

KVIK_API kvik_status kvik_chat_tokenize(const kvik_model *m, const struct kvik_chat_msg *msgs, size_t n,
                                        bool add_generation_prompt, int32_t **ids, size_t *n_ids, char *err,
                                        size_t err_len) {
    struct kvik_err e = {KVIK_OK, ""};
    if (err && err_len) err[0] = 0;
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!ids || !n_ids) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "chat: NULL ids");
        return api_fail(&e, err, err_len);
    }
    if (model_format(m, msgs, n, &e)) return api_fail(&e, err, err_len);
    struct kvik_chat_msg *blank = malloc(sizeof *blank * (n ? n : 1));
    if (!blank) {
        err_set(&e, KVIK_ERR_NOMEM, "out of memory");
        return api_fail(&e, err, err_len);
    }
    for (size_t i = 0; i < n; i++) blank[i] = (struct kvik_chat_msg){msgs[i].role, API_CHAT_SENTINEL};
    char *text = NULL, *skeleton = NULL;
    int32_t *v = NULL, *w = NULL;
    size_t nv = 0, nw = 0;
    kvik_status st = kvik_chat_render(m, msgs, n, add_generation_prompt, &text, NULL, err, err_len);
    if (!st) st = kvik_chat_render(m, blank, n, add_generation_prompt, &skeleton, NULL, err, err_len);
    if (st) goto done;
    if ((st = encode_all(m->tok, text, &v, &nv, &e)) || (st = encode_all(m->tok, skeleton, &w, &nw, &e))) {
        api_fail(&e, err, err_len);
        goto done;
    }
    if (!same_controls(m->tok, v, nv, w, nw)) {
        st = err_set(&e, KVIK_ERR_UNSUPPORTED, "chat: a message contains the text of a control token");
        api_fail(&e, err, err_len);
        goto done;
    }
    *ids = v;
    *n_ids = nv;
    v = NULL;
done:
    free(v);
    free(w);
    free(text);
    free(skeleton);
    free(blank);
    return st;
}
