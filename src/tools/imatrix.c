/*
 * imatrix.c — the importance matrix of a model over a text (imatrix.h):
 * an observer of the forward pass that sums x^2 per column, and the chunk
 * loop that feeds it.
 */
#include <math.h>
#include <stdlib.h>

#include "tools/imatrix.h"

void imatrix_acc_init(struct imatrix_acc *a, bool process_output) {
    *a = (struct imatrix_acc){.process_output = process_output};
}

static bool collected(const struct imatrix_acc *a, const char *weight) {
    return !strncmp(weight, "blk.", 4) || (a->process_output && !strcmp(weight, "output.weight"));
}

static void acc_fail(struct imatrix_acc *a, kvik_status st, const char *weight, const char *why) {
    a->st = st;
    snprintf(a->what, sizeof a->what, "%s: %s", weight, why);
}

/* The entry of weight, added (sums zero, count 0) if new; NULL after acc_fail. */
static struct imatrix_entry *acc_entry(struct imatrix_acc *a, const char *weight, int64_t cols) {
    struct imatrix *m = &a->m;
    int64_t i = a->hint < m->n_entries && !strcmp(m->entries[a->hint].name, weight) ? a->hint : -1;
    for (int64_t j = 0; i < 0 && j < m->n_entries; j++)
        if (!strcmp(m->entries[j].name, weight)) i = j;
    if (i < 0) {
        if (m->n_entries == a->cap) {
            int64_t cap = a->cap ? 2 * a->cap : 64;
            struct imatrix_entry *e = realloc(m->entries, sizeof *e * (size_t)cap);
            if (!e) {
                acc_fail(a, KVIK_ERR_NOMEM, weight, "out of memory");
                return NULL;
            }
            m->entries = e, a->cap = cap;
        }
        struct imatrix_entry e = {.n_cols = cols, .n_mat = 1};
        size_t len = strlen(weight);
        e.name = malloc(len + 1);
        e.sums = calloc((size_t)cols, sizeof(float));
        e.counts = calloc(1, sizeof(int64_t));
        if (!e.name || !e.sums || !e.counts) {
            free(e.name), free(e.sums), free(e.counts);
            acc_fail(a, KVIK_ERR_NOMEM, weight, "out of memory");
            return NULL;
        }
        memcpy(e.name, weight, len + 1);
        i = m->n_entries++;
        m->entries[i] = e;
    }
    a->hint = i + 1;
    struct imatrix_entry *e = &m->entries[i];
    if (e->n_cols != cols) {
        acc_fail(a, KVIK_ERR_FORMAT, weight, "seen with two widths");
        return NULL;
    }
    return e;
}

void imatrix_acc_observe(void *arg, const char *weight, const float *x, int n_tok, int64_t cols) {
    struct imatrix_acc *a = arg;
    if (a->st || n_tok < 1 || !collected(a, weight)) return;
    struct imatrix_entry *e = acc_entry(a, weight, cols);
    if (!e) return;
    float *acc = e->sums;
    for (int t = 0; t < n_tok; t++) {
        const float *row = x + (size_t)t * (size_t)cols;
        for (int64_t j = 0; j < cols; j++) acc[j] += row[j] * row[j];
    }
    e->counts[0] += n_tok;
}

static int cmp_entry(const void *pa, const void *pb) {
    const struct imatrix_entry *x = pa, *y = pb;
    return strcmp(x->name, y->name);
}

void imatrix_acc_finish(struct imatrix_acc *a, struct imatrix *out) {
    *out = a->m;
    if (out->n_entries > 1) qsort(out->entries, (size_t)out->n_entries, sizeof *out->entries, cmp_entry);
    a->m = (struct imatrix){0};
    a->cap = a->hint = 0;
}

void imatrix_acc_free(struct imatrix_acc *a) {
    imatrix_free(&a->m);
    a->cap = a->hint = 0;
}

