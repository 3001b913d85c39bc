/*
 * response.c — JSON bodies and SSE chunks in OpenAI's shapes (see response.h).
 */
#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "server/response.h"

/* Reals print with 9 significant digits: every float round-trips. */
#define RESP_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

void sbuf_add(struct sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = (b->cap ? b->cap * 2 : 1024) + n + 1;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void sbuf_free(struct sbuf *b) {
    free(b->p);
    *b = (struct sbuf){0};
}

static uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void resp_ctx_init(struct resp_ctx *rc, enum api_route route, const char *model) {
    static _Atomic uint64_t serial;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t a = splitmix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ atomic_fetch_add(&serial, 1));
    uint64_t b = splitmix(a ^ (uint64_t)clock_ns());
    snprintf(rc->id, sizeof rc->id, "%s%016llx%08llx", route == API_ROUTE_CHAT ? "chatcmpl-" : "cmpl-",
             (unsigned long long)a, (unsigned long long)(b >> 32));
    rc->route = route;
    rc->created = (int64_t)ts.tv_sec;
    rc->model = model;
}

/* ---- tool calls ---------------------------------------------------------- */

/* The calls in a finished reply (rc->prefill then text[0..len)): a JSON
 * array of {"index","id","type","function":{"name","arguments"}} (index
 * only when with_index), and the length of the content before them in
 * *content (of prefill + text). NULL when the reply holds none. */
static json_t *reply_calls(const struct resp_ctx *rc, const char *text, size_t len, bool with_index,
                           size_t *content) {
    size_t pl = rc->prefill ? strlen(rc->prefill) : 0;
    char *all = malloc(pl + len + 1);
    if (!all) return NULL;
    memcpy(all, rc->prefill ? rc->prefill : "", pl);
    memcpy(all + pl, text ? text : "", len);
    all[pl + len] = 0;
    struct toolcall calls[API_MAX_TOOLS];
    int n = toolcall_parse(rc->tool_style, all, pl + len, calls, API_MAX_TOOLS, content);
    if (n == 0 && !pl) {
        n = toolcall_parse_bare(all, len, rc->tools_json, calls);
        if (n > 0) *content = 0;
    }
    free(all);
    if (n <= 0) return NULL;
    if (!rc->parallel_tools && n > 1) {
        toolcall_free(calls + 1, n - 1);
        n = 1;
    }
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        struct resp_ctx idc;
        resp_ctx_init(&idc, API_ROUTE_CHAT, NULL);
        char id[40];
        snprintf(id, sizeof id, "call_%.24s", idc.id + strlen("chatcmpl-"));
        json_t *c = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function", "function", "name",
                              calls[i].name, "arguments", calls[i].arguments);
        if (c && with_index) json_object_set_new(c, "index", json_integer(i));
        json_array_append_new(arr, c);
    }
    toolcall_free(calls, n);
    return arr;
}

/* How much of text[0..len) a stream may send before the reply is done:
 * all of it, or up to where a tool call may be starting. */
static size_t tool_hold(const struct resp_ctx *rc, const char *text, size_t len) {
    if (rc->tool_style == TOOLCALL_NONE) return len;
    if (rc->prefill && *rc->prefill) return 0;
    if (rc->tool_style == TOOLCALL_LLAMA3) {
        static const char tag[] = "<|python_tag|>";
        size_t i = 0;
        while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) i++;
        if (i == len || text[i] == '{') return 0;
        size_t m = len - i < sizeof tag - 1 ? len - i : sizeof tag - 1;
        return memcmp(text + i, tag, m) ? len : 0;
    }
    static const char open[] = "<tool_call>";
    const size_t ol = sizeof open - 1;
    size_t w = 0; /* a reply opening with an object or a fence may be a bare call */
    while (w < len && (text[w] == ' ' || text[w] == '\n' || text[w] == '\t' || text[w] == '\r')) w++;
    if (w == len || text[w] == '{' || text[w] == '`') return 0;
    size_t h = len;
    for (size_t i = 0; i < len && h == len; i++) {
        size_t m = len - i < ol ? len - i : ol;
        if (text[i] == '<' && !memcmp(text + i, open, m)) h = i;
    }
    /* white space may be what precedes a call: it waits for what follows */
    while (h > 0 && (text[h - 1] == ' ' || text[h - 1] == '\n' || text[h - 1] == '\t' || text[h - 1] == '\r')) h--;
    return h;
}

