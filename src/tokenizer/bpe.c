/*
 * bpe.c — encoding text to ids with byte-level BPE.
 *
 * Three stages:
 *  1. Special tokens are cut out of the raw text (longest match first; see
 *     tokenizer.h for which ones). Control tokens match everywhere, nowhere
 *     (parse_special), or only inside given byte ranges
 *     (tokenizer_encode_spans: a chat template's own text).
 *  2. The text between them is normalized to NFC if the vocabulary asks
 *     for it (unicode_nfc.c; text that passes the quick check, all ASCII
 *     text for one, is used as it is) and split into words by the
 *     pre-tokenizer (pretok.c).
 *  3. Each word starts as one symbol per byte (the byte's token) and the
 *     adjacent pair with the lowest merge rank is merged, the leftmost
 *     first among equal ranks, until no pair merges. Symbols sit in a
 *     doubly linked list over an array; candidate pairs wait in a binary
 *     min-heap keyed by (rank, position) and are checked against the list
 *     when they come out (a stale pair no longer has the same two ids).
 *     With ignore_merges (Llama 3, Tekken, ...; tokenizer.c names them) a
 *     word whose byte-level spelling is a token's text is that token and
 *     skips the merges.
 *
 * Working memory for stage 3 is a struct tokenizer_scratch: the caller's
 * (tokenizer_encode_scratch), else one kept per thread. It grows only for a
 * word longer than any before it, so the merge loop does not allocate; the
 * per-thread one is given back after a call that grew it past
 * SCRATCH_KEEP bytes of word.
 *
 * Before stage 3, a word of 2..CACHE_WORD_MAX bytes is looked up in the
 * thread's word cache (see tokenizer.h): a 4-way set-associative table of
 * CACHE_SETS sets, the least recently used word of a set evicted. A set's
 * hashes and use stamps sit together in 32 bytes (the whole tag array is
 * CACHE_SETS * 32 bytes and stays in the core's caches), so a lookup reads
 * one tag line and then only the 64-byte entry whose hash matched.
 * Entries are keyed by the word's bytes and the tokenizer's cache_uid,
 * which no other tokenizer of the process ever gets (a 64-bit counter), so
 * entries of a freed tokenizer are dead weight, never a wrong answer. Each thread owns its table and its scratch (thread-local
 * storage, freed at thread exit by a pthread key destructor): no locks.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tokenizer/tokenizer_int.h"
#include "tokenizer/unicode_norm.h"

struct pair {
    int32_t rank;
    int32_t pos;    /* left symbol's index */
    int32_t left;   /* ids when queued: the pair is stale if they changed */
    int32_t right;
};

/* Stage 3's working memory for one word of up to cap bytes. */
struct tokenizer_scratch {
    size_t cap;
    int32_t *id, *prev, *next; /* [cap] symbols; id -1 = merged away */
    struct pair *heap;         /* [3 * cap]: n - 1 pairs queued first, at most 2 per merge */
    int64_t n_heap;
    struct unorm_nfc_buf nfc;  /* NFC vocabularies: a stretch of text that was not NFC */
};

/* ---- the per-thread word cache ------------------------------------------------ */

enum {
    CACHE_WAYS = 4,
    CACHE_SETS = 4096,     /* 16384 words: 128 KiB of tags + 1 MiB of entries per thread */
    CACHE_WORD_MAX = 30,   /* longer words are not cached */
    CACHE_IDS_MAX = 6,     /* nor words of more tokens */
    SCRATCH_KEEP = 4096,   /* bytes of word the per-thread scratch keeps room for */
};

struct cache_set {
    uint32_t hash[CACHE_WAYS];  /* word_hash of each way's word (0 and an empty entry: free) */
    uint32_t stamp[CACHE_WAYS]; /* the thread's clock at each way's last use; oldest goes */
};
_Static_assert(sizeof(struct cache_set) == 32, "two sets share a cache line");

