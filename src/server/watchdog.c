/*
 * watchdog.c — header and body deadlines of HTTP connections (see
 * watchdog.h). Connections are a doubly linked list under one mutex; the
 * thread scans it (at most --max-connections entries) each time it wakes,
 * which is at the nearest deadline or when an earlier one is set.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/watchdog.h"

enum watch_phase { PHASE_HEADERS, PHASE_BODY, PHASE_ANSWER, PHASE_CUT };

struct watch_conn {
    struct watch_conn *prev, *next;
    int fd;                 /* the connection's socket (libmicrohttpd's) */
    enum watch_phase phase;
    int64_t deadline;       /* ns on the monotonic clock; HEADERS and BODY only */
    bool line_seen;         /* the current request's line has arrived */
    bool reused;            /* a response was sent on it (kept alive since) */
    bool lingering;         /* CUT with a reply: only the sending side is shut, until deadline */
};

/* How long a cut connection with a reply keeps reading before its socket
 * is shut down for good: bytes the client sends meanwhile are read and
 * dropped, where a socket shut for reading would answer them with a reset
 * that can destroy the reply before the client reads it. */
#define WATCH_LINGER_NS 1000000000

struct watchdog {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* on the monotonic clock */
    pthread_t thread;
    bool stop;
    int64_t header_ns, body_ns;
    int64_t wake;           /* when the thread wakes next (ns) */
    struct watch_conn *head;
    _Atomic int64_t n_open;  /* connections in the list */
    char *reply;
    size_t reply_len;
    _Atomic uint64_t cuts[WATCH_CUT_COUNT];
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* With w->mu held: writes reply (if any) and shuts the socket down: with
 * a reply only its sending side, the rest after WATCH_LINGER_NS (the
 * thread's scan). A slow reader's full buffer drops the reply, never
 * blocks the caller. */
static void cut_locked(struct watchdog *w, struct watch_conn *c, const char *reply, size_t len,
                       enum watch_cut why) {
    size_t off = 0;
    while (reply && off < len) {
        ssize_t k = send(c->fd, reply + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k > 0) off += (size_t)k;
        else if (k < 0 && errno == EINTR) continue;
        else break;
    }
    if (reply && off > 0) {
        shutdown(c->fd, SHUT_WR);
        c->lingering = true;
        c->deadline = now_ns() + WATCH_LINGER_NS;
        if (c->deadline < w->wake) w->wake = c->deadline;
    } else {
        shutdown(c->fd, SHUT_RDWR);
    }
    c->phase = PHASE_CUT;
    atomic_fetch_add(&w->cuts[why], 1);
}

/* With w->mu held: c's deadline is now+ns; the thread is woken if that is
 * before its next wake-up. */
static void set_deadline(struct watchdog *w, struct watch_conn *c, int64_t ns) {
    c->deadline = now_ns() + ns;
    if (c->deadline < w->wake) {
        w->wake = c->deadline;
        pthread_cond_signal(&w->cv);
    }
}

static void *watch_main(void *arg) {
    struct watchdog *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        int64_t now = now_ns(), next = now + 1000000000; /* at least once a second */
        for (struct watch_conn *c = w->head; c; c = c->next) {
            if (c->lingering) {
                if (c->deadline <= now) {
                    shutdown(c->fd, SHUT_RDWR);
                    c->lingering = false;
                } else if (c->deadline < next) {
                    next = c->deadline;
                }
                continue;
            }
            if (c->phase != PHASE_HEADERS && c->phase != PHASE_BODY) continue;
            if (c->deadline <= now) {
                bool body = c->phase == PHASE_BODY;
                bool answer = body || c->line_seen || !c->reused;
                cut_locked(w, c, answer ? w->reply : NULL, w->reply_len,
                           body ? WATCH_CUT_BODY : answer ? WATCH_CUT_HEADERS : WATCH_CUT_IDLE);
                if (c->lingering && c->deadline < next) next = c->deadline;
            } else if (c->deadline < next) {
                next = c->deadline;
            }
        }
        w->wake = next;
        struct timespec ts = {.tv_sec = (time_t)(next / 1000000000), .tv_nsec = (long)(next % 1000000000)};
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

struct watchdog *watchdog_new(double header_s, double body_s, const char *reply) {
    struct watchdog *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->header_ns = (int64_t)(header_s * 1e9);
    w->body_ns = (int64_t)(body_s * 1e9);
    w->reply_len = strlen(reply);
    w->reply = malloc(w->reply_len + 1);
    if (!w->reply) {
        free(w);
        return NULL;
    }
    memcpy(w->reply, reply, w->reply_len + 1);
    w->wake = INT64_MAX;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w->reply);
        free(w);
        return NULL;
    }
    return w;
}

void watchdog_free(struct watchdog *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    while (w->head) { /* none if every connection was closed; freed regardless */
        struct watch_conn *c = w->head;
        w->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->reply);
    free(w);
}

struct watch_conn *watchdog_open(struct watchdog *w, int fd) {
    struct watch_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->phase = PHASE_HEADERS;
    pthread_mutex_lock(&w->mu);
    c->next = w->head;
    if (w->head) w->head->prev = c;
    w->head = c;
    atomic_fetch_add(&w->n_open, 1);
    set_deadline(w, c, w->header_ns);
    pthread_mutex_unlock(&w->mu);
    return c;
}

void watchdog_close(struct watchdog *w, struct watch_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&w->mu);
    if (c->prev) c->prev->next = c->next;
    else w->head = c->next;
    if (c->next) c->next->prev = c->prev;
    atomic_fetch_sub(&w->n_open, 1);
    pthread_mutex_unlock(&w->mu);
    free(c);
}

void watchdog_request_line(struct watchdog *w, struct watch_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&w->mu);
    c->line_seen = true;
    pthread_mutex_unlock(&w->mu);
}

bool watchdog_body(struct watchdog *w, struct watch_conn *c) {
    if (!c) return true;
    pthread_mutex_lock(&w->mu);
    bool ok = c->phase != PHASE_CUT;
    if (ok) {
        c->phase = PHASE_BODY;
        set_deadline(w, c, w->body_ns);
    }
    pthread_mutex_unlock(&w->mu);
    return ok;
}

bool watchdog_answer(struct watchdog *w, struct watch_conn *c) {
    if (!c) return true;
    pthread_mutex_lock(&w->mu);
    bool ok = c->phase != PHASE_CUT;
    if (ok) c->phase = PHASE_ANSWER;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

void watchdog_idle(struct watchdog *w, struct watch_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&w->mu);
    if (c->phase != PHASE_CUT) {
        c->phase = PHASE_HEADERS;
        c->line_seen = false;
        c->reused = true;
        set_deadline(w, c, w->header_ns);
    }
    pthread_mutex_unlock(&w->mu);
}

bool watchdog_cut(struct watchdog *w, struct watch_conn *c, const char *reply, size_t len) {
    if (!c) return false;
    pthread_mutex_lock(&w->mu);
    bool ok = c->phase == PHASE_HEADERS || c->phase == PHASE_BODY;
    if (ok) cut_locked(w, c, reply, len, WATCH_CUT_OTHER);
    pthread_mutex_unlock(&w->mu);
    return ok;
}

int64_t watchdog_open_count(const struct watchdog *w) {
    return atomic_load(&((struct watchdog *)w)->n_open);
}

uint64_t watchdog_cuts(const struct watchdog *w, enum watch_cut why) {
    return (unsigned)why < WATCH_CUT_COUNT ? atomic_load(&((struct watchdog *)w)->cuts[why]) : 0;
}
