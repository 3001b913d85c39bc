/*
 * test_kv_prefix.c — the prefix cache of the paged KV cache (kv_index.h,
 * the prefix part of kv_paged.h):
 *   index       the hash index against a plain array under a long random
 *               mix of inserts and removals, with keys crowded onto a few
 *               home slots so probe runs wrap and deletions shift entries;
 *   hits        attach finds the longest registered chain, whole blocks
 *               only, not across salts, not past a changed token;
 *   collisions  an index entry whose hash matches but whose tokens do not
 *               is a miss;
 *   eviction    never-registered blocks are used first, then cached ones,
 *               least recently released first;
 *   immutable   a write after a truncate into a registered block copies
 *               it, leaving the cached rows intact;
 *   tails       a closed sequence's partly filled last block is attached
 *               by a longer sequence (all its ids) and by a diverging one
 *               (a prefix of them), copied on the first write with the
 *               cached rows intact, replaced by a newer tail of the same
 *               prefix, verified against salt and ids, and evicted like
 *               any cached block;
 *   random      thousands of open+attach, grow+register, fork, truncate,
 *               close (keeping the tail or not) and preempt-then-readmit
 *               operations on a small pool,
 *               where every row's value is a function of its token prefix:
 *               every sequence always reads back the rows of its own
 *               tokens, and kv_paged_consistent holds after each step.
 */
#include <stdlib.h>

#include "kv/kv_index.h"
#include "kv/kv_paged.h"
#include "tensor/tensor.h"
#include "test.h"

/* ---- the hash index ------------------------------------------------------- */

TEST(kv_index_matches_a_plain_array) {
    enum { MAX = 200, KEYS = 600, STEPS = 20000 };
    struct kv_index ix;
    REQUIRE(kv_index_init(&ix, MAX));
    static int32_t model[KEYS]; /* key k -> value or -1 */
    uint64_t keys[KEYS];
    for (int k = 0; k < KEYS; k++) {
        model[k] = -1;
        /* few distinct home slots: long runs that wrap around the table end */
        keys[k] = ((uint64_t)(k % 7) * 0x3Bull + ix.mask - 3) & ix.mask;
        keys[k] |= (uint64_t)(k + 1) << 40; /* the top bits make keys distinct; ^ >> 29 keeps slots crowded */
        keys[k] ^= (keys[k] >> 29) & ix.mask;
    }
    uint64_t rng = 99;
    int n = 0, refused_dup = 0, refused_full = 0, bad = 0;
    for (int step = 0; step < STEPS && !bad; step++) {
        int k = (int)(test_rand_u64(&rng) % KEYS);
        int32_t v = (int32_t)(test_rand_u64(&rng) % 1000);
        if (test_rand_u64(&rng) % 3) {
            bool ok = kv_index_insert(&ix, keys[k], v);
            bool want = model[k] < 0 && n < MAX;
            if (ok != want) bad = 1;
            if (ok) model[k] = v, n++;
            else if (model[k] >= 0) refused_dup++;
            else refused_full++;
        } else {
            bool wrong = model[k] >= 0 && kv_index_remove(&ix, keys[k], model[k] + 1);
            bool ok = kv_index_remove(&ix, keys[k], model[k] < 0 ? v : model[k]);
            if (wrong || ok != (model[k] >= 0)) bad = 2;
            if (ok) model[k] = -1, n--;
        }
        if (ix.n != n) bad = 3;
        for (int j = 0; j < KEYS && !bad; j++)
            if (kv_index_find(&ix, keys[j]) != model[j]) bad = 4;
        if (bad) test_fail(__FILE__, __LINE__, "step %d key %d: failure %d", step, k, bad);
    }
    CHECK_MSG(refused_dup > 0 && refused_full > 0, "duplicates refused %d, full refused %d", refused_dup, refused_full);
    kv_index_free(&ix);
    CHECK(!kv_index_init(&ix, 0));
    CHECK(kv_index_find(&ix, 1) == -1 && !kv_index_insert(&ix, 1, 1) && !kv_index_remove(&ix, 1, 1));
}

/* ---- the cache on a small pool ------------------------------------------------ */

enum { BT = 4 };

static struct kv_paged_config prefix_cfg(int64_t n_blocks, int max_seqs) {
    return (struct kv_paged_config){.n_layer = 2, .row_floats = 8, .type = TENSOR_TYPE_F32, .block_tokens = BT,
                                    .n_blocks = n_blocks, .max_seqs = max_seqs};
}

