/*
 * file.c — one vector store in one file (vector.h: vec_save, vec_load).
 *
 * Layout, little-endian; every section starts at a multiple of 8 bytes:
 *
 *   offset  size    field
 *   0       8       magic "KVIKVEC\0"
 *   8       4       version: 1
 *   12      4       n: entries in the section table (1..32)
 *   16      8       the file's size in bytes
 *   24      4       CRC-32C of the section table
 *   28      4       CRC-32C of bytes 0..27
 *   32      24 * n  the section table, each entry: u32 tag, u32 CRC-32C of
 *                   the section's bytes, u64 offset, u64 size
 *
 * Sections, each at most once (a tag is four ASCII bytes read as a u32; a
 * reader skips tags it does not know). N is the number of nodes, live and
 * tombstones; M is the HNSW link count:
 *
 *   META  104 bytes: u32 dim, storage (0 F32, 1 F16, 2 int8), index (0
 *         flat, 1 HNSW), normalize (0 or 1), M, ef_construction, ef_search,
 *         metric (0: dot product); u64 seed, N, live nodes; i64 entry node
 *         (-1: none); i32 top layer; u32 flags (bit 0: rescore, int8 rows
 *         only; no other bit); u64[4] the layer draws' generator state
 *   MODL  the embedding model: u32 length and the bytes of its id, then u32
 *         length and the bytes of its hash (hex; may be empty)
 *   ROWS  N rows of dim values: f32, f16 or int8
 *   SCAL  N f32 scales (int8 storage only: v ~ scale * q)
 *   EXAC  N rows of dim f32 (rescore only): the vectors in full
 *   IDS_  N u64 external ids
 *   DEAD  N u8: 1 for a tombstone, else 0
 *   LEVL  N u8: each node's top layer (0..16, none above the store's)
 *   LNK0  N * (1 + 2M) u32: layer 0's links of each node, the count first
 *   LNKU  for each node with a top layer L > 0: L * (1 + M) u32, layers 1..L
 *   ATTR  for each node: u32 count, then per attribute u32 key length, the
 *         key (no NUL), u8 type (0 string, 1 number, 2 bool) and a string's
 *         u32 length and bytes, a number's f64 or a bool's u8
 *
 * The reader checks every checksum, size and offset before it reads what
 * they cover (the padding between sections must be zero), then that the
 * parts agree: section sizes that match N, sections inside the file and
 * apart, finite vectors, link counts within the layer's bound, every link
 * to a node that has that layer, an entry on the top layer, one live node
 * per external id, attributes that fill their section exactly.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vector/store_int.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the vector store file is written in the machine's byte order, which must be little-endian"
#endif

#define TAG(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)

enum {
    HEAD = 32,
    ENTRY = 24,
    MAX_SECTIONS = 32,
    META_SIZE = 104,
    VERSION = 1,
};

static const char MAGIC[8] = "KVIKVEC";

enum sect { S_META, S_MODL, S_ROWS, S_SCAL, S_IDS, S_DEAD, S_LEVL, S_LNK0, S_LNKU, S_ATTR, S_EXAC, N_SECT };

static const uint32_t TAGS[N_SECT] = {
    TAG('M', 'E', 'T', 'A'), TAG('M', 'O', 'D', 'L'), TAG('R', 'O', 'W', 'S'), TAG('S', 'C', 'A', 'L'),
    TAG('I', 'D', 'S', '_'), TAG('D', 'E', 'A', 'D'), TAG('L', 'E', 'V', 'L'), TAG('L', 'N', 'K', '0'),
    TAG('L', 'N', 'K', 'U'), TAG('A', 'T', 'T', 'R'), TAG('E', 'X', 'A', 'C'),
};
static const char *const NAMES[N_SECT] = {"META", "MODL", "ROWS", "SCAL", "IDS_", "DEAD",
                                          "LEVL", "LNK0", "LNKU", "ATTR", "EXAC"};

/* Whether a store of this configuration has section k. */
static bool has_section(int k, bool i8, bool rescore) {
    return (k != S_SCAL || i8) && (k != S_EXAC || rescore);
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ---- writing ------------------------------------------------------------ */

struct writer {
    FILE *f;
    uint64_t pos;
    uint32_t crc;   /* of the open section */
    bool fail;
    uint64_t off[N_SECT], size[N_SECT];
    uint32_t sum[N_SECT];
};

static void w_bytes(struct writer *w, const void *p, size_t n) {
    if (w->fail || !n) return;
    if (fwrite(p, 1, n, w->f) != n) w->fail = true;
    w->crc = crc32c_update(w->crc, p, n);
    w->pos += n;
}

static void w_u32(struct writer *w, uint32_t v) { w_bytes(w, &v, 4); }

static void w_begin(struct writer *w, int sect) {
    static const uint8_t zero[8];
    w_bytes(w, zero, (size_t)((8 - w->pos % 8) % 8));
    w->off[sect] = w->pos;
    w->crc = 0;
}

static void w_end(struct writer *w, int sect) {
    w->size[sect] = w->pos - w->off[sect];
    w->sum[sect] = w->crc;
}

static void w_string(struct writer *w, const char *s, size_t n) {
    w_u32(w, (uint32_t)n);
    w_bytes(w, s, n);
}

/* Every section of s, read-locked by the caller. */
static void write_sections(struct writer *w, const struct vec_store *s, const struct vec_model *m, bool i8) {
    uint8_t meta[META_SIZE] = {0};
    const struct vec_config *c = &s->cfg;
    uint32_t words[8] = {(uint32_t)c->dim, (uint32_t)c->storage, (uint32_t)c->index, c->normalize,
                         (uint32_t)c->M, (uint32_t)c->ef_construction, (uint32_t)c->ef_search, 0};
    for (int i = 0; i < 8; i++) put32(meta + 4 * i, words[i]);
    put64(meta + 32, c->seed);
    put64(meta + 40, (uint64_t)s->n);
    put64(meta + 48, (uint64_t)s->live);
    put64(meta + 56, (uint64_t)s->entry);
    put32(meta + 64, (uint32_t)s->max_level);
    put32(meta + 68, c->rescore ? 1u : 0u);
    for (int i = 0; i < 4; i++) put64(meta + 72 + 8 * i, s->rng.s[i]);
    w_begin(w, S_META);
    w_bytes(w, meta, sizeof meta);
    w_end(w, S_META);

    w_begin(w, S_MODL);
    w_string(w, m ? m->id : "", m ? strnlen(m->id, sizeof m->id) : 0);
    w_string(w, m ? m->hash : "", m ? strnlen(m->hash, sizeof m->hash) : 0);
    w_end(w, S_MODL);

    size_t n = (size_t)s->n;
    w_begin(w, S_ROWS);
    w_bytes(w, s->rows, n * s->row_bytes);
    w_end(w, S_ROWS);
    if (i8) {
        w_begin(w, S_SCAL);
        w_bytes(w, s->scales, n * sizeof *s->scales);
        w_end(w, S_SCAL);
    }
    w_begin(w, S_IDS);
    w_bytes(w, s->ext, n * sizeof *s->ext);
    w_end(w, S_IDS);
    w_begin(w, S_DEAD);
    for (size_t i = 0; i < n; i++) {
        uint8_t d = s->dead[i];
        w_bytes(w, &d, 1);
    }
    w_end(w, S_DEAD);
    w_begin(w, S_LEVL);
    w_bytes(w, s->level, n);
    w_end(w, S_LEVL);
    w_begin(w, S_LNK0);
    uint32_t l0[1 + 2 * 256];
    size_t width = (size_t)(1 + 2 * c->M);
    for (size_t i = 0; i < n; i++) { /* the slots past the count as zeros */
        const uint32_t *l = vec_links(s, (int64_t)i, 0);
        memset(l0, 0, width * sizeof *l0);
        memcpy(l0, l, (1 + (size_t)(l[0] < width ? l[0] : width - 1)) * sizeof *l0);
        w_bytes(w, l0, width * sizeof *l0);
    }
    w_end(w, S_LNK0);
    w_begin(w, S_LNKU);
    for (size_t i = 0; i < n; i++)
        if (s->level[i] > 0) w_bytes(w, s->upper[i], (size_t)s->level[i] * (size_t)(1 + c->M) * sizeof(uint32_t));
    w_end(w, S_LNKU);

    w_begin(w, S_ATTR);
    for (size_t i = 0; i < n; i++) {
        const struct node_attrs *a = &s->attrs[i];
        int k = s->dead[i] ? 0 : a->n;
        w_u32(w, (uint32_t)k);
        for (int j = 0; j < k; j++) {
            const struct vec_attr *x = &a->a[j];
            w_string(w, x->key, strlen(x->key));
            uint8_t type = (uint8_t)x->v.type;
            w_bytes(w, &type, 1);
            if (x->v.type == VEC_STR) {
                w_string(w, x->v.str, x->v.len);
            } else if (x->v.type == VEC_NUM) {
                w_bytes(w, &x->v.num, 8);
            } else {
                uint8_t b = x->v.b;
                w_bytes(w, &b, 1);
            }
        }
    }
    w_end(w, S_ATTR);
    if (s->exact) {
        w_begin(w, S_EXAC);
        w_bytes(w, s->exact, n * (size_t)c->dim * sizeof *s->exact);
        w_end(w, S_EXAC);
    }
}

/* Syncs the directory holding path, so a rename into it is durable. */
static void sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path) ? (int)(slash - path) : 1, path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

