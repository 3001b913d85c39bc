/*
 * http.c — the HTTP side of `kvik serve` on GNU libmicrohttpd (see
 * server.h): routes, authentication, body limits, streaming, client
 * disconnects, start-up and graceful shutdown.
 *
 * Routes:
 *   GET  /                       the chat page (page.h; it asks for the API key itself)
 *   GET  /health                 200 {"status":"ok"}, 503 while loading or draining
 *   GET  /metrics                Prometheus text (metrics.c; kvik_server_ready 0 while loading)
 *   GET  /v1/models[/{id}]       the served model
 *   POST /v1/chat/completions    chat, streaming or not
 *   POST /v1/completions         text completion, streaming or not
 *   POST /v1/embeddings          vectors of texts or token arrays (with an embedding model)
 *   POST /tokenize, /detokenize  text <-> token ids
 *   GET  /tokenizer_info         the special tokens' text (vLLM's route; lm-evaluation-harness's
 *                                remote tokenizer reads it)
 *   /v1/files..., /v1/vector_stores...  OpenAI's Files and Vector Stores (stores.h; with an
 *                                embedding model), each API key its own tenant
 *   POST /v1/rerank, /rerank     relevance of documents to a query (a cross-encoder, or the
 *                                chat model judging: engine/rerank.h), in the shape of llama.cpp's and Jina's
 * With an API key, every route but /, /health and /metrics needs
 * "Authorization: Bearer KEY" (compared in constant time), and any path
 * under /v1 answers 401 before 404 or 405 without it. The others
 * answer 503 with an OpenAI error object and Retry-After while the model
 * loads (code model_loading) or the server drains.
 *
 * Before routing, the header fields are checked (http_check.h): framing
 * that a proxy could read differently (two Content-Lengths, one with
 * Transfer-Encoding, a coding other than chunked) and control bytes get
 * 400 or 501. Each request has a header and a body deadline (watchdog.h);
 * a connection past one gets 408 and is closed. A client may hold at most
 * max_connections_per_ip connections.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "engine/embedder.h"
#include "engine/engine.h"
#include "engine/rerank.h"
#include "model/encoder.h"
#include "model/model.h"
#include "server/http_check.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/page.h"
#include "server/request.h"
#include "server/constrain.h"
#include "server/response.h"
#include "server/semantic.h"
#include "server/server.h"
#include "server/stores.h"
#include "server/watchdog.h"
#include "retrieval/kb.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

enum { SRV_LOADING, SRV_READY, SRV_DRAINING };

struct server {
    struct server_config cfg;
    struct MHD_Daemon *daemon;
    struct watchdog *watch;  /* header and body deadlines */
    char *reply_413;         /* a raw 413 for a body that goes on past twice the limit */
    _Atomic int state;
    struct model *model;
    struct model *draft;     /* --model-draft, NULL without */
    struct tokenizer *tok;   /* the chat model's (NULL: embeddings only) */
    const struct tokenizer *vocab; /* /tokenize's: the chat model's, else the encoder's */
    struct encoder *enc;     /* the embedding model (NULL: none) */
    struct embedder *emb;
    struct kb *kb;           /* files and vector stores (with an embedding model) */
    struct reranker *rerank; /* the cross-encoder, else the chat model, as a reranker (NULL: none) */
    struct encoder *renc;    /* the cross-encoder (NULL: none) */
    struct embedder *remb;
    char rerank_name[256];
    struct semcache *semcache; /* --semantic-cache (NULL: off) */
    struct stores *stores;
    char emb_name[256];
    int emb_ctx;             /* its positions */
    struct chat_format fmt;
    bool have_fmt;
    enum toolcall_style tool_style; /* how the template asks for tool calls (NONE: it has no tools) */
    struct grammar_vocab *gvocab; /* the vocabulary as the grammar matcher's trie */
    struct grammar_pool *gpool;   /* compiled grammars of recent requests */
    bool chat_strip_space; /* the vocabulary writes a space before words (SentencePiece) */
    struct engine *engine;
    int32_t *eog;          /* [n_eog] end-of-generation ids for the engine */
    int n_eog;
    int n_ctx;
    int64_t pool_tokens;   /* positions the whole KV pool holds (one sequence's ceiling) */
    char name[256];
    int64_t created;
    _Atomic uint64_t rejected[METRICS_REJECT_COUNT];
    _Atomic uint64_t http_requests;
    _Atomic int inflight;  /* generation responses not yet finished */
};

enum route {
    ROUTE_NONE,
    ROUTE_PAGE,
    ROUTE_HEALTH,
    ROUTE_METRICS,
    ROUTE_MODELS,
    ROUTE_MODEL,
    ROUTE_CHAT,
    ROUTE_COMPLETIONS,
    ROUTE_TOKENIZE,
    ROUTE_DETOKENIZE,
    ROUTE_TOKENIZER_INFO,
    ROUTE_EMBEDDINGS,
    ROUTE_STORES,
    ROUTE_RERANK,
};

/* Per HTTP request, kept by libmicrohttpd between calls of the handler. */
struct conn_state {
    enum route route;
    bool needs_model;    /* answered 503 unless the server is ready */
    struct sbuf body;
    size_t limit;        /* the body's limit: max_body, or an upload's */
    bool too_big;
    size_t dropped;      /* body bytes read and thrown away past the limit */
};

struct server_config server_config_default(void) {
    return (struct server_config){
        .host = "127.0.0.1",
        .port = 8080,
        .n_threads = 1,
        .kv_type = TENSOR_TYPE_F16,
        .max_body = API_MAX_BODY_DEFAULT,
        .max_file = (size_t)64 << 20,
        .semcache_threshold = SERVER_SEMCACHE_THRESHOLD,
        .semcache_ttl_s = 3600,
        .semcache_max = 10000,
        .drain_timeout_s = 30,
        .max_connections = 512,
        .max_connections_per_ip = 128,
        .header_timeout_s = 10,
        .body_timeout_s = 30,
        .prefill_chunk = engine_config_default().prefill_chunk,
        .prefix_cache = true,
    };
}

/* ---- replies ---------------------------------------------------------- */

/* The connection's deadlines (NULL: none). */
static struct watch_conn *conn_watch(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static enum MHD_Result reply_hdr(struct server *s, struct MHD_Connection *conn, unsigned status,
                                 const char *ctype, char *body, size_t len, bool retry_after, const char *cache,
                                 const char *nearest) {
    if (!watchdog_answer(s->watch, conn_watch(conn))) { /* cut at a deadline: it got its 408 */
        free(body);
        return MHD_NO;
    }
    atomic_fetch_add(&s->http_requests, 1);
    struct MHD_Response *r;
    if (body) {
        r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    } else {
        static const char oom[] = "{\"error\":{\"message\":\"The server ran out of memory.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        status = 500;
        ctype = "application/json";
        r = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    }
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    if (retry_after) MHD_add_response_header(r, "Retry-After", "1");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (cache) MHD_add_response_header(r, "X-Kvik-Cache", cache);
    if (nearest && nearest[0]) MHD_add_response_header(r, "X-Kvik-Cache-Nearest", nearest);
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply(struct server *s, struct MHD_Connection *conn, unsigned status, const char *ctype,
                             char *body, size_t len, bool retry_after) {
    return reply_hdr(s, conn, status, ctype, body, len, retry_after, NULL, NULL);
}

static enum MHD_Result reply_json(struct server *s, struct MHD_Connection *conn, unsigned status, json_t *root) {
    char *body = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return reply(s, conn, status, "application/json", body, body ? strlen(body) : 0, false);
}

static enum MHD_Result reply_error(struct server *s, struct MHD_Connection *conn,
                                   const struct api_error *e, enum metrics_reject why) {
    if ((unsigned)why < METRICS_REJECT_COUNT) atomic_fetch_add(&s->rejected[why], 1);
    char *body = api_error_json(e);
    bool retry = e->status == 503;
    return reply(s, conn, (unsigned)e->status, "application/json", body, body ? strlen(body) : 0, retry);
}

static enum MHD_Result reply_unavailable(struct server *s, struct MHD_Connection *conn) {
    struct api_error e;
    bool loading = atomic_load(&s->state) == SRV_LOADING;
    api_fail(&e, 503, "server_error", loading ? "model_loading" : "server_shutting_down", NULL,
             loading ? "The model is still loading; retry shortly." : "The server is shutting down.");
    return reply_error(s, conn, &e, loading ? METRICS_REJECT_LOADING : METRICS_REJECT_DRAINING);
}

/* ---- authentication --------------------------------------------------- */

/* The token of "Authorization: Bearer TOKEN" (the whole value, control
 * bytes having been refused by http_check_fields); NULL if none. */
static const char *bearer_token(struct MHD_Connection *conn, size_t *len) {
    const char *h = NULL;
    size_t hl = 0;
    if (MHD_lookup_connection_value_n(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION,
                                      strlen(MHD_HTTP_HEADER_AUTHORIZATION), &h, &hl) != MHD_YES || !h)
        return NULL;
    const char *t;
    return http_bearer_token(h, hl, &t, len) ? t : NULL;
}

/* The token is one of the comma-separated keys (each one compared; an
 * empty key matches nothing). */
static bool authorized(const struct server *s, struct MHD_Connection *conn) {
    if (!s->cfg.api_key) return true;
    size_t tl = 0;
    const char *t = bearer_token(conn, &tl);
    if (!t) return false;
    bool ok = false;
    for (const char *k = s->cfg.api_key;;) {
        size_t n = strcspn(k, ",");
        ok |= n > 0 && http_key_equal(t, tl, k, n);
        if (!k[n]) break;
        k += n + 1;
    }
    return ok;
}

/* The prefix cache isolation key of an authorized request: the hash of its
 * API key unless the cache is shared across keys (no authentication: one
 * key for all), narrowed by its cache_salt. */
static uint64_t cache_key(const struct server *s, struct MHD_Connection *conn, const char *salt) {
    uint64_t k = 0;
    size_t tl = 0;
    const char *t = s->cfg.api_key && !s->cfg.prefix_cache_shared ? bearer_token(conn, &tl) : NULL;
    if (t) k = hash64(t, tl, 1);
    if (salt) k = hash64_pair(k, hash64(salt, strlen(salt), 2));
    return k;
}

/* ---- waiting on a job ------------------------------------------------- */

/* True when the client closed its end (or the socket failed). */
static bool peer_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) { /* a pipelined request, or end-of-stream */
        char c;
        ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0;
    }
    return false;
}

