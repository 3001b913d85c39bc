/*
 * client.c — one run of the load generator on libcurl's multi interface.
 *
 * One thread drives every request: the loop releases requests at their
 * arrival times (arrival.c) while fewer than --max-concurrency are in
 * flight, lets libcurl move bytes, and waits in curl_multi_poll until a
 * socket is ready or the next arrival (or /metrics poll) is due. Each
 * request is a streamed POST; the write callback stamps every piece of the
 * response with CLOCK_MONOTONIC and feeds it to the SSE parser, so an event's
 * time is when its last byte was read. Bodies are built before the clock
 * starts, so the loop only moves bytes and parses events.
 *
 * How a request fails (enum lg_error):
 *   connect     libcurl could not resolve or connect
 *   http        the status was not 2xx (the body's error message is kept)
 *   malformed   an event was not an OpenAI chunk, or a 2xx body had no events
 *   stream_error  the server put an error object in the stream
 *   disconnect  the connection broke, or the stream ended before [DONE]
 *   timeout     --timeout passed first
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tools/loadgen/loadgen.h"

void lg_default_config(struct lg_config *c) {
    memset(c, 0, sizeof *c);
    c->endpoint = LG_ENDPOINT_CHAT;
    c->rate = INFINITY;
    c->burstiness = 1.0;
    c->timeout_s = 600;
    c->ignore_eos = true;
    c->temperature = -1;
    c->scrape_metrics = true;
    c->metrics_interval_s = 0.5;
}

void lg_result_free(struct lg_result *r) {
    for (int64_t i = 0; r->recs && i < r->n; i++) {
        free(r->recs[i].chunk_ns);
        free(r->recs[i].error_msg);
    }
    free(r->recs);
    memset(r, 0, sizeof *r);
}

/* ---- request bodies ------------------------------------------------------ */

char *lg_request_body(const struct lg_config *cfg, const char *model, const struct lg_prompt *p) {
    json_t *o = json_object();
    if (!o) return NULL;
    if (model && *model) json_object_set_new(o, "model", json_string(model));
    if (cfg->endpoint == LG_ENDPOINT_CHAT) {
        json_t *msgs = json_array();
        if (p->system) {
            json_t *m = json_object();
            json_object_set_new(m, "role", json_string("system"));
            json_object_set_new(m, "content", json_string(p->system));
            json_array_append_new(msgs, m);
        }
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("user"));
        json_object_set_new(m, "content", json_string(p->prompt));
        json_array_append_new(msgs, m);
        json_object_set_new(o, "messages", msgs);
    } else if (p->system) {
        size_t a = strlen(p->system), b = strlen(p->prompt);
        char *t = malloc(a + b + 3);
        if (!t) {
            json_decref(o);
            return NULL;
        }
        memcpy(t, p->system, a);
        memcpy(t + a, "\n\n", 2);
        memcpy(t + a + 2, p->prompt, b + 1);
        json_object_set_new(o, "prompt", json_string(t));
        free(t);
    } else {
        json_object_set_new(o, "prompt", json_string(p->prompt));
    }
    json_object_set_new(o, "max_tokens", json_integer(p->output_len));
    json_object_set_new(o, "stream", json_true());
    json_t *so = json_object();
    json_object_set_new(so, "include_usage", json_true());
    json_object_set_new(o, "stream_options", so);
    if (cfg->ignore_eos) json_object_set_new(o, "ignore_eos", json_true());
    if (cfg->temperature >= 0) json_object_set_new(o, "temperature", json_real(cfg->temperature));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* ---- URLs -------------------------------------------------------------------- */

/* cfg->url without trailing slashes or a trailing /v1 (malloc'd), NULL if not http(s). */
static char *base_url(const char *url) {
    if (!url || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) return NULL;
    size_t n = strlen(url);
    while (n > 8 && url[n - 1] == '/') n--;
    if (n > 11 && !memcmp(url + n - 3, "/v1", 3)) n -= 3;
    return strndup(url, n);
}

