/*
 * spec_engine.c — speculative decoding inside an engine step (engine/spec.h
 * for the method, sched.c for the step around it).
 *
 *   spec_prepare  at the start of a step, every decoding choice that
 *                 speculates (engine_spec_decode: none with choices left
 *                 to fork) gets a draft of up to its adaptive length
 *                 (struct spec_ctl), bounded by what it may still
 *                 generate: prompt lookup over its tokens, or the draft
 *                 model where a lookup of the whole n-gram finds nothing
 *                 (the draft cache then catches up later, as after a
 *                 preemption). The draft model has its own paged pool (same
 *                 block size and slots as the target's); a choice's
 *                 draft sequence first catches up with the choice's
 *                 tokens (the whole prompt the first time, or after a
 *                 preemption or fork), all choices in one draft forward,
 *                 then one more draft forward per draft token, batched
 *                 over the choices still drafting.
 *   spec_take     the decode adds the last sampled token and the draft,
 *                 shortened to the budget and the free blocks (a draft
 *                 never preempts), every position with logits.
 *   spec_check    spec_verify picks the tokens to keep and hands them back;
 *                 the step (sched.c) sends them, one event each, until the
 *                 choice ends.
 *   spec_rewind   for a choice still running after that, the positions of
 *                 rejected drafts are truncated from the target's and the
 *                 draft model's caches.
 *
 * This file calls no other engine file but spec.c and the sampler: what a
 * step has to do with its results (events, ending a choice) is done by
 * the step, from return values.
 *
 * Draft tokens are written into the choice's token buffer after n_tokens
 * (they fit: a draft is at most max_tokens - n_generated - 1 long) and
 * also kept in spec_seq.draft, since emitting overwrites the buffer.
 */
#include <stdlib.h>

#include "engine/engine_int.h"

struct spec_seq {
    struct spec_ctl ctl;    /* the mode's source: lookup (SPEC_NGRAM) or the draft model */
    struct spec_ctl look;   /* SPEC_DRAFT: the prompt lookup in front of the draft model */
    bool looked;            /* this step's draft came from the lookup (q a point mass) */
    int32_t draft[SPEC_MAX_DRAFT];
    int n_draft;            /* draft tokens proposed this step */
    int n_rows;             /* logits rows of this step's decode (0: none) */
    int n_keep;             /* positions kept after this step's verification (spec_rewind) */
    /* SPEC_DRAFT */
    struct sampler *dsmp;   /* the request's sampling without penalties */
    float *q;               /* [spec_max][n_vocab] draft distributions; NULL when greedy */
    int dkv;                /* draft cache sequence, -1: none */
    int d_computed;         /* tokens[0..d_computed) are in the draft cache */
    int d_row;              /* row of this draft round's logits, -1: not in the round */
};

struct spec_engine {
    enum spec_mode mode;
    float *p;               /* [n_vocab] scratch */
    int32_t out[SPEC_MAX_DRAFT + 1];
    /* SPEC_DRAFT */
    const struct model *dm;
    double draft_cost;      /* spec_draft_cost */
    struct model_ctx *dctx;
    struct kv_paged dkv;
    float *dlogits;         /* [max_seqs][n_vocab] one draft round's logits */
};