/* With j->mu held: waits up to ms for an event. Every ms or so (events may
 * come faster than that) it looks at the socket: false when the client has
 * gone away. *checked is the clock_ns() of the last look. */
static bool job_wait(struct job *j, struct MHD_Connection *conn, int ms, int64_t *checked) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    int64_t now = clock_ns();
    if (now - *checked < (int64_t)ms * 1000000) return true;
    *checked = now;
    return !peer_gone(conn);
}

/* ---- streaming responses --------------------------------------------- */

struct stream {
    struct server *s;
    struct job *j;
    struct MHD_Connection *conn;
    struct resp_ctx rc;
    char *echo;          /* owned copy of rc.echo */
    char *prefill;       /* owned: rc.prefill */
    char *tools;         /* owned: rc.tools_json */
    struct sbuf out;
    size_t out_pos;
    bool finished;
    int64_t checked;     /* when the socket was last looked at */
    float *cache_vec;    /* the question's embedding when the answer goes to the semantic cache */
    char *cache_q;       /* and the question */
    size_t cache_qlen;
    uint8_t cache_key[SEMCACHE_KEY];
};

/* Stores a finished job's single choice in the semantic cache (when it ended by
 * stop or length). Takes j->mu. */
static void cache_answer(struct server *s, struct stream *st) {
    struct job *j = st->j;
    char *entry = NULL;
    size_t len = 0;
    pthread_mutex_lock(&j->mu);
    const struct job_choice *c = &j->ch[0];
    if (job_all_done(j) && (c->finish == ENGINE_FINISH_STOP || c->finish == ENGINE_FINISH_LENGTH))
        entry = semantic_entry(c->text ? c->text : "", c->len, resp_finish_reason(c->finish), c->n_generated, &len);
    pthread_mutex_unlock(&j->mu);
    if (entry) semcache_put(s->semcache, st->cache_key, st->cache_vec, st->cache_q, st->cache_qlen, clock_ns(), entry, len);
    free(entry);
    free(st->cache_vec);
    free(st->cache_q);
    st->cache_vec = NULL;
    st->cache_q = NULL;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct stream *st = cls;
    while (st->out_pos == st->out.len) {
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        st->out.len = st->out_pos = 0;
        struct job *j = st->j;
        struct resp_step step;
        pthread_mutex_lock(&j->mu);
        while (!resp_stream_take(&st->rc, j, &step)) {
            resp_step_free(&step);
            if (!job_wait(j, st->conn, 100, &st->checked)) {
                pthread_mutex_unlock(&j->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR; /* stream_free cancels */
            }
        }
        pthread_mutex_unlock(&j->mu);
        /* the JSON is built without the lock: the engine thread never waits on it */
        resp_stream_render(&st->rc, &step, &st->out);
        st->finished = step.complete;
        resp_step_free(&step);
        if (st->finished && st->cache_vec) cache_answer(st->s, st);
        if (st->out.failed) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->out.len - st->out_pos;
    if (n > max) n = max;
    memcpy(buf, st->out.p + st->out_pos, n);
    st->out_pos += n;
    return (ssize_t)n;
}

/* libmicrohttpd is done with the response: sent, or the client went away. */
static void stream_free(void *cls) {
    struct stream *st = cls;
    struct job *j = st->j;
    pthread_mutex_lock(&j->mu);
    bool done = job_all_done(j);
    uint64_t id = j->id;
    pthread_mutex_unlock(&j->mu);
    if (!done) engine_cancel(st->s->engine, id);
    job_release(j);
    atomic_fetch_sub(&st->s->inflight, 1);
    sbuf_free(&st->out);
    free(st->echo);
    free(st->prefill);
    free(st->tools);
    free(st->cache_vec);
    free(st->cache_q);
    free(st);
}

/* ---- /v1/chat/completions and /v1/completions ------------------------- */

/* The prompt text for echo (completions): the text given, or the ids' text. */
static char *echo_text(const struct server *s, const struct api_request *req, size_t *len) {
    if (req->prompt) {
        char *t = malloc(req->prompt_len + 1);
        if (t) memcpy(t, req->prompt, req->prompt_len + 1);
        *len = req->prompt_len;
        return t;
    }
    int64_t n = tokenizer_decode(s->tok, req->prompt_ids, req->n_prompt_ids, NULL, 0, false);
    if (n < 0) return NULL;
    char *raw = malloc((size_t)n + 1);
    if (!raw) return NULL;
    tokenizer_decode(s->tok, req->prompt_ids, req->n_prompt_ids, raw, (size_t)n + 1, false);
    char *t = api_utf8_sanitize(raw, (size_t)n, len);
    free(raw);
    return t;
}

/* How starting one prompt's job failed (start_job). */
enum start_result { START_OK, START_ERROR, START_NOMEM, START_UNAVAILABLE };

/* Prepares one prompt of req (tokens, echo, job) and submits it to the
 * engine; *out is its stream state, the job running. On failure e and
 * *why say what to answer (START_ERROR), or nothing was started. */
/* The request's grammar as a constraint of n choices (*out NULL when it
 * has none); false with e set when it does not compile. */
static bool request_constraint(struct server *s, const struct api_request *req, struct constrain **out,
                               struct api_error *e) {
    *out = NULL;
    bool forced = req->tools_json && (req->tool_choice == API_TOOLS_REQUIRED || req->tool_choice == API_TOOLS_NAMED);
    if (req->grammar_kind == API_GRAMMAR_NONE && !forced) return true;
    struct kvik_err err = {0};
    const char *param = req->grammar_kind == API_GRAMMAR_GBNF ? "grammar" : "response_format";
    int kind = req->grammar_kind == API_GRAMMAR_JSON_SCHEMA ? GRAMMAR_TEXT_SCHEMA : GRAMMAR_TEXT_GBNF;
    const char *text = req->grammar_kind == API_GRAMMAR_JSON_OBJECT ? grammar_json_object_gbnf() : req->grammar;
    char *tools_text = NULL;
    if (forced) { /* the call's rest, its arguments held to the function's schema */
        if (req->grammar_kind != API_GRAMMAR_NONE)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", "tool_choice",
                            "A forced tool call ('required' or a named function) cannot take a grammar or a "
                            "response_format too.");
        const char *name = req->tool_choice == API_TOOLS_NAMED ? req->tool_name : "*";
        size_t n = strlen(req->tools_json) + strlen(name) + 16;
        if (!(tools_text = malloc(n))) return api_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
        snprintf(tools_text, n, "%s %s\n%s", s->tool_style == TOOLCALL_LLAMA3 ? "llama3" : "hermes", name,
                 req->tools_json);
        kind = GRAMMAR_TEXT_TOOLS;
        text = tools_text;
        param = "tools";
    }
    *out = constrain_new(s->gpool, kind, text, s->gvocab, req->n, &err);
    free(tools_text);
    if (*out) return true;
    if (err.code == KVIK_ERR_NOMEM) return api_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    return api_fail(e, 400, "invalid_request_error",
                    err.code == KVIK_ERR_UNSUPPORTED ? "unsupported_value" : "invalid_value", param, "Invalid '%s': %s.",
                    param, err.msg);
}

/* With tool_choice required or a named function, the start of a call is
 * written into the prompt (Hermes: "<tool_call>\n{\"name\": \"", Llama 3:
 * "{\"name\": \"", the name and the arguments' key after it when named):
 * its text into *prefill (malloc'd, "" when none), its ids after the
 * prompt's. The tool name is data: its special-token text is not parsed. */
static bool add_prefill(struct server *s, const struct api_request *req, struct api_prompt *pr, char **prefill,
                        struct api_error *e) {
    *prefill = NULL;
    bool forced = req->tools_json && (req->tool_choice == API_TOOLS_REQUIRED || req->tool_choice == API_TOOLS_NAMED);
    if (!forced) return (*prefill = strdup("")) != NULL;
    bool hermes = s->tool_style == TOOLCALL_HERMES;
    const char *open = hermes ? "<tool_call>\n" : "";
    struct strbuf data = {0};
    if (req->tool_choice == API_TOOLS_NAMED) {
        strbuf_puts(&data, "{\"name\": ");
        strbuf_json(&data, req->tool_name);
        strbuf_puts(&data, hermes ? ", \"arguments\": " : ", \"parameters\": ");
    } else {
        strbuf_puts(&data, "{\"name\": \"");
    }
    int32_t buf[512];
    int64_t a = tokenizer_encode(s->tok, open, strlen(open), false, true, buf, 256);
    int64_t b = a >= 0 && a <= 256 ? tokenizer_encode(s->tok, data.p ? data.p : "", data.n, false, false, buf + a, 256) : -1;
    int32_t *ids = b >= 0 && b <= 256 ? realloc(pr->ids, ((size_t)pr->n + (size_t)(a + b) + 1) * sizeof *ids) : NULL;
    if (ids) {
        memcpy(ids + pr->n, buf, (size_t)(a + b) * sizeof *ids);
        pr->ids = ids;
        pr->n += (int)(a + b);
        if (pr->max_tokens > 1 && pr->max_tokens + pr->n > s->n_ctx) pr->max_tokens = s->n_ctx - pr->n;
        size_t ol = strlen(open);
        if ((*prefill = malloc(ol + data.n + 1))) {
            memcpy(*prefill, open, ol);
            memcpy(*prefill + ol, data.p ? data.p : "", data.n);
            (*prefill)[ol + data.n] = 0;
        }
    }
    free(data.p);
    if (!ids || !*prefill || pr->n + 1 > s->n_ctx) {
        free(*prefill);
        *prefill = NULL;
        return api_fail(e, ids ? 400 : 500, ids ? "invalid_request_error" : "server_error",
                        ids ? "context_length_exceeded" : NULL, NULL,
                        ids ? "The prompt is too long." : "Out of memory.");
    }
    return true;
}

static enum start_result start_job(struct server *s, struct MHD_Connection *conn, const struct api_request *req,
                                   struct stream **out, struct api_error *e, enum metrics_reject *why) {
    *out = NULL;
    enum api_route route = req->route;
    struct api_prompt pr;
    bool tools = req->tools_json && req->tool_choice != API_TOOLS_NONE;
    if (tools && (!s->have_fmt || !s->fmt.jinja || s->tool_style == TOOLCALL_NONE)) {
        api_fail(e, 400, "invalid_request_error", "model_not_supported", "tools",
                 "The model's chat template does not say how it calls tools (kvik reads Hermes/Qwen2.5 "
                 "<tool_call> blocks and Llama 3 JSON calls).");
        *why = METRICS_REJECT_INVALID;
        return START_ERROR;
    }
    char *prefill = NULL;
    struct constrain *cons = NULL;
    if (!api_prepare(req, s->tok, s->have_fmt ? &s->fmt : NULL, s->n_ctx, &pr, e) ||
        !add_prefill(s, req, &pr, &prefill, e) || !request_constraint(s, req, &cons, e)) {
        bool ctx = e->code && !strcmp(e->code, "context_length_exceeded");
        *why = ctx ? METRICS_REJECT_CONTEXT : METRICS_REJECT_INVALID;
        api_prompt_free(&pr);
        free(prefill);
        return START_ERROR;
    }
    /* no max_tokens: the rest of the context, as far as the KV pool reaches */
    if (!req->max_tokens && !req->score_only && s->pool_tokens > 0 && pr.max_tokens > s->pool_tokens - pr.n)
        pr.max_tokens = s->pool_tokens - pr.n > 1 ? (int)(s->pool_tokens - pr.n) : 1;
    struct stream *st = calloc(1, sizeof *st);
    struct job *j = job_new(s->tok, req->n, req->logprobs, req->stop, req->n_stop,
                            route == API_ROUTE_CHAT && s->chat_strip_space);
    if (j && cons) j->owned = cons, j->owned_free = (void (*)(void *))constrain_free;
    else constrain_free(cons);
    if (!st || !j) {
        free(st);
        free(prefill);
        if (j) job_engine_gone(j), job_release(j);
        api_prompt_free(&pr);
        return START_NOMEM;
    }
    st->s = s;
    st->j = j;
    st->conn = conn;
    resp_ctx_init(&st->rc, route, s->name);
    st->prefill = prefill;
    st->rc.prefill = prefill;
    st->rc.tool_style = tools ? s->tool_style : TOOLCALL_NONE;
    st->rc.parallel_tools = req->parallel_tool_calls;
    if (tools && !(st->tools = strdup(req->tools_json))) {
        free(st->prefill);
        free(st);
        job_engine_gone(j), job_release(j);
        api_prompt_free(&pr);
        return START_NOMEM;
    }
    st->rc.tools_json = st->tools;
    st->rc.include_usage = req->include_usage;
    st->rc.top_logprobs = req->top_logprobs;
    st->rc.n_prompt = pr.n;
    if (req->echo) {
        st->echo = echo_text(s, req, &st->rc.echo_len);
        st->rc.echo = st->echo ? st->echo : "";
        if (!st->echo) st->rc.echo_len = 0;
    }
    /* echo with logprobs, or a prompt only scored: the engine scores every prompt position */
    bool prompt_lp = req->echo && (req->logprobs || req->score_only);
    if (prompt_lp && !job_set_prompt(j, pr.ids, pr.n, st->rc.echo_len)) {
        job_engine_gone(j), job_release(j);
        free(st->echo);
        free(st->prefill);
        free(st->tools);
        free(st);
        api_prompt_free(&pr);
        return START_NOMEM;
    }
    struct engine_request er = {
        .prompt = pr.ids,
        .n_prompt = pr.n,
        .max_tokens = pr.max_tokens,
        .n = req->n,
        .sampling = req->sp,
        .top_logprobs = req->logprobs ? req->top_logprobs : prompt_lp ? 0 : -1,
        .prompt_logprobs = prompt_lp,
        .ignore_eos = req->ignore_eos,
        .constraint = j->owned ? constrain_engine(j->owned) : NULL,
        .cache_key = cache_key(s, conn, req->cache_salt),
        .on_event = job_on_event,
        .user = j,
    };
    struct kvik_err kerr = {0};
    uint64_t id = 0;
    atomic_fetch_add(&s->inflight, 1);
    kvik_status kst = engine_submit(s->engine, &er, &id, &kerr);
    api_prompt_free(&pr);
    if (kst != KVIK_OK) {
        job_engine_gone(j);
        job_release(j);
        free(st->echo);
        free(st->prefill);
        free(st->tools);
        free(st);
        atomic_fetch_sub(&s->inflight, 1);
        if (kst == KVIK_ERR_BUSY) {
            if (atomic_load(&s->state) == SRV_DRAINING) return START_UNAVAILABLE;
            api_fail(e, 503, "server_error", "server_overloaded", NULL, "The server is busy (%s); retry shortly.",
                     kerr.msg[0] ? kerr.msg : "queue full");
            *why = METRICS_REJECT_QUEUE_FULL;
            return START_ERROR;
        }
        api_fail(e, kst == KVIK_ERR_INVALID_ARG ? 400 : 500,
                 kst == KVIK_ERR_INVALID_ARG ? "invalid_request_error" : "server_error", NULL, NULL, "%s",
                 kerr.msg[0] ? kerr.msg : kvik_status_string(kst));
        *why = METRICS_REJECT_INVALID;
        return START_ERROR;
    }
    pthread_mutex_lock(&j->mu);
    j->id = id;
    pthread_mutex_unlock(&j->mu);
    *out = st;
    return START_OK;
}

/* Prompt i of a completions batch as a request of its own (shares req's
 * strings; never freed). */
static struct api_request batch_prompt(const struct api_request *req, int i) {
    struct api_request one = *req;
    if (i > 0) {
        const struct api_more_prompt *m = &req->more[i - 1];
        one.prompt = m->prompt;
        one.prompt_len = m->prompt_len;
        one.prompt_ids = m->prompt_ids;
        one.n_prompt_ids = m->n_prompt_ids;
    }
    one.more = NULL;
    one.n_more = 0;
    return one;
}

/* The whole responses of a batch's prompts as one: prompt i's choice c is
 * choice i * n + c (OpenAI's order), usage summed. Takes the bodies. */
static char *merge_bodies(char **bodies, int k, int n) {
    json_error_t je;
    json_t *root = NULL, *choices = json_array();
    json_int_t sums[4] = {0}; /* prompt, completion, total, cached */
    bool ok = choices != NULL;
    for (int i = 0; i < k && ok; i++) {
        json_t *b = bodies[i] ? json_loads(bodies[i], 0, &je) : NULL;
        json_t *ch = json_object_get(b, "choices"), *u = json_object_get(b, "usage");
        ok = b && json_is_array(ch);
        for (size_t c = 0; ok && c < json_array_size(ch); c++) {
            json_t *x = json_array_get(ch, c);
            json_object_set_new(x, "index", json_integer((json_int_t)i * n + (json_int_t)c));
            json_array_append(choices, x);
        }
        sums[0] += json_integer_value(json_object_get(u, "prompt_tokens"));
        sums[1] += json_integer_value(json_object_get(u, "completion_tokens"));
        sums[2] += json_integer_value(json_object_get(u, "total_tokens"));
        sums[3] += json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
        if (i == 0) root = b;
        else json_decref(b);
    }
    char *out = NULL;
    if (ok) {
        json_t *u = json_object_get(root, "usage");
        json_object_set_new(u, "prompt_tokens", json_integer(sums[0]));
        json_object_set_new(u, "completion_tokens", json_integer(sums[1]));
        json_object_set_new(u, "total_tokens", json_integer(sums[2]));
        json_object_set_new(json_object_get(u, "prompt_tokens_details"), "cached_tokens", json_integer(sums[3]));
        json_object_set(root, "choices", choices);
        out = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9)); /* as response.c prints */
    }
    json_decref(choices);
    json_decref(root);
    for (int i = 0; i < k; i++) free(bodies[i]);
    return out;
}

