/*
 * seq.c — the bookkeeping of choices (struct eseq, engine_int.h): the
 * running array and the waiting queue, sending token and final events,
 * ending a choice, and the latency histograms. Called by the engine thread
 * (engine.c) and by the step (sched.c), it calls neither of them. It
 * calls the sampler; the KV pool (kv_paged_seq_close) when a choice leaves
 * the running array, spec_engine.c to close its draft sequence then, and
 * prefix.c (engine_prefix_keep_tail) to keep a finished choice's tail.
 * What it has to tell its callers stays in the data: a choice's state, and
 * e->done for requests whose last choice ended.
 */
#include <math.h>
#include <string.h>

#include "engine/engine_int.h"

const double engine_hist_bounds[ENGINE_HIST_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
    0.5,   0.75,   1.0,   2.5,    5.0,  7.5,   10.0, 30.0,  60.0, 120.0,
};

void engine_hist_add(struct engine_hist *h, int64_t ns) {
    double s = (double)ns * 1e-9;
    int i = 0;
    while (i < ENGINE_HIST_BUCKETS && s > engine_hist_bounds[i]) i++;
    h->counts[i]++;
    h->count++;
    h->sum += s;
}

/* ---- the running array and the waiting queue -------------------------- */

static bool arrived_before(const struct eseq *a, const struct eseq *b) {
    return a->req->id != b->req->id ? a->req->id < b->req->id : a->choice < b->choice;
}

void seq_running_insert(struct engine *e, struct eseq *s) {
    int i = e->n_running;
    while (i > 0 && arrived_before(s, e->running[i - 1])) {
        e->running[i] = e->running[i - 1];
        i--;
    }
    e->running[i] = s;
    e->n_running++;
    e->by_kv[s->kv] = s;
    s->state = ESEQ_RUNNING;
}

void seq_running_remove(struct engine *e, struct eseq *s) {
    int i = 0;
    while (i < e->n_running && e->running[i] != s) i++;
    if (i == e->n_running) return;
    memmove(&e->running[i], &e->running[i + 1], (size_t)(e->n_running - i - 1) * sizeof *e->running);
    e->n_running--;
    e->n_slots -= 1 + s->n_fork;
    e->by_kv[s->kv] = NULL;
    if (s->spec) spec_seq_release(e, s);
    kv_paged_seq_close(&e->kv, s->kv);
    s->kv = -1;
    s->n_computed = 0;
}

void seq_wait_push_back(struct engine *e, struct eseq *s) {
    s->next = NULL;
    s->prev = e->wait_tail;
    if (e->wait_tail) e->wait_tail->next = s;
    else e->wait_head = s;
    e->wait_tail = s;
    s->state = ESEQ_WAITING;
}

void seq_wait_push_front(struct engine *e, struct eseq *s) {
    s->prev = NULL;
    s->next = e->wait_head;
    if (e->wait_head) e->wait_head->prev = s;
    else e->wait_tail = s;
    e->wait_head = s;
    s->state = ESEQ_WAITING;
}

void seq_wait_unlink(struct engine *e, struct eseq *s) {
    if (s->prev) s->prev->next = s->next;
    else e->wait_head = s->next;
    if (s->next) s->next->prev = s->prev;
    else e->wait_tail = s->prev;
    s->prev = s->next = NULL;
}

/* ---- events ------------------------------------------------------------ */

/* log-softmax of the raw logits at tok, and the k largest (ties: lower id
 * first), sorted. NaN logits count as -inf. */
static void fill_logprobs(const float *row, int nv, int32_t tok, int k, struct engine_event *ev) {
    float mx = -INFINITY;
    for (int i = 0; i < nv; i++)
        if (row[i] > mx) mx = row[i];
    double sum = 0;
    if (mx > -INFINITY)
        for (int i = 0; i < nv; i++)
            if (row[i] > -INFINITY) sum += (double)expf(row[i] - mx);
    double lse = mx > -INFINITY ? (double)mx + log(sum) : 0;
    ev->logprob = row[tok] == row[tok] ? (float)((double)row[tok] - lse) : -INFINITY;
    int n = 0;
    for (int i = 0; i < nv && k > 0; i++) {
        float v = row[i];
        if (!(v == v) || (n == k && v <= ev->top_logprobs[k - 1])) continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && ev->top_logprobs[j - 1] < v) {
            ev->top_logprobs[j] = ev->top_logprobs[j - 1];
            ev->top_ids[j] = ev->top_ids[j - 1];
            j--;
        }
        ev->top_logprobs[j] = v;
        ev->top_ids[j] = i;
    }
    for (int i = 0; i < n; i++) ev->top_logprobs[i] = (float)((double)ev->top_logprobs[i] - lse);
    ev->n_top = n;
}

/* out[i] = row[i] where bit i of allowed is set, else -inf; a word of 32
 * at a time where the word is all one way. */
static void mask_row(float *out, const float *row, const uint32_t *allowed, int n) {
    for (int w = 0; w * 32 < n; w++) {
        int i0 = w * 32, i1 = i0 + 32 < n ? i0 + 32 : n;
        uint32_t bits = allowed[w];
        if (bits == 0)
            for (int i = i0; i < i1; i++) out[i] = -INFINITY;
        else if (bits == 0xFFFFFFFFu)
            memcpy(out + i0, row + i0, (size_t)(i1 - i0) * sizeof *out);
        else
            for (int i = i0; i < i1; i++) out[i] = bits >> (i - i0) & 1 ? row[i] : -INFINITY;
    }
}

/* Samples the next token of s from row (argmax: the row's argmax as the forward
 * pass found it, or -1), sends it, and ends the choice on
 * an end-of-generation token, a callback that returns false, or
 * max_tokens. */
