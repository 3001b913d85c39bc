/*
 * bench.c — measurements behind `kvik bench kernels`.
 *
 * Read bandwidth: every thread sums its slice of a buffer several times the
 * size of the last-level cache with 256-bit loads, independent accumulators
 * and software prefetch, so the loop is bound by memory, not by additions. Mat-vec: a weight matrix of
 * similar size (so it streams from DRAM, as a model's weights do during
 * decode) times one activation vector; achieved GB/s counts weight bytes
 * only. Mat-mat: a cache-resident matrix times p->matmul_tokens activation
 * rows (prefill); GOP/s counts 2 ops per weight per token.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tensor/fill.h"
#include "tools/bench.h"

void bench_default_params(struct bench_params *p) {
    *p = (struct bench_params){
        .threads = 2,
        .reps = 7,
        .bandwidth_bytes = (size_t)2 << 30,
        .matvec_bytes = (size_t)1 << 30,
        .matvec_cols = 4096,
        .matmul_rows = 1024,
        .matmul_cols = 4096,
        .matmul_tokens = 512,
        .attn_ctx = 256,
        .kernels = NULL,
    };
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct read_job {
    const uint64_t *data;
    size_t n; /* uint64 words */
    atomic_size_t next;
    uint64_t sums[64];
};

/* The read loop: wide loads into independent accumulators, prefetching
 * ahead as the kernels do, so the figure is the best streaming rate this
 * machine gives a core — the ceiling the kernels are held to. */
#if defined(__x86_64__) && !defined(KVIK_NO_SIMD)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { /* one cache line per iteration */
        _mm_prefetch((const char *)(p + i) + 4096, _MM_HINT_T0);
        a0 = _mm256_add_epi64(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi64(a0, a1));
    uint64_t sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; i < n; i++) sum += p[i];
    return sum;
}
#endif

static uint64_t read_scalar(const uint64_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __builtin_prefetch(p + i + 512, 0, 3);
        a0 += p[i], a1 += p[i + 1], a2 += p[i + 2], a3 += p[i + 3];
        a4 += p[i + 4], a5 += p[i + 5], a6 += p[i + 6], a7 += p[i + 7];
    }
    for (; i < n; i++) a0 += p[i];
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

/* Threads take 256 KiB chunks from a shared counter, as the mat-vec tiles
 * are taken, so both walk neighbouring memory. */
enum { READ_CHUNK_WORDS = 32768 };

static void read_worker(void *arg, int ith, int nth) {
    (void)nth;
    struct read_job *job = arg;
    uint64_t sum = 0;
    for (;;) {
        size_t c = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
        size_t start = c * READ_CHUNK_WORDS;
        if (start >= job->n) break;
        size_t n = job->n - start < READ_CHUNK_WORDS ? job->n - start : READ_CHUNK_WORDS;
#if defined(__x86_64__) && !defined(KVIK_NO_SIMD)
        if (cpu_features_get()->avx2) {
            sum += read_avx2(job->data + start, n);
            continue;
        }
#endif
        sum += read_scalar(job->data + start, n);
    }
    job->sums[ith & 63] = sum;
}

kvik_status bench_reader_init(struct bench_reader *r, size_t bytes, struct pool *pool,
                              struct kvik_err *err) {
    r->bytes = bytes & ~(size_t)63;
    r->data = mem_alloc_aligned(r->bytes);
    if (!r->data) return err_set(err, KVIK_ERR_NOMEM, "bandwidth buffer of %zu bytes", bytes);
    for (size_t i = 0; i < r->bytes / 8; i++) r->data[i] = i * 0x9E3779B97F4A7C15ull; /* no zero pages */
    bench_read_pass(r, pool); /* warm-up: settle clocks */
    return KVIK_OK;
}

void bench_reader_free(struct bench_reader *r) {
    mem_free(r->data);
    r->data = NULL;
}

double bench_read_pass(struct bench_reader *r, struct pool *pool) {
    return bench_read_memory(r->data, r->bytes, pool);
}

double bench_read_memory(const void *data, size_t bytes, struct pool *pool) {
    struct read_job job = {.data = data, .n = bytes / 8};
    int64_t t0 = clock_ns();
    pool_run(pool, read_worker, &job);
    return (double)(bytes & ~(size_t)7) / ((double)(clock_ns() - t0) * 1e-9) / 1e9;
}

double bench_read_bandwidth(struct bench_reader *r, struct pool *pool, const struct bench_params *p) {
    double v[64];
    int reps = p->reps < 64 ? p->reps : 64;
    for (int i = 0; i < reps; i++) v[i] = bench_read_pass(r, pool);
    return bench_median(v, reps);
}

/* The layout a model's matrices get at load where the table has one of its
 * own (model_load repacks every product matrix), so the products measured
 * are the ones models run; NULL where it has none (or on no memory: the
 * file's layout is then measured). The caller frees it. */
