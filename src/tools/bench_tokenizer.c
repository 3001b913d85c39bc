/*
 * bench_tokenizer.c — the measurements behind `kvik bench tokenizer` (see
 * bench_tokenizer.h for what each one is), plus the process spawning the
 * command uses for the fresh-process measurement and for the peer
 * (Hugging Face tokenizers through bench/tokenizer-peer.py).
 *
 * Every timed repetition is preceded by clearing the word caches of all
 * threads that will encode (the stream tests) or not (the repeat tests);
 * the figure kept is the median repetition.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tools/bench_tokenizer.h"

extern char **environ;

/* ---- corpus ----------------------------------------------------------------- */

static size_t find_nl(const char *s, size_t from, size_t size, bool twice) {
    for (size_t i = from; i < size; i++) {
        if (s[i] != '\n') continue;
        if (!twice) return i + 1;
        if (i + 1 < size && s[i + 1] == '\n') return i + 2;
    }
    return size;
}

kvik_status tokbench_corpus_load(const char *path, struct tokbench_corpus *c, struct kvik_err *err) {
    *c = (struct tokbench_corpus){0};
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(err, KVIK_ERR_IO, "cannot open corpus '%s': %s", path, strerror(errno));
    size_t cap = 1 << 20;
    c->data = malloc(cap);
    while (c->data) {
        c->size += fread(c->data + c->size, 1, cap - c->size, f);
        if (c->size < cap) break;
        char *nd = cap < ((size_t)1 << 34) ? realloc(c->data, cap * 2) : NULL;
        if (!nd) {
            free(c->data);
            c->data = NULL;
            break;
        }
        c->data = nd;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!c->data || bad) {
        tokbench_corpus_free(c);
        return err_set(err, bad ? KVIK_ERR_IO : KVIK_ERR_NOMEM, "cannot read corpus '%s'", path);
    }
    /* documents: count, then cut */
    for (int pass = 0; pass < 2; pass++) {
        int64_t n = 0;
        for (size_t start = 0; start < c->size;) {
            size_t end = find_nl(c->data, start, c->size, true);
            if (end - start > TOKBENCH_DOC_MAX) end = find_nl(c->data, start + TOKBENCH_DOC_MAX, c->size, false);
            if (pass == 1) {
                c->docs[n] = (struct tokenizer_doc){c->data + start, end - start};
                if (end - start > c->max_doc) c->max_doc = end - start;
            }
            n++;
            start = end;
        }
        if (pass == 0 && !(c->docs = malloc((size_t)(n ? n : 1) * sizeof *c->docs))) {
            tokbench_corpus_free(c);
            return err_set(err, KVIK_ERR_NOMEM, "corpus '%s': out of memory", path);
        }
        c->n_docs = n;
    }
    return KVIK_OK;
}

void tokbench_corpus_free(struct tokbench_corpus *c) {
    free(c->data);
    free(c->docs);
    *c = (struct tokbench_corpus){0};
}

int64_t tokbench_prefix_docs(const struct tokbench_corpus *c, size_t bytes, size_t *got) {
    size_t sum = 0;
    int64_t k = 0;
    while (k < c->n_docs && sum < bytes) sum += c->docs[k++].len;
    *got = sum;
    return k;
}

/* ---- CRC-32 (IEEE, as zlib's crc32) ------------------------------------------ */

uint32_t tokbench_crc32(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static uint32_t crc_ids(uint32_t crc, const int32_t *ids, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
        crc = tokbench_crc32(crc, b, 4);
    }
    return crc;
}

/* ---- measurements ------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static struct tokbench_rate rate_of(double *secs, int reps, uint64_t bytes, uint64_t tokens) {
    qsort(secs, (size_t)reps, sizeof *secs, cmp_double);
    double med = reps % 2 ? secs[reps / 2] : 0.5 * (secs[reps / 2 - 1] + secs[reps / 2]);
    double s = med > 1e-9 ? med : 1e-9;
    return (struct tokbench_rate){med, (double)bytes / s / 1e6, (double)tokens / s};
}

static void clear_fn(void *arg, int ith, int nth) {
    (void)arg;
    (void)ith;
    (void)nth;
    tokenizer_cache_clear();
}

/* Encodes docs[0..n) one call each on this thread; returns the token count
 * (crc of the ids in *crc when crc != NULL) or a negative status. */
static int64_t encode_serial(const struct tokenizer *tok, struct tokenizer_scratch *sc,
                             const struct tokenizer_doc *docs, int64_t n, int32_t *buf, int64_t cap,
                             uint32_t *crc) {
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = tokenizer_encode_scratch(tok, sc, docs[i].text, docs[i].len, false, false, buf, cap);
        if (k < 0) return k;
        if (k > cap) return KVIK_ERR_NOMEM; /* cannot happen: cap >= bytes + 3 */
        if (crc) *crc = crc_ids(*crc, buf, k);
        total += k;
    }
    return total;
}