/* The hash of tokens[0..p] (what the K/V at position p depend on). */
static uint64_t prefix_id(const int32_t *tokens, int p) {
    return hash64(tokens, (size_t)(p + 1) * sizeof *tokens, 7);
}

static uint32_t row_word(uint64_t prefix, int layer, bool is_v, int i) {
    return (uint32_t)(hash64_pair(prefix, (uint64_t)(layer * 16 + is_v * 8 + i)) >> 16);
}

/* Writes the rows of positions from..to-1 of seq as its tokens determine. */
static void write_prefix_rows(struct kv_paged *kv, int seq, const int32_t *tokens, int from, int to) {
    for (int p = from; p < to; p++) {
        uint64_t id = prefix_id(tokens, p);
        for (int l = 0; l < kv->cfg.n_layer; l++)
            for (int v = 0; v < 2; v++) {
                uint8_t *r = kv->base.row(&kv->base, l, seq, p, v);
                for (int i = 0; i < kv->cfg.row_floats; i++) {
                    uint32_t w = row_word(id, l, v, i);
                    memcpy(r + 4 * (size_t)i, &w, 4);
                }
            }
    }
}

/* Every row of seq holds what its tokens determine; a sliding layer's
 * rows below its group's lo are released (NULL), all others there. */
static bool rows_match(struct kv_paged *kv, int seq, const int32_t *tokens) {
    for (int p = 0; p < kv_paged_seq_len(kv, seq); p++) {
        uint64_t id = prefix_id(tokens, p);
        for (int l = 0; l < kv->cfg.n_layer; l++)
            for (int v = 0; v < 2; v++) {
                const uint8_t *r = kv->base.row(&kv->base, l, seq, p, v);
                bool released = p < kv->seqs[seq].lo[kv->layer_group[l]];
                if (!r != released) return false;
                for (int i = 0; r && i < kv->cfg.row_floats; i++) {
                    uint32_t w;
                    memcpy(&w, r + 4 * (size_t)i, 4);
                    if (w != row_word(id, l, v, i)) return false;
                }
            }
    }
    return true;
}

/* A write into seq from its n_pos on finds the window of every sliding
 * layer still there. */
static bool window_kept(const struct kv_paged *kv, int seq) {
    const struct kv_seq *q = &kv->seqs[seq];
    for (int g = 1; g < kv->n_groups; g++) {
        int from = q->n_pos - kv->group_window[g] + 1;
        if (q->lo[g] > (from > 0 ? from : 0)) return false;
    }
    return true;
}

/* A sequence holding tokens[0..n) computed (after any cache hit) and
 * registered; its id, -1 on failure. *hit gets the attached positions. */
static int compute_seq(struct kv_paged *kv, const int32_t *tokens, int n, uint64_t salt, int *hit) {
    int s = kv_paged_seq_open(kv);
    if (s < 0) return -1;
    int h = kv_paged_prefix_attach(kv, s, tokens, n - 1, salt);
    if (hit) *hit = h;
    if (!kv_paged_seq_grow(kv, s, n)) {
        kv_paged_seq_close(kv, s);
        return -1;
    }
    write_prefix_rows(kv, s, tokens, h, n);
    kv_paged_prefix_register(kv, s, tokens, n, salt);
    return s;
}