kvik_status vec_save(struct vec_store *s, const char *path, const struct vec_model *m, struct kvik_err *err) {
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 5);
    if (!tmp) return err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        kvik_status st = err_set(err, KVIK_ERR_IO, "vector store: cannot write %s: %s", tmp, strerror(errno));
        free(tmp);
        return st;
    }
    bool i8 = s->cfg.storage == VEC_I8, rs = s->cfg.rescore;
    int n_sect = 0;
    for (int k = 0; k < N_SECT; k++) n_sect += has_section(k, i8, rs);
    size_t head = HEAD + (size_t)n_sect * ENTRY;
    uint8_t hdr[HEAD + MAX_SECTIONS * ENTRY] = {0};
    struct writer w = {.f = f};
    w_bytes(&w, hdr, head);
    pthread_rwlock_rdlock(&s->lock);
    write_sections(&w, s, m, i8);
    pthread_rwlock_unlock(&s->lock);

    memcpy(hdr, MAGIC, 8);
    put32(hdr + 8, VERSION);
    put32(hdr + 12, (uint32_t)n_sect);
    put64(hdr + 16, w.pos);
    uint8_t *e = hdr + HEAD;
    for (int i = 0; i < N_SECT; i++) {
        if (!has_section(i, i8, rs)) continue;
        put32(e, TAGS[i]);
        put32(e + 4, w.sum[i]);
        put64(e + 8, w.off[i]);
        put64(e + 16, w.size[i]);
        e += ENTRY;
    }
    put32(hdr + 24, crc32c(hdr + HEAD, (size_t)n_sect * ENTRY));
    put32(hdr + 28, crc32c(hdr, 28));
    bool ok = !w.fail && fseek(f, 0, SEEK_SET) == 0 && fwrite(hdr, 1, head, f) == head && fflush(f) == 0 &&
              fsync(fileno(f)) == 0;
    int saved = errno;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) != 0) {
        saved = errno;
        ok = false;
    }
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return err_set(err, KVIK_ERR_IO, "vector store: cannot write %s: %s", path, strerror(saved ? saved : EIO));
    }
    free(tmp);
    sync_dir(path);
    return KVIK_OK;
}

