/*
 * journal.c — the record file of journal.h: scanning with torn-tail
 * recovery, appends made durable by fdatasync, and the byte encoding.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "retrieval/journal.h"

struct journal {
    int fd;
    int64_t size;
    char path[4096];
};

enum { HEAD = 8 };

int64_t journal_scan(const uint8_t *p, size_t n, journal_record_fn fn, void *ctx, struct kvik_err *err) {
    size_t at = 0;
    while (n - at >= HEAD) {
        uint32_t len, sum;
        memcpy(&len, p + at, 4);
        memcpy(&sum, p + at + 4, 4);
        if (len == 0 || len > JOURNAL_MAX_RECORD)
            return err_set(err, KVIK_ERR_FORMAT, "journal: a record of %u bytes at offset %zu", len, at);
        if (n - at - HEAD < len) break; /* cut short: the tail of an interrupted write */
        if (crc32c(p + at + HEAD, len) != sum)
            return err_set(err, KVIK_ERR_FORMAT, "journal: the record at offset %zu fails its checksum", at);
        if (fn) {
            kvik_status st = fn(ctx, p + at + HEAD, len, err);
            if (st) return st;
        }
        at += HEAD + (size_t)len;
    }
    return (int64_t)at;
}

kvik_status journal_open(const char *path, journal_record_fn fn, void *ctx, struct journal **out,
                         struct kvik_err *err) {
    *out = NULL;
    struct journal *j = calloc(1, sizeof *j);
    if (!j) return err_set(err, KVIK_ERR_NOMEM, "journal: out of memory");
    snprintf(j->path, sizeof j->path, "%s", path);
    j->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (j->fd < 0) {
        kvik_status st = err_set(err, KVIK_ERR_IO, "journal: cannot open %s: %s", path, strerror(errno));
        free(j);
        return st;
    }
    kvik_status st = KVIK_OK;
    struct stat sb;
    int64_t good = 0;
    if (fstat(j->fd, &sb) != 0) {
        st = err_set(err, KVIK_ERR_IO, "journal: cannot stat %s: %s", path, strerror(errno));
    } else if (sb.st_size > 0) {
        struct mapped_file mf;
        st = file_map(&mf, path, err);
        if (!st) {
            good = journal_scan(mf.data, mf.size, fn, ctx, err);
            file_unmap(&mf);
            if (good < 0) st = (kvik_status)good;
        }
        if (!st && good < (int64_t)sb.st_size) {
            log_warn("journal: %s ends in a record cut short at byte %lld; it is dropped", path, (long long)good);
            if (ftruncate(j->fd, good) != 0 || fdatasync(j->fd) != 0)
                st = err_set(err, KVIK_ERR_IO, "journal: cannot cut %s back: %s", path, strerror(errno));
        }
    }
    if (st) {
        close(j->fd);
        free(j);
        return st;
    }
    j->size = good;
    *out = j;
    return KVIK_OK;
}

kvik_status journal_write(struct journal *j, const void *p, size_t n, struct kvik_err *err) {
    if (n == 0 || n > JOURNAL_MAX_RECORD)
        return err_set(err, KVIK_ERR_INVALID_ARG, "journal: a record of %zu bytes", n);
    uint8_t head[HEAD];
    uint32_t len = (uint32_t)n, sum = crc32c(p, n);
    memcpy(head, &len, 4);
    memcpy(head + 4, &sum, 4);
    const uint8_t *parts[2] = {head, p};
    size_t sizes[2] = {HEAD, n};
    off_t at = (off_t)j->size;
    for (int i = 0; i < 2; i++) {
        size_t done = 0;
        while (done < sizes[i]) {
            ssize_t w = pwrite(j->fd, parts[i] + done, sizes[i] - done, at);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                int e = w < 0 ? errno : ENOSPC;
                if (ftruncate(j->fd, (off_t)j->size) != 0) /* else the next open drops the torn record */
                    log_warn("journal: cannot cut %s back to %lld bytes", j->path, (long long)j->size);
                return err_set(err, KVIK_ERR_IO, "journal: cannot write %s: %s", j->path, strerror(e));
            }
            done += (size_t)w;
            at += w;
        }
    }
    j->size = (int64_t)at;
    return KVIK_OK;
}

kvik_status journal_sync(struct journal *j, struct kvik_err *err) {
    if (fdatasync(j->fd) != 0)
        return err_set(err, KVIK_ERR_IO, "journal: cannot sync %s: %s", j->path, strerror(errno));
    return KVIK_OK;
}

kvik_status journal_append(struct journal *j, const void *p, size_t n, struct kvik_err *err) {
    int64_t before = j->size;
    kvik_status s = journal_write(j, p, n, err);
    if (!s && (s = journal_sync(j, err))) {
        /* not known to be on disk: taken back, so the caller may report failure */
        if (ftruncate(j->fd, (off_t)before) == 0) j->size = before;
    }
    return s;
}

int64_t journal_size(const struct journal *j) { return j->size; }

void journal_close(struct journal *j) {
    if (!j) return;
    close(j->fd);
    free(j);
}

/* ---- encoding ----------------------------------------------------------- */

void wbuf_bytes(struct wbuf *w, const void *p, size_t n) {
    if (w->fail || !n) return;
    if (w->cap - w->n < n) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap - w->n < n) {
            if (cap > SIZE_MAX / 2) {
                w->fail = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *q = realloc(w->p, cap);
        if (!q) {
            w->fail = true;
            return;
        }
        w->p = q;
        w->cap = cap;
    }
    memcpy(w->p + w->n, p, n);
    w->n += n;
}

void wbuf_free(struct wbuf *w) {
    free(w->p);
    *w = (struct wbuf){0};
}

const uint8_t *rbuf_bytes(struct rbuf *r, size_t n) {
    if (r->bad || r->n - r->at < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->at;
    r->at += n;
    return p;
}

uint8_t rbuf_u8(struct rbuf *r) {
    const uint8_t *p = rbuf_bytes(r, 1);
    return p ? *p : 0;
}

uint32_t rbuf_u32(struct rbuf *r) {
    uint32_t v = 0;
    const uint8_t *p = rbuf_bytes(r, 4);
    if (p) memcpy(&v, p, 4);
    return v;
}

uint64_t rbuf_u64(struct rbuf *r) {
    uint64_t v = 0;
    const uint8_t *p = rbuf_bytes(r, 8);
    if (p) memcpy(&v, p, 8);
    return v;
}

double rbuf_f64(struct rbuf *r) {
    double v = 0;
    const uint8_t *p = rbuf_bytes(r, 8);
    if (p) memcpy(&v, p, 8);
    return v;
}

const char *rbuf_str(struct rbuf *r, size_t max, size_t *len) {
    uint32_t n = rbuf_u32(r);
    *len = 0;
    if (n > max) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = rbuf_bytes(r, n);
    if (p) *len = n;
    return (const char *)p;
}