TEST(kv_prefix_attach_finds_the_longest_verified_chain) {
    struct kv_paged kv;
    struct kv_paged_config c = prefix_cfg(16, 4);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int32_t t[14] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
    int hit;
    int a = compute_seq(&kv, t, 10, 1, &hit);
    REQUIRE(a >= 0);
    CHECK_EQ_INT(hit, 0);
    CHECK_EQ_INT(kv.seqs[a].n_chain, 2); /* positions 0..7; the third block is partial */
    CHECK(kv_paged_block_registered(&kv, kv.seqs[a].blocks[1]) && !kv_paged_block_registered(&kv, kv.seqs[a].blocks[2]));
    int32_t b0 = kv.seqs[a].blocks[0], b1 = kv.seqs[a].blocks[1];
    kv_paged_seq_close(&kv, a);
    CHECK_EQ_INT(kv_paged_cached_blocks(&kv), 2);
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), 16);
    CHECK(kv_paged_consistent(&kv));

    /* the same tokens: both blocks, the very same ones, rows intact */
    int b = compute_seq(&kv, t, 14, 1, &hit);
    REQUIRE(b >= 0);
    CHECK_EQ_INT(hit, 8);
    CHECK(kv.seqs[b].blocks[0] == b0 && kv.seqs[b].blocks[1] == b1);
    CHECK(rows_match(&kv, b, t));
    CHECK_EQ_INT(kv_paged_cached_blocks(&kv), 0);
    CHECK_EQ_INT(kv.seqs[b].n_chain, 3);
    /* in use by b and attached by d too */
    int d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, t, 13, 1), 12);
    CHECK_EQ_INT(kv.ref[b0], 2);
    CHECK(rows_match(&kv, d, t));
    kv_paged_seq_close(&kv, d);
    /* another salt: nothing; a changed token in block 1: block 0 only; a
     * prompt of one block and a token: that block */
    d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, t, 13, 2), 0);
    kv_paged_seq_close(&kv, d);
    int32_t u[14];
    memcpy(u, t, sizeof u);
    u[6] = 99;
    d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, u, 13, 1), 4);
    CHECK_EQ_INT(kv_paged_seq_len(&kv, d), 4);
    kv_paged_seq_close(&kv, d);
    d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, t, 3, 1), 0); /* less than a block */
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, NULL, 13, 1), 0);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, 99, t, 13, 1), 0);
    CHECK_EQ_INT(kv_paged_prefix_register(&kv, -1, t, 13, 1), 0);
    kv_paged_seq_close(&kv, d);
    kv_paged_seq_close(&kv, b);
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

TEST(kv_prefix_hash_collision_is_a_miss) {
    struct kv_paged kv;
    struct kv_paged_config c = prefix_cfg(8, 2);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int32_t t[5] = {1, 2, 3, 4, 5}, u[5] = {1, 2, 3, 9, 5};
    int a = compute_seq(&kv, t, 5, 0, NULL);
    REQUIRE(a >= 0);
    int32_t b0 = kv.seqs[a].blocks[0];
    kv_paged_seq_close(&kv, a);
    /* make t's block answer to u's hash, as a collision would */
    uint64_t hu = kv_paged_block_hash(0, 0, u, BT);
    REQUIRE(kv_index_remove(&kv.index, kv.key[b0].hash, b0));
    REQUIRE(kv_index_insert(&kv.index, hu, b0));
    kv.key[b0].hash = hu;
    REQUIRE(kv_paged_consistent(&kv));
    int d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, u, 4, 0), 0);
    /* computing u then keeps its block out of the cache (the hash is taken) */
    REQUIRE(kv_paged_seq_grow(&kv, d, 5));
    write_prefix_rows(&kv, d, u, 0, 5);
    CHECK_EQ_INT(kv_paged_prefix_register(&kv, d, u, 5, 0), 0);
    CHECK(!kv_paged_block_registered(&kv, kv.seqs[d].blocks[0]));
    CHECK(rows_match(&kv, d, u));
    kv_paged_seq_close(&kv, d);
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

TEST(kv_prefix_eviction_takes_empty_blocks_then_least_recent) {
    struct kv_paged kv;
    struct kv_paged_config c = prefix_cfg(6, 4);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int32_t p[3][4] = {{1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}};
    int32_t blk[3];
    for (int i = 0; i < 3; i++) { /* three one-block prompts, released in order 0, 1, 2 */
        int s = compute_seq(&kv, p[i], 4, 0, NULL);
        REQUIRE(s >= 0);
        blk[i] = kv.seqs[s].blocks[0];
        kv_paged_seq_close(&kv, s);
    }
    CHECK_EQ_INT(kv_paged_cached_blocks(&kv), 3);
    /* three never-registered blocks go first: the cache is untouched */
    int s = kv_paged_seq_open(&kv);
    REQUIRE(kv_paged_seq_grow(&kv, s, 12));
    CHECK_EQ_INT(kv_paged_cached_blocks(&kv), 3);
    /* then the least recently released: prompt 0's block */
    REQUIRE(kv_paged_seq_grow(&kv, s, 13));
    CHECK(kv.seqs[s].blocks[3] == blk[0] && !kv_paged_block_registered(&kv, blk[0]));
    CHECK_EQ_INT(kv_paged_cached_blocks(&kv), 2);
    /* a hit on prompt 1 makes it recent: prompt 2's block goes next */
    int h = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, h, p[1], 4, 0), 4);
    kv_paged_seq_close(&kv, h);
    REQUIRE(kv_paged_seq_grow(&kv, s, 17));
    CHECK(kv.seqs[s].blocks[4] == blk[2]);
    h = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, h, p[2], 4, 0), 0);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, h, p[1], 4, 0), 4);
    /* the pool is full: nothing more to take */
    CHECK(!kv_paged_seq_grow(&kv, s, 21));
    CHECK(kv_paged_consistent(&kv));
    kv_paged_seq_close(&kv, h);
    kv_paged_seq_close(&kv, s);
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), 6);
    kv_paged_free(&kv);
}