struct cache_entry {
    uint64_t uid;                  /* tokenizer's cache_uid; 0 = empty */
    uint8_t len;                   /* word bytes, 2..CACHE_WORD_MAX */
    uint8_t n_ids;                 /* 0..CACHE_IDS_MAX */
    uint8_t word[CACHE_WORD_MAX];  /* [len] */
    int32_t ids[CACHE_IDS_MAX];    /* [n_ids] */
};
_Static_assert(sizeof(struct cache_entry) == 64, "a cache entry is one cache line");

#define CACHE_BYTES ((size_t)CACHE_SETS * (sizeof(struct cache_set) + CACHE_WAYS * sizeof(struct cache_entry)))

struct thread_state {
    struct cache_set *sets;    /* [CACHE_SETS], then the entries: one block of CACHE_BYTES */
    struct cache_entry *cache; /* [CACHE_SETS * CACHE_WAYS], set s's ways at s * CACHE_WAYS;
                                  NULL until first used */
    bool cache_failed;         /* its allocation failed: this thread runs without */
    bool registered;           /* the exit destructor is armed */
    uint32_t clock;            /* ticks once per lookup; stamps entries */
    struct tokenizer_cache_stats stats;
    struct tokenizer_scratch scratch; /* for calls without a caller's scratch */
};

static _Thread_local struct thread_state t_state;
static atomic_bool g_cache_on = true;
static atomic_uint_fast64_t g_next_uid = 1;
static pthread_key_t g_exit_key;
static bool g_exit_key_ok; /* set once, under g_exit_once */
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

static void scratch_release(struct tokenizer_scratch *sc) {
    free(sc->id);
    unorm_nfc_buf_free(&sc->nfc);
    *sc = (struct tokenizer_scratch){0};
}

/* Runs in an exiting thread that used the cache or the thread's scratch. */
static void thread_state_free(void *unused) {
    (void)unused;
    mem_free(t_state.sets);
    scratch_release(&t_state.scratch);
    t_state = (struct thread_state){0};
}

static void exit_key_init(void) {
    g_exit_key_ok = pthread_key_create(&g_exit_key, thread_state_free) == 0;
}

/* Arms thread_state_free for this thread's exit; false if that failed
 * (then the thread keeps no memory of its own). */
static bool thread_state_register(struct thread_state *ts) {
    if (ts->registered) return true;
    pthread_once(&g_exit_once, exit_key_init);
    if (!g_exit_key_ok || pthread_setspecific(g_exit_key, (void *)1) != 0) return false;
    ts->registered = true;
    return true;
}

/* KVIK_TOKENIZER_CACHE=0 in the environment starts with the cache off. */
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static void cache_env_init(void) {
    const char *v = getenv("KVIK_TOKENIZER_CACHE");
    if (v && strcmp(v, "0") == 0) atomic_store(&g_cache_on, false);
}

void tokenizer_cache_set_enabled(bool on) {
    pthread_once(&g_env_once, cache_env_init);
    atomic_store(&g_cache_on, on);
}

bool tokenizer_cache_enabled(void) {
    pthread_once(&g_env_once, cache_env_init);
    return atomic_load(&g_cache_on);
}

void tokenizer_cache_clear(void) {
    struct thread_state *ts = &t_state;
    if (ts->sets) memset(ts->sets, 0, CACHE_BYTES);
    ts->stats = (struct tokenizer_cache_stats){0};
}

void tokenizer_cache_get_stats(struct tokenizer_cache_stats *out) { *out = t_state.stats; }

/* The tokenizer's cache identity, given on first use (tokenizer_load
 * zeroes it). Two threads racing here agree on one value. */
