/*
 * server.h — `kvik serve`: the OpenAI-compatible HTTP server.
 *
 * HTTP is GNU libmicrohttpd, one thread per connection: a connection's
 * thread reads and validates the body (request.c), renders the chat
 * template and tokenizes, submits to the engine and then waits on the
 * request's job (job.c) for text, writing SSE chunks or one JSON body
 * (response.c). A client that goes away is noticed while waiting (the
 * socket reads end-of-stream), by a failed write, or when libmicrohttpd
 * frees the streaming response early; the request is then cancelled in
 * the engine, which frees its KV blocks within a step.
 *
 * The server listens before the model is loaded: /health answers 503
 * {"status":"loading"} until the engine is up, 200 {"status":"ok"} after;
 * meanwhile the routes that need the model (/v1/..., /tokenize, /detokenize)
 * answer 503 + Retry-After with the error code model_loading. A model that
 * fails to load ends server_run with 1. KVIK_TEST_LOAD_DELAY_MS (tests
 * only) delays the load by that many milliseconds.
 * Prefix cache: on unless turned off; entries are isolated per API key
 * (the bearer token's hash; one shared key without authentication) and
 * per cache_salt, unless prefix_cache_shared (docs/server.md says why).
 *
 * Deadlines: a request's headers must be complete header_timeout_s after
 * the connection opens or the previous response was sent, its body
 * body_timeout_s after the headers; a connection past one gets 408 and is
 * closed (an idle kept-alive connection is closed without a reply).
 * libmicrohttpd refuses connections beyond max_connections_per_ip from
 * one address (they are closed at once).
 *
 * SIGINT or SIGTERM drains: the listening socket closes, new requests on
 * open connections get 503, running ones finish (until drain_timeout_s,
 * then they are cancelled), and server_run returns 0.
 */
#ifndef KVIK_SERVER_H
#define KVIK_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct server_config {
    const char *model_path;
    const char *model_name;  /* NULL: the file name without .gguf */
    const char *host;        /* "127.0.0.1" */
    int port;                /* 8080; 0: any free port (printed) */
    const char *api_key;     /* NULL: no authentication; else one key or several separated by
                                commas (a comma is never part of a bearer token) */
    const char *chat_template; /* NULL: the model's */
    int n_threads;
    int n_ctx;               /* 0: engine_default_ctx (the model's, at most 8192) */
    int64_t kv_mem_mib;      /* 0: see ctx_total */
    int64_t ctx_total;       /* KV pool in tokens (0: the engine's default) */
    int kv_type;             /* TENSOR_TYPE_F16, _Q8_0 or _F32 */
    int max_seqs, max_batch_tokens, max_queue; /* 0: the engine's defaults */
    int prefill_chunk;       /* prompt tokens per step while sequences decode; 0: no cap (default: the engine's) */
    size_t max_body;         /* request body limit in bytes */
    double drain_timeout_s;  /* how long running requests may finish on shutdown */
    int max_connections;     /* concurrent HTTP connections */
    int max_connections_per_ip; /* concurrent connections from one address (128; 0: no limit) */
    double header_timeout_s; /* a request's headers must arrive within this (10) */
    double body_timeout_s;   /* its body within this of the headers (30) */
    bool prefix_cache;       /* reuse cached KV blocks of earlier requests (default on) */
    bool prefix_cache_shared; /* cached blocks shared across API keys (default: per key) */
    int spec_mode;           /* enum spec_mode: speculative decoding (SPEC_NONE) */
    const char *model_draft; /* SPEC_DRAFT: the draft model's path */
    int spec_max, spec_ngram; /* 0: the engine's defaults */
    const char *embedding_model; /* an encoder GGUF served on /v1/embeddings (NULL: none, unless
                                    model_path is itself an encoder: then it serves embeddings alone) */
    int embedding_threads;   /* the encoder's thread pool (0: 1); also the cross-encoder's */
    const char *rerank_model; /* a cross-encoder GGUF that answers /v1/rerank (NULL: the chat model
                                 judges; model_path may itself be one: then it reranks alone) */
    const char *data_dir;    /* files and vector stores are kept here (NULL: in memory) */
    size_t max_file;         /* the largest file upload in bytes (64 MiB) */
    bool semantic_cache;     /* answer chat requests from the semantic cache (needs an embedding model) */
    float semcache_threshold; /* least cosine of a hit */
    double semcache_ttl_s;   /* an entry's life in seconds */
    int64_t semcache_max;    /* entries at most */
    bool semcache_no_guard;  /* hits by cosine alone (measurement only: near misses get through) */
};

/* The semantic cache's default least cosine (docs/retrieval.md: with the
 * content-word guard, the lowest at which at most 1% of the hits on the
 * labelled pairs were wrong). */
#define SERVER_SEMCACHE_THRESHOLD 0.80f

struct server_config server_config_default(void);

/* Runs until SIGINT/SIGTERM; the process exit status (0 after a clean
 * drain, 1 if the server could not start). Errors are one line on stderr. */
int server_run(const struct server_config *cfg);

#endif /* KVIK_SERVER_H */
