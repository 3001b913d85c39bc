/*
 * test_kv_paged.c — the paged key/value cache: block bookkeeping under a
 * long random mix of operations (every block's count equals its users, the
 * free list holds exactly the unused blocks, each sequence reads back what it
 * wrote, forks see their source's rows and copy before writing), clean
 * refusals when the pool is full, and the forward pass through it (bit for
 * bit equal to the flat cache in F32; close in F16 and Q8_0).
 */
#include <math.h>
#include <stdlib.h>

#include "kv/kv_paged.h"
#include "model/model.h"
#include "tensor/tensor.h"
#include "test.h"

static struct kv_paged_config small_cfg(int64_t n_blocks, int max_seqs) {
    return (struct kv_paged_config){.n_layer = 2, .row_floats = 8, .type = TENSOR_TYPE_F32, .block_tokens = 4,
                                    .n_blocks = n_blocks, .max_seqs = max_seqs};
}

TEST(kv_paged_rejects_bad_configs) {
    struct kv_paged kv;
    struct kvik_err err = {0};
    struct kv_paged_config c = small_cfg(8, 2);
    c.block_tokens = 0;
    CHECK_EQ_INT(kv_paged_init(&kv, &c, &err), KVIK_ERR_INVALID_ARG);
    c = small_cfg(0, 2);
    CHECK_EQ_INT(kv_paged_init(&kv, &c, &err), KVIK_ERR_INVALID_ARG);
    c = small_cfg(8, 0);
    CHECK_EQ_INT(kv_paged_init(&kv, &c, &err), KVIK_ERR_INVALID_ARG);
    c = small_cfg(8, 2);
    c.type = TENSOR_TYPE_Q4_0; /* not a cache type */
    CHECK_EQ_INT(kv_paged_init(&kv, &c, &err), KVIK_ERR_INVALID_ARG);
    c.type = TENSOR_TYPE_Q8_0; /* rows of 8 values are not whole Q8_0 blocks */
    CHECK_EQ_INT(kv_paged_init(&kv, &c, &err), KVIK_ERR_INVALID_ARG);
    c = small_cfg(INT32_MAX, 2);
    c.row_floats = 8192;
    CHECK_EQ_INT(kv_paged_init(&kv, &c, &err), KVIK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "too large") != NULL, "%s", err.msg);
}

/* Value i of the rows of (layer, pos) written by owner: a hash, stored as
 * raw 32-bit words in the F32 rows. */
static uint32_t stamp(int layer, int owner, int pos, bool is_v, int i) {
    uint64_t h = (uint64_t)owner * 0x9E3779B97F4A7C15ull ^ (uint64_t)(pos * 64 + layer * 16 + is_v * 8 + i);
    h *= 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(h >> 32);
}

static uint32_t word_at(const void *row, int i) {
    uint32_t w;
    memcpy(&w, (const uint8_t *)row + 4 * (size_t)i, 4);
    return w;
}

static void write_rows(struct kv_paged *kv, int seq, int owner, int from, int to) {
    for (int p = from; p < to; p++)
        for (int l = 0; l < kv->cfg.n_layer; l++)
            for (int v = 0; v < 2; v++) {
                uint8_t *r = kv->base.row(&kv->base, l, seq, p, v);
                for (int i = 0; i < kv->cfg.row_floats; i++) {
                    uint32_t w = stamp(l, owner, p, v, i);
                    memcpy(r + 4 * (size_t)i, &w, 4);
                }
            }
}

