/*
 * matcher.c — the pushdown matcher of grammar.h and the vocabulary trie.
 *
 * A stack is a node: (pos, parent), pos the next symbol of an alternative
 * and parent the node to go on with when the alternative ends (-1: the
 * start rule's end). Nodes are interned: one (pos, parent) pair is one
 * node, so equal stacks are equal indices. A stack set holds only nodes
 * whose pos is a byte symbol ("settled"): settling expands rule symbols
 * into their alternatives and pops finished alternatives to their parents.
 *
 * The mask walks the trie in preorder: each trie node's stack set is its
 * parent's advanced by the node's byte; an empty set skips the subtree.
 * Nodes made during the walk are dropped after it (the intern table is a
 * chained hash whose chains are undone newest first).
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

/* ---- the vocabulary trie ----------------------------------------------------- */

struct grammar_vocab {
    int32_t n_vocab;
    int32_t n_nodes;   /* trie nodes in preorder; node 0 is the root (the empty prefix) */
    uint8_t *byte;     /* [n_nodes] the edge byte into the node */
    uint16_t *depth;   /* [n_nodes] */
    int32_t *end;      /* [n_nodes] one past the node's subtree */
    int32_t *tok0;     /* [n_nodes + 1] the tokens ending at node k: toks[tok0[k] .. tok0[k + 1]) */
    int32_t *toks;
    int32_t *eog;
    int n_eog;
    int max_depth;
    const uint8_t **piece; /* [n_vocab] (owned copies in bytes) */
    uint32_t *len;
    uint8_t *bytes;
};

/* Token ids by their bytes (a shorter prefix first), then by id. */
static int cmp_tok(const void *a, const void *b, void *ctx) {
    const struct grammar_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = v->len[x], ly = v->len[y], n = lx < ly ? lx : ly;
    int c = memcmp(v->piece[x], v->piece[y], n);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

struct grammar_vocab *grammar_vocab_new(int32_t n_vocab, const char *const *pieces, const uint32_t *lens,
                                        const int32_t *eog, int n_eog, struct kvik_err *err) {
    struct grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) goto nomem;
    v->n_vocab = n_vocab;
    size_t total = 0;
    for (int32_t i = 0; i < n_vocab; i++) total += lens[i] > 65535 ? 0 : lens[i];
    v->bytes = malloc(total + 1);
    v->piece = malloc((size_t)n_vocab * sizeof *v->piece);
    v->len = malloc((size_t)n_vocab * sizeof *v->len);
    v->eog = malloc(((size_t)n_eog + 1) * sizeof *v->eog);
    int32_t *order = malloc((size_t)n_vocab * sizeof *order);
    if (!v->bytes || !v->piece || !v->len || !v->eog || !order) {
        free(order);
        goto nomem;
    }
    if (n_eog) memcpy(v->eog, eog, (size_t)n_eog * sizeof *eog);
    v->n_eog = n_eog;
    size_t at = 0;
    int32_t n_real = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        uint32_t l = lens[i] > 65535 ? 0 : lens[i];
        if (l) memcpy(v->bytes + at, pieces[i], l);
        v->piece[i] = v->bytes + at;
        v->len[i] = l;
        at += l;
        if (l) order[n_real++] = i;
    }
    qsort_r(order, (size_t)n_real, sizeof *order, cmp_tok, v);
    /* nodes: at most the root and one a byte of every token */
    size_t cap = 1 + total;
    v->byte = malloc(cap);
    v->depth = malloc(cap * sizeof *v->depth);
    v->end = malloc(cap * sizeof *v->end);
    v->tok0 = malloc((cap + 1) * sizeof *v->tok0);
    v->toks = malloc(((size_t)n_real + 1) * sizeof *v->toks);
    int32_t *path = malloc(65537 * sizeof *path); /* the node at each depth of the current path */
    if (!v->byte || !v->depth || !v->end || !v->tok0 || !v->toks || !path) {
        free(order);
        free(path);
        goto nomem;
    }
    int32_t n = 1, nt = 0;
    v->byte[0] = 0;
    v->depth[0] = 0;
    v->tok0[0] = 0;
    path[0] = 0;
    int pdepth = 0; /* depth of the current path */
    for (int32_t k = 0; k < n_real; k++) {
        int32_t id = order[k];
        const uint8_t *p = v->piece[id];
        uint32_t l = v->len[id];
        /* the common prefix with the current path */
        int d = 0;
        while (d < pdepth && d < (int)l && v->byte[path[d + 1]] == p[d]) d++;
        /* close the nodes deeper than d */
        for (int x = pdepth; x > d; x--) v->end[path[x]] = n;
        pdepth = d;
        for (; d < (int)l; d++) {
            v->byte[n] = p[d];
            v->depth[n] = (uint16_t)(d + 1);
            v->tok0[n] = nt;
            path[d + 1] = n++;
        }
        pdepth = (int)l;
        if (pdepth > v->max_depth) v->max_depth = pdepth;
        /* tokens are appended in preorder: this one ends at the path's last node */
        v->toks[nt++] = id;
    }
    for (int x = pdepth; x >= 1; x--) v->end[path[x]] = n;
    v->end[0] = n;
    v->n_nodes = n;
    v->tok0[n] = nt;
    free(path);
    free(order);
    return v;