static char *join(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

/* ---- simple GETs (model list, /metrics) ------------------------------------------ */

struct body {
    char *p;
    size_t n, cap;
};

static size_t body_write(char *ptr, size_t size, size_t nmemb, void *ud) {
    struct body *b = ud;
    size_t n = size * nmemb;
    if (b->n + n + 1 > b->cap) {
        if (b->n + n > ((size_t)64 << 20)) return 0; /* 64 MiB is not a metrics page */
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n + 1) c *= 2;
        char *np = realloc(b->p, c);
        if (!np) return 0;
        b->p = np;
        b->cap = c;
    }
    memcpy(b->p + b->n, ptr, n);
    b->n += n;
    b->p[b->n] = 0;
    return n;
}

static CURL *get_handle(const char *url, struct curl_slist *hdr, struct body *b, long timeout_ms) {
    CURL *h = curl_easy_init();
    if (!h) return NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    return h;
}

/* GET url; the body if the status is 200 (malloc'd, NUL-terminated), else NULL. */
static char *http_get(const char *url, struct curl_slist *hdr, long timeout_ms, size_t *len) {
    struct body b = {0};
    CURL *h = get_handle(url, hdr, &b, timeout_ms);
    if (!h) return NULL;
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK || status != 200 || !b.p) {
        free(b.p);
        return NULL;
    }
    *len = b.n;
    return b.p;
}

/* The first model id of GET /v1/models into out ("" if none). */
static void first_model(const char *base, struct curl_slist *hdr, char *out, size_t cap) {
    out[0] = 0;
    char *url = join(base, "/v1/models");
    size_t len = 0;
    char *s = url ? http_get(url, hdr, 5000, &len) : NULL;
    free(url);
    if (!s) return;
    json_t *root = json_loadb(s, len, 0, NULL);
    json_t *id = json_object_get(json_array_get(json_object_get(root, "data"), 0), "id");
    if (json_is_string(id)) snprintf(out, cap, "%s", json_string_value(id));
    json_decref(root);
    free(s);
}

struct scrape {
    bool ok;
    bool kvik; /* any of kvik's metrics was there (another server's are not read) */
    double queue_sum, queue_count, prefill_sum, prefill_count, preempt, kv_usage;
    bool has_kv;
};

static void scrape_read(const char *s, size_t n, struct scrape *sc) {
    memset(sc, 0, sizeof *sc);
    sc->ok = true;
    bool k = prom_sum(s, n, "kvik_request_queue_time_seconds_sum", &sc->queue_sum);
    k |= prom_sum(s, n, "kvik_request_queue_time_seconds_count", &sc->queue_count);
    k |= prom_sum(s, n, "kvik_request_prefill_time_seconds_sum", &sc->prefill_sum);
    k |= prom_sum(s, n, "kvik_request_prefill_time_seconds_count", &sc->prefill_count);
    k |= prom_sum(s, n, "kvik_preemptions_total", &sc->preempt);
    sc->has_kv = prom_sum(s, n, "kvik_kv_cache_usage_ratio", &sc->kv_usage);
    sc->kvik = k || sc->has_kv;
}

static bool scrape_now(const char *url, struct curl_slist *hdr, struct scrape *sc) {
    size_t n = 0;
    char *s = http_get(url, hdr, 3000, &n);
    memset(sc, 0, sizeof *sc);
    if (!s) return false;
    scrape_read(s, n, sc);
    free(s);
    return true;
}

/* ---- streamed requests -------------------------------------------------------------- */

struct req {
    struct lg_record *rec;
    CURL *h;
    char *body;
    struct sse_parser sse;
    int64_t t0;            /* the run's start, clock_ns() */
    int64_t now;           /* time of the piece being parsed, from t0 */
    int64_t bytes;
    long status;           /* 0 until the first piece */
    bool done_seen;
    enum lg_error err;     /* set by the parser (malformed, stream_error) */
    char msg[200];
    struct body errbody;   /* non-2xx body, up to 4 KiB */
    char curl_err[CURL_ERROR_SIZE];
};

