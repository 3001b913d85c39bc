/*
 * sched.c — one step of the serving engine: which tokens go into the batch,
 * where their K/V rows go, one model_forward, and what is sampled from it.
 *
 * A step fills a budget of max_batch_tokens:
 *
 *   1. decode   one token for every running choice whose prompt is done,
 *               oldest first (by request id, then choice). A choice that
 *               needs a new block (or a copy of a shared last block) and
 *               finds none preempts the newest running choice, repeatedly,
 *               until the block is there or it was itself the newest.
 *   2. prefill  the next prompt chunk of every running choice still
 *               prefilling, oldest first, as large as the budget and the
 *               free blocks allow (no preemption for prefill); in a step
 *               with decode tokens, prompts get at most prefill_chunk
 *               tokens in all, so that a new prompt does not stall every
 *               stream for a whole prefill at once.
 *   3. admit    choices from the head of the waiting queue, in order, while
 *               sequence slots (choice 0 of an n-choice request takes n),
 *               budget and blocks allow, keeping a small watermark of free
 *               blocks for the running choices to grow into. Skipped in a
 *               step that preempted, so a victim does not come straight
 *               back. With the prefix cache on, an admitted choice
 *               first attaches its cached prefix (prefix.c) and only the
 *               rest counts against the budget.
 *
 * Preemption is by recompute: the victim's cache sequence is closed (its
 * blocks go back, shared ones just lose a user), and it returns to the
 * front of the waiting queue holding its prompt and every token it has
 * generated; when admitted again they are all prefilled and the last
 * position's logits give the next token. Its sampler is left as it was, and
 * with batch-invariant kernels the recomputed rows are the same bits, so
 * the output does not change.
 *
 * If nothing at all fits (every running choice prefilling and the pool
 * full), the newest running choice is preempted and the step is rebuilt;
 * the oldest choice can always run, since any single request fits the pool
 * (engine_submit checks).
 *
 * Logits are computed only for the positions that sample: the last token
 * of each decode, and the last prompt token when a chunk completes a
 * prompt. Choice 0 of an n-choice request samples for all n from that
 * row; choices 1..n-1 fork its cache sequence first.
 *
 * With speculative decoding (spec_engine.c) the decode of a choice carries
 * its draft too, each position with logits: spec_prepare drafts at the
 * start of the step, spec_take adds a decode with its draft, spec_check
 * verifies it and returns the tokens to keep, which are sent here, and
 * spec_rewind drops the rejected positions of a choice still running. A
 * choice with choices left to fork (a last prompt token fed as a decode)
 * decodes without a draft (engine_spec_decode), so that its row forks them.
 */
#include "engine/engine_int.h"

static void preempt(struct engine *e, struct eseq *s) {
    seq_running_remove(e, s);
    seq_wait_push_front(e, s);
    e->st.preemptions++;
}

/* Appends positions n_computed..n_computed+n-1 of s to the batch (their
 * blocks are already there). */
static void add_tokens(struct engine *e, struct eseq *s, int n, int *nb, int *n_samp) {
    int a = s->n_computed, b0 = *nb;
    struct ereq *r = s->req;
    bool last = a + n == s->n_tokens; /* the last position samples */
    engine_batch_add(e, nb, s->kv, a, s->tokens + a, n, last ? 1 : 0);
    if (r->prompt_lp) { /* position p's logits score prompt token p + 1 */
        int lo = a > r->prompt_lp_next - 1 ? a : r->prompt_lp_next - 1;
        int hi = a + n < r->n_prompt - 1 ? a + n : r->n_prompt - 1;
        for (int p = lo; p < hi; p++) {
            e->b_logits[b0 + (p - a)] = true;
            e->row_ppos[*n_samp] = p + 1;
            e->samp[(*n_samp)++] = s;
            e->prompt_rows++;
        }
    }
    s->n_computed += n;
    if (last) {
        e->row_ppos[*n_samp] = 0;
        e->samp[(*n_samp)++] = s;
    }
    engine_count_prompt(e, r, a, n);
}

/* want (> 0) cut to what this step's prompt log-probability rows still
 * allow s to prefill (want itself when s needs none). */
static int prompt_cap(const struct engine *e, const struct eseq *s, int want) {
    const struct ereq *r = s->req;
    if (!r->prompt_lp || s->n_computed >= r->n_prompt - 1 || r->prompt_lp_next >= r->n_prompt) return want;
    int left = ENGINE_PROMPT_ROWS - e->prompt_rows;
    return want < left ? want : (left > 0 ? left : 0);
}

