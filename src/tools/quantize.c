/*
 * quantize.c — quant_file: the plan of quant_policy.c carried out. The
 * metadata is copied, then each tensor's bytes are produced when the GGUF
 * writer asks for them, a slab of rows at a time: rows are read through
 * the input's map, dequantized where they are not F32, checked to be
 * finite and quantized by tensor_quantize_rows. The thread pool's threads
 * take a slab's rows in small batches from a shared counter, each through
 * its own buffer, so memory stays a few MB per thread plus the writer's
 * slab, whatever the model's size; the input pages of each slab are
 * released from the process once it is written.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor/quantize.h"
#include "tensor/tensor.h"
#include "tools/quantize.h"

enum { BATCH_FLOATS = 1 << 16 }; /* floats a thread converts at once (at least one row) */

void quant_params_default(struct quant_params *p) {
    memset(p, 0, sizeof *p);
    p->ftype = QUANT_FTYPE_Q8_0;
    p->output_type = -1;
    p->token_embd_type = -1;
}

/* Shared by every tensor of one run. */
struct run {
    struct pool *pool;
    float **scratch;      /* [n_threads][scratch_floats] */
    int n_threads;
    int64_t scratch_floats;
    const struct quant_params *p;
    int64_t n_tensors, done_tensors;
    uint64_t bytes_in, bytes_out;
};

/* One output tensor. */
struct job {
    struct run *run;
    const struct gguf_tensor *t;
    int type;             /* output type */
    bool convert;
    bool fallback;        /* the mix's 256-weight type did not fit the rows */
    const float *imatrix; /* [ne[2]][ne[0]] importance weights, or NULL */
    size_t row_in, row_out;
};

/* One slab of one tensor, as the pool's threads see it. */
struct slab {
    const struct job *job;
    uint8_t *dst;
    int64_t row0, n_rows;
    _Atomic int failed;   /* 0; 1: a non-finite value; 2: the row quantizer refused */
    _Atomic int64_t bad_row;
    _Atomic int64_t next; /* rows of the slab handed out so far */
};