const char *resp_finish_reason(enum engine_finish f) {
    switch (f) {
    case ENGINE_FINISH_STOP: return "stop";
    case ENGINE_FINISH_LENGTH: return "length";
    case ENGINE_FINISH_CANCELLED: return "cancelled";
    case ENGINE_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

/* A JSON string of bytes that may not be valid UTF-8 (a token's piece). */
static json_t *str_lossy(const char *s, size_t n) {
    size_t len;
    char *clean = api_utf8_sanitize(s, n, &len);
    if (!clean) return json_null();
    json_t *v = json_stringn(clean, len);
    free(clean);
    return v ? v : json_null();
}

/* logprobs as OpenAI prints them: finite, -9999 for -inf */
static json_t *lp_json(float lp) { return json_real(isfinite(lp) ? (double)lp : -9999.0); }

static json_t *bytes_json(const char *s, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer((uint8_t)s[i]));
    return a;
}

/* {"token","logprob","bytes"} of one id (chat shape). */
static json_t *chat_tok(const struct tokenizer *tok, int32_t id, float lp, char *buf, size_t cap) {
    size_t n = job_token_bytes(tok, id, buf, cap);
    if (n > cap) n = cap;
    json_t *o = json_object();
    json_object_set_new(o, "token", str_lossy(buf, n));
    json_object_set_new(o, "logprob", lp_json(lp));
    json_object_set_new(o, "bytes", bytes_json(buf, n));
    return o;
}

/* The completions shape's four lists, appended to: toks[0..n), their text
 * offsets start + base. A token with n_top < 0 (the first prompt token)
 * has null logprob and alternatives. */
static void legacy_append(const struct resp_ctx *rc, const struct tokenizer *tok, const struct job_token *toks,
                          int n, size_t base, json_t *tokens, json_t *lps, json_t *tops, json_t *offs) {
    char buf[512];
    int top = rc->top_logprobs;
    for (int i = 0; i < n; i++) {
        const struct job_token *t = &toks[i];
        size_t len = job_token_bytes(tok, t->id, buf, sizeof buf);
        json_array_append_new(tokens, str_lossy(buf, len < sizeof buf ? len : sizeof buf));
        json_array_append_new(offs, json_integer((json_int_t)(t->start + base)));
        if (t->n_top < 0) {
            json_array_append_new(lps, json_null());
            json_array_append_new(tops, json_null());
            continue;
        }
        json_array_append_new(lps, lp_json(t->logprob));
        json_t *alts = json_object();
        for (int k = 0; k < t->n_top && k < top; k++) {
            size_t m = job_token_bytes(tok, t->top_ids[k], buf, sizeof buf - 1);
            if (m > sizeof buf - 1) m = sizeof buf - 1;
            size_t clen;
            char *key = api_utf8_sanitize(buf, m, &clen);
            if (key && !memchr(key, 0, clen) && !json_object_get(alts, key))
                json_object_set_new(alts, key, lp_json(t->top_logprobs[k]));
            free(key);
        }
        json_array_append_new(tops, alts);
    }
}

/* Logprobs of toks[0..n) in the route's shape; completions with echoed
 * prompt log-probabilities: the prompt's tokens ptoks[0..n_p) first. */
static json_t *logprobs_json(const struct resp_ctx *rc, const struct tokenizer *tok, const struct job_token *ptoks,
                             int n_p, const struct job_token *toks, int n) {
    char buf[512];
    int top = rc->top_logprobs;
    if (rc->route == API_ROUTE_CHAT) {
        json_t *content = json_array();
        for (int i = 0; i < n; i++) {
            const struct job_token *t = &toks[i];
            json_t *o = chat_tok(tok, t->id, t->logprob, buf, sizeof buf);
            json_t *alts = json_array();
            for (int k = 0; k < t->n_top && k < top; k++)
                json_array_append_new(alts, chat_tok(tok, t->top_ids[k], t->top_logprobs[k], buf, sizeof buf));
            json_object_set_new(o, "top_logprobs", alts);
            json_array_append_new(content, o);
        }
        json_t *lp = json_object();
        json_object_set_new(lp, "content", content);
        json_object_set_new(lp, "refusal", json_null());
        return lp;
    }
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    if (ptoks) legacy_append(rc, tok, ptoks, n_p, 0, tokens, lps, tops, offs);
    legacy_append(rc, tok, toks, n, rc->echo_len, tokens, lps, tops, offs);
    json_t *lp = json_object();
    json_object_set_new(lp, "tokens", tokens);
    json_object_set_new(lp, "token_logprobs", lps);
    json_object_set_new(lp, "top_logprobs", tops);
    json_object_set_new(lp, "text_offset", offs);
    return lp;
}

/* Prompt, generated and cached prompt tokens of a job (under its lock). */
static void job_usage(const struct resp_ctx *rc, const struct job *j, struct resp_usage *u) {
    u->completion_tokens = 0;
    for (int c = 0; c < j->n; c++) u->completion_tokens += j->ch[c].n_generated;
    u->prompt_tokens = j->n_prompt > 0 ? j->n_prompt : rc->n_prompt;
    u->cached_tokens = j->n_cached;
}

static json_t *usage_json(const struct resp_usage *u) {
    json_t *o = json_object(), *details = json_object();
    json_object_set_new(o, "prompt_tokens", json_integer(u->prompt_tokens));
    json_object_set_new(o, "completion_tokens", json_integer(u->completion_tokens));
    json_object_set_new(o, "total_tokens", json_integer(u->prompt_tokens + u->completion_tokens));
    json_object_set_new(details, "cached_tokens", json_integer(u->cached_tokens));
    json_object_set_new(o, "prompt_tokens_details", details);
    return o;
}

static json_t *fingerprint(void) {
    char fp[32];
    snprintf(fp, sizeof fp, "kvik-%s", kvik_version());
    return json_string(fp);
}

static json_t *envelope(const struct resp_ctx *rc, bool chunk) {
    json_t *o = json_object();
    bool chat = rc->route == API_ROUTE_CHAT;
    json_object_set_new(o, "id", json_string(rc->id));
    json_object_set_new(o, "object", json_string(chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                      : "text_completion"));
    json_object_set_new(o, "created", json_integer(rc->created));
    json_object_set_new(o, "model", json_string(rc->model));
    json_object_set_new(o, "system_fingerprint", fingerprint());
    return o;
}

static json_t *text_json(const char *s, size_t n) {
    json_t *v = json_stringn(s ? s : "", n);
    return v ? v : str_lossy(s, n);
}

char *resp_full(const struct resp_ctx *rc, struct job *j) {
    json_t *root = envelope(rc, false), *choices = json_array();
    for (int i = 0; i < j->n; i++) {
        struct job_choice *c = &j->ch[i];
        json_t *ch = json_object();
        json_object_set_new(ch, "index", json_integer(i));
        const char *finish = resp_finish_reason(c->finish);
        if (rc->route == API_ROUTE_CHAT) {
            json_t *msg = json_object();
            json_object_set_new(msg, "role", json_string("assistant"));
            size_t content = 0;
            json_t *calls = rc->tool_style != TOOLCALL_NONE ? reply_calls(rc, c->text, c->len, false, &content) : NULL;
            if (calls) {
                size_t pl = strlen(rc->prefill ? rc->prefill : "");
                /* the content before the calls: never the prefill (it opens a call) */
                json_object_set_new(msg, "content", content > pl ? text_json(c->text, content - pl) : json_null());
                json_object_set_new(msg, "tool_calls", calls);
                if (c->finish == ENGINE_FINISH_STOP) finish = "tool_calls";
            } else {
                json_object_set_new(msg, "content", text_json(c->text, c->len));
            }
            json_object_set_new(msg, "refusal", json_null());
            json_object_set_new(ch, "message", msg);
        } else {
            struct sbuf t = {0};
            sbuf_add(&t, rc->echo ? rc->echo : "", rc->echo ? rc->echo_len : 0);
            sbuf_add(&t, c->text ? c->text : "", c->len);
            json_object_set_new(ch, "text", text_json(t.p, t.len));
            sbuf_free(&t);
        }
        json_object_set_new(ch, "logprobs", j->logprobs ? logprobs_json(rc, j->tok, rc->echo ? j->ptoks : NULL, j->n_ptoks,
                                                                        c->toks, c->toks_final)
                                                        : json_null());
        json_object_set_new(ch, "finish_reason", json_string(finish));
        json_array_append_new(choices, ch);
    }
    json_object_set_new(root, "choices", choices);
    struct resp_usage u;
    job_usage(rc, j, &u);
    json_object_set_new(root, "usage", usage_json(&u));
    char *s = json_dumps(root, RESP_JSON_FLAGS);
    json_decref(root);
    return s;
}

static void emit(struct sbuf *out, json_t *root) {
    char *s = json_dumps(root, RESP_JSON_FLAGS);
    json_decref(root);
    if (!s) {
        out->failed = true;
        return;
    }
    sbuf_add(out, "data: ", 6);
    sbuf_add(out, s, strlen(s));
    sbuf_add(out, "\n\n", 2);
    free(s);
}

/* One chunk with one choice: text (NULL: none), logprobs of toks[0..n_toks)
 * (toks NULL: none), finish reason (NULL: none). */
static json_t *chunk_json(const struct resp_ctx *rc, const struct tokenizer *tok, int index,
                          const char *text, size_t len, bool role, const struct job_token *ptoks, int n_p,
                          const struct job_token *toks, int n_toks, const char *finish) {
    json_t *root = envelope(rc, true), *choices = json_array(), *ch = json_object();
    json_object_set_new(ch, "index", json_integer(index));
    if (rc->route == API_ROUTE_CHAT) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (text) json_object_set_new(delta, "content", text_json(text, len));
        json_object_set_new(ch, "delta", delta);
    } else {
        json_object_set_new(ch, "text", text_json(text ? text : "", text ? len : 0));
    }
    json_object_set_new(ch, "logprobs", toks || ptoks ? logprobs_json(rc, tok, ptoks, n_p, toks, n_toks) : json_null());
    json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    json_array_append_new(choices, ch);
    json_object_set_new(root, "choices", choices);
    if (rc->include_usage) json_object_set_new(root, "usage", json_null());
    return root;
}

