/*
 * eval_url.c — `kvik eval --url`: a task file's cases against an
 * OpenAI-compatible server (eval_url.h). One libcurl handle, reused for
 * every request (keep-alive); bodies built and read with jansson.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "cli/eval_url.h"

enum { URL_MAX_BODY = 64 << 20 }; /* bytes of one response at most */

struct eval_url {
    CURL *curl;
    char *base;  /* "http://HOST:PORT" without a trailing slash or "/v1" */
    char *auth;  /* "Authorization: Bearer KEY", or NULL */
    char *model;
};

struct buf {
    char *p;
    size_t len, cap;
    bool over;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *user) {
    struct buf *b = user;
    size_t n = size * nmemb;
    if (b->len + n + 1 > URL_MAX_BODY) {
        b->over = true;
        return 0;
    }
    if (b->len + n + 1 > b->cap) {
        size_t nc = (b->cap ? b->cap * 2 : 4096) + n;
        char *np = realloc(b->p, nc);
        if (!np) return 0;
        b->p = np, b->cap = nc;
    }
    memcpy(b->p + b->len, ptr, n);
    b->len += n;
    b->p[b->len] = 0;
    return n;
}

/* One request: GET when body is NULL, else POST body as JSON. *status the
 * HTTP status, *out the parsed reply (NULL when it is not JSON). */