static bool row_finite(const float *x, int64_t n) {
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

/* Converts rows [r, r + b) of one matrix; false (sl->failed set) on a
 * non-finite value or a refusal of the row quantizer. */
static bool convert_rows(struct slab *sl, float *buf, int64_t r, int64_t b) {
    const struct job *j = sl->job;
    const struct gguf_tensor *t = j->t;
    const int64_t ne0 = t->ne[0];
    const uint8_t *src = (const uint8_t *)t->data + (size_t)r * j->row_in;
    uint8_t *dst = sl->dst + (size_t)(r - sl->row0) * j->row_out;
    const float *f;
    if (t->type == TENSOR_TYPE_F32) {
        f = (const float *)src;
    } else if (j->type == TENSOR_TYPE_F32) {
        tensor_type_traits(t->type)->to_float(src, (float *)dst, b * ne0); /* straight into the output */
        f = (const float *)dst;
    } else {
        tensor_type_traits(t->type)->to_float(src, buf, b * ne0);
        f = buf;
    }
    if (!row_finite(f, b * ne0)) {
        for (int64_t k = 0; k < b; k++)
            if (!row_finite(f + k * ne0, ne0)) {
                atomic_store(&sl->bad_row, r + k);
                break;
            }
        atomic_store(&sl->failed, 1);
        return false;
    }
    if (j->type != TENSOR_TYPE_F32 || t->type == TENSOR_TYPE_F32) {
        const float *w = j->imatrix ? j->imatrix + (r / t->ne[1]) * ne0 : NULL;
        if (tensor_quantize_rows(j->type, f, dst, b, ne0, w) == 0) {
            atomic_store(&sl->failed, 2);
            return false;
        }
    }
    return true;
}

/* One thread's share of a slab: batches of rows taken in turn from a shared
 * counter, so a thread that falls behind takes fewer. */
static void slab_work(void *arg, int ith, int nth) {
    (void)nth;
    struct slab *sl = arg;
    const struct gguf_tensor *t = sl->job->t;
    const int64_t rows_per_mat = t->ne[1], end = sl->row0 + sl->n_rows;
    const int64_t batch = BATCH_FLOATS / t->ne[0] > 0 ? BATCH_FLOATS / t->ne[0] : 1;
    float *buf = sl->job->run->scratch[ith];
    while (!atomic_load_explicit(&sl->failed, memory_order_relaxed)) {
        int64_t r = sl->row0 + atomic_fetch_add(&sl->next, batch);
        if (r >= end) return;
        int64_t stop = r + batch < end ? r + batch : end;
        while (r < stop) { /* one matrix (one imatrix row) at a time */
            int64_t mat_end = (r / rows_per_mat + 1) * rows_per_mat;
            int64_t b = (stop < mat_end ? stop : mat_end) - r;
            if (!convert_rows(sl, buf, r, b)) return;
            r += b;
        }
    }
}

static void show_line(const struct job *j) {
    const struct gguf_tensor *t = j->t;
    struct run *run = j->run;
    char shape[96];
    int n = snprintf(shape, sizeof shape, "%lld", (long long)t->ne[0]);
    for (int d = 1; d < t->n_dims && n < (int)sizeof shape; d++)
        n += snprintf(shape + n, sizeof shape - (size_t)n, " x %lld", (long long)t->ne[d]);
    int64_t n_rows = t->n_elems / t->ne[0];
    double in_mib = (double)(j->row_in * (size_t)n_rows) / 1048576.0;
    double out_mib = (double)(j->row_out * (size_t)n_rows) / 1048576.0;
    if (j->convert)
        fprintf(stderr, "[%4lld/%4lld] %-36s [%s] %s -> %s%s%s, %.2f -> %.2f MiB\n", (long long)run->done_tensors,
                (long long)run->n_tensors, t->name, shape, tensor_type_name(t->type), tensor_type_name(j->type),
                j->fallback ? " (fallback)" : "", j->imatrix ? " (imatrix)" : "", in_mib, out_mib);
    else
        fprintf(stderr, "[%4lld/%4lld] %-36s [%s] %s, %.2f MiB kept\n", (long long)run->done_tensors,
                (long long)run->n_tensors, t->name, shape, tensor_type_name(t->type), in_mib);
}

static kvik_status job_fill(void *user, void *dst, int64_t row0, int64_t n_rows, struct kvik_err *err) {
    struct job *j = user;
    const struct gguf_tensor *t = j->t;
    if (!j->convert) {
        memcpy(dst, (const uint8_t *)t->data + (size_t)row0 * j->row_in, (size_t)n_rows * j->row_in);
    } else {
        struct slab sl = {.job = j, .dst = dst, .row0 = row0, .n_rows = n_rows};
        pool_run(j->run->pool, slab_work, &sl);
        if (sl.failed == 1)
            return err_set(err, KVIK_ERR_FORMAT, "tensor %s: row %lld holds a value that is not finite", t->name,
                           (long long)sl.bad_row);
        if (sl.failed == 2)
            return err_set(err, KVIK_ERR_UNSUPPORTED, "tensor %s: the row quantizer cannot make %s", t->name,
                           tensor_type_name(j->type));
    }
    /* the input pages of these rows leave the process (they stay in the page cache) */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)t->data + (uintptr_t)row0 * j->row_in;
    uintptr_t lo = start & ~(page - 1), hi = (start + (uintptr_t)n_rows * j->row_in) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
    if (row0 + n_rows == t->n_elems / t->ne[0]) {
        j->run->done_tensors++;
        j->run->bytes_in += t->n_bytes;
        j->run->bytes_out += (uint64_t)j->row_out * (uint64_t)(t->n_elems / t->ne[0]);
        if (j->run->p->progress) show_line(j);
    }
    return KVIK_OK;
}

/* ---- the importance matrix ------------------------------------------------ */

/* Every entry's weights, flattened ([n_mat * n_cols] each), as llama-quantize
 * derives them; KVIK_ERR_FORMAT when one is not finite. */
static kvik_status imatrix_all_weights(const struct imatrix *m, float ***out, struct kvik_err *err) {
    float **w = calloc(m->n_entries ? (size_t)m->n_entries : 1, sizeof *w);
    if (!w) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    *out = w;
    for (int64_t i = 0; i < m->n_entries; i++) {
        const struct imatrix_entry *e = &m->entries[i];
        w[i] = malloc((size_t)(e->n_cols * e->n_mat) * sizeof(float) + 1);
        if (!w[i]) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < e->n_mat; k++) imatrix_weights(e, k, m->legacy, w[i] + k * e->n_cols);
        if (!row_finite(w[i], e->n_cols * e->n_mat))
            return err_set(err, KVIK_ERR_FORMAT, "imatrix entry %s holds a value that is not finite", e->name);
    }
    return KVIK_OK;
}

static bool is_token_embd(const char *name) {
    return !strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight");
}

/* ---- metadata ------------------------------------------------------------- */