TEST(kv_paged_spans_follow_blocks) {
    struct kv_paged kv;
    struct kv_paged_config c = small_cfg(8, 2);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int s = kv_paged_seq_open(&kv);
    REQUIRE(s >= 0);
    CHECK(kv.base.row(&kv.base, 0, s, 0, false) == NULL); /* nothing reserved yet */
    REQUIRE(kv_paged_seq_grow(&kv, s, 10));
    CHECK_EQ_INT(kv_paged_used_blocks(&kv), 3);
    write_rows(&kv, s, 1, 0, 10);
    const void *k, *v;
    /* runs end at block boundaries and at the sequence's end */
    CHECK_EQ_INT(kv.base.span(&kv.base, 1, s, 0, 10, &k, &v), 4);
    CHECK(word_at(k, 0) == stamp(1, 1, 0, false, 0) && word_at(v, 0) == stamp(1, 1, 0, true, 0));
    CHECK_EQ_INT(kv.base.span(&kv.base, 1, s, 5, 10, &k, &v), 3);
    CHECK(word_at(k, 2 * 8) == stamp(1, 1, 7, false, 0)); /* rows are row_bytes apart */
    CHECK_EQ_INT(kv.base.span(&kv.base, 1, s, 8, 10, &k, &v), 2);
    CHECK_EQ_INT(kv.base.span(&kv.base, 1, s, 8, 1, &k, &v), 1);
    CHECK_EQ_INT(kv.base.span(&kv.base, 1, s, 10, 1, &k, &v), 0);
    CHECK_EQ_INT(kv.base.span(&kv.base, 2, s, 0, 1, &k, &v), 0); /* no such layer */
    kv_paged_seq_truncate(&kv, s, 5);
    CHECK_EQ_INT(kv_paged_used_blocks(&kv), 2);
    CHECK_EQ_INT(kv.base.span(&kv.base, 0, s, 4, 10, &k, &v), 1);
    kv_paged_seq_close(&kv, s);
    CHECK_EQ_INT(kv_paged_used_blocks(&kv), 0);
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

TEST(kv_paged_full_pool_refuses_cleanly) {
    struct kv_paged kv;
    struct kv_paged_config c = small_cfg(3, 3);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int a = kv_paged_seq_open(&kv), b = kv_paged_seq_open(&kv);
    REQUIRE(kv_paged_seq_grow(&kv, a, 6)); /* 2 blocks */
    CHECK_EQ_INT(kv_paged_blocks_needed(&kv, b, 5), 2);
    CHECK(!kv_paged_seq_grow(&kv, b, 5)); /* only 1 left */
    CHECK_EQ_INT(kv_paged_seq_len(&kv, b), 0);
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), 1);
    /* a fork shares; writing into its shared half-full block needs a copy */
    int f = kv_paged_seq_fork(&kv, a);
    REQUIRE(f >= 0);
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), 1);
    CHECK_EQ_INT(kv_paged_blocks_needed(&kv, f, 7), 1);
    CHECK(kv_paged_seq_fork(&kv, a) < 0); /* no slot left */
    REQUIRE(kv_paged_seq_grow(&kv, f, 7));
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), 0);
    CHECK(!kv_paged_seq_grow(&kv, a, 9));
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

/* Tables sized up front: growing and forking up to that length keeps every
 * table where it is (the serving engine allocates nothing in a step). */