TEST(kv_prefix_registered_blocks_are_immutable) {
    struct kv_paged kv;
    struct kv_paged_config c = prefix_cfg(8, 3);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int32_t t[9] = {4, 3, 2, 1, 8, 7, 6, 5, 0}, u[9] = {4, 3, 2, 1, 8, 9, 9, 9, 0};
    int a = compute_seq(&kv, t, 9, 0, NULL);
    REQUIRE(a >= 0);
    int32_t b1 = kv.seqs[a].blocks[1];
    /* a rejected draft: back into block 1, which only a holds */
    kv_paged_seq_truncate(&kv, a, 5);
    CHECK_EQ_INT(kv.seqs[a].n_chain, 1);
    CHECK_EQ_INT(kv.ref[b1], 1);
    CHECK_EQ_INT(kv_paged_blocks_needed(&kv, a, 6), 1); /* the copy */
    REQUIRE(kv_paged_seq_grow(&kv, a, 9));
    CHECK(kv.seqs[a].blocks[1] != b1 && kv_paged_block_registered(&kv, b1));
    write_prefix_rows(&kv, a, u, 5, 9);
    CHECK(rows_match(&kv, a, u));
    CHECK_EQ_INT(kv_paged_prefix_register(&kv, a, u, 9, 0), 2);
    /* both continuations are cached, each with its own rows */
    int d = kv_paged_seq_open(&kv), e = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, t, 8, 0), 8);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, e, u, 8, 0), 8);
    CHECK(rows_match(&kv, d, t) && rows_match(&kv, e, u));
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

/* A sequence of tokens[0..n) computed and registered like compute_seq,
 * then closed keeping its tail; the tail's ids registered. */
static int finish_seq(struct kv_paged *kv, const int32_t *tokens, int n, uint64_t salt, int *hit) {
    int s = compute_seq(kv, tokens, n, salt, hit);
    if (s < 0) return -1;
    int r = kv_paged_prefix_keep_tail(kv, s, tokens, n, salt);
    kv_paged_seq_close(kv, s);
    return r;
}

TEST(kv_prefix_tail_is_attached_and_copied_on_write) {
    struct kv_paged kv;
    struct kv_paged_config c = prefix_cfg(16, 4);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    /* turn 1: 10 ids, blocks 0 and 1 full, a tail of 2 */
    int32_t t[16] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    int a = compute_seq(&kv, t, 10, 1, NULL);
    REQUIRE(a >= 0);
    int32_t tail = kv.seqs[a].blocks[2];
    CHECK_EQ_INT(kv_paged_prefix_keep_tail(&kv, a, t, 10, 1), 2);
    CHECK(kv_paged_block_registered(&kv, tail));
    CHECK_EQ_INT(kv_paged_prefix_keep_tail(&kv, a, t, 10, 1), 0); /* once */
    kv_paged_seq_close(&kv, a);
    CHECK_EQ_INT(kv_paged_cached_blocks(&kv), 3);
    CHECK(kv_paged_consistent(&kv));

    /* turn 2 continues turn 1: every one of its 10 positions, the tail included */
    int b = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, b, t, 15, 1), 10);
    CHECK(kv.seqs[b].blocks[2] == tail && kv.seqs[b].n_chain == 2);
    CHECK(rows_match(&kv, b, t));
    /* the first write copies the tail: one block more than the positions need */
    CHECK_EQ_INT(kv_paged_blocks_needed(&kv, b, 11), 1);
    REQUIRE(kv_paged_seq_grow(&kv, b, 16));
    CHECK(kv.seqs[b].blocks[2] != tail && kv_paged_block_registered(&kv, tail));
    write_prefix_rows(&kv, b, t, 10, 16);
    CHECK(rows_match(&kv, b, t));
    CHECK_EQ_INT(kv_paged_prefix_register(&kv, b, t, 16, 1), 4);
    CHECK(kv_paged_consistent(&kv));

    /* a third sequence diverging inside the tail takes the agreeing prefix
     * of it, and the cached rows are turn 1's */
    int32_t u[12];
    memcpy(u, t, sizeof u);
    u[9] = 99;
    int d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, u, 11, 1), 9);
    CHECK(kv.seqs[d].blocks[2] == tail);
    CHECK(rows_match(&kv, d, u));
    REQUIRE(kv_paged_seq_grow(&kv, d, 12));
    write_prefix_rows(&kv, d, u, 9, 12);
    CHECK(rows_match(&kv, d, u) && rows_match(&kv, b, t));
    kv_paged_seq_close(&kv, d);
    /* fewer ids than the tail holds: only as many as asked for */
    d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, t, 9, 1), 9);
    CHECK(rows_match(&kv, d, t));
    kv_paged_seq_close(&kv, d);
    /* another salt, or a tail id changed at its first position: the full blocks only */
    d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, t, 15, 2), 0);
    kv_paged_seq_close(&kv, d);
    u[8] = 98;
    d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, u, 11, 1), 8);
    kv_paged_seq_close(&kv, d);
    kv_paged_seq_close(&kv, b);
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

