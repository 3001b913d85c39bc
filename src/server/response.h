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
 *
 * Tool calls (rc->tool_style set: the request has tools): a finished
 * reply is split by toolcall_parse (its text after rc->prefill, the part
 * of the call the server wrote into the prompt); with calls the message
 * has "tool_calls" [{"id":"call_..","type":"function","function":{"name",
 * "arguments": JSON text}}] (a reply that is one bare call, toolcall_parse_bare,
 * counts too), content the text before them (null when
 * none) and finish_reason "tool_calls". Streaming sends text as it comes
 * until a call may be starting (Hermes: "<tool_call>" or a prefix of it at
 * the end; Llama 3: a reply that opens with "{" or "<|python_tag|>"; with a
 * prefill: everything), holds the rest, and at the end sends the held text
 * or one delta {"tool_calls":[{"index",...}]} per call.
 */
#ifndef KVIK_SERVER_RESPONSE_H
#define KVIK_SERVER_RESPONSE_H

#include "server/job.h"
#include "server/request.h"
#include "server/toolcall.h"

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
    enum toolcall_style tool_style; /* TOOLCALL_NONE: no tools in the request */
    bool parallel_tools;  /* every call of a reply (false: the first) */
    const char *prefill;  /* the start of a call written into the prompt ("": none) */
    const char *tools_json; /* the request's tools (for calls written without markers) */
};

/* Fills id (with a fresh random suffix) and created. */
void resp_ctx_init(struct resp_ctx *rc, enum api_route route, const char *model);

/* "stop", "length", "cancelled", "error". */
const char *resp_finish_reason(enum engine_finish f);

/* The whole (non-streaming) response of a finished job, under j->mu; NULL
 * if out of memory. */
char *resp_full(const struct resp_ctx *rc, struct job *j);

/* Streaming in two halves, so the job's lock (which the engine thread
 * takes for every token) is held only while copying:
 * resp_stream_take, under j->mu, moves what is new since the last call into
 * st (true when there is anything to send, or the stream is complete);
 * resp_stream_render, without the lock, appends its SSE events to out,
 * ending with data: [DONE] when st->complete. */
struct resp_delta {             /* one choice's news */
    int index;
    bool first;                 /* its first chunk (chat: the role; completions: echo) */
    char *text;                 /* [len] new text, malloc'd */
    size_t len;
    struct job_token *toks;     /* [n_toks] newly reported tokens, malloc'd */
    int n_toks;
    bool finish;
    enum engine_finish reason;
    char error[160];
    char *calls;                /* with tools, at the finish: the tool_calls array (JSON text, with
                                   "index"), malloc'd; NULL: none */
};

/* "usage": {"prompt_tokens","completion_tokens","total_tokens",
 * "prompt_tokens_details":{"cached_tokens"}} (cached: prompt tokens whose
 * K/V came from the prefix cache). */
struct resp_usage {
    int64_t prompt_tokens, completion_tokens, cached_tokens;
};

struct resp_step {
    const struct tokenizer *tok;
    bool logprobs;
    const struct job_token *ptoks; /* echoed prompt log-probabilities (the job's, fixed once
                                      prompt_done; the stream holds the job): [n_ptoks]; NULL:
                                      none */
    int n_ptoks;
    struct resp_delta *d;       /* [n] */
    int n;
    bool complete;              /* every choice has sent its finish: usage, [DONE] */
    bool failed;                /* out of memory */
    struct resp_usage usage;
};

bool resp_stream_take(const struct resp_ctx *rc, struct job *j, struct resp_step *st);
void resp_stream_render(const struct resp_ctx *rc, const struct resp_step *st, struct sbuf *out);
void resp_step_free(struct resp_step *st);

/* Both at once, under j->mu (tests); true when the stream is complete. */
bool resp_stream_step(const struct resp_ctx *rc, struct job *j, struct sbuf *out);

/* The /v1/embeddings body of n vectors of dim floats: each a JSON array
 * of numbers, or (b64) the base64 of its little-endian float32 bytes, as
 * OpenAI's encoding_format "base64"; usage counts prompt_tokens.
 * malloc'd; NULL if out of memory. */
char *resp_embeddings(const float *vecs, int n, int dim, bool b64, const char *model, int64_t prompt_tokens);

/* {"object":"list","data":[{"id":NAME,"object":"model","created":T,"owned_by":"kvik",
 * "max_model_len":CTX}, ...]} of n models or, list false, the first's model object alone. */
char *resp_models(const char *const *names, const int *n_ctx, int n, int64_t created, bool list);

/* One document's place in a rerank answer. */
struct api_rank {
    int index;   /* in the request's documents */
    float score; /* relevance, 0..1 */
};

/* The body of a /v1/rerank answer: ranks[0..n) (best first) as results
 * {"index", "relevance_score"} (with "document": {"text"} when req is
 * given), the model and the prompt tokens used; NULL if out of memory. */
struct api_rerank_request;
char *resp_rerank(const struct api_rank *ranks, int n, const struct api_rerank_request *req, const char *model,
                  int64_t tokens);

#endif /* KVIK_SERVER_RESPONSE_H */
