/*
 * request.h — OpenAI request bodies turned into structs, and the errors
 * OpenAI answers bad ones with. Pure: no sockets, no engine; the JSON
 * library (jansson) is an implementation detail of request.c.
 *
 * api_parse_request reads the body of POST /v1/chat/completions or
 * POST /v1/completions: it checks the JSON syntax and UTF-8 (jansson
 * rejects invalid UTF-8 and lone surrogates), every known field's type and
 * range, and the limits below; unknown fields are ignored, as OpenAI does,
 * and a JSON null reads as "not given". api_prepare then renders the chat
 * template, tokenizes and checks the prompt against the context, giving
 * the token ids and sampling parameters the engine takes.
 *
 * Every failure fills a struct api_error: the HTTP status and the fields of
 * OpenAI's error object {"error":{"message","type","param","code"}}.
 */
#ifndef KVIK_SERVER_REQUEST_H
#define KVIK_SERVER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/sampler.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

/* Limits of one request (documented in docs/server.md). */
enum {
    API_MAX_BODY_DEFAULT = 4 << 20, /* bytes of a request body */
    API_MAX_STOP = 16,              /* stop strings */
    API_MAX_STOP_LEN = 256,         /* bytes of one stop string */
    API_MAX_N = 16,                 /* choices per request */
    API_MAX_TOP_LOGPROBS = 20,      /* chat top_logprobs; completions logprobs */
    API_MAX_MESSAGES = 4096,        /* chat messages */
    API_MAX_TOOLS = 128,            /* tools, and tool calls of one message */
    API_MAX_DETOKENIZE = 1 << 20,   /* ids in one /detokenize body */
    API_MAX_PROMPTS = 64,           /* prompts in one completions batch */
    API_MAX_EMBED_INPUTS = 2048,    /* inputs in one embeddings request (OpenAI's limit) */
    API_MAX_RERANK_DOCS = 1000,     /* documents in one rerank request */
};

enum api_route {
    API_ROUTE_CHAT,        /* POST /v1/chat/completions */
    API_ROUTE_COMPLETIONS, /* POST /v1/completions */
};

struct api_error {
    int status;        /* HTTP status: 400, 401, 404, 405, 413, 500, 503 */
    const char *type;  /* "invalid_request_error", "authentication_error", ... (static) */
    const char *code;  /* static; NULL: JSON null */
    char param[64];    /* the offending parameter; "": JSON null */
    char message[512];
};