static kvik_status copy_metadata(const struct gguf *g, struct gguf_writer *w, const struct quant_params *p,
                                 const struct imatrix *im, struct kvik_err *err) {
    kvik_status st;
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *key = gguf_key(g, i);
        if (!strcmp(key, "split.no") || !strcmp(key, "split.count") || !strcmp(key, "split.tensors.count"))
            continue;
        if ((st = gguf_writer_set_value(w, key, gguf_kv_value(g, i))))
            return err_set(err, st, "cannot copy metadata key %s", key);
    }
    if ((st = gguf_writer_set_alignment(w, gguf_alignment(g)))) return err_set(err, st, "bad alignment");
    if ((st = gguf_writer_set_u32(w, "general.quantization_version", 2)) ||
        (st = gguf_writer_set_u32(w, "general.file_type", (uint32_t)p->ftype)))
        return err_set(err, st, "out of memory");
    if (!im) return KVIK_OK;
    /* llama-quantize keeps at most 127 bytes of each string */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", p->imatrix_path);
    if ((st = gguf_writer_set_str(w, "quantize.imatrix.file", buf))) return err_set(err, st, "out of memory");
    if (im->n_datasets > 0) {
        snprintf(buf, sizeof buf, "%s", im->datasets[0]);
        if ((st = gguf_writer_set_str(w, "quantize.imatrix.dataset", buf))) return err_set(err, st, "out of memory");
    }
    if ((st = gguf_writer_set_u32(w, "quantize.imatrix.entries_count", (uint32_t)im->n_entries)))
        return err_set(err, st, "out of memory");
    if (im->chunk_count > 0 &&
        (st = gguf_writer_set_u32(w, "quantize.imatrix.chunks_count", (uint32_t)im->chunk_count)))
        return err_set(err, st, "out of memory");
    return KVIK_OK;
}

/* ---- the whole file ------------------------------------------------------- */

