/*
 * matcher.c — the pushdown matcher of grammar.h and the mask.
 *
 * A stack is a node: (pos, parent), pos the next symbol of an alternative
 * and parent the node to go on with when the alternative ends (-1: the
 * start rule's end). Nodes are interned: one (pos, parent) pair is one
 * node, so equal stacks are equal indices. A stack set holds only nodes
 * whose pos is a byte symbol ("settled"): settling expands rule symbols
 * into their alternatives and pops finished alternatives to their parents.
 *
 * Stack sets are the states of an automaton built as the matcher goes
 * (below). The mask walks the vocabulary trie (vocab.c) in preorder: each
 * trie node's state is its parent's moved by the node's byte; a dead
 * state skips the subtree. Before the walk, the slices (grammar_int.h)
 * the state takes whole give their tokens as bits and leave only the
 * rest of the vocabulary to walk.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

/* ---- the matcher ----------------------------------------------------------- */

struct gnode {
    uint32_t pos;
    int32_t parent;
    int32_t next;        /* the intern chain */
    uint64_t sig1, sig2; /* the chain of positions from here down, hashed twice */
};

/* A parser state: a set of settled stacks (node ids, ascending) and
 * whether the start rule may end here. Interned: one set is one id. */
struct dstate {
    int32_t off, n;  /* its nodes: ds_node[off .. off + n) */
    int32_t row;     /* its transitions: trans[row * n_classes ..], or -1 */
    int32_t next;    /* the intern chain */
    uint32_t h;
    bool accept;
    bool keyed;      /* k1, k2 computed */
    int8_t cap[GV_KINDS];      /* every text of the kind of this many characters or fewer is taken */
    bool cap_exact[GV_KINDS];  /* and some text one character longer is not */
    int8_t some_yes, some_no;  /* some body text of some_yes characters is taken; none of some_no */
    uint64_t k1, k2; /* the mask cache key (0, 0: not cacheable) */
};

enum { DS_DEAD = -1, DS_UNKNOWN = -2 };

/* Past these the automaton keeps only its live matchers' current stacks
 * and starts again (between steps, never inside a mask): about 28 MB at
 * most a grammar. */
enum { MAX_NODES = 1 << 19, MAX_STATES = 1 << 16, MAX_TRANS = 1 << 21 };

/* ---- the grammar's mask cache -------------------------------------------------- */

/* Masks by parser state: the 128-bit hash of the stack set's position
 * chains (and whether the start rule may end), for one vocabulary. When
 * full it is emptied and filled again. */
enum { GCACHE_SLOTS = 4096, GCACHE_MAX = 2048 };

struct gcache_entry {
    uint64_t k1, k2;
    uint32_t *mask; /* NULL: empty slot */
    int64_t allowed;
};

struct gcache {
    const struct grammar_vocab *v;
    struct gcache_entry slot[GCACHE_SLOTS];
    int n;
    uint64_t hits, misses;
};

void gcache_free(struct gcache *c) {
    if (!c) return;
    for (int i = 0; i < GCACHE_SLOTS; i++) free(c->slot[i].mask);
    free(c);
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/*
 * A grammar's automaton over byte classes, shared by all its matchers
 * (under the grammar's au_mu) and built as they go: states are interned
 * stack sets, and a state's move on a class is computed once (settling
 * every stack that takes the byte) and then read from its row. A mask
 * walks the vocabulary trie through these rows, so a state met before,
 * by this matcher or another, or one whose successors were, costs a
 * table read per trie node. Nothing in it depends on the vocabulary.
 */
struct gauto {
    const struct grammar *g;
    struct gnode *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *bucket; /* [n_bucket] node chain heads */
    uint32_t n_bucket;
    struct dstate *ds;
    int32_t n_ds, cap_ds;
    int32_t *ds_node;
    int32_t n_ds_node, cap_ds_node;
    int32_t *ds_bucket; /* [n_ds_bucket] state chain heads */
    uint32_t n_ds_bucket;
    int32_t *trans; /* rows of n_classes next states (DS_DEAD, DS_UNKNOWN) */
    int32_t n_rows, cap_trans;
    struct grammar_matcher *live; /* the matchers whose states must survive a reset */
    /* scratch */
    int32_t *work; /* settle's worklist: (pos, parent) pairs */
    int cap_work;
    uint32_t *seen; /* per node: the step that settled it */
    uint32_t stamp;
    int32_t *tmp; /* a step's settled nodes */
    int n_tmp, cap_tmp;
    bool oom;
};

struct grammar_matcher {
    const struct grammar *g;
    const struct grammar_vocab *v;
    struct gauto *a;
    int32_t cur;    /* the current state */
    int32_t *ds_at; /* [max_depth + 2] the walk's state at each depth */
    struct grammar_matcher *prev, *next; /* in a->live */
    bool linked;                         /* in a->live */
};

static uint32_t hash2(uint32_t pos, int32_t parent) {
    uint64_t x = ((uint64_t)pos << 32) ^ (uint32_t)parent;
    x *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(x >> 32);
}

static bool grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *n = realloc(*p, (size_t)c * elem);
    if (!n) return false;
    *p = n;
    *cap = c;
    return true;
}