static kvik_status kb_embed(void *ctx, int n, const char *const *texts, const size_t *lens, float *out,
                            struct kvik_err *err);

/* What the semantic cache said of a chat request. */
struct cache_look {
    const char *header; /* X-Kvik-Cache: "hit", "miss", "bypass"; NULL without the cache */
    float *vec;         /* a miss: the question's embedding (owned), to store the answer under */
    char *q;            /* and the question (owned) */
    size_t qlen;
    uint8_t key[SEMCACHE_KEY];
    char probe[96];     /* X-Kvik-Cache-Nearest: the nearest entry's cosine and match; "" if none */
};

/* Looks req up in the semantic cache. On a hit the answer is sent (*ret)
 * and true returned; else *look says how to go on. */
static bool semantic_lookup(struct server *s, struct MHD_Connection *conn, const struct api_request *req,
                            struct cache_look *look, enum MHD_Result *ret) {
    *look = (struct cache_look){.header = "bypass"};
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Kvik-Cache");
    enum semantic_mode mode = semantic_mode_of(h);
    if (mode == SEMANTIC_BAD) {
        struct api_error e;
        api_fail(&e, 400, "invalid_request_error", "invalid_value", NULL,
                 "The X-Kvik-Cache header must be on, off or sampled.");
        *ret = reply_error(s, conn, &e, METRICS_REJECT_INVALID);
        return true;
    }
    if (!semantic_eligible(req, mode)) return false;
    uint8_t tenant[16] = {0};
    size_t tl = 0;
    const char *t = s->cfg.api_key ? bearer_token(conn, &tl) : NULL;
    if (t) {
        struct kb_tenant kt;
        kb_tenant_of(t, tl, &kt);
        memcpy(tenant, kt.h, sizeof tenant);
    }
    semantic_key(req, tenant, s->name, s->model->identity, s->have_fmt ? chat_template_name(s->fmt.tmpl) : "",
                 look->key);
    size_t ql;
    const char *q = semantic_question(req, &ql);
    int dim = encoder_hparams(s->enc)->n_embd;
    struct kvik_err err = {0};
    if (!(look->vec = malloc((size_t)dim * sizeof *look->vec)) || kb_embed(s, 1, &q, &ql, look->vec, &err)) {
        free(look->vec);
        look->vec = NULL;
        return false; /* bypassed: the request is served as usual */
    }
    char *entry;
    size_t len;
    struct semcache_probe pb;
    look->header = "miss";
    bool hit = semcache_get(s->semcache, look->key, look->vec, q, ql, clock_ns(), &entry, &len, &pb);
    if (pb.sim > -2.0f)
        snprintf(look->probe, sizeof look->probe, "cosine=%.4f; words=%s", (double)pb.sim, pb.same ? "same" : "different");
    if (!hit) {
        if ((look->q = malloc(ql + 1))) memcpy(look->q, q, ql + 1), look->qlen = ql;
        else free(look->vec), look->vec = NULL;
        return false;
    }
    struct api_prompt pr;
    struct api_error e;
    int n_prompt = api_prepare(req, s->tok, s->have_fmt ? &s->fmt : NULL, s->n_ctx, &pr, &e) ? pr.n : 0;
    if (n_prompt) api_prompt_free(&pr);
    size_t blen = 0;
    char *body = semantic_reply(entry, len, s->name, n_prompt, req->stream, req->include_usage, &blen);
    free(entry);
    free(look->vec);
    look->vec = NULL;
    *ret = reply_hdr(s, conn, MHD_HTTP_OK, req->stream ? "text/event-stream" : "application/json", body, blen, false,
                     "hit", look->probe);
    return true;
}