static void *repack_like_a_model(const struct tensor_kernels *k, struct tensor_matrix *m) {
    if (!k->repack[m->type] || !k->repack_size[m->type]) return NULL;
    void *panel = mem_alloc_aligned(k->repack_size[m->type](m->rows, m->cols));
    if (!panel) return NULL;
    k->repack[m->type](m, panel);
    m->panel = panel;
    return panel;
}

kvik_status bench_matvec(struct pool *pool, struct bench_reader *reader, const struct bench_params *p,
                         int type, struct bench_matvec_result *out, struct kvik_err *err) {
    const struct tensor_kernels *k = p->kernels ? p->kernels : tensor_kernels_best();
    int64_t cols = p->matvec_cols;
    size_t row_bytes = tensor_row_size(type, cols);
    if (!row_bytes || !k->vec_dot[type])
        return err_set(err, KVIK_ERR_UNSUPPORTED, "no %s mat-vec kernel", tensor_type_name(type));
    int64_t rows = (int64_t)(p->matvec_bytes / row_bytes);
    if (rows < 1) rows = 1;
    size_t wbytes = row_bytes * (size_t)rows;
    void *w = mem_alloc_aligned(wbytes), *panel = NULL;
    float *x = mem_alloc_aligned((size_t)cols * sizeof(float));
    float *y = mem_alloc_aligned((size_t)rows * sizeof(float));
    void *scratch = mem_alloc_aligned(tensor_matmul_scratch_size(type, cols, 1));
    kvik_status st = KVIK_ERR_NOMEM;
    if (!w || !x || !y || !scratch) {
        err_set(err, st, "mat-vec buffers of %zu bytes", wbytes);
        goto done;
    }
    st = tensor_fill_random(type, w, rows, cols, row_bytes, TENSOR_FILL_QUANTIZED, (uint64_t)type);
    if (st) {
        err_set(err, st, "filling %s weights", tensor_type_name(type));
        goto done;
    }
    for (int64_t i = 0; i < cols; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    struct tensor_matrix m = {.type = type, .rows = rows, .cols = cols, .row_bytes = row_bytes, .data = w};
    panel = repack_like_a_model(k, &m);
    tensor_matmul(pool, k, &m, x, cols, y, rows, 1, scratch); /* warm-up */
    double t[64], bw[64], ratio[64];
    int reps = p->reps < 64 ? p->reps : 64;
    for (int r = 0; r < reps; r++) {
        bw[r] = bench_read_memory(panel ? panel : w, wbytes, pool); /* a repacked matrix has the file's bytes */
        int64_t t0 = clock_ns();
        st = tensor_matmul(pool, k, &m, x, cols, y, rows, 1, scratch);
        t[r] = (double)(clock_ns() - t0) * 1e-9;
        if (st) {
            err_set(err, st, "%s mat-vec failed", tensor_type_name(type));
            goto done;
        }
        ratio[r] = (double)wbytes / t[r] / 1e9 / bw[r];
    }
    *out = (struct bench_matvec_result){.type = type, .rows = rows, .cols = cols, .bytes = (double)wbytes};
    out->seconds = bench_median(t, reps);
    out->gbs = out->bytes / out->seconds / 1e9;
    out->bw_gbs = bench_median(bw, reps);
    out->pct_bw = 100.0 * bench_median(ratio, reps);
done:
    mem_free(w), mem_free(x), mem_free(y), mem_free(scratch), mem_free(panel);
    return st;
}

kvik_status bench_matmul(struct pool *pool, const struct bench_params *p, int type,
                         struct bench_matmul_result *out, struct kvik_err *err) {
    const struct tensor_kernels *k = p->kernels ? p->kernels : tensor_kernels_best();
    int64_t rows = p->matmul_rows, cols = p->matmul_cols, ntok = p->matmul_tokens;
    size_t row_bytes = tensor_row_size(type, cols);
    if (!row_bytes || !k->vec_dot[type])
        return err_set(err, KVIK_ERR_UNSUPPORTED, "no %s mat-mat kernel", tensor_type_name(type));
    void *w = mem_alloc_aligned(row_bytes * (size_t)rows), *panel = NULL;
    float *x = mem_alloc_aligned((size_t)(cols * ntok) * sizeof(float));
    float *y = mem_alloc_aligned((size_t)(rows * ntok) * sizeof(float));
    void *scratch = mem_alloc_aligned(tensor_matmul_scratch_size(type, cols, ntok));
    kvik_status st = KVIK_ERR_NOMEM;
    if (!w || !x || !y || !scratch) {
        err_set(err, st, "mat-mat buffers");
        goto done;
    }
    st = tensor_fill_random(type, w, rows, cols, row_bytes, TENSOR_FILL_QUANTIZED, (uint64_t)type);
    if (st) {
        err_set(err, st, "filling %s weights", tensor_type_name(type));
        goto done;
    }
    for (int64_t i = 0; i < cols * ntok; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    struct tensor_matrix m = {.type = type, .rows = rows, .cols = cols, .row_bytes = row_bytes, .data = w};
    panel = repack_like_a_model(k, &m);
    tensor_matmul(pool, k, &m, x, cols, y, rows, ntok, scratch);
    double t[64];
    int reps = p->reps < 64 ? p->reps : 64;
    if (reps > 5) reps = 5; /* each repetition is long; five give a stable median */
    /* a repetition runs as many products as 512 tokens' worth, so that few
     * tokens (a decode step's shape) still time milliseconds, not microseconds */
    int64_t inner = ntok < 512 ? (512 + ntok - 1) / ntok : 1;
    for (int r = 0; r < reps; r++) {
        int64_t t0 = clock_ns();
        for (int64_t i = 0; i < inner && !st; i++) st = tensor_matmul(pool, k, &m, x, cols, y, rows, ntok, scratch);
        t[r] = (double)(clock_ns() - t0) * 1e-9 / (double)inner;
        if (st) {
            err_set(err, st, "%s mat-mat failed", tensor_type_name(type));
            goto done;
        }
    }
    *out = (struct bench_matmul_result){.type = type, .rows = rows, .cols = cols, .tokens = ntok};
    out->seconds = bench_median(t, reps);
    out->gops = 2.0 * (double)rows * (double)cols * (double)ntok / out->seconds / 1e9;
done:
    mem_free(w), mem_free(x), mem_free(y), mem_free(scratch), mem_free(panel);
    return st;
}

/* Nominal clock from /proc/cpuinfo ("cpu MHz"), in GHz; 0 if unknown. */
static double cpu_ghz(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[256];
    double mhz = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "cpu MHz", 7)) {
            const char *c = strchr(line, ':');
            if (c) mhz = atof(c + 1);
            break;
        }
    }
    fclose(f);
    return mhz / 1000.0;
}