TEST(kv_paged_reserved_tables_do_not_move) {
    struct kv_paged kv;
    struct kv_paged_config c = small_cfg(64, 3);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    REQUIRE(kv_paged_reserve_tables(&kv, 100)); /* 25 blocks of 4 */
    CHECK(!kv_paged_reserve_tables(&kv, -1));
    int32_t *tables[3];
    for (int s = 0; s < 3; s++) {
        tables[s] = kv.seqs[s].blocks;
        CHECK(tables[s] != NULL && kv.seqs[s].cap >= 25);
    }
    int a = kv_paged_seq_open(&kv);
    REQUIRE(kv_paged_seq_grow(&kv, a, 50));
    int f = kv_paged_seq_fork(&kv, a);
    REQUIRE(f >= 0 && kv_paged_seq_grow(&kv, f, 100) && kv_paged_seq_grow(&kv, a, 90));
    kv_paged_seq_close(&kv, a);
    a = kv_paged_seq_open(&kv);
    REQUIRE(kv_paged_seq_grow(&kv, a, 100));
    for (int s = 0; s < 3; s++) CHECK(kv.seqs[s].blocks == tables[s]);
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

/* A long random mix of open, fork, grow (writing the new rows), truncate
 * and close against a model of what every sequence must read back: every
 * position of a global layer, and of a sliding layer of window w every
 * position from base - w + 1 - slack on, base being the largest n_pos a
 * grow of the sequence started from (positions before may be released:
 * row() is then NULL, never another sequence's row). */
static void random_operations(const struct kv_paged_config *c, uint64_t seed) {
    enum { SEQS = 12, MAXLEN = 40, STEPS = 6000 };
    struct kv_paged kv;
    REQUIRE(kv_paged_init(&kv, c, NULL) == KVIK_OK);
    /* owner[s][p]: whose stamp position p of sequence s holds; -1 none */
    int owner[SEQS][MAXLEN], base[SEQS] = {0};
    bool open[SEQS] = {0};
    uint64_t rng = seed;
    int refused = 0, forks = 0, bad = 0, released = 0;
    for (int step = 0; step < STEPS && !bad; step++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int op = (int)(rng >> 60) % 5, s = (int)((rng >> 40) % SEQS);
        int len = open[s] ? kv_paged_seq_len(&kv, s) : 0;
        if (op == 0 && !open[s]) {
            int id = kv_paged_seq_open(&kv);
            if (id >= 0) open[id] = true, base[id] = 0, memset(owner[id], 0xff, sizeof owner[id]);
        } else if (op == 1 && open[s]) {
            int f = kv_paged_seq_fork(&kv, s);
            if (f >= 0) {
                open[f] = true, forks++, base[f] = base[s];
                memcpy(owner[f], owner[s], sizeof owner[s]);
            }
        } else if (op == 2 && open[s]) {
            int to = len + 1 + (int)((rng >> 20) % 9);
            if (to > MAXLEN) to = MAXLEN;
            int64_t need = kv_paged_blocks_needed(&kv, s, to), free_before = kv_paged_free_blocks(&kv);
            bool ok = kv_paged_seq_grow(&kv, s, to);
            if (ok != (need <= free_before)) bad = 1;
            if (ok && kv_paged_free_blocks(&kv) != free_before - need && need > 0) bad = 5;
            if (ok) {
                if (len > base[s]) base[s] = len;
                write_rows(&kv, s, s + 1 + step * SEQS, len, to);
                for (int p = len; p < to; p++) owner[s][p] = s + 1 + step * SEQS;
            } else {
                refused++;
                if (kv_paged_seq_len(&kv, s) != len) bad = 2;
            }
        } else if (op == 3 && open[s]) {
            kv_paged_seq_truncate(&kv, s, (int)((rng >> 20) % (unsigned)(len + 1)));
        } else if (op == 4 && open[s]) {
            kv_paged_seq_close(&kv, s);
            open[s] = false;
        }
        if (!kv_paged_consistent(&kv)) bad = 3;
        /* every open sequence reads back its own rows where it must */
        for (int q = 0; q < SEQS && !bad; q++) {
            if (!open[q]) continue;
            for (int l = 0; l < c->n_layer && !bad; l++) {
                int w = c->layer_window && kv.n_groups > 1 ? c->layer_window[l] : 0;
                int from = w ? base[q] - w + 1 - c->slack : 0;
                for (int p = 0; p < kv_paged_seq_len(&kv, q) && !bad; p++) {
                    const void *r = kv.base.row(&kv.base, l, q, p, true);
                    if (!r && p < from) {
                        released++;
                        continue;
                    }
                    if (!r || word_at(r, 3) != stamp(l, owner[q][p], p, true, 3)) bad = 4;
                }
            }
        }
        if (bad) test_fail(__FILE__, __LINE__, "step %d op %d seq %d: failure %d", step, op, s, bad);
    }
    CHECK_MSG(refused > 0 && forks > 0, "refused %d forks %d", refused, forks); /* the mix reached a full pool and shared blocks */
    if (kv.n_groups > 1) CHECK_MSG(released > 1000, "released rows seen %d", released);
    for (int s = 0; s < SEQS; s++)
        if (open[s]) kv_paged_seq_close(&kv, s);
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), c->n_blocks);
    kv_paged_free(&kv);
}