void seq_emit_token(struct engine *e, struct eseq *s, const float *row, int64_t argmax, int64_t now) {
    struct ereq *r = s->req;
    if (r->constrained) { /* the row with every token the constraint refuses at -inf */
        if (!r->constraint.mask(r->constraint.ctx, s->choice, e->allowed)) {
            seq_finish(e, s, ENGINE_FINISH_STOP, NULL);
            return;
        }
        mask_row(e->masked_row, row, e->allowed, e->n_vocab);
        row = e->masked_row;
        argmax = -1;
    }
    int32_t tok = sampler_sample_argmax(s->smp, row, argmax);
    sampler_accept(s->smp, tok);
    if (r->constrained && !e->is_eog[tok]) r->constraint.accept(r->constraint.ctx, s->choice, tok);
    seq_send_token(e, s, tok, row, now);
}

void seq_send_prompt(struct engine *e, struct eseq *s, int pos, const float *row) {
    struct ereq *r = s->req;
    if (pos != r->prompt_lp_next || pos >= r->n_prompt) return;
    r->prompt_lp_next = pos + 1;
    struct engine_event ev = {.request_id = r->id, .choice = s->choice, .finish = ENGINE_FINISH_NONE,
                              .token = s->tokens[pos], .prompt_pos = pos, .n_prompt = r->n_prompt,
                              .n_cached = r->n_cached};
    fill_logprobs(row, e->n_vocab, ev.token, r->top_logprobs, &ev);
    r->fn(r->user, &ev); /* the answer to a prompt event is ignored */
}

void seq_send_token(struct engine *e, struct eseq *s, int32_t tok, const float *row, int64_t now) {
    struct ereq *r = s->req;
    e->st.generation_tokens++;
    if (!r->got_token) {
        r->got_token = true;
        engine_hist_add(&e->st.ttft, now - r->t_submit);
        engine_hist_add(&e->st.prefill, now - r->t_sched);
    }
    if (s->t_last) engine_hist_add(&e->st.itl, now - s->t_last);
    s->t_last = now;
    if (!r->ignore_eos && e->is_eog[tok]) {
        s->eog_token = tok;
        if (r->top_logprobs >= 0) {
            struct engine_event lp;
            fill_logprobs(row, e->n_vocab, tok, r->top_logprobs, &lp);
            s->eog_logprob = lp.logprob;
            s->eog_n_top = lp.n_top;
            memcpy(s->eog_top_ids, lp.top_ids, sizeof lp.top_ids);
            memcpy(s->eog_top_logprobs, lp.top_logprobs, sizeof lp.top_logprobs);
        }
        seq_finish(e, s, ENGINE_FINISH_STOP, NULL);
        return;
    }
    s->tokens[s->n_tokens++] = tok;
    s->n_generated++;
    struct engine_event ev;
    ev.request_id = r->id;
    ev.choice = s->choice;
    ev.finish = ENGINE_FINISH_NONE;
    ev.token = tok;
    ev.prompt_pos = 0;
    ev.logprob = 0;
    ev.n_top = 0;
    ev.n_prompt = r->n_prompt;
    ev.n_generated = s->n_generated;
    ev.n_cached = r->n_cached;
    ev.error = NULL;
    if (r->top_logprobs >= 0) fill_logprobs(row, e->n_vocab, tok, r->top_logprobs, &ev);
    bool go = r->fn(r->user, &ev);
    if (!go) seq_finish(e, s, ENGINE_FINISH_STOP, NULL);
    else if (s->n_generated >= r->max_tokens) seq_finish(e, s, ENGINE_FINISH_LENGTH, NULL);
}

static void send_final(struct engine *e, struct eseq *s, enum engine_finish why, const char *error) {
    struct ereq *r = s->req;
    s->state = ESEQ_DONE;
    e->st.finished[why]++;
    struct engine_event ev = {.request_id = r->id, .choice = s->choice, .finish = why, .token = s->eog_token,
                              .n_prompt = r->n_prompt, .n_generated = s->n_generated, .n_cached = r->n_cached,
                              .error = error};
    if (s->eog_token >= 0 && r->top_logprobs >= 0) {
        ev.logprob = s->eog_logprob;
        ev.n_top = s->eog_n_top;
        memcpy(ev.top_ids, s->eog_top_ids, sizeof ev.top_ids);
        memcpy(ev.top_logprobs, s->eog_top_logprobs, sizeof ev.top_logprobs);
    }
    r->fn(r->user, &ev);
    if (--r->n_live == 0) {
        engine_hist_add(&e->st.e2e, clock_ns() - r->t_submit);
        if (!r->started) atomic_fetch_sub(&e->n_queued, 1);
        r->dnext = e->done;
        e->done = r;
    }
}

/* Ends a choice: gives back its blocks and slot, leaves whatever queue it
 * is in, sends its final event. Choices still waiting for this one's
 * prompt end with it. */
void seq_finish(struct engine *e, struct eseq *s, enum engine_finish why, const char *error) {
    if (s->state == ESEQ_DONE) return;
    if (s->state == ESEQ_RUNNING && why != ENGINE_FINISH_ERROR) engine_prefix_keep_tail(e, s);
    if (s->state == ESEQ_RUNNING) seq_running_remove(e, s);
    else if (s->state == ESEQ_WAITING) seq_wait_unlink(e, s);
    int forks = s->n_fork;
    s->n_fork = 0;
    send_final(e, s, why, error);
    for (int c = 1; c <= forks; c++)
        if (s->req->seqs[c].state == ESEQ_PENDING) send_final(e, &s->req->seqs[c], why, error);
}