TEST(kv_prefix_tail_replaced_verified_and_evicted) {
    struct kv_paged kv;
    struct kv_paged_config c = prefix_cfg(4, 3);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int32_t t[6] = {1, 2, 3, 4, 5, 6}, u[7] = {1, 2, 3, 4, 5, 7, 8}, w[6] = {1, 2, 3, 4, 5, 6};
    /* a tail of 2, then one of 3 after the same block: the newer replaces it */
    CHECK_EQ_INT(finish_seq(&kv, t, 6, 0, NULL), 2);
    CHECK_EQ_INT(finish_seq(&kv, u, 7, 0, NULL), 3);
    CHECK_EQ_INT(kv_paged_cached_blocks(&kv), 2); /* block 0 and u's tail */
    int d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, t, 6, 0), 5);
    CHECK(rows_match(&kv, d, t));
    kv_paged_seq_close(&kv, d);
    /* a tail whose ids the cached one holds already leaves it in place */
    int32_t kept = -1;
    for (int32_t b = 0; b < 4; b++)
        if (kv_paged_block_registered(&kv, b) && kv.key[b].n_tokens == 3) kept = b;
    REQUIRE(kept >= 0);
    int hit = 0;
    CHECK_EQ_INT(finish_seq(&kv, u, 6, 0, &hit), 0);
    CHECK_EQ_INT(hit, 5);
    CHECK(kv_paged_block_registered(&kv, kept) && kv.key[kept].n_tokens == 3);
    /* a tail index entry naming a block whose salt differs is a miss */
    kv.key[kept].salt = 5;
    d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, u, 6, 0), 4);
    kv_paged_seq_close(&kv, d);
    kv.key[kept].salt = 0;
    CHECK(kv_paged_consistent(&kv));
    /* a pool of 4 blocks: a long sequence evicts the cached tail like any cached block */
    int s = kv_paged_seq_open(&kv);
    REQUIRE(kv_paged_seq_grow(&kv, s, 16));
    CHECK(!kv_paged_block_registered(&kv, kept));
    CHECK_EQ_INT(kv_paged_cached_blocks(&kv), 0);
    kv_paged_seq_close(&kv, s);
    d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, w, 6, 0), 0);
    kv_paged_seq_close(&kv, d);
    /* nothing to keep: a sequence ending on a block boundary, or unknown prefix */
    s = compute_seq(&kv, t, 4, 0, NULL);
    REQUIRE(s >= 0);
    CHECK_EQ_INT(kv_paged_prefix_keep_tail(&kv, s, t, 4, 0), 0);
    kv_paged_seq_close(&kv, s);
    s = kv_paged_seq_open(&kv);
    REQUIRE(kv_paged_seq_grow(&kv, s, 6));
    write_prefix_rows(&kv, s, t, 0, 6);
    CHECK_EQ_INT(kv_paged_prefix_keep_tail(&kv, s, t, 6, 0), 0); /* block 0 not registered */
    CHECK_EQ_INT(kv_paged_prefix_keep_tail(&kv, -1, t, 6, 0), 0);
    kv_paged_seq_close(&kv, s);
    CHECK(kv_paged_consistent(&kv));
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), 4);
    kv_paged_free(&kv);
}

