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
    const struct tensor_kernels *kernels;
};

void bench_default_params(struct bench_params *p);

/* Median read bandwidth in GB/s (1e9 bytes/s) over reps passes of
 * p->bandwidth_bytes, read by p->threads threads. */
kvik_status bench_read_bandwidth(struct pool *pool, const struct bench_params *p, double *gbs,
                                 struct kvik_err *err);

struct bench_matvec_result {
    int type;
    int64_t rows, cols;
    double bytes;      /* weight bytes read per product */
    double seconds;    /* median time of one product */
    double gbs;        /* bytes / seconds / 1e9 */
};

/* One weight type: a matrix of about p->matvec_bytes times one vector. */
kvik_status bench_matvec(struct pool *pool, const struct bench_params *p, int type,
                         struct bench_matvec_result *out, struct kvik_err *err);

struct bench_matmul_result {
    int type;
    int64_t rows, cols, tokens;
    double seconds; /* median, including activation quantization */
    double gops;    /* 2 * rows * cols * tokens / seconds / 1e9 */
};

kvik_status bench_matmul(struct pool *pool, const struct bench_params *p, int type,
                         struct bench_matmul_result *out, struct kvik_err *err);

/* Theoretical int8 multiply-add peak of the kernels' ISA on this machine in
 * GOP/s (2 ops per multiply-add), from the nominal clock; 0 if unknown.
 * `basis` describes the assumption in words. */
double bench_int8_peak_gops(const struct tensor_kernels *k, int threads, const char **basis);

#endif /* KVIK_TOOLS_BENCH_H */