/* Rebuilds the node chains for n_bucket heads (a power of two). */
static bool nodes_rehash(struct gauto *a, uint32_t n_bucket) {
    int32_t *b = malloc(n_bucket * sizeof *b);
    if (!b) return false;
    memset(b, 0xFF, n_bucket * sizeof *b);
    for (int32_t i = 0; i < a->n_nodes; i++) {
        uint32_t h = hash2(a->nodes[i].pos, a->nodes[i].parent) & (n_bucket - 1);
        a->nodes[i].next = b[h];
        b[h] = i;
    }
    free(a->bucket);
    a->bucket = b;
    a->n_bucket = n_bucket;
    return true;
}

/* The node (pos, parent), made when new; -1 when out of memory. */
static int32_t node_get(struct gauto *a, uint32_t pos, int32_t parent) {
    uint32_t h = hash2(pos, parent) & (a->n_bucket - 1);
    for (int32_t i = a->bucket[h]; i >= 0; i = a->nodes[i].next)
        if (a->nodes[i].pos == pos && a->nodes[i].parent == parent) return i;
    if (a->n_nodes == a->cap_nodes) {
        int cap = a->cap_nodes;
        if (!grow((void **)&a->nodes, &cap, a->n_nodes + 1, sizeof *a->nodes)) return a->oom = true, -1;
        uint32_t *s = realloc(a->seen, (size_t)cap * sizeof *s);
        if (!s) return a->oom = true, -1;
        memset(s + a->cap_nodes, 0, (size_t)(cap - a->cap_nodes) * sizeof *s);
        a->seen = s;
        a->cap_nodes = cap;
    }
    if ((uint32_t)a->n_nodes >= a->n_bucket) {
        if (!nodes_rehash(a, a->n_bucket * 2)) return a->oom = true, -1;
        h = hash2(pos, parent) & (a->n_bucket - 1);
    }
    int32_t i = a->n_nodes++;
    uint64_t p1 = parent >= 0 ? a->nodes[parent].sig1 : 0x243F6A8885A308D3ull;
    uint64_t p2 = parent >= 0 ? a->nodes[parent].sig2 : 0x13198A2E03707344ull;
    a->nodes[i] = (struct gnode){pos, parent, a->bucket[h], mix64(p1 ^ (pos * 0x9E3779B97F4A7C15ull + 1)),
                                 mix64(p2 + pos * 0xD6E8FEB86659FD93ull + 0x5851F42D4C957F2Dull)};
    a->bucket[h] = i;
    return i;
}

/* A new stamp for settle's seen marks: nodes settled under one stamp are
 * settled once. */
static void new_stamp(struct gauto *a) {
    if (++a->stamp == 0) {
        memset(a->seen, 0, (size_t)a->cap_nodes * sizeof *a->seen);
        a->stamp = 1;
    }
}

/* Appends to a->tmp the settled stacks of (pos, parent) not yet settled
 * under the current stamp; *accept when one finishes the start rule. */
