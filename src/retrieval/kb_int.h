/*
 * kb_int.h — the knowledge base's insides, shared by kb.c (opening, the
 * records and how they are applied, checkpoints), kb_ops.c (the calls
 * that change or read files and stores) and kb_search.c. Not part of
 * kb.h's interface.
 *
 * Every change is one record: the caller encodes it, appends it to the
 * journal and applies it with kb_apply, under the write lock; opening
 * applies the journal's records the same way. So the state in memory is
 * always what the journal replays to.
 *
 * Records (journal payloads), little-endian; str: u32 length and bytes;
 * attrs: u32 count, then per pair str key, u8 type (enum vec_type) and a
 * str, an f64 or a u8; tenant: 16 bytes:
 *
 *   R_HEAD       u32 version (1), u32 dim, str model id, str model hash
 *   R_FILE       tenant, str id, str filename, str purpose, u64 bytes, u64 created_at
 *   R_FILE_DEL   tenant, str id
 *   R_STORE      tenant, str id, str name, u64 created_at, u64 last_active_at,
 *                u32 expires_days, attrs metadata
 *   R_STORE_SET  tenant, str id, str name, attrs metadata, u32 expires_days
 *   R_STORE_DEL  tenant, str id
 *   R_SFILE      tenant, str store id, str file id, str filename, u64 created_at,
 *                u8 status, str error code, str error, u32 max_tokens, u32 overlap,
 *                attrs, u64 first chunk id, u64 n, then n times: str text,
 *                f32[dim] vector (chunk i has id first + i)
 *   R_SFILE_SET  tenant, str store id, str file id, attrs
 *   R_SFILE_DEL  tenant, str store id, str file id
 *   R_SNAPSHOT   (empty) the end of a checkpoint's records: a store whose
 *                graph was loaded from its file gets vectors added again
 *                only after it
 */
#ifndef KVIK_RETRIEVAL_KB_INT_H
#define KVIK_RETRIEVAL_KB_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "retrieval/bm25.h"
#include "retrieval/journal.h"
#include "retrieval/kb.h"

enum rec {
    R_HEAD = 1,
    R_FILE,
    R_FILE_DEL,
    R_STORE,
    R_STORE_SET,
    R_STORE_DEL,
    R_SFILE,
    R_SFILE_SET,
    R_SFILE_DEL,
    R_SNAPSHOT,
};

enum {
    KB_KEY_MAX = 64,     /* attribute and metadata keys */
    KB_VALUE_MAX = 512,  /* their string values */
    KB_SLOT_SHIFT = 24,  /* a chunk map value: sfile slot << 24 | chunk index */
};

struct kb_doc {
    char *text; /* owned, NUL-terminated */
    uint32_t len;
};

/* A file in a store. */
struct kb_sf {
    uint64_t seq;         /* the order it was added in (lists keep it) */
    char file_id[KB_ID];
    char filename[KB_NAME];
    int64_t created_at, usage_bytes;
    int status;
    char error_code[32], error[200];
    struct kb_chunking chunking;
    struct kb_attrs attrs;
    uint64_t first;       /* chunk ids first .. first + n_docs - 1 */
    struct kb_doc *docs;  /* [n_docs] */
    int64_t n_docs;
};

struct kb_st {
    uint64_t seq;
    struct kb_tenant tenant;
    char id[KB_ID];
    char name[KB_NAME];
    int64_t created_at;
    _Atomic int64_t last_active_at;
    int expires_days;
    struct kb_attrs metadata;
    struct kb_sf **sf;    /* [n_sf] slots, NULL where one was removed */
    int64_t n_sf, cap_sf;
    struct map64 chunk;   /* chunk id -> slot << KB_SLOT_SHIFT | index */
    uint64_t next;        /* the next chunk id */
    struct vec_store *vec;
    struct bm25 *bm;
    bool graph_loaded;    /* vec came from a checkpoint's graph file */
    int64_t usage_bytes, chunks;
};

struct kb_fl {
    uint64_t seq;
    struct kb_tenant tenant;
    struct kb_file info;
    char *mem;            /* the contents, in a base without a folder */
};

struct kb {
    struct kb_config cfg;
    char dir[3072];       /* "" without a folder */
    pthread_rwlock_t lock; /* searches read; changes write */
    struct kb_fl *files;  /* [n_files] */
    int64_t n_files, cap_files;
    struct map64 file_ix; /* hash of id -> index in files */
    struct kb_st **stores; /* [n_stores] */
    int64_t n_stores, cap_stores;
    struct map64 store_ix;
    struct journal *j;    /* NULL without a folder */
    int64_t j_base;       /* the journal's size when opened or last checkpointed */
    uint64_t gen;
    int lock_fd;
    uint64_t seq;         /* the next object's seq */
    /* while opening */
    bool replaying, past_snapshot, use_graphs, graph_mismatch, have_head;
};

/* Applies one record (see above) to kb's state; the caller holds the
 * write lock (or is opening). KVIK_ERR_FORMAT for a record that is
 * malformed or does not fit the state (a store that is not there). */
kvik_status kb_apply(struct kb *kb, const uint8_t *p, size_t n, struct kvik_err *err);
/* Appends w's record to the journal (a base with a folder) and applies
 * it; the caller holds the write lock. */
kvik_status kb_commit(struct kb *kb, const struct wbuf *w, struct kvik_err *err);

/* The file or store of id for tenant t (NULL: none, or another tenant's). */
struct kb_fl *kb_find_file(const struct kb *kb, const struct kb_tenant *t, const char *id);
struct kb_st *kb_find_store(const struct kb *kb, const struct kb_tenant *t, const char *id);
/* The store file of file_id in st, its slot in *slot (NULL: none). */
struct kb_sf *kb_find_sf(const struct kb_st *st, const char *file_id, int64_t *slot);
/* Whether st has expired at time now. */
bool kb_store_expired(const struct kb_st *st, int64_t now);

/* Record encoding. */
void kb_put_tenant(struct wbuf *w, const struct kb_tenant *t);
void kb_put_attrs(struct wbuf *w, const struct kb_attrs *a);

/* The order of n objects by their seq: order[i] is the index of the
 * i-th oldest (seq_of(objs, index) gives an object's seq); malloc'd, NULL
 * when out of memory. */
int64_t *kb_seq_order(const void *objs, int64_t n, uint64_t (*seq_of)(const void *objs, int64_t i));
uint64_t kb_file_seq(const void *files, int64_t i);   /* struct kb_fl [] */
uint64_t kb_store_seq(const void *stores, int64_t i); /* struct kb_st *[] */
uint64_t kb_sf_seq(const void *sf, int64_t i);        /* struct kb_sf *[], NULL slots last */

/* The path of a file's contents in the folder. */
void kb_content_path(const struct kb *kb, const char *id, char *buf, size_t len);

#endif /* KVIK_RETRIEVAL_KB_INT_H */