TEST(kv_paged_random_operations_keep_the_pool_consistent) {
    struct kv_paged_config c = small_cfg(20, 12);
    random_operations(&c, 12345);
}

/* ---- layer groups: sliding layers keep only their window ---------------- */

/* Four layers: three sliding (window 6), one global; groups of one layer. */
static const int32_t k_windows[4] = {6, 6, 0, 6};

static struct kv_paged_config group_cfg(int64_t n_blocks, int max_seqs, int32_t slack) {
    struct kv_paged_config c = {.n_layer = 4, .row_floats = 8, .type = TENSOR_TYPE_F32, .block_tokens = 4,
                                .n_blocks = n_blocks, .max_seqs = max_seqs, .layer_window = k_windows,
                                .slack = slack};
    return c;
}

TEST(kv_paged_groups_split_layers_by_window) {
    struct kv_paged kv;
    struct kv_paged_config c = group_cfg(8, 2, 0);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    CHECK_EQ_INT(kv.n_groups, 4);
    CHECK_EQ_INT(kv.group_layers, 1);
    CHECK_EQ_INT(kv.layer_group[2], 0); /* the global layer is group 0 */
    CHECK_EQ_INT(kv.group_window[0], 0);
    CHECK(kv.group_window[1] == 6 && kv.group_window[3] == 6);
    CHECK_EQ_INT(kv.block_bytes, 2 * 4 * 8 * 4);
    kv_paged_free(&kv);
    /* Gemma 3's pattern, 5 sliding then 1 global, three times: groups of 3 */
    int32_t w18[18];
    for (int l = 0; l < 18; l++) w18[l] = (l + 1) % 6 ? 512 : 0;
    c = group_cfg(8, 2, 0);
    c.n_layer = 18, c.layer_window = w18;
    int n_global = 0;
    CHECK_EQ_INT(kv_paged_config_groups(&c, &n_global), 6);
    CHECK_EQ_INT(n_global, 1);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    CHECK(kv.layer_group[5] == 0 && kv.layer_group[11] == 0 && kv.layer_group[17] == 0);
    CHECK(kv.layer_slot[5] == 0 && kv.layer_slot[11] == 1 && kv.layer_slot[17] == 2);
    CHECK(kv.layer_group[0] == 1 && kv.layer_group[4] == 2 && kv.layer_group[16] == 5);
    kv_paged_free(&kv);
    /* two windows and a global layer, counts 1, 1, 2: four groups */
    int32_t w4[4] = {0, 4, 8, 8};
    c = group_cfg(8, 2, 0);
    c.layer_window = w4;
    CHECK_EQ_INT(kv_paged_config_groups(&c, &n_global), 4);
    /* no global layer, no sliding layer, no windows: one group of all */
    int32_t all[4] = {5, 5, 5, 5}, none[4] = {0};
    c.layer_window = all;
    CHECK_EQ_INT(kv_paged_config_groups(&c, NULL), 1);
    c.layer_window = none;
    CHECK_EQ_INT(kv_paged_config_groups(&c, NULL), 1);
    c.layer_window = NULL;
    CHECK_EQ_INT(kv_paged_config_groups(&c, NULL), 1);
    int32_t neg[4] = {0, -1, 0, 0};
    c.layer_window = neg;
    CHECK_EQ_INT(kv_paged_config_groups(&c, NULL), 0);
    CHECK_EQ_INT(kv_paged_init(&kv, &c, NULL), KVIK_ERR_INVALID_ARG);
    c = group_cfg(8, 2, -1);
    CHECK_EQ_INT(kv_paged_init(&kv, &c, NULL), KVIK_ERR_INVALID_ARG);
}

/* Sliding blocks wholly before the window of the next write are released
 * as a sequence grows; what is released reads as no room; the pool holds
 * the global positions plus a bounded window. */