/* A long random mix on a small pool with a tiny token alphabet, so that
 * prompts share prefixes often and the pool is always under pressure.
 * With sliding layers a sequence must also keep its window (window_kept),
 * except after a truncate more than slack below the n_pos a grow started
 * from or it was attached at (top; such a sequence is deep), which it
 * never recovers from. */
static void random_operations(const struct kv_paged_config *c, uint64_t seed, bool groups) {
    enum { SEQS = 10, MAXLEN = 32, STEPS = 8000 };
    struct kv_paged kv;
    REQUIRE(kv_paged_init(&kv, c, NULL) == KVIK_OK);
    int32_t tok[SEQS][MAXLEN];
    uint64_t salt[SEQS];
    bool open[SEQS] = {0}, deep[SEQS] = {0};
    int top[SEQS] = {0};
    uint64_t rng = seed;
    int hits = 0, readmit_hits = 0, forks = 0, evictions_seen = 0, tails = 0, tail_hits = 0, bad = 0;
    for (int step = 0; step < STEPS && !bad; step++) {
        int op = (int)(test_rand_u64(&rng) % 6), s = (int)(test_rand_u64(&rng) % SEQS);
        int len = open[s] ? kv_paged_seq_len(&kv, s) : 0;
        int64_t cached_before = kv_paged_cached_blocks(&kv);
        if (op == 0 && !open[s]) { /* a new request: attach, compute the rest */
            int n = 2 + (int)(test_rand_u64(&rng) % 20);
            int32_t t[MAXLEN];
            for (int i = 0; i < n; i++) t[i] = (int32_t)(test_rand_u64(&rng) % (i < 8 ? 2 : 3));
            uint64_t sl = test_rand_u64(&rng) % 2;
            int h = 0, id = compute_seq(&kv, t, n, sl, &h);
            if (id >= 0) {
                open[id] = true, deep[id] = false, top[id] = h, salt[id] = sl, hits += h > 0, tail_hits += h % BT != 0;
                memcpy(tok[id], t, sizeof t);
            }
        } else if (op == 1 && open[s]) {
            int f = kv_paged_seq_fork(&kv, s);
            if (f >= 0) {
                open[f] = true, forks++, salt[f] = salt[s], deep[f] = deep[s], top[f] = top[s];
                memcpy(tok[f], tok[s], sizeof tok[s]);
            }
        } else if (op == 2 && open[s]) { /* decode or a prompt chunk */
            int to = len + 1 + (int)(test_rand_u64(&rng) % 6);
            if (to > MAXLEN) to = MAXLEN;
            for (int p = len; p < to; p++) tok[s][p] = (int32_t)(test_rand_u64(&rng) % 3);
            if (kv_paged_seq_grow(&kv, s, to)) {
                if (len > top[s]) top[s] = len;
                write_prefix_rows(&kv, s, tok[s], len, to);
                kv_paged_prefix_register(&kv, s, tok[s], to, salt[s]);
            }
        } else if (op == 3 && open[s]) { /* a rejected draft (or, with sliding layers, a deeper cut) */
            int to = (int)(test_rand_u64(&rng) % (unsigned)(len + 1));
            kv_paged_seq_truncate(&kv, s, to);
            if (to < top[s] - c->slack) deep[s] = true;
        } else if (op == 4 && open[s]) { /* finished, keeping its tail or not */
            if (test_rand_u64(&rng) % 2) tails += kv_paged_prefix_keep_tail(&kv, s, tok[s], len, salt[s]) > 0;
            kv_paged_seq_close(&kv, s);
            open[s] = false;
        } else if (op == 5 && open[s] && len > 1) { /* preempted, then readmitted at once */
            if (test_rand_u64(&rng) % 2) tails += kv_paged_prefix_keep_tail(&kv, s, tok[s], len, salt[s]) > 0;
            kv_paged_seq_close(&kv, s);
            open[s] = false;
            int h = 0, id = compute_seq(&kv, tok[s], len, salt[s], &h);
            if (id >= 0) {
                open[id] = true, deep[id] = false, top[id] = h, salt[id] = salt[s];
                readmit_hits += h >= (len - 1) / BT * BT && h > 0;
                if (id != s) memcpy(tok[id], tok[s], sizeof tok[s]);
            }
        }
        if (kv_paged_cached_blocks(&kv) < cached_before && op == 2) evictions_seen++;
        if (!kv_paged_consistent(&kv)) bad = 1;
        for (int q = 0; q < SEQS && !bad; q++)
            if (open[q] && !rows_match(&kv, q, tok[q])) bad = 2;
            else if (open[q] && !deep[q] && !window_kept(&kv, q)) bad = 3;
        if (bad) test_fail(__FILE__, __LINE__, "step %d op %d seq %d: failure %d", step, op, s, bad);
    }
    printf("    hits %d, readmissions hitting their own blocks %d, forks %d, evictions %d, tails kept %d, tail hits %d\n",
           hits, readmit_hits, forks, evictions_seen, tails, tail_hits);
    if (!groups)
        CHECK(hits > 20 && readmit_hits > 50 && forks > 100 && evictions_seen > 50 && tails > 50 && tail_hits > 10);
    else
        CHECK(hits > 10 && readmit_hits > 100 && forks > 100 && evictions_seen > 50 && tails > 50 && tail_hits > 3);
    for (int s = 0; s < SEQS; s++)
        if (open[s]) kv_paged_seq_close(&kv, s);
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), c->n_blocks);
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