static bool on_event(void *ctx, const char *data, size_t len) {
    struct req *q = ctx;
    if (q->done_seen) return true; /* events after [DONE] do not count */
    struct chunk_info ci;
    chunk_parse(data, len, &ci);
    struct lg_record *r = q->rec;
    switch (ci.kind) {
    case CHUNK_DONE:
        q->done_seen = true;
        return true;
    case CHUNK_ERROR:
        q->err = LG_ERR_STREAM;
        snprintf(q->msg, sizeof q->msg, "%s", ci.message);
        return false;
    case CHUNK_MALFORMED:
        q->err = LG_ERR_MALFORMED;
        snprintf(q->msg, sizeof q->msg, "%s", ci.message);
        return false;
    case CHUNK_DATA:
        break;
    }
    if (ci.content_bytes > 0) {
        if (r->n_chunks == r->chunk_cap) {
            int32_t nc = r->chunk_cap ? r->chunk_cap * 2 : 64;
            int64_t *np = realloc(r->chunk_ns, sizeof *np * (size_t)nc);
            if (!np) {
                q->err = LG_ERR_MALFORMED;
                snprintf(q->msg, sizeof q->msg, "out of memory");
                return false;
            }
            r->chunk_ns = np;
            r->chunk_cap = nc;
        }
        r->chunk_ns[r->n_chunks++] = q->now;
    }
    if (ci.has_usage) {
        r->usage_given = true;
        if (ci.prompt_tokens >= 0) r->prompt_tokens = ci.prompt_tokens;
        if (ci.completion_tokens >= 0) r->output_tokens = ci.completion_tokens;
    }
    return true;
}

static size_t stream_write(char *ptr, size_t size, size_t nmemb, void *ud) {
    struct req *q = ud;
    size_t n = size * nmemb;
    q->now = clock_ns() - q->t0;
    q->rec->t_end_ns = q->now;
    q->bytes += (int64_t)n;
    if (q->status == 0) curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &q->status);
    if (q->status < 200 || q->status > 299) {
        size_t room = q->errbody.n < 4096 ? 4096 - q->errbody.n : 0;
        if (room) body_write(ptr, 1, n < room ? n : room, &q->errbody);
        return n;
    }
    if (!sse_feed(&q->sse, ptr, n, on_event, q)) {
        if (q->err == LG_ERR_NONE) {
            q->err = LG_ERR_MALFORMED;
            snprintf(q->msg, sizeof q->msg, "an SSE line or event over %zu bytes", SSE_MAX_EVENT);
        }
        return 0; /* abort the transfer */
    }
    return n;
}

/* The message of an OpenAI error body, or its first line. */
static void http_error_msg(struct req *q) {
    const char *m = NULL;
    json_t *root = q->errbody.p ? json_loadb(q->errbody.p, q->errbody.n, 0, NULL) : NULL;
    json_t *e = json_object_get(root, "error");
    json_t *jm = json_is_object(e) ? json_object_get(e, "message") : e;
    if (json_is_string(jm)) m = json_string_value(jm);
    char line[120] = "";
    if (!m && q->errbody.p) {
        size_t k = 0;
        for (; k < sizeof line - 1 && k < q->errbody.n && q->errbody.p[k] != '\n' && q->errbody.p[k] != '\r'; k++)
            line[k] = q->errbody.p[k];
        line[k] = 0;
        m = line;
    }
    snprintf(q->msg, sizeof q->msg, "HTTP %ld%s%s", q->status, m && *m ? ": " : "", m ? m : "");
    json_decref(root);
}

