/*
 * batch.c — encoding many documents at once on the thread pool
 * (tokenizer_encode_batch in tokenizer.h).
 *
 * Threads take documents a chunk at a time from a shared atomic counter, so
 * a thread that drew long documents does not hold the others up. Each
 * thread writes the ids of the documents it took back to back into a
 * buffer of its own (its "part") and records, per document, which part
 * holds its ids and where; once all are done the parts are copied into one
 * array in document order. Every thread encodes with its own per-thread
 * scratch and word cache (bpe.c), so the only shared writes are the
 * counter and the per-document records, each written by one thread.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "tokenizer/tokenizer.h"

struct batch_part {
    int32_t *ids;  /* [cap] ids of this thread's documents, back to back */
    int64_t len, cap;
    kvik_status st; /* first failure, or KVIK_OK */
};

struct batch_job {
    const struct tokenizer *tok;
    const struct tokenizer_doc *docs;
    int64_t n, chunk;
    bool add_special, parse_special;
    atomic_int_fast64_t next;   /* first document not yet handed out */
    atomic_bool failed;         /* a thread failed: the others stop early */
    struct batch_part *parts;   /* [threads] */
    int32_t *doc_part;          /* [n] the part holding document i's ids */
    int64_t *doc_at;            /* [n] where in it */
    int64_t *doc_count;         /* [n] how many */
};

/* Room for `more` ids after part->len. */
static bool part_reserve(struct batch_part *part, int64_t more) {
    if (more > INT64_MAX / 8 - part->len) return false;
    int64_t need = part->len + more;
    if (need <= part->cap) return true;
    int64_t cap = part->cap ? part->cap : 4096;
    while (cap < need) cap *= 2;
    if ((uint64_t)cap > SIZE_MAX / sizeof(int32_t)) return false;
    int32_t *ids = realloc(part->ids, (size_t)cap * sizeof *ids);
    if (!ids) return false;
    part->ids = ids;
    part->cap = cap;
    return true;
}

/* Encodes document i into part: a first try with room for len + 3 ids
 * (every byte gives at most one id, plus BOS/EOS), again with the exact
 * count if that was not enough. */
static kvik_status encode_doc(struct batch_job *job, struct batch_part *part, int64_t i) {
    const struct tokenizer_doc *d = &job->docs[i];
    int64_t guess = d->len < (size_t)(INT64_MAX / 16) ? (int64_t)d->len + 3 : INT64_MAX / 16;
    if (!part_reserve(part, guess)) return KVIK_ERR_NOMEM;
    int64_t room = part->cap - part->len;
    int64_t n = tokenizer_encode_scratch(job->tok, NULL, d->text, d->len, job->add_special,
                                         job->parse_special, part->ids + part->len, room);
    if (n > room) {
        if (!part_reserve(part, n)) return KVIK_ERR_NOMEM;
        n = tokenizer_encode_scratch(job->tok, NULL, d->text, d->len, job->add_special,
                                     job->parse_special, part->ids + part->len, n);
    }
    if (n < 0) return (kvik_status)n;
    job->doc_at[i] = part->len;
    job->doc_count[i] = n;
    part->len += n;
    return KVIK_OK;
}

static void batch_worker(void *arg, int ith, int nth) {
    (void)nth;
    struct batch_job *job = arg;
    struct batch_part *part = &job->parts[ith];
    while (!atomic_load_explicit(&job->failed, memory_order_relaxed)) {
        int64_t first = atomic_fetch_add(&job->next, job->chunk);
        if (first >= job->n) break;
        int64_t end = first + job->chunk < job->n ? first + job->chunk : job->n;
        for (int64_t i = first; i < end; i++) {
            kvik_status st = encode_doc(job, part, i);
            if (st != KVIK_OK) {
                part->st = st;
                atomic_store(&job->failed, true);
                return;
            }
            job->doc_part[i] = ith;
        }
    }
}

void tokenizer_batch_free(struct tokenizer_batch *b) {
    if (!b) return;
    free(b->ids);
    free(b->off);
    *b = (struct tokenizer_batch){0};
}

kvik_status tokenizer_encode_batch(const struct tokenizer *tok, struct pool *pool,
                                   const struct tokenizer_doc *docs, int64_t n, bool add_special,
                                   bool parse_special, struct tokenizer_batch *out,
                                   struct kvik_err *err) {
    if (!out) return err_set(err, KVIK_ERR_INVALID_ARG, "tokenizer_encode_batch: no output");
    *out = (struct tokenizer_batch){0};
    if (!tok || n < 0 || (n > 0 && !docs) || (uint64_t)n > SIZE_MAX / 32)
        return err_set(err, KVIK_ERR_INVALID_ARG, "tokenizer_encode_batch: bad arguments");
    int nth = pool ? pool_size(pool) : 1;
    struct batch_job job = {
        .tok = tok,
        .docs = docs,
        .n = n,
        .add_special = add_special,
        .parse_special = parse_special,
    };
    /* about 16 chunks per thread, for balance */
    job.chunk = n / ((int64_t)nth * 16);
    if (job.chunk < 1) job.chunk = 1;
    atomic_init(&job.next, 0);
    atomic_init(&job.failed, false);
    kvik_status st = KVIK_OK;
    size_t nd = (size_t)n ? (size_t)n : 1;
    job.parts = calloc((size_t)nth, sizeof *job.parts);
    job.doc_part = malloc(nd * sizeof *job.doc_part);
    job.doc_at = malloc(nd * sizeof *job.doc_at);
    job.doc_count = malloc(nd * sizeof *job.doc_count);
    out->off = malloc((nd + 1) * sizeof *out->off);
    if (!job.parts || !job.doc_part || !job.doc_at || !job.doc_count || !out->off) {
        st = err_set(err, KVIK_ERR_NOMEM, "tokenizer_encode_batch: out of memory (%lld documents)",
                     (long long)n);
        goto done;
    }

    if (pool && n > 1) pool_run(pool, batch_worker, &job);
    else batch_worker(&job, 0, 1);

    for (int t = 0; t < nth; t++) {
        if (job.parts[t].st != KVIK_OK) {
            st = err_set(err, job.parts[t].st, "tokenizer_encode_batch: %s",
                         job.parts[t].st == KVIK_ERR_NOMEM ? "out of memory" : "encoding failed");
            goto done;
        }
    }
    /* gather in document order */
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        out->off[i] = total;
        total += job.doc_count[i];
    }
    out->off[n] = total;
    out->ids = malloc((size_t)(total ? total : 1) * sizeof *out->ids);
    if (!out->ids) {
        st = err_set(err, KVIK_ERR_NOMEM, "tokenizer_encode_batch: out of memory (%lld ids)",
                     (long long)total);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        if (job.doc_count[i])
            memcpy(out->ids + out->off[i], job.parts[job.doc_part[i]].ids + job.doc_at[i],
                   (size_t)job.doc_count[i] * sizeof *out->ids);
    }
    out->n = n;

done:
    if (job.parts)
        for (int t = 0; t < nth; t++) free(job.parts[t].ids);
    free(job.parts);
    free(job.doc_part);
    free(job.doc_at);
    free(job.doc_count);
    if (st != KVIK_OK) tokenizer_batch_free(out);
    return st;
}