TEST(kv_prefix_random_operations_keep_the_pool_consistent) {
    struct kv_paged_config c = prefix_cfg(24, 10);
    random_operations(&c, 4242, false);
}

/* ---- layer groups -------------------------------------------------------- */

/* Four layers: three sliding (window 6), one global; groups of one layer. */
static const int32_t k_windows[4] = {6, 6, 0, 6};

static struct kv_paged_config group_cfg(int64_t n_blocks, int max_seqs, int32_t slack) {
    struct kv_paged_config c = prefix_cfg(n_blocks, max_seqs);
    c.n_layer = 4, c.layer_window = k_windows, c.slack = slack;
    return c;
}

/* Computes tokens[0..n) into a new sequence one position at a time (a
 * decode), registering after each; its id. */
static int decode_seq(struct kv_paged *kv, const int32_t *tokens, int n, uint64_t salt) {
    int s = kv_paged_seq_open(kv);
    for (int p = 0; s >= 0 && p < n; p++) {
        if (!kv_paged_seq_grow(kv, s, p + 1)) return -1;
        write_prefix_rows(kv, s, tokens, p, p + 1);
        kv_paged_prefix_register(kv, s, tokens, p + 1, salt);
    }
    return s;
}

static bool all_companions_registered(const struct kv_paged *kv, int32_t anchor) {
    for (int g = 1; g < kv->n_groups; g++) {
        int32_t c = kv->links[(size_t)anchor * (size_t)kv->n_groups + (size_t)g];
        if (c < 0 || !kv_paged_block_registered(kv, c)) return false;
    }
    return true;
}

static bool no_companion_registered(const struct kv_paged *kv, int32_t anchor) {
    for (int g = 1; g < kv->n_groups; g++) {
        int32_t c = kv->links[(size_t)anchor * (size_t)kv->n_groups + (size_t)g];
        if (c >= 0 && kv_paged_block_registered(kv, c)) return false;
    }
    return true;
}

/* Attach takes a chain only as far as the sliding groups' blocks of the
 * window before its end are still cached; older ones released as the
 * sequence grew may be evicted without harm. */
