/*
 * gen_spec.c — speculative decoding for `kvik run` and `kvik chat`
 * (engine/spec.h): one sequence in the flat cache. Each step drafts up to
 * the adaptive length (prompt lookup, or the draft model in its own flat
 * cache), runs the last sampled token and the draft through the model in
 * one batch with logits at every position, and keeps what spec_verify
 * accepts. Rejected positions need no rollback in a flat cache: they are
 * overwritten when the next step feeds those positions again. The draft
 * model's cache is kept in step the same way (d_computed: how many of ids
 * it holds).
 */
#include <stdlib.h>

#include "cli/gen.h"
#include "engine/spec.h"

struct gen_spec {
    enum spec_mode mode;
    int max, ngram;
    struct spec_ctl ctl;
    float *rows;             /* [max + 1][n_vocab] the verification batch's logits */
    float *p;                /* [n_vocab] scratch */
    int32_t draft[SPEC_MAX_DRAFT];
    struct gen_spec_stats st;
    /* SPEC_DRAFT */
    struct model *dm;
    struct model_ctx *dctx;
    struct kv_flat dkv;
    struct sampler *dsmp;    /* the request's sampling without penalties */
    float *dlogits;          /* [n_vocab] after the last token the draft model was fed */
    float *q;                /* [max][n_vocab] draft distributions; NULL when the draft is greedy */
    int64_t d_computed;      /* ids[0..d_computed) are in the draft cache */
};

static kvik_status nomem(struct kvik_err *err) { return err_set(err, KVIK_ERR_NOMEM, "out of memory"); }

/* The draft model, its cache and sampler. */
static kvik_status draft_start(struct gen *g, struct gen_spec *sp, const struct gen_opts *o, struct kvik_err *err) {
    struct kvik_err e2 = {0};
    kvik_status st = model_load(o->model_draft, &sp->dm, &e2);
    if (st) return err_set(err, st, "draft model: %s", e2.msg);
    if ((st = spec_check_vocab(g->model, sp->dm, err))) return st;
    spec_ctl_init(&sp->ctl, sp->max, spec_draft_cost(g->model, sp->dm));
    const struct model_hparams *hp = &sp->dm->hp;
    size_t nv = (size_t)hp->n_vocab;
    if (!(sp->dctx = model_ctx_new(sp->dm, (int)o->threads, g->max_batch, g->n_ctx, err)))
        return err->code ? err->code : nomem(err);
    if ((st = kv_flat_init(&sp->dkv, hp->n_layer, 1, g->n_ctx, hp->n_head_kv * hp->head_dim, TENSOR_TYPE_F32, err)))
        return st;
    struct sampler_params dp = o->sp;
    dp.repeat_penalty = 1.0f, dp.frequency_penalty = 0, dp.presence_penalty = 0;
    dp.seed = sampler_seed(g->smp) ^ UINT64_C(0x5bd1e995);
    if (dp.seed == SAMPLER_SEED_RANDOM) dp.seed++;
    if (!(sp->dsmp = sampler_new(&dp, (int32_t)nv, err))) return err->code ? err->code : nomem(err);
    if (!(sp->dlogits = malloc(nv * sizeof(float)))) return nomem(err);
    if (!sampler_is_greedy(sp->dsmp) && !(sp->q = malloc((size_t)sp->max * nv * sizeof(float)))) return nomem(err);
    return KVIK_OK;
}

kvik_status gen_spec_start(struct gen *g, const struct gen_opts *o, struct kvik_err *err) {
    enum spec_mode mode = o->model_draft ? SPEC_DRAFT : SPEC_NONE;
    if (o->spec) spec_mode_parse(o->spec, &mode); /* checked by gen_opts_check */
    if (mode == SPEC_NONE) return KVIK_OK;
    if (g->max_batch < o->spec_max + 1)
        return err_set(err, KVIK_ERR_INVALID_ARG, "speculation needs batches of %ld tokens", o->spec_max + 1);
    struct gen_spec *sp = calloc(1, sizeof *sp);
    if (!sp) return nomem(err);
    g->spec = sp;
    sp->mode = mode;
    sp->max = (int)o->spec_max;
    sp->ngram = (int)o->spec_ngram;
    spec_ctl_init(&sp->ctl, sp->max, 0); /* a draft model's cost is set when it is loaded */
    size_t nv = (size_t)g->model->hp.n_vocab;
    sp->rows = malloc(((size_t)sp->max + 1) * nv * sizeof(float));
    sp->p = malloc(nv * sizeof(float));
    if (!sp->rows || !sp->p) return nomem(err);
    return mode == SPEC_DRAFT ? draft_start(g, sp, o, err) : KVIK_OK;
}

