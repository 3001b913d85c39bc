/*
 * job.c — engine events -> text, stop strings and logprob records (see job.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "server/job.h"

struct job *job_new(const struct tokenizer *tok, int n, bool logprobs, char *const *stop,
                    int n_stop, bool strip_space) {
    struct job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* waits time out on the monotonic clock */
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    j->refs = 2;
    j->tok = tok;
    j->logprobs = logprobs;
    j->n = n;
    j->piece_cap = detok_min_cap(tok);
    j->ch = calloc((size_t)n, sizeof *j->ch);
    j->piece = malloc(j->piece_cap);
    if (n_stop > 0) {
        j->stop = calloc((size_t)n_stop, sizeof *j->stop);
        j->stop_len = calloc((size_t)n_stop, sizeof *j->stop_len);
    }
    if (!j->ch || !j->piece || (n_stop > 0 && (!j->stop || !j->stop_len))) goto fail;
    for (int i = 0; i < n_stop; i++) {
        if (!(j->stop[i] = strdup(stop[i]))) goto fail;
        j->stop_len[i] = strlen(stop[i]);
        j->stops.n = i + 1;
    }
    j->stops.s = (const char *const *)j->stop;
    j->stops.len = j->stop_len;
    for (int c = 0; c < n; c++) {
        detok_init(&j->ch[c].ds, tok, false);
        j->ch[c].ds.strip_space = strip_space;
    }
    return j;
fail:
    j->refs = 1;
    job_release(j);
    return NULL;
}

bool job_set_prompt(struct job *j, const int32_t *ids, int n, size_t echo_len) {
    j->prompt_lp = true;
    if (n < 1 || !(j->ptoks = calloc((size_t)n, sizeof *j->ptoks))) return false;
    char buf[512];
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        struct job_token *t = &j->ptoks[i];
        t->id = ids[i];
        t->logprob = NAN;
        t->n_top = -1;
        int64_t k = tokenizer_decode_piece(j->tok, ids[i], buf, sizeof buf, false);
        t->start = off < echo_len ? off : echo_len;
        off += k > 0 ? (size_t)k : 0;
        t->end = off < echo_len ? off : echo_len;
    }
    j->n_ptoks_all = n;
    j->n_ptoks = 1;
    j->prompt_done = n == 1;
    return true;
}

static void job_free(struct job *j) {
    if (j->owned_free) j->owned_free(j->owned);
    free(j->ptoks);
    for (int c = 0; c < j->n && j->ch; c++) {
        free(j->ch[c].text);
        free(j->ch[c].toks);
    }
    free(j->ch);
    for (int i = 0; i < j->stops.n; i++) free(j->stop[i]);
    free(j->stop);
    free(j->stop_len);
    free(j->piece);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void job_release(struct job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left == 0) job_free(j);
}

void job_engine_gone(struct job *j) { job_release(j); }

static bool text_append(struct job_choice *c, const char *s, size_t n) {
    if (n == 0) return true;
    if (c->len + n > c->cap) {
        size_t nc = (c->cap ? c->cap * 2 : 256) + n;
        char *nb = realloc(c->text, nc);
        if (!nb) return false;
        c->text = nb;
        c->cap = nc;
    }
    memcpy(c->text + c->len, s, n);
    c->len += n;
    return true;
}

/* Appends bytes, then looks for a stop string in what is new; true if one
 * matched (the text is cut). */
static bool append_and_scan(struct job *j, struct job_choice *c, const char *s, size_t n) {
    size_t old = c->len;
    if (!text_append(c, s, n)) {
        j->overflow = true;
        return false;
    }
    if (j->stops.n == 0) {
        c->safe = c->len;
        return false;
    }
    struct stop_scan_result r = stop_scan(&j->stops, c->text, c->len, old);
    if (r.matched) {
        c->len = r.cut;
        c->safe = r.cut;
        c->stop_matched = true;
        return true;
    }
    c->safe = r.safe;
    return false;
}

static bool record_token(struct job_choice *c, const struct engine_event *ev, size_t start) {
    if (c->n_toks == c->cap_toks) {
        int nc = c->cap_toks ? c->cap_toks * 2 : 16;
        struct job_token *nt = realloc(c->toks, (size_t)nc * sizeof *nt);
        if (!nt) return false;
        c->toks = nt;
        c->cap_toks = nc;
    }
    struct job_token *t = &c->toks[c->n_toks++];
    t->id = ev->token;
    t->logprob = ev->logprob;
    t->n_top = ev->n_top < 0 ? 0 : ev->n_top > ENGINE_MAX_TOP_LOGPROBS ? ENGINE_MAX_TOP_LOGPROBS : ev->n_top;
    memcpy(t->top_ids, ev->top_ids, sizeof t->top_ids);
    memcpy(t->top_logprobs, ev->top_logprobs, sizeof t->top_logprobs);
    t->start = start;
    t->end = start;
    return true;
}

