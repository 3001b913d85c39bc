/*
 * vocab_import.c — tiktoken ranks file -> GGUF vocabulary (see vocab_import.h).
 *
 * Steps: decode every line into (bytes, rank) with a byte-string -> rank hash
 * table; place special tokens; give every id its text (byte-level characters,
 * a special's own text, or an "<|unused_ID|>" filler); list the merges (all
 * two-part splits of every multi-byte token, sorted); write the keys.
 */
#include "tools/vocab_import.h"

#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

enum { RANK_MAX = 1 << 24 }; /* far above any published vocabulary */

struct rank_entry {
    uint32_t off, len; /* bytes in the arena */
    int32_t rank;
};

struct rank_table {
    uint8_t *arena;
    size_t arena_len;
    struct rank_entry *e;
    int64_t n;
    int32_t *slot; /* [mask + 1] entry index or -1 */
    uint64_t mask;
};

static uint64_t hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* Rank of s[0..n), or -1. */
static int32_t rank_find(const struct rank_table *t, const uint8_t *s, size_t n) {
    for (uint64_t i = hash_bytes(s, n) & t->mask;; i = (i + 1) & t->mask) {
        int32_t k = t->slot[i];
        if (k < 0) return -1;
        const struct rank_entry *e = &t->e[k];
        if (e->len == n && !memcmp(t->arena + e->off, s, n)) return e->rank;
    }
}

/* Inserts entry k; false if its bytes are already there. */
static bool rank_insert(struct rank_table *t, int32_t k) {
    const struct rank_entry *e = &t->e[k];
    const uint8_t *s = t->arena + e->off;
    for (uint64_t i = hash_bytes(s, e->len) & t->mask;; i = (i + 1) & t->mask) {
        int32_t j = t->slot[i];
        if (j < 0) {
            t->slot[i] = k;
            return true;
        }
        if (t->e[j].len == e->len && !memcmp(t->arena + t->e[j].off, s, e->len)) return false;
    }
}

static int b64_val(uint8_t c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes base64 s[0..n) (padded to a multiple of 4) into out; its length,
 * or -1 if malformed. */
static int64_t b64_decode(const uint8_t *s, size_t n, uint8_t *out) {
    if (n == 0 || n % 4) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64_val(s[i + k])) < 0) {
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (uint8_t)(w >> 16);
        if (pad < 2) out[o++] = (uint8_t)(w >> 8);
        if (pad < 1) out[o++] = (uint8_t)w;
    }
    return (int64_t)o;
}

/* Parses the file into t (ranks unique, bytes unique). */
static kvik_status read_ranks(const uint8_t *data, size_t size, const char *path, struct rank_table *t,
                              struct kvik_err *err) {
    int64_t lines = 0;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
    lines++;
    t->arena = malloc(size + 1);
    t->e = malloc((size_t)lines * sizeof *t->e);
    uint64_t cap = 64;
    while (cap < (uint64_t)lines * 2) cap <<= 1;
    t->slot = malloc(cap * sizeof *t->slot);
    if (!t->arena || !t->e || !t->slot) return err_set(err, KVIK_ERR_NOMEM, "vocab import: out of memory");
    memset(t->slot, 0xff, cap * sizeof *t->slot);
    t->mask = cap - 1;
    const uint8_t *p = data, *end = data + size;
    for (int64_t line = 1; p < end; line++) {
        const uint8_t *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        const uint8_t *q = eol;
        if (q > p && q[-1] == '\r') q--;
        if (q == p) { /* blank line */
            p = eol + 1;
            continue;
        }
        const uint8_t *sp = memchr(p, ' ', (size_t)(q - p));
        long long rank = -1;
        if (sp && sp + 1 < q) {
            rank = 0;
            for (const uint8_t *d = sp + 1; d < q && rank >= 0; d++)
                rank = (*d >= '0' && *d <= '9' && rank < RANK_MAX) ? rank * 10 + (*d - '0') : -1;
        }
        int64_t len = sp ? b64_decode(p, (size_t)(sp - p), t->arena + t->arena_len) : -1;
        if (len <= 0 || rank < 0 || rank >= RANK_MAX)
            return err_set(err, KVIK_ERR_FORMAT,
                           "vocab import: %s line %lld: expected 'BASE64 RANK' (rank below %d)", path,
                           (long long)line, RANK_MAX);
        struct rank_entry *e = &t->e[t->n];
        *e = (struct rank_entry){(uint32_t)t->arena_len, (uint32_t)len, (int32_t)rank};
        t->arena_len += (size_t)len;
        if (!rank_insert(t, (int32_t)t->n))
            return err_set(err, KVIK_ERR_FORMAT, "vocab import: %s line %lld: the same bytes appear twice", path,
                           (long long)line);
        t->n++;
        p = eol + 1;
    }
    if (t->n == 0) return err_set(err, KVIK_ERR_FORMAT, "vocab import: %s holds no tokens", path);
    return KVIK_OK;
}

