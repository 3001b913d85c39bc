/*
 * prefix.c — the serving engine's use of the prefix cache (engine.h,
 * "Prefix cache"; the cache itself is in kv/kv_paged.c): the salt a
 * request's blocks are registered under, attaching a cached prefix when a
 * choice is admitted, registering blocks that became full after each
 * forward pass, and keeping a finished choice's partly filled last block
 * (its tail: kv_paged.h, "Tails"), so that a request continuing it (the
 * next turn of a chat) computes exactly the tokens that are new.
 *
 * The salt keeps apart what must not share K/V or must not see each other:
 * another model or the same model's other weights (struct model.identity),
 * another KV element type or block size, and another isolation key (the
 * server derives it from the API key and cache_salt). A per-engine random
 * secret is mixed in too, so nobody can compute block hashes offline and
 * aim collisions at another tenant's entries (a collision is only a miss
 * anyway: hits are verified token by token).
 */
#include "engine/engine_int.h"

void engine_prefix_init(struct engine *e) {
    uint64_t secret = hash64_pair((uint64_t)clock_ns(), (uint64_t)(uintptr_t)e);
    uint64_t shape = ((uint64_t)(uint32_t)e->cfg.kv_type << 32) | (uint32_t)e->cfg.block_tokens;
    e->cache_salt = hash64_pair(hash64_pair(e->m->identity, shape), secret);
}

uint64_t engine_prefix_salt(const struct engine *e, uint64_t cache_key) {
    return hash64_pair(e->cache_salt, cache_key);
}

int engine_prefix_attach(struct engine *e, struct eseq *s) {
    if (!e->cfg.prefix_cache) return 0;
    /* a prompt still owing log-probability events is computed in full */
    if (s->req->prompt_lp && s->req->prompt_lp_next < s->req->n_prompt) return 0;
    /* the last token is always computed: its logits give the next one */
    return kv_paged_prefix_attach(&e->kv, s->kv, s->tokens, s->n_tokens - 1, s->req->salt);
}

void engine_prefix_admitted(struct engine *e, struct eseq *s) {
    struct ereq *r = s->req;
    if (!e->cfg.prefix_cache) return;
    e->st.prefix_queries += (uint64_t)s->n_tokens;
    e->st.prefix_hits += (uint64_t)s->n_computed;
    if (!r->started) r->n_cached = s->n_computed < r->n_prompt ? s->n_computed : r->n_prompt;
    /* cached prompt tokens count as prompt tokens, once */
    int hi = s->n_computed < r->n_prompt ? s->n_computed : r->n_prompt;
    if (hi > r->n_prompt_counted) {
        e->st.prompt_tokens += (uint64_t)(hi - r->n_prompt_counted);
        r->n_prompt_counted = hi;
    }
}

void engine_prefix_register(struct engine *e) {
    if (!e->cfg.prefix_cache) return;
    for (int i = 0; i < e->n_running; i++) {
        struct eseq *s = e->running[i];
        kv_paged_prefix_register(&e->kv, s->kv, s->tokens, s->n_computed, s->req->salt);
    }
}

void engine_prefix_keep_tail(struct engine *e, struct eseq *s) {
    if (!e->cfg.prefix_cache || s->kv < 0) return;
    /* tokens[0..n) have their own K/V: the last sampled token is not fed,
     * and a verified draft leaves n_computed at what was kept */
    int n = s->n_computed < s->n_tokens ? s->n_computed : s->n_tokens;
    kv_paged_prefix_keep_tail(&e->kv, s->kv, s->tokens, n, s->req->salt);
}