kvik_status spec_engine_new(struct engine *e, int *rows, struct kvik_err *err) {
    const struct engine_config *c = &e->cfg;
    if (c->spec_mode == SPEC_NONE) return KVIK_OK;
    struct spec_engine *x = calloc(1, sizeof *x);
    if (!x) return err_set(err, KVIK_ERR_NOMEM, "engine: out of memory");
    e->spec = x;
    x->mode = (enum spec_mode)c->spec_mode;
    size_t nv = (size_t)e->n_vocab;
    if (!(x->p = malloc(nv * sizeof *x->p))) return err_set(err, KVIK_ERR_NOMEM, "engine: out of memory");
    int64_t r = (int64_t)c->max_seqs * (1 + c->spec_max);
    *rows = r < c->max_batch_tokens ? (int)r : c->max_batch_tokens;
    if (x->mode != SPEC_DRAFT) return KVIK_OK;
    x->dm = c->draft;
    struct kvik_err e2 = {0};
    kvik_status st = spec_check_vocab(e->m, x->dm, &e2);
    if (st) return err_set(err, st, "engine: %s", e2.msg);
    x->draft_cost = spec_draft_cost(e->m, x->dm);
    const struct model_hparams *hp = &x->dm->hp;
    /* the draft's sliding layers keep their window plus a draft's length:
     * a rejected draft rolls the draft cache back by up to spec_max - 1 */
    int32_t *windows = calloc((size_t)hp->n_layer, sizeof *windows);
    if (!windows) return err_set(err, KVIK_ERR_NOMEM, "engine: out of memory");
    for (int l = 0; l < hp->n_layer && !c->kv_keep_all; l++) windows[l] = x->dm->layers[l].window;
    struct kv_paged_config kc = {.n_layer = hp->n_layer, .row_floats = hp->n_head_kv * hp->head_dim,
                                 .type = e->kv.cfg.type, .block_tokens = c->block_tokens,
                                 .max_seqs = c->max_seqs, .layer_window = windows, .slack = c->spec_max};
    if (!kv_type_fits(kc.type, kc.row_floats, hp->head_dim)) kc.type = TENSOR_TYPE_F16;
    /* as many block positions as the target's pool holds at most (every
     * block of it global), and every slot's sliding windows */
    int t_global = 1, d_global = 1;
    kv_paged_config_groups(&e->kv.cfg, &t_global);
    kv_paged_config_groups(&kc, &d_global);
    int64_t bt = c->block_tokens, all = ((int64_t)c->n_ctx + bt - 1) / bt;
    int64_t windows_max = kv_paged_config_blocks_max(&kc, c->n_ctx, c->max_batch_tokens) - d_global * all;
    kc.n_blocks = e->kv.cfg.n_blocks / t_global * d_global + (int64_t)c->max_seqs * windows_max;
    st = kv_paged_init(&x->dkv, &kc, err);
    free(windows);
    if (st) return st;
    if (!kv_paged_reserve_tables(&x->dkv, c->n_ctx))
        return err_set(err, KVIK_ERR_NOMEM, "engine: out of memory for the draft model's block tables");
    if (!(x->dctx = model_ctx_new(x->dm, c->n_threads, c->max_batch_tokens, c->n_ctx, err))) return err->code;
    if (!(x->dlogits = mem_alloc_aligned((size_t)c->max_seqs * nv * sizeof(float))))
        return err_set(err, KVIK_ERR_NOMEM, "engine: out of memory for the draft model's logits");
    return KVIK_OK;
}

void spec_engine_free(struct engine *e) {
    struct spec_engine *x = e->spec;
    if (!x) return;
    free(x->p);
    if (x->mode == SPEC_DRAFT) {
        model_ctx_free(x->dctx);
        kv_paged_free(&x->dkv);
        mem_free(x->dlogits);
    }
    free(x);
    e->spec = NULL;
}

bool spec_seq_new(struct engine *e, struct eseq *s, const struct sampler_params *sp) {
    struct spec_seq *q = calloc(1, sizeof *q);
    if (!q) return false;
    s->spec = q;
    spec_ctl_init(&q->ctl, e->cfg.spec_max, e->spec->draft_cost);
    spec_ctl_init(&q->look, e->cfg.spec_max, 0.0);
    q->dkv = -1;
    if (e->spec->mode != SPEC_DRAFT) return true;
    struct sampler_params dp = *sp;
    dp.repeat_penalty = 1.0f, dp.frequency_penalty = 0, dp.presence_penalty = 0;
    dp.seed = sp->seed ^ UINT64_C(0x5bd1e995);
    if (dp.seed == SAMPLER_SEED_RANDOM) dp.seed++;
    if (!(q->dsmp = sampler_new_shared(&dp, e->n_vocab, e->smp_scratch, NULL))) return false;
    if (!sampler_is_greedy(q->dsmp) &&
        !(q->q = malloc((size_t)e->cfg.spec_max * (size_t)e->n_vocab * sizeof *q->q)))
        return false;
    return true;
}

void spec_seq_free(struct eseq *s) {
    if (!s->spec) return;
    sampler_free(s->spec->dsmp);
    free(s->spec->q);
    free(s->spec);
    s->spec = NULL;
}

void spec_seq_release(struct engine *e, struct eseq *s) {
    struct spec_seq *q = s->spec;
    if (q->dkv >= 0) kv_paged_seq_close(&e->spec->dkv, q->dkv);
    q->dkv = -1;
    q->d_computed = 0;
    q->n_draft = q->n_rows = 0;
}

/* ---- drafting ------------------------------------------------------------ */