bool resp_stream_take(const struct resp_ctx *rc, struct job *j, struct resp_step *st) {
    memset(st, 0, sizeof *st);
    st->tok = j->tok;
    st->logprobs = j->logprobs;
    /* echoed prompt log-probabilities go out with the echo, once all are in */
    if (j->prompt_lp && !j->prompt_done) return false;
    if (j->prompt_lp && j->logprobs && rc->echo) {
        st->ptoks = j->ptoks;
        st->n_ptoks = j->n_ptoks;
    }
    if (!(st->d = calloc((size_t)j->n, sizeof *st->d))) {
        st->failed = true;
        return true;
    }
    bool all_sent = true;
    for (int i = 0; i < j->n; i++) {
        struct job_choice *c = &j->ch[i];
        if (c->finish_sent) continue;
        struct resp_delta *d = &st->d[st->n];
        d->index = i;
        d->first = !c->started;
        c->started = true;
        /* tokens whose bytes are all safe to send (all of them once done) */
        int to = c->toks_sent;
        if (j->logprobs) {
            int limit = c->done ? c->toks_final : c->n_toks;
            while (to < limit && (c->done || c->toks[to].end <= c->safe)) to++;
        }
        size_t limit = c->done ? c->safe : tool_hold(rc, c->text, c->safe);
        if (c->done && rc->tool_style != TOOLCALL_NONE) {
            size_t content = 0, pl = strlen(rc->prefill ? rc->prefill : "");
            json_t *calls = reply_calls(rc, c->text, c->len, true, &content);
            if (calls) {
                limit = content > pl ? content - pl : 0;
                d->calls = json_dumps(calls, RESP_JSON_FLAGS);
                if (!d->calls) st->failed = true;
                json_decref(calls);
            }
        }
        if (limit > c->sent) {
            d->len = limit - c->sent;
            if (!(d->text = malloc(d->len))) st->failed = true;
            else memcpy(d->text, c->text + c->sent, d->len);
            c->sent = limit;
        }
        if (to > c->toks_sent) {
            d->n_toks = to - c->toks_sent;
            if (!(d->toks = malloc((size_t)d->n_toks * sizeof *d->toks))) st->failed = true;
            else memcpy(d->toks, c->toks + c->toks_sent, (size_t)d->n_toks * sizeof *d->toks);
            c->toks_sent = to;
        }
        if (c->done) {
            c->sent = c->safe; /* what the calls hold is not sent as text */
            d->finish = true;
            d->reason = c->finish;
            memcpy(d->error, c->error, sizeof d->error);
            c->finish_sent = true;
        } else {
            all_sent = false;
        }
        if (d->first || d->len || d->n_toks || d->finish) st->n++;
        else free(d->text), free(d->toks), memset(d, 0, sizeof *d);
    }
    if (all_sent) {
        st->complete = true;
        job_usage(rc, j, &st->usage);
    }
    return st->n > 0 || st->complete || st->failed;
}