static uint64_t tokenizer_uid(const struct tokenizer *tok) {
    uint64_t *p = (uint64_t *)&tok->cache_uid; /* a loaded tokenizer's only mutable field */
    uint64_t uid = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    if (uid) return uid;
    uint64_t fresh = atomic_fetch_add(&g_next_uid, 1), expected = 0;
    if (__atomic_compare_exchange_n(p, &expected, fresh, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return fresh;
    return expected;
}

/* The thread's table, or NULL when the cache is off or unavailable. */
static struct cache_entry *cache_get(struct thread_state *ts) {
    pthread_once(&g_env_once, cache_env_init);
    if (!atomic_load_explicit(&g_cache_on, memory_order_relaxed)) return NULL;
    if (ts->cache || ts->cache_failed) return ts->cache;
    if (thread_state_register(ts) && (ts->sets = mem_alloc_aligned(CACHE_BYTES)))
        ts->cache = (struct cache_entry *)(ts->sets + CACHE_SETS);
    ts->cache_failed = ts->cache == NULL;
    return ts->cache;
}

static inline uint32_t word_hash(const uint8_t *s, size_t n, uint64_t uid) {
    uint64_t h = (uid * 0x9E3779B97F4A7C15ull) ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, s + i, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    if (i < n) {
        uint64_t v = 0;
        for (size_t k = 0; i + k < n; k++) v |= (uint64_t)s[i + k] << (8 * k);
        h = (h ^ v) * 0xFF51AFD7ED558CCDull;
    }
    h ^= h >> 29;
    h *= 0xC4CEB9FE1A85EC53ull;
    return (uint32_t)(h ^ (h >> 32));
}

/* ---- encoding ----------------------------------------------------------------- */

struct encoder {
    const struct tokenizer *tok;
    const uint8_t *text; /* the current stretch between special tokens */
    int32_t *out;
    int64_t max, count;
    struct tokenizer_scratch *sc; /* NULL: the thread's, attached at the first long word */
    struct thread_state *ts;      /* set with it */
    struct cache_set *sets;       /* the thread's table: tags */
    struct cache_entry *cache;    /* and entries; NULL: no cache for this call */
    uint64_t uid;                 /* tok's cache_uid, when cache is set */
};

static inline void put(struct encoder *e, int32_t id) {
    if (e->count < e->max) e->out[e->count] = id;
    e->count++;
}

/* Attaches the thread state, the cache and (if the caller gave none) the
 * thread's scratch: once per call, at its first word of two bytes or more. */
static void encoder_attach(struct encoder *e) {
    e->ts = &t_state;
    if (!e->sc) {
        thread_state_register(e->ts);
        e->sc = &e->ts->scratch;
    }
    e->cache = cache_get(e->ts);
    e->sets = e->ts->sets;
    if (e->cache) e->uid = tokenizer_uid(e->tok);
}

/* After a call: the thread's scratch gives back a block grown past
 * SCRATCH_KEEP (all of it if the thread's exit destructor is not armed). */
static void encoder_done(struct encoder *e) {
    struct tokenizer_scratch *own = e->ts ? &e->ts->scratch : NULL;
    if (e->sc == own && own &&
        (own->cap > SCRATCH_KEEP || own->nfc.out_cap > 16 * SCRATCH_KEEP ||
         own->nfc.cp_cap > 16 * SCRATCH_KEEP || !e->ts->registered))
        scratch_release(own);
}

static bool reserve(struct tokenizer_scratch *sc, size_t n) {
    if (n <= sc->cap) return true;
    size_t cap = sc->cap ? sc->cap : 64;
    while (cap < n) cap *= 2;
    if (cap > INT32_MAX / 4) return false;
    void *blk = realloc(sc->id, cap * (3 * sizeof(int32_t) + 3 * sizeof(struct pair)));
    if (!blk) return false;
    sc->id = blk;
    sc->prev = sc->id + cap;
    sc->next = sc->prev + cap;
    sc->heap = (struct pair *)(sc->next + cap);
    sc->cap = cap;
    return true;
}

static inline bool pair_less(const struct pair *a, const struct pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct tokenizer_scratch *sc, struct pair p) {
    int64_t i = sc->n_heap++;
    while (i > 0) {
        int64_t up = (i - 1) / 2;
        if (!pair_less(&p, &sc->heap[up])) break;
        sc->heap[i] = sc->heap[up];
        i = up;
    }
    sc->heap[i] = p;
}

static struct pair heap_pop(struct tokenizer_scratch *sc) {
    struct pair top = sc->heap[0], last = sc->heap[--sc->n_heap];
    int64_t i = 0, n = sc->n_heap;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_less(&sc->heap[c + 1], &sc->heap[c])) c++;
        if (!pair_less(&sc->heap[c], &last)) break;
        sc->heap[i] = sc->heap[c];
        i = c;
    }
    if (n > 0) sc->heap[i] = last;
    return top;
}