/* The draft length s may ask for now from the source ctl controls: its
 * adaptive one, within what it may still generate and the context. */
static int draft_want(struct engine *e, struct eseq *s, struct spec_ctl *ctl) {
    int want = spec_ctl_want(ctl);
    int left = s->req->max_tokens - s->n_generated - 1, room = e->cfg.n_ctx - s->n_tokens;
    if (want > left) want = left;
    if (want > room) want = room;
    return want > 0 ? want : 0;
}

/* Samples draft token j of s from its draft row. */
static void draft_sample(struct engine *e, struct eseq *s, int j) {
    struct spec_seq *q = s->spec;
    float *dist = q->q ? q->q + (size_t)j * (size_t)e->n_vocab : e->spec->p;
    sampler_probs(q->dsmp, e->spec->dlogits + (size_t)q->d_row * (size_t)e->n_vocab, dist);
    q->draft[j] = spec_draw(dist, e->n_vocab, sampler_uniform(q->dsmp));
}

/* Adds tokens of s to the draft batch at positions from.., logits for the
 * last when row (its row then in q->d_row); false when the batch is full
 * or the pool refuses. */
static bool draft_add(struct engine *e, struct eseq *s, const int32_t *toks, int from, int n, bool row, int *nb,
                      int *nrow) {
    struct spec_seq *q = s->spec;
    struct kv_paged *kv = &e->spec->dkv;
    if (n <= 0 || *nb + n > e->cfg.max_batch_tokens || !kv_paged_seq_grow(kv, q->dkv, from + n)) return false;
    engine_batch_add(e, nb, q->dkv, from, toks, n, row ? 1 : 0);
    if (row) q->d_row = (*nrow)++;
    return true;
}

static bool draft_forward(struct engine *e, int nb) {
    struct model_batch b = {.n = nb, .tokens = e->b_tok, .pos = e->b_pos, .seq = e->b_seq, .logits = e->b_logits};
    return model_forward(e->spec->dctx, &e->spec->dkv.base, &b, e->spec->dlogits, NULL) == KVIK_OK;
}

/* Rounds of the draft model: catch-up plus the first draft token for every
 * decoding choice, then one token per round for those wanting more. A
 * choice that finds no room (slot, blocks, batch) drafts nothing this step;
 * a failed draft forward drafts nothing for anyone. */
static void draft_model_prepare(struct engine *e) {
    struct spec_engine *x = e->spec;
    int nb = 0, nrow = 0, rounds = 0;
    for (int i = 0; i < e->n_running; i++) {
        struct eseq *s = e->running[i];
        struct spec_seq *q = s->spec;
        q->d_row = -1;
        if (s->n_tokens - s->n_computed != 1 || !engine_spec_decode(e, s)) continue;
        int look = draft_want(e, s, &q->look);
        if (look > 0 && (q->n_draft = spec_ngram_propose(s->tokens, s->n_tokens, e->cfg.spec_ngram, e->cfg.spec_ngram,
                                                         look, q->draft)) > 0) {
            q->looked = true;
            continue;
        }
        if ((q->n_draft = draft_want(e, s, &q->ctl)) == 0) continue;
        if (q->dkv < 0 && (q->dkv = kv_paged_seq_open(&x->dkv)) >= 0) q->d_computed = 0;
        int n = s->n_tokens - q->d_computed, room = e->cfg.max_batch_tokens - nb;
        if (q->dkv >= 0 && n > room) { /* a long catch-up goes in pieces; the draft waits */
            if (draft_add(e, s, s->tokens + q->d_computed, q->d_computed, room, false, &nb, &nrow)) q->d_computed += room;
            q->n_draft = 0;
            continue;
        }
        if (q->dkv < 0 || !draft_add(e, s, s->tokens + q->d_computed, q->d_computed, n, true, &nb, &nrow)) {
            q->n_draft = 0;
            continue;
        }
        q->d_computed = s->n_tokens;
        if (q->n_draft > rounds) rounds = q->n_draft;
    }
    if (rounds == 0 && nb > 0) draft_forward(e, nb); /* catch-up pieces only */
    for (int j = 0; j < rounds && nb > 0; j++) {
        if (!draft_forward(e, nb)) {
            for (int i = 0; i < e->n_running; i++) e->running[i]->spec->n_draft = 0;
            return;
        }
        nb = nrow = 0;
        for (int i = 0; i < e->n_running; i++) {
            struct eseq *s = e->running[i];
            struct spec_seq *q = s->spec;
            if (q->d_row < 0) continue;
            draft_sample(e, s, j);
            q->d_row = -1;
            if (j + 1 >= q->n_draft) continue;
            if (!draft_add(e, s, &q->draft[j], s->n_tokens + j, 1, true, &nb, &nrow)) {
                q->n_draft = j + 1;
                continue;
            }
            q->d_computed = s->n_tokens + j + 1;
        }
    }
}