nomem:
    grammar_vocab_free(v);
    err_set(err, KVIK_ERR_NOMEM, "grammar: out of memory for the vocabulary");
    return NULL;
}

void grammar_vocab_free(struct grammar_vocab *v) {
    if (!v) return;
    free(v->byte);
    free(v->depth);
    free(v->end);
    free(v->tok0);
    free(v->toks);
    free(v->eog);
    free(v->piece);
    free(v->len);
    free(v->bytes);
    free(v);
}

int32_t grammar_vocab_size(const struct grammar_vocab *v) { return v->n_vocab; }

/* ---- the matcher ----------------------------------------------------------- */

struct gnode {
    uint32_t pos;
    int32_t parent;
    int32_t next;       /* the intern chain */
    uint64_t sig1, sig2; /* the chain of positions from here down, hashed twice */
};

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

struct grammar_matcher {
    const struct grammar *g;
    const struct grammar_vocab *v;
    struct gnode *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *bucket; /* [n_bucket] chain heads */
    uint32_t n_bucket;
    int32_t *cur; /* the current stack set */
    int n_cur, cap_cur;
    bool accept; /* the start rule can be finished here */
    /* scratch */
    int32_t *work; /* settle's worklist: (pos, parent) pairs */
    int cap_work;
    uint32_t *seen; /* per node: the settle call that saw it */
    uint32_t stamp;
    int32_t *sets; /* the walk's stack sets, one slice a depth */
    int cap_sets;
    int32_t *set_at; /* [max_depth + 2] where each depth's set starts */
    bool oom;
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

/* The node (pos, parent), made when new; -1 when out of memory. */
static int32_t node_get(struct grammar_matcher *m, uint32_t pos, int32_t parent) {
    uint32_t h = hash2(pos, parent) & (m->n_bucket - 1);
    for (int32_t i = m->bucket[h]; i >= 0; i = m->nodes[i].next)
        if (m->nodes[i].pos == pos && m->nodes[i].parent == parent) return i;
    if (m->n_nodes == m->cap_nodes) {
        int cap = m->cap_nodes;
        if (!grow((void **)&m->nodes, &cap, m->n_nodes + 1, sizeof *m->nodes)) return m->oom = true, -1;
        uint32_t *s = realloc(m->seen, (size_t)cap * sizeof *s);
        if (!s) return m->oom = true, -1;
        memset(s + m->cap_nodes, 0, (size_t)(cap - m->cap_nodes) * sizeof *s);
        m->seen = s;
        m->cap_nodes = cap;
    }
    int32_t i = m->n_nodes++;
    uint64_t p1 = parent >= 0 ? m->nodes[parent].sig1 : 0x243F6A8885A308D3ull;
    uint64_t p2 = parent >= 0 ? m->nodes[parent].sig2 : 0x13198A2E03707344ull;
    m->nodes[i] = (struct gnode){pos, parent, m->bucket[h], mix64(p1 ^ (pos * 0x9E3779B97F4A7C15ull + 1)),
                                 mix64(p2 + pos * 0xD6E8FEB86659FD93ull + 0x5851F42D4C957F2Dull)};
    m->bucket[h] = i;
    return i;
}

/* Drops the nodes made since mark. */
static void nodes_truncate(struct grammar_matcher *m, int32_t mark) {
    for (int32_t i = m->n_nodes - 1; i >= mark; i--) {
        uint32_t h = hash2(m->nodes[i].pos, m->nodes[i].parent) & (m->n_bucket - 1);
        m->bucket[h] = m->nodes[i].next;
    }
    m->n_nodes = mark;
}

/* Appends to out[*n] (room grown in *cap) the settled stacks of (pos,
 * parent); *accept when one finishes the start rule. */
static void settle(struct grammar_matcher *m, uint32_t pos, int32_t parent, int32_t **out, int *n, int *cap,
                   bool *accept) {
    const struct grammar *g = m->g;
    if (++m->stamp == 0) {
        memset(m->seen, 0, (size_t)m->cap_nodes * sizeof *m->seen);
        m->stamp = 1;
    }
    int w = 0;
    if (!grow((void **)&m->work, &m->cap_work, 2, sizeof *m->work)) {
        m->oom = true;
        return;
    }
    m->work[w++] = (int32_t)pos;
    m->work[w++] = parent;
    while (w > 0) {
        int32_t par = m->work[--w];
        uint32_t p = (uint32_t)m->work[--w];
        int32_t id = node_get(m, p, par);
        if (id < 0) return;
        if (m->seen[id] == m->stamp) continue;
        m->seen[id] = m->stamp;
        struct gsym s = g->syms[p];
        if (s.kind == GSYM_BYTES) {
            if (!grow((void **)out, cap, *n + 1, sizeof **out)) {
                m->oom = true;
                return;
            }
            (*out)[(*n)++] = id;
        } else if (s.kind == GSYM_END) {
            if (par < 0) *accept = true;
            else {
                if (!grow((void **)&m->work, &m->cap_work, w + 2, sizeof *m->work)) {
                    m->oom = true;
                    return;
                }
                m->work[w++] = (int32_t)m->nodes[par].pos;
                m->work[w++] = m->nodes[par].parent;
            }
        } else {
            int32_t cont = node_get(m, p + 1, par);
            if (cont < 0) return;
            uint32_t a0 = g->rule_alt0[s.arg], a1 = g->rule_alt0[s.arg + 1];
            if (!grow((void **)&m->work, &m->cap_work, w + 2 * (int)(a1 - a0), sizeof *m->work)) {
                m->oom = true;
                return;
            }
            for (uint32_t a = a1; a-- > a0;) {
                m->work[w++] = (int32_t)g->alts[a];
                m->work[w++] = cont;
            }
        }
    }
}

/* The set (*in)[off .. off + n) after byte b, appended to *out at *o (in
 * and out may be the same buffer: it is read through in each time); its
 * count. */
static int advance(struct grammar_matcher *m, int32_t *const *in, int off, int n, uint8_t b, int32_t **out, int *o,
                   int *cap, bool *accept) {
    int start = *o;
    for (int i = 0; i < n; i++) {
        const struct gnode *nd = &m->nodes[(*in)[off + i]];
        struct gsym s = m->g->syms[nd->pos];
        if (!gset_has(&m->g->sets[s.arg], b)) continue;
        uint32_t pos = nd->pos + 1;
        int32_t par = nd->parent;
        settle(m, pos, par, out, o, cap, accept);
    }
    /* one node once: settle dedupes within a call, not across stacks */
    int k = start;
    for (int i = start; i < *o; i++) {
        bool dup = false;
        for (int j = start; j < k && !dup; j++) dup = (*out)[j] == (*out)[i];
        if (!dup) (*out)[k++] = (*out)[i];
    }
    *o = k;
    return k - start;
}

struct grammar_matcher *grammar_matcher_new(const struct grammar *g, const struct grammar_vocab *v,
                                            struct kvik_err *err) {
    struct grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) goto nomem;
    m->g = g;
    m->v = v;
    m->n_bucket = 1 << 16;
    m->bucket = malloc(m->n_bucket * sizeof *m->bucket);
    m->set_at = malloc(((size_t)(v ? v->max_depth : 0) + 2) * sizeof *m->set_at);
    if (!m->bucket || !m->set_at) goto nomem;
    memset(m->bucket, 0xFF, m->n_bucket * sizeof *m->bucket);
    /* the start: root's alternatives over the end (-1) */
    int32_t root_call = -1;
    uint32_t a0 = g->rule_alt0[g->root], a1 = g->rule_alt0[g->root + 1];
    for (uint32_t a = a0; a < a1; a++) settle(m, g->alts[a], root_call, &m->cur, &m->n_cur, &m->cap_cur, &m->accept);
    if (m->oom) goto nomem;
    /* settle dedupes per call; across alternatives too */
    int k = 0;
    for (int i = 0; i < m->n_cur; i++) {
        bool dup = false;
        for (int j = 0; j < k && !dup; j++) dup = m->cur[j] == m->cur[i];
        if (!dup) m->cur[k++] = m->cur[i];
    }
    m->n_cur = k;
    return m;
nomem:
    grammar_matcher_free(m);
    err_set(err, KVIK_ERR_NOMEM, "grammar: out of memory");
    return NULL;
}