/* Token text of raw bytes: every byte as its byte-level character. */
static char *byte_level_text(const uint8_t *s, size_t n) {
    char *out = malloc(2 * n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = tokenizer_byte_char(s[i]);
        if (cp < 0x80) {
            *o++ = (char)cp;
        } else { /* below U+0800: two bytes */
            *o++ = (char)(0xC0 | (cp >> 6));
            *o++ = (char)(0x80 | (cp & 0x3F));
        }
    }
    *o = 0;
    return out;
}

struct merge {
    int32_t rank, l, r;
};

static int merge_cmp(const void *a, const void *b) {
    const struct merge *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    if (x->l != y->l) return x->l < y->l ? -1 : 1;
    return (x->r > y->r) - (x->r < y->r);
}

kvik_status vocab_import_tiktoken_mem(const uint8_t *data, size_t size, const char *ranks_path,
                                      const struct vocab_import_opts *o, struct gguf_writer *w,
                                      struct vocab_import_info *info, struct kvik_err *err) {
    struct rank_table t = {0};
    int32_t *by_id = NULL;            /* [n_vocab] entry index, -1 - special index, or INT32_MIN */
    char **text = NULL;               /* [n_vocab] */
    int32_t *types = NULL;
    struct merge *merges = NULL;
    char **merge_text = NULL;
    int64_t n_vocab = 0, n_merges = 0, cap_merges = 0;
    kvik_status st = read_ranks(data, size, ranks_path, &t, err);
    if (st) goto done;

    /* ids */
    for (int64_t k = 0; k < t.n; k++)
        if (t.e[k].rank + 1 > n_vocab) n_vocab = t.e[k].rank + 1;
    for (int i = 0; i < o->n_special; i++) {
        if (o->special[i].id < 0 || o->special[i].id >= RANK_MAX || !o->special[i].text || !*o->special[i].text) {
            st = err_set(err, KVIK_ERR_INVALID_ARG, "vocab import: special token %d: empty text or id out of range",
                         i);
            goto done;
        }
        if (o->special[i].id + 1 > n_vocab) n_vocab = o->special[i].id + 1;
    }
    by_id = malloc((size_t)n_vocab * sizeof *by_id);
    text = calloc((size_t)n_vocab, sizeof *text);
    types = malloc((size_t)n_vocab * sizeof *types);
    if (!by_id || !text || !types) {
        st = err_set(err, KVIK_ERR_NOMEM, "vocab import: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < n_vocab; i++) by_id[i] = INT32_MIN;
    for (int64_t k = 0; k < t.n; k++) {
        if (by_id[t.e[k].rank] != INT32_MIN) {
            st = err_set(err, KVIK_ERR_FORMAT, "vocab import: %s: rank %d is given twice", ranks_path,
                         t.e[k].rank);
            goto done;
        }
        by_id[t.e[k].rank] = (int32_t)k;
    }
    for (int i = 0; i < o->n_special; i++) {
        if (by_id[o->special[i].id] != INT32_MIN) {
            st = err_set(err, KVIK_ERR_INVALID_ARG, "vocab import: special token '%s' at id %d clashes with another",
                         o->special[i].text, o->special[i].id);
            goto done;
        }
        by_id[o->special[i].id] = -1 - i;
    }
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        if (rank_find(&t, &c, 1) < 0) {
            st = err_set(err, KVIK_ERR_FORMAT, "vocab import: %s has no token for the single byte 0x%02X", ranks_path,
                         b);
            goto done;
        }
    }

    /* texts and types */
    int64_t unused = 0;
    for (int64_t i = 0; i < n_vocab; i++) {
        int32_t k = by_id[i];
        if (k >= 0) {
            text[i] = byte_level_text(t.arena + t.e[k].off, t.e[k].len);
            types[i] = TOKEN_TYPE_NORMAL;
        } else if (k != INT32_MIN) {
            text[i] = strdup(o->special[-1 - k].text);
            types[i] = TOKEN_TYPE_CONTROL;
        } else {
            char buf[32];
            snprintf(buf, sizeof buf, "<|unused_%lld|>", (long long)i);
            text[i] = strdup(buf);
            types[i] = TOKEN_TYPE_UNUSED;
            unused++;
        }
        if (!text[i]) {
            st = err_set(err, KVIK_ERR_NOMEM, "vocab import: out of memory");
            goto done;
        }
    }

    /* merges: every split of every multi-byte token into two tokens */
    for (int64_t k = 0; k < t.n; k++) {
        const uint8_t *s = t.arena + t.e[k].off;
        for (uint32_t cut = 1; cut < t.e[k].len; cut++) {
            int32_t l = rank_find(&t, s, cut), r = rank_find(&t, s + cut, t.e[k].len - cut);
            if (l < 0 || r < 0) continue;
            if (n_merges == cap_merges) {
                cap_merges = cap_merges ? 2 * cap_merges : 4096;
                struct merge *nm = realloc(merges, (size_t)cap_merges * sizeof *nm);
                if (!nm) {
                    st = err_set(err, KVIK_ERR_NOMEM, "vocab import: out of memory");
                    goto done;
                }
                merges = nm;
            }
            merges[n_merges++] = (struct merge){t.e[k].rank, l, r};
        }
    }
    if (n_merges > 1) qsort(merges, (size_t)n_merges, sizeof *merges, merge_cmp);
    merge_text = calloc((size_t)n_merges + 1, sizeof *merge_text);
    if (!merge_text) {
        st = err_set(err, KVIK_ERR_NOMEM, "vocab import: out of memory");
        goto done;
    }
    for (int64_t m = 0; m < n_merges; m++) {
        const char *a = text[merges[m].l], *b = text[merges[m].r];
        size_t la = strlen(a), lb = strlen(b);
        if (!(merge_text[m] = malloc(la + lb + 2))) {
            st = err_set(err, KVIK_ERR_NOMEM, "vocab import: out of memory");
            goto done;
        }
        memcpy(merge_text[m], a, la);
        merge_text[m][la] = ' ';
        memcpy(merge_text[m] + la + 1, b, lb + 1);
    }

    /* the keys */
    if (o->bos >= n_vocab || o->eos >= n_vocab) {
        st = err_set(err, KVIK_ERR_INVALID_ARG, "vocab import: BOS/EOS id beyond the %lld ids", (long long)n_vocab);
        goto done;
    }
    if (o->name) st = gguf_writer_set_str(w, "general.name", o->name);
    if (!st) st = gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!st) st = gguf_writer_set_str(w, "tokenizer.ggml.pre", o->pre ? o->pre : "default");
    if (!st) st = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)text, (uint64_t)n_vocab);
    if (!st) st = gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n_vocab);
    if (!st)
        st = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merge_text, (uint64_t)n_merges);
    if (!st && o->bos >= 0) st = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)o->bos);
    if (!st && o->eos >= 0) st = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)o->eos);
    if (!st) st = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    if (st) {
        err_set(err, st, "vocab import: building the GGUF metadata failed");
        goto done;
    }
    if (info) *info = (struct vocab_import_info){t.n, n_vocab, unused, n_merges};
done:
    if (merge_text)
        for (int64_t m = 0; m < n_merges; m++) free(merge_text[m]);
    free(merge_text);
    free(merges);
    if (text)
        for (int64_t i = 0; i < n_vocab; i++) free(text[i]);
    free(text);
    free(types);
    free(by_id);
    free(t.arena);
    free(t.e);
    free(t.slot);
    return st;
}

kvik_status vocab_import_tiktoken(const char *ranks_path, const char *out_path,
                                  const struct vocab_import_opts *o, struct vocab_import_info *info,
                                  struct kvik_err *err) {
    struct mapped_file mf = {0};
    kvik_status st = file_map(&mf, ranks_path, err);
    if (st) return st;
    struct gguf_writer *w = gguf_writer_new();
    if (!w) st = err_set(err, KVIK_ERR_NOMEM, "vocab import: out of memory");
    if (!st) st = vocab_import_tiktoken_mem(mf.data, mf.size, ranks_path, o, w, info, err);
    if (!st) st = gguf_writer_write_file(w, out_path, err);
    gguf_writer_free(w);
    file_unmap(&mf);
    return st;
}
