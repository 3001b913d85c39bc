/*
 * chat_encode.c — a conversation straight to token ids: the chat template
 * renders it (chat.c), recording which bytes it wrote itself, and the
 * tokenizer (bpe.c) recognises control tokens only inside those bytes. A
 * message's content is plain text wherever it sits; the plain text between
 * two control tokens (template text and contents together) is encoded as
 * one stretch, exactly as the whole rendering would be.
 */
#include <stdlib.h>

#include "tokenizer/chat.h"
#include "tokenizer/tokenizer_int.h"

kvik_status chat_encode(const struct chat_format *f, const struct tokenizer *tok,
                        const struct chat_msg *msgs, size_t n, bool add_generation_prompt,
                        int32_t **ids, size_t *n_ids, struct kvik_err *err) {
    return chat_encode_tools(f, tok, msgs, NULL, n, NULL, add_generation_prompt, ids, n_ids, err);
}

kvik_status chat_encode_tools(const struct chat_format *f, const struct tokenizer *tok,
                              const struct chat_msg *msgs, const char *const *extra, size_t n,
                              const char *tools_json, bool add_generation_prompt, int32_t **ids,
                              size_t *n_ids, struct kvik_err *err) {
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!f || !tok || !ids || !n_ids)
        return err_set(err, KVIK_ERR_INVALID_ARG, "chat: NULL format, tokenizer or output");
    struct chat_rendering r;
    kvik_status st = chat_render_spans(f, msgs, extra, n, tools_json, add_generation_prompt, &r, err);
    if (st) return st;
    /* a first guess that nearly always holds: a token per byte, a space
     * prefix per stretch, BOS and EOS */
    int64_t cap = (int64_t)r.len + 2 * (int64_t)r.n_spans + 4;
    int32_t *out = NULL;
    for (int tries = 0; tries < 2; tries++) {
        free(out);
        out = malloc((size_t)cap * sizeof *out);
        if (!out) break;
        int64_t k = tokenizer_encode_spans(tok, r.text, r.len, true, r.spans, r.n_spans, out, cap);
        if (k < 0) {
            st = err_set(err, (kvik_status)k, k == KVIK_ERR_NOMEM
                                                  ? "chat: out of memory tokenizing the conversation"
                                                  : "chat: cannot tokenize the conversation");
            goto done;
        }
        if (k <= cap) {
            *ids = out;
            *n_ids = (size_t)k;
            out = NULL;
            goto done;
        }
        cap = k;
    }
    st = err_set(err, KVIK_ERR_NOMEM, "chat: out of memory tokenizing the conversation");
done:
    free(out);
    chat_rendering_free(&r);
    return st;
}