void resp_stream_render(const struct resp_ctx *rc, const struct resp_step *st, struct sbuf *out) {
    if (st->failed) {
        out->failed = true;
        return;
    }
    for (int k = 0; k < st->n; k++) {
        const struct resp_delta *d = &st->d[k];
        if (d->first) {
            if (rc->route == API_ROUTE_CHAT)
                emit(out, chunk_json(rc, st->tok, d->index, "", 0, true, NULL, 0, NULL, 0, NULL));
            else if (rc->echo && (rc->echo_len || st->ptoks))
                emit(out, chunk_json(rc, st->tok, d->index, rc->echo, rc->echo_len, false, st->ptoks, st->n_ptoks,
                                     NULL, 0, NULL));
        }
        if (d->len || d->n_toks)
            emit(out, chunk_json(rc, st->tok, d->index, d->text ? d->text : "", d->len, false,
                                 NULL, 0, st->logprobs && d->n_toks ? d->toks : NULL, d->n_toks, NULL));
        json_t *calls = d->calls ? json_loads(d->calls, 0, NULL) : NULL;
        for (size_t c = 0; c < json_array_size(calls); c++) { /* one chunk a call */
            json_t *root = chunk_json(rc, st->tok, d->index, NULL, 0, false, NULL, 0, NULL, 0, NULL);
            json_t *delta = json_object_get(json_array_get(json_object_get(root, "choices"), 0), "delta");
            json_t *one = json_array();
            json_array_append(one, json_array_get(calls, c));
            json_object_set_new(delta, "tool_calls", one);
            emit(out, root);
        }
        if (d->finish) {
            if (d->reason == ENGINE_FINISH_ERROR) {
                struct api_error e;
                api_fail(&e, 500, "server_error", NULL, NULL, "Generation failed: %s", d->error);
                char *s = api_error_json(&e);
                if (s) {
                    sbuf_add(out, "data: ", 6);
                    sbuf_add(out, s, strlen(s));
                    sbuf_add(out, "\n\n", 2);
                    free(s);
                }
            }
            emit(out, chunk_json(rc, st->tok, d->index, rc->route == API_ROUTE_CHAT ? NULL : "", 0, false,
                                 NULL, 0, NULL, 0,
                                 calls && d->reason == ENGINE_FINISH_STOP ? "tool_calls" : resp_finish_reason(d->reason)));
        }
        json_decref(calls);
    }
    if (!st->complete) return;
    if (rc->include_usage) {
        json_t *root = envelope(rc, true);
        json_object_set_new(root, "choices", json_array());
        json_object_set_new(root, "usage", usage_json(&st->usage));
        emit(out, root);
    }
    sbuf_add(out, "data: [DONE]\n\n", 14);
}