/* The most tokens (<= want) s can add while leaving reserve blocks free
 * (the blocks needed grow with the tokens: a binary search). */
static int fit(const struct engine *e, const struct eseq *s, int want, int64_t reserve) {
    int64_t avail = kv_paged_free_blocks(&e->kv) - reserve;
    if (avail < 0) avail = 0;
    if (kv_paged_blocks_needed(&e->kv, s->kv, s->n_computed + want) <= avail) return want;
    int lo = 0, hi = want; /* lo fits, hi does not */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (kv_paged_blocks_needed(&e->kv, s->kv, s->n_computed + mid) <= avail) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* s's cache sequence could not grow: s ends with an error. */
static void grow_refused(struct engine *e, struct eseq *s) {
    seq_finish(e, s, ENGINE_FINISH_ERROR, "engine: the KV cache refused to grow a sequence");
}

/* Grows s's cache sequence for n more positions and adds them to the batch;
 * false (s ended with an error) if the cache refuses. */
static bool take(struct engine *e, struct eseq *s, int n, int *nb, int *n_samp) {
    if (!kv_paged_seq_grow(&e->kv, s->kv, s->n_computed + n)) {
        grow_refused(e, s);
        return false;
    }
    add_tokens(e, s, n, nb, n_samp);
    return true;
}

/* Choices 1..n_fork of s's request start from s's cache sequence, sharing
 * its blocks. */
static void fork_choices(struct engine *e, struct eseq *s) {
    struct ereq *r = s->req;
    int forks = s->n_fork;
    s->n_fork = 0; /* the slots stay counted, now one per choice */
    for (int c = 1; c <= forks; c++) {
        struct eseq *x = &r->seqs[c];
        if (x->state != ESEQ_PENDING) continue;
        int kv = kv_paged_seq_fork(&e->kv, s->kv);
        if (kv < 0) {
            e->n_slots--;
            seq_finish(e, x, ENGINE_FINISH_ERROR, "engine: no cache sequence for a choice");
            continue;
        }
        memcpy(x->tokens, s->tokens, (size_t)s->n_tokens * sizeof *x->tokens);
        x->n_tokens = s->n_tokens;
        x->n_computed = s->n_computed;
        x->kv = kv;
        seq_running_insert(e, x);
    }
}

/* The forward failed: every choice in the batch ends with the error. */
static void fail_batch(struct engine *e, int nb, const char *msg) {
    for (int i = 0; i < nb; i++) {
        struct eseq *s = e->by_kv[e->b_seq[i]];
        if (s && s->state == ESEQ_RUNNING) seq_finish(e, s, ENGINE_FINISH_ERROR, msg);
    }
}

void sched_step(struct engine *e) {
    int nb, n_samp, budget;
    bool preempted = false;
    int64_t now = clock_ns();
    if (e->spec) spec_prepare(e);
rebuild:
    nb = 0, n_samp = 0, budget = e->cfg.max_batch_tokens;
    e->prompt_rows = 0;
    memset(e->row_ppos, 0, ((size_t)e->n_rows + ENGINE_PROMPT_ROWS) * sizeof *e->row_ppos);
    /* 1. decode */
    for (int i = 0; i < e->n_running && budget > 0; i++) {
        struct eseq *s = e->running[i];
        if (s->n_tokens - s->n_computed != 1) continue;
        bool self = false;
        while (!self && kv_paged_blocks_needed(&e->kv, s->kv, s->n_computed + 1) > kv_paged_free_blocks(&e->kv)) {
            struct eseq *v = e->running[e->n_running - 1];
            preempt(e, v);
            preempted = true;
            self = v == s;
        }
        if (self) break; /* s was the newest: nothing after it */
        /* a draft may use the budget beyond one token for each choice after s */
        int used;
        if (!engine_spec_decode(e, s)) used = take(e, s, 1, &nb, &n_samp) ? 1 : 0;
        else if (!(used = spec_take(e, s, budget - (e->n_running - 1 - i), &nb, &n_samp))) grow_refused(e, s);
        if (!used) {
            i--; /* s left the array */
            continue;
        }
        budget -= used;
    }
    /* 2. prefill chunks of running choices (and 3.), at most prefill_chunk
     * tokens of them in a step that decodes */
    if (nb > 0 && e->cfg.prefill_chunk > 0 && budget > e->cfg.prefill_chunk) budget = e->cfg.prefill_chunk;
    for (int i = 0; i < e->n_running && budget > 0; i++) {
        struct eseq *s = e->running[i];
        int left = s->n_tokens - s->n_computed;
        if (left <= 1) continue;
        int c = fit(e, s, prompt_cap(e, s, left < budget ? left : budget), 0);
        if (c == 0) continue;
        if (!take(e, s, c, &nb, &n_samp)) {
            i--;
            continue;
        }
        budget -= c;
    }
    /* 3. admit waiting choices */
    while (!preempted && budget > 0 && e->wait_head) {
        struct eseq *s = e->wait_head;
        int slots = 1 + s->n_fork;
        if (e->n_slots + slots > e->cfg.max_seqs) break;
        int kv = kv_paged_seq_open(&e->kv);
        if (kv < 0) break;
        s->kv = kv;
        s->n_computed = engine_prefix_attach(e, s);
        int left = s->n_tokens - s->n_computed;
        int c = fit(e, s, prompt_cap(e, s, left < budget ? left : budget), e->n_running ? e->watermark : 0);
        if (c == 0) {
            kv_paged_seq_close(&e->kv, kv);
            s->kv = -1;
            s->n_computed = 0;
            break;
        }
        engine_prefix_admitted(e, s);
        seq_wait_unlink(e, s);
        seq_running_insert(e, s);
        e->n_slots += slots;
        struct ereq *r = s->req;
        if (!r->started) {
            r->started = true;
            r->t_sched = now;
            engine_hist_add(&e->st.queue, now - r->t_submit);
            atomic_fetch_sub(&e->n_queued, 1);
        }
        if (take(e, s, c, &nb, &n_samp)) budget -= c;
    }
    if (nb == 0) {
        if (e->n_running > 1) { /* everyone prefilling, pool full: make room */
            preempt(e, e->running[e->n_running - 1]);
            preempted = true;
            goto rebuild;
        }
        /* unreachable while every request fits the pool alone; never spin */
        if (e->n_running == 1)
            seq_finish(e, e->running[0], ENGINE_FINISH_ERROR, "engine: the KV pool cannot hold the sequence");
        else if (!preempted && e->wait_head)
            seq_finish(e, e->wait_head, ENGINE_FINISH_ERROR, "engine: the KV pool cannot hold the sequence");
        return;
    }

    struct model_batch b = {.n = nb, .tokens = e->b_tok, .pos = e->b_pos, .seq = e->b_seq, .logits = e->b_logits,
                            .argmax = e->argmax};
    struct kvik_err err = {0};
    kvik_status st = model_forward(e->ctx, &e->kv.base, &b, e->logits, &err);
    e->st.steps++;
    if (st) {
        fail_batch(e, nb, err.msg);
        return;
    }
    engine_prefix_register(e);
    now = clock_ns();
    for (int j = 0; j < n_samp; j++) {
        struct eseq *s = e->samp[j];
        const float *row = e->logits + (size_t)j * (size_t)e->n_vocab;
        if (e->row_ppos[j] > 0) { /* a prompt log-probability row */
            if (s->state == ESEQ_RUNNING) seq_send_prompt(e, s, e->row_ppos[j], row);
            continue;
        }
        if (s->req->max_tokens == 0) { /* the prompt is scored: nothing to generate */
            if (s->state == ESEQ_RUNNING) seq_finish(e, s, ENGINE_FINISH_LENGTH, NULL);
            continue;
        }
        const int32_t *toks = NULL;
        int n_toks = 0, rows = e->spec ? spec_check(e, s, j, &toks, &n_toks) : 0;
        if (rows) { /* a decode with its draft: the kept tokens, one row each */
            for (int t = 0; t < n_toks && s->state == ESEQ_RUNNING; t++)
                seq_send_token(e, s, toks[t], row + (size_t)t * (size_t)e->n_vocab, now);
            if (s->state == ESEQ_RUNNING) spec_rewind(e, s);
            j += rows - 1;
            continue;
        }
        int forks = s->n_fork;
        if (forks) fork_choices(e, s);
        for (int c = s->choice; c <= s->choice + forks; c++) {
            struct eseq *x = &s->req->seqs[c];
            if (x->state == ESEQ_RUNNING) seq_emit_token(e, x, row, e->argmax[j], now);
        }
    }
}