static enum MHD_Result handle_generate(struct server *s, struct MHD_Connection *conn, struct conn_state *cs) {
    enum api_route route = cs->route == ROUTE_CHAT ? API_ROUTE_CHAT : API_ROUTE_COMPLETIONS;
    struct api_error e = {0};
    struct api_request req;
    if (!s->engine) {
        api_fail(&e, 400, "invalid_request_error", "model_not_supported", "model",
                 "The model '%s' is an embedding model; it does not generate text (use /v1/embeddings).",
                 s->emb_name);
        return reply_error(s, conn, &e, METRICS_REJECT_INVALID);
    }
    if (!api_parse_request(route, cs->body.p, cs->body.len, s->cfg.max_body, &req, &e))
        return reply_error(s, conn, &e, e.status == 413 ? METRICS_REJECT_TOO_LARGE : METRICS_REJECT_INVALID);
    struct cache_look look = {0};
    if (s->semcache && route == API_ROUTE_CHAT) {
        enum MHD_Result ret;
        if (semantic_lookup(s, conn, &req, &look, &ret)) {
            api_request_free(&req);
            return ret;
        }
    }
    /* a completions batch: one job per prompt (not streamed: request.c refuses that) */
    int k = 1 + req.n_more, n = req.n;
    struct stream **sts = calloc((size_t)k, sizeof *sts);
    enum start_result sr = sts ? START_OK : START_NOMEM;
    enum metrics_reject why = METRICS_REJECT_INVALID;
    for (int i = 0; i < k && sr == START_OK; i++) {
        struct api_request one = batch_prompt(&req, i);
        sr = start_job(s, conn, &one, &sts[i], &e, &why);
    }
    bool stream = req.stream;
    api_request_free(&req);
    if (sr == START_OK && look.vec) { /* the answer goes to the cache when it is complete */
        sts[0]->cache_vec = look.vec;
        sts[0]->cache_q = look.q;
        sts[0]->cache_qlen = look.qlen;
        memcpy(sts[0]->cache_key, look.key, sizeof look.key);
        look.vec = NULL;
        look.q = NULL;
    }
    free(look.vec);
    free(look.q);
    if (sr != START_OK) {
        for (int i = 0; sts && i < k; i++)
            if (sts[i]) stream_free(sts[i]); /* cancels what started */
        free(sts);
        if (sr == START_UNAVAILABLE) return reply_unavailable(s, conn);
        if (sr == START_NOMEM) return reply(s, conn, 500, NULL, NULL, 0, false);
        return reply_error(s, conn, &e, why);
    }

    if (stream) {
        struct stream *st = sts[0];
        free(sts);
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
        if (!r) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        if (look.header) MHD_add_response_header(r, "X-Kvik-Cache", look.header);
        if (look.probe[0]) MHD_add_response_header(r, "X-Kvik-Cache-Nearest", look.probe);
        atomic_fetch_add(&s->http_requests, 1);
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
        MHD_destroy_response(r); /* stream_free runs when libmicrohttpd is done with it */
        return ret;
    }

    /* whole response: wait for every choice of every prompt, watching for the client leaving */
    char **bodies = calloc((size_t)k, sizeof *bodies);
    bool gone = false, failed = false, nomem = !bodies;
    char errmsg[200] = "";
    for (int i = 0; i < k && !gone && !failed && !nomem; i++) {
        struct job *j = sts[i]->j;
        pthread_mutex_lock(&j->mu);
        while (!job_all_done(j) && !gone) gone = !job_wait(j, conn, 100, &sts[i]->checked);
        if (!gone) {
            for (int c = 0; c < j->n; c++)
                if (j->ch[c].finish == ENGINE_FINISH_ERROR) {
                    failed = true;
                    snprintf(errmsg, sizeof errmsg, "%s", j->ch[c].error);
                }
            if (!failed) nomem = !(bodies[i] = resp_full(&sts[i]->rc, j));
        }
        pthread_mutex_unlock(&j->mu);
        if (!gone && !failed && sts[i]->cache_vec) cache_answer(s, sts[i]);
    }
    for (int i = 0; i < k; i++) stream_free(sts[i]); /* cancels if the client left or another failed */
    free(sts);
    char *body = NULL;
    if (!gone && !failed && !nomem) {
        body = k == 1 ? bodies[0] : merge_bodies(bodies, k, n);
        if (k == 1) bodies[0] = NULL;
    } else {
        for (int i = 0; bodies && i < k; i++) free(bodies[i]);
    }
    free(bodies);
    if (gone) return MHD_NO;
    if (failed) {
        api_fail(&e, 500, "server_error", NULL, NULL, "Generation failed: %s", errmsg);
        char *eb = api_error_json(&e);
        return reply(s, conn, 500, "application/json", eb, eb ? strlen(eb) : 0, false);
    }
    return reply_hdr(s, conn, MHD_HTTP_OK, "application/json", body, body ? strlen(body) : 0, false, look.header,
                     look.probe);
}

/* ---- the other routes -------------------------------------------------- */