TEST(kv_paged_growth_releases_old_sliding_blocks) {
    struct kv_paged kv;
    struct kv_paged_config c = group_cfg(64, 2, 0);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int s = kv_paged_seq_open(&kv);
    REQUIRE(s >= 0);
    int bad = 0;
    for (int p = 0; p < 60 && !bad; p++) {
        int64_t need = kv_paged_blocks_needed(&kv, s, p + 1), free_before = kv_paged_free_blocks(&kv);
        REQUIRE(kv_paged_seq_grow(&kv, s, p + 1));
        if (kv_paged_free_blocks(&kv) != free_before - need && need > 0) bad = 1;
        write_rows(&kv, s, 1, p, p + 1);
        /* what the token at p reads: positions p - 5 .. p in the sliding
         * layers, 0 .. p in the global one */
        for (int l = 0; l < 4 && !bad; l++) {
            int from = k_windows[l] ? p - 5 : 0;
            for (int x = from < 0 ? 0 : from; x <= p && !bad; x++) {
                const void *r = kv.base.row(&kv.base, l, s, x, false);
                if (!r || word_at(r, 1) != stamp(l, 1, x, false, 1)) bad = 2;
            }
        }
        /* released: every sliding block wholly before p - 5 */
        int released_to = p - 5 > 0 ? (p - 5) / 4 * 4 : 0;
        const void *k, *v;
        for (int x = 0; x < released_to && !bad; x++)
            if (kv.base.row(&kv.base, 0, s, x, true) || kv.base.span(&kv.base, 3, s, x, 4, &k, &v) != 0) bad = 3;
        if (released_to < p && kv.base.span(&kv.base, 0, s, released_to, 1, &k, &v) != 1) bad = 4;
        /* the global layer's blocks plus at most 3 of each sliding group */
        int64_t want = (p + 4) / 4 + 3 * ((p + 4) / 4 - released_to / 4);
        if (kv_paged_used_blocks(&kv) != want) bad = 5;
        if (kv_paged_used_blocks(&kv) > kv_paged_blocks_max(&kv, p + 1, 1)) bad = 6;
        if (!kv_paged_consistent(&kv)) bad = 7;
        if (bad) test_fail(__FILE__, __LINE__, "position %d: failure %d", p, bad);
    }
    /* 60 positions: 15 global blocks, 2 or 3 per sliding group; a full
     * cache would hold 60 */
    CHECK(kv_paged_used_blocks(&kv) <= 15 + 3 * 3);
    /* a grow by many positions keeps the window of its first one */
    int f = kv_paged_seq_open(&kv);
    REQUIRE(kv_paged_seq_grow(&kv, f, 30));
    CHECK_EQ_INT(kv_paged_used_blocks(&kv) - (15 + 3 * 2), 4 * 8);
    /* the next grow from 30 releases 6 blocks of each sliding group first */
    CHECK_EQ_INT(kv_paged_blocks_needed(&kv, f, 31), 0);
    int64_t free_before = kv_paged_free_blocks(&kv);
    REQUIRE(kv_paged_seq_grow(&kv, f, 31));
    CHECK_EQ_INT(kv_paged_free_blocks(&kv) - free_before, 3 * 6);
    CHECK_EQ_INT(kv_paged_blocks_needed(&kv, f, 33), 4);
    kv_paged_seq_close(&kv, f);
    kv_paged_seq_close(&kv, s);
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), 64);
    CHECK(kv_paged_consistent(&kv));
    kv_paged_free(&kv);
}

/* Forks share what is kept (released entries stay released in both),
 * copy the last block of every group on the first write, and a truncate
 * within slack continues with its whole window; one beyond slack leaves
 * released rows in the window, which read as no room. */