void resp_step_free(struct resp_step *st) {
    for (int k = 0; k < st->n && st->d; k++) {
        free(st->d[k].text);
        free(st->d[k].toks);
        free(st->d[k].calls);
    }
    free(st->d);
    memset(st, 0, sizeof *st);
}

bool resp_stream_step(const struct resp_ctx *rc, struct job *j, struct sbuf *out) {
    struct resp_step st;
    resp_stream_take(rc, j, &st);
    resp_stream_render(rc, &st, out);
    bool complete = st.complete;
    resp_step_free(&st);
    return complete;
}

static json_t *model_object(const char *name, int64_t created, int n_ctx) {
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(name));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(created));
    json_object_set_new(m, "owned_by", json_string("kvik"));
    json_object_set_new(m, "max_model_len", json_integer(n_ctx));
    return m;
}

char *resp_models(const char *const *names, const int *n_ctx, int n, int64_t created, bool list) {
    json_t *root;
    if (list) {
        root = json_object();
        json_object_set_new(root, "object", json_string("list"));
        json_t *data = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(data, model_object(names[i], created, n_ctx[i]));
        json_object_set_new(root, "data", data);
    } else {
        root = model_object(names[0], created, n_ctx[0]);
    }
    char *s = json_dumps(root, RESP_JSON_FLAGS);
    json_decref(root);
    return s;
}