static enum MHD_Result handle_tokenize(struct server *s, struct MHD_Connection *conn, struct conn_state *cs) {
    struct api_error e;
    struct api_tokenize t;
    if (!api_parse_tokenize(cs->body.p, cs->body.len, s->cfg.max_body, &t, &e))
        return reply_error(s, conn, &e, e.status == 413 ? METRICS_REJECT_TOO_LARGE : METRICS_REJECT_INVALID);
    int64_t cap = (int64_t)t.len + 8;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    int64_t n = ids ? tokenizer_encode(s->vocab, t.text, t.len, t.add_special, t.parse_special, ids, cap) : KVIK_ERR_NOMEM;
    if (n > cap) { /* never for these vocabularies, but the contract allows it */
        free(ids);
        cap = n;
        ids = malloc((size_t)cap * sizeof *ids);
        n = ids ? tokenizer_encode(s->vocab, t.text, t.len, t.add_special, t.parse_special, ids, cap) : KVIK_ERR_NOMEM;
    }
    api_tokenize_free(&t);
    if (n < 0 || n > cap) {
        free(ids);
        return reply(s, conn, 500, NULL, NULL, 0, false);
    }
    json_t *root = json_object(), *arr = json_array();
    for (int64_t i = 0; i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
    free(ids);
    json_object_set_new(root, "tokens", arr);
    json_object_set_new(root, "count", json_integer(n));
    json_object_set_new(root, "max_model_len", json_integer(s->n_ctx));
    return reply_json(s, conn, MHD_HTTP_OK, root);
}

static enum MHD_Result handle_detokenize(struct server *s, struct MHD_Connection *conn, struct conn_state *cs) {
    struct api_error e;
    struct api_detokenize d;
    if (!api_parse_detokenize(cs->body.p, cs->body.len, s->cfg.max_body, &d, &e))
        return reply_error(s, conn, &e, e.status == 413 ? METRICS_REJECT_TOO_LARGE : METRICS_REJECT_INVALID);
    int32_t nv = tokenizer_n_vocab(s->vocab);
    for (int i = 0; i < d.n; i++)
        if (d.ids[i] >= nv) {
            api_fail(&e, 400, "invalid_request_error", "invalid_value", "tokens",
                     "Invalid 'tokens': token id %d is out of range (the vocabulary has %d tokens).", d.ids[i], nv);
            api_detokenize_free(&d);
            return reply_error(s, conn, &e, METRICS_REJECT_INVALID);
        }
    int64_t n = tokenizer_decode(s->vocab, d.ids, d.n, NULL, 0, true);
    char *raw = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (raw) tokenizer_decode(s->vocab, d.ids, d.n, raw, (size_t)n + 1, true);
    api_detokenize_free(&d);
    size_t len = 0;
    char *text = raw ? api_utf8_sanitize(raw, (size_t)n, &len) : NULL;
    free(raw);
    if (!text) return reply(s, conn, 500, NULL, NULL, 0, false);
    json_t *root = json_object();
    json_object_set_new(root, "content", json_stringn(text, len));
    json_object_set_new(root, "prompt", json_stringn(text, len)); /* vLLM's name */
    free(text);
    return reply_json(s, conn, MHD_HTTP_OK, root);
}

/* The text of special token id (render_special), or JSON null for -1. */
static json_t *special_json(const struct server *s, int32_t id) {
    if (id < 0 || id >= tokenizer_n_vocab(s->vocab)) return json_null();
    char buf[256];
    size_t n = job_token_bytes(s->vocab, id, buf, sizeof buf);
    size_t len;
    char *t = api_utf8_sanitize(buf, n < sizeof buf ? n : sizeof buf, &len);
    json_t *v = t ? json_stringn(t, len) : NULL;
    free(t);
    return v ? v : json_null();
}

static enum MHD_Result handle_tokenizer_info(struct server *s, struct MHD_Connection *conn) {
    json_t *root = json_object();
    json_object_set_new(root, "eos_token", special_json(s, tokenizer_eos(s->vocab)));
    json_object_set_new(root, "bos_token", special_json(s, tokenizer_bos(s->vocab)));
    json_object_set_new(root, "pad_token", json_null());
    json_object_set_new(root, "add_bos_token", json_boolean(tokenizer_add_bos(s->vocab)));
    json_object_set_new(root, "vocab_size", json_integer(tokenizer_n_vocab(s->vocab)));
    json_object_set_new(root, "max_model_len", json_integer(s->n_ctx));
    return reply_json(s, conn, MHD_HTTP_OK, root);
}

/* POST /v1/embeddings: each input tokenized as the encoder reads a text
 * (encoder_tokenize: [CLS] text [SEP], cut to the positions), or taken as
 * the ids of a text's tokens and put between [CLS] and [SEP]; all of the
 * request's inputs go to the embedder at once. */
static enum MHD_Result handle_embeddings(struct server *s, struct MHD_Connection *conn, struct conn_state *cs) {
    struct api_error e;
    if (!s->emb) {
        api_fail(&e, 400, "invalid_request_error", "model_not_supported", "model",
                 "The model '%s' does not make embeddings; start the server with --embedding-model.", s->name);
        return reply_error(s, conn, &e, METRICS_REJECT_INVALID);
    }
    struct api_embed_request r;
    if (!api_parse_embeddings(cs->body.p, cs->body.len, s->cfg.max_body, &r, &e))
        return reply_error(s, conn, &e, e.status == 413 ? METRICS_REJECT_TOO_LARGE : METRICS_REJECT_INVALID);
    const struct encoder_hparams *hp = encoder_hparams(s->enc);
    const struct tokenizer *tok = encoder_tokenizer(s->enc);
    int n = r.n, ctx = hp->n_ctx, dim = hp->n_embd;
    int32_t *ids = malloc((size_t)n * (size_t)ctx * sizeof *ids);
    const int32_t **rows = malloc((size_t)n * sizeof *rows);
    int *n_ids = malloc((size_t)n * sizeof *n_ids);
    float *out = malloc((size_t)n * (size_t)dim * sizeof *out);
    bool ok = ids && rows && n_ids && out;
    int64_t tokens = 0;
    if (!ok) api_fail(&e, 500, "server_error", NULL, NULL, "The server ran out of memory.");
    if (ok && r.dimensions && r.dimensions != dim)
        ok = api_fail(&e, 400, "invalid_request_error", "invalid_value", "dimensions",
                      "Invalid 'dimensions': the model '%s' makes vectors of %d dimensions only.", s->emb_name, dim);
    for (int i = 0; ok && i < n; i++) {
        int32_t *row = ids + (size_t)i * (size_t)ctx;
        rows[i] = row;
        if (r.texts[i]) {
            int64_t k = encoder_tokenize(s->enc, r.texts[i], r.lens[i], row, ctx);
            if (k < 0) ok = api_fail(&e, 500, "server_error", NULL, NULL, "Input %d could not be tokenized.", i);
            n_ids[i] = (int)k;
        } else if (r.n_ids[i] > ctx - 2) {
            ok = api_fail(&e, 400, "invalid_request_error", "context_length_exceeded", "input",
                          "Input %d has %d tokens; the model '%s' reads at most %d (%d positions less [CLS] and "
                          "[SEP]).", i, r.n_ids[i], s->emb_name, ctx - 2, ctx);
        } else {
            int32_t nv = tokenizer_n_vocab(tok);
            for (int t = 0; ok && t < r.n_ids[i]; t++)
                if (r.ids[i][t] >= nv)
                    ok = api_fail(&e, 400, "invalid_request_error", "invalid_value", "input",
                                  "Invalid 'input': token id %d is out of range (the vocabulary has %d tokens).",
                                  r.ids[i][t], nv);
            row[0] = tokenizer_bos(tok);
            memcpy(row + 1, r.ids[i], (size_t)r.n_ids[i] * sizeof *row);
            row[r.n_ids[i] + 1] = tokenizer_eos(tok);
            n_ids[i] = r.n_ids[i] + 2;
        }
        tokens += n_ids[i];
    }
    struct kvik_err err = {0};
    kvik_status st = ok ? embedder_embed(s->emb, n, rows, NULL, n_ids, out, &err) : KVIK_OK;
    if (ok && st)
        ok = api_fail(&e, st == KVIK_ERR_BUSY ? 503 : 500, "server_error", NULL, NULL, "Embedding failed: %s",
                      err.msg);
    char *body = ok ? resp_embeddings(out, n, dim, r.base64, s->emb_name, tokens) : NULL;
    free(ids);
    free(rows);
    free(n_ids);
    free(out);
    api_embed_request_free(&r);
    if (!ok) return reply_error(s, conn, &e, e.status == 503 ? METRICS_REJECT_DRAINING : METRICS_REJECT_INVALID);
    return reply(s, conn, MHD_HTTP_OK, "application/json", body, body ? strlen(body) : 0, false);
}

static const char *query_arg(void *ctx, const char *name) {
    return MHD_lookup_connection_value(ctx, MHD_GET_ARGUMENT_KIND, name);
}

/* /v1/files and /v1/vector_stores (stores.h), in the caller's tenant. */
static enum MHD_Result handle_stores(struct server *s, struct MHD_Connection *conn, struct conn_state *cs,
                                     const char *url, const char *method) {
    if (!s->stores) {
        struct api_error e;
        api_fail(&e, 400, "invalid_request_error", "model_not_supported", NULL,
                 "Files and vector stores need an embedding model; start the server with --embedding-model.");
        return reply_error(s, conn, &e, METRICS_REJECT_INVALID);
    }
    struct stores_request r = {.method = method, .path = url, .body = cs->body.p, .len = cs->body.len,
                               .content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"),
                               .arg = query_arg, .arg_ctx = conn};
    size_t tl = 0;
    const char *t = s->cfg.api_key ? bearer_token(conn, &tl) : NULL;
    kb_tenant_of(t, tl, &r.tenant);
    struct stores_reply out;
    stores_handle(s->stores, &r, &out);
    if (out.status >= 400 && out.status != 404) atomic_fetch_add(&s->rejected[METRICS_REJECT_INVALID], 1);
    return reply(s, conn, (unsigned)out.status, out.ctype, out.body, out.len, false);
}

static int cmp_rank(const void *a, const void *b) {
    const struct api_rank *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->index - y->index;
}

/* POST /v1/rerank: {"query", "documents": [string or {"text"}], "top_n",
 * "return_documents"} -> {"results": [{"index", "relevance_score"}], ...},
 * best first. */
static enum MHD_Result handle_rerank(struct server *s, struct MHD_Connection *conn, struct conn_state *cs) {
    struct api_error e;
    if (!s->rerank) {
        api_fail(&e, 400, "invalid_request_error", "model_not_supported", NULL,
                 "Reranking needs a cross-encoder (--rerank-model) or a chat model whose vocabulary spells yes "
                 "and no as one token each.");
        return reply_error(s, conn, &e, METRICS_REJECT_INVALID);
    }
    struct api_rerank_request r;
    if (!api_parse_rerank(cs->body.p, cs->body.len, &r, &e)) return reply_error(s, conn, &e, METRICS_REJECT_INVALID);
    float *scores = malloc((size_t)r.n * sizeof *scores);
    struct api_rank *rank = malloc((size_t)r.n * sizeof *rank);
    struct kvik_err err = {0};
    int64_t tokens = 0;
    kvik_status st = scores && rank ? reranker_score(s->rerank, r.query, r.query_len, r.n, (const char *const *)r.docs,
                                                     r.lens, scores, &tokens, &err)
                                    : err_set(&err, KVIK_ERR_NOMEM, "out of memory");
    char *body = NULL;
    if (!st) {
        for (int i = 0; i < r.n; i++) rank[i] = (struct api_rank){i, scores[i]};
        qsort(rank, (size_t)r.n, sizeof *rank, cmp_rank);
        body = resp_rerank(rank, r.top_n < r.n ? r.top_n : r.n, r.return_documents ? &r : NULL,
                           s->renc ? s->rerank_name : s->name, tokens);
    }
    free(scores);
    free(rank);
    api_rerank_request_free(&r);
    if (st) {
        api_fail(&e, st == KVIK_ERR_BUSY ? 503 : st == KVIK_ERR_INVALID_ARG ? 400 : 500,
                 st == KVIK_ERR_INVALID_ARG ? "invalid_request_error" : "server_error", NULL, NULL, "Reranking failed: %s",
                 err.msg);
        return reply_error(s, conn, &e, e.status == 503 ? METRICS_REJECT_DRAINING : METRICS_REJECT_INVALID);
    }
    return reply(s, conn, MHD_HTTP_OK, "application/json", body, body ? strlen(body) : 0, false);
}

static enum MHD_Result handle_metrics(struct server *s, struct MHD_Connection *conn) {
    struct metrics_server ms = {.ready = atomic_load(&s->state) == SRV_READY};
    for (int i = 0; i < METRICS_REJECT_COUNT; i++) ms.rejected[i] = atomic_load(&s->rejected[i]);
    ms.rejected[METRICS_REJECT_TIMEOUT] += watchdog_cuts(s->watch, WATCH_CUT_HEADERS) + watchdog_cuts(s->watch, WATCH_CUT_BODY);
    ms.rejected[METRICS_REJECT_TOO_LARGE] += watchdog_cuts(s->watch, WATCH_CUT_OTHER);
    ms.http_requests = atomic_load(&s->http_requests);
    ms.http_connections = watchdog_open_count(s->watch);
    if (s->semcache) {
        struct semcache_stats sc;
        semcache_stats(s->semcache, &sc);
        ms.semcache = true;
        ms.sc_hits = sc.hits, ms.sc_misses = sc.misses, ms.sc_inserts = sc.inserts;
        ms.sc_evictions = sc.evictions, ms.sc_expirations = sc.expirations, ms.sc_entries = sc.entries;
    }
    if (atomic_load(&s->state) != SRV_LOADING && s->gpool) { /* set by the loader before the state moves on */
        uint64_t ns = 0;
        grammar_pool_stats(s->gpool, &ms.grammar_masks, &ms.grammar_masks_ahead, &ns);
        ms.grammar_mask_seconds = (double)ns / 1e9;
    }
    struct engine_stats st;
    bool have = atomic_load(&s->state) != SRV_LOADING && s->engine;
    if (have) engine_stats(s->engine, &st);
    size_t len = 0;
    char *body = metrics_render(have ? &st : NULL, &ms, &len);
    return reply(s, conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len, false);
}

static enum MHD_Result handle_page(struct server *s, struct MHD_Connection *conn) {
    char *body = malloc(kvik_chat_page_len);
    if (!body) return reply(s, conn, 500, NULL, NULL, 0, false);
    memcpy(body, kvik_chat_page, kvik_chat_page_len);
    return reply(s, conn, MHD_HTTP_OK, "text/html; charset=utf-8", body, kvik_chat_page_len, false);
}

static enum MHD_Result handle_health(struct server *s, struct MHD_Connection *conn) {
    int state = atomic_load(&s->state);
    const char *status = state == SRV_READY ? "ok" : state == SRV_LOADING ? "loading" : "draining";
    json_t *root = json_object();
    json_object_set_new(root, "status", json_string(status));
    return reply_json(s, conn, state == SRV_READY ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, root);
}

/* The served models: the chat model, the embedding model, the reranker. */
static int served_models(const struct server *s, const char **names, int *n_ctx) {
    int n = 0;
    if (s->engine) names[n] = s->name, n_ctx[n++] = s->n_ctx;
    if (s->enc) names[n] = s->emb_name, n_ctx[n++] = s->emb_ctx;
    if (s->renc) names[n] = s->rerank_name, n_ctx[n++] = encoder_hparams(s->renc)->n_ctx;
    return n;
}

static enum MHD_Result handle_models(struct server *s, struct MHD_Connection *conn, const char *url) {
    const char *names[3];
    int n_ctx[3], n = served_models(s, names, n_ctx);
    if (!strcmp(url, "/v1/models")) {
        char *b = resp_models(names, n_ctx, n, s->created, true);
        return reply(s, conn, MHD_HTTP_OK, "application/json", b, b ? strlen(b) : 0, false);
    }
    const char *id = url + strlen("/v1/models/");
    for (int i = 0; i < n; i++)
        if (!strcmp(id, names[i])) {
            char *b = resp_models(names + i, n_ctx + i, 1, s->created, false);
            return reply(s, conn, MHD_HTTP_OK, "application/json", b, b ? strlen(b) : 0, false);
        }
    struct api_error e;
    api_fail(&e, 404, "invalid_request_error", "model_not_found", "model", "The model '%.200s' does not exist.", id);
    return reply_error(s, conn, &e, METRICS_REJECT_NOT_FOUND);
}

/* ---- dispatch ---------------------------------------------------------- */

struct route_def {
    const char *path;
    bool prefix;       /* path is a prefix ("/v1/models/") */
    const char *method;
    enum route route;
    bool needs_auth;
    bool needs_model;  /* 503 + Retry-After while loading or draining */
};

static const struct route_def routes[] = {
    {"/", false, "GET", ROUTE_PAGE, false, false},
    {"/health", false, "GET", ROUTE_HEALTH, false, false},
    {"/metrics", false, "GET", ROUTE_METRICS, false, false},
    {"/v1/models", false, "GET", ROUTE_MODELS, true, true},
    {"/v1/models/", true, "GET", ROUTE_MODEL, true, true},
    {"/v1/chat/completions", false, "POST", ROUTE_CHAT, true, true},
    {"/v1/completions", false, "POST", ROUTE_COMPLETIONS, true, true},
    {"/tokenize", false, "POST", ROUTE_TOKENIZE, true, true},
    {"/detokenize", false, "POST", ROUTE_DETOKENIZE, true, true},
    {"/tokenizer_info", false, "GET", ROUTE_TOKENIZER_INFO, true, true},
    {"/v1/embeddings", false, "POST", ROUTE_EMBEDDINGS, true, true},
    {"/v1/rerank", false, "POST", ROUTE_RERANK, true, true},
    {"/rerank", false, "POST", ROUTE_RERANK, true, true},
};

static const struct route_def *find_route(const char *url, const char *method, bool *wrong_method) {
    *wrong_method = false;
    static const struct route_def stores = {"/v1/", true, "*", ROUTE_STORES, true, true};
    if (stores_route(url)) {
        if (!strcmp(method, "GET") || !strcmp(method, "POST") || !strcmp(method, "DELETE")) return &stores;
        *wrong_method = true;
        return NULL;
    }
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        const struct route_def *r = &routes[i];
        bool match = r->prefix ? !strncmp(url, r->path, strlen(r->path)) && url[strlen(r->path)]
                               : !strcmp(url, r->path);
        if (!match) continue;
        if (!strcmp(method, r->method) || (!strcmp(method, "HEAD") && !strcmp(r->method, "GET"))) return r;
        *wrong_method = true;
    }
    return NULL;
}