static kvik_status call(struct eval_url *u, const char *path, json_t *body, long *status, json_t **out,
                        struct kvik_err *err) {
    *status = 0, *out = NULL;
    char url[4096];
    snprintf(url, sizeof url, "%s%s", u->base, path);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !text) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (u->auth) h = curl_slist_append(h, u->auth);
    struct buf b = {0};
    curl_easy_reset(u->curl);
    curl_easy_setopt(u->curl, CURLOPT_URL, url);
    curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(u->curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(u->curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(u->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(u->curl, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(u->curl, CURLOPT_TIMEOUT, 3600L);
    if (text) curl_easy_setopt(u->curl, CURLOPT_POSTFIELDS, text);
    CURLcode rc = curl_easy_perform(u->curl);
    curl_slist_free_all(h);
    free(text);
    kvik_status st = KVIK_OK;
    if (rc != CURLE_OK) {
        st = err_set(err, KVIK_ERR_IO, "%s: %s", url, b.over ? "the response is too large" : curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(u->curl, CURLINFO_RESPONSE_CODE, status);
        json_error_t je;
        *out = b.p ? json_loadb(b.p, b.len, 0, &je) : NULL;
    }
    free(b.p);
    return st;
}

/* The error a non-200 answer carries: OpenAI's error.message, else the status. */
static kvik_status refused(const char *path, long status, json_t *reply, struct kvik_err *err) {
    json_t *m = json_object_get(json_object_get(reply, "error"), "message");
    if (!json_is_string(m)) m = json_object_get(reply, "message");
    return err_set(err, status >= 400 && status < 500 ? KVIK_ERR_INVALID_ARG : KVIK_ERR_IO, "%s: HTTP %ld%s%s",
                   path, status, json_is_string(m) ? ": " : "", json_is_string(m) ? json_string_value(m) : "");
}

struct eval_url *eval_url_new(const char *url, const char *api_key, const char *model, struct kvik_err *err) {
    static bool curl_ready;
    if (!curl_ready) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        curl_ready = true;
    }
    struct eval_url *u = calloc(1, sizeof *u);
    if (!u || !(u->curl = curl_easy_init()) || !(u->base = strdup(url))) goto nomem;
    size_t n = strlen(u->base);
    while (n && u->base[n - 1] == '/') u->base[--n] = 0;
    if (n >= 3 && !strcmp(u->base + n - 3, "/v1")) u->base[n -= 3] = 0;
    if (strncmp(u->base, "http://", 7) && strncmp(u->base, "https://", 8)) {
        err_set(err, KVIK_ERR_INVALID_ARG, "--url %s: not an http:// or https:// URL", url);
        goto fail;
    }
    if (api_key) {
        size_t k = strlen(api_key) + 32;
        if (!(u->auth = malloc(k))) goto nomem;
        snprintf(u->auth, k, "Authorization: Bearer %s", api_key);
    }
    if (model) {
        if (!(u->model = strdup(model))) goto nomem;
        return u;
    }
    long status;
    json_t *r;
    if (call(u, "/v1/models", NULL, &status, &r, err)) goto fail;
    json_t *id = json_object_get(json_array_get(json_object_get(r, "data"), 0), "id");
    if (status == 200 && json_is_string(id)) u->model = strdup(json_string_value(id));
    else if (status != 200) refused("/v1/models", status, r, err);
    else err_set(err, KVIK_ERR_FORMAT, "%s/v1/models names no model; give one with --model", u->base);
    json_decref(r);
    if (!u->model) {
        if (status == 200 && json_is_string(id)) goto nomem;
        goto fail;
    }
    return u;
nomem:
    err_set(err, KVIK_ERR_NOMEM, "out of memory");
fail:
    eval_url_free(u);
    return NULL;
}

void eval_url_free(struct eval_url *u) {
    if (!u) return;
    if (u->curl) curl_easy_cleanup(u->curl);
    free(u->base), free(u->auth), free(u->model);
    free(u);
}

const char *eval_url_model(const struct eval_url *u) { return u->model; }

kvik_status eval_url_generate(struct eval_url *u, const struct eval_case *c, char **reply, size_t *len,
                              struct kvik_err *err) {
    *reply = NULL, *len = 0;
    bool chat = c->prompt == NULL;
    const char *path = chat ? "/v1/chat/completions" : "/v1/completions";
    json_t *body = json_object();
    json_object_set_new(body, "model", json_string(u->model));
    if (chat) {
        json_t *msgs = json_array();
        for (int i = 0; i < c->n_msgs; i++) {
            json_t *m = json_object();
            json_object_set_new(m, "role", json_string(c->msgs[i].role));
            json_object_set_new(m, "content", json_string(c->msgs[i].content));
            json_array_append_new(msgs, m);
        }
        json_object_set_new(body, "messages", msgs);
    } else {
        json_object_set_new(body, "prompt", json_string(c->prompt));
    }
    json_object_set_new(body, "max_tokens", json_integer(c->max_tokens));
    json_object_set_new(body, "temperature", json_real(c->temperature));
    json_object_set_new(body, "seed", json_integer((json_int_t)c->seed));
    if (c->temperature > 0) { /* kvik's command-line cut-offs, as kvik eval -m samples */
        json_object_set_new(body, "top_k", json_integer(40));
        json_object_set_new(body, "top_p", json_real(0.95));
        json_object_set_new(body, "min_p", json_real(0.05));
    }
    long status;
    json_t *r;
    kvik_status st = call(u, path, body, &status, &r, err);
    json_decref(body);
    if (st) return st;
    if (status != 200) {
        st = refused(path, status, r, err);
        json_decref(r);
        return st;
    }
    json_t *ch = json_array_get(json_object_get(r, "choices"), 0);
    json_t *msg = json_object_get(ch, "message");
    json_t *t = chat ? json_object_get(msg, "content") : json_object_get(ch, "text");
    if (chat && json_is_object(msg) && (!t || json_is_null(t))) t = NULL; /* a message with no content: empty */
    else if (!json_is_string(t)) {
        json_decref(r);
        return err_set(err, KVIK_ERR_FORMAT, "%s: the answer has no choices[0] %s", path, chat ? "message" : "text");
    }
    size_t n = t ? json_string_length(t) : 0;
    if (!(*reply = malloc(n + 1))) {
        json_decref(r);
        return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    }
    if (n) memcpy(*reply, json_string_value(t), n);
    (*reply)[n] = 0;
    *len = n;
    json_decref(r);
    return KVIK_OK;
}

/* The echoed prompt of text: its tokens (borrowed from *root, which the
 * caller frees) and their log-probabilities. */
static kvik_status echo(struct eval_url *u, const char *text, json_t **root, json_t **tokens, json_t **lps,
                        json_t **offs, struct kvik_err *err) {
    *root = *tokens = *lps = *offs = NULL;
    json_t *body = json_object();
    json_object_set_new(body, "model", json_string(u->model));
    json_object_set_new(body, "prompt", json_string(text));
    json_object_set_new(body, "echo", json_true());
    json_object_set_new(body, "logprobs", json_integer(1));
    json_object_set_new(body, "max_tokens", json_integer(0));
    json_object_set_new(body, "temperature", json_integer(0));
    long status;
    kvik_status st = call(u, "/v1/completions", body, &status, root, err);
    json_decref(body);
    if (st) return st;
    if (status != 200) {
        st = refused("/v1/completions", status, *root, err);
        json_t *param = json_object_get(json_object_get(*root, "error"), "param");
        const char *pn = json_is_string(param) ? json_string_value(param) : "";
        if (st == KVIK_ERR_INVALID_ARG && (!strcmp(pn, "echo") || !strcmp(pn, "logprobs") || !strcmp(pn, "max_tokens"))) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            st = err_set(err, KVIK_ERR_UNSUPPORTED,
                         "%s (choice cases need the prompt's log-probabilities: echo with logprobs and max_tokens 0)",
                         msg);
        }
        return st;
    }
    json_t *lp = json_object_get(json_array_get(json_object_get(*root, "choices"), 0), "logprobs");
    *tokens = json_object_get(lp, "tokens");
    *lps = json_object_get(lp, "token_logprobs");
    *offs = json_object_get(lp, "text_offset");
    size_t n = json_array_size(*tokens);
    if (!json_is_array(*tokens) || n == 0 || json_array_size(*lps) != n)
        return err_set(err, KVIK_ERR_UNSUPPORTED,
                       "the server at %s returns no log-probabilities for the prompt's tokens (echo with logprobs); "
                       "choice cases need them",
                       u->base);
    return KVIK_OK;
}

kvik_status eval_url_score(struct eval_url *u, const struct eval_case *c, double *scores, struct kvik_err *err) {
    json_t *proot, *ptoks, *plps, *poffs;
    kvik_status st = echo(u, c->prompt ? c->prompt : "", &proot, &ptoks, &plps, &poffs, err);
    if (st) {
        json_decref(proot);
        return st;
    }
    size_t n_p = json_array_size(ptoks), plen = strlen(c->prompt ? c->prompt : "");
    char *text = NULL;
    for (int k = 0; k < c->options.n && !st; k++) {
        size_t olen = strlen(c->options.s[k]);
        if (!(text = malloc(plen + olen + 1))) {
            st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(text, c->prompt ? c->prompt : "", plen);
        memcpy(text + plen, c->options.s[k], olen + 1);
        json_t *root, *toks, *lps, *offs;
        st = echo(u, text, &root, &toks, &lps, &offs, err);
        free(text);
        if (!st) {
            /* the option's tokens: after the prompt's own, when the joint
             * text starts with them; else those that end past the prompt's
             * bytes (text_offset) */
            size_t n = json_array_size(toks), first = n_p;
            bool same = n > n_p;
            for (size_t i = 0; same && i < n_p; i++)
                same = json_equal(json_array_get(toks, i), json_array_get(ptoks, i));
            if (!same) {
                first = n;
                for (size_t i = 0; i < n && first == n; i++) {
                    json_t *next = json_array_get(offs, i + 1);
                    size_t end = next ? (size_t)json_integer_value(next) : plen + olen;
                    if (end > plen) first = i;
                }
            }
            double sum = first < n ? 0 : -INFINITY;
            for (size_t i = first ? first : 1; i < n; i++) {
                json_t *v = json_array_get(lps, i);
                sum += json_is_number(v) ? json_number_value(v) : -INFINITY;
            }
            scores[k] = sum;
        }
        json_decref(root);
    }
    json_decref(proot);
    return st;
}