TEST(kv_prefix_groups_attach_needs_the_window) {
    struct kv_paged kv;
    struct kv_paged_config c = group_cfg(48, 4, 0);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int32_t t[24];
    for (int i = 0; i < 24; i++) t[i] = 100 + i;
    int a = decode_seq(&kv, t, 24, 1);
    REQUIRE(a >= 0);
    CHECK_EQ_INT(kv.seqs[a].n_chain, 6);
    int32_t anchor[6];
    for (int j = 0; j < 6; j++) anchor[j] = kv_paged_seq_block(&kv, a, j, 0);
    /* blocks 0..2 of the sliding groups were released on the way, cached */
    CHECK(kv_paged_seq_block(&kv, a, 2, 1) == -1 && all_companions_registered(&kv, anchor[0]));
    kv_paged_seq_close(&kv, a);
    CHECK(kv_paged_consistent(&kv));
    /* 23 ids: five full blocks; the window before position 20 is 15..19,
     * in blocks 3 and 4 */
    int b = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, b, t, 23, 1), 20);
    CHECK(rows_match(&kv, b, t) && window_kept(&kv, b));
    CHECK(kv_paged_seq_block(&kv, b, 2, 3) == -1 && kv_paged_seq_block(&kv, b, 3, 3) >= 0);
    kv_paged_seq_close(&kv, b);
    /* d holds the first two block positions (its window is all of them) */
    int d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, t, 8, 1), 8);
    CHECK(rows_match(&kv, d, t));
    /* pressure evicts the least recently released: block 2's companions */
    int32_t u[200];
    for (int i = 0; i < 200; i++) u[i] = 7;
    int s = kv_paged_seq_open(&kv), p = 0;
    for (; p < 200 && !no_companion_registered(&kv, anchor[2]); p++) {
        REQUIRE(kv_paged_seq_grow(&kv, s, p + 1));
        write_prefix_rows(&kv, s, u, p, p + 1);
    }
    CHECK(all_companions_registered(&kv, anchor[3]) && all_companions_registered(&kv, anchor[0]));
    int e = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, e, t, 23, 1), 20); /* blocks 3 and 4 are what it needs */
    CHECK(rows_match(&kv, e, t));
    kv_paged_seq_close(&kv, e);
    /* then more, until block 3's companions are gone too: the longest
     * chain with its window is two blocks (window 3..7, blocks 0 and 1) */
    for (; p < 200 && !no_companion_registered(&kv, anchor[3]); p++) {
        REQUIRE(kv_paged_seq_grow(&kv, s, p + 1));
        write_prefix_rows(&kv, s, u, p, p + 1);
    }
    REQUIRE(p < 200);
    CHECK(kv_paged_block_registered(&kv, anchor[3]));
    e = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, e, t, 23, 1), 8);
    CHECK(rows_match(&kv, e, t) && window_kept(&kv, e));
    CHECK(kv_paged_consistent(&kv));
    kv_paged_seq_close(&kv, e);
    kv_paged_seq_close(&kv, d);
    kv_paged_seq_close(&kv, s);
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), 48);
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

/* A tail with its companions: attached with the window before it, copied
 * in every group on the first write, the cached rows intact. */
TEST(kv_prefix_groups_tail_is_attached_and_copied) {
    struct kv_paged kv;
    struct kv_paged_config c = group_cfg(48, 4, 0);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int32_t t[16] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    int a = decode_seq(&kv, t, 10, 1);
    REQUIRE(a >= 0);
    int32_t tail = kv_paged_seq_block(&kv, a, 2, 0), tail3 = kv_paged_seq_block(&kv, a, 2, 3);
    CHECK_EQ_INT(kv_paged_prefix_keep_tail(&kv, a, t, 10, 1), 2);
    CHECK(kv_paged_block_registered(&kv, tail) && kv_paged_block_registered(&kv, tail3));
    kv_paged_seq_close(&kv, a);
    int b = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, b, t, 15, 1), 10);
    CHECK(kv_paged_seq_block(&kv, b, 2, 0) == tail && kv_paged_seq_block(&kv, b, 2, 3) == tail3);
    CHECK(kv_paged_seq_block(&kv, b, 0, 1) == -1); /* the window of 10 starts at 5 */
    CHECK(rows_match(&kv, b, t) && window_kept(&kv, b));
    CHECK_EQ_INT(kv_paged_blocks_needed(&kv, b, 11), 4);
    REQUIRE(kv_paged_seq_grow(&kv, b, 16));
    CHECK(kv_paged_seq_block(&kv, b, 2, 3) != tail3 && kv_paged_block_registered(&kv, tail3));
    write_prefix_rows(&kv, b, t, 10, 16);
    CHECK(rows_match(&kv, b, t));
    int d = kv_paged_seq_open(&kv);
    CHECK_EQ_INT(kv_paged_prefix_attach(&kv, d, t, 11, 1), 10);
    CHECK(rows_match(&kv, d, t));
    kv_paged_seq_close(&kv, d);
    kv_paged_seq_close(&kv, b);
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

TEST(kv_prefix_groups_random_operations_keep_the_pool_consistent) {
    struct kv_paged_config c = group_cfg(60, 10, 0);
    random_operations(&c, 4242, true);
    c = group_cfg(60, 10, 2);
    random_operations(&c, 99, true);
}