/* ---- reading ------------------------------------------------------------ */

struct sect_ref {
    const uint8_t *p;
    uint64_t size;
    bool have;
};

/* A cursor over one section. */
struct cur {
    const uint8_t *p;
    uint64_t n, at;
    bool bad;
};

static const uint8_t *take(struct cur *c, uint64_t k) {
    if (c->bad || k > c->n - c->at) {
        c->bad = true;
        return NULL;
    }
    const uint8_t *p = c->p + c->at;
    c->at += k;
    return p;
}

static uint32_t take32(struct cur *c) {
    const uint8_t *p = take(c, 4);
    return p ? get32(p) : 0;
}

static int cmp_u64_pair(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Reads a u32-length string into out[cap] (NUL-terminated); false when it
 * runs past the section, does not fit or holds a NUL. */
static bool take_string(struct cur *c, char *out, size_t cap) {
    uint32_t len = take32(c);
    const uint8_t *p = take(c, len);
    if (!p || len >= cap || memchr(p, 0, len)) return false;
    memcpy(out, p, len);
    out[len] = 0;
    return true;
}

/* The header and section table: the sections found, or an error. */
static kvik_status read_table(const uint8_t *p, size_t n, const char *name, struct sect_ref *sect,
                              struct kvik_err *err) {
    if (n < HEAD || memcmp(p, MAGIC, 8))
        return err_set(err, KVIK_ERR_FORMAT, "%s: not a kvik vector store file (no KVIKVEC magic)", name);
    if (crc32c(p, 28) != get32(p + 28))
        return err_set(err, KVIK_ERR_FORMAT, "%s: the header's checksum does not match", name);
    uint32_t version = get32(p + 8), n_sect = get32(p + 12);
    if (version != VERSION)
        return err_set(err, KVIK_ERR_UNSUPPORTED, "%s: file version %u; this kvik reads version %d", name, version,
                       VERSION);
    if (get64(p + 16) != n)
        return err_set(err, KVIK_ERR_FORMAT, "%s: the header says %llu bytes, the file has %zu (truncated?)", name,
                       (unsigned long long)get64(p + 16), n);
    if (n_sect < 1 || n_sect > MAX_SECTIONS || HEAD + (size_t)n_sect * ENTRY > n)
        return err_set(err, KVIK_ERR_FORMAT, "%s: a section table of %u entries does not fit", name, n_sect);
    const uint8_t *t = p + HEAD;
    size_t table_end = HEAD + (size_t)n_sect * ENTRY;
    if (crc32c(t, (size_t)n_sect * ENTRY) != get32(p + 24))
        return err_set(err, KVIK_ERR_FORMAT, "%s: the section table's checksum does not match", name);
    uint64_t spans[MAX_SECTIONS][2];
    for (uint32_t i = 0; i < n_sect; i++) {
        const uint8_t *e = t + (size_t)i * ENTRY;
        uint32_t tag = get32(e), sum = get32(e + 4);
        uint64_t off = get64(e + 8), size = get64(e + 16);
        if (off % 8 || off < table_end || off > n || size > n - off)
            return err_set(err, KVIK_ERR_FORMAT, "%s: section %u lies outside the file", name, i);
        spans[i][0] = off;
        spans[i][1] = size;
        if (crc32c(p + off, (size_t)size) != sum)
            return err_set(err, KVIK_ERR_FORMAT, "%s: section %u's checksum does not match (damaged)", name, i);
        for (int k = 0; k < N_SECT; k++) {
            if (TAGS[k] != tag) continue;
            if (sect[k].have) return err_set(err, KVIK_ERR_FORMAT, "%s: two %s sections", name, NAMES[k]);
            sect[k] = (struct sect_ref){p + off, size, true};
        }
    }
    qsort(spans, n_sect, sizeof spans[0], cmp_u64_pair);
    uint64_t at = table_end; /* the end of what is covered so far; the gaps are zero padding */
    for (uint32_t i = 0; i <= n_sect; i++) {
        uint64_t next = i < n_sect ? spans[i][0] : n;
        if (at > next) return err_set(err, KVIK_ERR_FORMAT, "%s: two sections overlap", name);
        for (uint64_t k = at; k < next; k++)
            if (p[k]) return err_set(err, KVIK_ERR_FORMAT, "%s: stray bytes between sections", name);
        if (i < n_sect) at = spans[i][0] + spans[i][1];
    }
    return KVIK_OK;
}

/* The configuration and counts of META. */
struct meta {
    struct vec_config cfg;
    uint64_t n, live;
    int64_t entry;
    int32_t top;
    uint64_t rng[4];
};

static kvik_status read_meta(const struct sect_ref *m, const char *name, struct meta *out, struct kvik_err *err) {
    if (m->size != META_SIZE)
        return err_set(err, KVIK_ERR_FORMAT, "%s: META is %llu bytes, not %d", name, (unsigned long long)m->size,
                       META_SIZE);
    const uint8_t *p = m->p;
    uint32_t w[8];
    for (int i = 0; i < 8; i++) w[i] = get32(p + 4 * i);
    struct vec_config *c = &out->cfg;
    *c = (struct vec_config){.dim = (int)w[0], .storage = (int)w[1], .index = (int)w[2], .normalize = w[3] == 1,
                             .M = (int)w[4], .ef_construction = (int)w[5], .ef_search = (int)w[6],
                             .seed = get64(p + 32)};
    if (w[0] < 1 || w[0] > 65536 || w[1] > VEC_I8 || w[2] > VEC_HNSW || w[3] > 1 || w[4] < 2 || w[4] > 256 ||
        w[5] < 1 || w[5] > 1000000 || w[6] < 1 || w[6] > 1000000)
        return err_set(err, KVIK_ERR_FORMAT, "%s: META holds an impossible configuration", name);
    if (w[7] != 0) return err_set(err, KVIK_ERR_UNSUPPORTED, "%s: metric %u; this kvik ranks by dot product only", name, w[7]);
    out->n = get64(p + 40);
    out->live = get64(p + 48);
    out->entry = (int64_t)get64(p + 56);
    out->top = (int32_t)get32(p + 64);
    for (int i = 0; i < 4; i++) out->rng[i] = get64(p + 72 + 8 * i);
    uint32_t flags = get32(p + 68);
    c->rescore = flags & 1;
    if (out->n >= UINT32_MAX || out->live > out->n || out->entry < -1 || out->entry >= (int64_t)out->n ||
        out->top < 0 || out->top > VEC_MAX_LEVEL || flags > 1 || (c->rescore && c->storage != VEC_I8))
        return err_set(err, KVIK_ERR_FORMAT, "%s: META's counts do not agree", name);
    return KVIK_OK;
}

static kvik_status need_size(const struct sect_ref *s, int k, uint64_t want, const char *name,
                             struct kvik_err *err) {
    if (s->size == want) return KVIK_OK;
    return err_set(err, KVIK_ERR_FORMAT, "%s: %s is %llu bytes; META's node count needs %llu", name, NAMES[k],
                   (unsigned long long)s->size, (unsigned long long)want);
}

/* Whether every stored value is finite (int8 rows always are). */
static bool rows_finite(const struct sect_ref *rows, const struct sect_ref *scal, int storage) {
    if (storage == VEC_F32) {
        for (uint64_t i = 0; i < rows->size / 4; i++) {
            float v;
            memcpy(&v, rows->p + 4 * i, 4);
            if (!isfinite(v)) return false;
        }
    } else if (storage == VEC_F16) {
        for (uint64_t i = 0; i < rows->size / 2; i++) {
            uint16_t h;
            memcpy(&h, rows->p + 2 * i, 2);
            if ((h & 0x7C00) == 0x7C00) return false;
        }
    } else {
        for (uint64_t i = 0; i < scal->size / 4; i++) {
            float v;
            memcpy(&v, scal->p + 4 * i, 4);
            if (!isfinite(v) || v < 0) return false;
        }
    }
    return true;
}

/* Checks the levels and links; fills the total of upper layers. */
static kvik_status check_graph(const struct sect_ref *sect, const struct meta *mt, const char *name,
                               uint64_t *upper_words, struct kvik_err *err) {
    const uint8_t *lv = sect[S_LEVL].p;
    int M = mt->cfg.M;
    uint64_t total = 0;
    for (uint64_t i = 0; i < mt->n; i++) {
        if (lv[i] > mt->top) return err_set(err, KVIK_ERR_FORMAT, "%s: node %llu is above the top layer", name,
                                            (unsigned long long)i);
        total += lv[i];
    }
    if (mt->entry >= 0 && lv[mt->entry] != mt->top)
        return err_set(err, KVIK_ERR_FORMAT, "%s: the entry node is not on the top layer", name);
    if (mt->entry < 0 && mt->n && mt->cfg.index == VEC_HNSW && mt->live)
        return err_set(err, KVIK_ERR_FORMAT, "%s: a graph of live nodes without an entry", name);
    *upper_words = total * (uint64_t)(1 + M);
    if (sect[S_LNKU].size != *upper_words * 4)
        return err_set(err, KVIK_ERR_FORMAT, "%s: LNKU is %llu bytes; the levels need %llu", name,
                       (unsigned long long)sect[S_LNKU].size, (unsigned long long)(*upper_words * 4));
    const uint8_t *l0 = sect[S_LNK0].p, *lu = sect[S_LNKU].p;
    for (uint64_t i = 0; i < mt->n; i++) {
        for (int layer = 0; layer <= lv[i]; layer++) {
            int width = layer ? 1 + M : 1 + 2 * M;
            const uint8_t *l = layer ? lu : l0 + i * (uint64_t)(1 + 2 * M) * 4;
            uint32_t count = get32(l);
            if (count > (uint32_t)(width - 1))
                return err_set(err, KVIK_ERR_FORMAT, "%s: node %llu has %u links on layer %d (at most %d)", name,
                               (unsigned long long)i, count, layer, width - 1);
            for (uint32_t k = 1; k <= count; k++) {
                uint32_t to = get32(l + 4 * k);
                if (to >= mt->n || lv[to] < layer)
                    return err_set(err, KVIK_ERR_FORMAT, "%s: node %llu links to a node %u that is not on layer %d",
                                   name, (unsigned long long)i, to, layer);
            }
            if (layer) lu += (size_t)width * 4;
        }
    }
    return KVIK_OK;
}

/* One attribute into a (owned strings); false on a malformed one. */
static bool read_attr(struct cur *c, struct vec_attr *a) {
    uint32_t klen = take32(c);
    const uint8_t *k = take(c, klen);
    const uint8_t *type = take(c, 1);
    if (!k || !klen || !type || memchr(k, 0, klen) || *type > VEC_BOOL) return false;
    char *key = malloc((size_t)klen + 1);
    if (!key) return false;
    memcpy(key, k, klen);
    key[klen] = 0;
    a->key = key;
    a->v.type = *type;
    if (*type == VEC_STR) {
        uint32_t len = take32(c);
        const uint8_t *s = take(c, len);
        char *str = s ? malloc((size_t)len + 1) : NULL;
        if (!str) return false;
        memcpy(str, s, len);
        str[len] = 0;
        a->v.str = str;
        a->v.len = len;
    } else if (*type == VEC_NUM) {
        const uint8_t *x = take(c, 8);
        if (!x) return false;
        memcpy(&a->v.num, x, 8);
    } else {
        const uint8_t *b = take(c, 1);
        if (!b || *b > 1) return false;
        a->v.b = *b;
    }
    return true;
}

static kvik_status read_attrs(struct vec_store *s, const struct sect_ref *sect, const char *name,
                              struct kvik_err *err) {
    struct cur c = {sect->p, sect->size, 0, false};
    for (int64_t i = 0; i < s->n; i++) {
        uint32_t k = take32(&c);
        /* each attribute takes at least 10 bytes: a bound before allocating */
        if (c.bad || k > (c.n - c.at) / 10)
            return err_set(err, KVIK_ERR_FORMAT, "%s: ATTR runs past its end at node %lld", name, (long long)i);
        if (!k) continue;
        struct node_attrs *a = &s->attrs[i];
        if (!(a->a = calloc(k, sizeof *a->a))) return err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
        for (uint32_t j = 0; j < k; j++) {
            bool ok = read_attr(&c, &a->a[j]);
            if (a->a[j].key) a->n = (int)j + 1; /* owned from here: freed with the store */
            if (!ok) return err_set(err, KVIK_ERR_FORMAT, "%s: node %lld's attribute %u is malformed", name,
                                    (long long)i, j);
        }
    }
    if (c.at != c.n) return err_set(err, KVIK_ERR_FORMAT, "%s: ATTR has bytes past its last node", name);
    return KVIK_OK;
}

/* The store the checked sections describe. */
static struct vec_store *build(const struct sect_ref *sect, const struct meta *mt, const char *name,
                               struct kvik_err *err) {
    struct vec_store *s = vec_store_new(&mt->cfg, err);
    if (!s) return NULL;
    size_t n = (size_t)mt->n;
    if (!vec_grow_nodes(s, (int64_t)n)) {
        vec_store_free(s);
        err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
        return NULL;
    }
    s->n = (int64_t)n;
    if (n > 0) { /* an empty store's arrays may be NULL */
        memset(s->attrs, 0, n * sizeof *s->attrs);
        memset(s->upper, 0, n * sizeof *s->upper); /* every node's owned parts are NULL: freeing is safe */
        memcpy(s->rows, sect[S_ROWS].p, n * s->row_bytes);
        if (mt->cfg.storage == VEC_I8) {
            memcpy(s->scales, sect[S_SCAL].p, n * sizeof *s->scales);
            for (size_t i = 0; i < n; i++)
                s->sums[i] = vec_row_sum((const int8_t *)s->rows + i * s->row_bytes, mt->cfg.dim);
        }
        if (mt->cfg.rescore) memcpy(s->exact, sect[S_EXAC].p, n * (size_t)mt->cfg.dim * sizeof *s->exact);
        memcpy(s->ext, sect[S_IDS].p, n * sizeof *s->ext);
        memcpy(s->level, sect[S_LEVL].p, n);
        memcpy(s->links0, sect[S_LNK0].p, n * (size_t)(1 + 2 * mt->cfg.M) * sizeof *s->links0);
    }
    kvik_status st = KVIK_OK;
    const uint8_t *lu = sect[S_LNKU].p;
    for (size_t i = 0; !st && i < n; i++) {
        s->dead[i] = sect[S_DEAD].p[i];
        if (s->level[i] <= 0) continue;
        size_t words = (size_t)s->level[i] * (size_t)(1 + mt->cfg.M);
        if (!(s->upper[i] = malloc(words * sizeof(uint32_t)))) {
            st = err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
            break;
        }
        memcpy(s->upper[i], lu, words * sizeof(uint32_t));
        lu += words * sizeof(uint32_t);
    }
    if (!st) st = read_attrs(s, &sect[S_ATTR], name, err);
    for (size_t i = 0; !st && i < n; i++) {
        if (s->dead[i]) continue;
        if (map64_get(&s->map, s->ext[i]) >= 0)
            st = err_set(err, KVIK_ERR_FORMAT, "%s: id %llu is live twice", name, (unsigned long long)s->ext[i]);
        else if (!map64_put(&s->map, s->ext[i], (int64_t)i))
            st = err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
        else
            s->live++;
    }
    if (st) {
        vec_store_free(s);
        return NULL;
    }
    s->entry = mt->entry;
    s->max_level = mt->top;
    for (int i = 0; i < 4; i++) s->rng.s[i] = mt->rng[i];
    return s;
}

static struct vec_store *load(const uint8_t *p, size_t n, const char *name, const struct vec_model *expect,
                              struct vec_model *got, struct kvik_err *err) {
    struct sect_ref sect[N_SECT] = {0};
    struct meta mt;
    if (read_table(p, n, name, sect, err)) return NULL;
    for (int k = 0; k < N_SECT; k++)
        if (!sect[k].have && k != S_SCAL && k != S_EXAC) {
            err_set(err, KVIK_ERR_FORMAT, "%s: no %s section", name, NAMES[k]);
            return NULL;
        }
    if (read_meta(&sect[S_META], name, &mt, err)) return NULL;
    if (sect[S_EXAC].have != mt.cfg.rescore) {
        err_set(err, KVIK_ERR_FORMAT, "%s: %s", name,
                mt.cfg.rescore ? "no EXAC section for a store that rescores" : "EXAC for a store that does not rescore");
        return NULL;
    }

    struct vec_model m = {{0}, {0}};
    struct cur c = {sect[S_MODL].p, sect[S_MODL].size, 0, false};
    if (!take_string(&c, m.id, sizeof m.id) || !take_string(&c, m.hash, sizeof m.hash) || c.at != c.n) {
        err_set(err, KVIK_ERR_FORMAT, "%s: MODL is malformed", name);
        return NULL;
    }
    if (got) *got = m;
    if (expect && (strcmp(expect->id, m.id) || (expect->hash[0] && m.hash[0] && strcmp(expect->hash, m.hash)))) {
        bool same_id = !strcmp(expect->id, m.id);
        err_set(err, KVIK_ERR_INVALID_ARG,
                "%s holds vectors of the embedding model '%s'%s%.12s, not of '%s'%s%.12s: serve that model, or "
                "add the documents again", name, m.id, same_id ? " sha256 " : "", same_id ? m.hash : "",
                expect->id, same_id ? " sha256 " : "", same_id ? expect->hash : "");
        return NULL;
    }

    uint64_t N = mt.n;
    size_t row_bytes = (size_t)mt.cfg.dim * (mt.cfg.storage == VEC_F32 ? 4 : mt.cfg.storage == VEC_F16 ? 2 : 1);
    bool i8 = mt.cfg.storage == VEC_I8;
    struct sect_ref empty = {NULL, 0, true};
    if (!i8 && sect[S_SCAL].have && sect[S_SCAL].size) {
        err_set(err, KVIK_ERR_FORMAT, "%s: scales for a store that has none", name);
        return NULL;
    }
    if (i8 && !sect[S_SCAL].have) {
        err_set(err, KVIK_ERR_FORMAT, "%s: no SCAL section for int8 rows", name);
        return NULL;
    }
    if (need_size(&sect[S_ROWS], S_ROWS, N * row_bytes, name, err) ||
        need_size(i8 ? &sect[S_SCAL] : &empty, S_SCAL, i8 ? N * 4 : 0, name, err) ||
        need_size(&sect[S_IDS], S_IDS, N * 8, name, err) || need_size(&sect[S_DEAD], S_DEAD, N, name, err) ||
        need_size(&sect[S_LEVL], S_LEVL, N, name, err) ||
        need_size(&sect[S_LNK0], S_LNK0, N * (uint64_t)(1 + 2 * mt.cfg.M) * 4, name, err) ||
        (mt.cfg.rescore && need_size(&sect[S_EXAC], S_EXAC, N * (uint64_t)mt.cfg.dim * 4, name, err)))
        return NULL;
    uint64_t live = 0;
    for (uint64_t i = 0; i < N; i++) {
        if (sect[S_DEAD].p[i] > 1) {
            err_set(err, KVIK_ERR_FORMAT, "%s: DEAD holds a byte other than 0 or 1", name);
            return NULL;
        }
        live += !sect[S_DEAD].p[i];
    }
    if (live != mt.live) {
        err_set(err, KVIK_ERR_FORMAT, "%s: META counts %llu live nodes, DEAD %llu", name,
                (unsigned long long)mt.live, (unsigned long long)live);
        return NULL;
    }
    if (!rows_finite(&sect[S_ROWS], &sect[S_SCAL], mt.cfg.storage) ||
        (mt.cfg.rescore && !rows_finite(&sect[S_EXAC], NULL, VEC_F32))) {
        err_set(err, KVIK_ERR_FORMAT, "%s: a stored vector is not finite", name);
        return NULL;
    }
    uint64_t upper_words;
    if (check_graph(sect, &mt, name, &upper_words, err)) return NULL;
    return build(sect, &mt, name, err);
}

struct vec_store *vec_load_memory(const void *p, size_t n, const struct vec_model *expect, struct vec_model *got,
                                  struct kvik_err *err) {
    return load(p, n, "vector store", expect, got, err);
}

struct vec_store *vec_load(const char *path, const struct vec_model *expect, struct vec_model *got,
                           struct kvik_err *err) {
    struct mapped_file mf;
    if (file_map(&mf, path, err)) return NULL;
    struct vec_store *s = load(mf.data, mf.size, path, expect, got, err);
    file_unmap(&mf);
    return s;
}