kvik_status imatrix_compute(const struct model *m, struct model_ctx *ctx, const int32_t *tokens, int64_t n_tokens,
                            bool add_bos, int32_t bos, const struct imatrix_params *p, struct imatrix *out,
                            struct kvik_err *err) {
    *out = (struct imatrix){0};
    const int n_ctx = p->n_ctx, n_batch = p->n_batch ? p->n_batch : p->n_ctx;
    if (n_ctx < IMATRIX_MIN_CTX || n_batch < IMATRIX_MIN_CTX || n_batch > n_ctx || p->n_chunks < 0)
        return err_set(err, KVIK_ERR_INVALID_ARG, "imatrix: context %d, batch %d or chunks %d out of range", n_ctx,
                       n_batch, p->n_chunks);
    if (n_tokens < 2 * (int64_t)n_ctx)
        return err_set(err, KVIK_ERR_INVALID_ARG, "imatrix: %lld tokens; a context of %d needs at least %lld",
                       (long long)n_tokens, n_ctx, 2 * (long long)n_ctx);
    if (add_bos && (bos < 0 || bos >= m->hp.n_vocab))
        return err_set(err, KVIK_ERR_FORMAT, "imatrix: the vocabulary adds BOS but has no BOS id");
    int64_t n_chunk = n_tokens / n_ctx;
    if (p->n_chunks && p->n_chunks < n_chunk) n_chunk = p->n_chunks;
    if (n_chunk > INT32_MAX) n_chunk = INT32_MAX;

    struct imatrix_acc acc;
    imatrix_acc_init(&acc, p->process_output);
    struct kv_flat kv = {0};
    kvik_status st = KVIK_OK;
    int32_t *ctok = malloc(sizeof(int32_t) * (size_t)n_ctx), *pos = malloc(sizeof(int32_t) * (size_t)n_batch);
    int32_t *seq = calloc((size_t)n_batch, sizeof(int32_t));
    bool *mark = malloc((size_t)n_batch);
    /* logits only where output.weight is collected (every row); else none */
    float *logits = p->process_output ? malloc(sizeof(float) * (size_t)n_batch * (size_t)m->hp.n_vocab) : NULL;
    if (!ctok || !pos || !seq || !mark || (p->process_output && !logits)) {
        st = err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
        goto done;
    }
    if ((st = kv_flat_init(&kv, m->hp.n_layer, 1, n_ctx, m->hp.n_head_kv * m->hp.head_dim, TENSOR_TYPE_F32, err)))
        goto done;
    for (int i = 0; i < n_batch; i++) seq[i] = 0, mark[i] = p->process_output;
    model_ctx_observe(ctx, imatrix_acc_observe, &acc);
    for (int64_t c = 0; c < n_chunk; c++) {
        int64_t tc = clock_ns();
        memcpy(ctok, tokens + (size_t)c * (size_t)n_ctx, sizeof(int32_t) * (size_t)n_ctx);
        if (add_bos) ctok[0] = bos;
        for (int start = 0; start < n_ctx; start += n_batch) {
            int nb = n_ctx - start < n_batch ? n_ctx - start : n_batch;
            for (int i = 0; i < nb; i++) pos[i] = start + i;
            struct model_batch mb = {.n = nb, .tokens = ctok + start, .pos = pos, .seq = seq, .logits = mark};
            if ((st = model_forward(ctx, &kv.base, &mb, logits, err))) goto done;
            if (acc.st) {
                st = err_set(err, acc.st, "imatrix: %s", acc.what);
                goto done;
            }
        }
        if (p->progress) p->progress(p->progress_arg, (int)c + 1, (int)n_chunk, (double)(clock_ns() - tc) * 1e-9);
    }
    for (int64_t i = 0; i < acc.m.n_entries; i++) {
        const struct imatrix_entry *e = &acc.m.entries[i];
        for (int64_t j = 0; j < e->n_cols; j++)
            if (!isfinite(e->sums[j])) {
                st = err_set(err, KVIK_ERR_FORMAT, "imatrix: the inputs of %s are not finite", e->name);
                goto done;
            }
    }
    if (p->dataset) {
        size_t len = strlen(p->dataset);
        acc.m.datasets = malloc(sizeof(char *));
        if (acc.m.datasets) acc.m.datasets[0] = malloc(len + 1);
        if (!acc.m.datasets || !acc.m.datasets[0]) {
            st = err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
            goto done;
        }
        memcpy(acc.m.datasets[0], p->dataset, len + 1);
        acc.m.n_datasets = 1;
    }
    acc.m.chunk_count = (int32_t)n_chunk;
    acc.m.chunk_size = n_ctx;
    acc.m.has_metadata = true;
    imatrix_acc_finish(&acc, out);
done:
    model_ctx_observe(ctx, NULL, NULL);
    imatrix_acc_free(&acc);
    kv_flat_free(&kv);
    free(ctok), free(pos), free(seq), free(mark), free(logits);
    return st;
}