/* Queues the pair starting at symbol pos if it merges. */
static void queue_pair(const struct tokenizer *tok, struct tokenizer_scratch *sc, int32_t pos) {
    int32_t nx = sc->next[pos];
    if (nx < 0) return;
    int32_t a = sc->id[pos], b = sc->id[nx];
    if (a < 0 || b < 0) return;
    const struct merge_slot *m = merge_find(tok, a, b);
    if (m) heap_push(sc, (struct pair){m->rank, pos, a, b});
}

/* The cache entry holding word s[0..n) (stamped as used), or NULL after
 * setting *victim to the way of its set to replace. */
static const struct cache_entry *cache_find(struct encoder *e, const uint8_t *s, size_t n, uint32_t h,
                                            int *victim) {
    size_t si = h & (CACHE_SETS - 1);
    struct cache_set *set = &e->sets[si];
    const struct cache_entry *ways = e->cache + si * CACHE_WAYS;
    uint32_t now = ++e->ts->clock, oldest = 0;
    *victim = 0;
    for (int w = 0; w < CACHE_WAYS; w++) {
        if (set->hash[w] == h) {
            const struct cache_entry *c = &ways[w];
            if (c->uid == e->uid && c->len == n && memcmp(c->word, s, n) == 0) {
                set->stamp[w] = now;
                return c;
            }
        }
        uint32_t age = now - set->stamp[w]; /* never used: stamp 0, oldest of all */
        if (age > oldest) {
            oldest = age;
            *victim = w;
        }
    }
    return NULL;
}

/* ignore_merges: the token whose text is word s[0..n) written in the
 * byte-level alphabet, or -1 if there is none (or it is a control or
 * unknown token, whose text is never read from plain text). The scratch,
 * reserved for n symbols (12n bytes or more), holds the spelled-out word
 * (up to 2n bytes) until the merge loop reuses it. */
static int32_t whole_word(const struct tokenizer *tok, struct tokenizer_scratch *sc,
                          const uint8_t *s, size_t n) {
    if (n > tok->max_text) return -1; /* each byte spells at least one byte */
    uint8_t *w = (uint8_t *)sc->id;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *c = tok->byte_char[s[i]];
        w[m] = c[1];
        w[m + 1] = c[2];
        m += c[0];
    }
    if (m > tok->max_text) return -1;
    int32_t id = tokenizer_find(tok, (const char *)w, m);
    if (id < 0 || tok->type[id] == TOKEN_TYPE_CONTROL || tok->type[id] == TOKEN_TYPE_UNKNOWN) return -1;
    return id;
}