void spec_prepare(struct engine *e) {
    for (int i = 0; i < e->n_running; i++) {
        struct spec_seq *q = e->running[i]->spec;
        q->n_draft = q->n_rows = 0;
        q->looked = false;
    }
    if (e->spec->mode == SPEC_DRAFT) {
        draft_model_prepare(e);
        return;
    }
    for (int i = 0; i < e->n_running; i++) {
        struct eseq *s = e->running[i];
        if (s->n_tokens - s->n_computed != 1 || !engine_spec_decode(e, s)) continue;
        int want = draft_want(e, s, &s->spec->ctl);
        s->spec->n_draft = spec_ngram_propose(s->tokens, s->n_tokens, e->cfg.spec_ngram, 1, want, s->spec->draft);
    }
}

/* ---- the decode with its draft -------------------------------------------- */

int spec_take(struct engine *e, struct eseq *s, int budget, int *nb, int *n_samp) {
    struct spec_seq *q = s->spec;
    int k = q->n_draft < budget - 1 ? q->n_draft : budget - 1;
    if (k < 0) k = 0;
    while (k > 0 && kv_paged_blocks_needed(&e->kv, s->kv, s->n_computed + 1 + k) > kv_paged_free_blocks(&e->kv)) k--;
    if (!kv_paged_seq_grow(&e->kv, s->kv, s->n_computed + 1 + k)) return 0;
    q->n_draft = k;
    memcpy(s->tokens + s->n_tokens, q->draft, (size_t)k * sizeof *q->draft);
    engine_batch_add(e, nb, s->kv, s->n_computed, s->tokens + s->n_computed, k + 1, k + 1);
    engine_count_prompt(e, s->req, s->n_computed, k + 1); /* the last prompt token may come this way */
    for (int j = 0; j <= k; j++) e->samp[(*n_samp)++] = s;
    s->n_computed += k + 1;
    q->n_rows = k + 1;
    return k + 1;
}

int spec_check(struct engine *e, struct eseq *s, int row, const int32_t **toks, int *n_toks) {
    struct spec_seq *q = s->spec;
    if (!q || q->n_rows == 0) return 0;
    struct spec_engine *x = e->spec;
    int k = q->n_rows - 1, nv = e->n_vocab;
    q->n_rows = 0;
    int base = s->n_computed - (k + 1); /* position of the token sampled last step */
    const float *rows = e->logits + (size_t)row * (size_t)nv;
    int nt = spec_verify(s->smp, rows, q->looked ? NULL : q->q, nv, q->draft, k, x->p, x->out);
    int accepted = nt - 1;
    if (k > 0) {
        e->st.spec_drafts++;
        e->st.spec_draft_tokens += (uint64_t)k;
        e->st.spec_accepted += (uint64_t)accepted;
        for (int j = 0; j < accepted; j++) e->st.spec_accepted_by_pos[j]++;
        if (q->looked) {
            e->st.spec_lookup_drafts++;
            e->st.spec_lookup_tokens += (uint64_t)k;
            e->st.spec_lookup_accepted += (uint64_t)accepted;
        }
        spec_ctl_update(q->looked ? &q->look : &q->ctl, k, accepted);
    }
    /* keep the last sampled token and the accepted drafts; the new token is
     * fed next step. n_computed says so at once: a choice that ends while
     * its tokens are sent keeps only these positions' K/V (its tail) */
    q->n_keep = base + 1 + accepted;
    s->n_computed = q->n_keep;
    *toks = x->out;
    *n_toks = nt;
    return k + 1;
}

void spec_rewind(struct engine *e, struct eseq *s) {
    struct spec_seq *q = s->spec;
    struct spec_engine *x = e->spec;
    s->n_computed = q->n_keep;
    kv_paged_seq_truncate(&e->kv, s->kv, s->n_computed);
    if (q->dkv >= 0 && q->d_computed > s->n_computed) {
        q->d_computed = s->n_computed;
        kv_paged_seq_truncate(&x->dkv, q->dkv, q->d_computed);
    }
}