/* Classifies a finished transfer into q->rec. */
static void finish(struct req *q, CURLcode rc) {
    struct lg_record *r = q->rec;
    if (q->status == 0) curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &q->status);
    r->http_status = (int)q->status;
    enum lg_error e = q->err;
    if (e == LG_ERR_NONE) {
        if (q->status != 0 && (q->status < 200 || q->status > 299)) {
            e = LG_ERR_HTTP;
            http_error_msg(q);
        } else if (rc == CURLE_OPERATION_TIMEDOUT) {
            e = LG_ERR_TIMEOUT;
        } else if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
                   rc == CURLE_COULDNT_RESOLVE_PROXY) {
            e = LG_ERR_CONNECT;
        } else if (rc != CURLE_OK) {
            e = LG_ERR_DISCONNECT;
        } else if (!q->done_seen) {
            if (q->sse.n_events == 0 && q->bytes > 0) {
                e = LG_ERR_MALFORMED;
                snprintf(q->msg, sizeof q->msg, "a %lld-byte response without SSE events", (long long)q->bytes);
            } else {
                e = LG_ERR_DISCONNECT;
                snprintf(q->msg, sizeof q->msg, "the stream ended before data: [DONE]%s",
                         sse_pending(&q->sse) ? " (in the middle of an event)" : "");
            }
        }
        if (e != LG_ERR_NONE && e != LG_ERR_HTTP && !q->msg[0])
            snprintf(q->msg, sizeof q->msg, "%.190s", q->curl_err[0] ? q->curl_err : curl_easy_strerror(rc));
    }
    r->error = e;
    if (e != LG_ERR_NONE) {
        r->t_end_ns = clock_ns() - q->t0;
        r->error_msg = strdup(q->msg);
    }
    if (!r->usage_given || r->output_tokens < 0) r->output_tokens = r->n_chunks;
}

static void req_free(struct req *q) {
    if (!q) return;
    if (q->h) curl_easy_cleanup(q->h);
    sse_free(&q->sse);
    free(q->errbody.p);
}

/* The easy handle of one streamed request (made when it is sent, so memory
 * follows the requests in flight, not the whole dataset). */
static CURL *stream_handle(struct req *q, const char *url, struct curl_slist *hdr, const struct lg_config *cfg) {
    CURL *h = curl_easy_init();
    if (!h) return NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(q->body));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stream_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(h, CURLOPT_PRIVATE, q);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, q->curl_err);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    if (cfg->timeout_s > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(cfg->timeout_s * 1000.0));
    return h;
}

/* ---- the loop ----------------------------------------------------------------------- */

static double cpu_seconds(const struct timeval *tv) { return (double)tv->tv_sec + (double)tv->tv_usec * 1e-6; }