/* BPE over bytes [start, end) of e->text. */
static bool encode_word(void *ctx, size_t start, size_t end) {
    struct encoder *e = ctx;
    const struct tokenizer *tok = e->tok;
    const uint8_t *s = e->text + start;
    size_t n = end - start;
    if (n == 1) {
        int32_t id = tok->byte_tok[s[0]];
        if (id < 0) id = tok->unk; /* a byte with no token */
        if (id >= 0) put(e, id);
        return true;
    }
    if (!e->ts) encoder_attach(e);
    int victim = -1;
    uint32_t h = 0;
    if (e->cache && n <= CACHE_WORD_MAX) {
        h = word_hash(s, n, e->uid);
        const struct cache_entry *hit = cache_find(e, s, n, h, &victim);
        if (hit) {
            e->ts->stats.hits++;
            for (int k = 0; k < hit->n_ids; k++) put(e, hit->ids[k]);
            return true;
        }
        e->ts->stats.misses++;
    }

    struct tokenizer_scratch *sc = e->sc;
    if (!reserve(sc, n)) return false;
    int32_t whole = tok->ignore_merges ? whole_word(tok, sc, s, n) : -1;
    sc->n_heap = 0;
    if (whole >= 0) {
        sc->id[0] = whole; /* one symbol: the merge loop has nothing to do */
        sc->next[0] = -1;
    } else {
        for (size_t i = 0; i < n; i++) {
            sc->id[i] = tok->byte_tok[s[i]];
            sc->prev[i] = (int32_t)i - 1;
            sc->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        }
        for (size_t i = 0; i + 1 < n; i++) queue_pair(tok, sc, (int32_t)i);
    }
    while (sc->n_heap > 0) {
        struct pair p = heap_pop(sc);
        int32_t r = sc->next[p.pos];
        if (sc->id[p.pos] != p.left || r < 0 || sc->id[r] != p.right) continue; /* stale */
        const struct merge_slot *m = merge_find(tok, p.left, p.right);
        /* merge r into p.pos */
        sc->id[p.pos] = m->merged;
        sc->id[r] = -1;
        sc->next[p.pos] = sc->next[r];
        if (sc->next[r] >= 0) sc->prev[sc->next[r]] = p.pos;
        if (sc->prev[p.pos] >= 0) queue_pair(tok, sc, sc->prev[p.pos]);
        queue_pair(tok, sc, p.pos);
    }
    int64_t first = e->count;
    int32_t got[CACHE_IDS_MAX];
    for (int32_t i = 0; i >= 0; i = sc->next[i]) {
        int32_t id = sc->id[i] >= 0 ? sc->id[i] : tok->unk; /* -1: a byte with no token */
        if (id < 0) continue;
        if (e->count - first < CACHE_IDS_MAX) got[e->count - first] = id;
        put(e, id);
    }
    if (victim >= 0 && e->count - first <= CACHE_IDS_MAX) {
        size_t si = h & (CACHE_SETS - 1);
        struct cache_entry *c = &e->cache[si * CACHE_WAYS + (size_t)victim];
        e->sets[si].hash[victim] = h;
        e->sets[si].stamp[victim] = e->ts->clock;
        c->uid = e->uid;
        c->len = (uint8_t)n;
        c->n_ids = (uint8_t)(e->count - first);
        memcpy(c->word, s, n);
        memcpy(c->ids, got, (size_t)c->n_ids * sizeof got[0]);
    }
    return true;
}

/* Stage 2 and 3 over text[0..n). */
static bool encode_plain(struct encoder *e, const uint8_t *text, size_t n) {
    if (n == 0) return true;
    /* SentencePiece and WordPiece vocabularies have encoders of their own */
    if (e->tok->model == TOKMODEL_SPM) return spm_encode(e->tok, text, n, e->out, e->max, &e->count);
    if (e->tok->model == TOKMODEL_WPM) return wpm_encode(e->tok, text, n, e->out, e->max, &e->count);
    if (e->tok->nfc && unorm_nfc_span(text, n) < n) {
        /* not NFC for certain: normalize into the scratch */
        if (!e->ts) encoder_attach(e);
        int64_t m = unorm_nfc(text, n, &e->sc->nfc);
        if (m < 0) return false;
        text = e->sc->nfc.out;
        n = (size_t)m;
    }
    e->text = text;
    return pretok_split(e->tok->pretok, text, n, encode_word, e);
}

/* Longest special token at text[i..n) that may match; NULL if none. A
 * control token matches only if it ends by ctl_end (ctl_end <= i: none
 * does); user-defined tokens match anywhere. */
static const struct special_tok *special_at(const struct tokenizer *tok, const uint8_t *text,
                                            size_t i, size_t n, size_t ctl_end) {
    for (int32_t k = 0; k < tok->n_specials; k++) {
        const struct special_tok *sp = &tok->specials[k];
        if (sp->len > n - i || (uint8_t)sp->text[0] != text[i]) continue;
        if (sp->control && (ctl_end <= i || sp->len > ctl_end - i)) continue;
        if (memcmp(sp->text, text + i, sp->len) == 0) return sp;
    }
    return NULL;
}

