/*
 * response.h — OpenAI response bodies and SSE chunks for a job.
 *
 * Shapes (docs/server.md has examples):
 *   chat, whole     {"id":"chatcmpl-..","object":"chat.completion","created":T,"model":M,
 *                    "system_fingerprint":F,"choices":[{"index":i,"message":{"role":
 *                    "assistant","content":TEXT,"refusal":null},"logprobs":null|{"content":
 *                    [..],"refusal":null},"finish_reason":"stop"|"length"}],"usage":{..}}
 *   chat, chunk     "object":"chat.completion.chunk", choices[i].delta: first
 *                    {"role":"assistant","content":""}, then {"content":PIECE}, last {}
 *                    with finish_reason; with include_usage every chunk has "usage":null
 *                    and a last chunk has "choices":[] and the usage
 *   completions     "object":"text_completion", choices[i] {"text","index","logprobs",
 *                    "finish_reason"}; logprobs {"tokens","token_logprobs",
 *                    "top_logprobs","text_offset"}
 * Stream events are "data: JSON\n\n", and the stream ends with "data: [DONE]\n\n".
 */
#ifndef KVIK_SERVER_RESPONSE_H
#define KVIK_SERVER_RESPONSE_H

#include "server/job.h"
#include "server/request.h"

/* A growable byte buffer. */
struct sbuf {
    char *p;
    size_t len, cap;
    bool failed; /* an append ran out of memory */
};
void sbuf_add(struct sbuf *b, const char *s, size_t n);
void sbuf_free(struct sbuf *b);

/* What every body of one response shares. */
struct resp_ctx {
    enum api_route route;
    char id[48];          /* "chatcmpl-..." / "cmpl-..." */
    int64_t created;      /* Unix seconds */
    const char *model;    /* the served model name */
    bool include_usage;
    int top_logprobs;     /* alternatives per token (logprobs on: job->logprobs) */
    const char *echo;     /* completions echo: the prompt text; NULL: none */
    size_t echo_len;
    int n_prompt;         /* prompt tokens (usage) */
};

/* Fills id (with a fresh random suffix) and created. */
void resp_ctx_init(struct resp_ctx *rc, enum api_route route, const char *model);

/* "stop", "length", "cancelled", "error". */
const char *resp_finish_reason(enum engine_finish f);

/* The whole (non-streaming) response of a finished job, under j->mu; NULL
 * if out of memory. */
char *resp_full(const struct resp_ctx *rc, struct job *j);

/* Under j->mu: appends the SSE events for what is new since the last call
 * to out; true when the stream is complete ([DONE] appended). */
bool resp_stream_step(const struct resp_ctx *rc, struct job *j, struct sbuf *out);

/* {"object":"list","data":[{"id":NAME,"object":"model","created":T,"owned_by":"kvik",
 * "max_model_len":CTX}]} or, one (list false), the model object alone. */
char *resp_models(const char *name, int64_t created, int n_ctx, bool list);

#endif /* KVIK_SERVER_RESPONSE_H */