static void settle(struct gauto *a, uint32_t pos, int32_t parent, bool *accept) {
    const struct grammar *g = a->g;
    int w = 0;
    if (!grow((void **)&a->work, &a->cap_work, 2, sizeof *a->work)) {
        a->oom = true;
        return;
    }
    a->work[w++] = (int32_t)pos;
    a->work[w++] = parent;
    while (w > 0) {
        int32_t par = a->work[--w];
        uint32_t p = (uint32_t)a->work[--w];
        int32_t id = node_get(a, p, par);
        if (id < 0) return;
        if (a->seen[id] == a->stamp) continue;
        a->seen[id] = a->stamp;
        struct gsym s = g->syms[p];
        if (s.kind == GSYM_BYTES) {
            if (!grow((void **)&a->tmp, &a->cap_tmp, a->n_tmp + 1, sizeof *a->tmp)) {
                a->oom = true;
                return;
            }
            a->tmp[a->n_tmp++] = id;
        } else if (s.kind == GSYM_END) {
            if (par < 0) *accept = true;
            else {
                if (!grow((void **)&a->work, &a->cap_work, w + 2, sizeof *a->work)) {
                    a->oom = true;
                    return;
                }
                a->work[w++] = (int32_t)a->nodes[par].pos;
                a->work[w++] = a->nodes[par].parent;
            }
        } else {
            /* a rule symbol last in its alternative returns straight to
             * par (a tail call: repetitions do not deepen the stack) */
            bool tail = g->syms[p + 1].kind == GSYM_END;
            int32_t cont = tail ? par : node_get(a, p + 1, par);
            if (!tail && cont < 0) return;
            uint32_t k0 = g->rule_alt0[s.arg], k1 = g->rule_alt0[s.arg + 1];
            if (!grow((void **)&a->work, &a->cap_work, w + 2 * (int)(k1 - k0), sizeof *a->work)) {
                a->oom = true;
                return;
            }
            for (uint32_t k = k1; k-- > k0;) {
                a->work[w++] = (int32_t)g->alts[k];
                a->work[w++] = cont;
            }
        }
    }
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static bool states_rehash(struct gauto *a, uint32_t n_bucket) {
    int32_t *b = malloc(n_bucket * sizeof *b);
    if (!b) return false;
    memset(b, 0xFF, n_bucket * sizeof *b);
    for (int32_t i = 0; i < a->n_ds; i++) {
        uint32_t h = a->ds[i].h & (n_bucket - 1);
        a->ds[i].next = b[h];
        b[h] = i;
    }
    free(a->ds_bucket);
    a->ds_bucket = b;
    a->n_ds_bucket = n_bucket;
    return true;
}

/* The state of the nodes a->tmp[0 .. n_tmp) (sorted here) and accept;
 * DS_DEAD when out of memory (a->oom). */
static int32_t state_intern(struct gauto *a, bool accept) {
    int32_t *ids = a->tmp;
    int n = a->n_tmp;
    if (n > 16) qsort(ids, (size_t)n, sizeof *ids, cmp_i32);
    else
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
                int32_t t = ids[j];
                ids[j] = ids[j - 1];
                ids[j - 1] = t;
            }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!k || ids[k - 1] != ids[i]) ids[k++] = ids[i];
    n = k;
    uint64_t x = accept ? 0x9E3779B97F4A7C15ull : 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < n; i++) x = (x ^ (uint32_t)ids[i]) * 0xFF51AFD7ED558CCDull;
    uint32_t h = (uint32_t)(mix64(x) >> 32);
    for (int32_t i = a->ds_bucket[h & (a->n_ds_bucket - 1)]; i >= 0; i = a->ds[i].next) {
        const struct dstate *d = &a->ds[i];
        if (d->h == h && d->n == n && d->accept == accept &&
            (n == 0 || !memcmp(a->ds_node + d->off, ids, (size_t)n * sizeof *ids)))
            return i;
    }
    if (!grow((void **)&a->ds, &a->cap_ds, a->n_ds + 1, sizeof *a->ds) ||
        !grow((void **)&a->ds_node, &a->cap_ds_node, a->n_ds_node + n, sizeof *a->ds_node)) {
        a->oom = true;
        return DS_DEAD;
    }
    if ((uint32_t)a->n_ds >= a->n_ds_bucket / 2 && !states_rehash(a, a->n_ds_bucket * 2)) {
        a->oom = true;
        return DS_DEAD;
    }
    int32_t i = a->n_ds++;
    if (n) memcpy(a->ds_node + a->n_ds_node, ids, (size_t)n * sizeof *ids);
    uint32_t b = h & (a->n_ds_bucket - 1);
    a->ds[i] = (struct dstate){.off = a->n_ds_node, .n = n, .row = -1, .next = a->ds_bucket[b], .h = h,
                               .accept = accept, .some_no = 127};
    a->ds_bucket[b] = i;
    a->n_ds_node += n;
    return i;
}

/* Which of the sets sets[0 .. n) (n <= 64) hold byte b, as bits. */
static uint64_t takers(const struct gset *const *sets, int n, uint8_t b) {
    uint64_t bits = 0;
    for (int i = 0; i < n; i++) bits |= (uint64_t)gset_has(sets[i], b) << i;
    return bits;
}

/* The state after byte b from state d, computed and remembered (for
 * every byte that the same stacks take). */