bool job_on_event(void *user, const struct engine_event *ev) {
    struct job *j = user;
    if (ev->choice < 0 || ev->choice >= j->n) return false;
    pthread_mutex_lock(&j->mu);
    struct job_choice *c = &j->ch[ev->choice];
    bool go_on = true, last = false;
    if (ev->finish == ENGINE_FINISH_NONE && ev->prompt_pos > 0) {
        /* a prompt token's log-probability: kept in order, once each */
        if (j->prompt_lp && ev->prompt_pos == j->n_ptoks && j->n_ptoks < j->n_ptoks_all) {
            struct job_token *t = &j->ptoks[j->n_ptoks++];
            t->logprob = ev->logprob;
            t->n_top = ev->n_top < 0 ? 0 : ev->n_top > ENGINE_MAX_TOP_LOGPROBS ? ENGINE_MAX_TOP_LOGPROBS : ev->n_top;
            memcpy(t->top_ids, ev->top_ids, sizeof t->top_ids);
            memcpy(t->top_logprobs, ev->top_logprobs, sizeof t->top_logprobs);
            if (j->n_ptoks == j->n_ptoks_all) j->prompt_done = true;
        }
    } else if (c->done) {
        go_on = false; /* a second final event: ignore */
    } else if (ev->finish == ENGINE_FINISH_NONE) {
        j->prompt_done = true;
        if (c->stop_matched || j->overflow) {
            go_on = false;
        } else {
            size_t start = c->len;
            if (j->logprobs && !tokenizer_is_eog(j->tok, ev->token) && !record_token(c, ev, start))
                j->overflow = true;
            int64_t k = detok_push(&c->ds, ev->token, j->piece, j->piece_cap);
            if (k > 0 && append_and_scan(j, c, j->piece, (size_t)k)) go_on = false;
            if (j->overflow) go_on = false;
            if (j->logprobs && c->n_toks && c->toks[c->n_toks - 1].start == start)
                c->toks[c->n_toks - 1].end = c->len;
        }
    } else {
        j->prompt_done = true;
        /* an end-of-generation token that ended the choice is reported with
         * echoed prompt log-probabilities (OpenAI's legacy completions list
         * it), its logprob given in the final event */
        if (j->logprobs && j->prompt_lp && ev->finish == ENGINE_FINISH_STOP && ev->token >= 0 &&
            !c->stop_matched && !j->overflow && !record_token(c, ev, c->len))
            j->overflow = true;
        /* the end of this choice: what the detokenizer holds comes out
         * (as U+FFFD) unless a stop string already ended the text */
        if (!c->stop_matched && !j->overflow) {
            int64_t k = detok_flush(&c->ds, j->piece, j->piece_cap);
            if (k > 0) append_and_scan(j, c, j->piece, (size_t)k);
        }
        c->done = true;
        c->finish = c->stop_matched ? ENGINE_FINISH_STOP : ev->finish;
        if (j->overflow && c->finish != ENGINE_FINISH_CANCELLED) {
            c->finish = ENGINE_FINISH_ERROR;
            snprintf(c->error, sizeof c->error, "out of memory collecting the output");
        } else if (ev->finish == ENGINE_FINISH_ERROR) {
            snprintf(c->error, sizeof c->error, "%s", ev->error ? ev->error : "generation failed");
        }
        c->safe = c->len;
        c->n_generated = ev->n_generated;
        if (ev->n_prompt > 0) j->n_prompt = ev->n_prompt;
        if (ev->n_cached > j->n_cached) j->n_cached = ev->n_cached;
        /* tokens that gave only stopped or no text at the end are not reported */
        int keep = 0;
        while (keep < c->n_toks && c->toks[keep].start < c->len) keep++;
        if (j->prompt_lp && !c->stop_matched) keep = c->n_toks; /* no-text tokens too */
        c->toks_final = keep;
        for (int i = 0; i < keep; i++)
            if (c->toks[i].end > c->len) c->toks[i].end = c->len;
        last = ++j->n_done == j->n;
        go_on = false;
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (last) job_release(j); /* the engine's reference */
    return go_on;
}

size_t job_token_bytes(const struct tokenizer *tok, int32_t id, char *buf, size_t cap) {
    int64_t n = tokenizer_decode_piece(tok, id, buf, cap, true);
    return n < 0 ? 0 : (size_t)n;
}