void grammar_matcher_free(struct grammar_matcher *m) {
    if (!m) return;
    free(m->nodes);
    free(m->bucket);
    free(m->cur);
    free(m->work);
    free(m->seen);
    free(m->sets);
    free(m->set_at);
    free(m);
}

bool grammar_matcher_accept_bytes(struct grammar_matcher *m, const char *s, size_t n) {
    int32_t *a = NULL, *b = NULL;
    int na = 0, ca = 0, cb = 0;
    bool acc = m->accept;
    if (!grow((void **)&a, &ca, m->n_cur + 1, sizeof *a)) return false;
    if (m->n_cur) memcpy(a, m->cur, (size_t)m->n_cur * sizeof *a);
    na = m->n_cur;
    for (size_t i = 0; i < n; i++) {
        int nb = 0;
        acc = false;
        advance(m, &a, 0, na, (uint8_t)s[i], &b, &nb, &cb, &acc);
        if (m->oom || (nb == 0 && !(acc && i + 1 == n))) {
            free(a);
            free(b);
            m->oom = false;
            return false;
        }
        int32_t *t = a;
        a = b, b = t;
        int tc = ca;
        ca = cb, cb = tc;
        na = nb;
    }
    free(m->cur);
    free(b);
    m->cur = a;
    m->cap_cur = ca;
    m->n_cur = na;
    m->accept = acc;
    return true;
}