/* Fills e (e may be NULL); returns false so callers can `return api_fail(...)`. */
bool api_fail(struct api_error *e, int status, const char *type, const char *code,
              const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* The error as a JSON body (malloc'd, NUL-terminated); NULL if out of memory. */
char *api_error_json(const struct api_error *e);

/* One more prompt of a completions batch: text, or token ids. */
struct api_more_prompt {
    char *prompt;              /* NULL when ids are given */
    size_t prompt_len;
    int32_t *prompt_ids;
    int n_prompt_ids;
};

/* A grammar the output must follow (response_format, or GBNF in "grammar"). */
enum api_grammar { API_GRAMMAR_NONE, API_GRAMMAR_GBNF, API_GRAMMAR_JSON_SCHEMA, API_GRAMMAR_JSON_OBJECT };

/* tool_choice: with tools, auto unless given. */
enum api_tool_choice { API_TOOLS_AUTO, API_TOOLS_NONE, API_TOOLS_REQUIRED, API_TOOLS_NAMED };

struct api_request {
    enum api_route route;
    char *model;               /* NULL: not given */
    /* chat */
    struct chat_msg *msgs;     /* [n_msgs], strings owned */
    char **msg_extra;          /* [n_msgs] the template's extra members of each message
                                  (tool_calls, tool_call_id; chat_encode_tools), NULL entries
                                  for none; owned */
    size_t n_msgs;
    char *tools_json;          /* the tools as the template gets them (a JSON array); NULL: none */
    int n_tools;
    enum api_tool_choice tool_choice;
    char *tool_name;           /* API_TOOLS_NAMED: the function */
    bool parallel_tool_calls;  /* default true: every call of a reply; false: the first */
    /* completions: a text prompt, or token ids */
    char *prompt;              /* [prompt_len] + NUL; NULL when ids are given */
    size_t prompt_len;
    int32_t *prompt_ids;       /* [n_prompt_ids] (not yet checked against the vocabulary) */
    int n_prompt_ids;
    struct api_more_prompt *more; /* completions batch: prompts 2..1+n_more (the first is above) */
    int n_more;
    bool echo;                 /* completions: the prompt's text starts each choice; with
                                  logprobs, the prompt's tokens start the logprobs lists */
    /* generation */
    int max_tokens;            /* 0: not given (the rest of the context), or score_only */
    bool score_only;           /* completions: max_tokens 0 with echo: the prompt is scored
                                  (echoed with its logprobs), nothing is generated */
    int n;                     /* choices, 1..API_MAX_N */
    bool stream;
    bool include_usage;        /* stream_options.include_usage */
    struct sampler_params sp;  /* OpenAI's defaults: temperature 1, top_p 1, top_k and
                                  min_p off; seed SAMPLER_SEED_RANDOM unless given */
    bool logprobs;             /* chat: logprobs; completions: logprobs given */
    int top_logprobs;          /* 0..API_MAX_TOP_LOGPROBS alternatives per token */
    char **stop;               /* [n_stop], NUL-terminated, non-empty, valid UTF-8 */
    int n_stop;
    bool ignore_eos;           /* extension (vLLM's): generate past end-of-generation tokens */
    char *user;                /* NULL: not given; only logged */
    enum api_grammar grammar_kind;
    char *grammar;             /* GBNF text, or the JSON Schema's JSON text; owned */
    char *cache_salt;          /* NULL: not given; prefix cache entries are shared only by
                                  requests with the same salt (and isolation key) */
};

/* Parses and validates body[0..len). On failure r is left empty (free is
 * still fine) and e says why. max_body: the byte limit (413 beyond). */
bool api_parse_request(enum api_route route, const char *body, size_t len, size_t max_body,
                       struct api_request *r, struct api_error *e);
void api_request_free(struct api_request *r);

/* What the engine gets for a request. */
struct api_prompt {
    int32_t *ids;   /* [n] malloc'd */
    int n;
    int max_tokens; /* resolved: given, or n_ctx - n; 0: score_only */
};

/*
 * Renders the chat template (chat) or takes the text or ids (completions),
 * tokenizes with BOS as the vocabulary asks and special-token text parsed
 * only in template output, and checks n + max_tokens <= n_ctx (400,
 * code "context_length_exceeded", when not). fmt may be NULL for
 * completions; for chat without a template: 400.
 */
bool api_prepare(const struct api_request *r, const struct tokenizer *tok,
                 const struct chat_format *fmt, int n_ctx, struct api_prompt *out,
                 struct api_error *e);
void api_prompt_free(struct api_prompt *p);

/* POST /tokenize {"content"|"prompt": TEXT, "add_special": bool,
 * "parse_special": bool}. */
struct api_tokenize {
    char *text;
    size_t len;
    bool add_special;   /* default true (BOS as the vocabulary asks) */
    bool parse_special; /* default true */
};
bool api_parse_tokenize(const char *body, size_t len, size_t max_body, struct api_tokenize *t,
                        struct api_error *e);
void api_tokenize_free(struct api_tokenize *t);

/* POST /detokenize {"tokens": [ids]}; ids are range-checked by the caller. */
struct api_detokenize {
    int32_t *ids;
    int n;
};
bool api_parse_detokenize(const char *body, size_t len, size_t max_body,
                          struct api_detokenize *d, struct api_error *e);
void api_detokenize_free(struct api_detokenize *d);

/* POST /v1/embeddings {"input": TEXT | [TEXT...] | [ID...] | [[ID...]...],
 * "encoding_format": "float" | "base64", "dimensions": N}. Input i is a
 * text (texts[i], lens[i]) or ids (ids[i], n_ids[i] >= 1; texts[i] NULL);
 * ids are range-checked by the caller. */
struct api_embed_request {
    int n;            /* 1..API_MAX_EMBED_INPUTS */
    char **texts;
    size_t *lens;
    int32_t **ids;
    int *n_ids;
    bool base64;
    int dimensions;   /* 0: not given */
};
bool api_parse_embeddings(const char *body, size_t len, size_t max_body, struct api_embed_request *r,
                          struct api_error *e);
void api_embed_request_free(struct api_embed_request *r);

/* The body of POST /v1/rerank: {"query": string, "documents" (or "texts"):
 * [string or {"text": string}], "top_n": N, "return_documents": bool}. */
struct api_rerank_request {
    char *query;
    size_t query_len;
    int n;                  /* documents, 1..API_MAX_RERANK_DOCS */
    char **docs;            /* [n], NUL-terminated */
    size_t *lens;
    int top_n;              /* 1..n (default n) */
    bool return_documents;
};
bool api_parse_rerank(const char *body, size_t len, struct api_rerank_request *r, struct api_error *e);
void api_rerank_request_free(struct api_rerank_request *r);

/* s[0..n) with every invalid byte sequence as U+FFFD, NUL-terminated,
 * malloc'd, length in *out_len; NULL if out of memory. */
char *api_utf8_sanitize(const char *s, size_t n, size_t *out_len);

#endif /* KVIK_SERVER_REQUEST_H */
