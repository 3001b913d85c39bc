/*
 * fake_openai.c — the fake OpenAI-compatible server of fake_openai.h. One
 * thread per connection (libmicrohttpd), so a slow stream may simply sleep in
 * its content callback; each call of that callback hands out the next piece
 * of one event.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_openai.h"

struct fake_openai {
    struct MHD_Daemon *d;
    uint16_t port;
    int delay_us;
    pthread_mutex_t mu;
    int64_t requests, preemptions, in_flight;
    char *last_body;
};

/* One streamed reply. */
struct stream {
    struct fake_openai *srv;
    bool chat, usage, nodone, keepalive, crlf, split;
    int max_tokens, sent, prompt_words;
    int first_us, delay_us, drop_at, bad_at, err_at;
    int phase; /* 0 tokens, 1 finish, 2 usage, 3 done, 4 end */
    char buf[1024];
    size_t len, off;
};

static void sleep_us(int us) {
    if (us <= 0) return;
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* The integer after "#name=" in text, or -1. */
static int directive(const char *text, const char *name) {
    char key[32];
    snprintf(key, sizeof key, "#%s=", name);
    const char *p = strstr(text, key);
    return p ? atoi(p + strlen(key)) : -1;
}

static bool flag(const char *text, const char *name) {
    char key[32];
    snprintf(key, sizeof key, "#%s", name);
    return strstr(text, key) != NULL;
}

/* Formats the next event of s into s->buf; false at the end of the stream. */
static bool next_event(struct stream *s, bool *drop) {
    const char *nl = s->crlf ? "\r\n" : "\n";
    size_t n = 0;
    if (s->keepalive && s->phase < 4) n += (size_t)snprintf(s->buf + n, sizeof s->buf - n, ": keep-alive%s%s", nl, nl);
    if (s->phase == 0 && s->sent >= s->max_tokens) s->phase = 1;
    if (s->phase == 0) {
        if (s->drop_at >= 0 && s->sent == s->drop_at) {
            *drop = true;
            return false;
        }
        if (s->bad_at >= 0 && s->sent == s->bad_at) {
            snprintf(s->buf + n, sizeof s->buf - n, "data: {\"choices\": [{\"delta\": {\"content\": %s%s", nl, nl);
            s->phase = 4; /* the malformed event is the last thing sent */
            s->len = strlen(s->buf);
            s->off = 0;
            return true;
        }
        if (s->err_at >= 0 && s->sent == s->err_at) {
            snprintf(s->buf + n, sizeof s->buf - n,
                     "data: {\"error\":{\"message\":\"injected failure\",\"type\":\"server_error\",\"param\":null,"
                     "\"code\":null}}%s%sdata: [DONE]%s%s",
                     nl, nl, nl, nl);
            s->phase = 4;
            s->len = strlen(s->buf);
            s->off = 0;
            return true;
        }
        sleep_us(s->sent == 0 ? s->first_us : s->delay_us);
        if (s->chat)
            snprintf(s->buf + n, sizeof s->buf - n,
                     "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"fake-model\","
                     "\"choices\":[{\"index\":0,\"delta\":{%s\"content\":\" w%d\"},\"finish_reason\":null}]}%s%s",
                     s->sent == 0 ? "\"role\":\"assistant\"," : "", s->sent, nl, nl);
        else
            snprintf(s->buf + n, sizeof s->buf - n,
                     "data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":0,\"model\":\"fake-model\","
                     "\"choices\":[{\"index\":0,\"text\":\" w%d\",\"finish_reason\":null}]}%s%s",
                     s->sent, nl, nl);
        s->sent++;
    } else if (s->phase == 1) {
        snprintf(s->buf + n, sizeof s->buf - n,
                 "data: {\"id\":\"c\",\"object\":\"%s\",\"created\":0,\"model\":\"fake-model\","
                 "\"choices\":[{\"index\":0,%s,\"finish_reason\":\"length\"}]}%s%s",
                 s->chat ? "chat.completion.chunk" : "text_completion", s->chat ? "\"delta\":{}" : "\"text\":\"\"",
                 nl, nl);
        s->phase = s->usage ? 2 : 3;
    } else if (s->phase == 2) {
        snprintf(s->buf + n, sizeof s->buf - n,
                 "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"fake-model\","
                 "\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}%s%s",
                 s->prompt_words, s->sent, s->prompt_words + s->sent, nl, nl);
        s->phase = 3;
    } else if (s->phase == 3) {
        s->phase = 4;
        if (s->nodone) return false;
        snprintf(s->buf + n, sizeof s->buf - n, "data: [DONE]%s%s", nl, nl);
    } else {
        return false;
    }
    s->len = strlen(s->buf);
    s->off = 0;
    return true;
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max) {
    struct stream *s = cls;
    if (s->off == s->len) {
        bool drop = false;
        if (!next_event(s, &drop)) return drop ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = s->len - s->off;
    if (s->split && n > 7) n = 7;
    if (n > max) n = max;
    memcpy(out, s->buf + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    struct stream *s = cls;
    pthread_mutex_lock(&s->srv->mu);
    s->srv->in_flight--;
    pthread_mutex_unlock(&s->srv->mu);
    free(s);
}

struct upload {
    char *p;
    size_t n;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, const char *body) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *msg) {
    char body[512];
    snprintf(body, sizeof body,
             "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}", msg);
    return reply(c, status, "application/json", body);
}

static int count_words(const char *s) {
    int n = 0;
    bool in = false;
    for (; *s; s++) {
        bool sp = *s == ' ' || *s == '\n' || *s == '\t';
        if (!sp && !in) n++;
        in = !sp;
    }
    return n;
}

static enum MHD_Result completion(struct fake_openai *f, struct MHD_Connection *c, bool chat, const char *body,
                                  size_t len) {
    pthread_mutex_lock(&f->mu);
    f->requests++;
    free(f->last_body);
    f->last_body = strndup(body, len);
    pthread_mutex_unlock(&f->mu);
    json_t *root = json_loadb(body, len, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return reply_error(c, 400, "body is not a JSON object");
    }
    /* the prompt: all message contents, or the prompt string */
    char text[65536];
    size_t tn = 0;
    text[0] = 0;
    if (chat) {
        json_t *msgs = json_object_get(root, "messages");
        for (size_t i = 0; json_is_array(msgs) && i < json_array_size(msgs); i++) {
            json_t *m = json_object_get(json_array_get(msgs, i), "content");
            if (json_is_string(m) && tn < sizeof text - 1)
                tn += (size_t)snprintf(text + tn, sizeof text - tn, "%s%s", tn ? " " : "", json_string_value(m));
        }
    } else {
        json_t *p = json_object_get(root, "prompt");
        if (json_is_string(p)) snprintf(text, sizeof text, "%s", json_string_value(p));
    }
    json_t *mt = json_object_get(root, "max_tokens");
    int max_tokens = json_is_integer(mt) ? (int)json_integer_value(mt) : 16;
    bool stream = json_is_true(json_object_get(root, "stream"));
    bool usage = json_is_true(json_object_get(json_object_get(root, "stream_options"), "include_usage"));
    json_decref(root);
    int status = directive(text, "status");
    if (status >= 100 && status <= 599) return reply_error(c, (unsigned)status, "injected status");
    if (flag(text, "preempt")) {
        pthread_mutex_lock(&f->mu);
        f->preemptions++;
        pthread_mutex_unlock(&f->mu);
    }
    if (!stream) { /* the same words a stream sends, at once */
        char words[2048] = "", out[2400];
        size_t wn = 0;
        for (int i = 0; i < max_tokens && wn + 16 < sizeof words; i++)
            wn += (size_t)snprintf(words + wn, sizeof words - wn, " w%d", i);
        if (chat)
            snprintf(out, sizeof out,
                     "{\"id\":\"c\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":"
                     "{\"role\":\"assistant\",\"content\":\"%s\"},\"finish_reason\":\"length\"}]}",
                     words);
        else
            snprintf(out, sizeof out,
                     "{\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"%s\","
                     "\"logprobs\":null,\"finish_reason\":\"length\"}]}",
                     words);
        return reply(c, 200, "application/json", out);
    }
    struct stream *s = calloc(1, sizeof *s);
    if (!s) return MHD_NO;
    s->srv = f;
    s->chat = chat;
    s->usage = usage && !flag(text, "nousage");
    s->nodone = flag(text, "nodone");
    s->keepalive = flag(text, "keepalive");
    s->crlf = flag(text, "crlf");
    s->split = flag(text, "split");
    s->max_tokens = max_tokens < 0 ? 0 : max_tokens;
    s->prompt_words = count_words(text);
    int d = directive(text, "delay"), fi = directive(text, "first");
    s->delay_us = d >= 0 ? d * 1000 : f->delay_us;
    s->first_us = fi >= 0 ? fi * 1000 : s->delay_us;
    s->drop_at = directive(text, "drop");
    s->bad_at = directive(text, "bad");
    s->err_at = directive(text, "error");
    pthread_mutex_lock(&f->mu);
    f->in_flight++;
    pthread_mutex_unlock(&f->mu);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader, s, stream_free);
    if (!r) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result metrics(struct fake_openai *f, struct MHD_Connection *c) {
    pthread_mutex_lock(&f->mu);
    int64_t req = f->requests, pre = f->preemptions, fl = f->in_flight;
    pthread_mutex_unlock(&f->mu);
    double usage = (double)fl / 8.0;
    if (usage > 1) usage = 1;
    char body[2048];
    snprintf(body, sizeof body,
             "# HELP kvik_request_queue_time_seconds Time a request waited before it was first scheduled.\n"
             "# TYPE kvik_request_queue_time_seconds histogram\n"
             "kvik_request_queue_time_seconds_bucket{le=\"0.01\"} %lld\n"
             "kvik_request_queue_time_seconds_bucket{le=\"+Inf\"} %lld\n"
             "kvik_request_queue_time_seconds_sum %.6f\n"
             "kvik_request_queue_time_seconds_count %lld\n"
             "# TYPE kvik_request_prefill_time_seconds histogram\n"
             "kvik_request_prefill_time_seconds_sum %.6f\n"
             "kvik_request_prefill_time_seconds_count %lld\n"
             "# TYPE kvik_preemptions_total counter\n"
             "kvik_preemptions_total %lld\n"
             "# TYPE kvik_kv_cache_usage_ratio gauge\n"
             "kvik_kv_cache_usage_ratio %.4f\n",
             (long long)req, (long long)req, 0.001 * (double)req, (long long)req, 0.002 * (double)req,
             (long long)req, (long long)pre, usage);
    return reply(c, 200, "text/plain; version=0.0.4", body);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls) {
    struct fake_openai *f = cls;
    if (!strcmp(method, "GET")) {
        if (!strcmp(url, "/metrics")) return metrics(f, c);
        if (!strcmp(url, "/v1/models"))
            return reply(c, 200, "application/json",
                         "{\"object\":\"list\",\"data\":[{\"id\":\"fake-model\",\"object\":\"model\"}]}");
        return reply_error(c, 404, "not found");
    }
    if (strcmp(method, "POST") != 0) return reply_error(c, 405, "method not allowed");
    struct upload *u = *con_cls;
    if (!u) {
        if (!(u = calloc(1, sizeof *u))) return MHD_NO;
        *con_cls = u;
        return MHD_YES;
    }
    if (*upload_data_size) {
        char *np = realloc(u->p, u->n + *upload_data_size + 1);
        if (!np) return MHD_NO;
        u->p = np;
        memcpy(u->p + u->n, upload_data, *upload_data_size);
        u->n += *upload_data_size;
        u->p[u->n] = 0;
        *upload_data_size = 0;
        return MHD_YES;
    }
    const char *body = u->p ? u->p : "";
    if (!strcmp(url, "/v1/chat/completions")) return completion(f, c, true, body, u->n);
    if (!strcmp(url, "/v1/completions")) return completion(f, c, false, body, u->n);
    return reply_error(c, 404, "not found");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    struct upload *u = *con_cls;
    if (u) {
        free(u->p);
        free(u);
        *con_cls = NULL;
    }
}

struct fake_openai *fake_openai_start(uint16_t port, int delay_us_default) {
    struct fake_openai *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    pthread_mutex_init(&f->mu, NULL);
    f->delay_us = delay_us_default;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    f->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL, port, NULL,
                            NULL, handler, f, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, f, MHD_OPTION_CONNECTION_LIMIT, 2000,
                            MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
    if (!f->d) {
        pthread_mutex_destroy(&f->mu);
        free(f);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT);
    f->port = info ? info->port : port;
    return f;
}

uint16_t fake_openai_port(const struct fake_openai *f) { return f->port; }

void fake_openai_stop(struct fake_openai *f) {
    if (!f) return;
    MHD_stop_daemon(f->d);
    pthread_mutex_destroy(&f->mu);
    free(f->last_body);
    free(f);
}

int64_t fake_openai_requests(struct fake_openai *f) {
    pthread_mutex_lock(&f->mu);
    int64_t n = f->requests;
    pthread_mutex_unlock(&f->mu);
    return n;
}

char *fake_openai_last_body(struct fake_openai *f) {
    pthread_mutex_lock(&f->mu);
    char *s = f->last_body ? strdup(f->last_body) : NULL;
    pthread_mutex_unlock(&f->mu);
    return s;
}
