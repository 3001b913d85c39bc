/*
 * bench.h — kernel benchmarks: the machine's read bandwidth and the
 * throughput of mat-vec and mat-mat products per weight type. Each figure is
 * the median of several repetitions (machines are shared and noisy).
 */
#ifndef KVIK_TOOLS_BENCH_H
#define KVIK_TOOLS_BENCH_H

#include "base/base.h"
#include "tensor/tensor.h"

struct bench_params {
    int threads;
    int reps;               /* repetitions per measurement; the median is kept */
    size_t bandwidth_bytes; /* buffer for the bandwidth test */
    size_t matvec_bytes;    /* target size of each mat-vec weight matrix */
    int64_t matvec_cols;
    int64_t matmul_rows, matmul_cols, matmul_tokens;
    int attn_ctx; /* positions of each sequence in the attention benchmark */
    const struct tensor_kernels *kernels;
};

void bench_default_params(struct bench_params *p);

/* The median of v[0..n) (sorts v). */
double bench_median(double *v, int n);

/* A buffer for read-bandwidth passes, several times the last-level cache. */
struct bench_reader {
    uint64_t *data;
    size_t bytes;
};

kvik_status bench_reader_init(struct bench_reader *r, size_t bytes, struct pool *pool,
                              struct kvik_err *err);
void bench_reader_free(struct bench_reader *r);

/* One timed pass over the buffer by every pool thread; returns GB/s
 * (1e9 bytes/s). */
double bench_read_pass(struct bench_reader *r, struct pool *pool);

/* One timed pass over any memory (8-byte aligned), by every pool thread. */
double bench_read_memory(const void *data, size_t bytes, struct pool *pool);

/* Median of p->reps passes. */
double bench_read_bandwidth(struct bench_reader *r, struct pool *pool, const struct bench_params *p);

struct bench_matvec_result {
    int type;
    int64_t rows, cols;
    double bytes;      /* weight bytes read per product */
    double seconds;    /* median time of one product */
    double gbs;        /* bytes / seconds / 1e9 */
    double bw_gbs;     /* median rate of plain read passes over the same matrix */
    double pct_bw;     /* median over repetitions of product GB/s / adjacent pass GB/s */
};

/* One weight type: a matrix of about p->matvec_bytes times one vector.
 * Each repetition first streams the same matrix with the plain read loop,
 * then runs the product: the ratio compares like with like (same memory, same
 * moment) on a machine whose bandwidth drifts. */
kvik_status bench_matvec(struct pool *pool, struct bench_reader *reader, const struct bench_params *p,
                         int type, struct bench_matvec_result *out, struct kvik_err *err);

struct bench_matmul_result {
    int type;
    int64_t rows, cols, tokens;
    double seconds; /* median, including activation quantization */
    double gops;    /* 2 * rows * cols * tokens / seconds / 1e9 */
};

kvik_status bench_matmul(struct pool *pool, const struct bench_params *p, int type,
                         struct bench_matmul_result *out, struct kvik_err *err);

struct bench_attn_result {
    int type; /* the cache's row type: F32, F16 or Q8_0 */
    int head_dim, group, ctx;
    double cache_ns;   /* per position and K/V head on each thread, the rows in L2 */
    double memory_ns;  /* the same, every sequence read from memory once */
    double memory_gbs; /* K/V bytes from memory per second, all threads */
};

/* The kernel table's attention on a decode step's shape (bench_attn.c):
 * head 64, 3 query heads per K/V head, 3 K/V heads per cached row,
 * p->attn_ctx positions in 16-position blocks at random places, the pool
 * p->bandwidth_bytes / 2. */
kvik_status bench_attn(struct pool *pool, const struct bench_params *p, int type, struct bench_attn_result *out,
                       struct kvik_err *err);

/* Theoretical int8 multiply-add peak of the kernels' ISA on this machine in
 * GOP/s (2 ops per multiply-add), from the nominal clock; 0 if unknown.
 * `basis` describes the assumption in words. */
double bench_int8_peak_gops(const struct tensor_kernels *k, int threads, const char **basis);

/*
 * The machine's read bandwidth as last measured, kept so that `kvik run`
 * can state decode speed as a fraction of it without a second of
 * measuring: $KVIK_CACHE (default ~/.cache/kvik)/bandwidth holds one line
 * "GB/S THREADS UNIX-TIME". bench_bandwidth_record writes it (the kernel
 * and offline benchmarks call it); bench_bandwidth_recall reads the value
 * recorded for `threads` threads, 0 if none.
 */
void bench_bandwidth_record(double gbs, int threads);
double bench_bandwidth_recall(int threads, int64_t *when);

#endif /* KVIK_TOOLS_BENCH_H */