void gen_spec_free(struct gen *g) {
    struct gen_spec *sp = g->spec;
    if (!sp) return;
    free(sp->rows);
    free(sp->p);
    free(sp->q);
    free(sp->dlogits);
    sampler_free(sp->dsmp);
    kv_flat_free(&sp->dkv);
    model_ctx_free(sp->dctx);
    model_free(sp->dm);
    free(sp);
    g->spec = NULL;
}

void gen_spec_stats(const struct gen *g, struct gen_spec_stats *out) {
    *out = g->spec ? g->spec->st : (struct gen_spec_stats){0};
}

/* Feeds toks[0..n) to the draft model at positions from.. (in batches of
 * max_batch); sp->dlogits then follows the last. */
static kvik_status draft_feed(struct gen *g, struct gen_spec *sp, const int32_t *toks, int64_t from, int64_t n,
                              struct kvik_err *err) {
    int32_t pos[GEN_PREFILL_BATCH], seq[GEN_PREFILL_BATCH] = {0};
    int max = g->max_batch < GEN_PREFILL_BATCH ? g->max_batch : GEN_PREFILL_BATCH;
    for (int64_t a = 0; a < n; a += max) {
        int nb = (int)(n - a < max ? n - a : max);
        for (int j = 0; j < nb; j++) pos[j] = (int32_t)(from + a + j);
        struct model_batch b = {.n = nb, .tokens = toks + a, .pos = pos, .seq = seq};
        kvik_status st = model_forward(sp->dctx, &sp->dkv.base, &b, sp->dlogits, err);
        if (st) return st;
    }
    return KVIK_OK;
}

/* Up to k draft tokens after ids[0..i) from the draft model (its cache
 * first catches up with ids); their count. */
static kvik_status draft_propose(struct gen *g, struct gen_spec *sp, const int32_t *ids, int64_t i, int k, int *n,
                                 struct kvik_err *err) {
    kvik_status st = draft_feed(g, sp, ids + sp->d_computed, sp->d_computed, i - sp->d_computed, err);
    if (st) return st;
    sp->d_computed = i;
    size_t nv = (size_t)sp->dm->hp.n_vocab;
    for (int j = 0; j < k; j++) {
        if (j > 0) {
            if ((st = draft_feed(g, sp, &sp->draft[j - 1], i + j - 1, 1, err))) return st;
            sp->d_computed = i + j;
        }
        float *q = sp->q ? sp->q + (size_t)j * nv : sp->p;
        sampler_probs(sp->dsmp, sp->dlogits, q);
        sp->draft[j] = spec_draw(q, (int32_t)nv, sampler_uniform(sp->dsmp));
    }
    *n = k;
    return KVIK_OK;
}

kvik_status gen_spec_step(struct gen *g, const int32_t *ids, int64_t i, int64_t n_max, int32_t *toks, int *nt,
                          struct kvik_err *err) {
    struct gen_spec *sp = g->spec;
    int want = spec_ctl_want(&sp->ctl), k = 0;
    if (want > n_max - i - 1) want = (int)(n_max - i - 1);
    kvik_status st = KVIK_OK;
    if (want > 0 && sp->mode == SPEC_NGRAM) k = spec_ngram_propose(ids, (int)i, sp->ngram, want, sp->draft);
    else if (want > 0 && (st = draft_propose(g, sp, ids, i, want, &k, err))) return st;
    int32_t tok[SPEC_MAX_DRAFT + 1], pos[SPEC_MAX_DRAFT + 1], seq[SPEC_MAX_DRAFT + 1] = {0};
    bool lg[SPEC_MAX_DRAFT + 1];
    for (int j = 0; j <= k; j++) {
        tok[j] = j ? sp->draft[j - 1] : ids[i - 1];
        pos[j] = (int32_t)(i - 1 + j);
        lg[j] = true;
    }
    struct model_batch b = {.n = k + 1, .tokens = tok, .pos = pos, .seq = seq, .logits = lg};
    if ((st = model_forward(g->ctx, &g->kv.base, &b, sp->rows, err))) return st;
    *nt = spec_verify(g->smp, sp->rows, sp->q, g->model->hp.n_vocab, sp->draft, k, sp->p, toks);
    int accepted = *nt - 1;
    sp->st.steps++;
    if (k > 0) {
        sp->st.drafts++;
        sp->st.drafted += k;
        sp->st.accepted += accepted;
        spec_ctl_update(&sp->ctl, k, accepted);
    }
    if (sp->d_computed > i + accepted) sp->d_computed = i + accepted; /* rejected drafts leave the draft cache */
    return KVIK_OK;
}