/* Standard base64 (RFC 4648, with padding) of n bytes, NUL-terminated. */
static char *base64(const uint8_t *p, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = malloc((n + 2) / 3 * 4 + 1), *o = s;
    if (!s) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = A[v >> 18 & 63];
        *o++ = A[v >> 12 & 63];
        *o++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? A[v & 63] : '=';
    }
    *o = 0;
    return s;
}

char *resp_embeddings(const float *vecs, int n, int dim, bool b64, const char *model, int64_t prompt_tokens) {
    json_t *root = json_object(), *data = json_array();
    bool ok = root && data;
    for (int i = 0; ok && i < n; i++) {
        const float *v = vecs + (size_t)i * (size_t)dim;
        json_t *item = json_object(), *emb;
        if (b64) {
            uint8_t *bytes = malloc((size_t)dim * 4);
            char *s = NULL;
            if (bytes) {
                for (int k = 0; k < dim; k++) {
                    uint32_t u = f32_to_bits(v[k]);
                    for (int b = 0; b < 4; b++) bytes[4 * k + b] = (uint8_t)(u >> (8 * b));
                }
                s = base64(bytes, (size_t)dim * 4);
            }
            free(bytes);
            emb = s ? json_string(s) : NULL;
            free(s);
        } else {
            emb = json_array();
            for (int k = 0; emb && k < dim; k++) json_array_append_new(emb, json_real((double)v[k]));
        }
        ok = item && emb;
        if (!ok) {
            json_decref(item);
            json_decref(emb);
            break;
        }
        json_object_set_new(item, "object", json_string("embedding"));
        json_object_set_new(item, "index", json_integer(i));
        json_object_set_new(item, "embedding", emb);
        json_array_append_new(data, item);
    }
    char *s = NULL;
    if (ok) {
        json_object_set_new(root, "object", json_string("list"));
        json_object_set_new(root, "data", data);
        data = NULL;
        json_object_set_new(root, "model", json_string(model));
        json_t *usage = json_object();
        json_object_set_new(usage, "prompt_tokens", json_integer(prompt_tokens));
        json_object_set_new(usage, "total_tokens", json_integer(prompt_tokens));
        json_object_set_new(root, "usage", usage);
        s = json_dumps(root, RESP_JSON_FLAGS);
    }
    json_decref(data);
    json_decref(root);
    return s;
}

char *resp_rerank(const struct api_rank *ranks, int n, const struct api_rerank_request *req, const char *model,
                  int64_t tokens) {
    json_t *results = json_array();
    for (int i = 0; results && i < n; i++) {
        json_t *x = json_pack("{s:i, s:f}", "index", ranks[i].index, "relevance_score", (double)ranks[i].score);
        if (x && req)
            json_object_set_new(x, "document",
                                json_pack("{s:s%}", "text", req->docs[ranks[i].index], req->lens[ranks[i].index]));
        json_array_append_new(results, x);
    }
    json_t *root = json_pack("{s:s, s:s, s:o, s:{s:I, s:I}}", "object", "list", "model", model, "results", results,
                             "usage", "prompt_tokens", (json_int_t)tokens, "total_tokens", (json_int_t)tokens);
    char *body = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return body;
}