TEST(kv_paged_groups_fork_truncate_and_copy) {
    struct kv_paged kv;
    struct kv_paged_config c = group_cfg(64, 4, 3);
    REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
    int s = kv_paged_seq_open(&kv);
    for (int p = 0; p < 22; p++) {
        REQUIRE(kv_paged_seq_grow(&kv, s, p + 1));
        write_rows(&kv, s, 1, p, p + 1);
    }
    /* the grow from 21 kept positions from 21 - 5 - 3 = 13: blocks 3.. */
    CHECK(kv_paged_seq_block(&kv, s, 2, 1) == -1 && kv_paged_seq_block(&kv, s, 3, 1) >= 0);
    int64_t used = kv_paged_used_blocks(&kv);
    int f = kv_paged_seq_fork(&kv, s);
    REQUIRE(f >= 0);
    CHECK_EQ_INT(kv_paged_used_blocks(&kv), used);
    CHECK(kv_paged_seq_block(&kv, f, 2, 1) == -1 && kv_paged_seq_block(&kv, f, 3, 1) == kv_paged_seq_block(&kv, s, 3, 1));
    /* 22 positions end inside block 5: the fork's first write copies it in all four groups */
    CHECK_EQ_INT(kv_paged_blocks_needed(&kv, f, 23), 4);
    REQUIRE(kv_paged_seq_grow(&kv, f, 23));
    write_rows(&kv, f, 2, 22, 23);
    CHECK(kv_paged_seq_block(&kv, f, 5, 2) != kv_paged_seq_block(&kv, s, 5, 2));
    const void *r = kv.base.row(&kv.base, 0, s, 21, false), *rf = kv.base.row(&kv.base, 0, f, 21, false);
    CHECK(r && rf && r != rf && word_at(rf, 0) == stamp(0, 1, 21, false, 0));
    /* a truncate back by slack: the window of the next write is all there */
    kv_paged_seq_truncate(&kv, f, 19);
    REQUIRE(kv_paged_seq_grow(&kv, f, 20));
    for (int x = 19 - 5; x < 19; x++) CHECK(kv.base.row(&kv.base, 3, f, x, true) != NULL);
    /* back further than slack: a position of the window is gone */
    kv_paged_seq_truncate(&kv, s, 12);
    CHECK(kv.base.row(&kv.base, 3, s, 12 - 5, true) == NULL && kv.base.row(&kv.base, 2, s, 7, true) != NULL);
    REQUIRE(kv_paged_seq_grow(&kv, s, 14));
    CHECK(kv.base.row(&kv.base, 0, s, 13, false) != NULL && kv.base.row(&kv.base, 0, s, 11, false) == NULL);
    CHECK(kv_paged_consistent(&kv));
    kv_paged_seq_close(&kv, f);
    kv_paged_seq_close(&kv, s);
    CHECK_EQ_INT(kv_paged_free_blocks(&kv), 64);
    kv_paged_free(&kv);
}

TEST(kv_paged_groups_random_operations_keep_the_pool_consistent) {
    struct kv_paged_config c = group_cfg(48, 12, 0);
    random_operations(&c, 777);
    c = group_cfg(48, 12, 3);
    random_operations(&c, 4321);
}

/* One Gemma 3 270M conversation (18 layers, every sixth global, window
 * 512; one K/V head of 256, F16) at 4k, 8k and 32k positions, prefilled
 * in chunks of 512 and one decode: a pool of exactly kv_paged_blocks_max
 * blocks suffices, and the sequence then holds every global block but
 * only 32 (the window) of each sliding group. Prints the memory against
 * keeping every layer (docs/architecture.md has the table). */
TEST(kv_paged_gemma3_conversation_memory) {
    int32_t w[18];
    for (int l = 0; l < 18; l++) w[l] = (l + 1) % 6 ? 512 : 0;
    static const int lens[] = {4096, 8192, 32768};
    for (int k = 0; k < 3; k++) {
        int n = lens[k];
        struct kv_paged_config c = {.n_layer = 18, .row_floats = 256, .type = TENSOR_TYPE_F16, .block_tokens = 16,
                                    .max_seqs = 1, .layer_window = w};
        c.n_blocks = kv_paged_config_blocks_max(&c, n, 512);
        struct kv_paged kv;
        REQUIRE(kv_paged_init(&kv, &c, NULL) == KVIK_OK);
        int s = kv_paged_seq_open(&kv), p = 0;
        int64_t peak = 0;
        while (p < n - 1) {
            int to = p + 512 < n - 1 ? p + 512 : n - 1;
            REQUIRE(kv_paged_seq_grow(&kv, s, to));
            p = to;
            if (kv_paged_used_blocks(&kv) > peak) peak = kv_paged_used_blocks(&kv);
        }
        REQUIRE(kv_paged_seq_grow(&kv, s, n));
        int64_t used = kv_paged_used_blocks(&kv);
        CHECK_EQ_INT(kv.block_bytes, 3 * 2 * 16 * 512);
        CHECK_EQ_INT(used, n / 16 + 5 * 32);
        double mib = (double)(1 << 20), full = (double)n * 18 * 2 * 512 / mib;
        printf("    %5d positions: every layer kept %6.1f MiB, sliding %6.1f MiB (%.1fx less; %.1f MiB during "
               "a 512-token prefill chunk)\n",
               n, full, (double)used * (double)kv.block_bytes / mib, full / ((double)used * (double)kv.block_bytes / mib),
               (double)peak * (double)kv.block_bytes / mib);
        kv_paged_free(&kv);
    }
}