kvik_status tokbench_run(const struct tokenizer *tok, const struct tokbench_corpus *c, struct pool *pool,
                         int reps, struct tokbench_result *r, struct kvik_err *err) {
    *r = (struct tokbench_result){0};
    kvik_status st = KVIK_OK;
    bool cache_was = tokenizer_cache_enabled();
    int64_t cap = (int64_t)(c->max_doc > TOKBENCH_REPEAT_MIN ? c->max_doc : TOKBENCH_REPEAT_MIN) * 2 + 16;
    int32_t *buf = malloc((size_t)cap * sizeof *buf);
    double *secs = malloc((size_t)reps * sizeof *secs);
    struct tokenizer_scratch *sc = tokenizer_scratch_new();
    struct tokenizer_doc *rep_docs = NULL;
    struct tokenizer_batch b = {0};
    if (!buf || !secs || !sc) {
        st = err_set(err, KVIK_ERR_NOMEM, "bench tokenizer: out of memory");
        goto done;
    }
    r->docs = c->n_docs;
    r->bytes = c->size;

    /* the ids, three ways, must agree */
    uint32_t crc_on = 0, crc_off = 0;
    tokenizer_cache_set_enabled(true);
    tokenizer_cache_clear();
    int64_t n_on = encode_serial(tok, sc, c->docs, c->n_docs, buf, cap, &crc_on);
    struct tokenizer_cache_stats cs;
    tokenizer_cache_get_stats(&cs);
    r->cache_hit_rate = cs.hits + cs.misses ? (double)cs.hits / (double)(cs.hits + cs.misses) : 0;
    tokenizer_cache_set_enabled(false);
    int64_t n_off = encode_serial(tok, sc, c->docs, c->n_docs, buf, cap, &crc_off);
    tokenizer_cache_set_enabled(true);
    if (n_on < 0 || n_off < 0) {
        st = err_set(err, KVIK_ERR_NOMEM, "bench tokenizer: encoding failed");
        goto done;
    }
    if ((st = tokenizer_encode_batch(tok, pool, c->docs, c->n_docs, false, false, &b, err)) != KVIK_OK) goto done;
    uint32_t crc_batch = crc_ids(0, b.ids, b.off[b.n]);
    if (n_on != n_off || crc_on != crc_off || b.off[b.n] != n_on || crc_batch != crc_on) {
        st = err_set(err, KVIK_ERR_FORMAT,
                     "bench tokenizer: ids differ (cache on %lld/%08x, off %lld/%08x, batch %lld/%08x)",
                     (long long)n_on, crc_on, (long long)n_off, crc_off, (long long)b.off[b.n], crc_batch);
        goto done;
    }
    tokenizer_batch_free(&b);
    r->tokens = (uint64_t)n_on;
    r->crc32 = crc_on;

    /* stream, 1 thread (cache on, then off) */
    for (int k = 0; k < reps; k++) {
        tokenizer_cache_clear();
        int64_t t0 = clock_ns();
        encode_serial(tok, sc, c->docs, c->n_docs, buf, cap, NULL);
        secs[k] = (double)(clock_ns() - t0) * 1e-9;
    }
    r->stream_1t = rate_of(secs, reps, r->bytes, r->tokens);
    tokenizer_cache_set_enabled(false);
    for (int k = 0; k < reps; k++) {
        int64_t t0 = clock_ns();
        encode_serial(tok, sc, c->docs, c->n_docs, buf, cap, NULL);
        secs[k] = (double)(clock_ns() - t0) * 1e-9;
    }
    tokenizer_cache_set_enabled(true);
    r->stream_nocache_1t = rate_of(secs, reps, r->bytes, r->tokens);

    /* stream, N threads */
    for (int k = 0; k < reps; k++) {
        if (pool) pool_run(pool, clear_fn, NULL);
        else tokenizer_cache_clear();
        int64_t t0 = clock_ns();
        st = tokenizer_encode_batch(tok, pool, c->docs, c->n_docs, false, false, &b, err);
        secs[k] = (double)(clock_ns() - t0) * 1e-9;
        tokenizer_batch_free(&b);
        if (st != KVIK_OK) goto done;
    }
    r->stream_nt = rate_of(secs, reps, r->bytes, r->tokens);

    /* repeat: the first documents as one, encoded as often as the corpus is long */
    size_t rep_len;
    tokbench_prefix_docs(c, TOKBENCH_REPEAT_MIN, &rep_len);
    r->repeat_doc_bytes = rep_len;
    r->repeat_count = rep_len ? (int64_t)((c->size + rep_len / 2) / rep_len) : 0;
    if (r->repeat_count < 1) r->repeat_count = 1;
    rep_docs = malloc((size_t)r->repeat_count * sizeof *rep_docs);
    if (!rep_docs) {
        st = err_set(err, KVIK_ERR_NOMEM, "bench tokenizer: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < r->repeat_count; i++) rep_docs[i] = (struct tokenizer_doc){c->data, rep_len};
    int64_t one = tokenizer_encode_scratch(tok, sc, c->data, rep_len, false, false, buf, cap);
    r->repeat_tokens = one > 0 ? (uint64_t)one * (uint64_t)r->repeat_count : 0;
    uint64_t rep_bytes = (uint64_t)rep_len * (uint64_t)r->repeat_count;
    for (int k = 0; k < reps; k++) {
        int64_t t0 = clock_ns();
        encode_serial(tok, sc, rep_docs, r->repeat_count, buf, cap, NULL);
        secs[k] = (double)(clock_ns() - t0) * 1e-9;
    }
    r->repeat_1t = rate_of(secs, reps, rep_bytes, r->repeat_tokens);
    for (int k = 0; k < reps; k++) {
        int64_t t0 = clock_ns();
        st = tokenizer_encode_batch(tok, pool, rep_docs, r->repeat_count, false, false, &b, err);
        secs[k] = (double)(clock_ns() - t0) * 1e-9;
        tokenizer_batch_free(&b);
        if (st != KVIK_OK) goto done;
    }
    r->repeat_nt = rate_of(secs, reps, rep_bytes, r->repeat_tokens);

done:
    tokenizer_cache_set_enabled(cache_was);
    tokenizer_batch_free(&b);
    tokenizer_scratch_free(sc);
    free(rep_docs);
    free(secs);
    free(buf);
    return st;
}

kvik_status tokbench_first_call(const char *model_path, const struct tokbench_corpus *c, int threads,
                                struct tokbench_first *out, struct kvik_err *err) {
    *out = (struct tokbench_first){0};
    size_t bytes;
    int64_t n = tokbench_prefix_docs(c, TOKBENCH_FIRST_MIN, &bytes);
    int32_t *buf = malloc(((size_t)c->max_doc + 3) * sizeof *buf);
    if (!buf) return err_set(err, KVIK_ERR_NOMEM, "bench tokenizer: out of memory");
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    struct pool *pool = NULL;
    struct tokenizer_batch b = {0};
    int64_t t0 = clock_ns();
    kvik_status st = gguf_open(model_path, &g, err);
    if (st == KVIK_OK) st = tokenizer_load(g, &tok, err);
    gguf_close(g);
    out->load_ms = (double)(clock_ns() - t0) * 1e-6;
    if (st != KVIK_OK) goto done;
    if (threads == 1) {
        int64_t t1 = clock_ns(), total = 0;
        for (int64_t i = 0; i < n && st == KVIK_OK; i++) {
            int64_t k = tokenizer_encode(tok, c->docs[i].text, c->docs[i].len, false, false, buf,
                                         (int64_t)c->max_doc + 3);
            if (k < 0) st = err_set(err, (kvik_status)k, "bench tokenizer: encoding failed");
            total += k;
        }
        out->first_ms = (double)(clock_ns() - t1) * 1e-6;
        out->tokens = (uint64_t)total;
    } else {
        int64_t t1 = clock_ns();
        if (!(pool = pool_create(threads, err))) {
            st = err ? err->code : KVIK_ERR_NOMEM;
            goto done;
        }
        int64_t t2 = clock_ns();
        st = tokenizer_encode_batch(tok, pool, c->docs, n, false, false, &b, err);
        out->first_ms = (double)(clock_ns() - t2) * 1e-6;
        out->pool_ms = (double)(t2 - t1) * 1e-6;
        if (st == KVIK_OK) out->tokens = (uint64_t)b.off[b.n];
    }
    out->bytes = bytes;
done:
    tokenizer_batch_free(&b);
    pool_free(pool);
    tokenizer_free(tok);
    free(buf);
    return st;
}

/* ---- processes ---------------------------------------------------------------- */

int tokbench_spawn(char *const argv[], char *const env_add[], char *out, size_t cap, double *ms) {
    *ms = 0;
    if (cap) out[0] = 0;
    int fds[2];
    if (pipe(fds) != 0) return -1;
    /* the child's environment: ours plus env_add (built before fork) */
    size_t n_env = 0, n_add = 0;
    while (environ && environ[n_env]) n_env++;
    while (env_add && env_add[n_add]) n_add++;
    char **env = malloc((n_env + n_add + 1) * sizeof *env);
    if (!env) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    for (size_t i = 0; i < n_env; i++) env[i] = environ[i];
    for (size_t i = 0; i < n_add; i++) env[n_env + i] = env_add[i];
    env[n_env + n_add] = NULL;
    int64_t t0 = clock_ns();
    pid_t pid = fork();
    if (pid < 0) {
        free(env);
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execve(argv[0], argv, env);
        _exit(127);
    }
    free(env);
    close(fds[1]);
    size_t got = 0;
    char sink[4096];
    for (;;) {
        ssize_t k = cap > got + 1 ? read(fds[0], out + got, cap - got - 1) : read(fds[0], sink, sizeof sink);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        if (cap > got + 1) got += (size_t)k;
    }
    if (cap) out[got] = 0;
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    *ms = (double)(clock_ns() - t0) * 1e-6;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