struct field_list {
    struct http_field *f;
    size_t n, cap;
};

static enum MHD_Result add_field(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                 const char *value, size_t value_size) {
    (void)kind;
    struct field_list *l = cls;
    if (l->n < l->cap)
        l->f[l->n++] = (struct http_field){key ? key : "", key ? key_size : 0, value ? value : "", value ? value_size : 0};
    return MHD_YES;
}

/* http_check_fields over the request's header fields: 0, or 400 / 501
 * (500 if out of memory). */
static int check_fields(struct MHD_Connection *conn, const char *method, const char *version,
                        struct http_framing *fr, const char **why) {
    int n = MHD_get_connection_values_n(conn, MHD_HEADER_KIND, NULL, NULL);
    struct field_list l = {.cap = n > 0 ? (size_t)n : 0};
    if (l.cap && !(l.f = malloc(l.cap * sizeof *l.f))) {
        *why = "out of memory";
        return 500;
    }
    if (l.cap) MHD_get_connection_values_n(conn, MHD_HEADER_KIND, add_field, &l);
    int st = http_check_fields(l.f, l.n, version && !strcmp(version, MHD_HTTP_VERSION_1_0), fr, why);
    /* the header block as received starts with the method (libmicrohttpd
     * parses it in place) and is REQUEST_HEADER_SIZE bytes long */
    const union MHD_ConnectionInfo *hs = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (!st && (!hs || !method || !version || version < method ||
                !http_check_layout(method, hs->header_size, (size_t)(version - method) + strlen(version), l.f, l.n))) {
        *why = "a NUL byte in the request line or a header, or a header line folded onto the next";
        st = 400;
    }
    free(l.f);
    return st;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls) {
    struct server *s = cls;
    struct conn_state *cs = *req_cls;
    struct watch_conn *wc = conn_watch(conn);
    if (!cs) {
        /* first call: headers only */
        if (!watchdog_body(s->watch, wc)) return MHD_NO; /* cut at the header deadline */
        struct api_error e;
        struct http_framing fr;
        const char *why = "";
        int bad = check_fields(conn, method, version, &fr, &why);
        if (bad == 500) return reply(s, conn, 500, NULL, NULL, 0, false);
        if (bad) {
            api_fail(&e, bad, "invalid_request_error", bad == 501 ? "unsupported_transfer_encoding" : "invalid_header",
                     NULL, "The request's headers are not accepted: %s.", why);
            return reply_error(s, conn, &e, METRICS_REJECT_INVALID);
        }
        bool wrong_method;
        const struct route_def *r = find_route(url, method, &wrong_method);
        bool under_v1 = !strncmp(url, "/v1", 3) && (url[3] == 0 || url[3] == '/');
        if ((r ? r->needs_auth : under_v1) && !authorized(s, conn)) {
            api_fail(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
                     "Incorrect or missing API key. Send it as 'Authorization: Bearer KEY'.");
            return reply_error(s, conn, &e, METRICS_REJECT_UNAUTHORIZED);
        }
        if (!r) {
            api_fail(&e, wrong_method ? 405 : 404, "invalid_request_error",
                     wrong_method ? "method_not_allowed" : "unknown_url", NULL,
                     wrong_method ? "Method %.16s is not allowed for %.200s." : "Unknown request URL: %.16s %.200s.",
                     method, url);
            return reply_error(s, conn, &e, METRICS_REJECT_NOT_FOUND);
        }
        /* an upload (a file, or texts for a store) may be larger than other bodies */
        size_t limit = r->route == ROUTE_STORES && !strcmp(method, "POST") && s->cfg.max_file > s->cfg.max_body
                           ? s->cfg.max_file + (64 << 10)
                           : s->cfg.max_body;
        if (fr.length > limit) {
            api_fail(&e, 413, "invalid_request_error", "request_too_large", NULL,
                     "The request body is %llu bytes; the limit is %zu bytes.", (unsigned long long)fr.length,
                     limit);
            return reply_error(s, conn, &e, METRICS_REJECT_TOO_LARGE);
        }
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        cs->limit = limit;
        cs->route = r->route;
        cs->needs_model = r->needs_model;
        *req_cls = cs;
        return MHD_YES;
    }
    if (*upload_data_size) {
        /* a chunked body with no Content-Length can still grow past the limit:
         * keep reading, keep nothing, answer 413 at the end; past twice the
         * limit, answer 413 at once and close */
        if (!cs->too_big && cs->body.len + *upload_data_size > cs->limit) {
            cs->too_big = true;
            cs->dropped = cs->body.len;
            sbuf_free(&cs->body);
        }
        if (!cs->too_big) sbuf_add(&cs->body, upload_data, *upload_data_size);
        else cs->dropped += *upload_data_size;
        *upload_data_size = 0;
        if (cs->too_big && cs->dropped > 2 * cs->limit) {
            watchdog_cut(s->watch, wc, s->reply_413, strlen(s->reply_413));
            return MHD_NO;
        }
        return MHD_YES;
    }
    /* the request is complete: no deadline while it is answered */
    if (!watchdog_answer(s->watch, wc)) return MHD_NO;
    if (cs->too_big) {
        struct api_error e;
        api_fail(&e, 413, "invalid_request_error", "request_too_large", NULL,
                 "The request body is over the limit of %zu bytes.", cs->limit);
        return reply_error(s, conn, &e, METRICS_REJECT_TOO_LARGE);
    }
    if (cs->body.failed) return reply(s, conn, 500, NULL, NULL, 0, false);
    if (cs->needs_model && atomic_load(&s->state) != SRV_READY) return reply_unavailable(s, conn);
    switch (cs->route) {
    case ROUTE_PAGE: return handle_page(s, conn);
    case ROUTE_HEALTH: return handle_health(s, conn);
    case ROUTE_METRICS: return handle_metrics(s, conn);
    case ROUTE_MODELS:
    case ROUTE_MODEL: return handle_models(s, conn, url);
    case ROUTE_CHAT:
    case ROUTE_COMPLETIONS: return handle_generate(s, conn, cs);
    case ROUTE_TOKENIZE: return handle_tokenize(s, conn, cs);
    case ROUTE_DETOKENIZE: return handle_detokenize(s, conn, cs);
    case ROUTE_TOKENIZER_INFO: return handle_tokenizer_info(s, conn);
    case ROUTE_EMBEDDINGS: return handle_embeddings(s, conn, cs);
    case ROUTE_STORES: return handle_stores(s, conn, cs, url, method);
    case ROUTE_RERANK: return handle_rerank(s, conn, cs);
    default: return MHD_NO;
    }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)toe;
    struct server *s = cls;
    watchdog_idle(s->watch, conn_watch(conn)); /* the next request's header deadline */
    struct conn_state *cs = *req_cls;
    if (!cs) return;
    sbuf_free(&cs->body);
    free(cs);
    *req_cls = NULL;
}