static int32_t step_slow(struct gauto *a, int32_t d, uint8_t b) {
    const struct grammar *g = a->g;
    int nc = g->n_classes;
    if (a->ds[d].row < 0) {
        if (!grow((void **)&a->trans, &a->cap_trans, (a->n_rows + 1) * nc, sizeof *a->trans)) {
            a->oom = true;
            return DS_DEAD;
        }
        for (int c = 0; c < nc; c++) a->trans[(size_t)a->n_rows * nc + c] = DS_UNKNOWN;
        a->ds[d].row = a->n_rows++;
    }
    new_stamp(a);
    a->n_tmp = 0;
    bool acc = false;
    for (int i = 0; i < a->ds[d].n; i++) {
        const struct gnode *nd = &a->nodes[a->ds_node[a->ds[d].off + i]];
        if (gset_has(&g->sets[g->syms[nd->pos].arg], b)) settle(a, nd->pos + 1, nd->parent, &acc);
        if (a->oom) return DS_DEAD;
    }
    int32_t t = a->n_tmp == 0 && !acc ? DS_DEAD : state_intern(a, acc);
    if (a->oom) return DS_DEAD;
    int32_t *row = a->trans + (size_t)a->ds[d].row * nc;
    row[g->byte_class[b]] = t;
    /* every class that the same stacks take goes to the same state */
    const struct dstate *x = &a->ds[d];
    if (x->n <= 64) {
        const struct gset *sets[64];
        for (int i = 0; i < x->n; i++) sets[i] = &g->sets[g->syms[a->nodes[a->ds_node[x->off + i]].pos].arg];
        uint64_t want = takers(sets, x->n, b);
        for (int c = 0; c < nc; c++)
            if (row[c] == DS_UNKNOWN && takers(sets, x->n, g->class_byte[c]) == want) row[c] = t;
    }
    return t;
}

static inline int32_t step(struct gauto *a, int32_t d, uint8_t b) {
    int32_t row = a->ds[d].row;
    if (row >= 0) {
        int32_t t = a->trans[(size_t)row * a->g->n_classes + a->g->byte_class[b]];
        if (t != DS_UNKNOWN) return t;
    }
    return step_slow(a, d, b);
}

/* Drops every state and node but the live matchers' current stacks (then
 * their states again). False when out of memory: then either nothing
 * changed or (memory ran out while copying) every live matcher is left
 * broken (cur -1: it refuses everything). */
static bool gauto_forget(struct gauto *a) {
    int32_t n_old = a->n_nodes;
    int total = 0, n_live = 0;
    for (struct grammar_matcher *m = a->live; m; m = m->next) total += m->cur >= 0 ? a->ds[m->cur].n : 0, n_live++;
    int32_t *map = malloc(((size_t)n_old + 1) * sizeof *map);
    int32_t *keep = malloc(((size_t)total + 1) * sizeof *keep);
    int *cnt = malloc(((size_t)n_live + 1) * sizeof *cnt);
    bool *acc = malloc(((size_t)n_live + 1) * sizeof *acc);
    struct gnode *old = a->nodes;
    struct gnode *fresh = malloc((size_t)a->cap_nodes * sizeof *fresh);
    if (!map || !keep || !cnt || !acc || !fresh) {
        free(map), free(keep), free(cnt), free(acc), free(fresh);
        return false;
    }
    int k = 0, j = 0;
    for (struct grammar_matcher *m = a->live; m; m = m->next, j++) {
        cnt[j] = -1; /* broken before: stays so */
        if (m->cur < 0) continue;
        const struct dstate *c = &a->ds[m->cur];
        memcpy(keep + k, a->ds_node + c->off, (size_t)c->n * sizeof *keep);
        k += c->n;
        cnt[j] = c->n;
        acc[j] = c->accept;
    }
    memset(map, 0xFF, (size_t)n_old * sizeof *map);
    a->nodes = fresh;
    a->n_nodes = 0;
    memset(a->bucket, 0xFF, a->n_bucket * sizeof *a->bucket);
    int32_t *chain = NULL;
    int cap_chain = 0;
    bool ok = true;
    for (int i = 0; i < total && ok; i++) {
        /* walk down to the first node already copied, then copy upwards */
        int len = 0;
        for (int32_t x = keep[i]; x >= 0 && map[x] < 0; x = old[x].parent) {
            if (!grow((void **)&chain, &cap_chain, len + 1, sizeof *chain)) {
                ok = false;
                break;
            }
            chain[len++] = x;
        }
        for (int q = len; ok && q-- > 0;) {
            int32_t x = chain[q];
            int32_t par = old[x].parent >= 0 ? map[old[x].parent] : -1;
            map[x] = node_get(a, old[x].pos, par);
            ok = map[x] >= 0;
        }
        if (ok) keep[i] = map[keep[i]];
    }
    free(chain);
    free(map);
    free(old);
    a->n_ds = a->n_ds_node = a->n_rows = 0;
    memset(a->ds_bucket, 0xFF, a->n_ds_bucket * sizeof *a->ds_bucket);
    memset(a->seen, 0, (size_t)a->cap_nodes * sizeof *a->seen);
    a->stamp = 0;
    k = j = 0;
    for (struct grammar_matcher *m = a->live; m; m = m->next, j++) {
        if (cnt[j] < 0) continue;
        int32_t d = DS_DEAD;
        if (ok && grow((void **)&a->tmp, &a->cap_tmp, cnt[j] + 1, sizeof *a->tmp)) {
            memcpy(a->tmp, keep + k, (size_t)cnt[j] * sizeof *keep);
            a->n_tmp = cnt[j];
            d = state_intern(a, acc[j]);
        }
        ok = ok && d >= 0;
        m->cur = ok ? d : -1;
        k += cnt[j];
    }
    free(cnt);
    free(acc);
    free(keep);
    a->oom = false;
    return ok;
}