/* ---- the forward pass through the paged cache --------------------------- */

static const int32_t k_prompt[] = {504, 3575, 282, 4649, 314, 7042, 30, 198, 504, 3575, 282, 4649, 314, 7042,
                                   30, 198, 1, 2, 3};
#define PROMPT_LEN ((int)(sizeof k_prompt / sizeof *k_prompt))

/* Logits of every prompt position through kv (sequence seq). */
static bool run_prompt(struct model_ctx *c, struct kv_cache *kv, int seq, float *out) {
    int32_t pos[PROMPT_LEN], sq[PROMPT_LEN];
    bool want[PROMPT_LEN];
    for (int i = 0; i < PROMPT_LEN; i++) pos[i] = i, sq[i] = seq, want[i] = true;
    struct model_batch b = {.n = PROMPT_LEN, .tokens = k_prompt, .pos = pos, .seq = sq, .logits = want};
    struct kvik_err err = {0};
    bool ok = model_forward(c, kv, &b, out, &err) == KVIK_OK;
    if (!ok) test_fail(__FILE__, __LINE__, "model_forward: %s", err.msg);
    return ok;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* KL(softmax(p) || softmax(q)) over n logits, in nats. */
static double kl_logits(const float *p, const float *q, int n) {
    double mp = p[0], mq = q[0], zp = 0, zq = 0, kl = 0;
    for (int i = 1; i < n; i++) mp = fmax(mp, p[i]), mq = fmax(mq, q[i]);
    for (int i = 0; i < n; i++) zp += exp(p[i] - mp), zq += exp(q[i] - mq);
    for (int i = 0; i < n; i++) {
        double lp = p[i] - mp - log(zp), lq = q[i] - mq - log(zq);
        kl += exp(lp) * (lp - lq);
    }
    return kl;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

TEST(kv_paged_forward_matches_flat_cache) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct kvik_err err = {0};
    struct model *m = NULL;
    REQUIRE(model_load(path, &m, &err) == KVIK_OK);
    int nv = m->hp.n_vocab, kv_dim = m->hp.n_head_kv * m->hp.head_dim;
    struct model_ctx *c = model_ctx_new(m, 2, PROMPT_LEN, 64, &err);
    REQUIRE(c);
    size_t n = (size_t)nv * PROMPT_LEN;
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float)), *f16 = malloc(n * sizeof(float));
    REQUIRE(ref && got && f16);
    struct kv_flat flat;
    REQUIRE(kv_flat_init(&flat, m->hp.n_layer, 1, 64, kv_dim, TENSOR_TYPE_F32, &err) == KVIK_OK);
    REQUIRE(run_prompt(c, &flat.base, 0, ref));
    static const int types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_Q8_0};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        struct kv_paged kv;
        struct kv_paged_config cfg = {.n_layer = m->hp.n_layer, .row_floats = kv_dim, .type = types[t],
                                      .block_tokens = 16, .n_blocks = 8, .max_seqs = 4};
        REQUIRE(kv_paged_init(&kv, &cfg, &err) == KVIK_OK);
        /* a second sequence first, so the prompt's blocks are not 0, 1 */
        int other = kv_paged_seq_open(&kv), s = kv_paged_seq_open(&kv);
        REQUIRE(kv_paged_seq_grow(&kv, other, 20) && kv_paged_seq_grow(&kv, s, PROMPT_LEN));
        REQUIRE(run_prompt(c, &kv.base, s, got));
        /* layer 0 sees the same input in both caches: its stored rows are
         * exactly the float rows converted to the cache's type */
        const struct type_traits *tt = tensor_type_traits(types[t]);
        uint8_t *conv = malloc(kv.base.row_bytes);
        int rows_differ = 0;
        for (int p = 0; p < PROMPT_LEN; p++)
            for (int v = 0; v < 2; v++) {
                const float *want = flat.base.row(&flat.base, 0, 0, p, v);
                if (tt->from_float) tt->from_float(want, conv, kv_dim);
                else memcpy(conv, want, kv.base.row_bytes);
                rows_differ += memcmp(conv, kv.base.row(&kv.base, 0, s, p, v), kv.base.row_bytes) != 0;
            }
        free(conv);
        CHECK_EQ_INT(rows_differ, 0);
        double d = max_abs_diff(ref, got, n);
        if (types[t] == TENSOR_TYPE_F32) {
            CHECK_MSG(d == 0, "F32 paged vs flat: %g", d);
        } else {
            /* a lossy cache changes the logits a little: the distributions
             * stay close and the greedy choice stays the same */
            double kl_sum = 0, kl_max = 0;
            int same = 0;
            for (int i = 0; i < PROMPT_LEN; i++) {
                double kl = kl_logits(ref + (size_t)i * nv, got + (size_t)i * nv, nv);
                kl_sum += kl, kl_max = fmax(kl_max, kl);
                same += argmax(ref + (size_t)i * nv, nv) == argmax(got + (size_t)i * nv, nv);
            }
            printf("    %s cache: KL vs F32 mean %.2e max %.2e, greedy token same at %d/%d positions\n",
                   tensor_type_name(types[t]), kl_sum / PROMPT_LEN, kl_max, same, PROMPT_LEN);
            /* measured on SmolLM2: F16 mean 3.6e-3 max 0.012, Q8_0 (integer
             * scores) mean 5.4e-3 max 0.018, 18/19 greedy tokens the same for
             * both */
            CHECK_MSG(d > 0 && kl_sum / PROMPT_LEN < 0.02 && kl_max < 0.15 && same >= PROMPT_LEN - 2,
                      "%s: max |diff| %g, KL mean %g max %g, same %d", tensor_type_name(types[t]), d,
                      kl_sum / PROMPT_LEN, kl_max, same);
            if (types[t] == TENSOR_TYPE_F16) memcpy(f16, got, n * sizeof(float));
            if (types[t] == TENSOR_TYPE_Q8_0) { /* the cost of --kv-type q8_0 against the default F16 */
                double kq_sum = 0, kq_max = 0;
                for (int i = 0; i < PROMPT_LEN; i++) {
                    double kl = kl_logits(f16 + (size_t)i * nv, got + (size_t)i * nv, nv);
                    kq_sum += kl, kq_max = fmax(kq_max, kl);
                }
                printf("    q8_0 cache: KL vs F16 mean %.2e max %.2e\n", kq_sum / PROMPT_LEN, kq_max);
                CHECK_MSG(kq_sum / PROMPT_LEN < 0.02 && kq_max < 0.15, "q8_0 vs F16: KL mean %g max %g",
                          kq_sum / PROMPT_LEN, kq_max);
            }
        }
        /* a position beyond what the sequence reserved is a clean error */
        int32_t tok = 1, pos = PROMPT_LEN, sq = s;
        struct model_batch one = {.n = 1, .tokens = &tok, .pos = &pos, .seq = &sq};
        CHECK_EQ_INT(model_forward(c, &kv.base, &one, got, &err), KVIK_ERR_INVALID_ARG);
        kv_paged_free(&kv);
    }
    kv_flat_free(&flat);
    free(ref), free(got), free(f16);
    model_ctx_free(c);
    model_free(m);
}