static bool same_file(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

kvik_status quant_file(const char *in_path, const char *out_path, const struct quant_params *p,
                       struct quant_stats *stats, struct kvik_err *err) {
    int64_t t0 = clock_ns();
    struct gguf *g = NULL;
    struct imatrix im = {0};
    bool have_im = false;
    float **imw = NULL;
    struct quant_plan plan = {0};
    struct job *jobs = NULL;
    struct gguf_writer *w = NULL;
    struct run run = {.p = p};
    char *tmp = NULL;
    kvik_status st;
    if (stats) memset(stats, 0, sizeof *stats);

    if (same_file(in_path, out_path)) {
        st = err_set(err, KVIK_ERR_INVALID_ARG, "input and output are the same file: %s", in_path);
        goto done;
    }
    if ((st = gguf_open(in_path, &g, err))) {
        if (err && !strstr(err->msg, in_path)) { /* name the file */
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            err_set(err, st, "%s: %s", in_path, msg);
        }
        goto done;
    }
    if ((st = quant_plan_make(g, p, &plan, err))) goto done;
    if (p->imatrix_path) {
        if ((st = imatrix_load(p->imatrix_path, &im, err))) goto done;
        have_im = true;
        if (!im.legacy && !im.has_metadata) {
            st = err_set(err, KVIK_ERR_FORMAT, "imatrix %s: no imatrix.datasets, chunk_count or chunk_size keys",
                         p->imatrix_path);
            goto done;
        }
        if ((st = imatrix_all_weights(&im, &imw, err))) goto done;
    } else if (plan.requires_imatrix) {
        st = err_set(err, KVIK_ERR_INVALID_ARG, "%s needs an importance matrix (--imatrix FILE)",
                     quant_ftype_name(p->ftype));
        goto done;
    }

    /* every tensor's job, checked before anything is written */
    jobs = calloc(plan.n_tensors ? (size_t)plan.n_tensors : 1, sizeof *jobs);
    w = gguf_writer_new();
    if (!jobs || !w) {
        st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
        goto done;
    }
    bool probed[TENSOR_TYPE_COUNT] = {0};
    int64_t max_ne0 = 1;
    for (int64_t k = 0; k < plan.n_tensors; k++) {
        const struct quant_plan_tensor *pt = &plan.tensors[k];
        const struct gguf_tensor *t = gguf_tensor(g, pt->index);
        struct job *j = &jobs[k];
        *j = (struct job){.run = &run, .t = t, .type = pt->type, .convert = pt->convert, .fallback = pt->fallback};
        j->row_in = tensor_row_size(t->type, t->ne[0]);
        j->row_out = tensor_row_size(pt->type, t->ne[0]);
        if (!pt->convert) continue;
        if (t->ne[0] > max_ne0) max_ne0 = t->ne[0];
        const struct type_traits *tin = tensor_type_traits(t->type);
        bool target_quantized = tensor_type_traits(pt->type)->is_quantized;
        if (tin->is_quantized && target_quantized && !p->allow_requantize) {
            st = err_set(err, KVIK_ERR_INVALID_ARG,
                         "tensor %s is %s already: requantizing is disabled (--allow-requantize allows it)", t->name,
                         tin->name);
            goto done;
        }
        if (!tin->to_float) {
            st = err_set(err, KVIK_ERR_UNSUPPORTED, "tensor %s: cannot read %s as floats", t->name, tin->name);
            goto done;
        }
        if (!probed[pt->type]) { /* one block of zeros: does the row quantizer make this type? */
            const struct type_traits *tt = tensor_type_traits(pt->type);
            float zeros[256] = {0};
            uint8_t out[1024];
            if (!tensor_quantize_supported(pt->type) || tt->block_size > 256 || tt->type_size > sizeof out ||
                tensor_quantize_rows(pt->type, zeros, out, 1, tt->block_size, NULL) == 0) {
                st = err_set(err, KVIK_ERR_UNSUPPORTED, "kvik cannot make %s yet (tensor %s)", tt->name, t->name);
                goto done;
            }
            probed[pt->type] = true;
        }
        if (have_im) {
            const struct imatrix_entry *e = imatrix_find(&im, t->name);
            if (!e) {
                if (p->progress) fprintf(stderr, "kvik quantize: no importance weights for %s\n", t->name);
            } else if (e->n_cols * e->n_mat != t->ne[0] * t->ne[2]) {
                if (!is_token_embd(t->name)) {
                    st = err_set(err, KVIK_ERR_FORMAT, "imatrix size %lld differs from tensor %s's %lld",
                                 (long long)(e->n_cols * e->n_mat), t->name, (long long)(t->ne[0] * t->ne[2]));
                    goto done;
                }
            } else {
                j->imatrix = imw[e - im.entries];
                if (stats) stats->imatrix_used++;
            }
        }
        if (!j->imatrix && pt->type == TENSOR_TYPE_Q2_K && plan.requires_imatrix && !is_token_embd(t->name) &&
            strcmp(t->name, "output.weight")) {
            st = err_set(err, KVIK_ERR_INVALID_ARG, "tensor %s: %s needs importance weights, the imatrix has none",
                         t->name, quant_ftype_name(p->ftype));
            goto done;
        }
    }

    if ((st = copy_metadata(g, w, p, have_im ? &im : NULL, err))) goto done;
    for (int64_t k = 0; k < plan.n_tensors; k++) {
        const struct gguf_tensor *t = jobs[k].t;
        if ((st = gguf_writer_add_tensor_fn(w, t->name, jobs[k].type, t->n_dims, t->ne, job_fill, &jobs[k])))
            goto done;
    }

    int nth = p->n_threads > 0 ? p->n_threads : cpu_count();
    if (!(run.pool = pool_create(nth, err))) {
        st = err ? err->code : KVIK_ERR_NOMEM;
        goto done;
    }
    run.n_tensors = plan.n_tensors;
    run.scratch_floats = max_ne0 > BATCH_FLOATS ? max_ne0 : BATCH_FLOATS;
    run.scratch = calloc((size_t)nth, sizeof *run.scratch);
    run.n_threads = nth;
    if (!run.scratch) {
        st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < nth; i++)
        if (!(run.scratch[i] = mem_alloc_aligned((size_t)run.scratch_floats * sizeof(float)))) {
            st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
            goto done;
        }

    if (p->progress)
        fprintf(stderr, "kvik quantize: %s -> %s as %s%s, %d threads\n", in_path, out_path,
                quant_ftype_name(p->ftype), have_im ? " with an importance matrix" : "", nth);
    size_t n = strlen(out_path);
    if (!(tmp = malloc(n + 5))) {
        st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
        goto done;
    }
    memcpy(tmp, out_path, n);
    memcpy(tmp + n, ".tmp", 5);
    if ((st = gguf_writer_write_file(w, tmp, err))) {
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, out_path) != 0) {
        st = err_set(err, KVIK_ERR_IO, "cannot rename %s to %s: %s", tmp, out_path, strerror(errno));
        unlink(tmp);
        goto done;
    }
    if (stats) {
        stats->n_tensors = plan.n_tensors;
        for (int64_t k = 0; k < plan.n_tensors; k++) stats->n_converted += plan.tensors[k].convert;
        stats->bytes_in = run.bytes_in;
        stats->bytes_out = run.bytes_out;
        stats->n_fallback = plan.n_fallback;
        stats->seconds = (double)(clock_ns() - t0) / 1e9;
    }
    st = KVIK_OK;
done:
    if (run.scratch) {
        for (int i = 0; i < run.n_threads; i++) mem_free(run.scratch[i]);
        free(run.scratch);
    }
    pool_free(run.pool);
    free(tmp);
    gguf_writer_free(w);
    free(jobs);
    if (imw) {
        for (int64_t i = 0; i < im.n_entries; i++) free(imw[i]);
        free(imw);
    }
    imatrix_free(&im);
    quant_plan_free(&plan);
    gguf_close(g);
    return st;
}