static void gauto_free(struct gauto *a) {
    if (!a) return;
    free(a->nodes);
    free(a->bucket);
    free(a->ds);
    free(a->ds_node);
    free(a->ds_bucket);
    free(a->trans);
    free(a->work);
    free(a->seen);
    free(a->tmp);
    free(a);
}

void grammar_auto_free(struct gauto *a) { gauto_free(a); }

static struct gauto *gauto_new(const struct grammar *g) {
    struct gauto *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->g = g;
    if (!nodes_rehash(a, 1 << 12) || !states_rehash(a, 1 << 10)) {
        gauto_free(a);
        return NULL;
    }
    return a;
}

/* Starts again past the size limits (between steps, never inside a mask). */
static void gauto_trim(struct gauto *a) {
    if (a->n_nodes > MAX_NODES || a->n_ds > MAX_STATES || (int64_t)a->n_rows * a->g->n_classes > MAX_TRANS)
        gauto_forget(a);
}

bool grammar_matcher_forget(struct grammar_matcher *m) {
    struct grammar *g = (struct grammar *)m->g;
    pthread_mutex_lock(&g->au_mu);
    bool ok = gauto_forget(m->a);
    pthread_mutex_unlock(&g->au_mu);
    return ok;
}

struct grammar_matcher *grammar_matcher_new(const struct grammar *g, const struct grammar_vocab *v,
                                            struct kvik_err *err) {
    struct grammar *gm = (struct grammar *)g;
    struct grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) goto nomem;
    m->g = g;
    m->v = v;
    m->cur = -1;
    m->ds_at = malloc(((size_t)(v ? v->all.max_depth : 0) + 2) * sizeof *m->ds_at);
    if (!m->ds_at) goto nomem;
    pthread_mutex_lock(&gm->au_mu);
    if (!gm->au) gm->au = gauto_new(g);
    struct gauto *a = m->a = gm->au;
    if (a) {
        /* the start: root's alternatives over the end (-1) */
        bool acc = false;
        uint32_t a0 = g->rule_alt0[g->root], a1 = g->rule_alt0[g->root + 1];
        new_stamp(a);
        a->n_tmp = 0;
        for (uint32_t k = a0; k < a1 && !a->oom; k++) settle(a, g->alts[k], -1, &acc);
        m->cur = a->oom ? DS_DEAD : state_intern(a, acc);
        a->oom = false;
        if (m->cur >= 0) {
            m->next = a->live;
            if (a->live) a->live->prev = m;
            a->live = m;
            m->linked = true;
        }
    }
    pthread_mutex_unlock(&gm->au_mu);
    if (m->cur < 0) goto nomem;
    return m;
nomem:
    grammar_matcher_free(m);
    err_set(err, KVIK_ERR_NOMEM, "grammar: out of memory");
    return NULL;
}

void grammar_matcher_free(struct grammar_matcher *m) {
    if (!m) return;
    if (m->linked) {
        struct grammar *g = (struct grammar *)m->g;
        pthread_mutex_lock(&g->au_mu);
        if (m->prev) m->prev->next = m->next;
        else m->a->live = m->next;
        if (m->next) m->next->prev = m->prev;
        pthread_mutex_unlock(&g->au_mu);
    }
    free(m->ds_at);
    free(m);
}

bool grammar_matcher_accept_bytes(struct grammar_matcher *m, const char *s, size_t n) {
    struct grammar *g = (struct grammar *)m->g;
    struct gauto *a = m->a;
    pthread_mutex_lock(&g->au_mu);
    gauto_trim(a);
    int32_t t = m->cur;
    for (size_t i = 0; i < n && t >= 0; i++) t = step(a, t, (uint8_t)s[i]);
    a->oom = false;
    if (t >= 0) m->cur = t;
    pthread_mutex_unlock(&g->au_mu);
    return t >= 0;
}