kvik_status lg_run(const struct lg_config *cfg, const struct lg_dataset *ds, struct lg_result *out,
                   struct kvik_err *err) {
    memset(out, 0, sizeof *out);
    out->server.kv_usage_peak = -1;
    char *base = base_url(cfg->url);
    if (!base) return err_set(err, KVIK_ERR_INVALID_ARG, "--url must start with http:// or https:// (got '%s')",
                              cfg->url ? cfg->url : "");
    kvik_status st = KVIK_OK;
    int64_t n = ds->n;
    char *url = NULL, *metrics_url = NULL;
    struct curl_slist *hdr = NULL, *get_hdr = NULL;
    struct req *reqs = NULL;
    double *arr = NULL;
    CURLM *multi = NULL;
    CURL *poll_h = NULL;
    struct body poll_body = {0};
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        free(base);
        return err_set(err, KVIK_ERR_IO, "libcurl failed to start");
    }
    url = join(base, cfg->endpoint == LG_ENDPOINT_CHAT ? "/v1/chat/completions" : "/v1/completions");
    metrics_url = join(base, "/metrics");
    out->recs = calloc((size_t)(n > 0 ? n : 1), sizeof *out->recs);
    reqs = calloc((size_t)(n > 0 ? n : 1), sizeof *reqs);
    arr = malloc(sizeof *arr * (size_t)(n > 0 ? n : 1));
    if (!url || !metrics_url || !out->recs || !reqs || !arr) goto nomem;
    out->n = n;

    char auth[512];
    if (cfg->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", cfg->api_key);
        if (!(get_hdr = curl_slist_append(NULL, auth))) goto nomem;
    }
    struct curl_slist *t;
    if (!(t = curl_slist_append(NULL, "Content-Type: application/json"))) goto nomem;
    hdr = t;
    if (!(t = curl_slist_append(hdr, "Accept: text/event-stream"))) goto nomem;
    if (!(t = curl_slist_append(hdr, "Expect:"))) goto nomem; /* no 100-continue round trip */
    if (cfg->api_key && !(t = curl_slist_append(hdr, auth))) goto nomem;

    /* the model: given, or the server's first */
    if (cfg->model) snprintf(out->model, sizeof out->model, "%s", cfg->model);
    else first_model(base, get_hdr, out->model, sizeof out->model);

    /* everything a request needs is made before the clock starts */
    lg_arrivals(cfg->rate, cfg->burstiness, cfg->seed, n, arr);
    for (int64_t i = 0; i < n; i++) {
        struct lg_record *r = &out->recs[i];
        r->index = i;
        r->prompt_tokens = ds->items[i].prompt_tokens;
        r->output_tokens = -1;
        r->expected_output = ds->items[i].output_len;
        r->chunk_cap = ds->items[i].output_len + 2 > 2 ? ds->items[i].output_len + 2 : 64;
        if (r->chunk_cap > 1024) r->chunk_cap = 1024; /* grows if the server sends more */
        r->chunk_ns = malloc(sizeof *r->chunk_ns * (size_t)r->chunk_cap);
        struct req *q = &reqs[i];
        q->rec = r;
        sse_init(&q->sse);
        q->body = lg_request_body(cfg, out->model, &ds->items[i]);
        if (!r->chunk_ns || !q->body) goto nomem;
    }

    /* the server's view before */
    struct scrape before = {0}, after = {0};
    bool scrape = cfg->scrape_metrics && scrape_now(metrics_url, get_hdr, &before);
    if (scrape && before.has_kv) out->server.kv_usage_peak = before.kv_usage;

    if (!(multi = curl_multi_init())) goto nomem;
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    int64_t t0 = clock_ns(), next = 0, done = 0, in_flight = 0, last_progress = 0;
    int64_t last_poll = -(int64_t)(cfg->metrics_interval_s * 1e9); /* the first poll at once */
    int64_t first_send = -1, out_tokens = 0;
    bool progress = !cfg->quiet && isatty(2);
    int32_t maxc = cfg->max_concurrency;
    while (done < n) {
        int64_t now = clock_ns() - t0;
        while (next < n && (int64_t)(arr[next] * 1e9) <= now && (maxc <= 0 || in_flight < maxc)) {
            struct req *q = &reqs[next];
            q->t0 = t0;
            q->rec->t_arrival_ns = (int64_t)(arr[next] * 1e9);
            q->rec->t_send_ns = clock_ns() - t0;
            q->rec->t_end_ns = q->rec->t_send_ns;
            if (first_send < 0) first_send = q->rec->t_send_ns;
            if (!(q->h = stream_handle(q, url, hdr, cfg))) goto nomem;
            if (curl_multi_add_handle(multi, q->h) != CURLM_OK) {
                st = err_set(err, KVIK_ERR_IO, "libcurl refused a request");
                goto fail;
            }
            next++;
            in_flight++;
            if (in_flight > out->max_in_flight) out->max_in_flight = in_flight;
        }
        /* the server's KV-cache use while it works */
        if (scrape && !poll_h && now - last_poll >= (int64_t)(cfg->metrics_interval_s * 1e9)) {
            poll_body.n = 0;
            if ((poll_h = get_handle(metrics_url, get_hdr, &poll_body, 2000))) {
                curl_easy_setopt(poll_h, CURLOPT_PRIVATE, NULL);
                if (curl_multi_add_handle(multi, poll_h) != CURLM_OK) {
                    curl_easy_cleanup(poll_h);
                    poll_h = NULL;
                }
            }
            last_poll = now;
        }
        int running = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        int left;
        bool freed = false;
        while ((msg = curl_multi_info_read(multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            CURL *h = msg->easy_handle;
            CURLcode rc = msg->data.result;
            if (h == poll_h) {
                long status = 0;
                curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
                if (rc == CURLE_OK && status == 200 && poll_body.p) {
                    struct scrape sc;
                    scrape_read(poll_body.p, poll_body.n, &sc);
                    out->server.polls++;
                    if (sc.has_kv && sc.kv_usage > out->server.kv_usage_peak) out->server.kv_usage_peak = sc.kv_usage;
                }
                curl_multi_remove_handle(multi, h);
                curl_easy_cleanup(h);
                poll_h = NULL;
                continue;
            }
            struct req *q = NULL;
            curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&q);
            curl_multi_remove_handle(multi, h);
            finish(q, rc);
            if (q->rec->error == LG_ERR_NONE) out_tokens += q->rec->output_tokens;
            curl_easy_cleanup(q->h);
            q->h = NULL;
            sse_free(&q->sse);
            free(q->body);
            q->body = NULL;
            done++;
            in_flight--;
            freed = true;
        }
        now = clock_ns() - t0;
        if (progress && now - last_progress > 1000000000ll) {
            fprintf(stderr, "\rbench serve: %lld/%lld done, %lld in flight, %.0f output tok/s   ", (long long)done,
                    (long long)n, (long long)in_flight, (double)out_tokens / ((double)now * 1e-9));
            last_progress = now;
        }
        if (done == n) break;
        bool can_send = next < n && (maxc <= 0 || in_flight < maxc);
        if (freed && can_send && (int64_t)(arr[next] * 1e9) <= now) continue;
        int64_t wait_ns = 1000000000ll;
        if (can_send) wait_ns = (int64_t)(arr[next] * 1e9) - now;
        if (scrape && !poll_h) {
            int64_t poll_in = last_poll + (int64_t)(cfg->metrics_interval_s * 1e9) - now;
            if (poll_in < wait_ns) wait_ns = poll_in;
        }
        if (wait_ns < 0) wait_ns = 0;
        int wait_ms = (int)((wait_ns + 999999) / 1000000);
        if (running > 0 || wait_ms > 0) curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
    }
    int64_t t_end = clock_ns() - t0;
    getrusage(RUSAGE_SELF, &ru1);
    if (progress) fprintf(stderr, "\r%80s\r", "");
    out->wall_s = (double)t_end * 1e-9;
    int64_t last_end = 0;
    for (int64_t i = 0; i < n; i++)
        if (out->recs[i].t_end_ns > last_end) last_end = out->recs[i].t_end_ns;
    out->duration_s = n > 0 ? (double)(last_end - (first_send >= 0 ? first_send : 0)) * 1e-9 : 0;
    out->cpu_user_s = cpu_seconds(&ru1.ru_utime) - cpu_seconds(&ru0.ru_utime);
    out->cpu_sys_s = cpu_seconds(&ru1.ru_stime) - cpu_seconds(&ru0.ru_stime);

    if (poll_h) {
        curl_multi_remove_handle(multi, poll_h);
        curl_easy_cleanup(poll_h);
        poll_h = NULL;
    }
    if (scrape && scrape_now(metrics_url, get_hdr, &after) && (before.kvik || after.kvik)) {
        struct lg_server_view *sv = &out->server;
        sv->available = true;
        sv->queue_time_sum_s = after.queue_sum - before.queue_sum;
        sv->queue_time_count = after.queue_count - before.queue_count;
        sv->prefill_time_sum_s = after.prefill_sum - before.prefill_sum;
        sv->prefill_time_count = after.prefill_count - before.prefill_count;
        sv->preemptions = after.preempt - before.preempt;
        if (after.has_kv && after.kv_usage > sv->kv_usage_peak) sv->kv_usage_peak = after.kv_usage;
    }
    goto done;
nomem:
    st = err_set(err, KVIK_ERR_NOMEM, "out of memory preparing the run");
fail:
    lg_result_free(out);
done:
    if (poll_h) {
        curl_multi_remove_handle(multi, poll_h);
        curl_easy_cleanup(poll_h);
    }
    for (int64_t i = 0; reqs && i < n; i++) {
        if (reqs[i].h && multi) curl_multi_remove_handle(multi, reqs[i].h);
        req_free(&reqs[i]);
        free(reqs[i].body);
    }
    if (multi) curl_multi_cleanup(multi);
    free(poll_body.p);
    free(reqs);
    free(arr);
    curl_slist_free_all(hdr);
    curl_slist_free_all(get_hdr);
    free(url);
    free(metrics_url);
    free(base);
    curl_global_cleanup();
    return st;
}
