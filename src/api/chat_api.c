/*
 * chat_api.c — the public chat functions of kvik.h: a conversation rendered
 * with the model's chat template as text (chat_format_apply) or as token
 * ids (chat_encode: markers special, contents plain text).
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
    if (chat_encode(&m->fmt, m->tok, (const struct chat_msg *)msgs, n, add_generation_prompt, ids, n_ids, &e))
        return api_fail(&e, err, err_len);
    return KVIK_OK;
}