static bool is_eog(const struct grammar_vocab *v, int32_t id) {
    for (int i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return true;
    return false;
}

/* A fact of the current state under the grammar's lock: its accept flag
 * (what 0) or whether it has no stack (what 1); false when broken. */
static bool cur_fact(const struct grammar_matcher *m, int what) {
    struct grammar *g = (struct grammar *)m->g;
    pthread_mutex_lock(&g->au_mu);
    bool r = m->cur >= 0 && (what == 0 ? m->a->ds[m->cur].accept : m->a->ds[m->cur].n == 0);
    pthread_mutex_unlock(&g->au_mu);
    return r;
}

bool grammar_matcher_accept_token(struct grammar_matcher *m, int32_t id) {
    const struct grammar_vocab *v = m->v;
    if (!v || id < 0 || id >= v->n_vocab) return false;
    if (is_eog(v, id)) return cur_fact(m, 0);
    if (!v->len[id]) return false;
    return grammar_matcher_accept_bytes(m, (const char *)v->piece[id], v->len[id]);
}

bool grammar_matcher_can_end(const struct grammar_matcher *m) { return cur_fact(m, 0); }
bool grammar_matcher_must_end(const struct grammar_matcher *m) { return m->cur >= 0 && cur_fact(m, 1); }

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* State d's cache key: its stacks' chain hashes, in order, and accept.
 * The same stacks give the same key in any matcher of the grammar. */
static void state_key(struct gauto *a, int32_t d, uint64_t *k1, uint64_t *k2) {
    struct dstate *ds = &a->ds[d];
    if (ds->keyed) {
        *k1 = ds->k1, *k2 = ds->k2;
        return;
    }
    int n = ds->n;
    uint64_t small[32][2], (*s)[2] = n <= 32 ? small : malloc((size_t)n * sizeof *s);
    uint64_t h1 = ds->accept ? 0xA5A5A5A5ull : 0x5A5A5A5Aull, h2 = h1 * 3;
    if (!s) {
        *k1 = *k2 = 0; /* not cached: see fill_mask */
        return;
    }
    for (int i = 0; i < n; i++) {
        const struct gnode *nd = &a->nodes[a->ds_node[ds->off + i]];
        s[i][0] = nd->sig1, s[i][1] = nd->sig2;
    }
    qsort(s, (size_t)n, sizeof *s, cmp_u64);
    for (int i = 0; i < n; i++) h1 = mix64(h1 ^ s[i][0]), h2 = mix64(h2 + s[i][1]);
    if (s != small) free(s);
    ds->k1 = *k1 = h1 | 1; /* never 0: 0 means "not cached" */
    ds->k2 = *k2 = h2;
    ds->keyed = true;
}

static struct gcache_entry *cache_find(struct gcache *c, uint64_t k1, uint64_t k2, bool *found) {
    for (uint32_t i = (uint32_t)k1 & (GCACHE_SLOTS - 1);; i = (i + 1) & (GCACHE_SLOTS - 1)) {
        struct gcache_entry *e = &c->slot[i];
        if (!e->mask || (e->k1 == k1 && e->k2 == k2)) {
            *found = e->mask != NULL;
            return e;
        }
    }
}

static int64_t fill_mask_walk(struct grammar_matcher *m, uint32_t *mask);

int64_t grammar_matcher_fill_mask(struct grammar_matcher *m, uint32_t *mask) {
    const struct grammar_vocab *v = m->v;
    struct grammar *g = (struct grammar *)m->g;
    size_t words = ((size_t)v->n_vocab + 31) / 32;
    pthread_mutex_lock(&g->au_mu);
    gauto_trim(m->a);
    if (m->cur < 0) { /* broken by a failed reset: nothing is allowed */
        pthread_mutex_unlock(&g->au_mu);
        memset(mask, 0, words * sizeof *mask);
        return 0;
    }
    uint64_t k1, k2;
    state_key(m->a, m->cur, &k1, &k2);
    bool found = false;
    int64_t allowed = -1;
    if (k1) {
        pthread_mutex_lock(&g->cache_mu);
        if (!g->cache && (g->cache = calloc(1, sizeof *g->cache))) g->cache->v = v;
        struct gcache_entry *e = g->cache && g->cache->v == v ? cache_find(g->cache, k1, k2, &found) : NULL;
        if (found) {
            memcpy(mask, e->mask, words * sizeof *mask);
            allowed = e->allowed;
            g->cache->hits++;
        }
        pthread_mutex_unlock(&g->cache_mu);
    }
    if (!found) allowed = fill_mask_walk(m, mask);
    pthread_mutex_unlock(&g->au_mu);
    if (found || !k1 || allowed < 0) return allowed < 0 ? 0 : allowed;
    uint32_t *copy = malloc(words * sizeof *copy);
    if (!copy) return allowed;
    memcpy(copy, mask, words * sizeof *copy);
    pthread_mutex_lock(&g->cache_mu);
    struct gcache *c = g->cache;
    if (c && c->v == v) {
        c->misses++;
        if (c->n >= GCACHE_MAX) { /* full: start again */
            for (int i = 0; i < GCACHE_SLOTS; i++) free(c->slot[i].mask), c->slot[i].mask = NULL;
            c->n = 0;
        }
        struct gcache_entry *e = cache_find(c, k1, k2, &found);
        if (!found) {
            *e = (struct gcache_entry){k1, k2, copy, allowed};
            c->n++;
            copy = NULL;
        }
    }
    pthread_mutex_unlock(&g->cache_mu);
    free(copy);
    return allowed;
}

/* ---- the slices ------------------------------------------------------------ */

/* The byte ranges of one character of a slice's kind (grammar_int.h), as
 * UTF-8 writes it: lead byte first. '"' and '\\' are left out apart. */
struct u8seq {
    int n;
    uint8_t lo[4], hi[4];
};

static const struct u8seq body_seq[] = {
    {1, {0x20}, {0x7E}},
    {2, {0xC2, 0x80}, {0xDF, 0xBF}},
    {3, {0xE0, 0xA0, 0x80}, {0xE0, 0xBF, 0xBF}},
    {3, {0xE1, 0x80, 0x80}, {0xEC, 0xBF, 0xBF}},
    {3, {0xED, 0x80, 0x80}, {0xED, 0x9F, 0xBF}},
    {3, {0xEE, 0x80, 0x80}, {0xEF, 0xBF, 0xBF}},
    {4, {0xF0, 0x90, 0x80, 0x80}, {0xF0, 0xBF, 0xBF, 0xBF}},
    {4, {0xF1, 0x80, 0x80, 0x80}, {0xF3, 0xBF, 0xBF, 0xBF}},
    {4, {0xF4, 0x80, 0x80, 0x80}, {0xF4, 0x8F, 0xBF, 0xBF}},
};
static const struct u8seq alnum_seq[] = {{1, {'0'}, {'9'}}, {1, {'A'}, {'Z'}}, {1, {'a'}, {'z'}}};

static const struct {
    const struct u8seq *seq;
    int n;
} kind_seq[GV_KINDS] = {{body_seq, sizeof body_seq / sizeof *body_seq}, {alnum_seq, 3}};

static int text_cap(struct gauto *a, int32_t d, int kind, int r);

/* Every way on from state d through bytes i.. of a character of form q
 * begun in state d0: -1 when one dies inside the character, else the
 * least text_cap(.., r) of the states they reach (r for d0 itself: a
 * text that comes back to where it began is taken as often as it
 * repeats). One byte of each class in a range stands for the class. */
static int char_cap(struct gauto *a, int32_t d0, int32_t d, int kind, const struct u8seq *q, int i, int r) {
    if (i == q->n) return d == d0 ? r : text_cap(a, d, kind, r); /* a loop back never binds */
    const struct grammar *g = a->g;
    uint64_t seen[4] = {0};
    int least = r;
    for (int b = q->lo[i]; b <= q->hi[i]; b++) {
        int c = g->byte_class[b];
        if (b == '"' || b == '\\' || (seen[c >> 6] >> (c & 63) & 1)) continue;
        seen[c >> 6] |= 1ull << (c & 63);
        int32_t t = step(a, d, (uint8_t)b);
        int k = t < 0 ? -1 : char_cap(a, d0, t, kind, q, i + 1, r);
        if (k < 0) return -1;
        if (k < least) least = k;
    }
    return least;
}

/* The most characters (up to r) such that state d takes every text of the
 * kind that long or shorter (each byte keeps a stack alive). Remembered
 * per state: exact, or a bound from below. */
static int text_cap(struct gauto *a, int32_t d, int kind, int r) {
    if (r <= 0) return 0;
    if (a->ds[d].cap_exact[kind]) return a->ds[d].cap[kind] < r ? a->ds[d].cap[kind] : r;
    if (a->ds[d].cap[kind] >= r) return r;
    int least = r - 1;
    for (int q = 0; least >= 0 && q < kind_seq[kind].n; q++) {
        int c = char_cap(a, d, d, kind, &kind_seq[kind].seq[q], 0, r - 1);
        if (c < least) least = c;
    }
    int v = least + 1; /* 0 when a character dies */
    if (v < r) a->ds[d].cap[kind] = (int8_t)v, a->ds[d].cap_exact[kind] = true;
    else a->ds[d].cap[kind] = (int8_t)r;
    return v;
}

static bool some_text(struct gauto *a, int32_t d, int r);

/* Some way on from state d through bytes i.. of a character of form q
 * begun in d0 stays alive and then takes some body text of r characters. */
static bool char_some(struct gauto *a, int32_t d0, int32_t d, const struct u8seq *q, int i, int r) {
    if (i == q->n) return d == d0 || some_text(a, d, r); /* a loop takes texts of any length */
    const struct grammar *g = a->g;
    uint64_t seen[4] = {0};
    for (int b = q->lo[i]; b <= q->hi[i]; b++) {
        int c = g->byte_class[b];
        if (b == '"' || b == '\\' || (seen[c >> 6] >> (c & 63) & 1)) continue;
        seen[c >> 6] |= 1ull << (c & 63);
        int32_t t = step(a, d, (uint8_t)b);
        if (t >= 0 && char_some(a, d0, t, q, i + 1, r)) return true;
    }
    return false;
}

/* State d takes some body text of r characters. Remembered per state as
 * a range (a text's prefixes are taken too). */
static bool some_text(struct gauto *a, int32_t d, int r) {
    if (r <= a->ds[d].some_yes) return true;
    if (r >= a->ds[d].some_no) return false;
    bool yes = false;
    for (size_t q = 0; !yes && q < sizeof body_seq / sizeof *body_seq; q++) yes = char_some(a, d, d, &body_seq[q], 0, r - 1);
    if (yes) a->ds[d].some_yes = (int8_t)r;
    else a->ds[d].some_no = (int8_t)r;
    return yes;
}

/* The largest slice state d takes whole; -1 when none (or out of memory). */
static int pick_slice(struct gauto *a, const struct grammar_vocab *v, int32_t d) {
    int cap[GV_KINDS], best = -1;
    for (int k = 0; k < GV_KINDS; k++) cap[k] = text_cap(a, d, k, GV_MAX_CHARS);
    if (a->oom) return -1;
    for (int s = 0; s < GV_SLICES; s++)
        if (v->slice[s].chars <= cap[v->slice[s].kind] && (best < 0 || v->slice[s].count > v->slice[best].count))
            best = s;
    return best;
}

/* ---- the mask --------------------------------------------------------------- */

/* Adds to mask the tokens of trie t that state d0 takes, by a preorder
 * walk; how many were new; -1 when out of memory. */
static int64_t walk(struct gauto *a, int32_t *at, int32_t d0, const struct vtrie *t, uint32_t *mask) {
    int64_t allowed = 0;
    at[0] = d0;
    for (int32_t k = 1; k < t->n_nodes;) {
        int d = t->depth[k];
        int32_t s = step(a, at[d - 1], t->byte[k]);
        if (s < 0) {
            if (a->oom) {
                a->oom = false;
                return -1;
            }
            k = t->end[k];
            continue;
        }
        at[d] = s;
        /* tokens ending here: their bytes were all taken */
        for (int32_t i = t->tok0[k]; i < t->tok0[k + 1]; i++) {
            int32_t id = t->toks[i];
            if (!(mask[id >> 5] >> (id & 31) & 1)) mask[id >> 5] |= 1u << (id & 31), allowed++;
        }
        k = a->ds[s].n > 0 ? k + 1 : t->end[k];
    }
    return allowed;
}

/* The mask of the current state: the body text it takes whole (exactly
 * up to a length) or the largest slice it takes whole, and a walk of the
 * rest; -1 (a partial mask, not to be cached)
 * when out of memory. */
static int64_t fill_mask_walk(struct grammar_matcher *m, uint32_t *mask) {
    const struct grammar_vocab *v = m->v;
    struct gauto *a = m->a;
    size_t words = ((size_t)v->n_vocab + 31) / 32;
    int64_t allowed = 0;
    const struct vtrie *t;
    /* body text up to a length exactly (inside a string), else a slice */
    int c = text_cap(a, m->cur, GV_BODY, GV_BODY_MAX);
    if (!a->oom && (c == GV_BODY_MAX || !some_text(a, m->cur, c + 1))) {
        memcpy(mask, v->body_upto + (size_t)c * words, words * sizeof *mask);
        allowed = v->body_count[c];
        t = &v->other;
    } else {
        int s = a->oom ? -1 : pick_slice(a, v, m->cur);
        if (s >= 0) {
            memcpy(mask, v->slice[s].bits, words * sizeof *mask);
            allowed = v->slice[s].count;
            t = &v->slice[s].rest;
        } else {
            memset(mask, 0, words * sizeof *mask);
            t = &v->all;
        }
    }
    if (a->oom) {
        a->oom = false;
        return -1;
    }
    if (a->ds[m->cur].accept)
        for (int i = 0; i < v->n_eog; i++)
            if (v->eog[i] >= 0 && v->eog[i] < v->n_vocab && !(mask[v->eog[i] >> 5] >> (v->eog[i] & 31) & 1)) {
                mask[v->eog[i] >> 5] |= 1u << (v->eog[i] & 31);
                allowed++;
            }
    int64_t n = walk(a, m->ds_at, m->cur, t, mask);
    return n < 0 ? -1 : allowed + n;
}