/* Where control tokens may match, for one encode: everywhere, nowhere, or
 * inside the spans (sorted, not overlapping). */
struct ctl_where {
    bool all;
    const struct tok_span *spans; // [n_spans]
    size_t n_spans;
    size_t k; // spans[0..k) end at or before the position last asked about
};

/* The end of the stretch of text from i on where a control token may lie
 * (i or less: none may start at i). Positions asked about only grow. */
static size_t ctl_end_at(struct ctl_where *w, size_t i, size_t len) {
    if (w->all) return len;
    while (w->k < w->n_spans && w->spans[w->k].off + w->spans[w->k].len <= i) w->k++;
    if (w->k < w->n_spans && w->spans[w->k].off <= i) {
        size_t end = w->spans[w->k].off + w->spans[w->k].len;
        return end < len ? end : len;
    }
    return i;
}

static int64_t encode_where(const struct tokenizer *tok, struct tokenizer_scratch *sc,
                            const char *text, size_t len, bool add_special,
                            struct ctl_where *where, int32_t *out, int64_t max) {
    if (!tok || (!text && len) || (!out && max > 0) || max < 0) return KVIK_ERR_INVALID_ARG;
    struct encoder e = {.tok = tok, .out = out, .max = max, .sc = sc};
    const uint8_t *s = (const uint8_t *)text;
    bool ok = true;
    if (add_special && tok->add_bos && tok->bos >= 0) put(&e, tok->bos);
    size_t seg = 0;
    if (tok->n_specials > 0) {
        for (size_t i = 0; i < len && ok;) {
            uint8_t c = s[i];
            const struct special_tok *sp = NULL;
            if (tok->special_first[c >> 3] & (1u << (c & 7)))
                sp = special_at(tok, s, i, len, ctl_end_at(where, i, len));
            if (!sp) {
                i++;
                continue;
            }
            ok = encode_plain(&e, s + seg, i - seg);
            put(&e, sp->id);
            i += sp->len;
            seg = i;
        }
    }
    if (ok) ok = encode_plain(&e, s + seg, len - seg);
    if (add_special && tok->add_eos && tok->eos >= 0) put(&e, tok->eos);
    encoder_done(&e);
    return ok ? e.count : KVIK_ERR_NOMEM;
}

int64_t tokenizer_encode_scratch(const struct tokenizer *tok, struct tokenizer_scratch *sc,
                                 const char *text, size_t len, bool add_special, bool parse_special,
                                 int32_t *out, int64_t max) {
    struct ctl_where w = {.all = parse_special};
    return encode_where(tok, sc, text, len, add_special, &w, out, max);
}

int64_t tokenizer_encode_spans(const struct tokenizer *tok, const char *text, size_t len,
                               bool add_special, const struct tok_span *spans, size_t n_spans,
                               int32_t *out, int64_t max) {
    if (n_spans > 0 && !spans) return KVIK_ERR_INVALID_ARG;
    for (size_t k = 0; k < n_spans; k++)
        if (spans[k].off > len || spans[k].len > len - spans[k].off ||
            (k > 0 && spans[k].off < spans[k - 1].off + spans[k - 1].len))
            return KVIK_ERR_INVALID_ARG;
    struct ctl_where w = {.spans = spans, .n_spans = n_spans};
    return encode_where(tok, NULL, text, len, add_special, &w, out, max);
}

int64_t tokenizer_encode(const struct tokenizer *tok, const char *text, size_t len,
                         bool add_special, bool parse_special, int32_t *out, int64_t max) {
    return tokenizer_encode_scratch(tok, NULL, text, len, add_special, parse_special, out, max);
}

struct tokenizer_scratch *tokenizer_scratch_new(void) {
    return calloc(1, sizeof(struct tokenizer_scratch));
}

void tokenizer_scratch_free(struct tokenizer_scratch *sc) {
    if (!sc) return;
    scratch_release(sc);
    free(sc);
}