/* A connection opens (its deadlines start) or closes (forgotten, before
 * libmicrohttpd closes its socket). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    struct server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? watchdog_open(s->watch, ci->connect_fd) : NULL;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        watchdog_close(s->watch, *socket_context);
        *socket_context = NULL;
    }
}

/* The request line arrived (called before the headers are read). */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn) {
    (void)uri;
    struct server *s = cls;
    watchdog_request_line(s->watch, conn_watch(conn));
    return NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    log_debug("http: %s", line);
}

/* ---- start-up ---------------------------------------------------------- */

/* A whole HTTP response that closes the connection, with an OpenAI error
 * object as its body (malloc'd); NULL if out of memory. */
static char *raw_reply(int status, const char *reason, const char *code, const char *msg) {
    struct api_error e;
    api_fail(&e, status, "invalid_request_error", code, NULL, "%s", msg);
    char *body = api_error_json(&e);
    if (!body) return NULL;
    size_t n = strlen(body), cap = n + 256;
    char *r = malloc(cap);
    if (r)
        snprintf(r, cap,
                 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 status, reason, n, body);
    free(body);
    return r;
}

static bool start_http(struct server *s) {
    char *r408 = raw_reply(408, "Request Timeout", "request_timeout",
                           "The request's headers or body did not arrive in time; the connection is closed.");
    s->reply_413 = raw_reply(413, "Content Too Large", "request_too_large",
                             "The request body is over the limit; the connection is closed.");
    s->watch = r408 && s->reply_413 ? watchdog_new(s->cfg.header_timeout_s, s->cfg.body_timeout_s, r408) : NULL;
    free(r408);
    if (!s->watch) {
        fprintf(stderr, "kvik serve: cannot start the connection watchdog\n");
        return false;
    }
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int gai = getaddrinfo(s->cfg.host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        fprintf(stderr, "kvik serve: cannot resolve host '%s': %s\n", s->cfg.host, gai_strerror(gai));
        return false;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                                 MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                 MHD_OPTION_URI_LOG_CALLBACK, on_request_line, s,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections,
                                 MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections_per_ip,
                                 MHD_OPTION_CONNECTION_TIMEOUT, 120u,
                                 MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                 MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        fprintf(stderr, "kvik serve: cannot listen on %s:%d: %s\n", s->cfg.host, s->cfg.port,
                errno ? strerror(errno) : "libmicrohttpd failed to start");
        return false;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    int bound = di ? di->port : s->cfg.port;
    bool v6 = strchr(s->cfg.host, ':') != NULL;
    fprintf(stderr, "kvik serve: listening on http://%s%s%s:%d\n", v6 ? "[" : "", s->cfg.host, v6 ? "]" : "", bound);
    return true;
}

/* True when the vocabulary writes a space before words that decoding a
 * whole text drops (SentencePiece): a chat reply then drops it too. */
static bool vocab_strips_space(const struct tokenizer *tok) {
    int32_t ids[8];
    int64_t n = tokenizer_encode(tok, "a", 1, false, false, ids, 8);
    if (n < 1 || n > 8) return false;
    char piece[64], text[64];
    int64_t pn = tokenizer_decode_piece(tok, ids[0], piece, sizeof piece, false);
    int64_t tn = tokenizer_decode(tok, ids, n, text, sizeof text, false);
    return pn > 0 && pn < (int64_t)sizeof piece && piece[0] == ' ' && tn >= 0 && tn < (int64_t)sizeof text &&
           text[0] != ' ';
}

static void load_chat_template(struct server *s) {
    struct kvik_err err = {0};
    if (s->cfg.chat_template) {
        if (chat_template_from_name(s->cfg.chat_template, &s->fmt.tmpl, &err) == KVIK_OK) s->have_fmt = true;
        else fprintf(stderr, "kvik serve: warning: %s\n", err.msg);
        return;
    }
    if (chat_detect_gguf(s->model->file, &s->fmt, &err) == KVIK_OK) {
        s->have_fmt = true;
        struct gguf_str t;
        char *text = s->fmt.jinja && !gguf_get_str(s->model->file, "tokenizer.chat_template", &t, &err)
                         ? strndup(t.ptr, t.len)
                         : NULL;
        s->tool_style = text ? toolcall_style_of(text) : TOOLCALL_NONE;
        free(text);
        if (s->fmt.approximate)
            fprintf(stderr, "kvik serve: warning: the model's %s template does more than kvik renders\n",
                    chat_template_name(s->fmt.tmpl));
        if (s->fmt.by_architecture)
            fprintf(stderr, "kvik serve: the model has no chat template; using %s, its architecture's\n",
                    chat_template_name(s->fmt.tmpl));
    } else {
        fprintf(stderr, "kvik serve: warning: %s; /v1/chat/completions answers 400\n", err.msg);
    }
}

/* KVIK_TEST_LOAD_DELAY_MS (tests only): milliseconds to wait before the
 * model load, so that a test can watch the loading state. */
static void test_load_delay(void) {
    const char *v = getenv("KVIK_TEST_LOAD_DELAY_MS");
    long ms = v ? strtol(v, NULL, 10) : 0;
    if (ms <= 0) return;
    if (ms > 600000) ms = 600000;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* True when the GGUF at path is an encoder ("bert"); false for anything
 * else, an unreadable file included (the loader then says why). */
static bool is_encoder_file(const char *path) {
    struct gguf *g = NULL;
    struct kvik_err err = {0};
    struct gguf_str a = {0};
    bool enc = gguf_open(path, &g, &err) == KVIK_OK && gguf_get_str(g, "general.architecture", &a, &err) == KVIK_OK &&
               a.len == 4 && !memcmp(a.ptr, "bert", 4);
    gguf_close(g);
    return enc;
}

/* The file name without its folder and ".gguf", into buf. */
static void file_model_name(const char *path, char *buf, size_t len) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(buf, len, "%s", base);
    size_t n = strlen(buf);
    if (n > 5 && !strcmp(buf + n - 5, ".gguf")) buf[n - 5] = 0;
}

/* Embeds texts for the knowledge base through the embedder (each text
 * tokenized as /v1/embeddings does: [CLS] text [SEP], cut to the positions). */
static kvik_status kb_embed(void *ctx, int n, const char *const *texts, const size_t *lens, float *out,
                            struct kvik_err *err) {
    struct server *s = ctx;
    int pos = s->emb_ctx;
    int32_t *ids = malloc((size_t)n * (size_t)pos * sizeof *ids);
    const int32_t **rows = malloc((size_t)n * sizeof *rows);
    int *n_ids = malloc((size_t)n * sizeof *n_ids);
    kvik_status st = ids && rows && n_ids ? KVIK_OK : err_set(err, KVIK_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < n; i++) {
        int32_t *row = ids + (size_t)i * (size_t)pos;
        int64_t k = encoder_tokenize(s->enc, texts[i], lens[i], row, pos);
        if (k < 0) st = err_set(err, (kvik_status)k, "a text could not be tokenized");
        rows[i] = row;
        n_ids[i] = (int)k;
    }
    if (!st) st = embedder_embed(s->emb, n, rows, NULL, n_ids, out, err);
    free(ids);
    free(rows);
    free(n_ids);
    return st;
}

static kvik_status kb_rerank(void *ctx, const char *query, size_t qlen, int n, const char *const *docs,
                             const size_t *lens, float *scores, struct kvik_err *err) {
    struct server *s = ctx;
    if (!s->rerank)
        return err_set(err, KVIK_ERR_UNSUPPORTED, "no reranker: the server has no cross-encoder nor a chat model that judges");
    return reranker_score(s->rerank, query, qlen, n, docs, lens, scores, NULL, err);
}

/* The knowledge base over the embedding model: in --data-dir, or in memory. */
static bool open_stores(struct server *s) {
    struct kb_config kc = {.dir = s->cfg.data_dir, .dim = encoder_hparams(s->enc)->n_embd,
                           .tok = encoder_tokenizer(s->enc), .embed = kb_embed, .embed_ctx = s,
                           .rerank = kb_rerank, .rerank_ctx = s};
    snprintf(kc.model.id, sizeof kc.model.id, "%s", s->emb_name);
    snprintf(kc.model.hash, sizeof kc.model.hash, "%016llx", (unsigned long long)encoder_identity(s->enc));
    struct kvik_err err = {0};
    if (kb_open(&kc, &s->kb, &err)) {
        fprintf(stderr, "kvik serve: %s\n", err.msg);
        return false;
    }
    if (!(s->stores = stores_new(s->kb, s->cfg.max_file))) return false;
    if (s->cfg.data_dir) fprintf(stderr, "kvik serve: files and vector stores in %s\n", s->cfg.data_dir);
    else fprintf(stderr, "kvik serve: files and vector stores in memory (--data-dir keeps them)\n");
    return true;
}

static bool load_encoder(struct server *s, const char *path) {
    struct kvik_err err = {0};
    fprintf(stderr, "kvik serve: loading the embedding model %s\n", path);
    struct embedder_config ec = embedder_config_default();
    if (s->cfg.embedding_threads) ec.n_threads = s->cfg.embedding_threads;
    if (encoder_load(path, &s->enc, &err) || !(s->emb = embedder_new(s->enc, &ec, &err))) {
        fprintf(stderr, "kvik serve: cannot load the embedding model %s: %s\n", path, err.msg);
        return false;
    }
    if (encoder_hparams(s->enc)->pooling == ENCODER_POOL_RANK) {
        fprintf(stderr, "kvik serve: %s is a cross-encoder (a reranker), not an embedding model: give it as "
                "--rerank-model\n", path);
        return false;
    }
    s->emb_ctx = encoder_hparams(s->enc)->n_ctx;
    if (path == s->cfg.model_path) snprintf(s->emb_name, sizeof s->emb_name, "%s", s->name);
    else file_model_name(path, s->emb_name, sizeof s->emb_name);
    return open_stores(s);
}

/* The cross-encoder at path as the server's reranker. */
static bool load_reranker(struct server *s, const char *path) {
    struct kvik_err err = {0};
    fprintf(stderr, "kvik serve: loading the reranking model %s\n", path);
    struct embedder_config ec = embedder_config_default();
    if (s->cfg.embedding_threads) ec.n_threads = s->cfg.embedding_threads;
    if (encoder_load(path, &s->renc, &err) || !(s->remb = embedder_new(s->renc, &ec, &err)) ||
        !(s->rerank = reranker_new_encoder(s->remb, s->renc, &err))) {
        fprintf(stderr, "kvik serve: cannot load the reranking model %s: %s\n", path, err.msg);
        return false;
    }
    if (path == s->cfg.model_path) snprintf(s->rerank_name, sizeof s->rerank_name, "%s", s->name);
    else file_model_name(path, s->rerank_name, sizeof s->rerank_name);
    return true;
}

/* True when the encoder GGUF at path is a cross-encoder. */
static bool is_rank_file(const char *path) {
    struct gguf *g = NULL;
    struct kvik_err err = {0};
    uint32_t pool = 0;
    bool rank = gguf_open(path, &g, &err) == KVIK_OK && gguf_get_u32(g, "bert.pooling_type", &pool, &err) == KVIK_OK &&
                pool == ENCODER_POOL_RANK;
    gguf_close(g);
    return rank;
}

static bool load_model(struct server *s) {
    struct kvik_err err = {0};
    test_load_delay();
    if (s->cfg.rerank_model && !load_reranker(s, s->cfg.rerank_model)) return false;
    if (is_encoder_file(s->cfg.model_path)) {
        if (s->cfg.embedding_model || s->cfg.rerank_model) {
            fprintf(stderr, "kvik serve: -m is an encoder; --embedding-model and --rerank-model go with a chat "
                    "model\n");
            return false;
        }
        if (is_rank_file(s->cfg.model_path)) {
            if (!load_reranker(s, s->cfg.model_path)) return false;
            s->vocab = encoder_tokenizer(s->renc);
            s->n_ctx = encoder_hparams(s->renc)->n_ctx;
            return true;
        }
        if (!load_encoder(s, s->cfg.model_path)) return false;
        s->vocab = encoder_tokenizer(s->enc);
        s->n_ctx = s->emb_ctx;
        return true;
    }
    if (s->cfg.embedding_model && !load_encoder(s, s->cfg.embedding_model)) return false;
    fprintf(stderr, "kvik serve: loading %s\n", s->cfg.model_path);
    if (model_load(s->cfg.model_path, &s->model, &err) || tokenizer_load(s->model->file, &s->tok, &err)) {
        fprintf(stderr, "kvik serve: cannot load the model %s: %s\n", s->cfg.model_path, err.msg);
        return false;
    }
    load_chat_template(s);
    s->vocab = s->tok;
    s->chat_strip_space = vocab_strips_space(s->tok);
    if (!(s->eog = engine_eog_ids(s->tok, &s->n_eog))) return false;
    if (!(s->gpool = grammar_pool_new(64)) ||
        !(s->gvocab = grammar_vocab_from_tokenizer(s->tok, s->eog, s->n_eog, &err))) {
        fprintf(stderr, "kvik serve: %s\n", err.msg);
        return false;
    }

    struct engine_config ec = engine_config_default();
    s->n_ctx = s->cfg.n_ctx ? s->cfg.n_ctx : engine_default_ctx(s->model);
    ec.n_ctx = s->n_ctx;
    ec.n_threads = s->cfg.n_threads;
    if (s->cfg.max_seqs) ec.max_seqs = s->cfg.max_seqs;
    if (s->cfg.max_batch_tokens) ec.max_batch_tokens = s->cfg.max_batch_tokens;
    if (s->cfg.max_queue) ec.max_queue = s->cfg.max_queue;
    ec.prefill_chunk = s->cfg.prefill_chunk;
    ec.kv_type = s->cfg.kv_type;
    ec.prefix_cache = s->cfg.prefix_cache;
    ec.kv_mem_mib = s->cfg.kv_mem_mib;
    ec.kv_tokens = s->cfg.ctx_total;
    ec.eog = s->eog;
    ec.n_eog = s->n_eog;
    ec.spec_mode = s->cfg.spec_mode;
    ec.spec_max = s->cfg.spec_max;
    ec.spec_ngram = s->cfg.spec_ngram;
    if (s->cfg.model_draft) {
        fprintf(stderr, "kvik serve: loading the draft model %s\n", s->cfg.model_draft);
        if (model_load(s->cfg.model_draft, &s->draft, &err)) {
            fprintf(stderr, "kvik serve: draft model: %s\n", err.msg);
            return false;
        }
        ec.draft = s->draft;
    }
    if (!(s->engine = engine_new(s->model, &ec, &err))) {
        fprintf(stderr, "kvik serve: %s\n", err.code ? err.msg : "cannot start the engine");
        return false;
    }
    s->pool_tokens = engine_max_seq_tokens(s->engine);
    if (s->cfg.semantic_cache) {
        if (!s->enc) {
            fprintf(stderr, "kvik serve: --semantic-cache needs an embedding model (--embedding-model)\n");
            return false;
        }
        struct semcache_config sc = {.dim = encoder_hparams(s->enc)->n_embd,
                                     .guard = !s->cfg.semcache_no_guard,
                                     .threshold = s->cfg.semcache_threshold,
                                     .ttl_ns = (int64_t)(s->cfg.semcache_ttl_s * 1e9),
                                     .max_entries = s->cfg.semcache_max};
        if (!(s->semcache = semcache_new(&sc, &err))) {
            fprintf(stderr, "kvik serve: semantic cache: %s\n", err.msg);
            return false;
        }
        fprintf(stderr, "kvik serve: semantic cache on: cosine >= %.3f%s, TTL %.0f s, %lld entries at most\n",
                (double)sc.threshold, sc.guard ? " and the same content words" : "", s->cfg.semcache_ttl_s,
                (long long)sc.max_entries);
    }
    if (s->have_fmt && !s->rerank) {
        struct reranker_config rc = {.n_ctx = s->n_ctx, .cache_key = 0x72657261ull};
        struct kvik_err rerr = {0};
        if (!(s->rerank = reranker_new(s->engine, s->tok, &s->fmt, &rc, &rerr)))
            fprintf(stderr, "kvik serve: no reranking: %s\n", rerr.msg);
    }
    return true;
}

static void model_name(struct server *s) {
    if (s->cfg.model_name) {
        snprintf(s->name, sizeof s->name, "%s", s->cfg.model_name);
        return;
    }
    file_model_name(s->cfg.model_path, s->name, sizeof s->name);
}

static void server_free(struct server *s) {
    if (s->daemon) MHD_stop_daemon(s->daemon);
    watchdog_free(s->watch); /* after the daemon: every connection is closed */
    free(s->reply_413);
    stores_free(s->stores); /* after the daemon: no request uses them */
    if (s->kb && atomic_load(&s->state) == SRV_DRAINING) { /* a clean stop: the next start loads graphs */
        struct kvik_err err = {0};
        if (kb_checkpoint_if_grown(s->kb, 1 << 20, &err)) fprintf(stderr, "kvik serve: checkpoint: %s\n", err.msg);
    }
    kb_close(s->kb);
    engine_free(s->engine);
    reranker_free(s->rerank);
    semcache_free(s->semcache);
    embedder_free(s->emb); /* after the daemon: no request waits on it */
    encoder_free(s->enc);
    embedder_free(s->remb);
    encoder_free(s->renc);
    free(s->eog);
    grammar_vocab_free(s->gvocab);
    grammar_pool_free(s->gpool);
    chat_format_free(&s->fmt);
    tokenizer_free(s->tok);
    model_free(s->model);
    model_free(s->draft);
    free(s);
}

int server_run(const struct server_config *cfg) {
    struct server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->cfg = *cfg;
    s->created = (int64_t)time(NULL);
    model_name(s);
    atomic_store(&s->state, SRV_LOADING);

    /* SIGINT/SIGTERM are taken by sigwait below; every thread started from
     * here inherits the mask. A write to a closed socket is an error, not
     * a signal. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (!start_http(s) || !load_model(s)) {
        server_free(s);
        return 1;
    }
    atomic_store(&s->state, SRV_READY);
    if (s->engine)
        fprintf(stderr, "kvik serve: ready: model '%s', context %d tokens%s%s%s%s%s%s\n", s->name, s->n_ctx,
                s->enc ? ", embeddings by '" : "", s->enc ? s->emb_name : "", s->enc ? "'" : "",
                s->renc ? ", reranking by '" : "", s->renc ? s->rerank_name : "", s->renc ? "'" : "");
    else if (s->renc)
        fprintf(stderr, "kvik serve: ready: reranking model '%s', %d positions\n", s->rerank_name, s->n_ctx);
    else
        fprintf(stderr, "kvik serve: ready: embedding model '%s', %d positions\n", s->emb_name, s->emb_ctx);
    if (s->cfg.api_key) fprintf(stderr, "kvik serve: API key required\n");

    int sig = 0;
    while (sigwait(&sigs, &sig) != 0) {
    }
    fprintf(stderr, "kvik serve: %s: draining (up to %.0f s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            s->cfg.drain_timeout_s);
    atomic_store(&s->state, SRV_DRAINING);
    MHD_socket lfd = MHD_quiesce_daemon(s->daemon);
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    if (s->engine) engine_drain(s->engine, clock_ns() + (int64_t)(s->cfg.drain_timeout_s * 1e9));
    /* let the connections write their last chunks (bounded) */
    for (int i = 0; i < 200 && atomic_load(&s->inflight) > 0; i++) usleep(10000);
    server_free(s);
    fprintf(stderr, "kvik serve: stopped\n");
    return 0;
}
