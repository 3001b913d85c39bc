/*
 * journal.h — an append-only file of records, each on disk (fdatasync)
 * when journal_append returns, and the little-endian encoding the records
 * are written in (struct wbuf, struct rbuf).
 *
 * A record is
 *
 *   offset  size  field
 *   0       4     n: the payload's length (1 .. JOURNAL_MAX_RECORD)
 *   4       4     CRC-32C of the payload
 *   8       n     the payload
 *
 * and records follow each other with no gap. Opening reads them in order.
 * A record the file ends inside (a write a crash cut short) is cut off the
 * file, and appending goes on from there; a whole record whose checksum
 * is wrong, or a length out of range before the end, is damage: the open
 * fails with KVIK_ERR_FORMAT naming the offset, and nothing is changed.
 */
#ifndef KVIK_RETRIEVAL_JOURNAL_H
#define KVIK_RETRIEVAL_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define JOURNAL_MAX_RECORD ((size_t)1 << 30)

struct journal;

/* Called once per record in file order; a status other than KVIK_OK stops
 * the open with that status (err set by fn). */
typedef kvik_status (*journal_record_fn)(void *ctx, const uint8_t *p, size_t n, struct kvik_err *err);

/* Opens path (created when missing) for appending, after calling fn (may
 * be NULL) on every record in it. *out is NULL on failure. */
kvik_status journal_open(const char *path, journal_record_fn fn, void *ctx, struct journal **out,
                         struct kvik_err *err);
/* The same over n bytes in memory (no file): the fuzz target's entry.
 * Returns the bytes of whole records (a torn tail left out), or a
 * negative status. */
int64_t journal_scan(const uint8_t *p, size_t n, journal_record_fn fn, void *ctx, struct kvik_err *err);
/* Appends one record and waits until it is on disk. On failure the file
 * is cut back to where it was (a later append starts clean). */
kvik_status journal_append(struct journal *j, const void *p, size_t n, struct kvik_err *err);
/* journal_append in two halves: the write (on failure the file is cut
 * back), and the wait until every write so far is on disk. */
kvik_status journal_write(struct journal *j, const void *p, size_t n, struct kvik_err *err);
kvik_status journal_sync(struct journal *j, struct kvik_err *err);
int64_t journal_size(const struct journal *j); /* bytes */
void journal_close(struct journal *j);         /* NULL is fine */

/* ---- encoding ----------------------------------------------------------- */

/* A growing buffer; any failure (out of memory) sticks in fail. */
struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool fail;
};

void wbuf_bytes(struct wbuf *w, const void *p, size_t n);
static inline void wbuf_u8(struct wbuf *w, uint8_t v) { wbuf_bytes(w, &v, 1); }
static inline void wbuf_u32(struct wbuf *w, uint32_t v) { wbuf_bytes(w, &v, 4); }
static inline void wbuf_u64(struct wbuf *w, uint64_t v) { wbuf_bytes(w, &v, 8); }
static inline void wbuf_f64(struct wbuf *w, double v) { wbuf_bytes(w, &v, 8); }
/* u32 length, then the bytes. */
static inline void wbuf_str(struct wbuf *w, const char *s, size_t n) {
    wbuf_u32(w, (uint32_t)n);
    wbuf_bytes(w, s, n);
}
void wbuf_free(struct wbuf *w);

/* A cursor over bytes; reading past the end sets bad and yields zeros. */
struct rbuf {
    const uint8_t *p;
    size_t n, at;
    bool bad;
};

const uint8_t *rbuf_bytes(struct rbuf *r, size_t n); /* NULL (bad set) past the end */
uint8_t rbuf_u8(struct rbuf *r);
uint32_t rbuf_u32(struct rbuf *r);
uint64_t rbuf_u64(struct rbuf *r);
double rbuf_f64(struct rbuf *r);
/* A u32-length string: its bytes (not NUL-terminated) and length; bad when
 * longer than max or past the end. */
const char *rbuf_str(struct rbuf *r, size_t max, size_t *len);

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "journal records are written in the machine's byte order, which must be little-endian"
#endif

#endif /* KVIK_RETRIEVAL_JOURNAL_H */