static bool is_eog(const struct grammar_vocab *v, int32_t id) {
    for (int i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return true;
    return false;
}

bool grammar_matcher_accept_token(struct grammar_matcher *m, int32_t id) {
    const struct grammar_vocab *v = m->v;
    if (!v || id < 0 || id >= v->n_vocab) return false;
    if (is_eog(v, id)) return m->accept;
    if (!v->len[id]) return false;
    return grammar_matcher_accept_bytes(m, (const char *)v->piece[id], v->len[id]);
}

bool grammar_matcher_can_end(const struct grammar_matcher *m) { return m->accept; }
bool grammar_matcher_must_end(const struct grammar_matcher *m) { return m->n_cur == 0; }

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The current state's key: its stacks' chain hashes, in order, and accept. */
static void state_key(const struct grammar_matcher *m, uint64_t *k1, uint64_t *k2) {
    uint64_t small[32][2], (*s)[2] = m->n_cur <= 32 ? small : malloc((size_t)m->n_cur * sizeof *s);
    uint64_t h1 = m->accept ? 0xA5A5A5A5ull : 0x5A5A5A5Aull, h2 = h1 * 3;
    if (!s) {
        *k1 = *k2 = 0; /* not cached: see fill_mask */
        return;
    }
    for (int i = 0; i < m->n_cur; i++) s[i][0] = m->nodes[m->cur[i]].sig1, s[i][1] = m->nodes[m->cur[i]].sig2;
    qsort(s, (size_t)m->n_cur, sizeof *s, cmp_u64);
    for (int i = 0; i < m->n_cur; i++) h1 = mix64(h1 ^ s[i][0]), h2 = mix64(h2 + s[i][1]);
    *k1 = h1 | 1; /* never 0: 0 means "not cached" */
    *k2 = h2;
    if (s != small) free(s);
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
    uint64_t k1, k2;
    state_key(m, &k1, &k2);
    bool found = false;
    if (k1) {
        pthread_mutex_lock(&g->cache_mu);
        if (!g->cache && (g->cache = calloc(1, sizeof *g->cache))) g->cache->v = v;
        struct gcache_entry *e = g->cache && g->cache->v == v ? cache_find(g->cache, k1, k2, &found) : NULL;
        if (found) {
            memcpy(mask, e->mask, words * sizeof *mask);
            int64_t allowed = e->allowed;
            g->cache->hits++;
            pthread_mutex_unlock(&g->cache_mu);
            return allowed;
        }
        pthread_mutex_unlock(&g->cache_mu);
    }
    int64_t allowed = fill_mask_walk(m, mask);
    if (!k1) return allowed;
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

static int64_t fill_mask_walk(struct grammar_matcher *m, uint32_t *mask) {
    const struct grammar_vocab *v = m->v;
    memset(mask, 0, ((size_t)v->n_vocab + 31) / 32 * sizeof *mask);
    int64_t allowed = 0;
    if (m->accept)
        for (int i = 0; i < v->n_eog; i++)
            if (v->eog[i] >= 0 && v->eog[i] < v->n_vocab && !(mask[v->eog[i] >> 5] >> (v->eog[i] & 31) & 1)) {
                mask[v->eog[i] >> 5] |= 1u << (v->eog[i] & 31);
                allowed++;
            }
    int32_t mark = m->n_nodes;
    if (!grow((void **)&m->sets, &m->cap_sets, m->n_cur + 1, sizeof *m->sets)) return allowed;
    if (m->n_cur) memcpy(m->sets, m->cur, (size_t)m->n_cur * sizeof *m->sets);
    m->set_at[0] = 0;
    m->set_at[1] = m->n_cur;
    for (int32_t k = 1; k < v->n_nodes;) {
        int d = v->depth[k];
        /* the parent's set is at depth d - 1: [set_at[d - 1], set_at[d]) */
        int o = m->set_at[d];
        bool acc = false;
        int n = advance(m, &m->sets, m->set_at[d - 1], m->set_at[d] - m->set_at[d - 1], v->byte[k], &m->sets, &o,
                        &m->cap_sets, &acc);
        if (m->oom) break;
        m->set_at[d + 1] = o;
        /* tokens ending here: their bytes were all taken */
        if (n > 0 || acc)
            for (int32_t t = v->tok0[k]; t < v->tok0[k + 1]; t++) {
                int32_t id = v->toks[t];
                if (!(mask[id >> 5] >> (id & 31) & 1)) mask[id >> 5] |= 1u << (id & 31), allowed++;
            }
        k = n > 0 ? k + 1 : v->end[k];
    }
    nodes_truncate(m, mark);
    m->oom = false;
    return allowed;
}