double bench_int8_peak_gops(const struct tensor_kernels *k, int threads, const char **basis) {
    double ghz = cpu_ghz();
    /* int8 multiply-adds per cycle per core of the instructions the kernels
     * use: two 256-bit vpdpbusd (2 x 32) with VNNI; two 256-bit vpmaddubsw
     * (2 x 32) with AVX2, which then need a vpmaddwd as well. */
    double macs = 0;
    switch (k->isa) {
    case TENSOR_ISA_AMX:
        macs = 1024;
        *basis = "one 16x16x64 tdpbssd per 16 cycles per core at the nominal clock";
        break;
    case TENSOR_ISA_AVX512:
        macs = 64;
        *basis = "2 x 256-bit vpdpbusd per cycle per core at the nominal clock";
        break;
    case TENSOR_ISA_AVX2:
        macs = 64;
        *basis = "2 x 256-bit vpmaddubsw per cycle per core at the nominal clock";
        break;
    default: /* the compiler may vectorise the scalar kernels: no honest peak */
        *basis = "none stated for the scalar kernels";
        return 0;
    }
    return ghz * macs * 2.0 * threads;
}

static bool bandwidth_path(char *buf, size_t len, bool create_dir) {
    const char *dir = getenv("KVIK_CACHE");
    char base[3072];
    if (dir && *dir) snprintf(base, sizeof base, "%s", dir);
    else if (getenv("HOME")) snprintf(base, sizeof base, "%s/.cache/kvik", getenv("HOME"));
    else return false;
    if (create_dir) {
        char parent[3072];
        snprintf(parent, sizeof parent, "%s", base);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) {
            *slash = 0;
            mkdir(parent, 0755);
        }
        mkdir(base, 0755);
    }
    return snprintf(buf, len, "%s/bandwidth", base) < (int)len;
}

void bench_bandwidth_record(double gbs, int threads) {
    char path[4096], tmp[4200];
    if (!(gbs > 0) || !bandwidth_path(path, sizeof path, true)) return;
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "%.3f %d %lld\n", gbs, threads, (long long)time(NULL));
    if (fclose(f) == 0) rename(tmp, path);
    else remove(tmp);
}

double bench_bandwidth_recall(int threads, int64_t *when) {
    char path[4096];
    if (when) *when = 0;
    if (!bandwidth_path(path, sizeof path, false)) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    double gbs = 0;
    int t = 0;
    long long at = 0;
    bool ok = fscanf(f, "%lf %d %lld", &gbs, &t, &at) == 3 && t == threads && gbs > 0 && gbs < 1e5;
    fclose(f);
    if (when) *when = ok ? at : 0;
    return ok ? gbs : 0;
}
